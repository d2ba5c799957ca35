use crate::error::Result;
use crate::tensor::ConvEpilogue;
use crate::tensor::Tensor;
use crate::weights::Weights;
use conv_engine::{Activation, Conv2dParams};

/// A 2-D convolution layer: `weight` `[K, C/groups, R, S]`, an optional `bias` `[K]`, and
/// the activation it applies as it writes its output (fused: no second pass).
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
