//! Every CPU algorithm against the f64 reference on a seeded random grid of problems:
//! 1-D and 2-D, forward and transposed, every dtype, batch > 1, odd sizes, 1x1,
//! depthwise, grouped, strided (transposed with stride 2 and 3 and output_padding),
//! dilated, asymmetric padding. Outputs start poisoned (NaN), so an element no algorithm
//! writes fails.

use candle_core::{DType, Device, Tensor};
use conv_engine::cpu::CpuCatalog;
use conv_engine::reference::conv_f64;
use conv_engine::{Algorithm, Budget, Conv1dParams, Conv2dParams, ConvProblem, CpuConv, Padding2d};
use implicit_gemm::ConvKind;
use implicit_gemm::cpu::MicroKernel;
use rand::{Rng, SeedableRng, rngs::StdRng};

struct Case {
    problem: ConvProblem,
    bias: bool,
}

fn dtype(rng: &mut StdRng) -> DType {
    match rng.random_range(0..10) {
        0..6 => DType::F32,
        6..8 => DType::F16,
        _ => DType::BF16,
    }
}

/// A random valid problem; `special` forces one of the shapes the grid must cover.
fn random_case(rng: &mut StdRng, special: usize) -> Case {
    loop {
        let dt = dtype(rng);
        let groups = match rng.random_range(0..8) {
            0 => 2,
            1 => 3,
            _ => 1,
        };
        let cpg = rng.random_range(1..7);
        let kpg = rng.random_range(1..9);
        let (mut c, mut k) = (groups * cpg, groups * kpg);
        let mut groups = groups;
        let n = rng.random_range(1..4);
        let (h, w) = (rng.random_range(1..15), rng.random_range(1..18));
        let mut kern = [rng.random_range(1..5), rng.random_range(1..5)];
        let mut stride = [rng.random_range(1..4), rng.random_range(1..4)];
        let mut dil = [rng.random_range(1..3), rng.random_range(1..3)];
        let mut pad = Padding2d::tblr(
            rng.random_range(0..3),
            rng.random_range(0..3),
            rng.random_range(0..3),
            rng.random_range(0..3),
        );
        let mut transposed = rng.random_bool(0.3);
        let one_d = rng.random_bool(0.2);
        match special % 6 {
            // 1x1, stride 1, no padding: the Gemm1x1 shape.
            0 => {
                kern = [1, 1];
                stride = [1, 1];
                pad = Padding2d::default();
                transposed = false;
            }
            // Depthwise.
            1 => {
                c = rng.random_range(2..9);
                k = c;
                groups = c;
            }
            // Transposed, stride 2 or 3.
            2 => {
                transposed = true;
                let s = rng.random_range(2..4);
                stride = [s, s];
                dil = [1, 1];
            }
            // Symmetric padding and square stride: what candle supports.
            3 => {
                let p = rng.random_range(0..3);
                pad = Padding2d::uniform(p);
                stride = [stride[0], stride[0]];
                dil = [dil[0], dil[0]];
                groups = 1;
                c = cpg;
                k = kpg;
            }
            _ => {}
        }
        let max_op = |d: usize| stride[d].max(dil[d]) - 1;
        let out_pad =
            if transposed { [rng.random_range(0..=max_op(0)), rng.random_range(0..=max_op(1))] } else { [0, 0] };
        let params = Conv2dParams { stride, padding: pad, dilation: dil, groups, output_padding: out_pad };
        let problem = if one_d {
            let p1 = Conv1dParams {
                stride: stride[1],
                padding: [pad.begin[1], pad.end[1]],
                dilation: dil[1],
                groups,
                output_padding: out_pad[1],
            };
            if transposed {
                ConvProblem::conv_transpose1d(&[n, c, w], &[c, k / groups, kern[1]], dt, dt, &p1)
            } else {
                ConvProblem::conv1d(&[n, c, w], &[k, c / groups, kern[1]], dt, dt, &p1)
            }
        } else if transposed {
            ConvProblem::conv_transpose2d(&[n, c, h, w], &[c, k / groups, kern[0], kern[1]], dt, dt, &params)
        } else {
            ConvProblem::conv2d(&[n, c, h, w], &[k, c / groups, kern[0], kern[1]], dt, dt, &params)
        };
        if let Ok(problem) = problem {
            return Case { problem, bias: rng.random_bool(0.7) };
        }
    }
}

fn random_tensor(rng: &mut StdRng, shape: &[usize], dt: DType) -> (Tensor, Vec<f64>) {
    let n: usize = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect();
    let t = Tensor::from_vec(v, shape, &Device::Cpu).unwrap().to_dtype(dt).unwrap();
    // The reference sees exactly the values the dtype holds.
    let exact = t.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
    (t, exact)
}

fn tolerance(dt: DType) -> f64 {
    match dt {
        DType::F32 => 1e-5,
        _ => 1e-2,
    }
}

fn check(engine: &CpuConv, case: &Case, x: &Tensor, w: &Tensor, b: Option<&Tensor>, want: &[f64], what: &str) {
    let p = &case.problem;
    let out = engine.run(p, x, w, b).unwrap_or_else(|e| panic!("{what} on {p}: {e}"));
    assert_eq!(out.dims(), p.output_shape(), "{what} on {p}: output shape");
    let got = out.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
    let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
    let tol = tolerance(p.dtype.to_candle());
    for (i, (g, r)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - r).abs() <= tol * scale,
            "{what} on {p}: element {i}: got {g}, reference {r} (tolerance {})",
            tol * scale
        );
    }
}

#[test]
fn every_algorithm_matches_the_f64_reference_on_600_problems() {
    let mut rng = StdRng::seed_from_u64(0x5eed_c0de);
    let engines: Vec<(Algorithm, CpuConv)> =
        [Algorithm::ImplicitGemm, Algorithm::Im2colGemm, Algorithm::Gemm1x1, Algorithm::Direct]
            .into_iter()
            .map(|a| (a, CpuConv::new(Budget::bytes(1 << 30)).with_allowed(&[a])))
            .collect();
    let portable = CpuConv::with_catalog(CpuCatalog::new().with_kernel(MicroKernel::Portable), Budget::bytes(1 << 30))
        .with_allowed(&[Algorithm::ImplicitGemm]);
    let mut runs = std::collections::BTreeMap::<String, usize>::new();
    let mut coverage = std::collections::BTreeMap::<&str, usize>::new();
    const PROBLEMS: usize = 600;
    for i in 0..PROBLEMS {
        let case = random_case(&mut rng, i);
        let p = &case.problem;
        let g = &p.geometry;
        let dt = p.dtype.to_candle();
        let (x, xv) = random_tensor(&mut rng, &p.input_shape(), dt);
        let (w, wv) = random_tensor(&mut rng, &p.weight_shape(), dt);
        let (b, bv) = random_tensor(&mut rng, &[g.out_channels], dt);
        let b = case.bias.then_some(&b);
        let want = conv_f64(p, &xv, &wv, case.bias.then_some(&bv[..]));
        for (alg, engine) in &engines {
            if engine.plan(p).is_ok() {
                check(engine, &case, &x, &w, b, &want, alg.name());
                *runs.entry(format!("{alg} {}", p.dtype)).or_default() += 1;
            }
        }
        if i % 5 == 0 {
            check(&portable, &case, &x, &w, b, &want, "ImplicitGemm (portable microkernel)");
            *runs.entry("ImplicitGemm portable".into()).or_default() += 1;
        }
        for (name, hit) in [
            ("transposed stride 2", g.kind == ConvKind::Transposed && g.stride.contains(&2)),
            ("transposed stride 3", g.kind == ConvKind::Transposed && g.stride.contains(&3)),
            ("transposed output_padding", g.output_padding != [0, 0]),
            ("depthwise", g.groups > 1 && g.groups == g.in_channels && g.groups == g.out_channels),
            ("grouped", g.groups > 1),
            ("1x1", g.kernel == [1, 1]),
            ("batch > 1", g.batch > 1),
            ("dilation > 1", g.dilation != [1, 1]),
            ("asymmetric padding", g.pad_begin != g.pad_end),
            ("1-D", p.rank == conv_engine::Rank::One),
            ("bf16", p.dtype == conv_engine::ConvDType::BF16),
            ("f16", p.dtype == conv_engine::ConvDType::F16),
        ] {
            if hit {
                *coverage.entry(name).or_default() += 1;
            }
        }
    }
    println!("algorithm runs: {runs:?}\ncoverage: {coverage:?}");
    for (name, count) in &coverage {
        assert!(*count >= 10, "only {count} problems cover {name}");
    }
    assert_eq!(coverage.len(), 12, "some parameter class was never generated: {coverage:?}");
    for alg in ["ImplicitGemm f32", "ImplicitGemm bf16", "Im2colGemm f32", "Gemm1x1 f32", "Direct bf16"] {
        assert!(runs.get(alg).copied().unwrap_or(0) >= 20, "{alg} ran only {:?} times", runs.get(alg));
    }
}
