//! Every CPU algorithm against the f64 reference on a seeded random grid of problems:
//! 1-D and 2-D, forward and transposed, every dtype, batch > 1, odd sizes, 1x1,
//! depthwise, grouped, strided (transposed with stride 2 and 3 and output_padding),
//! dilated, asymmetric padding, kernel = stride (the space-to-depth shape). Outputs start
//! poisoned (NaN), so an element no algorithm writes fails.

use candle_core::{DType, Device, Tensor};
use conv_cpu::CpuConv;
use conv_cpu::implicit_gemm::MicroKernel;
use conv_cpu::{CpuCatalog, WinogradTile};
use conv_engine::ConvKind;
use conv_engine::reference::conv_f64;
use conv_engine::{Algorithm, Budget, Conv1dParams, Conv2dParams, ConvProblem, Padding2d};
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
        match special % 7 {
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
            // 3x3, stride 1, dilation 1, ungrouped 2-D forward: the Winograd shape (any
            // padding, asymmetric included).
            4 => {
                kern = [3, 3];
                stride = [1, 1];
                dil = [1, 1];
                groups = 1;
                c = cpg;
                k = kpg;
                transposed = false;
            }
            // Forward, kernel = stride, unpadded, undilated, ungrouped: the space-to-depth
            // GEMM's shape.
            5 => {
                kern = [rng.random_range(2..4), rng.random_range(1..4)];
                stride = kern;
                pad = Padding2d::default();
                dil = [1, 1];
                groups = 1;
                c = cpg;
                k = kpg;
                transposed = false;
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
    let tol = tolerance(p.dtype().to_candle());
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
    let engines = engines_for_every_microkernel();
    let mut runs = std::collections::BTreeMap::<String, usize>::new();
    let mut coverage = std::collections::BTreeMap::<&str, usize>::new();
    const PROBLEMS: usize = 600;
    for i in 0..PROBLEMS {
        let case = random_case(&mut rng, i);
        let p = &case.problem;
        let g = p.geometry();
        let dt = p.dtype().to_candle();
        let (x, xv) = random_tensor(&mut rng, &p.input_shape(), dt);
        let (w, wv) = random_tensor(&mut rng, &p.weight_shape(), dt);
        let (b, bv) = random_tensor(&mut rng, &[g.out_channels], dt);
        let b = case.bias.then_some(&b);
        let want = conv_f64(p, &xv, &wv, case.bias.then_some(&bv[..]));
        for (name, engine) in &engines {
            if let Ok(plan) = engine.plan(p) {
                check(engine, &case, &x, &w, b, &want, name);
                *runs.entry(format!("{name} {}", p.dtype())).or_default() += 1;
                // Gemm1x1's forms by the kernel they ran.
                let kernel = plan.kernel().to_string();
                if kernel.starts_with("s2d-gemm") || kernel.starts_with("tap-gemm") {
                    *runs.entry(format!("{kernel} {}", p.dtype())).or_default() += 1;
                }
            }
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
            ("1-D", p.rank() == conv_engine::Rank::One),
            ("bf16", p.dtype() == conv_engine::ConvDType::BF16),
            ("f16", p.dtype() == conv_engine::ConvDType::F16),
            (
                "kernel = stride",
                g.kind == ConvKind::Forward && g.kernel == g.stride && g.kernel != [1, 1] && g.pad_begin == [0, 0],
            ),
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
    assert_eq!(coverage.len(), 13, "some parameter class was never generated: {coverage:?}");
    for alg in [
        "ImplicitGemm f32",
        "ImplicitGemm bf16",
        "Im2colGemm f32",
        "Gemm1x1 f32",
        "Winograd f32",
        "Winograd f16",
        "Winograd bf16",
        "Direct bf16",
    ] {
        let min = if alg.starts_with("Winograd f16") || alg.starts_with("Winograd bf16") { 10 } else { 20 };
        assert!(runs.get(alg).copied().unwrap_or(0) >= min, "{alg} ran only {:?} times", runs.get(alg));
    }
    // Every microkernel this CPU has ran the implicit GEMM on the f32 problems, and
    // Gemm1x1's space-to-depth and transposed forms in every dtype.
    for mk in MicroKernel::all_supported() {
        let key = format!("ImplicitGemm ({mk}) f32");
        assert!(runs.get(&key).copied().unwrap_or(0) >= 20, "{key} ran only {:?} times", runs.get(&key));
        for form in ["s2d-gemm", "tap-gemm"] {
            for dt in ["f32", "f16", "bf16"] {
                let key = format!("{form}/{mk} {dt}");
                assert!(runs.get(&key).copied().unwrap_or(0) >= 3, "{key} ran only {:?} times", runs.get(&key));
            }
        }
    }
}

/// One engine per algorithm and, for the algorithms that run a microkernel (the implicit
/// GEMM, `Gemm1x1`'s transposed and space-to-depth forms, Winograd's batched GEMMs, the
/// vectorised direct loop), per microkernel this CPU
/// supports; the kernels it lacks are reported as skipped. Names: `ImplicitGemm` etc. for
/// the kernel `detect()` picks, `ImplicitGemm (Avx2Fma 6x16)` etc. for each supported one.
fn engines_for_every_microkernel() -> Vec<(String, CpuConv)> {
    for (mk, why) in MicroKernel::all_unsupported() {
        test_support::skipped(format!("microkernel {mk}: this CPU lacks {why}"));
    }
    let budget = Budget::bytes(1 << 30);
    let mut engines: Vec<(String, CpuConv)> =
        [Algorithm::ImplicitGemm, Algorithm::Im2colGemm, Algorithm::Gemm1x1, Algorithm::Winograd, Algorithm::Direct]
            .into_iter()
            .map(|a| (a.name().to_string(), CpuConv::new(budget).with_allowed(&[a])))
            .collect();
    let mut winograd_kernels = Vec::new();
    for mk in MicroKernel::all_supported() {
        for alg in [Algorithm::ImplicitGemm, Algorithm::Gemm1x1, Algorithm::Winograd, Algorithm::Direct] {
            // Winograd runs the 6x16 tile of the kernel's ISA: one engine per such kernel.
            if alg == Algorithm::Winograd {
                if winograd_kernels.contains(&mk.narrow()) {
                    continue;
                }
                winograd_kernels.push(mk.narrow());
            }
            let catalog = CpuCatalog::new().with_kernel(mk);
            // The name says the kernel that runs: Winograd runs the ISA's 6x16 tile.
            let runs = if alg == Algorithm::Winograd { mk.narrow() } else { mk };
            let engine = CpuConv::with_catalog(catalog, budget).with_allowed(&[alg]);
            engines.push((format!("{} ({runs})", alg.name()), engine));
        }
    }
    engines
}

/// Winograd F(2x2) and F(4x4) on 3x3 stride-1 problems big enough to span several tile
/// blocks, partial tiles on both edges, batch > 1 and asymmetric padding, in every dtype,
/// with a roomy budget and with one that forces one-panel blocks; chunked by 3 output rows
/// (chunks that cut transform tiles) the output is the same bit for bit. Reports the
/// worst f32 error relative to the largest reference magnitude, per tile size.
#[test]
fn winograd_matches_the_reference_on_larger_3x3_problems() {
    for tile in [WinogradTile::F2, WinogradTile::F4] {
        winograd_matches_the_reference(tile);
    }
}

fn winograd_matches_the_reference(tile: WinogradTile) {
    let mut rng = StdRng::seed_from_u64(0x3a3);
    // (N, C, H, W, K, padding top, bottom, left, right)
    type Shape = (usize, usize, usize, usize, usize, usize, usize, usize, usize);
    let shapes: &[Shape] = &[
        (1, 64, 37, 29, 48, 1, 1, 1, 1),
        (2, 19, 23, 41, 13, 0, 2, 2, 0),
        (1, 256, 18, 21, 64, 1, 1, 1, 1),
        (3, 7, 9, 5, 33, 2, 0, 0, 1),
        (1, 3, 4, 4, 5, 0, 0, 0, 0),
        (1, 512, 9, 9, 8, 1, 1, 1, 1),
        // Wide rows: whole 16-tile panels inside one tile row (the contiguous fast paths),
        // one ending exactly at the right edge, next to partial ones.
        (1, 24, 10, 70, 20, 1, 1, 1, 1),
        (2, 5, 7, 66, 9, 0, 1, 0, 0),
    ];
    let mut worst_f32 = 0f64;
    let mut runs = 0;
    for &(n, c, h, w, k, pt, pb, pl, pr) in shapes {
        for dt in [DType::F32, DType::F16, DType::BF16] {
            let params = Conv2dParams { padding: Padding2d::tblr(pt, pb, pl, pr), ..Default::default() };
            let p = ConvProblem::conv2d(&[n, c, h, w], &[k, c, 3, 3], dt, dt, &params).unwrap();
            let (x, xv) = random_tensor(&mut rng, &p.input_shape(), dt);
            let (wt, wv) = random_tensor(&mut rng, &p.weight_shape(), dt);
            let (b, bv) = random_tensor(&mut rng, &[k], dt);
            let want = conv_f64(&p, &xv, &wv, Some(&bv));
            let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            let engine = |bytes: usize| {
                CpuConv::with_catalog(CpuCatalog::new().with_winograd_tile(tile), Budget::bytes(bytes))
                    .with_allowed(&[Algorithm::Winograd])
            };
            let roomy = engine(1 << 30);
            // The transformed weights (E = 16 or 36 elements × K padded to 6 × C floats)
            // and a little more than one panel of 16 tiles (E × (C + K padded) × 16 floats).
            let (k_pad, e) = (k.div_ceil(6) * 6, tile.input() * tile.input());
            let tight_bytes = (e * k_pad * c + e * (c + k_pad) * 16 * 3 / 2) * 4;
            let tight = engine(tight_bytes);
            for (what, engine) in [("roomy", &roomy), ("tight", &tight)] {
                let plan = engine.plan(&p).unwrap_or_else(|e| panic!("{p}: {what}: {e}"));
                assert_eq!(plan.algorithm(), Algorithm::Winograd);
                assert!(plan.kernel().to_string().contains(&tile.to_string()), "{p}: {what}: {}", plan.kernel());
                assert!(plan.workspace_bytes() <= engine.budget().resolve(|| 0), "{p}: {what}: {plan:?}");
                let case = Case { problem: p, bias: true };
                check(engine, &case, &x, &wt, Some(&b), &want, &format!("Winograd ({what} budget)"));
                // Chunked by one image and 3 output rows (tile anchors off the 2-row grid).
                let chunked = engine
                    .dispatcher()
                    .plan_with(
                        &p,
                        Algorithm::Winograd,
                        Some(conv_engine::Chunking { batch_per_chunk: 1, rows_per_chunk: 3 }),
                        engine.budget_state(),
                    )
                    .unwrap_or_else(|e| panic!("{p}: {what}: chunked by 3 rows: {e}"));
                let out = engine.run_plan(&chunked, &x, &wt, Some(&b)).unwrap();
                let got = out.flatten_all().unwrap().to_dtype(DType::F64).unwrap().to_vec1::<f64>().unwrap();
                let whole = engine.run(&p, &x, &wt, Some(&b)).unwrap();
                let whole = whole.flatten_all().unwrap().to_dtype(DType::F64).unwrap().to_vec1::<f64>().unwrap();
                for (i, (g, r)) in got.iter().zip(&whole).enumerate() {
                    assert!(
                        g.to_bits() == r.to_bits(),
                        "{p}: {what}, chunked by 3 rows: element {i}: {g} vs {r} unchunked"
                    );
                }
                if dt == DType::F32 {
                    let out = engine.run(&p, &x, &wt, Some(&b)).unwrap();
                    let got = out.flatten_all().unwrap().to_dtype(DType::F64).unwrap().to_vec1::<f64>().unwrap();
                    let err = got.iter().zip(&want).fold(0f64, |m, (g, r)| m.max((g - r).abs()));
                    worst_f32 = worst_f32.max(err / scale);
                }
                runs += 1;
            }
        }
    }
    println!("Winograd {tile}: {runs} runs, worst f32 error {worst_f32:.2e} of the largest reference magnitude");
    assert_eq!(runs, shapes.len() * 3 * 2);
}

/// Winograd is refused where it does not apply, and applies to every padding.
#[test]
fn winograd_is_offered_only_for_3x3_stride_1() {
    let engine = CpuConv::new(Budget::bytes(1 << 30)).with_allowed(&[Algorithm::Winograd]);
    let dt = DType::F32;
    let base = Conv2dParams { padding: Padding2d::tblr(0, 2, 1, 0), ..Default::default() };
    assert!(engine.plan(&ConvProblem::conv2d(&[1, 4, 9, 9], &[4, 4, 3, 3], dt, dt, &base).unwrap()).is_ok());
    let refused = [
        ConvProblem::conv2d(&[1, 4, 9, 9], &[4, 4, 3, 3], dt, dt, &Conv2dParams { stride: [2, 2], ..base }),
        ConvProblem::conv2d(&[1, 4, 9, 9], &[4, 4, 3, 3], dt, dt, &Conv2dParams { dilation: [2, 2], ..base }),
        ConvProblem::conv2d(&[1, 4, 9, 9], &[4, 2, 3, 3], dt, dt, &Conv2dParams { groups: 2, ..base }),
        ConvProblem::conv2d(&[1, 4, 9, 9], &[4, 4, 5, 5], dt, dt, &base),
        ConvProblem::conv2d(&[1, 4, 9, 9], &[4, 4, 3, 1], dt, dt, &base),
        ConvProblem::conv_transpose2d(&[1, 4, 9, 9], &[4, 4, 3, 3], dt, dt, &Conv2dParams::default()),
        ConvProblem::conv1d(&[1, 4, 9], &[4, 4, 3], dt, dt, &Conv1dParams::default()),
    ];
    for p in refused {
        let p = p.unwrap();
        assert!(engine.plan(&p).is_err(), "{p}: Winograd offered");
    }
}

/// The fused epilogue (activation, residual, scale) on every CPU algorithm against the f64
/// reference with the epilogue applied in f64: 150 problems, every activation.
#[test]
fn every_algorithm_applies_the_fused_epilogue() {
    use conv_engine::{Activation, Epilogue};
    let mut rng = StdRng::seed_from_u64(0xe91_1096);
    let engines: Vec<(Algorithm, CpuConv)> =
        [Algorithm::ImplicitGemm, Algorithm::Im2colGemm, Algorithm::Gemm1x1, Algorithm::Winograd, Algorithm::Direct]
            .into_iter()
            .map(|a| (a, CpuConv::new(Budget::bytes(1 << 30)).with_allowed(&[a])))
            .collect();
    let acts = [Activation::Relu, Activation::LeakyRelu(0.1), Activation::Silu, Activation::Gelu, Activation::Identity];
    // The portable kernel: the scalar direct loop and its separate epilogue pass.
    let portable = CpuCatalog::new().with_kernel(MicroKernel::Portable);
    let mut engines = engines;
    for a in [Algorithm::ImplicitGemm, Algorithm::Direct] {
        engines.push((a, CpuConv::with_catalog(portable.clone(), Budget::bytes(1 << 30)).with_allowed(&[a])));
    }
    let mut runs = std::collections::BTreeMap::<&str, usize>::new();
    for i in 0..150 {
        let case = random_case(&mut rng, i);
        let p = &case.problem;
        let dt = p.dtype().to_candle();
        let (x, xv) = random_tensor(&mut rng, &p.input_shape(), dt);
        let (w, wv) = random_tensor(&mut rng, &p.weight_shape(), dt);
        let (b, bv) = random_tensor(&mut rng, &[p.geometry().out_channels], dt);
        let (r, rv) = random_tensor(&mut rng, &p.output_shape(), dt);
        let act = acts[i % acts.len()];
        let (with_res, scale) = (i % 3 != 0, [1.0f32, 0.5, 2.0][i % 3]);
        let ep = Epilogue { activation: act, residual: with_res.then_some(&r), scale };
        let conv = conv_f64(p, &xv, &wv, Some(&bv));
        let want: Vec<f64> = conv
            .iter()
            .zip(&rv)
            .map(|(c, r)| (test_support::activation_f64(act, *c) + if with_res { *r } else { 0.0 }) * scale as f64)
            .collect();
        let mag = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (alg, engine) in &engines {
            let Ok(plan) = engine.plan(p) else { continue };
            let out = engine.run_plan_fused(&plan, &x, &w, Some(&b), &ep).unwrap_or_else(|e| panic!("{alg} {p}: {e}"));
            let got = out.to_dtype(DType::F64).unwrap().flatten_all().unwrap().to_vec1::<f64>().unwrap();
            // The epilogue rounds once more in the storage dtype than the reference does.
            let tol = 2.0 * tolerance(dt) * mag;
            for (j, (g, r)) in got.iter().zip(&want).enumerate() {
                assert!((g - r).abs() <= tol, "{alg} {act:?} on {p}: element {j}: {g} vs {r} (tolerance {tol})");
            }
            *runs.entry(alg.name()).or_default() += 1;
        }
    }
    println!("fused epilogue runs: {runs:?}");
    for alg in ["ImplicitGemm", "Im2colGemm", "Gemm1x1", "Winograd", "Direct"] {
        assert!(runs.get(alg).copied().unwrap_or(0) >= 10, "{alg} ran only {:?} times", runs.get(alg));
    }
}

/// Winograd's rounding depends on a pixel's place on the transform grid anchored at output
/// (0, 0), and on nothing else: a valid (unpadded) convolution of a window of an image,
/// whose origin is a multiple of the grid, gives the image's output bits at every pixel of
/// the window's whole transform tiles (the last, cut tiles read zeros where the image has
/// pixels, and may differ).
#[test]
fn winograd_windows_on_the_grid_reproduce_the_image_bits() {
    let mut rng = StdRng::seed_from_u64(0x9a1d);
    // Wide enough for whole 16-tile panels in one tile row (the contiguous fast paths) in
    // the image and in some windows, not in others.
    for (c, k, h, w) in [(11, 7, 37, 150), (3, 32, 60, 76), (64, 64, 52, 84), (256, 128, 25, 33), (64, 3, 50, 82)] {
        for tile in [WinogradTile::F2, WinogradTile::F4] {
            let engine = CpuConv::with_catalog(CpuCatalog::new().with_winograd_tile(tile), Budget::bytes(1 << 30))
                .with_allowed(&[Algorithm::Winograd]);
            let (x, _) = random_tensor(&mut rng, &[1, c, h, w], DType::F32);
            let (wt, _) = random_tensor(&mut rng, &[k, c, 3, 3], DType::F32);
            let (b, _) = random_tensor(&mut rng, &[k], DType::F32);
            let params = Conv2dParams::default();
            let full = engine.conv2d(&x, &wt, Some(&b), &params).unwrap();
            let full = full.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let (oh, ow) = (h - 2, w - 2);
            let g = conv_cpu::WINOGRAD_GRID;
            let mut compared = 0;
            for (y0, x0, wh, ww) in [
                (0, 0, 20, 17),
                (g, 2 * g, 19, 22),
                (2 * g, g, h - 2 * g, w - g),
                (3 * g, 0, 9, 30),
                (0, 4 * g, 20, w - 4 * g),
                (0, 0, h - 8, w),
            ] {
                let win = x.narrow(2, y0, wh).unwrap().narrow(3, x0, ww).unwrap().contiguous().unwrap();
                let out = engine.conv2d(&win, &wt, Some(&b), &params).unwrap();
                let out = out.flatten_all().unwrap().to_vec1::<f32>().unwrap();
                let (wo_h, wo_w) = (wh - 2, ww - 2);
                let m = tile.output();
                // Whole transform tiles only, unless the window ends where the image does.
                let keep = |n: usize, end_of_image: bool| if end_of_image { n } else { n / m * m };
                let (kh, kw) = (keep(wo_h, y0 + wh == h), keep(wo_w, x0 + ww == w));
                for ch in 0..k {
                    for i in 0..kh {
                        for j in 0..kw {
                            let a = full[(ch * oh + y0 + i) * ow + x0 + j];
                            let v = out[(ch * wo_h + i) * wo_w + j];
                            assert_eq!(
                                a.to_bits(),
                                v.to_bits(),
                                "{tile}: window ({y0}, {x0}) {wh}x{ww}: ({ch}, {i}, {j})"
                            );
                            compared += 1;
                        }
                    }
                }
            }
            println!("Winograd {tile}: {compared} outputs of 5 windows identical to the whole image's");
        }
    }
}
