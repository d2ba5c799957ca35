mod common;
use examples_sr::{bicubic, image_io};
#[test]
fn alpha_diff() {
    for (inp, out, s) in [
        ("rgba64", "se_up2x-denoise1x__rgba64", 2),
        ("rgba64", "pro_up3x-no-denoise__rgba64", 3),
        ("rgba64", "se_up4x-no-denoise__rgba64", 4),
    ] {
        let img = image_io::load(&common::fixtures_dir().join(format!("inputs/{inp}.png"))).unwrap();
        let want = image_io::load(&common::fixtures_dir().join(format!("expected/{out}.png"))).unwrap();
        let a: Vec<f32> = (0..img.width * img.height).map(|i| img.sample(i * 4 + 3)).collect();
        let up = bicubic::upscale_plane(&a, img.width, img.height, s);
        let mut n = 0;
        let mut worst = 0.0f32;
        for (i, v) in up.iter().enumerate() {
            let q = v.trunc().clamp(0.0, 255.0);
            let w = want.sample(i * 4 + 3);
            if q != w {
                n += 1;
                worst = worst.max((q - w).abs());
                if n < 5 {
                    println!("{out} i={i} ours {v} want {w}");
                }
            }
        }
        println!("{out}: alpha differs at {n} of {} (max {worst})", up.len());
    }
}
