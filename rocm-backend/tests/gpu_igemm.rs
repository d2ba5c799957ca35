//! The NHWC implicit-GEMM kernels (igemm_mma.hip) on the GPU tier, against f64 references:
//!
//! - the MMA layer alone: one 16x16x32 product through the native fragment code and
//!   through the gfx11 / gfx12 WMMA emulations (the RDNA lane layouts, executed on the
//!   tier's 32-lane warps) against a plain GEMM;
//! - every configuration (matrix-core f16/bf16, FMA f32, and the gfx11 / gfx12 emulations)
//!   on random convolutions: forward and transposed (phases), groups, odd sizes, strides,
//!   dilation, asymmetric padding, an RGB stem (3 input channels) and a 3-channel head,
//!   split-K, the fused epilogue (bias, relu/silu, residual);
//! - the dispatcher's ImplicitGemm plans, chunked by a tight budget.
//!
//! Outputs start poisoned (NaN), so an element the kernels never write fails.
//! Skips without a device (`ROCM_VISION_REQUIRE_GPU=1` makes that a failure).

mod common;
use common::{download, poisoned, upload};

use candle_core::DType;
use conv_engine::reference::conv_f64;
use conv_engine::testing::activation_f64;
use conv_engine::testing::{Channels, RandomConv2d};
use conv_engine::{Algorithm, Conv2dParams, ConvProblem};
use kernels::{IGEMM_EMU_CONFIGS, IGEMM_MMA_CONFIGS, IGEMM_SIMT_CONFIGS, IgemmNhwcConfig, MmaVariant};
use rand::{Rng, SeedableRng, rngs::StdRng};
use rocm_backend::conv::{Activation, Epilogue, IgemmKernel, run_implicit_gemm_into};
use rocm_backend::launch::{Arg, Grid, Kernel, launch};
use rocm_backend::{RocmConv, RocmDevice};
use std::sync::Arc;

#[test]
fn mma_layer_tiles_match_a_plain_gemm() {
    let Some(dev) = common::device() else { return };
    let warp = dev.info().warp_size as u32;
    let mut rng = StdRng::seed_from_u64(0x77a);
    let mut ran = Vec::new();
    for (variant, family, block) in [
        ("native", &kernels::family::MMA_TILE_NATIVE, warp),
        ("emu11", &kernels::family::MMA_TILE_EMU11, 32),
        ("emu12", &kernels::family::MMA_TILE_EMU12, 32),
    ] {
        if variant != "native" && warp != 32 {
            eprintln!("the {variant} emulation needs 32-lane waves; this device has {warp}: not run");
            continue;
        }
        for dt in [DType::F16, DType::BF16] {
            for round in 0..4 {
                // A [16][32], B as [16 n][32 k], C [16][16]; round 3 uses integers, exact in
                // every dtype and in f32 accumulation, so any layout slip is an exact miss.
                let draw = |rng: &mut StdRng| {
                    if round == 3 { rng.random_range(-4..5) as f64 } else { rng.random_range(-1.0..1.0) }
                };
                let av: Vec<f64> = (0..16 * 32).map(|_| draw(&mut rng)).collect();
                let bv: Vec<f64> = (0..16 * 32).map(|_| draw(&mut rng)).collect();
                let cv: Vec<f64> = (0..256).map(|_| draw(&mut rng)).collect();
                let (a, ae) = upload(&dev, &av, dt);
                let (b, be) = upload(&dev, &bv, dt);
                let (c, ce) = upload(&dev, &cv, DType::F32);
                let d = poisoned(&dev, DType::F32, 256);
                let kernel =
                    Kernel::new(family, "", if dt == DType::F16 { kernels::DType::F16 } else { kernels::DType::BF16 })
                        .expect("registered");
                let entry = kernel.entry().to_string();
                launch(
                    &dev,
                    &kernel,
                    Grid::Explicit { grid: (1, 1, 1), block: (block, 1, 1) },
                    &mut [Arg::Ptr(a.ptr_at(0)), Arg::Ptr(b.ptr_at(0)), Arg::Ptr(c.ptr_at(0)), Arg::Ptr(d.ptr_at(0))],
                )
                .unwrap_or_else(|e| panic!("{entry}: {e}"));
                let got = download(&d);
                for m in 0..16 {
                    for n in 0..16 {
                        let want = ce[m * 16 + n] + (0..32).map(|k| ae[m * 32 + k] * be[n * 32 + k]).sum::<f64>();
                        let o = got[m * 16 + n];
                        let tol = if round == 3 { 0.0 } else { 1e-5 * want.abs().max(1.0) };
                        assert!((o - want).abs() <= tol, "{entry} round {round}: D[{m}][{n}] = {o}, plain GEMM {want}");
                    }
                }
            }
            ran.push(format!("{variant}/{dt:?}"));
        }
    }
    println!("MMA tile checks: {ran:?}");
    assert!(ran.len() >= 2);
}

/// A random problem for the NHWC kernels; `i` steers the mix.
fn random_problem(rng: &mut StdRng, i: usize, dt: DType) -> ConvProblem {
    let groups = [1, 1, 2, 3][i % 4];
    let spec =
        RandomConv2d { dtype: dt, transposed: i % 3 == 1, batch: 1..4, size: 1..30, kernel: 1..5, pointwise: false };
    spec.draw(rng, |rng| {
        let (mut c, mut k) = (groups * rng.random_range(1..24), groups * rng.random_range(1..40));
        match i % 9 {
            4 => c = 3 * groups, // RGB stem
            5 => k = 3 * groups, // 3-channel head
            6 => (c, k) = (groups * rng.random_range(24..48), groups * rng.random_range(40..80)),
            _ => {}
        }
        Channels { input: c, output: k, groups }
    })
}

/// Runs `kernel` on `p` with random data and an epilogue chosen by `i`, against the f64
/// reference. Returns the largest error relative to the output's scale.
fn check(dev: &Arc<RocmDevice>, rng: &mut StdRng, p: &ConvProblem, kernel: IgemmKernel, i: usize, what: &str) -> f64 {
    let g = p.geometry();
    let dt = p.dtype().to_candle();
    let xv: Vec<f64> = (0..g.input_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let wv: Vec<f64> = (0..g.weight_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let bv: Vec<f64> = (0..g.out_channels).map(|_| rng.random_range(-1.0..1.0)).collect();
    let rv: Vec<f64> = (0..g.output_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let (x, xe) = upload(dev, &xv, dt);
    let (w, we) = upload(dev, &wv, dt);
    let (b, be) = upload(dev, &bv, dt);
    let (res, rese) = upload(dev, &rv, dt);
    let activation =
        [Activation::Identity, Activation::Relu, Activation::Silu, Activation::LeakyRelu(0.2), Activation::Gelu][i % 5];
    let residual = (i % 2 == 1).then_some(&res);
    let scale = [1.0f32, 0.5, 1.0][i % 3];
    let mut want = conv_f64(p, &xe, &we, Some(&be));
    for (j, v) in want.iter_mut().enumerate() {
        *v = (activation_f64(activation, *v) + if residual.is_some() { rese[j] } else { 0.0 }) * scale as f64;
    }
    let out = poisoned(dev, dt, g.output_len());
    run_implicit_gemm_into(dev, p, kernel, &x, &w, Some(&b), Epilogue { activation, residual, scale }, &out)
        .unwrap_or_else(|e| panic!("{what} on {p}: {e}"));
    let got = download(&out);
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let tol = if dt == DType::F32 { 1e-5 } else { 1e-2 };
    let mut worst = 0.0f64;
    for (j, (o, r)) in got.iter().zip(&want).enumerate() {
        let err = (o - r).abs() / scale;
        assert!(
            err <= tol,
            "{what} on {p} ({activation:?}, residual {}): element {j} of {}: {o} vs {r}",
            residual.is_some(),
            got.len()
        );
        worst = worst.max(err);
    }
    worst
}

fn kernel(variant: MmaVariant, config: &'static IgemmNhwcConfig, splits: u32) -> IgemmKernel {
    IgemmKernel::Nhwc { variant, config, splits }
}

#[test]
fn every_nhwc_configuration_matches_the_f64_reference() {
    let Some(dev) = common::device() else { return };
    let warp = dev.info().warp_size;
    let mut rng = StdRng::seed_from_u64(0x16e);
    let mut cases: Vec<(String, DType, IgemmKernel)> = Vec::new();
    // The NVIDIA-only tiles trap on AMD targets (kernels::IgemmNhwcConfig::nvidia_only).
    let nvidia = dev.info().family == rocm_backend::ArchFamily::NvidiaTestTier;
    for cfg in IGEMM_MMA_CONFIGS.iter().filter(|c| nvidia || !c.nvidia_only) {
        for dt in [DType::F16, DType::BF16] {
            cases.push((format!("mma {} {dt:?}", cfg.name), dt, kernel(MmaVariant::Native, cfg, 1)));
        }
    }
    for cfg in &IGEMM_SIMT_CONFIGS {
        cases.push((format!("simt {} F32", cfg.name), DType::F32, kernel(MmaVariant::Native, cfg, 1)));
    }
    if warp == 32 {
        for cfg in &IGEMM_EMU_CONFIGS {
            for dt in [DType::F16, DType::BF16] {
                cases.push((format!("emu11 {} {dt:?}", cfg.name), dt, kernel(MmaVariant::EmulateGfx11, cfg, 1)));
                cases.push((format!("emu12 {} {dt:?}", cfg.name), dt, kernel(MmaVariant::EmulateGfx12, cfg, 1)));
            }
        }
    } else {
        eprintln!("the RDNA emulations need 32-lane waves; this device has {warp}: not run");
    }
    let mut runs = 0;
    for (name, dt, k) in &cases {
        let mut worst = 0.0f64;
        for i in 0..9 {
            let p = random_problem(&mut rng, i, *dt);
            // Split-K on every third problem (3 splits; partials + the reduction kernel).
            let k = match (*k, i % 3) {
                (IgemmKernel::Nhwc { variant, config, .. }, 2) => IgemmKernel::Nhwc { variant, config, splits: 3 },
                (k, _) => k,
            };
            worst = worst.max(check(&dev, &mut rng, &p, k, i, name));
            runs += 1;
        }
        println!("{name}: 9 problems, worst error {worst:.2e} of the output scale");
    }
    assert_eq!(runs, 9 * cases.len());
    assert!(cases.len() >= 17, "{} kernels checked", cases.len());
}

#[test]
fn emulated_rdna_kernels_agree_with_a_plain_gemm_on_1x1_convolutions() {
    // A 1x1, stride-1 convolution is exactly a GEMM (M = pixels, N = k, K = c): the
    // emulated RDNA fragment code against it on larger tiles than the random problems use.
    let Some(dev) = common::device() else { return };
    if dev.info().warp_size != 32 {
        common::skipped("the RDNA emulations need 32-lane waves");
        return;
    }
    let mut rng = StdRng::seed_from_u64(0x1d1);
    for dt in [DType::F16, DType::BF16] {
        let p = ConvProblem::conv2d(&[2, 96, 33, 31], &[160, 96, 1, 1], dt, dt, &Conv2dParams::default()).unwrap();
        for cfg in &IGEMM_EMU_CONFIGS {
            for variant in [MmaVariant::EmulateGfx11, MmaVariant::EmulateGfx12] {
                check(&dev, &mut rng, &p, kernel(variant, cfg, 1), 0, &format!("{variant:?} {}", cfg.name));
                check(&dev, &mut rng, &p, kernel(variant, cfg, 2), 1, &format!("{variant:?} {} split 2", cfg.name));
            }
        }
    }
}

#[test]
fn dispatcher_runs_the_nhwc_path_within_a_tight_budget() {
    let Some(dev) = common::device() else { return };
    let alloc = dev.allocator();
    let mut rng = StdRng::seed_from_u64(0xb0d);
    for (dt, transposed) in [(DType::F16, false), (DType::BF16, true), (DType::F32, false), (DType::F32, true)] {
        let p = if transposed {
            ConvProblem::conv_transpose2d(
                &[2, 64, 40, 36],
                &[64, 32, 4, 4],
                dt,
                dt,
                &Conv2dParams::default().with_stride(2).with_padding(1),
            )
            .unwrap()
        } else {
            ConvProblem::conv2d(&[2, 64, 80, 72], &[48, 64, 3, 3], dt, dt, &Conv2dParams::default().with_padding(1))
                .unwrap()
        };
        let g = p.geometry();
        let xv: Vec<f64> = (0..g.input_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let wv: Vec<f64> = (0..g.weight_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let (x, xe) = upload(&dev, &xv, dt);
        let (w, we) = upload(&dev, &wv, dt);
        let want = conv_f64(&p, &xe, &we, None);
        alloc.trim(dev.stream()).unwrap();
        let engine = RocmConv::new(dev.clone()).with_allowed(&[Algorithm::ImplicitGemm]);
        let whole = engine.plan(&p).unwrap();
        assert_eq!(whole.chunk_count(), 1);
        assert!(whole.workspace_bytes() > 0, "the NHWC path packs its input: {whole:?}");
        // A budget with a quarter of the whole-problem workspace: the plan must chunk.
        let tensors = alloc.stats().live + rocm_backend::alloc::size_class(p.output_bytes());
        let budget = tensors + whole.workspace_bytes() / 4;
        alloc.set_budget(budget, dev.stream()).unwrap();
        alloc.reset_peaks();
        let engine = RocmConv::new(dev.clone()).with_allowed(&[Algorithm::ImplicitGemm]);
        let plan = engine.plan(&p).unwrap();
        assert!(plan.chunk_count() > 1, "{p}: {plan:?}");
        let out = rocm_backend::conv::run_plan(&dev, &plan, &x, &w, None).unwrap();
        dev.synchronize().unwrap();
        let peak = alloc.stats().peak_reserved;
        alloc.set_budget(usize::MAX, dev.stream()).unwrap();
        assert!(peak <= budget, "{p}: peak {peak} > budget {budget}");
        let got = download(&out);
        let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        let tol = if dt == DType::F32 { 1e-5 } else { 1e-2 } * scale;
        for (j, (o, r)) in got.iter().zip(&want).enumerate() {
            assert!((o - r).abs() <= tol, "{p} in {} chunks: element {j}: {o} vs {r}", plan.chunk_count());
        }
        println!(
            "{p}: {} chunks, workspace {} bytes (whole: {})",
            plan.chunk_count(),
            plan.workspace_bytes(),
            whole.workspace_bytes()
        );
    }
}
