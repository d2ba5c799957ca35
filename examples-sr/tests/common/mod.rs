//! Shared by the integration tests: where the fixtures and models are, and how a test
//! that needs the (git-ignored) models skips when they are absent.

#![allow(dead_code)] // each test binary uses a different part of this module

use std::path::{Path, PathBuf};

use examples_sr::image_io::{Image, Pixels};
use examples_sr::models::{ModelKind, Variant};
use examples_sr::upscale::Upscaler;
use rocm_vision::{Budget, DType, Device};

/// `SKIPPED <test>: <reason>` on stderr, past the harness's capture.
#[allow(unused_imports)] // each test binary uses its own subset
pub use test_support::skipped;

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn fixtures_dir() -> PathBuf {
    crate_dir().join("fixtures")
}

/// `$REALCUGAN_MODELS`, else `<repo>/models`.
pub fn models_dir() -> PathBuf {
    match std::env::var_os("REALCUGAN_MODELS") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => crate_dir().join("..").join("models"),
    }
}

/// `Some(models dir)` when the model files are there; otherwise prints why the calling
/// test is skipped and returns `None`.
pub fn models_or_skip(test: &str) -> Option<PathBuf> {
    let dir = models_dir();
    let probe = dir.join("models-se").join("up2x-no-denoise.param");
    if probe.is_file() {
        Some(dir)
    } else {
        skipped(format!(
            "{test}: the Real-CUGAN models are not at {} (run scripts/fetch-models.sh, or set REALCUGAN_MODELS)",
            dir.display()
        ));
        None
    }
}

pub fn device() -> Device {
    examples_sr::cpu_device(Budget::bytes(64 << 20))
}

/// `models-se/up2x-no-denoise` -> the variant.
pub fn parse_variant(name: &str) -> Variant {
    let (dir, stem) = name.split_once('/').expect("kind/stem");
    let kind: ModelKind = dir.parse().expect("model kind");
    let scale: u32 = stem[2..3].parse().expect("scale digit");
    let noise = match &stem[5..] {
        "conservative" => -1,
        "no-denoise" => 0,
        d => d[7..8].parse().expect("denoise level"),
    };
    Variant::new(kind, scale, noise).expect("a variant with a model")
}

pub fn load(models: &Path, variant: &str) -> Upscaler {
    parse_variant(variant).load(models, DType::F32, &device()).unwrap_or_else(|e| panic!("{variant}: {e}"))
}

/// Samples widened to u32, for comparisons.
pub fn samples(img: &Image) -> Vec<u32> {
    match &img.pixels {
        Pixels::U8(v) => v.iter().map(|&x| x as u32).collect(),
        Pixels::U16(v) => v.iter().map(|&x| x as u32).collect(),
    }
}

/// Largest absolute difference and the number of differing samples.
pub fn max_diff(a: &Image, b: &Image) -> (u32, usize) {
    assert_eq!((a.width, a.height, a.channels), (b.width, b.height, b.channels), "image shapes");
    let (sa, sb) = (samples(a), samples(b));
    let mut worst = 0;
    let mut count = 0;
    for (x, y) in sa.iter().zip(&sb) {
        let d = x.abs_diff(*y);
        worst = worst.max(d);
        count += usize::from(d > 0);
    }
    (worst, count)
}

/// A deterministic test image with edges, gradients and texture.
pub fn synthetic(width: usize, height: usize, channels: usize, seed: u32) -> Image {
    let mut state = seed.wrapping_mul(2654435761).wrapping_add(12345);
    let mut data = Vec::with_capacity(width * height * channels);
    for y in 0..height {
        for x in 0..width {
            for c in 0..channels {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                let noise = (state % 17) as i32 - 8;
                let base = match c {
                    0 => (x * 255 / width.max(1)) as i32,
                    1 => (y * 255 / height.max(1)) as i32,
                    2 => {
                        if (x / 5 + y / 7) % 2 == 0 {
                            40
                        } else {
                            210
                        }
                    }
                    _ => 255 - ((x + y) * 2 % 256) as i32,
                };
                data.push((base + noise).clamp(0, 255) as u8);
            }
        }
    }
    Image::from_u8(width, height, channels, data).expect("valid image")
}

/// ROCm GPU 0 (with its allocator's budget set to `budget` when given), or `None` after
/// printing why the test skips (`ROCM_VISION_REQUIRE_GPU=1` makes a missing GPU a failure).
pub fn rocm_or_skip(budget: Option<Budget>) -> Option<Device> {
    test_support::device_or_skip(budget.map_or_else(|| Device::rocm(0), |b| Device::rocm_with_budget(0, b)))
}
