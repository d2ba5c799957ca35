//! Convolution as implicit GEMM.
//!
//! [`geometry`] holds the index math shared by every device: the conv-as-GEMM view, the
//! input coordinates each (output pixel, filter tap) reads, and the phase split that maps a
//! transposed convolution onto the same product. [`nhwc`] is the channels-last layout of
//! the GPU's implicit-GEMM kernels (band, channel slots, phases), checked here on the CPU.
//! [`cpu`] is the CPU executor.

pub mod cpu;
pub mod epilogue;
pub mod geometry;
pub mod nhwc;

pub use epilogue::{Activation, Epilogue};
pub use geometry::{ConvGeometry, ConvKind, GemmDims, Phase, Tap};

#[cfg(test)]
mod tests;
