//! Writes `examples-sr/assets/sample.png`, the README's sample image: a small (128x96)
//! deterministic drawing with flat areas, hard and soft edges, thin lines and fine
//! stripes, the features super-resolution has to handle.
//!
//! `cargo run -p examples-sr --example make_sample` (rerunning gives identical bytes).

use std::path::Path;

use examples_sr::image_io::{self, Format, Image};

const W: usize = 128;
const H: usize = 96;

fn mix(a: [f32; 3], b: [f32; 3], t: f32) -> [f32; 3] {
    [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t, a[2] + (b[2] - a[2]) * t]
}

/// Coverage of a pixel by a shape, from 4x4 supersampling: anti-aliased edges.
fn coverage(x: usize, y: usize, inside: impl Fn(f32, f32) -> bool) -> f32 {
    let mut n = 0;
    for sy in 0..4 {
        for sx in 0..4 {
            if inside(x as f32 + (sx as f32 + 0.5) / 4.0, y as f32 + (sy as f32 + 0.5) / 4.0) {
                n += 1;
            }
        }
    }
    n as f32 / 16.0
}

fn pixel(x: usize, y: usize) -> [f32; 3] {
    let fy = y as f32 / H as f32;
    // Sky: vertical gradient.
    let mut c = mix([70.0, 130.0, 220.0], [235.0, 200.0, 160.0], fy * 1.4);
    // Sun: soft-edged disc.
    let d = ((x as f32 - 96.0).powi(2) + (y as f32 - 22.0).powi(2)).sqrt();
    c = mix(c, [255.0, 236.0, 120.0], ((14.0 - d) / 3.0).clamp(0.0, 1.0));
    // Two mountain ridges (hard, anti-aliased edges).
    let ridge = |px: f32, peak: f32, top: f32, half: f32| top + (px - peak).abs() * (60.0 - top) / half;
    c = mix(c, [95.0, 105.0, 125.0], coverage(x, y, |px, py| py > ridge(px, 40.0, 28.0, 45.0)));
    c = mix(c, [60.0, 90.0, 70.0], coverage(x, y, |px, py| py > ridge(px, 85.0, 40.0, 50.0)));
    // Meadow with grass stripes (2-pixel period: fine detail).
    if y >= 66 {
        c = if (x + y / 3) % 2 == 0 { [80.0, 150.0, 60.0] } else { [60.0, 125.0, 45.0] };
    }
    // A house: wall, roof, door, windows with crossbars.
    let roof = coverage(x, y, |px, py| (44.0..56.0).contains(&py) && (px - 30.0).abs() < (py - 44.0) * 1.3 + 2.0);
    c = mix(c, [170.0, 50.0, 40.0], roof);
    if (16..45).contains(&x) && (56..80).contains(&y) {
        c = [225.0, 215.0, 190.0];
        if (27..33).contains(&x) && y >= 66 {
            c = [110.0, 70.0, 40.0];
        }
        for wx in [19usize, 36] {
            if (wx..wx + 6).contains(&x) && (60..66).contains(&y) {
                c = if x == wx + 2 || y == 62 { [240.0, 240.0, 240.0] } else { [60.0, 110.0, 160.0] };
            }
        }
    }
    // A thin dark fence line and posts.
    if y == 82 && x > 50 || ((79..88).contains(&y) && x > 50 && x % 9 == 0) {
        c = [50.0, 35.0, 25.0];
    }
    c
}

fn main() {
    let mut data = Vec::with_capacity(W * H * 3);
    for y in 0..H {
        for x in 0..W {
            data.extend(pixel(x, y).map(|v| v.round().clamp(0.0, 255.0) as u8));
        }
    }
    let img = Image::from_u8(W, H, 3, data).expect("a valid image");
    let dest = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/sample.png");
    image_io::save(&img, &dest, Format::Png).unwrap_or_else(|e| panic!("{e}"));
    println!("wrote {} ({W}x{H})", dest.display());
}
