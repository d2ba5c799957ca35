//! Image formats: JPEG / WebP / 16-bit PNG / grey inputs decode to what the upscaler
//! takes, and 16-bit images go through the network at 16-bit precision.

mod common;

use examples_sr::image_io::{self, Format, Image, Pixels};
use examples_sr::upscale::Options;

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("realcugan-formats-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn encodings_round_trip() {
    let dir = scratch("roundtrip");
    let rgba = common::synthetic(21, 13, 4, 9);
    for (name, fmt, want_channels, lossless) in
        [("a.png", Format::Png, 4, true), ("a.webp", Format::Webp, 4, true), ("a.jpg", Format::Jpeg, 3, false)]
    {
        let path = dir.join(name);
        image_io::save(&rgba, &path, fmt).expect("save");
        let back = image_io::load(&path).expect("load");
        assert_eq!((back.width, back.height, back.channels, back.bit_depth()), (21, 13, want_channels, 8), "{name}");
        if lossless {
            assert_eq!(back, rgba, "{name}");
        }
    }
    // 16-bit PNG keeps 16 bits.
    let deep = Image::from_u16(5, 4, 3, (0..60).map(|i| i * 1000 + 7).collect()).expect("image");
    image_io::save(&deep, &dir.join("d.png"), Format::Png).expect("save");
    assert_eq!(image_io::load(&dir.join("d.png")).expect("load"), deep);
    // Grey PNG becomes RGB.
    let grey = image::GrayImage::from_fn(6, 3, |x, y| image::Luma([(x * 40 + y) as u8]));
    grey.save(dir.join("g.png")).expect("save grey");
    let g = image_io::load(&dir.join("g.png")).expect("load grey");
    assert_eq!((g.channels, g.bit_depth()), (3, 8));
    assert_eq!(g.sample(3 * 4 + 1), 160.0);
    // Garbage is an error naming the file.
    std::fs::write(dir.join("x.webp"), b"RIFF....WEBPVP8 junk").expect("write");
    let e = image_io::load(&dir.join("x.webp")).expect_err("garbage").to_string();
    assert!(e.contains("x.webp"), "{e}");
}

#[test]
fn sixteen_bit_input_gives_sixteen_bit_output() {
    let Some(models) = common::models_or_skip("sixteen_bit_input_gives_sixteen_bit_output") else { return };
    let up = common::load(&models, "models-se/up2x-no-denoise");
    let img8 = common::synthetic(24, 20, 3, 5);
    let Pixels::U8(v) = &img8.pixels else { unreachable!("synthetic images are 8-bit") };
    // The same picture at 16 bits (x·257 maps 0..255 onto 0..65535 exactly).
    let img16 = Image::from_u16(24, 20, 3, v.iter().map(|&x| x as u16 * 257).collect()).expect("image");
    let opts = Options::whole();
    let plan = up.plan(24, 20, &opts).expect("plan");
    let out8 = up.upscale(&img8, &plan, &mut |_| {}).expect("8-bit");
    let out16 = up.upscale(&img16, &plan, &mut |_| {}).expect("16-bit");
    assert_eq!(out16.bit_depth(), 16);
    // Same network values, quantised at 16 bits: within one 8-bit level after rounding
    // down to 8 bits, and using the extra precision (values that are not multiples of 257).
    let (worst, _) = common::max_diff(&out16.to_u8(), &out8);
    assert!(worst <= 1, "16-bit output rounded to 8 bits is {worst} levels off");
    let Pixels::U16(s) = &out16.pixels else { unreachable!("checked above") };
    assert!(s.iter().filter(|&&x| x % 257 != 0).count() > s.len() / 2);
}
