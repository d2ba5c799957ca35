//! Issue 13, item 3: seeded mutation fuzzing of Real-CUGAN's inputs: the ncnn `.param`
//! text and `.bin` weights (a synthetic model with every supported layer type and weight
//! tag; the real `.param` files too when REALCUGAN_MODELS or models/ has them) and the
//! image decoders' error paths (PNG, JPEG, WebP). At least 20,000 mutated inputs per
//! format, zero panics, and no single allocation larger than the input justifies. One
//! test in its own binary, so the counting allocator sees only it.

use examples_sr::ncnn::NcnnModel;
use examples_sr::ncnn::bin::{TAG_FP16, TAG_FP32, TAG_FP32_RAW};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use test_support::CountingAlloc;
use test_support::fuzz::{FuzzReport, Rng, fuzz, replace_number};

#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::new();

const PER_FORMAT: usize = 20_000;
/// A safety stop per format; the counts are asserted, so hitting it fails the test.
const CAP: Duration = Duration::from_secs(25);

const PARAM: &str = "7767517
11 13
Input            in0     0 1 in0
Convolution      conv0   1 1 in0 c0 0=3 1=3 5=1 6=81 9=2 -23310=1,1.000000e-01
Split            split0  1 3 c0 s0 s1 s2
Pooling          gap     1 1 s0 g0 0=1 4=1
InnerProduct     fc      1 1 g0 f0 0=3 1=1 2=9 9=4
BinaryOp         mul     2 1 s1 f0 m0 0=2
Crop             crop    1 1 s2 k0 -23309=2,1,1 -23310=2,-1,-1 -23311=2,-2,-1
Deconvolution    up      1 1 m0 d0 0=3 1=4 3=2 4=3 5=1 6=144 9=2 -23310=1,2.000000e-01
BinaryOp         add     2 1 d0 k0 a0
Convolution      conv1   1 1 a0 c1 0=4 1=1 6=12
PixelShuffle     ps      1 1 c1 out0 0=2
";

fn tagged(bin: &mut Vec<u8>, tag: u32, values: &[f32]) {
    bin.extend_from_slice(&tag.to_le_bytes());
    let mut bytes: Vec<u8> = if tag == TAG_FP16 {
        values.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect()
    } else {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    };
    bytes.resize(bytes.len().next_multiple_of(4), 0);
    bin.extend_from_slice(&bytes);
}

fn raw(bin: &mut Vec<u8>, values: &[f32]) {
    bin.extend(values.iter().flat_map(|v| v.to_le_bytes()));
}

fn synthetic_bin() -> Vec<u8> {
    let mut b = Vec::new();
    tagged(&mut b, TAG_FP16, &(0..81).map(|i| (i as f32 - 40.0) / 8.0).collect::<Vec<_>>());
    raw(&mut b, &[0.5, -0.25, 1.0]);
    tagged(&mut b, TAG_FP32, &(0..9).map(|i| i as f32 * 0.1).collect::<Vec<_>>());
    raw(&mut b, &[1.0, 2.0, 3.0]);
    tagged(&mut b, TAG_FP32_RAW, &(0..144).map(|i| i as f32).collect::<Vec<_>>());
    raw(&mut b, &[-1.0, 0.0, 1.0]);
    tagged(&mut b, TAG_FP16, &(1..=12).map(|i| i as f32).collect::<Vec<_>>());
    b
}

/// Line-level edits of a `.param`: a line duplicated (duplicate layer and blob names),
/// dropped or swapped, a key repeated, or a number made huge.
fn param_aware(rng: &mut Rng, data: &[u8]) -> Option<Vec<u8>> {
    let text = String::from_utf8_lossy(data);
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        return None;
    }
    let i = rng.below(lines.len());
    match rng.below(5) {
        0 => {
            let l = lines[i].clone();
            lines.insert(rng.below(lines.len() + 1), l);
        }
        1 => {
            lines.remove(i);
        }
        2 => {
            let j = rng.below(lines.len());
            lines.swap(i, j);
        }
        3 => {
            if let Some(kv) = lines[i].split_whitespace().find(|t| t.contains('=')).map(str::to_string) {
                lines[i].push(' ');
                lines[i].push_str(&kv);
            }
        }
        _ => {
            let mut v = lines[i].clone().into_bytes();
            replace_number(rng, &mut v);
            lines[i] = String::from_utf8_lossy(&v).into_owned();
        }
    }
    Some((lines.join("\n") + "\n").into_bytes())
}

/// `.bin` edits at a weight record: a tag replaced by another (or garbage), or the file cut
/// at a record boundary.
fn bin_aware(rng: &mut Rng, data: &[u8]) -> Option<Vec<u8>> {
    if data.len() < 8 {
        return None;
    }
    let mut v = data.to_vec();
    let at = rng.below(v.len() / 4) * 4;
    match rng.below(2) {
        0 => {
            let tag = *rng.pick(&[TAG_FP16, TAG_FP32, TAG_FP32_RAW, 0x000D_4B38, 0xdead_beef, u32::MAX]);
            v[at..at + 4].copy_from_slice(&tag.to_le_bytes());
        }
        _ => v.truncate(at),
    }
    Some(v)
}

fn models_dir() -> PathBuf {
    std::env::var_os("REALCUGAN_MODELS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models"))
}

/// Up to four real `.param` files, if present.
fn real_params() -> Vec<Vec<u8>> {
    let Ok(dirs) = std::fs::read_dir(models_dir()) else { return Vec::new() };
    let mut files: Vec<PathBuf> = dirs
        .flatten()
        .flat_map(|d| std::fs::read_dir(d.path()).into_iter().flatten().flatten().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "param"))
        .collect();
    files.sort();
    files.into_iter().take(4).filter_map(|p| std::fs::read(p).ok()).collect()
}

/// Small valid images of each decoder, from the `image` crate's encoders.
fn image_seeds() -> Vec<Vec<u8>> {
    use image::{ImageFormat, RgbImage, RgbaImage};
    let rgb = RgbImage::from_fn(13, 7, |x, y| image::Rgb([(x * 19) as u8, (y * 31) as u8, (x ^ y) as u8]));
    let rgba = RgbaImage::from_fn(6, 9, |x, y| image::Rgba([(x * 40) as u8, (y * 25) as u8, 7, ((x + y) * 20) as u8]));
    let mut out = Vec::new();
    for (img, fmt) in [
        (image::DynamicImage::ImageRgb8(rgb.clone()), ImageFormat::Png),
        (image::DynamicImage::ImageRgba8(rgba), ImageFormat::Png),
        (image::DynamicImage::ImageRgb8(rgb.clone()), ImageFormat::Jpeg),
        (image::DynamicImage::ImageRgb8(rgb), ImageFormat::WebP),
    ] {
        let mut buf = std::io::Cursor::new(Vec::new());
        img.write_to(&mut buf, fmt).unwrap();
        out.push(buf.into_inner());
    }
    out
}

fn check(report: &FuzzReport) {
    println!("{report}");
    for (i, msg) in report.panics.iter().take(5) {
        println!("  panic at mutation {i}: {msg}");
    }
    for (i, len, asked) in report.over_allocations.iter().take(5) {
        println!("  mutation {i}: a {len}-byte input asked for {asked} bytes at once");
    }
}

#[test]
fn loaders_survive_mutated_inputs() {
    let started = Instant::now();
    let bin = synthetic_bin();
    NcnnModel::from_bytes(PARAM.as_bytes(), &bin).expect("the synthetic model loads");
    // Weights are at most twice the .bin (f16 widened to f32); the rest is small.
    let loader_bound = |len: usize| 64 * 1024 + 8 * len;
    let mut reports = Vec::new();

    let seeds = vec![PARAM.as_bytes().to_vec()];
    reports.push(fuzz(
        "ncnn .param (synthetic model, with its .bin)",
        &HEAP,
        0x5eed_0001,
        &seeds,
        PER_FORMAT,
        CAP,
        &param_aware,
        &|len| loader_bound(len + bin.len()),
        &|p| NcnnModel::from_bytes(p, &bin).map(drop).map_err(|e| e.to_string()),
    ));

    let real = real_params();
    if real.is_empty() {
        println!("no real .param files under {} (skipped that seed set)", models_dir().display());
    } else {
        reports.push(fuzz(
            "ncnn .param (real Real-CUGAN files, text parse)",
            &HEAP,
            0x5eed_0002,
            &real,
            PER_FORMAT / 4,
            CAP,
            &param_aware,
            &loader_bound,
            &|p| {
                let text = std::str::from_utf8(p).map_err(|e| e.to_string())?;
                examples_sr::ncnn::param::parse(text).map(drop).map_err(|e| e.to_string())
            },
        ));
    }

    reports.push(fuzz(
        "ncnn .bin (synthetic model)",
        &HEAP,
        0x5eed_0003,
        std::slice::from_ref(&bin),
        PER_FORMAT,
        CAP,
        &bin_aware,
        &loader_bound,
        &|b| NcnnModel::from_bytes(PARAM.as_bytes(), b).map(drop).map_err(|e| e.to_string()),
    ));

    // The decoders of image_io::load, on the bytes in memory (a file written per input
    // made this a test of the disk: 2.4 ms per input on the development machine).
    let path = std::path::Path::new("fuzz-input.img");
    // A decoded image may legitimately be ~1000x its compressed size (deflate's limit), and
    // any image up to 64 MiB decoded is allowed: examples_sr::decode_limits.
    reports.push(fuzz(
        "images (PNG, JPEG, WebP through image_io::decode, load's decoder)",
        &HEAP,
        0x5eed_0004,
        &image_seeds(),
        PER_FORMAT,
        CAP,
        &|_, _| None,
        &|len| examples_sr::decode_limits::max_decode_bytes(len as u64) as usize,
        &|bytes| examples_sr::image_io::decode(bytes, path).map(drop).map_err(|e| e.to_string()),
    ));

    println!("all formats in {:.1} s", started.elapsed().as_secs_f64());
    for r in &reports {
        check(r);
    }
    for r in &reports {
        let want = if r.format.contains("real") { PER_FORMAT / 4 } else { PER_FORMAT };
        assert_eq!(r.tried, want, "{}: stopped at the time cap", r.format);
        assert!(r.panics.is_empty(), "{r}");
        assert!(r.over_allocations.is_empty(), "{r}");
        assert!(r.rejected > r.tried / 4, "{}: mutations mostly accepted, so they test little", r);
    }
}
