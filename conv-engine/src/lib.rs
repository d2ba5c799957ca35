//! The convolution engine's device-neutral core: what a convolution is ([`ConvProblem`],
//! its [`geometry`] as a GEMM), which algorithms a device offers and at what workspace and
//! cost ([`AlgorithmCatalog`]), the byte-budget [`Dispatcher`] that picks one and chunks the
//! problem when nothing fits, the [`Plan`] it records, the rounding policy
//! ([`ConvRounding`]), workspace metering and the fused [`Epilogue`]'s definition.
//!
//! Nothing here runs a convolution: devices plug in through [`AlgorithmCatalog`] and
//! execute the plans (`conv-cpu` for the CPU, `rocm-backend` for ROCm), so a GPU build does
//! not depend on the CPU executors.

pub mod budget;
pub mod dispatch;
pub mod epilogue;
pub mod error;
pub mod geometry;
mod params;
pub mod problem;
pub mod reference;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tuning;
pub mod workspace;

pub use budget::{Budget, format_bytes};
pub use dispatch::{
    Algorithm, AlgorithmCatalog, BudgetState, Chunk, Chunking, ConvRounding, Dispatcher, Plan, PlanCache,
    RoundingDispatchers,
};
pub use epilogue::{Activation, Epilogue};
pub use error::ConvError;
pub use geometry::{ConvGeometry, ConvKind, GemmDims, Phase, Tap};
pub use problem::{Conv1dParams, Conv2dParams, ConvDType, ConvProblem, Padding2d, Rank};
pub use tuning::{TuneOutcome, TunedEntry, TuningStore};
pub use workspace::{MeteredBuffer, WorkspaceMeter};
