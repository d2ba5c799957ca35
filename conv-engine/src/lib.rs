//! The convolution engine: what a convolution is ([`ConvProblem`]), which algorithms can
//! run it and at what workspace cost, the byte-budget [`Dispatcher`] that picks one and
//! chunks the problem when nothing fits, and the CPU execution of the plans it makes.
//!
//! Devices plug in through [`AlgorithmCatalog`]: the CPU's is [`cpu::CpuCatalog`]; the
//! ROCm backend brings its own.

pub mod budget;
pub mod cpu;
pub mod dispatch;
pub mod error;
#[cfg(feature = "testing")]
pub mod fuzz;
pub mod host_alloc;
mod params;
pub mod problem;
pub mod reference;
#[cfg(feature = "testing")]
pub mod testing;
pub mod workspace;

pub use budget::{Budget, format_bytes};
pub use cpu::{CpuCatalog, CpuConv, CpuKernel, CpuPlan};
pub use dispatch::{
    Algorithm, AlgorithmCatalog, BudgetState, Chunk, Chunking, ConvRounding, Dispatcher, Plan, PlanCache,
};
pub use error::ConvError;
pub use implicit_gemm::{Activation, Epilogue};
pub use problem::{Conv1dParams, Conv2dParams, ConvDType, ConvProblem, Padding2d, Rank};
pub use workspace::{MeteredBuffer, WorkspaceMeter};
