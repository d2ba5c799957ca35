//! rocm-vision: convolution-heavy image models (Stable Diffusion / FLUX VAE decoders,
//! Real-CUGAN super-resolution) inside a fixed memory budget.
//!
//! A [`Tensor`] lives on a [`Device`]; every convolution goes through the device's
//! convolution engine ([`conv_engine`]), which picks an algorithm whose workspace fits the
//! budget. Weights load memory-mapped from safetensors files with [`Weights`].
//!
//! One dependency is enough: [`prelude`] has the types a model needs, and `candle_core`
//! and `conv_engine` are re-exported.
//!
//! ```
//! use rocm_vision::prelude::*;
//!
//! // `Device::auto()` takes the first ROCm GPU and falls back to the CPU.
//! let device = Device::cpu();
//! let x = Tensor::rand_normal(&[1, 3, 32, 32], (0.0, 1.0), 7, 0, DType::F32, &device)?;
//! let conv = Conv2d::new(
//!     Tensor::rand_normal(&[16, 3, 3, 3], (0.0, 0.1), 8, 0, DType::F32, &device)?,
//!     Some(Tensor::zeros(&[16], DType::F32, &device)?),
//!     Conv2dParams::default().with_padding(1).with_stride(2),
//! )
//! .with_activation(Activation::Silu);
//! let norm = GroupNorm {
//!     groups: 4,
//!     weight: Tensor::ones(&[16], DType::F32, &device)?,
//!     bias: Tensor::zeros(&[16], DType::F32, &device)?,
//!     eps: 1e-6,
//! };
//! let y = norm.forward(&conv.forward(&x)?)?;
//! assert_eq!(y.dims(), &[1, 16, 16, 16]);
//! // Which algorithm the engine chose for a convolution, without tracing:
//! let (_, plan) = x.conv2d_with_plan(&conv.weight, None, &conv.params)?;
//! println!("{plan}");
//! # Ok::<(), rocm_vision::Error>(())
//! ```

mod cpu;
pub mod device;
pub mod error;
pub mod exact_sum;
pub mod group_stats;
mod inplace;
pub mod nn;
pub mod prelude;
mod rocm;
pub mod tensor;
pub mod weights;

/// candle, re-exported: build the CPU tensors [`Tensor::from_candle`] takes without a
/// dependency of your own (and so without a version to keep in step).
pub use candle_core;
pub use candle_core::DType;
/// The CPU's convolution catalog and executors, re-exported (a [`Device::cpu_with_engine`]
/// takes a [`conv_cpu::CpuConv`]).
pub use conv_cpu;
/// The convolution engine, re-exported (its [`ConvProblem`](conv_engine::ConvProblem) is
/// what [`Device::conv_plan`] plans).
pub use conv_engine;
pub use conv_engine::ConvError;
pub use conv_engine::{
    Activation, Algorithm, Budget, Conv1dParams, Conv2dParams, ConvProblem, ConvRounding, Padding2d, format_bytes,
};
pub use device::{Device, DeviceKind, HostBuffer};
pub use error::{BudgetShortfall, Error, Result};
pub use exact_sum::{ChannelSums, ExactSum};
pub use group_stats::{GroupStats, GroupStatsAccumulator};
/// The pooling global allocator for programs on the CPU path (`realcugan` installs it).
pub use host_alloc;
pub use kernels::ops::{CmpOp, PadMode, ReduceOp};
pub use rocm_backend::RocmError;
pub use tensor::{ConvEpilogue, ConvPlanInfo, HostTensor, Tensor};
pub use weights::Weights;
