//! rocm-vision: convolution-heavy image models (Stable Diffusion / FLUX VAE decoders,
//! Real-CUGAN super-resolution) inside a fixed memory budget.
//!
//! A [`Tensor`] lives on a [`Device`]; every convolution goes through the device's
//! convolution engine ([`conv_engine`]), which picks an algorithm whose workspace fits the
//! budget. Weights load memory-mapped from safetensors files with [`Weights`].

mod cpu;
pub mod device;
pub mod error;
pub mod exact_sum;
mod inplace;
pub mod nn;
mod rocm;
pub mod tensor;
pub mod weights;

pub use candle_core::DType;
pub use conv_engine::ConvError;
pub use conv_engine::{Activation, Algorithm, Budget, Conv1dParams, Conv2dParams, Padding2d, format_bytes};
pub use device::{Device, DeviceKind};
pub use error::{BudgetShortfall, Error, Result};
pub use exact_sum::ExactSum;
pub use kernels::ops::{CmpOp, PadMode, ReduceOp};
pub use rocm_backend::RocmError;
pub use tensor::{ConvEpilogue, Tensor};
pub use weights::Weights;
