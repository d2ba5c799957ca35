//! ImplicitGemm against Winograd, back to back in one process, on the Real-CUGAN and VAE
//! 3x3 shapes: the numbers behind the CPU cost model's Winograd rate, printed with their
//! ratio. `cargo bench -p conv-engine --bench winograd_vs_implicit_gemm`.

use candle_core::{DType, Device, Tensor};
use conv_engine::{Algorithm, Budget, Conv2dParams, ConvProblem, CpuConv, Padding2d};
use std::time::Instant;

fn main() {
    // (C, H, W, K)
    let shapes = [
        (32, 256, 256, 32),
        (64, 200, 200, 64),
        (64, 130, 130, 64),
        (128, 128, 128, 128),
        (256, 64, 64, 256),
        (256, 128, 128, 256),
        (512, 32, 32, 512),
    ];
    for dt in [DType::F32, DType::F16] {
        for &(c, h, w, k) in &shapes {
            let params = Conv2dParams { padding: Padding2d::uniform(1), ..Default::default() };
            let p = ConvProblem::conv2d(&[1, c, h, w], &[k, c, 3, 3], dt, dt, &params).unwrap();
            let x = Tensor::randn(0f32, 1.0, (1, c, h, w), &Device::Cpu).unwrap().to_dtype(dt).unwrap();
            let wt = Tensor::randn(0f32, 0.1, (k, c, 3, 3), &Device::Cpu).unwrap().to_dtype(dt).unwrap();
            let mut line = format!("{dt:?} C{c} {h}x{w} K{k}:");
            let engines: Vec<_> = [Algorithm::ImplicitGemm, Algorithm::Winograd]
                .map(|alg| {
                    let engine = CpuConv::new(Budget::bytes(64 << 20)).with_allowed(&[alg]);
                    let plan = engine.plan(&p).unwrap();
                    engine.run_plan(&plan, &x, &wt, None).unwrap();
                    (alg, engine, plan)
                })
                .into();
            // Alternating rounds, best of each: the machine is shared.
            let mut best = [f64::INFINITY; 2];
            for _ in 0..4 {
                for (i, (_, engine, plan)) in engines.iter().enumerate() {
                    let t = Instant::now();
                    engine.run_plan(plan, &x, &wt, None).unwrap();
                    best[i] = best[i].min(t.elapsed().as_secs_f64());
                }
            }
            for ((alg, _, _), secs) in engines.iter().zip(best) {
                line += &format!("  {alg} {:.1} GFLOP/s", p.geometry().flops() as f64 / secs / 1e9);
            }
            line += &format!("  Winograd/ImplicitGemm speed {:.2}", best[0] / best[1]);
            println!("{line}");
        }
    }
}
