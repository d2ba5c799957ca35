//! f16 that never goes black: a decoder whose f16 activations overflow (the fixture VAE
//! with some weights scaled up, as SDXL's VAE overflows in f16) decodes in f16 without
//! NaN and within 2 levels (8-bit) of its f32 decode; where nothing overflows the f16
//! decode is bit for bit the unguarded one.

mod common;

use common::*;
use examples_sd::Decoder;
use rocm_vision::{DType, Device, Tensor, Weights};
use std::collections::HashMap;
use std::path::PathBuf;

/// The fixture SD VAE with the tensors named in `scale` multiplied by their factor.
fn scaled_weights(name: &str, scale: &[(String, f64)]) -> PathBuf {
    let src = Weights::open(fixture("sd_vae_diffusers.safetensors"), &Device::cpu()).unwrap();
    let mut map = HashMap::new();
    for k in src.keys() {
        let mut t = src.get_unchecked_shape(k).unwrap();
        if let Some((_, f)) = scale.iter().find(|(s, _)| s == k) {
            t = t.affine(*f, 0.0).unwrap();
        }
        map.insert(k.to_string(), t.to_candle().unwrap());
    }
    assert_eq!(map.len(), src.keys().count());
    for (k, _) in scale {
        assert!(map.contains_key(k), "no tensor {k} in the fixture");
    }
    let path = scratch_dir(name).join("vae.safetensors");
    candle_core::safetensors::save(&map, &path).unwrap();
    path
}

/// `(key, 1024)` for the weight and bias of each of `layers` in `block`.
fn scaled(block: &str, layers: [&str; 2]) -> Vec<(String, f64)> {
    layers.iter().flat_map(|l| ["weight", "bias"].map(|p| (format!("{block}.{l}.{p}"), 1024.0))).collect()
}

fn decoder(weights: &PathBuf, dtype: DType, guard: bool) -> Decoder {
    decoder_on(weights, dtype, guard, &Device::cpu())
}

fn decoder_on(weights: &PathBuf, dtype: DType, guard: bool, device: &Device) -> Decoder {
    let mut d = common::load_decoder_on("sd", weights, dtype, device);
    d.set_overflow_guard(guard);
    d
}

/// 8-bit levels of a decoded image (as written to PNG).
fn levels(img: &Tensor) -> Vec<i32> {
    img.to_vec::<f32>().unwrap().iter().map(|&v| (((v.clamp(-1.0, 1.0) + 1.0) * 127.5).round()) as i32).collect()
}

/// Seeded latents, 16x12 (a 128x96 image).
fn latents() -> Tensor {
    Tensor::rand_normal(&[1, 4, 12, 16], (0.0, 1.0), 2026, 0, DType::F32, &Device::cpu()).unwrap()
}

/// Decodes `weights` in f32, in f16 without the guard (must overflow) and with it (must
/// not, and must match f32 within 2 levels); returns the guarded decoder's stats.
fn check_overflow_case(weights: &PathBuf) -> examples_sd::PrecisionStats {
    check_overflow_case_on(weights, &Device::cpu())
}

fn check_overflow_case_on(weights: &PathBuf, device: &Device) -> examples_sd::PrecisionStats {
    let z = latents().to_device(device).unwrap();
    let decoder = |w: &PathBuf, dtype, guard| decoder_on(w, dtype, guard, device);
    let reference = levels(&decoder(weights, DType::F32, true).decode(&z, &mut |_, _| {}).unwrap());
    let raw = decoder(weights, DType::F16, false).decode(&z, &mut |_, _| {}).unwrap();
    let nan = raw.to_vec::<f32>().unwrap().iter().filter(|v| !v.is_finite()).count();
    assert!(nan > 0, "the fixture must overflow f16 without the guard (no non-finite value in the raw f16 decode)");
    let dec = decoder(weights, DType::F16, true);
    let img = dec.decode(&z, &mut |_, _| {}).unwrap();
    let v = img.to_vec::<f32>().unwrap();
    assert!(v.iter().all(|x| x.is_finite()), "guarded f16 decode has non-finite values");
    let ours = levels(&img);
    let worst = ours.iter().zip(&reference).map(|(a, b)| (a - b).abs()).max().unwrap();
    let stats = dec.precision_stats();
    println!(
        "raw f16: {nan} of {} values non-finite; guarded f16 vs f32: max {worst} levels; {}",
        v.len(),
        stats.summary().unwrap_or_default()
    );
    assert!(worst <= 2, "guarded f16 is {worst} levels from f32 (bound 2)");
    stats
}

/// norm1 and conv1 of one resnet scaled by 1024 (exact in f16; the weights stay well in
/// its range, as SDXL's do): conv1's output is past 65504, norm2 brings it back, so only
/// that block needs f32.
#[test]
fn an_overflow_inside_one_block_is_recomputed_in_f32() {
    let w = scaled_weights("inside", &scaled("decoder.up_blocks.1.resnets.0", ["norm1", "conv1"]));
    let stats = check_overflow_case(&w);
    assert_eq!(stats.recomputed_in_f32, vec!["decoder.up_blocks.1.resnets.0".to_string()]);
    assert!(stats.continued_in_f32.is_empty(), "{stats:?}");
    assert!(stats.checked_blocks >= 18, "{stats:?}");
}

/// norm2 and conv2 of a resnet scaled by 1024: the block's output itself is past f16's
/// range, and the residual carries it on to norm_out; the following blocks run in f32.
#[test]
fn an_overflow_that_outlives_its_block_continues_in_f32() {
    let w = scaled_weights("outlives", &scaled("decoder.up_blocks.2.resnets.1", ["norm2", "conv2"]));
    let stats = check_overflow_case(&w);
    assert_eq!(stats.recomputed_in_f32, vec!["decoder.up_blocks.2.resnets.1".to_string()]);
    assert!(stats.continued_in_f32.contains(&"decoder.up_blocks.3.resnets.0".to_string()), "{stats:?}");
    assert!(stats.summary().unwrap().contains("then ran in f32"), "{stats:?}");
}

/// The fixture VAE as it is: nothing overflows, nothing is recomputed, and the guarded f16
/// decode is bit for bit the plain one.
#[test]
fn without_overflow_the_f16_decode_is_unchanged() {
    let w = fixture("sd_vae_diffusers.safetensors");
    let z = latents();
    let guarded = decoder(&w, DType::F16, true);
    let a = guarded.decode(&z, &mut |_, _| {}).unwrap().to_vec::<f32>().unwrap();
    let b = decoder(&w, DType::F16, false).decode(&z, &mut |_, _| {}).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(a.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let s = guarded.precision_stats();
    assert!(s.recomputed_in_f32.is_empty() && s.summary().is_none(), "{s:?}");
    assert!(s.checked_blocks > 0);
}

/// Both overflow cases on a ROCm GPU (GPU tier): the guard's finiteness check runs on the
/// device. Without one it says so and checks nothing.
#[test]
fn gpu_overflows_are_recomputed_in_f32() {
    let Some(device) = common::rocm_or_skip() else { return };
    let w = scaled_weights("gpu-inside", &scaled("decoder.up_blocks.1.resnets.0", ["norm1", "conv1"]));
    let stats = check_overflow_case_on(&w, &device);
    assert_eq!(stats.recomputed_in_f32, vec!["decoder.up_blocks.1.resnets.0".to_string()]);
    let w = scaled_weights("gpu-outlives", &scaled("decoder.up_blocks.2.resnets.1", ["norm2", "conv2"]));
    let stats = check_overflow_case_on(&w, &device);
    assert!(stats.continued_in_f32.contains(&"decoder.up_blocks.3.resnets.0".to_string()), "{stats:?}");
}
