//! The encoder against diffusers' own output (fixtures/, `make_encoder_fixtures`): the
//! SD, SDXL, SD3 and FLUX configurations, both key layouts, `latent_dist` mean and
//! log-variance and the pipeline's scaled sample with the fixture's noise; f32 to 1e-5 of
//! each output's scale (diffusers' own f32 result is 0.4e-6 to 1.5e-6 from its f64 one,
//! `encoder_reference_precision.json`; ours measured 0.5e-6 to 2.2e-6 from diffusers'),
//! f16 and bf16 to what their rounding allows.

mod common;

use common::*;
use examples_sd::{KeyStyle, ScratchCaps};
use rocm_vision::{DType, Tensor};
use std::path::Path;

const FAMILIES: [&str; 4] = ["sd", "sdxl", "sd3", "flux"];
const CASES: [&str; 2] = ["64x64", "48x80"];
const F32_TOL: f64 = 1e-5;
/// f16 weights and activations (11-bit mantissa) through ~20 layers: measured 0.8e-3 to
/// 2.2e-3 of each output's scale (2026-12-04).
const F16_TOL: f64 = 5e-3;
/// bf16 keeps 8 mantissa bits: measured 5.9e-3 to 1.9e-2 (the decoder's tests: 1.1e-2 to
/// 1.7e-2).
const BF16_TOL: f64 = 3e-2;

/// `(case/output, error)` for every case of `model` encoded with `weights` in `dtype`.
fn encode_cases(model: &str, weights: &Path, dtype: DType) -> Vec<(String, f64)> {
    let enc = load_encoder(model, weights, dtype);
    let mut errs = Vec::new();
    for case in CASES {
        let t = tensors(&format!("{model}_encode_{case}.safetensors"));
        let dist = enc.encode(&t["image"], &mut |_, _| {}).expect("encode");
        assert_eq!((dist.mean.dtype(), dist.logvar.dtype()), (DType::F32, DType::F32));
        let latents = enc.latents(&dist, Some(&t["noise"])).expect("scaled sample");
        let label = |what: &str| format!("{model}_{case} {what}");
        errs.push((label("mean"), rel_max_err(&dist.mean, &t["mean"])));
        errs.push((label("logvar"), rel_max_err(&dist.logvar, &t["logvar"])));
        errs.push((label("std"), rel_max_err(&dist.std().unwrap(), &t["std"])));
        errs.push((label("sample"), rel_max_err(&dist.sample(&t["noise"]).unwrap(), &t["sample"])));
        errs.push((label("latents"), rel_max_err(&latents, &t["latents"])));
    }
    errs
}

fn check(label: &str, errs: &[(String, f64)], tol: f64) {
    for (case, e) in errs {
        println!("{label} {case}: max|d| / max|expected| = {e:.3e} (bound {tol:.0e})");
    }
    if errs.iter().any(|(_, e)| e.is_nan() || *e > tol) {
        panic!("{label}: {errs:?} exceed {tol:e}");
    }
}

#[test]
fn every_family_diffusers_layout_f32() {
    for model in FAMILIES {
        let w = fixture(&format!("{model}_encoder_diffusers.safetensors"));
        check(&format!("{model} diffusers f32"), &encode_cases(model, &w, DType::F32), F32_TOL);
    }
}

#[test]
fn every_family_original_layout_f32() {
    for model in FAMILIES {
        let w = fixture(&format!("{model}_encoder_original.safetensors"));
        let enc = load_encoder(model, &w, DType::F32);
        let prefix = if model.starts_with("sd") && model != "sd3" { "first_stage_model." } else { "" };
        assert_eq!((enc.layout().style, enc.layout().prefix.as_str()), (KeyStyle::Original, prefix));
        check(&format!("{model} original f32"), &encode_cases(model, &w, DType::F32), F32_TOL);
    }
}

/// A whole-VAE file (decoder and encoder keys, as published VAEs and checkpoints are)
/// loads both halves, under the `vae.` prefix too.
#[test]
fn whole_vae_file_loads_encoder_and_decoder() {
    let dir = scratch_dir("whole-vae");
    for (model, style, prefix) in [("sd", "original", "vae."), ("flux", "diffusers", "")] {
        let dst = dir.join(format!("{model}_{style}_whole.safetensors"));
        let mut map = std::collections::HashMap::new();
        for part in ["vae", "encoder"] {
            let src = fixture(&format!("{model}_{part}_{style}.safetensors"));
            let w = rocm_vision::Weights::open(&src, &rocm_vision::Device::cpu()).unwrap();
            for k in w.keys() {
                let key = format!("{prefix}{}", k.trim_start_matches("first_stage_model."));
                map.insert(key, w.get_unchecked_shape(k).unwrap().to_candle().unwrap());
            }
        }
        candle_core::safetensors::save(&map, &dst).unwrap();
        let enc = load_encoder(model, &dst, DType::F32);
        assert_eq!(enc.layout().prefix, prefix);
        let t = tensors(&format!("{model}_encode_64x64.safetensors"));
        let dist = enc.encode(&t["image"], &mut |_, _| {}).unwrap();
        check(&format!("{model} whole file"), &[("mean".into(), rel_max_err(&dist.mean, &t["mean"]))], F32_TOL);
        // The decoder of the same file decodes the encoder's latents back to an image.
        let dec = load_decoder(model, &dst, DType::F32);
        let img = dec.decode(&enc.latents(&dist, None).unwrap(), &mut |_, _| {}).unwrap();
        assert_eq!(img.dims(), &[1, 3, 64, 64]);
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn half_precision_f16_and_bf16() {
    let mut all = Vec::new();
    for (dtype, tol) in [(DType::F16, F16_TOL), (DType::BF16, BF16_TOL)] {
        for (model, layout) in [("sd", "diffusers"), ("sdxl", "original"), ("sd3", "diffusers"), ("flux", "original")] {
            let w = fixture(&format!("{model}_encoder_{layout}.safetensors"));
            all.push((format!("{model} {dtype:?}"), encode_cases(model, &w, dtype), tol));
        }
    }
    // Every figure is printed before any bound is checked.
    for (label, errs, tol) in &all {
        check(label, errs, *tol);
    }
}

/// A batch of two images encodes to the two single encodes; a 3-D image is one item.
#[test]
fn batch_encodes_each_item() {
    let enc = load_encoder("flux", &fixture("flux_encoder_diffusers.safetensors"), DType::F32);
    let t = tensors("flux_encode_48x80.safetensors");
    let x = &t["image"];
    let batch = Tensor::cat(&[&x.affine(-1.0, 0.0).unwrap(), x], 0).unwrap();
    let dist = enc.encode(&batch, &mut |_, _| {}).unwrap();
    assert_eq!(dist.mean.dims(), &[2, 16, 6, 10]);
    let e = rel_max_err(&dist.mean.narrow(0, 1, 1).unwrap(), &t["mean"]);
    assert!(e <= F32_TOL, "{e}");
    let single = enc.encode(&x.reshape(&[3, 48, 80]).unwrap(), &mut |_, _| {}).unwrap();
    assert!(rel_max_err(&single.logvar, &t["logvar"]) <= F32_TOL);
}

/// One-query attention chunks are still the exact encode.
#[test]
fn tiny_attention_chunks_are_still_exact() {
    let mut enc = load_encoder("sd", &fixture("sd_encoder_diffusers.safetensors"), DType::F32);
    enc.set_scratch_caps(ScratchCaps { attention_scores: 1, upsample_band: 1 });
    let t = tensors("sd_encode_48x80.safetensors");
    let dist = enc.encode(&t["image"], &mut |_, _| {}).unwrap();
    check("sd 48x80, 1-byte attention chunks", &[("mean".into(), rel_max_err(&dist.mean, &t["mean"]))], F32_TOL);
}

/// Sizes that are not a multiple of 8, wrong channel counts and wrong weights are clear
/// errors, not panics.
#[test]
fn bad_images_and_weights_are_clear_errors() {
    let enc = load_encoder("sd", &fixture("sd_encoder_diffusers.safetensors"), DType::F32);
    let dev = rocm_vision::Device::cpu();
    let odd = Tensor::zeros(&[1, 3, 60, 64], DType::F32, &dev).unwrap();
    let e = enc.encode(&odd, &mut |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("64x60") && e.contains("multiples of 8") && e.contains("64x56"), "{e}");
    let gray = Tensor::zeros(&[1, 1, 64, 64], DType::F32, &dev).unwrap();
    let e = enc.encode(&gray, &mut |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("3-channel") && e.contains("has 1"), "{e}");
    // FLUX weights with the SD configuration: named as a model mismatch.
    let w = rocm_vision::Weights::open(fixture("flux_encoder_diffusers.safetensors"), &dev).unwrap();
    let e = examples_sd::Encoder::load(&w, &config("sd"), DType::F32).unwrap_err().to_string();
    assert!(e.contains("16 latent channels") && e.contains("--model"), "{e}");
    // A decoder-only file has no encoder.
    let w = rocm_vision::Weights::open(fixture("sd_vae_diffusers.safetensors"), &dev).unwrap();
    let e = examples_sd::Encoder::load(&w, &config("sd"), DType::F32).unwrap_err().to_string();
    assert!(e.contains("encoder.conv_in.weight"), "{e}");
}

/// The f16 overflow guard in the encoder (the decoder's, crate::blocks::Guard): norm1
/// and conv1 of one down-block resnet scaled by 1024 overflow f16 (NaN without the
/// guard); with it that block is recomputed in f32 and the latents match the f32 encode.
#[test]
fn an_f16_overflow_is_recomputed_in_f32() {
    let src =
        rocm_vision::Weights::open(fixture("sd_encoder_diffusers.safetensors"), &rocm_vision::Device::cpu()).unwrap();
    let block = "encoder.down_blocks.1.resnets.0";
    let scaled: Vec<String> =
        ["norm1", "conv1"].iter().flat_map(|l| ["weight", "bias"].map(|p| format!("{block}.{l}.{p}"))).collect();
    let mut map = std::collections::HashMap::new();
    for k in src.keys() {
        let mut t = src.get_unchecked_shape(k).unwrap();
        if scaled.iter().any(|s| s == k) {
            t = t.affine(1024.0, 0.0).unwrap();
        }
        map.insert(k.to_string(), t.to_candle().unwrap());
    }
    let dir = scratch_dir("encoder-overflow");
    let path = dir.join("enc.safetensors");
    candle_core::safetensors::save(&map, &path).unwrap();
    let t = tensors("sd_encode_64x64.safetensors");
    let encode = |dtype, guard| {
        let mut enc = load_encoder("sd", &path, dtype);
        enc.set_overflow_guard(guard);
        let dist = enc.encode(&t["image"], &mut |_, _| {}).unwrap();
        (enc.latents(&dist, Some(&t["noise"])).unwrap(), enc.precision_stats())
    };
    let (reference, _) = encode(DType::F32, true);
    let (raw, _) = encode(DType::F16, false);
    let nan = raw.to_vec::<f32>().unwrap().iter().filter(|v| !v.is_finite()).count();
    assert!(nan > 0, "the scaled weights must overflow f16 without the guard");
    let (guarded, stats) = encode(DType::F16, true);
    let e = rel_max_err(&guarded, &reference);
    println!("raw f16: {nan} non-finite latents; guarded f16 vs f32: {e:.3e}; {}", stats.summary().unwrap());
    assert_eq!(stats.recomputed_in_f32, vec![block.to_string()]);
    assert!(e <= F16_TOL, "{e}");
    let _ = std::fs::remove_dir_all(dir);
}
