//! Convolution on the CPU: the CPU's [`AlgorithmCatalog`](conv_engine::AlgorithmCatalog)
//! ([`CpuCatalog`]: workspace and cost of each algorithm here, the kernel each runs) and the
//! executors of its plans ([`CpuConv`]) on candle CPU tensors: the packed implicit GEMM and
//! its microkernels ([`implicit_gemm`]), Winograd F(2x2)/F(4x4), `Gemm1x1` on the gemm crate
//! and its transposed and space-to-depth forms on the engine's microkernel
//! ([`CpuKernel::TapGemm`], [`CpuKernel::S2dGemm`]), the
//! direct convolution (vectorised and scalar) and candle's own im2col conv.
//!
//! Planning itself (problems, dispatcher, plans, budget) is `conv-engine`'s; this crate
//! brings what the CPU needs to run plans (candle's CPU conv, the gemm crate, rayon),
//! which the ROCm backend does not depend on.

mod band_pipeline;
mod candle_conv;
mod catalog;
mod checks;
pub mod direct;
mod engine;
mod gemm1x1;
pub mod implicit_gemm;
mod panel_gemm;
mod rates;
mod s2d_gemm;
mod stride2;
mod tap_gemm;
mod winograd;
mod workers;

pub use catalog::{CpuCatalog, CpuKernel, CpuPlan};
pub use engine::CpuConv;
pub use implicit_gemm::{Element, MicroKernel};
pub use winograd::{WINOGRAD_GRID, WinogradTile};

pub(crate) use checks::{check_executor_args, check_len};
pub(crate) use engine::{cpu_slice, output_buffer};
