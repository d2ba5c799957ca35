//! The network's memory estimate (what `--tile auto` plans tiles with) against the heap
//! the CPU run really takes, counted by a global allocator: within 10% for every network
//! shape, at a size where the activations dominate. (The GPU tier checks the same
//! estimate against the ROCm allocator's peak.)

mod common;

use rocm_vision::{DType, Tensor};
use test_support::CountingAlloc;

#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::new();

#[test]
fn the_memory_estimate_matches_the_measured_peak() {
    let Some(models) = common::models_or_skip("the_memory_estimate_matches_the_measured_peak") else { return };
    for variant in ["models-se/up2x-no-denoise", "models-pro/up3x-no-denoise", "models-nose/up2x-no-denoise"] {
        let up = common::load(&models, variant);
        let net = up.network();
        let (h, w) = (160, 224);
        let input = Tensor::from_vec(
            (0..3 * h * w).map(|i| (i % 251) as f32 / 251.0).collect::<Vec<f32>>(),
            &[1, 3, h, w],
            net.device(),
        )
        .unwrap();
        let estimate = net.peak_bytes(h, w).unwrap();
        let (out, measured) = HEAP.peak_during(|| net.forward(input.to_dtype(DType::F32).unwrap()).unwrap());
        drop(out);
        let ratio = estimate as f64 / measured as f64;
        println!("{variant} at {w}x{h}: estimate {estimate} bytes, measured peak {measured} bytes, ratio {ratio:.3}");
        assert!((0.9..=1.1).contains(&ratio), "{variant}: estimate {estimate} vs measured {measured} ({ratio:.3})");
    }
}
