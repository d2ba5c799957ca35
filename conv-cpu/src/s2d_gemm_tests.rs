use super::*;
use crate::implicit_gemm::CpuConvPlan;
use conv_engine::Activation;
use half::{bf16, f16};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn geometry(batch: usize, c: usize, k: usize, kernel: [usize; 2], size: [usize; 2]) -> ConvGeometry {
    ConvGeometry {
        kind: ConvKind::Forward,
        batch,
        in_channels: c,
        in_size: size,
        out_channels: k,
        kernel,
        stride: kernel,
        pad_begin: [0, 0],
        pad_end: [0, 0],
        dilation: [1, 1],
        output_padding: [0, 0],
        groups: 1,
    }
}

fn random<T: Element>(n: usize, rng: &mut StdRng) -> Vec<T> {
    (0..n).map(|_| T::from_f32(rng.random_range(-1.0..1.0))).collect()
}

fn check<T: Element>(
    kernel: MicroKernel,
    g: &ConvGeometry,
    rng: &mut StdRng,
    act: Activation,
    with_res: bool,
    tol: f64,
) {
    let (x, w, b, res) = (
        random::<T>(g.input_len(), rng),
        random(g.weight_len(), rng),
        random(g.out_channels, rng),
        random(g.output_len(), rng),
    );
    let widen = |v: &[T]| v.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
    let [p, _] = g.out_hw();
    let mut want = vec![0f64; g.output_len()];
    crate::direct::direct_conv::<f64, f64>(g, &widen(&x), &widen(&w), Some(&widen(&b)), &mut want, 0..p);
    let ep = Epilogue { activation: act, residual: with_res.then_some(res.as_slice()), scale: 0.5 };
    let mut out = vec![T::from_f32(f32::NAN); g.output_len()];
    let threads = 2;
    let mut scratch = vec![f32::NAN; scratch_floats(g, kernel, threads)];
    // Two chunks of output rows, the first ending inside a band.
    for rows in [0..p / 3, p / 3..p] {
        run(kernel, g, &x, &w, Some(&b), &ep, &mut out, rows, threads, &mut scratch).unwrap();
    }
    let depth = depth(g) as f64;
    for (i, (o, c)) in out.iter().zip(&want).enumerate() {
        let r = if with_res { res[i].to_f64() } else { 0.0 };
        let want = (act.apply(*c as f32) as f64 + r) * 0.5;
        let o = o.to_f64();
        assert!(
            (o - want).abs() <= tol * depth.sqrt() * want.abs().max(1.0),
            "{kernel:?} {} {g:?} {act:?} residual {with_res}: element {i}: {o} vs {want}",
            T::NAME
        );
    }
}

/// Against the f64 definition with every microkernel this CPU has: strides 2 (square and
/// not), 3 and 1, sizes that leave input rows and columns no tap reads, reductions longer
/// than a `KC` block, rows wide enough for bands of one row and images of several bands;
/// f32, f16 and bf16, bias, every activation with and without a residual, rows run in two
/// chunks, the output poisoned first.
#[test]
fn matches_the_f64_definition_with_every_microkernel() {
    for (mk, why) in MicroKernel::all_unsupported() {
        test_support::skipped(format!("{mk:?}: this CPU lacks {why}"));
    }
    let mut rng = StdRng::seed_from_u64(0x5d2);
    let acts = [Activation::Identity, Activation::LeakyRelu(0.1), Activation::Relu, Activation::Silu, Activation::Gelu];
    // (N, C, K, kernel = stride, input size)
    type Shape = (usize, usize, usize, [usize; 2], [usize; 2]);
    let shapes: [Shape; 10] = [
        (1, 64, 8, [2, 2], [9, 70]),
        (2, 3, 5, [2, 2], [7, 4]),
        (1, 7, 4, [3, 3], [10, 11]),
        (2, 5, 3, [2, 3], [5, 8]),
        (1, 6, 2, [1, 1], [3, 5]),
        (1, 4, 3, [1, 2], [3, 9]),
        (1, 300, 2, [2, 2], [6, 7]),
        (1, 4, 40, [2, 2], [6, 1100]),
        (1, 64, 64, [2, 2], [81, 300]),
        (1, 2, 17, [2, 2], [2, 2]),
    ];
    for kernel in MicroKernel::all_supported() {
        for (i, &(batch, c, k, kern, size)) in shapes.iter().enumerate() {
            let g = geometry(batch, c, k, kern, size);
            assert!(g.out_size().is_some() && fits(&g), "{g:?}");
            if i == 8 {
                assert!(band_rows(&g, kernel) * 3 < g.out_hw()[0], "{g:?} runs in several bands");
            }
            let act = acts[i % acts.len()];
            check::<f32>(kernel, &g, &mut rng, act, i % 2 == 0, 1e-6);
            check::<f32>(kernel, &g, &mut rng, Activation::Identity, i % 2 == 1, 1e-6);
            check::<f16>(kernel, &g, &mut rng, act, i % 2 == 1, 2e-3);
            check::<bf16>(kernel, &g, &mut rng, act, i % 2 == 0, 1e-2);
        }
    }
}

/// The same sums in the same order as the implicit GEMM on the same microkernel: every
/// output the same bits, with bias and a fused epilogue (so a layer may take either).
#[test]
fn gives_the_implicit_gemms_bits() {
    let mut rng = StdRng::seed_from_u64(0x5d3);
    for kernel in MicroKernel::all_supported() {
        for g in [geometry(2, 64, 20, [2, 2], [21, 50]), geometry(1, 70, 9, [3, 2], [9, 13])] {
            let (x, w, b, res) = (
                random::<f32>(g.input_len(), &mut rng),
                random(g.weight_len(), &mut rng),
                random(g.out_channels, &mut rng),
                random(g.output_len(), &mut rng),
            );
            let ep = Epilogue { activation: Activation::LeakyRelu(0.1), residual: Some(res.as_slice()), scale: 0.75 };
            let p = g.out_hw()[0];
            let mut ours = vec![f32::NAN; g.output_len()];
            let mut scratch = vec![f32::NAN; scratch_floats(&g, kernel, 2)];
            run(kernel, &g, &x, &w, Some(&b), &ep, &mut ours, 0..p, 2, &mut scratch).unwrap();
            let plan = CpuConvPlan::new(&g, 0..p, 2, kernel, None);
            let mut theirs = vec![f32::NAN; g.output_len()];
            let mut ws = vec![0f32; plan.workspace_floats()];
            plan.run_fused(&x, &w, Some(&b), &ep, &mut theirs, &mut ws);
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{kernel:?} {g:?} element {i}: {a} vs {b}");
            }
        }
    }
}

/// An output's bits do not depend on the image's size or where a band starts: a crop of
/// the input at a stride-aligned offset gives the same bits as the whole image at every
/// output pixel of the crop (what lossless tiling needs), with each microkernel.
#[test]
fn rounding_is_independent_of_the_image_size() {
    let mut rng = StdRng::seed_from_u64(8);
    for kernel in MicroKernel::all_supported() {
        let (whole, crop) = (geometry(1, 150, 5, [2, 2], [30, 106]), geometry(1, 150, 5, [2, 2], [13, 43]));
        let x: Vec<f32> = random(whole.input_len(), &mut rng);
        let w: Vec<f32> = random(whole.weight_len(), &mut rng);
        let (y0, x0) = (6, 34);
        let (wh, ww) = (30, 106);
        let xc: Vec<f32> = (0..150)
            .flat_map(|c| (0..13).flat_map(move |y| (0..43).map(move |xx| (c, y, xx))))
            .map(|(c, y, xx)| x[(c * wh + y0 + y) * ww + x0 + xx])
            .collect();
        let run_on = |g: &ConvGeometry, x: &[f32]| {
            let mut out = vec![f32::NAN; g.output_len()];
            let mut scratch = vec![f32::NAN; scratch_floats(g, kernel, 2)];
            let p = g.out_hw()[0];
            run(kernel, g, x, &w, None, &Epilogue::default(), &mut out, 0..p, 2, &mut scratch).unwrap();
            out
        };
        let (a, b) = (run_on(&whole, &x), run_on(&crop, &xc));
        let ([pw, qw], [pc, qc]) = (whole.out_hw(), crop.out_hw());
        for k in 0..5 {
            for oy in 0..pc {
                for ox in 0..qc {
                    let want = a[(k * pw + y0 / 2 + oy) * qw + x0 / 2 + ox];
                    assert_eq!(b[(k * pc + oy) * qc + ox].to_bits(), want.to_bits(), "{kernel:?} ({k}, {oy}, {ox})");
                }
            }
        }
    }
}

/// Refused before any unsafe GEMM: what is not kernel = stride (padded, dilated, grouped,
/// overlapping, transposed), rows past the output, a short input, a short scratch.
#[test]
fn refuses_what_it_does_not_run_before_the_gemm() {
    let g = geometry(1, 4, 2, [2, 2], [6, 5]);
    let kernel = MicroKernel::detect();
    let ep = Epilogue::default();
    let (x, w, mut out) = (vec![1f32; g.input_len()], vec![1f32; g.weight_len()], vec![0f32; g.output_len()]);
    let mut scratch = vec![0f32; scratch_floats(&g, kernel, 2)];
    let e = run(kernel, &g, &x, &w, None, &ep, &mut out, 0..4, 2, &mut scratch).unwrap_err();
    assert!(matches!(e, ConvError::Parameter { param: "output rows", .. }), "{e:?}");
    let e = run(kernel, &g, &x[1..], &w, None, &ep, &mut out, 0..3, 2, &mut scratch).unwrap_err();
    assert!(matches!(e, ConvError::BufferLength { what: "input", .. }), "{e:?}");
    let e = run(kernel, &g, &x, &w, None, &ep, &mut out, 0..3, 2, &mut scratch[1..]).unwrap_err();
    assert!(matches!(e, ConvError::BufferLength { what: "scratch", .. }), "{e:?}");
    run(kernel, &g, &x, &w, None, &ep, &mut out, 0..3, 2, &mut scratch).unwrap();
    assert!(out.iter().all(|&v| v == 16.0), "every output is 4 taps over 4 channels of ones");
    let variants: [fn(&mut ConvGeometry); 6] = [
        |g| g.pad_begin = [1, 0],
        |g| g.pad_end = [0, 1],
        |g| g.dilation = [1, 2],
        |g| g.stride = [1, 1],
        |g| g.kind = ConvKind::Transposed,
        |g| {
            g.groups = 2;
            g.out_channels = 2;
        },
    ];
    for change in variants {
        let mut h = g;
        change(&mut h);
        assert!(!fits(&h), "{h:?}");
        let out_len = h.out_size().map_or(0, |_| h.output_len());
        let (x, w, mut out) = (vec![1f32; h.input_len()], vec![1f32; h.weight_len()], vec![0f32; out_len]);
        let e = run(kernel, &h, &x, &w, None, &ep, &mut out, 0..1, 2, &mut scratch).unwrap_err();
        assert!(matches!(e, ConvError::AlgorithmUnsupported { .. }), "{h:?}: {e:?}");
    }
}
