//! ImplicitGemm against Winograd F(2x2, 3x3) and F(4x4, 3x3), back to back in one process,
//! on the Real-CUGAN and VAE 3x3 shapes: the numbers behind the CPU cost model's Winograd
//! rates, printed with their ratios and the microkernel that ran.
//! `cargo bench -p conv-engine --bench winograd_vs_implicit_gemm [-- --f16] [--only C,H,W,K]
//! [--rounds N]` (`--only 64,288,288,64`: that shape alone, for profiling).

use candle_core::{DType, Device, Tensor};
use conv_cpu::CpuConv;
use conv_cpu::{CpuCatalog, WinogradTile};
use conv_engine::{Algorithm, Budget, Conv2dParams, ConvProblem, Padding2d};
use std::time::Instant;

fn main() {
    let f16 = std::env::args().any(|a| a == "--f16");
    let only: Option<(usize, usize, usize, usize)> = std::env::args().skip_while(|a| a != "--only").nth(1).map(|v| {
        let d: Vec<usize> = v.split(',').map(|x| x.parse().expect("--only C,H,W,K")).collect();
        (d[0], d[1], d[2], d[3])
    });
    let rounds: usize =
        std::env::args().skip_while(|a| a != "--rounds").nth(1).map_or(4, |v| v.parse().expect("--rounds N"));
    // (C, H, W, K): Real-CUGAN 2x at 256² (net input 292²: the 3x3 layers at 1x, 1/2x and
    // 2x of it), then the SD VAE decoder's.
    let shapes = [
        (3, 552, 552, 32),
        (64, 514, 514, 3),
        (32, 288, 288, 64),
        (64, 288, 288, 64),
        (64, 144, 144, 128),
        (128, 144, 144, 64),
        (128, 72, 72, 256),
        (256, 72, 72, 128),
        (64, 512, 512, 64),
        (128, 128, 128, 128),
        (256, 64, 64, 256),
        (512, 32, 32, 512),
    ];
    let dtypes: &[DType] = if f16 { &[DType::F32, DType::F16] } else { &[DType::F32] };
    println!(
        "threads: {}, microkernel: {:?}",
        rayon::current_num_threads(),
        conv_cpu::implicit_gemm::MicroKernel::detect()
    );
    for &dt in dtypes {
        for &(c, h, w, k) in shapes.iter().filter(|&&s| only.is_none_or(|o| o == s)) {
            let params = Conv2dParams { padding: Padding2d::uniform(1), ..Default::default() };
            let p = ConvProblem::conv2d(&[1, c, h, w], &[k, c, 3, 3], dt, dt, &params).unwrap();
            let x = Tensor::randn(0f32, 1.0, (1, c, h, w), &Device::Cpu).unwrap().to_dtype(dt).unwrap();
            let wt = Tensor::randn(0f32, 0.1, (k, c, 3, 3), &Device::Cpu).unwrap().to_dtype(dt).unwrap();
            let mut line = format!("{dt:?} C{c} {h}x{w} K{k}:");
            let budget = Budget::bytes(64 << 20);
            let engines: Vec<_> = [
                CpuConv::new(budget).with_allowed(&[Algorithm::ImplicitGemm]),
                CpuConv::with_catalog(CpuCatalog::new().with_winograd_tile(WinogradTile::F2), budget)
                    .with_allowed(&[Algorithm::Winograd]),
                CpuConv::with_catalog(CpuCatalog::new().with_winograd_tile(WinogradTile::F4), budget)
                    .with_allowed(&[Algorithm::Winograd]),
            ]
            .into_iter()
            .map(|engine| {
                let plan = engine.plan(&p).unwrap();
                engine.run_plan(&plan, &x, &wt, None).unwrap();
                (engine, plan)
            })
            .collect();
            // Alternating rounds, best of each: the machine is shared.
            let mut best = vec![f64::INFINITY; engines.len()];
            for _ in 0..rounds {
                for (i, (engine, plan)) in engines.iter().enumerate() {
                    let t = Instant::now();
                    engine.run_plan(plan, &x, &wt, None).unwrap();
                    best[i] = best[i].min(t.elapsed().as_secs_f64());
                }
            }
            for ((_, plan), secs) in engines.iter().zip(&best) {
                line += &format!("  {} {:.1} GFLOP/s", plan.kernel(), p.geometry().flops() as f64 / secs / 1e9);
            }
            line += &format!("  speed vs ImplicitGemm: F2 {:.2}, F4 {:.2}", best[0] / best[1], best[0] / best[2]);
            println!("{line}");
        }
    }
}
