//! Convolution as implicit GEMM.
//!
//! [`geometry`] holds the index math shared by every device: the conv-as-GEMM view, the
//! input coordinates each (output pixel, filter tap) reads, and the phase split that maps a
//! transposed convolution onto the same product. [`cpu`] is the CPU executor.

pub mod cpu;
pub mod geometry;

pub use geometry::{ConvGeometry, ConvKind, GemmDims, Phase, Tap};

#[cfg(test)]
mod tests;
