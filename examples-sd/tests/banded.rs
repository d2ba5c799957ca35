//! The banded decode and encode (examples_sd::banded) are the unbanded ones: with
//! size-independent rounding bit for bit for any band height and any placement of the
//! maps, and with the default rounding within the fixtures' tolerance of diffusers (CPU
//! tier).

mod common;

use common::*;
use examples_sd::banded::decoder_schedule;
use examples_sd::{Decoder, Home};
use rocm_vision::{ConvRounding, DType, Device, Tensor};

fn latents(dec: &Decoder, h: usize, w: usize, seed: u64) -> Tensor {
    let c = dec.config().latent_channels;
    Tensor::rand_normal(&[1, c, h, w], (0.0, 1.0), seed, 0, DType::F32, &Device::cpu()).unwrap()
}

fn decode(dec: &Decoder, z: &Tensor) -> Vec<f32> {
    dec.decode(z, &mut |_, _| {}).expect("decode").to_vec().unwrap()
}

#[test]
fn banded_decodes_equal_the_unbanded_one_bit_for_bit_under_size_independent_rounding() {
    let device = Device::cpu().with_conv_rounding(ConvRounding::SizeIndependent);
    let (h, w) = (7, 5);
    for (model, dtype) in [("sd", DType::F32), ("flux", DType::F32), ("sd", DType::BF16), ("sd", DType::F16)] {
        let weights = fixture(&format!("{model}_vae_diffusers.safetensors"));
        let mut dec = load_decoder_on(model, &weights, dtype, &device);
        let z = latents(&dec, h, w, 5);
        let whole = decode(&dec, &z);
        assert!(whole.iter().all(|v| v.is_finite()), "{model} {dtype:?}: unbanded decode not finite");
        let top_h = decoder_schedule(dec.config(), (h, w)).maps.last().unwrap().h;
        for (rows, home) in [(4, None), (8, Some(Home::Device)), (12, Some(Home::Host)), (4, Some(Home::Disk))] {
            assert!(top_h.div_ceil(rows) >= 4, "{rows} rows must give at least 4 bands");
            dec.set_banding(Some(banding(&dec, (h, w), rows, home)));
            let banded = decode(&dec, &z);
            let differ = banded.iter().zip(&whole).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(differ, 0, "{model} {dtype:?}: bands of {rows} rows ({home:?}): {differ} values differ");
            dec.set_banding(None);
        }
    }
}

#[test]
fn banded_decodes_with_the_default_rounding_match_diffusers() {
    // The default device (fastest rounding): bands may round differently from the whole
    // map, by no more than the dtype allows; against diffusers' own output as the
    // unbanded decode is (fixtures.rs).
    for model in ["sd", "flux"] {
        let weights = fixture(&format!("{model}_vae_diffusers.safetensors"));
        let mut dec = load_decoder(model, &weights, DType::F32);
        let t = tensors(&format!("{model}_8x8.safetensors"));
        dec.set_banding(Some(banding(&dec, (8, 8), 4, None)));
        let img = dec.decode(&t["latents"], &mut |_, _| {}).expect("banded decode");
        let e = rel_max_err(&img, &t["expected"]);
        assert!(e <= 1e-4, "{model}: banded decode {e:e} from diffusers (bound 1e-4)");
    }
}

#[test]
fn a_banding_for_another_size_is_an_error_not_a_wrong_image() {
    let mut dec = load_decoder("sd", &fixture("sd_vae_diffusers.safetensors"), DType::F32);
    let mut b = banding(&dec, (4, 4), 4, Some(Home::Device));
    b.homes.pop();
    dec.set_banding(Some(b));
    let e = dec.decode(&latents(&dec, 4, 4, 1), &mut |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("plan placed"), "{e}");
}

#[test]
fn banded_encodes_equal_the_unbanded_one_bit_for_bit_under_size_independent_rounding() {
    let device = Device::cpu().with_conv_rounding(ConvRounding::SizeIndependent);
    for (model, dtype) in [("sd", DType::F32), ("flux", DType::F32), ("sdxl", DType::BF16), ("sd3", DType::F16)] {
        let weights = fixture(&format!("{model}_encoder_diffusers.safetensors"));
        let mut enc = load_encoder_on(model, &weights, dtype, &device);
        let t = tensors(&format!("{model}_encode_48x80.safetensors"));
        let whole = enc.encode(&t["image"], &mut |_, _| {}).expect("encode");
        let whole: Vec<f32> = whole.mean.to_vec().unwrap();
        for (rows, home) in [(4, None), (8, Some(Home::Host)), (12, Some(Home::Device)), (8, Some(Home::Disk))] {
            enc.set_banding(Some(encoder_banding(&enc, (48, 80), rows, home)));
            let banded: Vec<f32> =
                enc.encode(&t["image"], &mut |_, _| {}).expect("banded encode").mean.to_vec().unwrap();
            let differ = banded.iter().zip(&whole).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(differ, 0, "{model} {dtype:?}: bands of {rows} rows ({home:?}): {differ} values differ");
        }
        enc.set_banding(None);
    }
}

#[test]
fn banded_encodes_with_the_default_rounding_match_diffusers() {
    for model in ["sd", "sdxl", "sd3", "flux"] {
        let mut enc = load_encoder(model, &fixture(&format!("{model}_encoder_diffusers.safetensors")), DType::F32);
        let t = tensors(&format!("{model}_encode_64x64.safetensors"));
        enc.set_banding(Some(encoder_banding(&enc, (64, 64), 8, None)));
        let dist = enc.encode(&t["image"], &mut |_, _| {}).expect("banded encode");
        for (what, ours) in [("mean", &dist.mean), ("logvar", &dist.logvar)] {
            let e = rel_max_err(ours, &t[what]);
            assert!(e <= 1e-5, "{model} {what}: banded encode {e:e} from diffusers (bound 1e-5, as tests/encoder.rs)");
        }
    }
}
