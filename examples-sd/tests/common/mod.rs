//! Shared helpers of the examples-sd integration tests: the diffusers fixtures
//! (`fixtures/README.md`) and the error metric they are judged by.

#![allow(dead_code)] // each test binary uses a different subset

use examples_sd::banded::{band_fixed_bytes, band_row_bytes, band_rows, decoder_schedule, encoder_schedule};
use examples_sd::{Banding, Decoder, Encoder, Home, VaeConfig};
use rocm_vision::{DType, Device, Tensor, Weights};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// `examples-sd/fixtures/NAME`; `SD_FIXTURES` names the folder where the test binary runs
/// away from its build tree (the GPU tier: scripts/gpu-tier.sh sets it).
pub fn fixture(name: &str) -> PathBuf {
    match std::env::var_os("SD_FIXTURES") {
        Some(dir) => PathBuf::from(dir).join(name),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name),
    }
}

/// `sd`, `sdxl`, `sd3` or `flux`: the reduced configuration the fixtures were made with
/// (the decoder's fixtures: `sd` and `flux`).
pub fn config(model: &str) -> VaeConfig {
    VaeConfig::from_diffusers_json(&fixture(&format!("{model}_config.json"))).expect("fixture config")
}

pub fn load_decoder(model: &str, weights_file: &Path, dtype: DType) -> Decoder {
    load_decoder_on(model, weights_file, dtype, &Device::cpu())
}

pub fn load_decoder_on(model: &str, weights_file: &Path, dtype: DType, device: &Device) -> Decoder {
    let w = Weights::open(weights_file, device).expect("fixture weights");
    Decoder::load(&w, &config(model), dtype).unwrap_or_else(|e| panic!("{}: {e}", weights_file.display()))
}

pub fn load_encoder(model: &str, weights_file: &Path, dtype: DType) -> Encoder {
    load_encoder_on(model, weights_file, dtype, &Device::cpu())
}

pub fn load_encoder_on(model: &str, weights_file: &Path, dtype: DType, device: &Device) -> Encoder {
    let w = Weights::open(weights_file, device).expect("fixture weights");
    Encoder::load(&w, &config(model), dtype).unwrap_or_else(|e| panic!("{}: {e}", weights_file.display()))
}

/// Every tensor of a fixture file, f32.
pub fn tensors(file: &str) -> HashMap<String, Tensor> {
    let w = Weights::open(fixture(file), &Device::cpu()).expect("fixture file");
    w.keys().map(|k| (k.to_string(), w.get_unchecked_shape(k).expect("fixture tensor"))).collect()
}

/// `max|ours − expected| / max|expected|`: the fixtures' metric (README: per-element
/// relative errors are meaningless near zero).
pub fn rel_max_err(ours: &Tensor, expected: &Tensor) -> f64 {
    assert_eq!(ours.dims(), expected.dims(), "shape");
    let a = ours.to_vec::<f32>().expect("values");
    let b = expected.to_vec::<f32>().expect("values");
    let max_ref = b.iter().fold(0f64, |m, &x| m.max((x as f64).abs()));
    let max_d = a.iter().zip(&b).fold(0f64, |m, (&x, &y)| m.max((x as f64 - y as f64).abs()));
    if a.iter().any(|x| !x.is_finite()) {
        return f64::INFINITY;
    }
    max_d / max_ref
}

/// A scratch directory unique to this process and `name`, emptied first.
pub fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("examples-sd-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

/// Re-writes a weight file with every key renamed by `rename` (e.g. to add a prefix).
pub fn rewrite_weights(src: &Path, dst: &Path, rename: impl Fn(&str) -> String) {
    let w = Weights::open(src, &Device::cpu()).expect("weights");
    let map: HashMap<String, candle_core::Tensor> =
        w.keys().map(|k| (rename(k), w.get_unchecked_shape(k).unwrap().to_candle().unwrap())).collect();
    candle_core::safetensors::save(&map, dst).expect("write safetensors");
}

/// `SKIPPED <test>: <reason>` on stderr, past the harness's capture.
#[allow(unused_imports)] // each test binary uses its own subset
pub use test_support::skipped;

/// The first ROCm device, or `None` after a `SKIPPED` line; with
/// `ROCM_VISION_REQUIRE_GPU=1` (the GPU tier) a missing device fails the test instead.
pub fn rocm_or_skip() -> Option<Device> {
    test_support::device_or_skip(Device::rocm(0))
}

/// A banding whose band height at the full-size layers is `rows` (their channels and
/// width), every map at `home` (the three in turn when `None`).
pub fn banding(dec: &Decoder, (h, w): (usize, usize), rows: usize, home: Option<Home>) -> Banding {
    let c = dec.config();
    let maps = decoder_schedule(c, (h, w)).maps;
    let top = maps.last().unwrap();
    let c0 = c.block_out_channels[0];
    let band_bytes = (rows + 2) * band_row_bytes(c0, c0, top.w, dec.dtype()) + band_fixed_bytes(c0, c0, dec.dtype());
    assert_eq!(band_rows(band_bytes, c0, c0, top.w, dec.dtype()), rows);
    let homes = (0..maps.len()).map(|i| home.unwrap_or([Home::Host, Home::Device, Home::Disk][i % 3])).collect();
    Banding { band_bytes, homes, disk_dir: std::env::temp_dir() }
}

/// An encoder banding with bands of `rows` rows at the full-size layers.
pub fn encoder_banding(enc: &Encoder, (h, w): (usize, usize), rows: usize, home: Option<Home>) -> Banding {
    let c0 = enc.config().block_out_channels[0];
    let band_bytes = (rows + 2) * band_row_bytes(c0, c0, w, enc.dtype()) + band_fixed_bytes(c0, c0, enc.dtype());
    assert_eq!(band_rows(band_bytes, c0, c0, w, enc.dtype()), rows);
    let n = encoder_schedule(enc.config(), (h, w)).maps.len();
    let homes = (0..n).map(|i| home.unwrap_or([Home::Host, Home::Device, Home::Disk][i % 3])).collect();
    Banding { band_bytes, homes, disk_dir: std::env::temp_dir() }
}
