//! Every GPU conv algorithm against the f64 reference on random problems (GPU tier):
//! f32/f16/bf16, batch > 1, odd sizes, strides, padding (asymmetric), dilation, groups,
//! depthwise, 1x1, transposed with stride 2 and 3 and output_padding. Outputs start
//! poisoned (NaN) so an unwritten element fails.

mod common;
use common::{download, upload};

use candle_core::DType;
use conv_engine::reference::conv_f64;
use conv_engine::testing::activation_f64;
use conv_engine::testing::{Channels, RandomConv2d};
use conv_engine::{Algorithm, Conv2dParams, ConvProblem};
use rand::{Rng, SeedableRng, rngs::StdRng};
use rocm_backend::RocmConv;
use rocm_backend::conv::{Activation, Epilogue};

fn random_problem(rng: &mut StdRng, i: usize) -> ConvProblem {
    let groups = match i % 7 {
        0 => 2,
        1 => 4,
        _ => 1,
    };
    let spec = RandomConv2d {
        dtype: [DType::F32, DType::F32, DType::F16, DType::BF16][i % 4],
        transposed: i % 3 == 2,
        batch: 1..4,
        size: 1..40,
        kernel: 1..6,
        pointwise: i % 5 == 0,
    };
    spec.draw(rng, |rng| {
        let (c, k) = (groups * rng.random_range(1..9), groups * rng.random_range(1..20));
        if i % 11 == 3 {
            let c = rng.random_range(2..17);
            return Channels { input: c, output: c, groups: c }; // depthwise
        }
        Channels { input: c, output: k, groups }
    })
}

/// Every algorithm with every epilogue (bias, activation, residual, scale).
#[test]
fn every_gpu_algorithm_matches_the_f64_reference() {
    let Some(dev) = common::device() else { return };
    let mut rng = StdRng::seed_from_u64(0x6e4);
    let engines: Vec<(Algorithm, RocmConv)> =
        [Algorithm::ImplicitGemm, Algorithm::Im2colGemm, Algorithm::Gemm1x1, Algorithm::Direct]
            .into_iter()
            .map(|a| (a, RocmConv::new(dev.clone()).with_allowed(&[a])))
            .collect();
    let mut runs = std::collections::BTreeMap::<String, usize>::new();
    for i in 0..240 {
        let p = random_problem(&mut rng, i);
        let g = p.geometry();
        let dt = p.dtype().to_candle();
        let xv: Vec<f64> = (0..g.input_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let wv: Vec<f64> = (0..g.weight_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let bv: Vec<f64> = (0..g.out_channels).map(|_| rng.random_range(-1.0..1.0)).collect();
        let (x, xe) = upload(&dev, &xv, dt);
        let (w, we) = upload(&dev, &wv, dt);
        let (b, be) = upload(&dev, &bv, dt);
        let rv: Vec<f64> = (0..g.output_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let (res, rese) = upload(&dev, &rv, dt);
        // Every epilogue on every algorithm: the activation by i, a residual on odd i, a scale.
        let activation =
            [Activation::Identity, Activation::Relu, Activation::LeakyRelu(0.1), Activation::Silu, Activation::Gelu]
                [i % 5];
        let epilogue = Epilogue { activation, residual: (i % 2 == 1).then_some(&res), scale: [1.0, 0.5, 1.5][i % 3] };
        let want: Vec<f64> = conv_f64(&p, &xe, &we, Some(&be))
            .iter()
            .zip(&rese)
            .map(|(v, r)| (activation_f64(activation, *v) + if i % 2 == 1 { *r } else { 0.0 }) * epilogue.scale as f64)
            .collect();
        *runs.entry(format!("epilogue {activation:?}")).or_default() += 1;
        let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        let tol = if dt == DType::F32 { 1e-5 } else { 1e-2 } * scale;
        for (alg, engine) in &engines {
            let plan = match engine.plan(&p) {
                Ok(plan) => plan,
                Err(_) => continue, // the algorithm does not support this problem
            };
            let out = rocm_backend::conv::run_plan_fused(&dev, &plan, &x, &w, Some(&b), epilogue)
                .unwrap_or_else(|e| panic!("{alg} on {p}: {e}"));
            let got = download(&out);
            for (j, (o, r)) in got.iter().zip(&want).enumerate() {
                assert!(
                    (o - r).abs() <= tol,
                    "{alg} ({}) on {p} with {activation:?}: element {j}: {o} vs {r}",
                    plan.kernel()
                );
            }
            *runs.entry(format!("{alg} {dt:?}")).or_default() += 1;
        }
    }
    println!("GPU conv runs: {runs:?}");
    for key in [
        "ImplicitGemm F32",
        "ImplicitGemm F16",
        "ImplicitGemm BF16",
        "Im2colGemm F32",
        "Im2colGemm BF16",
        "Gemm1x1 F32",
        "Direct F32",
        "epilogue LeakyRelu(0.1)",
        "epilogue Gelu",
    ] {
        assert!(runs.get(key).copied().unwrap_or(0) >= 5, "{key} ran {:?} times", runs.get(key));
    }
}

/// A 1024² conv at 256 channels with 256 MiB of workspace allowed beyond its tensors:
/// it runs (implicit or chunked) and the allocator's peak never passes the budget.
#[test]
fn budget_holds_on_a_1024_square_256_channel_conv() {
    let Some(dev) = common::device() else { return };
    let alloc = dev.allocator();
    alloc.trim(dev.stream()).unwrap();
    let dt = DType::F16;
    let p =
        ConvProblem::conv2d(&[1, 256, 1024, 1024], &[256, 256, 3, 3], dt, dt, &Conv2dParams::default().with_padding(1))
            .unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let xv: Vec<f64> = (0..p.geometry().input_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
    let wv: Vec<f64> = (0..p.geometry().weight_len()).map(|_| rng.random_range(-0.05..0.05)).collect();
    let (x, xe) = upload(&dev, &xv, dt);
    let (w, we) = upload(&dev, &wv, dt);
    let tensors = alloc.stats().live + rocm_backend::alloc::size_class(p.output_bytes());
    let budget = tensors + (256 << 20);
    alloc.set_budget(budget, dev.stream()).unwrap();
    alloc.reset_peaks();
    for alg in [Algorithm::Im2colGemm, Algorithm::ImplicitGemm] {
        let engine = RocmConv::new(dev.clone()).with_allowed(&[alg]);
        let plan = engine.plan(&p).unwrap();
        println!("{alg}: {} chunks, workspace {} bytes", plan.chunk_count(), plan.workspace_bytes());
        let out = rocm_backend::conv::run_plan(&dev, &plan, &x, &w, None).unwrap();
        dev.synchronize().unwrap();
        let peak = alloc.stats().peak_reserved;
        assert!(peak <= budget, "{alg}: peak {peak} > budget {budget}");
        // Spot-check 64 output elements against the f64 reference on their windows.
        let got = download(&out);
        let g = p.geometry();
        for _ in 0..64 {
            let (k, y, xq) = (rng.random_range(0..256), rng.random_range(0..1024), rng.random_range(0..1024));
            let mut r = 0.0;
            for c in 0..256 {
                for dy in 0..3 {
                    for dx in 0..3 {
                        let (iy, ix) = (y as isize + dy as isize - 1, xq as isize + dx as isize - 1);
                        if iy < 0 || ix < 0 || iy >= 1024 || ix >= 1024 {
                            continue;
                        }
                        r += xe[(c * 1024 + iy as usize) * 1024 + ix as usize] * we[((k * 256 + c) * 3 + dy) * 3 + dx];
                    }
                }
            }
            let o = got[(k * 1024 + y) * 1024 + xq];
            assert!((o - r).abs() <= 1e-2 * r.abs().max(1.0), "{alg}: out[{k},{y},{xq}] = {o}, reference {r}");
        }
        let _ = g;
    }
    alloc.set_budget(usize::MAX, dev.stream()).unwrap();
}

/// `--tune`'s mechanism on the device: every candidate is timed once per problem, the
/// winner is stored and then planned (measured), its output matches the f64 reference,
/// and under size-independent rounding the tuned kernel's output equals the default
/// kernel's bit for bit (the candidates there round alike, which tiling relies on).
#[test]
fn tuned_plans_are_measured_stored_and_exact() {
    use conv_engine::{ConvRounding, TuningStore};
    let Some(dev) = common::device() else { return };
    let mut rng = StdRng::seed_from_u64(0x70e);
    let params = Conv2dParams::default().with_padding(1);
    for (dt, c, k) in [(DType::F16, 64, 64), (DType::BF16, 32, 96), (DType::F32, 48, 64)] {
        let p = ConvProblem::conv2d(&[1, c, 40, 56], &[k, c, 3, 3], dt, dt, &params).unwrap();
        let g = p.geometry();
        let xv: Vec<f64> = (0..g.input_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let wv: Vec<f64> = (0..g.weight_len()).map(|_| rng.random_range(-0.2..0.2)).collect();
        let (x, xe) = upload(&dev, &xv, dt);
        let (w, we) = upload(&dev, &wv, dt);
        let want = conv_f64(&p, &xe, &we, None);
        let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        let tol = if dt == DType::F32 { 1e-5 } else { 1e-2 } * scale;
        for rounding in [ConvRounding::Fastest, ConvRounding::SizeIndependent] {
            let store = std::sync::Arc::new(TuningStore::in_memory());
            let engine = RocmConv::with_store(dev.clone(), store.clone());
            let default_plan = engine.plan_rounded(&p, rounding).unwrap();
            assert!(!default_plan.measured());
            let default_out = download(&engine.run_rounded(&p, &x, &w, None, Epilogue::default(), rounding).unwrap());
            engine.start_tuning(std::time::Duration::from_secs(60));
            let tuned_out = engine.run_rounded(&p, &x, &w, None, Epilogue::default(), rounding).unwrap();
            let report = engine.finish_tuning().unwrap().expect("a tuning run was started");
            println!("{p} ({rounding:?}):\n{report}");
            assert!(report.contains("tuned 1 problem"), "{report}");
            assert_eq!(store.len(), 1);
            let plan = engine.plan_rounded(&p, rounding).unwrap();
            assert!(plan.measured(), "{p}: the stored winner is planned");
            let tuned_out = download(&tuned_out);
            for (j, (o, r)) in tuned_out.iter().zip(&want).enumerate() {
                assert!((o - r).abs() <= tol, "{p} {rounding:?} ({}): element {j}: {o} vs {r}", plan.kernel());
            }
            if rounding == ConvRounding::SizeIndependent {
                assert_eq!(plan.algorithm(), default_plan.algorithm(), "{p}: the algorithm stays the model's");
                for (j, (a, b)) in tuned_out.iter().zip(&default_out).enumerate() {
                    assert!(
                        a.to_bits() == b.to_bits(),
                        "{p}: {} and {} round differently at {j}: {a} vs {b}",
                        plan.kernel(),
                        default_plan.kernel()
                    );
                }
            }
        }
    }
}
