//! The ROCm device for rocm-vision.
//!
//! HIP and hiprtc are loaded at run time through `cubecl-hip-sys` ([`runtime`]); rocBLAS
//! through `rocblas-sys`. Nothing links against ROCm at build time: on a machine without
//! ROCm every entry point returns [`RocmError::RuntimeNotFound`], and with the runtime
//! but no GPU, [`RocmError::NoDevice`].
//!
//! A [`RocmDevice`] owns one stream, a budgeted caching [`Allocator`](alloc::Allocator)
//! and a kernel [`Jit`](jit::Jit) with an on-disk code-object cache. The tensor operations
//! on [`DeviceArray`]s are [`ops`] (elementwise, reductions, copies), [`compare`], [`norm`],
//! [`indexing`], [`resample`] and [`random`], named by the op vocabulary of
//! [`kernels::ops`]; [`conv`] runs the conv engine's plans.

pub mod alloc;
pub mod blas;
pub mod buffer;
pub mod compare;
pub mod conv;
pub mod device;
pub mod error;
pub mod host_buffer;
pub mod indexing;
pub mod jit;
pub mod launch;
#[cfg(feature = "miopen")]
pub mod miopen;
pub mod norm;
pub mod ops;
pub mod random;
pub mod resample;
pub mod runtime;
pub mod stream;

pub use buffer::{DeviceArray, DeviceBuffer};
pub use conv::{RocmCatalog, RocmConv};
pub use device::{ArchFamily, DeviceInfo, RocmDevice};
pub use error::{Result, RocmError};
pub use host_buffer::PinnedHostBuffer;
pub use runtime::{HipRuntime, runtime};
