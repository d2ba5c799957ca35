//! GPU convolution benchmark (GPU tier): every algorithm of the ROCm backend on the
//! SD/FLUX VAE-decoder conv shapes at 1024² output (and the 128-channel one at 2048²),
//! f16, bf16 and f32, timed with device events (median of `--reps` after a warm-up),
//! with the workspace each plan used and the allocator's peak. One JSON line per
//! (shape, dtype, algorithm) on stdout; `benches/anchors/cudnn_conv.py` measures cuDNN on
//! the same shapes and `scripts/gpu-tier-report.py` puts both side by side.
//!
//! The ImplicitGemm line names the kernel the catalog chose (`config`, `splits`). With
//! `--sweep` (or `ROCM_VISION_BENCH_SWEEP=1`, for scripts/gpu-tier.sh) every candidate NHWC
//! configuration of the dtype's kind (matrix cores for f16/bf16, FMA for f32) is timed too,
//! as `ImplicitGemm[<config>/s<splits>]` lines, and the fastest per (shape, dtype) is
//! repeated as an `ImplicitGemm best=<config>` line with `"winner": true`: the measurement
//! that fills the NVIDIA rows of `rocm_backend::conv::IGEMM_TILE_TABLE`.
//!
//! `cargo bench -p rocm-backend --bench gpu_conv -- [--reps N] [--quick] [--sweep]`

use candle_core::DType;
use conv_engine::{Algorithm, Chunk, Conv2dParams, ConvProblem};
use kernels::{IGEMM_MMA_CONFIGS, IGEMM_SIMT_CONFIGS, MmaVariant};
use rocm_backend::conv::{Epilogue, IgemmKernel, RocmKernel, nhwc_workspace_bytes, run_implicit_gemm};
use rocm_backend::{DeviceArray, RocmCatalog, RocmConv, RocmDevice};
use std::sync::Arc;

struct Shape {
    name: &'static str,
    c: usize,
    k: usize,
    r: usize,
    hw: usize,
}

const SHAPES: &[Shape] = &[
    Shape { name: "3x3 512->512", c: 512, k: 512, r: 3, hw: 1024 },
    Shape { name: "3x3 512->256", c: 512, k: 256, r: 3, hw: 1024 },
    Shape { name: "3x3 256->256", c: 256, k: 256, r: 3, hw: 1024 },
    Shape { name: "3x3 256->128", c: 256, k: 128, r: 3, hw: 1024 },
    Shape { name: "3x3 128->128", c: 128, k: 128, r: 3, hw: 1024 },
    Shape { name: "1x1 512->256", c: 512, k: 256, r: 1, hw: 1024 },
    Shape { name: "1x1 256->128", c: 256, k: 128, r: 1, hw: 1024 },
    Shape { name: "3x3 128->3 (conv_out)", c: 128, k: 3, r: 3, hw: 1024 },
    Shape { name: "3x3 128->128", c: 128, k: 128, r: 3, hw: 2048 },
];

fn random(dev: &Arc<RocmDevice>, dt: DType, n: usize, scale: f32) -> DeviceArray {
    // A cheap deterministic generator: benchmarks need non-zero, non-constant data.
    let mut s = 0x2545F4914F6CDD1Du64;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * scale
        })
        .collect();
    match dt {
        DType::F32 => DeviceArray::from_slice(dev, &v),
        DType::F16 => DeviceArray::from_slice(dev, &v.iter().map(|&x| half::f16::from_f32(x)).collect::<Vec<_>>()),
        _ => DeviceArray::from_slice(dev, &v.iter().map(|&x| half::bf16::from_f32(x)).collect::<Vec<_>>()),
    }
    .expect("upload")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize =
        args.iter().position(|a| a == "--reps").and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(5);
    let quick = args.iter().any(|a| a == "--quick");
    let sweep = args.iter().any(|a| a == "--sweep") || std::env::var("ROCM_VISION_BENCH_SWEEP").is_ok_and(|v| v == "1");
    let dev = match RocmDevice::open(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("gpu_conv: no ROCm device, nothing to measure: {e}");
            return;
        }
    };
    eprintln!("gpu_conv on {:?} ({} CUs, warp {})", dev.info().name, dev.info().compute_units, dev.info().warp_size);
    for s in SHAPES.iter().take(if quick { 2 } else { SHAPES.len() }) {
        for dt in [DType::F16, DType::BF16, DType::F32] {
            let pad = s.r / 2;
            let p = ConvProblem::conv2d(
                &[1, s.c, s.hw, s.hw],
                &[s.k, s.c, s.r, s.r],
                dt,
                dt,
                &Conv2dParams::default().with_padding(pad),
            )
            .unwrap();
            let x = random(&dev, dt, p.geometry().input_len(), 2.0);
            let w = random(&dev, dt, p.geometry().weight_len(), 0.1);
            let flops = p.geometry().flops() as f64;
            for alg in [Algorithm::ImplicitGemm, Algorithm::Im2colGemm, Algorithm::Gemm1x1, Algorithm::Direct] {
                // Direct is the slow reference: measured once, at the 512-channel shapes
                // (where the implicit GEMM must beat it by 10x) in f16 only.
                if alg == Algorithm::Direct && (s.c != 512 || dt != DType::F16 || quick) {
                    continue;
                }
                let engine = RocmConv::new(dev.clone()).with_allowed(&[alg]);
                let Ok(plan) = engine.plan(&p) else { continue };
                let run = || rocm_backend::conv::run_plan(&dev, &plan, &x, &w, None).expect("conv");
                drop(run());
                dev.synchronize().unwrap();
                dev.allocator().reset_peaks();
                let live_before = dev.allocator().stats().live;
                let n = if alg == Algorithm::Direct { 1 } else { reps };
                let mut times = Vec::with_capacity(n);
                for _ in 0..n {
                    let start = dev.stream().record().unwrap();
                    let out = run();
                    let end = dev.stream().record().unwrap();
                    end.synchronize().unwrap();
                    times.push(end.elapsed_ms_since(&start).unwrap() as f64);
                    drop(out);
                }
                times.sort_by(f64::total_cmp);
                let ms = times[times.len() / 2];
                let peak = dev.allocator().stats().peak_live.saturating_sub(live_before);
                let kernel = match plan.kernel() {
                    RocmKernel::ImplicitGemm(IgemmKernel::Nhwc { config, splits, .. }) => {
                        format!(", \"config\": \"{}\", \"splits\": {splits}", config.name)
                    }
                    RocmKernel::ImplicitGemm(IgemmKernel::Nchw(c)) => {
                        format!(", \"config\": \"nchw {}\", \"splits\": 1", c.name)
                    }
                    _ => String::new(),
                };
                println!(
                    "{{\"impl\": \"rocm-vision\", \"algorithm\": \"{alg}\", \"shape\": \"{}\", \"c\": {}, \"k\": {}, \"r\": {}, \"hw\": {}, \"dtype\": \"{:?}\", \"ms\": {ms:.4}, \"tflops\": {:.2}, \"workspace_bytes\": {}, \"chunks\": {}, \"peak_above_inputs_bytes\": {peak}, \"reps\": {n}{kernel}}}",
                    s.name,
                    s.c,
                    s.k,
                    s.r,
                    s.hw,
                    dt,
                    flops / (ms * 1e-3) / 1e12,
                    plan.workspace_bytes(),
                    plan.chunk_count()
                );
            }
            if sweep {
                sweep_configs(&dev, s, &p, &x, &w, reps);
            }
            drop((x, w));
            dev.allocator().trim(dev.stream()).unwrap();
        }
    }
}

/// Times every candidate NHWC configuration on `p` (whole problem, one chunk) and prints
/// one line each, then the fastest again with `"winner": true`.
fn sweep_configs(dev: &Arc<RocmDevice>, s: &Shape, p: &ConvProblem, x: &DeviceArray, w: &DeviceArray, reps: usize) {
    let dt = p.dtype().to_candle();
    let flops = p.geometry().flops() as f64;
    let kg = p.geometry().out_channels_per_group();
    let chunk = Chunk { batch: 0..p.geometry().batch, rows: 0..p.geometry().out_hw()[0] };
    let default = RocmCatalog::new(dev.clone()).igemm_kernel(p, &chunk);
    let table: &[kernels::IgemmNhwcConfig] = if dt == DType::F32 { &IGEMM_SIMT_CONFIGS } else { &IGEMM_MMA_CONFIGS };
    let mut candidates: Vec<IgemmKernel> = table
        .iter()
        // Narrow tiles only where the channels are narrow, wide ones only where they are not.
        .filter(|c| if kg <= 32 { c.bn <= 64 } else { c.bn >= 64 })
        .filter(|c| !c.nvidia_only || dev.info().family == rocm_backend::ArchFamily::NvidiaTestTier)
        .map(|config| IgemmKernel::Nhwc { variant: MmaVariant::Native, config, splits: 1 })
        .collect();
    if let IgemmKernel::Nhwc { splits, .. } = default
        && splits > 1
    {
        candidates.push(default);
    }
    let mut best: Option<(f64, String)> = None;
    for k in candidates {
        let IgemmKernel::Nhwc { config, splits, .. } = k else { continue };
        let run = || run_implicit_gemm(dev, p, k, x, w, None, Epilogue::default()).expect("sweep conv");
        drop(run());
        dev.synchronize().unwrap();
        dev.allocator().reset_peaks();
        let live_before = dev.allocator().stats().live;
        let n = if dt == DType::F32 { reps.min(3) } else { reps };
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let start = dev.stream().record().unwrap();
            let out = run();
            let end = dev.stream().record().unwrap();
            end.synchronize().unwrap();
            times.push(end.elapsed_ms_since(&start).unwrap() as f64);
            drop(out);
        }
        times.sort_by(f64::total_cmp);
        let ms = times[times.len() / 2];
        let peak = dev.allocator().stats().peak_live.saturating_sub(live_before);
        let ws = nhwc_workspace_bytes(p, &chunk, splits).unwrap_or(0);
        let line = |alg: String, winner: bool| {
            format!(
                "{{\"impl\": \"rocm-vision\", \"algorithm\": \"{alg}\", \"shape\": \"{}\", \"c\": {}, \"k\": {}, \"r\": {}, \"hw\": {}, \"dtype\": \"{dt:?}\", \"ms\": {ms:.4}, \"tflops\": {:.2}, \"workspace_bytes\": {ws}, \"chunks\": 1, \"peak_above_inputs_bytes\": {peak}, \"reps\": {n}, \"config\": \"{}\", \"splits\": {splits}, \"sweep\": true, \"winner\": {winner}}}",
                s.name,
                s.c,
                s.k,
                s.r,
                s.hw,
                flops / (ms * 1e-3) / 1e12,
                config.name
            )
        };
        println!("{}", line(format!("ImplicitGemm[{}/s{splits}]", config.name), false));
        if best.as_ref().is_none_or(|(b, _)| ms < *b) {
            best = Some((ms, line(format!("ImplicitGemm best={}/s{splits}", config.name), true)));
        }
    }
    if let Some((_, l)) = best {
        println!("{l}");
    }
}
