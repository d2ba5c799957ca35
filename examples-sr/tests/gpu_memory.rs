//! GPU tier: the network's memory estimate (what `--tile auto` plans tiles with) against
//! the ROCm allocator's measured peak of live bytes, within 10%, for a 960x540 image in f32
//! and f16. Skips with a printed reason without a ROCm device (`ROCM_VISION_REQUIRE_GPU=1`
//! makes that a failure) or without the models (`REALCUGAN_MODELS`).

mod common;

use examples_sr::models::Variant;
use rocm_vision::{Budget, DType, Device, Tensor};

#[test]
fn the_memory_estimate_matches_the_allocator_peak() {
    let Some(models) = common::models_or_skip("the_memory_estimate_matches_the_allocator_peak") else { return };
    let Some(dev) = common::rocm_or_skip(Some(Budget::bytes(24 << 30))) else {
        return;
    };
    let alloc = dev.rocm_device().expect("a ROCm device").allocator();
    let (h, w) = (540, 960);
    let mut failures = Vec::new();
    for dtype in [DType::F32, DType::F16] {
        let up = Variant::new(examples_sr::models::ModelKind::Se, 2, 0).unwrap().load(&models, dtype, &dev).unwrap();
        let net = up.network();
        let estimate = net.peak_bytes(h, w).unwrap();
        dev.synchronize().unwrap();
        let base = alloc.stats().live;
        alloc.reset_peaks();
        let input = Tensor::from_vec(
            (0..3 * h * w).map(|i| (i % 251) as f32 / 251.0).collect::<Vec<f32>>(),
            &[1, 3, h, w],
            &Device::cpu(),
        )
        .unwrap()
        .to_dtype(dtype)
        .unwrap()
        .to_device(&dev)
        .unwrap();
        net.enable_profiling();
        let out = net.forward(input).unwrap();
        dev.synchronize().unwrap();
        let profile = net.take_profile().expect("profiling was on");
        // Per layer (the allocator's peaks are reset after each one while profiling).
        let measured = profile.peak_live_by_layer.iter().map(|(_, p)| p).max().copied().unwrap_or(0) - base;
        drop(out);
        let ratio = estimate as f64 / measured as f64;
        println!(
            "se 2x {dtype:?} at {w}x{h}: estimate {estimate} bytes, allocator peak {measured} bytes live, ratio {ratio:.3}"
        );
        // The largest layers of each, so that a mismatch says where it is.
        let model: std::collections::HashMap<String, usize> =
            net.peak_bytes_by_layer(h, w).unwrap().into_iter().collect();
        let mut real = profile.peak_live_by_layer.clone();
        real.sort_by_key(|(_, p)| std::cmp::Reverse(*p));
        for (name, r) in real.iter().take(6) {
            println!("  {name}: allocator {}, walk {:?}", r.saturating_sub(base), model.get(name));
        }
        if std::env::var("GPU_MEMORY_ALL_LAYERS").is_ok() {
            for (name, r) in &profile.peak_live_by_layer {
                println!("  layer {name}: allocator {}, walk {:?}", r.saturating_sub(base), model.get(name));
            }
        }
        let mut walk: Vec<_> = model.iter().collect();
        walk.sort_by_key(|(_, m)| std::cmp::Reverse(**m));
        let real: std::collections::HashMap<_, _> = real.into_iter().collect();
        let plans: std::collections::HashMap<String, String> = net.conv_plans(h, w).unwrap().into_iter().collect();
        for (name, m) in walk.iter().take(4) {
            println!(
                "  walk's largest {name}: walk {m}, allocator {:?}; {}",
                real.get(*name).map(|r| r.saturating_sub(base)),
                plans.get(*name).map_or("", |p| p.as_str())
            );
        }
        if !(0.9..=1.1).contains(&ratio) {
            failures.push(format!("{dtype:?}: estimate {estimate} vs measured {measured} ({ratio:.3})"));
        }
    }
    assert!(failures.is_empty(), "{failures:?}");
}
