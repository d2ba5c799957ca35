//! `realcugan`'s realcugan-ncnn-vulkan-compatible options (-t -m -g -j -x -c -v, -s 1), the
//! exit-code rule, grey images, and what the summary line says.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use examples_sr::image_io::{self, Format, Image, Pixels};
use examples_sr::upscale::Options;

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_realcugan")).args(args).output().expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("realcugan-opts-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn rgb32() -> PathBuf {
    common::fixtures_dir().join("inputs").join("rgb32.png")
}

#[test]
fn usage_errors_exit_2_and_failed_runs_exit_1() {
    let dir = scratch("codes");
    let out = dir.join("o.png");
    let (i, o) = (rgb32(), out.clone());
    let base = ["-i", s(&i), "-o", s(&o), "-m", "/nonexistent"];
    for (extra, want) in [
        (&["-c", "7"][..], "syncgap mode must be 0, 1, 2 or 3"),
        (&["-g", "0,1"], "several GPUs"),
        (&["-j", "2"], "load:proc:save"),
        (&["-t", "0,0"], "several GPUs"),
        (&["--device", "potato"], "expected auto, cpu, rocm or rocm:N"),
        (&["--device", "cpu", "-g", "0"], "disagree"),
        (&["-s", "1"], "no 1x Real-CUGAN model"),
        (&["--bogus"], "--bogus"),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let r = run(&args);
        assert_eq!(r.status.code(), Some(2), "{extra:?}: {}", stderr(&r));
        assert!(stderr(&r).contains(want), "{extra:?}: {}", stderr(&r));
    }
    // A run that fails: a missing input, missing models (exit 1).
    let r = run(&["-i", "/nonexistent.png", "-o", s(&o)]);
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
    let r = run(&["-i", s(&i), "-o", s(&o), "-m", s(&dir), "--device", "cpu"]);
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
    assert!(stderr(&r).contains("fetch-models.sh"), "{}", stderr(&r));
    assert!(!out.exists());
}

#[test]
fn device_rocm_without_rocm_is_a_failed_run() {
    if rocm_vision::Device::rocm(0).is_ok() {
        common::skipped("a ROCm device is present, so --device rocm does not fail");
        return;
    }
    let dir = scratch("rocm");
    let r = run(&["-i", s(&rgb32()), "-o", s(&dir.join("o.png")), "--device", "rocm", "-m", "/nonexistent"]);
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
    assert!(stderr(&r).contains("ROCm"), "{}", stderr(&r));
    let r = run(&["-i", s(&rgb32()), "-o", s(&dir.join("o.png")), "-g", "0", "-m", "/nonexistent"]);
    assert_eq!(r.status.code(), Some(1), "{}", stderr(&r));
}

#[test]
fn help_names_both_devices_and_the_ncnn_options() {
    let r = run(&["--help"]);
    let help = String::from_utf8_lossy(&r.stdout);
    let first = help.lines().next().unwrap_or_default();
    assert!(first.contains("ROCm GPU or the CPU"), "{first}");
    for needle in ["-t, --tile", "-m, --model-dir", "-g, --gpu-id", "-j, --threads", "-x, --tta", "-c, --syncgap"] {
        assert!(help.contains(needle), "{needle}: {help}");
    }
    assert!(help.contains("Exit status"), "{help}");
}

#[test]
fn ncnn_short_options_give_the_library_s_output() {
    let Some(models) = common::models_or_skip("ncnn_short_options_give_the_library_s_output") else { return };
    let dir = scratch("ncnn");
    let out = dir.join("o.png");
    let se = models.join("models-se");
    // realcugan-ncnn-vulkan's spelling: -m names the models-se folder itself.
    let r = run(&[
        "-i",
        s(&rgb32()),
        "-o",
        s(&out),
        "-n",
        "0",
        "-s",
        "2",
        "-t",
        "0",
        "-m",
        s(&se),
        "-g",
        "-1",
        "-j",
        "1:2:2",
        "-c",
        "2",
        "-v",
    ]);
    let e = stderr(&r);
    assert!(r.status.success(), "{e}");
    // -v: the model file, the threads, what -c maps to.
    assert!(e.contains("up2x-no-denoise.param") && e.contains("2 CPU thread(s)"), "{e}");
    assert!(e.contains("SE means are always synchronised exactly"), "{e}");
    let up = common::load(&models, "models-se/up2x-no-denoise");
    let img = image_io::load(&rgb32()).expect("input");
    let want = up.upscale(&img, &up.plan(32, 32, &Options::whole()).expect("plan"), &mut |_| {}).expect("upscale");
    assert_eq!(common::max_diff(&image_io::load(&out).expect("output"), &want), (0, 0));
    // -m models-pro picks the pro family; --model naming another family is refused.
    let r = run(&["-i", s(&rgb32()), "-o", s(&out), "-m", s(&models.join("models-pro")), "--model", "se"]);
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
}

/// The image turned by orientation `k` of realcugan-ncnn-vulkan's TTA (1..4 flips, 4..8
/// transposed), or turned back (`inverse`, from the turned image).
fn orient(img: &Image, k: usize, inverse: bool) -> Image {
    let c = img.channels;
    let Pixels::U8(v) = &img.pixels else { panic!("8-bit") };
    // (h, w): the unturned image's size; (nh, nw): the turned one's.
    let (h, w) = if inverse && k >= 4 { (img.width, img.height) } else { (img.height, img.width) };
    let (nh, nw) = if k >= 4 { (w, h) } else { (h, w) };
    let mut out = vec![0u8; v.len()];
    for i in 0..h {
        for j in 0..w {
            let (a, b) = match k {
                0 => (i, j),
                1 => (h - 1 - i, j),
                2 => (i, w - 1 - j),
                3 => (h - 1 - i, w - 1 - j),
                4 => (j, i),
                5 => (w - 1 - j, i),
                6 => (j, h - 1 - i),
                _ => (w - 1 - j, h - 1 - i),
            };
            for ch in 0..c {
                if inverse {
                    out[(i * w + j) * c + ch] = v[(a * nw + b) * c + ch];
                } else {
                    out[(a * nw + b) * c + ch] = v[(i * w + j) * c + ch];
                }
            }
        }
    }
    let (ow, oh) = if inverse { (w, h) } else { (nw, nh) };
    Image::from_u8(ow, oh, c, out).expect("image")
}

#[test]
fn tta_averages_the_eight_orientations() {
    let Some(models) = common::models_or_skip("tta_averages_the_eight_orientations") else { return };
    let dir = scratch("tta");
    // Not square, so the transposed orientations are really transposed.
    let img = common::synthetic(24, 16, 3, 9);
    let input = dir.join("in.png");
    image_io::save(&img, &input, Format::Png).expect("save");
    let out = dir.join("tta.png");
    let r = run(&["-i", s(&input), "-o", s(&out), "-n", "0", "-x", "-t", "8", "-m", s(&models), "-g", "-1"]);
    assert!(r.status.success(), "{}", stderr(&r));
    assert!(stderr(&r).contains("with TTA (x8)"), "{}", stderr(&r));
    let got = image_io::load(&out).expect("output");
    // Independently: each orientation upscaled by the library, turned back, averaged.
    // Averaging quantised images instead of the network's values moves a sample by at
    // most one level (sizes are multiples of 2, so padding commutes with the turns).
    let up = common::load(&models, "models-se/up2x-no-denoise");
    let mut sum = vec![0u32; 48 * 32 * 3];
    for k in 0..8 {
        let turned = orient(&img, k, false);
        let plan = up.plan(turned.width, turned.height, &Options::whole()).expect("plan");
        let o = orient(&up.upscale(&turned, &plan, &mut |_| {}).expect("upscale"), k, true);
        for (acc, v) in sum.iter_mut().zip(common::samples(&o)) {
            *acc += v;
        }
    }
    let mean: Vec<u8> = sum.iter().map(|&v| (v as f32 / 8.0).round() as u8).collect();
    let want = Image::from_u8(48, 32, 3, mean).expect("image");
    let (worst, _) = common::max_diff(&got, &want);
    assert!(worst <= 1, "TTA output differs from the mean of the 8 orientations by {worst} levels");
    let plain = up.upscale(&img, &up.plan(24, 16, &Options::whole()).expect("plan"), &mut |_| {}).expect("upscale");
    assert_ne!(common::max_diff(&got, &plain).1, 0, "TTA changed nothing");
}

#[test]
fn grey_in_grey_out() {
    let Some(models) = common::models_or_skip("grey_in_grey_out") else { return };
    let dir = scratch("grey");
    let (inp, out) = (dir.join("in"), dir.join("out"));
    std::fs::create_dir_all(&inp).expect("dir");
    let rgba = common::synthetic(20, 14, 4, 5);
    let Pixels::U8(v) = &rgba.pixels else { panic!("8-bit") };
    let l: Vec<u8> = v.chunks(4).map(|p| p[0] / 2 + p[2] / 2).collect();
    let la: Vec<u8> = v.chunks(4).flat_map(|p| [p[0] / 2 + p[2] / 2, p[3]]).collect();
    image::GrayImage::from_raw(20, 14, l).expect("L8").save(inp.join("l.png")).expect("save");
    image::GrayAlphaImage::from_raw(20, 14, la).expect("LA8").save(inp.join("la.png")).expect("save");
    let r = run(&["-i", s(&inp), "-o", s(&out), "-n", "0", "-m", s(&models), "-g", "-1"]);
    let e = stderr(&r);
    assert!(r.status.success(), "{e}");
    assert!(e.contains("8-bit grey)") && e.contains("8-bit grey+alpha)"), "{e}");
    let up = common::load(&models, "models-se/up2x-no-denoise");
    for (name, color) in [("l.png", image::ColorType::L8), ("la.png", image::ColorType::La8)] {
        let got = image::open(out.join(name)).expect("output");
        assert_eq!(got.color(), color, "{name}");
        assert_eq!((got.width(), got.height()), (40, 28));
        // The model ran on the grey replicated to RGB; the output is the luma of its result.
        let input = image_io::load(&inp.join(name)).expect("input");
        assert!(input.grey);
        let rgb = up.upscale(&input, &up.plan(20, 14, &Options::whole()).expect("plan"), &mut |_| {}).expect("up");
        let as_rgb = Image { grey: false, ..rgb.clone() };
        let tmp = dir.join(format!("rgb-{name}"));
        image_io::save(&as_rgb, &tmp, Format::Png).expect("save");
        let luma = if name == "l.png" {
            image::open(&tmp).expect("rgb").into_luma8().into_raw()
        } else {
            image::open(&tmp).expect("rgb").into_luma_alpha8().into_raw()
        };
        assert_eq!(got.as_bytes(), &luma[..], "{name}");
    }
}

#[test]
fn the_summary_explains_the_tile_and_counts_passes_as_the_bar_does() {
    let Some(models) = common::models_or_skip("the_summary_explains_the_tile") else { return };
    let dir = scratch("summary");
    let out = dir.join("o.png");
    let r = run(&["-i", s(&rgb32()), "-o", s(&out), "-n", "0", "-t", "20", "-m", s(&models), "-g", "-1"]);
    let e = stderr(&r);
    assert!(r.status.success(), "{e}");
    assert!(
        e.contains("tile 20 -> 2x2 tile(s) of at most 16x16: the image, rounded up to 32x32 (a multiple of 2), split into equal tiles no larger than 16 (origins and sizes on multiples of 8)"),
        "{e}"
    );
    // The bar says "pass k/5": 4 SE blocks, then the output.
    assert!(e.contains("5 passes (4 for the SE means)"), "{e}");
}
