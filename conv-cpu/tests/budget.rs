//! The budget is never exceeded: over a grid of problems and budgets of 1 MiB and 16 MiB,
//! the heap growth while a convolution runs — counted by this binary's global allocator,
//! not estimated — minus the output tensor stays within the budget, the plan's reported
//! workspace is an upper bound of it, and the result still matches the reference.
//!
//! One test function per binary: the counting allocator sees every thread of the process.

use candle_core::{DType, Device, Tensor};
use conv_cpu::CpuConv;
use conv_engine::reference::conv_f64;
use conv_engine::{Algorithm, Budget, Conv2dParams, ConvError, ConvProblem, Padding2d};
use rand::{Rng, SeedableRng, rngs::StdRng};
use test_support::CountingAlloc;

#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::new();

/// Engine bookkeeping that is not workspace: the plan, its chunk list, the plan-cache
/// entry, the tracing machinery. Measured well under this; a fixed allowance, not a
/// fraction of the budget.
const BOOKKEEPING: usize = 64 << 10;

#[test]
fn counted_workspace_stays_within_1_and_16_mib() {
    let mut rng = StdRng::seed_from_u64(42);
    // (N, C, H, W, K, kernel, stride, pad): from tiny to a 32-channel 256² layer whose
    // candle workspace (an NHWC input copy and its result) passes 16 MiB, so it must chunk;
    // and the VAE encoder's downsampler (stride 2, padded only at the bottom and right),
    // which candle runs on an explicitly padded copy.
    type Shape = (usize, usize, usize, usize, usize, usize, usize, Padding2d);
    let u = Padding2d::uniform;
    let shapes: &[Shape] = &[
        (1, 8, 16, 16, 8, 3, 1, u(1)),
        (2, 16, 33, 31, 12, 3, 2, u(1)),
        (1, 64, 64, 64, 64, 3, 1, u(1)),
        (1, 32, 256, 256, 32, 3, 1, u(1)),
        (3, 32, 48, 40, 64, 1, 1, u(0)),
        (1, 256, 32, 32, 128, 1, 1, u(0)),
        (2, 16, 40, 40, 32, 5, 1, u(2)),
        (1, 16, 128, 128, 16, 3, 2, Padding2d::tblr(0, 1, 0, 1)),
    ];
    // Warm-up: rayon's pool and the gemm crate's per-thread slabs are allocated once per
    // process; they are part of the reported bound but would blur the first measurement.
    let warm = CpuConv::new(Budget::bytes(1 << 30));
    let x = Tensor::ones((1, 4, 8, 8), DType::F32, &Device::Cpu).unwrap();
    let w = Tensor::ones((4, 4, 3, 3), DType::F32, &Device::Cpu).unwrap();
    for alg in [Algorithm::ImplicitGemm, Algorithm::Im2colGemm, Algorithm::Winograd, Algorithm::Direct] {
        warm.run_plan(
            &CpuConv::new(Budget::bytes(1 << 30)).with_allowed(&[alg]).plan(&conv_problem(&x, &w)).unwrap(),
            &x,
            &w,
            None,
        )
        .unwrap();
    }

    let (mut ran, mut refused) = (0, 0);
    for &(n, c, h, w, k, r, s, p) in shapes {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let params = Conv2dParams { stride: [s, s], padding: p, ..Default::default() };
            let problem = ConvProblem::conv2d(&[n, c, h, w], &[k, c, r, r], dt, dt, &params).unwrap();
            let xv: Vec<f32> = (0..n * c * h * w).map(|_| rng.random_range(-1.0..1.0)).collect();
            let wv: Vec<f32> = (0..k * c * r * r).map(|_| rng.random_range(-1.0..1.0)).collect();
            let x = Tensor::from_vec(xv, (n, c, h, w), &Device::Cpu).unwrap().to_dtype(dt).unwrap();
            let wt = Tensor::from_vec(wv, (k, c, r, r), &Device::Cpu).unwrap().to_dtype(dt).unwrap();
            let to64 = |t: &Tensor| t.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
            let want = conv_f64(&problem, &to64(&x), &to64(&wt), None);
            let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            let tol = if dt == DType::F32 { 1e-5 } else { 1e-2 } * scale;

            for &budget in &[1usize << 20, 16 << 20] {
                for alg in [
                    Algorithm::ImplicitGemm,
                    Algorithm::Im2colGemm,
                    Algorithm::Gemm1x1,
                    Algorithm::Winograd,
                    Algorithm::Direct,
                ] {
                    // Direct is the zero-workspace fallback; on the large shapes it only
                    // costs test time.
                    if alg == Algorithm::Direct && problem.geometry().flops() > 200_000_000 {
                        continue;
                    }
                    let engine = CpuConv::new(Budget::bytes(budget)).with_allowed(&[alg]);
                    let plan = match engine.plan(&problem) {
                        Ok(plan) => plan,
                        Err(ConvError::BudgetExceeded { needed, available, .. }) => {
                            // Refusing is the honest outcome when even one row does not fit.
                            assert!(needed > available && available == budget, "{problem}: {alg}");
                            refused += 1;
                            continue;
                        }
                        Err(ConvError::NoAlgorithm { .. }) => continue, // unsupported (e.g. bf16 in candle)
                        Err(e) => panic!("{problem}: {alg}: {e}"),
                    };
                    assert!(plan.workspace_bytes() <= budget, "{problem}: plan {plan:?} over budget {budget}");

                    let (out, peak) = HEAP.peak_during(|| engine.run_plan(&plan, &x, &wt, None).unwrap());
                    let workspace = peak.saturating_sub(problem.output_bytes());
                    println!(
                        "budget {budget:>8} {problem}: {alg} x{} chunks, reported {} counted {workspace} bytes",
                        plan.chunk_count(),
                        plan.workspace_bytes()
                    );
                    assert!(
                        workspace <= budget + BOOKKEEPING,
                        "{problem}: {alg} used {workspace} bytes beyond the output, budget {budget}"
                    );
                    assert!(
                        workspace <= plan.workspace_bytes() + BOOKKEEPING,
                        "{problem}: {alg} used {workspace} bytes, reported {}",
                        plan.workspace_bytes()
                    );
                    for (i, (g, r)) in to64(&out).iter().zip(&want).enumerate() {
                        assert!((g - r).abs() <= tol, "{problem}: {alg}: element {i}: {g} vs {r}");
                    }
                    ran += 1;
                }
            }
        }
    }
    println!("{ran} budgeted runs, {refused} refusals");
    assert!(ran >= 60, "only {ran} runs");
}

fn conv_problem(x: &Tensor, w: &Tensor) -> ConvProblem {
    ConvProblem::conv2d(x.dims(), w.dims(), x.dtype(), w.dtype(), &Conv2dParams::default()).unwrap()
}
