//! The executor against an f64 definition of convolution on random problems.

use super::{CpuConvPlan, CpuTiling, Element, MicroKernel};
use conv_engine::geometry::{ConvGeometry, ConvKind};
use conv_engine::reference::conv_geometry_f64 as reference;
use half::{bf16, f16};
use rand::{Rng, SeedableRng, rngs::StdRng};
use test_support::random_geometry;

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
    use conv_engine::epilogue::{Activation, Epilogue};
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
