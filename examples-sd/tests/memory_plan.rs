//! `Decoder::plan` against what the decode really allocates: on the CPU the heap's peak
//! (a counting global allocator) while decoding, on ROCm the allocator's peak of live
//! bytes. Within 5% at each size and dtype.

mod common;

use common::*;
use examples_sd::{DecodePlan, Decoder, Encoder};
use rocm_vision::{DType, Device, Tensor, format_bytes};
use std::sync::Mutex;
use test_support::CountingAlloc;

#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::new();

/// The allocator counts every thread: one measurement at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `(plan, measured decode peak, live bytes at each stage the decoder reports)`. With a
/// budget, the decode runs as `sd-vae-decode --vram-budget` runs it: the plan's scratch
/// caps, and on the CPU its conv workspace cap.
fn plan_and_measure(
    device: &Device,
    dtype: DType,
    latent: usize,
    budget: Option<usize>,
) -> (DecodePlan, usize, Vec<(String, usize)>) {
    let config = config("sd");
    let up = config.upscale();
    let plan = Decoder::plan(&config, device, (latent * up, latent * up), dtype, budget).expect("plan");
    let device = &match (device.is_cpu(), plan.conv_workspace, budget) {
        (true, Some(ws), Some(_)) => Device::cpu_with_budget(rocm_vision::Budget::bytes(ws)),
        _ => device.clone(),
    };
    let mut dec = load_decoder_on("sd", &fixture("sd_vae_diffusers.safetensors"), dtype, device);
    dec.set_scratch_caps(plan.caps);
    let latents = Tensor::rand_normal(&[1, 4, latent, latent], (0.0, 1.0), 11, 0, DType::F32, device).unwrap();
    // The first decode warms up what is made once (thread pools, plan caches).
    dec.decode(&latents, &mut |_, _| {}).unwrap();
    let measured = match device.rocm_device() {
        None => {
            let base = HEAP.current();
            let mut stages = Vec::new();
            let (img, peak) = HEAP.peak_during(|| {
                dec.decode(&latents, &mut |name, _| stages.push((name.to_string(), HEAP.current() - base))).unwrap()
            });
            assert!(!img.to_vec::<f32>().unwrap().iter().any(|v| !v.is_finite()));
            (peak, stages)
        }
        Some(rocm) => {
            device.synchronize().unwrap();
            let base = rocm.allocator().stats().live;
            rocm.allocator().reset_peaks();
            let img = dec.decode(&latents, &mut |_, _| {}).unwrap();
            device.synchronize().unwrap();
            drop(img);
            (rocm.allocator().stats().peak_live - base, vec![])
        }
    };
    (plan, measured.0, measured.1)
}

fn check(device: &Device, dtype: DType, latent: usize, budget: Option<usize>) -> DecodePlan {
    let (plan, measured, stages) = plan_and_measure(device, dtype, latent, budget);
    let ratio = plan.decode_peak as f64 / measured as f64;
    println!(
        "{dtype:?} {}x{}{}: plan {} (at {}; engine scratch {}), measured {}, plan/measured {ratio:.4}",
        plan.width,
        plan.height,
        budget.map_or(String::new(), |b| format!(" budget {}", format_bytes(b))),
        format_bytes(plan.decode_peak),
        plan.peak_at,
        format_bytes(plan.engine_scratch),
        format_bytes(measured),
    );
    let report = || {
        let mut s = String::from("plan per stage (peak / live after):\n");
        for st in &plan.stages {
            s += &format!("  {}: {} / {}\n", st.name, st.peak, st.live_after);
        }
        s += "measured live at the decoder's stage reports:\n";
        for (name, live) in &stages {
            s += &format!("  {name}: {live}\n");
        }
        s
    };
    // On the CPU the gemm crate grows its packing buffers per rayon thread, once, and
    // keeps them (the plan's `engine_scratch`, an upper bound, convolutions and the
    // attention's products): a thread that first packs during the measured decode (the
    // warm-up ran on others; CI once saw 1 MiB, one Zen 4 L2 slab, appear in the mid
    // block's attention with a plan that left the products out) adds them to the peak. So the
    // measured peak may exceed the plan's decode peak by at most that, and never fall
    // more than 5% below it.
    let within = (ratio - 1.0).abs() <= 0.05
        || (ratio <= 1.05 && measured <= (plan.decode_peak + plan.engine_scratch) * 105 / 100);
    assert!(
        within,
        "{dtype:?} latent {latent}: plan/measured {ratio:.4} (engine scratch {})\n{}",
        format_bytes(plan.engine_scratch),
        report()
    );
    assert_eq!(plan.peak, plan.weights + plan.engine_scratch + plan.decode_peak);
    plan
}

/// The CPU with an engine of its own: `Device::cpu()` shares one engine, and so one plan
/// cache, across the process, and a plan cached by another test (made with other bytes
/// live) is reused where it fits, which the walk does not model.
fn fresh_cpu() -> Device {
    Device::cpu_with_engine(conv_cpu::CpuConv::default())
}

#[test]
fn cpu_plan_matches_the_measured_heap_peak() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let device = fresh_cpu();
    for dtype in [DType::F32, DType::F16] {
        for latent in [16, 32, 64] {
            let plan = check(&device, dtype, latent, None);
            assert!(plan.fits && plan.budget.is_none(), "{plan}");
        }
    }
}

/// The same at the 1024² and 2048² (the reduced fixture configuration; ~1.5 GB of
/// heap and minutes on 2 cores, so not in every CI run).
#[test]
#[ignore = "slow: 590 s on the shared 2-core Zen 4 (2026-12-04, plan/measured 1.0000 at 1024² and 2048², f32 and f16); run with --ignored"]
fn cpu_plan_matches_the_measured_heap_peak_at_1024_and_2048() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let device = fresh_cpu();
    for dtype in [DType::F32, DType::F16] {
        for latent in [128, 256] {
            let plan = check(&device, dtype, latent, None);
            assert!(plan.fits && plan.budget.is_none(), "{plan}");
        }
    }
}

/// With a budget: tight scratch caps (attention in query chunks, the upsamplers in bands)
/// and a conv workspace cap, as the CLI runs it; the plan still matches, says it fits, and
/// a budget below the peak says it does not and which tiles would.
#[test]
fn cpu_plan_with_a_budget_matches_and_says_whether_it_fits() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let device = fresh_cpu();
    let config = config("sd");
    for dtype in [DType::F32, DType::F16] {
        let free = Decoder::plan(&config, &device, (512, 512), dtype, None).unwrap();
        // The unbudgeted peak as the budget: the caps shrink from the library's defaults
        // to the budget's share (the peak is the upsamplers' since the CPU's f32 attention
        // keeps one score chunk, 2026-12-07; half the peak no longer holds them).
        let budget = free.peak;
        let plan = check(&device, dtype, 64, Some(budget));
        assert!(plan.fits && plan.peak <= budget, "{plan}");
        assert!(plan.caps.attention_scores < free.caps.attention_scores, "{:?}", plan.caps);
        assert!(plan.to_string().contains("fits the budget"), "{plan}");
        // Below the peak: not exact; the tile a --tiled decode would take.
        let tight = Decoder::plan(&config, &device, (512, 512), dtype, Some(plan.weights + (17 << 20))).unwrap();
        assert!(!tight.fits, "{tight}");
        let t = tight.tiled.expect("a tile that fits");
        assert!(t.tile < 64, "{t:?}");
        assert!(tight.to_string().contains("needs --tiled"), "{tight}");
    }
    let e = Decoder::plan(&config, &device, (500, 512), DType::F32, None).unwrap_err().to_string();
    assert!(e.contains("500x512") && e.contains("multiple of 8"), "{e}");
}

/// The same on a ROCm GPU (GPU tier; 1.000-1.012x the allocator's peak at 512²-2048² f32/f16 on
/// the H200, 2026-12-04); without one it says so and checks nothing.
#[test]
fn gpu_plan_matches_the_allocator_peak() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(device) = rocm_or_skip() else { return };
    for dtype in [DType::F32, DType::F16] {
        for latent in [64, 128, 256] {
            check(&device, dtype, latent, None);
        }
    }
}

/// `Encoder::plan` against the heap's peak while encoding a `size²` image (the reduced SD
/// configuration), as `sd-vae-encode` runs it (with a budget: its scratch caps and conv
/// workspace cap). Within 5%, the gemm crate's per-thread packing allowed as above.
fn check_encode(device: &Device, dtype: DType, size: usize, budget: Option<usize>) -> examples_sd::EncodePlan {
    let config = config("sd");
    let plan = Encoder::plan(&config, device, (size, size), dtype, budget).expect("plan");
    let device = &match (plan.conv_workspace, budget) {
        (Some(ws), Some(_)) => Device::cpu_with_budget(rocm_vision::Budget::bytes(ws)),
        _ => device.clone(),
    };
    let mut enc = load_encoder_on("sd", &fixture("sd_encoder_diffusers.safetensors"), dtype, device);
    enc.set_scratch_caps(plan.caps);
    let image = Tensor::rand_uniform(&[1, 3, size, size], (-1.0, 1.0), 12, 0, DType::F32, device).unwrap();
    enc.encode(&image, &mut |_, _| {}).unwrap();
    let base = HEAP.current();
    let mut stages = Vec::new();
    let (dist, measured) = HEAP.peak_during(|| {
        enc.encode(&image, &mut |name, _| stages.push((name.to_string(), HEAP.current() - base))).unwrap()
    });
    assert!(!dist.mean.to_vec::<f32>().unwrap().iter().any(|v| !v.is_finite()));
    let ratio = plan.encode_peak as f64 / measured as f64;
    println!(
        "encode {dtype:?} {size}x{size}{}: plan {} (at {}; engine scratch {}), measured {}, plan/measured {ratio:.4}",
        budget.map_or(String::new(), |b| format!(" budget {}", format_bytes(b))),
        format_bytes(plan.encode_peak),
        plan.peak_at,
        format_bytes(plan.engine_scratch),
        format_bytes(measured),
    );
    let within = (ratio - 1.0).abs() <= 0.05
        || (ratio <= 1.05 && measured <= (plan.encode_peak + plan.engine_scratch) * 105 / 100);
    assert!(
        within,
        "encode {dtype:?} {size}: plan/measured {ratio:.4}\nplan: {:?}\nmeasured: {stages:?}",
        plan.stages.iter().map(|s| (&s.name, s.peak, s.live_after)).collect::<Vec<_>>()
    );
    assert_eq!(plan.peak, plan.weights + plan.engine_scratch + plan.encode_peak);
    plan
}

#[test]
fn cpu_encode_plan_matches_the_measured_heap_peak() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let device = fresh_cpu();
    for dtype in [DType::F32, DType::F16] {
        for size in [128, 256, 512] {
            let plan = check_encode(&device, dtype, size, None);
            assert!(plan.fits && plan.budget.is_none(), "{plan}");
        }
        // With a budget: small attention chunks and a conv workspace cap; still matched.
        let free = Encoder::plan(&config("sd"), &device, (512, 512), dtype, None).unwrap();
        let budget = free.weights + free.encode_peak * 3 / 4 + (16 << 20);
        let plan = check_encode(&device, dtype, 512, Some(budget));
        assert!(plan.fits && plan.peak <= budget && plan.to_string().contains("fits the budget"), "{plan}");
        let tight = Encoder::plan(&config("sd"), &device, (512, 512), dtype, Some(plan.weights + (17 << 20))).unwrap();
        assert!(!tight.fits && tight.to_string().contains("does not fit"), "{tight}");
    }
    let e = Encoder::plan(&config("sd"), &device, (512, 500), DType::F32, None).unwrap_err().to_string();
    assert!(e.contains("512x500") && e.contains("multiple of 8"), "{e}");
}
