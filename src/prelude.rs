//! Everything a model needs, in one `use`: the device and tensor types, the dtypes, the
//! layers, the convolution parameters and epilogue, weights, the budget and the error type,
//! plus `candle_core` (re-exported, so the one dependency on `rocm-vision` is enough to
//! build the candle tensors that [`Tensor::from_candle`] takes).
//!
//! ```
//! use rocm_vision::prelude::*;
//!
//! let device = Device::cpu();
//! // A candle tensor (from a pipeline, a file, ...) into a rocm-vision tensor.
//! let x = candle_core::Tensor::arange(0f32, 16.0, &candle_core::Device::Cpu)?.reshape((1, 1, 4, 4))?;
//! let x = Tensor::from_candle(x, &device)?;
//! // A 2x2 box filter with stride 2 along both axes.
//! let conv = Conv2d::new(Tensor::full(0.25, &[1, 1, 2, 2], DType::F32, &device)?, None,
//!                        Conv2dParams::default().with_stride_hw(2, 2));
//! let y = conv.forward(&x)?;
//! assert_eq!(y.to_vec::<f32>()?, vec![2.5, 4.5, 10.5, 12.5]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::nn::{Conv2d, ConvTranspose2d, GroupNorm, Linear, SpatialAttention};
pub use crate::{
    Activation, Algorithm, Budget, Conv1dParams, Conv2dParams, ConvEpilogue, ConvPlanInfo, DType, Device, DeviceKind,
    Error, Padding2d, Tensor, Weights,
};
pub use candle_core;
