//! The executor against an f64 definition of convolution on random problems.

use crate::cpu::{CpuConvPlan, CpuTiling, Element, MicroKernel};
use crate::geometry::{ConvGeometry, ConvKind};
use half::{bf16, f16};
use rand::{Rng, SeedableRng, rngs::StdRng};

/// Prints `SKIPPED <test>: <reason>` past the harness's capture, as
/// `conv_engine::testing::skipped` does (this crate cannot depend on conv-engine).
pub(crate) fn skipped(reason: impl std::fmt::Display) {
    use std::io::Write;
    let thread = std::thread::current();
    let line = format!("SKIPPED {}: {reason}\n", thread.name().unwrap_or("a test"));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// Convolution straight from its definition, accumulated in f64.
pub(crate) fn reference(g: &ConvGeometry, x: &[f64], wt: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
    let [h, w] = g.in_size;
    let [p, q] = g.out_hw();
    let [kr, ks] = g.kernel;
    let (cg, mg) = (g.in_channels_per_group(), g.out_channels_per_group());
    let mut out = vec![0.0; g.output_len()];
    for n in 0..g.batch {
        for k in 0..g.out_channels {
            let grp = k / mg;
            let km = k % mg;
            for op in 0..p {
                for oq in 0..q {
                    let mut acc = bias.map_or(0.0, |b| b[k]);
                    for c in 0..cg {
                        let ci = grp * cg + c;
                        for r in 0..kr {
                            for s in 0..ks {
                                let (ih, iw) = match g.kind {
                                    ConvKind::Forward => (
                                        (op * g.stride[0] + r * g.dilation[0]) as isize - g.pad_begin[0] as isize,
                                        (oq * g.stride[1] + s * g.dilation[1]) as isize - g.pad_begin[1] as isize,
                                    ),
                                    ConvKind::Transposed => {
                                        let nh = (op + g.pad_begin[0]) as isize - (r * g.dilation[0]) as isize;
                                        let nw = (oq + g.pad_begin[1]) as isize - (s * g.dilation[1]) as isize;
                                        if nh.rem_euclid(g.stride[0] as isize) != 0
                                            || nw.rem_euclid(g.stride[1] as isize) != 0
                                        {
                                            continue;
                                        }
                                        (nh / g.stride[0] as isize, nw / g.stride[1] as isize)
                                    }
                                };
                                if ih < 0 || iw < 0 || ih >= h as isize || iw >= w as isize {
                                    continue;
                                }
                                let xv = x[((n * g.in_channels + ci) * h + ih as usize) * w + iw as usize];
                                let wv = match g.kind {
                                    ConvKind::Forward => wt[((k * cg + c) * kr + r) * ks + s],
                                    ConvKind::Transposed => wt[((ci * mg + km) * kr + r) * ks + s],
                                };
                                acc += xv * wv;
                            }
                        }
                    }
                    out[((n * g.out_channels + k) * p + op) * q + oq] = acc;
                }
            }
        }
    }
    out
}

pub(crate) fn random_geometry(rng: &mut StdRng) -> ConvGeometry {
    let kind = if rng.random_bool(0.35) { ConvKind::Transposed } else { ConvKind::Forward };
    loop {
        let groups = [1, 1, 1, 2, 3][rng.random_range(0..5)];
        let g = ConvGeometry {
            kind,
            batch: rng.random_range(1..3),
            in_channels: groups * rng.random_range(1..6),
            in_size: [rng.random_range(1..12), rng.random_range(1..20)],
            out_channels: groups * rng.random_range(1..14),
            kernel: [rng.random_range(1..5), rng.random_range(1..5)],
            stride: [rng.random_range(1..4), rng.random_range(1..4)],
            pad_begin: [rng.random_range(0..3), rng.random_range(0..3)],
            pad_end: [rng.random_range(0..3), rng.random_range(0..3)],
            dilation: [rng.random_range(1..3), rng.random_range(1..3)],
            output_padding: [0, 0],
            groups,
        };
        if g.out_size().is_some() {
            return g;
        }
    }
}

fn check<T: Element>(g: &ConvGeometry, kernel: MicroKernel, tiling: Option<CpuTiling>, rng: &mut StdRng, tol: f64) {
    let x: Vec<T> = (0..g.input_len()).map(|_| T::from_f32(rng.random_range(-1.0..1.0))).collect();
    let wt: Vec<T> = (0..g.weight_len()).map(|_| T::from_f32(rng.random_range(-1.0..1.0))).collect();
    let bias: Vec<T> = (0..g.out_channels).map(|_| T::from_f32(rng.random_range(-1.0..1.0))).collect();
    let to64 = |v: &[T]| v.iter().map(|e| e.to_f32() as f64).collect::<Vec<_>>();
    let want = reference(g, &to64(&x), &to64(&wt), Some(&to64(&bias)));
    let [p, _] = g.out_hw();
    // Poison the output so that an element nobody writes fails.
    let mut out = vec![T::from_f32(f32::NAN); g.output_len()];
    // Run in two row bands to exercise banded planning too.
    let split = p / 2;
    for rows in [0..split, split..p] {
        let plan = CpuConvPlan::new(g, rows, 2, kernel, tiling);
        let mut ws = vec![f32::NAN; plan.workspace_floats()];
        plan.run(&x, &wt, Some(&bias), &mut out, &mut ws);
    }
    let scale = g.in_channels_per_group() as f64 * g.taps() as f64;
    for (i, (o, r)) in out.iter().zip(&want).enumerate() {
        let o = o.to_f32() as f64;
        assert!((o - r).abs() <= tol * scale.sqrt().max(1.0), "{g:?} {kernel:?} element {i}: {o} vs {r}");
    }
}

#[test]
fn executor_matches_definition_on_random_problems() {
    let mut rng = StdRng::seed_from_u64(0x1a2b);
    for i in 0..150 {
        let g = random_geometry(&mut rng);
        let kernel = if i % 3 == 0 { MicroKernel::Portable } else { MicroKernel::detect() };
        // Small tiles force several reduction blocks and column blocks.
        let tiling = if i % 2 == 0 { Some(CpuTiling { kc: 5, nc: 16, mc: 6 }) } else { None };
        check::<f32>(&g, kernel, tiling, &mut rng, 1e-5);
    }
}

#[test]
fn half_precision_inputs_accumulate_in_f32() {
    let mut rng = StdRng::seed_from_u64(7);
    for _ in 0..30 {
        let g = random_geometry(&mut rng);
        check::<f16>(&g, MicroKernel::detect(), None, &mut rng, 2e-3);
        check::<bf16>(&g, MicroKernel::detect(), None, &mut rng, 1.6e-2);
    }
}

#[test]
fn workspace_does_not_grow_with_the_image() {
    let mut g = ConvGeometry {
        kind: ConvKind::Forward,
        batch: 1,
        in_channels: 64,
        in_size: [64, 64],
        out_channels: 64,
        kernel: [3, 3],
        stride: [1, 1],
        pad_begin: [1, 1],
        pad_end: [1, 1],
        dilation: [1, 1],
        output_padding: [0, 0],
        groups: 1,
    };
    let small = CpuConvPlan::new(&g, 0..64, 2, MicroKernel::Portable, None).workspace_bytes();
    g.in_size = [1024, 1024];
    let large = CpuConvPlan::new(&g, 0..1024, 2, MicroKernel::Portable, None).workspace_bytes();
    assert_eq!(small, large);
}

#[test]
fn the_fused_epilogue_matches_its_definition() {
    use crate::epilogue::{Activation, Epilogue};
    let mut rng = StdRng::seed_from_u64(0xe9);
    let acts = [Activation::Identity, Activation::Relu, Activation::LeakyRelu(0.2), Activation::Silu, Activation::Gelu];
    for i in 0..40 {
        let g = random_geometry(&mut rng);
        let act = acts[i % acts.len()];
        let x: Vec<f32> = (0..g.input_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let wt: Vec<f32> = (0..g.weight_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let bias: Vec<f32> = (0..g.out_channels).map(|_| rng.random_range(-1.0..1.0)).collect();
        let res: Vec<f32> = (0..g.output_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
        let scale = [1.0f32, 0.5, 1.25][i % 3];
        let to64 = |v: &[f32]| v.iter().map(|&e| e as f64).collect::<Vec<_>>();
        let conv = reference(&g, &to64(&x), &to64(&wt), Some(&to64(&bias)));
        let with_res = i % 2 == 0;
        let ep = Epilogue { activation: act, residual: with_res.then_some(res.as_slice()), scale };
        let mut out = vec![f32::NAN; g.output_len()];
        let [p, _] = g.out_hw();
        for rows in [0..p / 2, p / 2..p] {
            let plan = CpuConvPlan::new(&g, rows, 2, MicroKernel::detect(), None);
            let mut ws = vec![f32::NAN; plan.workspace_floats()];
            plan.run_fused(&x, &wt, Some(&bias), &ep, &mut out, &mut ws);
        }
        let scale_tol = (g.in_channels_per_group() as f64 * g.taps() as f64).sqrt().max(1.0);
        for (j, (o, c)) in out.iter().zip(&conv).enumerate() {
            let want = (act.apply(*c as f32) as f64 + if with_res { res[j] as f64 } else { 0.0 }) * scale as f64;
            assert!((*o as f64 - want).abs() <= 2e-5 * scale_tol, "{g:?} {act:?} element {j}: {o} vs {want}");
        }
    }
}
