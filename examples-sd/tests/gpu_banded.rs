//! GPU tier: the banded decode and encode on the device equal the unbanded ones bit for bit
//! under `ConvRounding::SizeIndependent`, with the maps on the device, in host memory and
//! on disk (tests/banded.rs is the same on the CPU). On a difference the message names the
//! first up block whose output differs. Skips with a printed reason without a ROCm device
//! (`ROCM_VISION_REQUIRE_GPU=1` makes that a failure).

mod common;

use common::*;
use examples_sd::Home;
use examples_sd::banded::decoder_schedule;
use rocm_vision::{ConvRounding, DType, Tensor};

/// A run's output and each observed stage's output (empty for a map kept on disk), as f32
/// bits.
type Run = (Vec<u32>, Vec<(String, Vec<u32>)>);

fn stages(run: impl FnOnce(&mut dyn FnMut(&str, &Tensor)) -> Tensor) -> Run {
    let bits =
        |t: &Tensor| t.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap().iter().map(|v| v.to_bits()).collect();
    let mut seen = Vec::new();
    let out = run(&mut |name, t| seen.push((name.to_string(), bits(t))));
    (bits(&out), seen)
}

/// The failure line of a banded run that differs from the whole one (printed either way).
fn compare(what: String, (whole, whole_stages): &Run, (banded, banded_stages): &Run) -> Option<String> {
    let differ = banded.iter().zip(whole).filter(|(a, b)| a != b).count();
    println!("{what}: {differ} of {} values differ", whole.len());
    (differ > 0).then(|| format!("{what}: {differ} values differ; {}", first_difference(whole_stages, banded_stages)))
}

fn first_difference(a: &[(String, Vec<u32>)], b: &[(String, Vec<u32>)]) -> String {
    for ((name, x), (_, y)) in a.iter().zip(b) {
        if !x.is_empty() && !y.is_empty() && x != y {
            let n = x.iter().zip(y).filter(|(p, q)| p != q).count();
            return format!("first difference at {name} ({n} of {} values)", x.len());
        }
    }
    "no observed stage differs (the output layers, or a stage kept on disk)".into()
}

#[test]
fn gpu_banded_decodes_equal_the_unbanded_one_bit_for_bit() {
    let Some(gpu) = rocm_or_skip() else { return };
    let device = gpu.with_conv_rounding(ConvRounding::SizeIndependent);
    let (h, w) = (7, 5);
    let mut failures = Vec::new();
    for (model, dtype) in [("sd", DType::F32), ("sd", DType::F16), ("flux", DType::BF16)] {
        let mut dec = load_decoder_on(model, &fixture(&format!("{model}_vae_diffusers.safetensors")), dtype, &device);
        let c = dec.config().latent_channels;
        let z = Tensor::rand_normal(&[1, c, h, w], (0.0, 1.0), 5, 0, DType::F32, &device).unwrap();
        let whole = stages(|obs| dec.decode_z(z.clone(), obs).unwrap());
        let top_h = decoder_schedule(dec.config(), (h, w)).maps.last().unwrap().h;
        for (rows, home) in [(4, None), (8, Some(Home::Device)), (12, Some(Home::Host)), (4, Some(Home::Disk))] {
            assert!(top_h.div_ceil(rows) >= 4);
            dec.set_banding(Some(banding(&dec, (h, w), rows, home)));
            let banded = stages(|obs| dec.decode_z(z.clone(), obs).unwrap());
            failures.extend(compare(format!("{model} {dtype:?} bands of {rows} rows ({home:?})"), &whole, &banded));
            dec.set_banding(None);
        }
    }
    assert!(failures.is_empty(), "banded decodes differ from the unbanded one on the GPU:\n{}", failures.join("\n"));
}

#[test]
fn gpu_banded_encodes_equal_the_unbanded_one_bit_for_bit() {
    let Some(gpu) = rocm_or_skip() else { return };
    let device = gpu.with_conv_rounding(ConvRounding::SizeIndependent);
    let mut failures = Vec::new();
    for (model, dtype) in [("sd", DType::F32), ("sd3", DType::F16)] {
        let mut enc =
            load_encoder_on(model, &fixture(&format!("{model}_encoder_diffusers.safetensors")), dtype, &device);
        let image = tensors(&format!("{model}_encode_48x80.safetensors"))["image"].to_device(&device).unwrap();
        let whole = stages(|obs| enc.encode(&image, obs).unwrap().mean);
        for (rows, home) in [(4, None), (8, Some(Home::Host)), (12, Some(Home::Device)), (8, Some(Home::Disk))] {
            enc.set_banding(Some(encoder_banding(&enc, (48, 80), rows, home)));
            let banded = stages(|obs| enc.encode(&image, obs).unwrap().mean);
            failures.extend(compare(format!("{model} {dtype:?} bands of {rows} rows ({home:?})"), &whole, &banded));
        }
        enc.set_banding(None);
    }
    assert!(failures.is_empty(), "banded encodes differ from the unbanded one on the GPU:\n{}", failures.join("\n"));
}
