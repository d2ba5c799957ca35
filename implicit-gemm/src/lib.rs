//! The NHWC layout math of the GPU's implicit-GEMM kernels ([`nhwc`]: band, channel slots,
//! phases, workspace), checked here on the CPU.
//!
//! The conv-as-GEMM geometry and the epilogue's definition moved to `conv-engine` (the
//! device-neutral core) and the CPU executor to `conv-cpu`; they are re-exported here so
//! that `rocm-backend`'s `implicit_gemm::...` imports keep working until it names
//! `conv_engine` directly. Where `nhwc` itself lives is still to be decided (beside the
//! GPU code that uses it).

pub mod nhwc;

pub use conv_engine::epilogue::{self, Activation, Epilogue};
pub use conv_engine::geometry::{self, ConvGeometry, ConvKind, GemmDims, Phase, Tap};
