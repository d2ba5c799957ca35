//! Every CPU algorithm on Real-CUGAN's layers that are not 3x3 wide ones (those are in
//! `winograd_vs_implicit_gemm`): the 2x2 stride-2 convolutions and deconvolutions, the
//! deconvolution as a 1x1 convolution to 4x the channels (what `examples-sr` runs, before
//! its pixel shuffle), the 4x4 stride-2 output deconvolution and the 3-channel layers, at
//! the sizes of a 256x256 image through the 2x model (net input 292x292). Alternating
//! rounds, best of each, LeakyReLU(0.1) fused as the model has it; GFLOP/s of each
//! problem's own FLOP count (a 1x1 form does the same FLOPs as its deconvolution).
//! `cargo bench -p conv-cpu --bench realcugan_layers [-- --only TEXT] [--algorithm NAME] [--rounds N]`.
//! Large blocks are reused as in the `realcugan` binary (`host_alloc`): outputs and
//! workspaces cost no page faults after the untimed first run of each.

use candle_core::{DType, Device, Tensor};
use conv_cpu::CpuConv;
use conv_engine::{Activation, Algorithm, Budget, Conv2dParams, ConvProblem, Epilogue, Padding2d};
use std::time::Instant;

#[global_allocator]
static ALLOC: host_alloc::ReusingAllocator = host_alloc::ReusingAllocator::new();

struct Layer {
    name: &'static str,
    transposed: bool,
    c: usize,
    size: usize,
    k: usize,
    r: usize,
    stride: usize,
    pad: usize,
}

fn main() {
    let only = std::env::args().skip_while(|a| a != "--only").nth(1);
    let algorithm: Option<Algorithm> =
        std::env::args().skip_while(|a| a != "--algorithm").nth(1).map(|a| a.parse().expect("--algorithm NAME"));
    let rounds: usize =
        std::env::args().skip_while(|a| a != "--rounds").nth(1).map_or(4, |a| a.parse().expect("--rounds N"));
    let layers = [
        Layer { name: "deconvrelu_2 2x2 s2", transposed: true, c: 64, size: 258, k: 64, r: 2, stride: 2, pad: 0 },
        Layer { name: "deconvrelu_2 as 1x1", transposed: false, c: 64, size: 258, k: 256, r: 1, stride: 1, pad: 0 },
        Layer { name: "deconvrelu_1 2x2 s2", transposed: true, c: 128, size: 131, k: 128, r: 2, stride: 2, pad: 0 },
        Layer { name: "deconvrelu_1 as 1x1", transposed: false, c: 128, size: 131, k: 512, r: 1, stride: 1, pad: 0 },
        Layer { name: "convrelu_9 2x2 s2", transposed: false, c: 64, size: 548, k: 64, r: 2, stride: 2, pad: 0 },
        Layer { name: "convrelu_13 2x2 s2", transposed: false, c: 128, size: 270, k: 128, r: 2, stride: 2, pad: 0 },
        Layer { name: "convrelu_2 2x2 s2", transposed: false, c: 64, size: 288, k: 64, r: 2, stride: 2, pad: 0 },
        Layer { name: "deconvrelu_0 2x2 s2", transposed: true, c: 64, size: 140, k: 64, r: 2, stride: 2, pad: 0 },
        Layer { name: "deconv_48 4x4 s2 p3", transposed: true, c: 64, size: 278, k: 3, r: 4, stride: 2, pad: 3 },
        Layer { name: "convrelu_7 3x3 3->32", transposed: false, c: 3, size: 552, k: 32, r: 3, stride: 1, pad: 0 },
        Layer { name: "conv_46 3x3 64->3", transposed: false, c: 64, size: 514, k: 3, r: 3, stride: 1, pad: 0 },
    ];
    let algorithms =
        [Algorithm::ImplicitGemm, Algorithm::Winograd, Algorithm::Direct, Algorithm::Gemm1x1, Algorithm::Im2colGemm];
    println!(
        "threads: {}, microkernel: {:?}",
        rayon::current_num_threads(),
        conv_cpu::implicit_gemm::MicroKernel::detect()
    );
    let dt = DType::F32;
    for l in layers.iter().filter(|l| only.as_ref().is_none_or(|o| l.name.contains(o.as_str()))) {
        let params = Conv2dParams { stride: [l.stride; 2], padding: Padding2d::uniform(l.pad), ..Default::default() };
        let (x_dims, w_dims) =
            ([1, l.c, l.size, l.size], if l.transposed { [l.c, l.k, l.r, l.r] } else { [l.k, l.c, l.r, l.r] });
        let p = if l.transposed {
            ConvProblem::conv_transpose2d(&x_dims, &w_dims, dt, dt, &params)
        } else {
            ConvProblem::conv2d(&x_dims, &w_dims, dt, dt, &params)
        }
        .unwrap();
        let x = Tensor::randn(0f32, 1.0, &x_dims[..], &Device::Cpu).unwrap();
        let w = Tensor::randn(0f32, 0.1, &w_dims[..], &Device::Cpu).unwrap();
        let b = Tensor::randn(0f32, 0.1, l.k, &Device::Cpu).unwrap();
        let ep = Epilogue::default().with_activation(Activation::LeakyRelu(0.1));
        let budget = Budget::bytes(64 << 20);
        // Each algorithm alone, then the dispatcher's own choice (`None`).
        let runs: Vec<_> = algorithms
            .iter()
            .map(Some)
            .chain([None])
            .filter(|a| algorithm.is_none_or(|only| *a == Some(&only)))
            .filter_map(|a| {
                let engine = match a {
                    Some(&a) => CpuConv::new(budget).with_allowed(&[a]),
                    None => CpuConv::new(budget),
                };
                let plan = engine.plan(&p).ok()?;
                engine.run_plan_fused(&plan, &x, &w, Some(&b), &ep).ok()?;
                Some((engine, plan))
            })
            .collect();
        let mut best = vec![f64::INFINITY; runs.len()];
        for _ in 0..rounds {
            for (i, (engine, plan)) in runs.iter().enumerate() {
                let t = Instant::now();
                engine.run_plan_fused(plan, &x, &w, Some(&b), &ep).unwrap();
                best[i] = best[i].min(t.elapsed().as_secs_f64());
            }
        }
        let mut line = format!("{:<22} {:>7.2} GFLOP:", l.name, p.geometry().flops() as f64 / 1e9);
        for (i, ((_, plan), secs)) in runs.iter().zip(&best).enumerate() {
            let chosen = if algorithm.is_none() && i == runs.len() - 1 { "dispatcher's choice: " } else { "" };
            line += &format!(
                "  {chosen}{} {:.1} ms {:.1} GFLOP/s;",
                plan.kernel(),
                secs * 1e3,
                p.geometry().flops() as f64 / secs / 1e9
            );
        }
        println!("{line}");
    }
}
