//! Throughput of the CPU executor on VAE-decoder conv shapes with every microkernel this
//! CPU supports, in the same run. `cargo bench -p implicit-gemm --bench executor`
//! (`KERNEL=Avx2Fma` for one kernel, `TILING=kc,nc,mc` to override the blocking).
//!
//! This is the executor alone (no dispatcher); `benches/conv.rs` at the workspace root
//! compares whole plans with candle and onnxruntime. Each figure is the best of 9 runs:
//! on a shared machine the fastest run is the one least disturbed by other work.

use conv_cpu::implicit_gemm::{CpuConvPlan, MicroKernel};
use conv_engine::{ConvGeometry, ConvKind};
use std::time::Instant;

fn main() {
    let threads = rayon::current_num_threads();
    let only = std::env::var("KERNEL").ok();
    let kernels: Vec<MicroKernel> = MicroKernel::all_supported()
        .into_iter()
        .filter(|k| only.as_ref().is_none_or(|o| format!("{k:?}") == *o))
        .collect();
    for (k, why) in MicroKernel::all_unsupported() {
        println!("SKIPPED {k}: this CPU lacks {why}");
    }
    println!("microkernels {kernels:?}, {threads} threads");
    let shapes: &[(usize, usize, usize, usize)] = &[
        (512, 512, 64, 3),
        (256, 256, 128, 3),
        (128, 128, 256, 3),
        (512, 256, 128, 1),
        (256, 128, 256, 1),
        (128, 3, 256, 3),
        (3, 32, 256, 3),
    ];
    for &(c, k, hw, r) in shapes {
        let pad = r / 2;
        let g = ConvGeometry {
            kind: ConvKind::Forward,
            batch: 1,
            in_channels: c,
            in_size: [hw, hw],
            out_channels: k,
            kernel: [r, r],
            stride: [1, 1],
            pad_begin: [pad, pad],
            pad_end: [pad, pad],
            dilation: [1, 1],
            output_padding: [0, 0],
            groups: 1,
        };
        let x: Vec<f32> = (0..g.input_len()).map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5).collect();
        let w: Vec<f32> = (0..g.weight_len()).map(|i| ((i * 104729) % 1000) as f32 * 1e-3 - 0.5).collect();
        let mut out = vec![0f32; g.output_len()];
        let tiling = std::env::var("TILING").ok().filter(|v| !v.is_empty()).map(|v| {
            let n: Vec<usize> = v.split(',').map(|x| x.parse().unwrap()).collect();
            conv_cpu::implicit_gemm::CpuTiling { kc: n[0], nc: n[1], mc: n[2] }
        });
        for &kernel in &kernels {
            let plan = CpuConvPlan::new(&g, 0..hw, threads, kernel, tiling);
            let mut ws = vec![0f32; plan.workspace_floats()];
            plan.run(&x, &w, None, &mut out, &mut ws);
            let t = (0..9)
                .map(|_| {
                    let t = Instant::now();
                    plan.run(&x, &w, None, &mut out, &mut ws);
                    t.elapsed().as_secs_f64()
                })
                .fold(f64::INFINITY, f64::min);
            println!(
                "{c:>4}->{k:<4} {r}x{r} {hw:>4}² {:<20} {:8.2} ms {:7.1} GFLOP/s  tiling {:?} workspace {} KiB",
                kernel.to_string(),
                t * 1e3,
                g.flops() as f64 / t / 1e9,
                plan.tiling(),
                plan.workspace_bytes() / 1024
            );
        }
    }
}
