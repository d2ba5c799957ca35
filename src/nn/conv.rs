use crate::error::Result;
use crate::tensor::ConvEpilogue;
use crate::tensor::Tensor;
use crate::weights::Weights;
use conv_engine::{Activation, Conv2dParams};

/// A 2-D convolution layer: `weight` `[K, C/groups, R, S]`, an optional `bias` `[K]`, and
/// the activation it applies as it writes its output (fused: no second pass).
///
/// ```
/// use rocm_vision::prelude::*;
/// let device = Device::cpu();
/// let conv = Conv2d::new(
///     Tensor::full(1.0, &[2, 1, 3, 3], DType::F32, &device)?,
///     Some(Tensor::from_vec(vec![-10f32, 0.0], &[2], &device)?),
///     Conv2dParams::default().with_padding(1),
/// )
/// .with_activation(Activation::Relu);
/// let x = Tensor::ones(&[1, 1, 4, 4], DType::F32, &device)?;
/// let y = conv.forward(&x)?;
/// // Channel 0: relu(9 - 10) = 0 inside; channel 1: 9 inside, 4 in the corners.
/// let v = y.to_vec::<f32>()?;
/// assert_eq!((v[5], v[16], v[16 + 5]), (0.0, 4.0, 9.0));
/// // With a residual and a scale in the same pass: (relu(conv + bias) + x) · 0.5.
/// let y = conv.forward_fused(&x, Some(&Tensor::ones(&[1, 2, 4, 4], DType::F32, &device)?), 0.5)?;
/// assert_eq!(y.to_vec::<f32>()?[16 + 5], 5.0);
/// # Ok::<(), rocm_vision::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub params: Conv2dParams,
    pub activation: Activation,
}

impl Conv2d {
    pub fn new(weight: Tensor, bias: Option<Tensor>, params: Conv2dParams) -> Self {
        Conv2d { weight, bias, params, activation: Activation::Identity }
    }

    /// The same layer applying `activation` to its output.
    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }

    /// Loads `weight` (and `bias` when present) of a `in_c → out_c`, `kernel × kernel`
    /// convolution.
    pub fn load(w: &Weights, in_c: usize, out_c: usize, kernel: usize, params: Conv2dParams) -> Result<Self> {
        let weight = w.get("weight", &[out_c, in_c / params.groups, kernel, kernel])?;
        let bias = if w.contains("bias") { Some(w.get("bias", &[out_c])?) } else { None };
        Ok(Conv2d::new(weight, bias, params))
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.forward_fused(x, None, 1.0)
    }

    /// `(act(conv(x) + bias) + residual) · scale` in one pass over the output.
    pub fn forward_fused(&self, x: &Tensor, residual: Option<&Tensor>, scale: f32) -> Result<Tensor> {
        let epilogue = ConvEpilogue { activation: self.activation, residual, scale };
        x.conv2d_fused(&self.weight, self.bias.as_ref(), &self.params, &epilogue)
    }
}

/// A 2-D transposed convolution layer: `weight` `[C, K/groups, R, S]`, optional `bias`.
///
/// ```
/// use rocm_vision::prelude::*;
/// let device = Device::cpu();
/// // A 2x learned upsampler: 4 → 2 channels, kernel 4, stride 2, padding 1.
/// let up = ConvTranspose2d::new(
///     Tensor::full(0.25, &[4, 2, 4, 4], DType::F32, &device)?,
///     None,
///     Conv2dParams::default().with_stride(2).with_padding(1),
/// );
/// let y = up.forward(&Tensor::ones(&[1, 4, 8, 8], DType::F32, &device)?)?;
/// assert_eq!(y.dims(), &[1, 2, 16, 16]);
/// // An inner pixel gets 2x2 taps from each of the 4 channels: 16 · 0.25.
/// assert_eq!(y.to_vec::<f32>()?[5 * 16 + 5], 4.0);
/// # Ok::<(), rocm_vision::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct ConvTranspose2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub params: Conv2dParams,
}

impl ConvTranspose2d {
    pub fn new(weight: Tensor, bias: Option<Tensor>, params: Conv2dParams) -> Self {
        ConvTranspose2d { weight, bias, params }
    }

    pub fn load(w: &Weights, in_c: usize, out_c: usize, kernel: usize, params: Conv2dParams) -> Result<Self> {
        let weight = w.get("weight", &[in_c, out_c / params.groups, kernel, kernel])?;
        let bias = if w.contains("bias") { Some(w.get("bias", &[out_c])?) } else { None };
        Ok(ConvTranspose2d { weight, bias, params })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv_transpose2d(&self.weight, self.bias.as_ref(), &self.params)
    }
}
