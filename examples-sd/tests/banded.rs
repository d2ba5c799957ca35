//! The banded decode (examples_sd::banded) is the unbanded decode: with size-independent
//! rounding bit for bit for any band height and any placement of the maps, and with the
//! default rounding within the dtype's tolerance; and the banded decode of the diffusers
//! fixtures is within the fixtures' tolerance of diffusers (CPU tier).

mod common;

use common::*;
use examples_sd::banded::{band_rows, banded_maps};
use examples_sd::{Banding, Decoder, Home};
use rocm_vision::{ConvRounding, DType, Device, Tensor};

fn latents(dec: &Decoder, h: usize, w: usize, seed: u64) -> Tensor {
    let c = dec.config().latent_channels;
    Tensor::rand_normal(&[1, c, h, w], (0.0, 1.0), seed, 0, DType::F32, &Device::cpu()).unwrap()
}

fn decode(dec: &Decoder, z: &Tensor) -> Vec<f32> {
    dec.decode(z, &mut |_, _| {}).expect("decode").to_vec().unwrap()
}

/// A banding whose band height at the full-size layers is `rows` (their channels and
/// width), every map at `home` (alternating when `None`).
fn banding(dec: &Decoder, (h, w): (usize, usize), rows: usize, home: Option<Home>) -> Banding {
    let c = dec.config();
    let maps = banded_maps(c, (h, w));
    let top = maps.last().unwrap();
    let c0 = c.block_out_channels[0];
    let e = dec.dtype().size_in_bytes();
    // band_rows' own per-row bytes, for a layer of c0 channels at the full width.
    let per_row = top.w * (4 * c0 * e + 2 * c0 * 4);
    let band_bytes = (rows + 2) * per_row;
    assert_eq!(band_rows(band_bytes, c0, c0, top.w, dec.dtype()), rows);
    let homes = (0..maps.len()).map(|i| home.unwrap_or(if i % 2 == 0 { Home::Host } else { Home::Device })).collect();
    Banding { band_bytes, homes }
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
        let top_h = banded_maps(dec.config(), (h, w)).last().unwrap().h;
        for (rows, home) in [(4, None), (8, Some(Home::Device)), (12, Some(Home::Host))] {
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
