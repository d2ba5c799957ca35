//! MIOpen as the `Miopen` conv algorithm (feature `miopen`, GPU tier): its outputs against
//! the f64 reference on fresh random inputs (f32 and f16; batch > 1, stride 2, padding,
//! groups, depthwise, dilation, 1x1, transposed), outputs poisoned (NaN) before the run so
//! an unwritten element fails; batch-chunked plans; and the budget: a plan on MIOpen never
//! takes a solution whose workspace does not fit, and the allocator's peak never passes
//! the budget. Skips, saying why, without a ROCm device.
//!
//! The inputs' seed is printed; `ROCM_VISION_TEST_SEED=<n>` repeats a run.

mod common;
use common::{download, poisoned, upload};

use candle_core::DType;
use conv_engine::reference::conv_f64;
use conv_engine::{Algorithm, Conv2dParams, ConvProblem};
use rand::{Rng, SeedableRng, rngs::StdRng};
use rocm_backend::alloc::size_class;
use rocm_backend::conv::RocmPlan;
use rocm_backend::conv::{miopen_chunk_problem, run_miopen_into, run_plan};
use rocm_backend::miopen::{choose, footprint, supports};
use rocm_backend::{RocmConv, RocmDevice};
use std::sync::{Arc, Mutex};

/// The tests share the device (and its budget): one at a time.
static GPU: Mutex<()> = Mutex::new(());

fn seed() -> u64 {
    let s = std::env::var("ROCM_VISION_TEST_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64)
    });
    println!("seed {s} (ROCM_VISION_TEST_SEED={s} repeats this run)");
    s
}

fn random(rng: &mut StdRng, len: usize) -> Vec<f64> {
    (0..len).map(|_| rng.random_range(-1.0..1.0)).collect()
}

/// Every element within f32 1e-5 / f16 1e-2 of the reference, relative to its largest
/// magnitude (at least 1); NaN (never written) fails.
fn check(what: &str, got: &[f64], want: &[f64], dt: DType) {
    assert_eq!(got.len(), want.len(), "{what}: output length");
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let tol = if dt == DType::F32 { 1e-5 } else { 1e-2 } * scale;
    for (j, (o, r)) in got.iter().zip(want).enumerate() {
        assert!((o - r).abs() <= tol, "{what}: element {j}: {o} vs {r} (tolerance {tol})");
    }
}

struct Case {
    name: &'static str,
    p: ConvProblem,
    /// Whether MIOpen must run it; otherwise a problem it declines is reported and skipped.
    required: bool,
}

fn cases(dt: DType) -> Vec<Case> {
    let d = Conv2dParams::default();
    let fwd = |input: [usize; 4], weight: [usize; 4], params: Conv2dParams| {
        ConvProblem::conv2d(&input, &weight, dt, dt, &params).unwrap()
    };
    let tr = |input: [usize; 4], weight: [usize; 4], params: Conv2dParams| {
        ConvProblem::conv_transpose2d(&input, &weight, dt, dt, &params).unwrap()
    };
    vec![
        Case { name: "3x3 pad 1", p: fwd([2, 8, 17, 19], [12, 8, 3, 3], d.with_padding(1)), required: true },
        Case {
            name: "3x3 stride 2 pad 1",
            p: fwd([3, 16, 20, 21], [16, 16, 3, 3], d.with_padding(1).with_stride(2)),
            required: true,
        },
        Case { name: "4x4 stride 2 no pad", p: fwd([2, 5, 18, 14], [7, 5, 4, 4], d.with_stride(2)), required: true },
        Case {
            name: "3x3 groups 2",
            p: fwd([2, 8, 15, 15], [8, 4, 3, 3], d.with_padding(1).with_groups(2)),
            required: true,
        },
        Case {
            name: "3x3 depthwise",
            p: fwd([2, 12, 14, 13], [12, 1, 3, 3], d.with_padding(1).with_groups(12)),
            required: true,
        },
        Case { name: "1x1", p: fwd([2, 32, 9, 9], [24, 32, 1, 1], d), required: true },
        Case {
            name: "3x3 dilation 2",
            p: fwd([2, 6, 16, 16], [10, 6, 3, 3], d.with_padding(2).with_dilation(2)),
            required: false,
        },
        Case {
            name: "5x5 stride 2 dilation 2 groups 2",
            p: fwd([2, 4, 23, 20], [6, 2, 5, 5], d.with_padding(2).with_stride(2).with_dilation(2).with_groups(2)),
            required: false,
        },
        Case {
            name: "transposed 4x4 stride 2 pad 1",
            p: tr([2, 8, 7, 9], [8, 4, 4, 4], d.with_stride(2).with_padding(1)),
            required: true,
        },
        Case {
            name: "transposed 3x3 stride 2 pad 1 groups 2",
            p: tr([2, 8, 6, 6], [8, 3, 3, 3], d.with_stride(2).with_padding(1).with_groups(2)),
            required: false,
        },
    ]
}

#[test]
fn miopen_matches_the_f64_reference() {
    let _serial = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let Some(dev) = common::device() else { return };
    let mut rng = StdRng::seed_from_u64(seed());
    let engine = RocmConv::new(dev.clone()).with_allowed(&[Algorithm::Miopen]);
    assert_eq!(engine.dispatcher().allowed(), &[Algorithm::Miopen], "the miopen feature offers Miopen");
    let mut ran = 0;
    let mut declined = Vec::new();
    for dt in [DType::F32, DType::F16] {
        for case in cases(dt) {
            let p = case.p;
            let what = format!("{} {dt:?} ({p})", case.name);
            assert!(supports(&p), "{what}: MIOpen's descriptors express it");
            let plan = match engine.plan(&p) {
                Ok(plan) => plan,
                Err(e) if !case.required => {
                    declined.push(format!("{what}: {e}"));
                    continue;
                }
                Err(e) => panic!("{what}: no Miopen plan: {e}"),
            };
            assert_eq!(plan.algorithm(), Algorithm::Miopen, "{what}");
            let g = p.geometry();
            let (x, xe) = upload(&dev, &random(&mut rng, g.input_len()), dt);
            let (w, we) = upload(&dev, &random(&mut rng, g.weight_len()), dt);
            let want = conv_f64(&p, &xe, &we, None);
            let out = poisoned(&dev, dt, g.output_len());
            run_miopen_into(&dev, &plan, &x, &w, &out).unwrap_or_else(|e| panic!("{what}: {e}"));
            check(&what, &download(&out), &want, dt);
            // One image per chunk: each chunk a sub-problem at its own offsets.
            if g.batch > 1 {
                let one = conv_engine::Chunking { batch_per_chunk: 1, ..plan.chunking() };
                let per_image = engine
                    .dispatcher()
                    .plan_with(&p, Algorithm::Miopen, Some(one), engine.budget_state(p.output_bytes()))
                    .unwrap_or_else(|e| panic!("{what}: one image per chunk: {e}"));
                assert_eq!(per_image.chunk_count(), g.batch);
                let out = poisoned(&dev, dt, g.output_len());
                run_miopen_into(&dev, &per_image, &x, &w, &out).unwrap_or_else(|e| panic!("{what}, per image: {e}"));
                check(&format!("{what}, one image per chunk"), &download(&out), &want, dt);
            }
            // Through run_plan, with a bias.
            let (b, be) = upload(&dev, &random(&mut rng, g.out_channels), dt);
            let want_b = conv_f64(&p, &xe, &we, Some(&be));
            let out = run_plan(&dev, &plan, &x, &w, Some(&b)).unwrap_or_else(|e| panic!("{what}, run_plan: {e}"));
            check(&format!("{what}, run_plan with bias"), &download(&out), &want_b, dt);
            ran += 1;
        }
    }
    println!("MIOpen ran {ran} problems; declined: {declined:#?}");
    assert!(ran >= 14, "only {ran} problems ran on MIOpen");
    // The one-time compile cost is accounted: at least one solution was compiled.
    let mi = dev.miopen().unwrap();
    println!(
        "MIOpen {:?}: {} solutions compiled in {:.3} s",
        mi.version(),
        mi.compiled_solutions(),
        mi.compile_seconds()
    );
    assert!(mi.compiled_solutions() >= 1);
    let secs = rocm_backend::conv::miopen_compile_seconds(&dev).unwrap();
    assert!(secs.is_finite() && secs >= 0.0, "{secs}");
}

/// Every chunk of a `Miopen` plan runs a solution whose workspace block fits `extra` bytes
/// and is no larger than the plan says.
fn assert_miopen_plan_fits(dev: &Arc<RocmDevice>, plan: &RocmPlan, extra: usize, what: &str) {
    let mi = dev.miopen().unwrap();
    for chunk in plan.chunks() {
        let sub = miopen_chunk_problem(&plan.problem(), &chunk).unwrap_or_else(|| panic!("{what}: chunk {chunk:?}"));
        let s = choose(&mi.solutions(&sub).unwrap(), plan.workspace_limit())
            .unwrap_or_else(|| panic!("{what}: no solution for {sub} within {}", plan.workspace_limit()));
        assert!(footprint(&s) <= extra, "{what}: {sub}: {s:?} takes {} bytes", footprint(&s));
        assert!(s.workspace_bytes <= plan.workspace_bytes(), "{what}: {sub}: {s:?} vs {plan:?}");
    }
}

/// Restores an unlimited budget when the test ends, even by a panic.
struct Unbudget(Arc<RocmDevice>);

impl Drop for Unbudget {
    fn drop(&mut self) {
        let _ = self.0.allocator().set_budget(usize::MAX, self.0.stream());
    }
}

#[test]
fn miopen_plans_stay_within_the_budget() {
    let _serial = GPU.lock().unwrap_or_else(|e| e.into_inner());
    let Some(dev) = common::device() else { return };
    let _restore = Unbudget(dev.clone());
    let mut rng = StdRng::seed_from_u64(seed());
    let alloc = dev.allocator();
    for dt in [DType::F32, DType::F16] {
        let p =
            ConvProblem::conv2d(&[2, 32, 48, 48], &[32, 32, 3, 3], dt, dt, &Conv2dParams::default().with_padding(1))
                .unwrap();
        let g = p.geometry();
        let (x, xe) = upload(&dev, &random(&mut rng, g.input_len()), dt);
        let (w, we) = upload(&dev, &random(&mut rng, g.weight_len()), dt);
        let want = conv_f64(&p, &xe, &we, None);
        let solutions = dev.miopen().unwrap().solutions(&p).unwrap();
        println!("{p}: MIOpen solutions {solutions:?}");
        assert!(!solutions.is_empty(), "MIOpen lists no solution for {p}");
        // Budgets that leave no workspace, just less than the smallest non-zero
        // workspace, and all of the largest.
        let mut extras = vec![0usize];
        let nonzero: Vec<usize> = solutions.iter().map(footprint).filter(|&f| f > 0).collect();
        if let (Some(&lo), Some(&hi)) = (nonzero.iter().min(), nonzero.iter().max()) {
            extras.push(lo - 1);
            extras.push(hi);
        }
        for extra in extras {
            alloc.set_budget(usize::MAX, dev.stream()).unwrap();
            alloc.trim(dev.stream()).unwrap();
            let budget = alloc.stats().live + size_class(p.output_bytes()) + extra;
            alloc.set_budget(budget, dev.stream()).unwrap();
            alloc.reset_peaks();
            let what = format!("{p} with {extra} bytes of workspace allowed");

            // MIOpen alone: the fastest solution that fits, whole or per batch chunk, or no
            // plan at all when no solution fits even one image.
            let only = RocmConv::new(dev.clone()).with_allowed(&[Algorithm::Miopen]);
            assert_eq!(only.budget_state(p.output_bytes()).available(), extra, "{what}");
            let whole = choose(&solutions, extra);
            match only.plan(&p) {
                Ok(plan) => {
                    assert_eq!(plan.algorithm(), Algorithm::Miopen, "{what}");
                    assert_miopen_plan_fits(&dev, &plan, extra, &what);
                    if let Some(s) = whole {
                        assert_eq!(plan.chunk_count(), 1, "{what}: the whole problem fits with {s:?}");
                        assert_eq!(plan.workspace_bytes(), s.workspace_bytes, "{what}: the chosen solution {s:?}");
                    }
                    let out = run_plan(&dev, &plan, &x, &w, None).unwrap_or_else(|e| panic!("{what}: {e}"));
                    dev.synchronize().unwrap();
                    check(&what, &download(&out), &want, dt);
                }
                Err(e) => {
                    assert_eq!(whole, None, "{what}: {e}");
                    let one = dev.miopen().unwrap().solutions(&p.with_batch(1).unwrap()).unwrap();
                    assert_eq!(choose(&one, extra), None, "{what}: one image fits, yet: {e}");
                    println!("{what}: no MIOpen solution fits: {e}");
                }
            }
            let peak = alloc.stats().peak_reserved;
            assert!(peak <= budget, "{what}: MIOpen alone: peak {peak} > budget {budget}");

            // Every algorithm: whichever wins, its workspace fits.
            let all = RocmConv::new(dev.clone());
            assert!(all.dispatcher().allowed().contains(&Algorithm::Miopen));
            let plan = all.plan(&p).unwrap_or_else(|e| panic!("{what}: {e}"));
            println!("{what}: every algorithm: {} with {} bytes", plan.algorithm(), plan.workspace_bytes());
            assert!(plan.workspace_bytes() <= extra, "{what}: {plan:?}");
            if plan.algorithm() == Algorithm::Miopen {
                assert_miopen_plan_fits(&dev, &plan, extra, &what);
            }
            let out = run_plan(&dev, &plan, &x, &w, None).unwrap_or_else(|e| panic!("{what}: {e}"));
            dev.synchronize().unwrap();
            check(&format!("{what}, {}", plan.algorithm()), &download(&out), &want, dt);
            let peak = alloc.stats().peak_reserved;
            assert!(peak <= budget, "{what}: {}: peak {peak} > budget {budget}", plan.algorithm());
        }
        alloc.set_budget(usize::MAX, dev.stream()).unwrap();
    }
}
