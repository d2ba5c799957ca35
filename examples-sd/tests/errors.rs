//! Bad input is an error that says what is wrong, never a panic or a wrong image.

mod common;

use common::*;
use examples_sd::{Decoder, Model, SdError};
use rocm_vision::{DType, Device, Tensor, Weights};

#[test]
fn unknown_layout_lists_the_keys_it_looked_for() {
    let dir = scratch_dir("unknown-layout");
    let path = dir.join("other.safetensors");
    // A plausible-looking file whose keys match neither layout.
    rewrite_weights(&fixture("sd_vae_diffusers.safetensors"), &path, |k| k.replace("decoder.", "dec."));
    let w = Weights::open(&path, &Device::cpu()).unwrap();
    let e = Decoder::load(&w, &config("sd"), DType::F32).unwrap_err();
    assert!(matches!(e, SdError::UnknownLayout { .. }), "{e:?}");
    let msg = e.to_string();
    for needle in [
        "unknown VAE weight layout",
        "decoder.conv_in.weight",
        "decoder.mid_block.resnets.0.conv1.weight",
        "decoder.mid.block_1.conv1.weight",
        "first_stage_model.",
        "dec.conv_in",
        "other.safetensors",
    ] {
        assert!(msg.contains(needle), "{needle:?} missing from: {msg}");
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn vae_and_config_channel_mismatch() {
    // SD weights (4 latent channels) with the FLUX configuration (16).
    let w = Weights::open(fixture("sd_vae_diffusers.safetensors"), &Device::cpu()).unwrap();
    let msg = Decoder::load(&w, &config("flux"), DType::F32).unwrap_err().to_string();
    assert!(msg.contains("decoder.conv_in.weight") && msg.contains("4 latent channels"), "{msg}");
    // FLUX weights with a config that expects a post_quant_conv.
    let w = Weights::open(fixture("flux_vae_diffusers.safetensors"), &Device::cpu()).unwrap();
    let mut cfg = config("flux");
    cfg.use_post_quant_conv = true;
    let msg = Decoder::load(&w, &cfg, DType::F32).unwrap_err().to_string();
    assert!(msg.contains("post_quant_conv") && msg.contains("--model"), "{msg}");
    // Reduced weights with a full-size preset.
    let msg = Decoder::load(&w, &Model::Flux.config(), DType::F32).unwrap_err().to_string();
    assert!(msg.contains("[32, 16, 3, 3]") && msg.contains("16 into 512"), "{msg}");
}

#[test]
fn latent_channel_mismatch_and_rank() {
    let dec = load_decoder("sd", &fixture("sd_vae_diffusers.safetensors"), DType::F32);
    let dev = Device::cpu();
    let flux_latents = &tensors("flux_8x8.safetensors")["latents"];
    let msg = dec.decode(flux_latents, &mut |_, _| {}).unwrap_err().to_string();
    assert!(msg.contains("4 latent channels") && msg.contains("have 16"), "{msg}");
    for shape in [vec![4usize, 8], vec![1, 1, 4, 8, 8], vec![64]] {
        let n = shape.iter().product();
        let t = Tensor::from_vec(vec![0f32; n], &shape, &dev).unwrap();
        let msg = dec.decode(&t, &mut |_, _| {}).unwrap_err().to_string();
        assert!(msg.contains("expected shape [N, 4, h, w]"), "{shape:?}: {msg}");
    }
    let empty = Tensor::from_vec(Vec::<f32>::new(), &[0, 4, 8, 8], &dev).unwrap();
    assert!(dec.decode(&empty, &mut |_, _| {}).unwrap_err().to_string().contains("empty"));
}

#[test]
fn wrong_tensor_shape_names_the_tensor() {
    let dir = scratch_dir("bad-shape");
    let path = dir.join("bad.safetensors");
    let src = Weights::open(fixture("sd_vae_diffusers.safetensors"), &Device::cpu()).unwrap();
    let mut map: std::collections::HashMap<String, candle_core::Tensor> =
        src.keys().map(|k| (k.to_string(), src.get_unchecked_shape(k).unwrap().to_candle().unwrap())).collect();
    map.insert(
        "decoder.up_blocks.1.resnets.2.conv2.weight".into(),
        candle_core::Tensor::zeros((32, 32, 1, 1), candle_core::DType::F32, &candle_core::Device::Cpu).unwrap(),
    );
    map.remove("decoder.conv_norm_out.bias");
    candle_core::safetensors::save(&map, &path).unwrap();
    let w = Weights::open(&path, &Device::cpu()).unwrap();
    let msg = Decoder::load(&w, &config("sd"), DType::F32).unwrap_err().to_string();
    assert!(msg.contains("decoder.up_blocks.1.resnets.2.conv2.weight") && msg.contains("[32, 32, 3, 3]"), "{msg}");
    map.insert(
        "decoder.up_blocks.1.resnets.2.conv2.weight".into(),
        src.get_unchecked_shape("decoder.up_blocks.1.resnets.2.conv2.weight").unwrap().to_candle().unwrap(),
    );
    candle_core::safetensors::save(&map, &path).unwrap();
    let w = Weights::open(&path, &Device::cpu()).unwrap();
    let msg = Decoder::load(&w, &config("sd"), DType::F32).unwrap_err().to_string();
    assert!(msg.contains("decoder.conv_norm_out.bias"), "{msg}");
    let _ = std::fs::remove_dir_all(dir);
}
