use crate::error::Result;
use crate::tensor::Tensor;
use crate::weights::Weights;
use conv_engine::Conv2dParams;

/// A 2-D convolution layer: `weight` `[K, C/groups, R, S]` and an optional `bias` `[K]`.
#[derive(Clone, Debug)]
pub struct Conv2d {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub params: Conv2dParams,
}

impl Conv2d {
    pub fn new(weight: Tensor, bias: Option<Tensor>, params: Conv2dParams) -> Self {
        Conv2d { weight, bias, params }
    }

    /// Loads `weight` (and `bias` when present) of a `in_c → out_c`, `kernel × kernel`
    /// convolution.
    pub fn load(w: &Weights, in_c: usize, out_c: usize, kernel: usize, params: Conv2dParams) -> Result<Self> {
        let weight = w.get("weight", &[out_c, in_c / params.groups, kernel, kernel])?;
        let bias = if w.contains("bias") { Some(w.get("bias", &[out_c])?) } else { None };
        Ok(Conv2d { weight, bias, params })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.conv2d(&self.weight, self.bias.as_ref(), &self.params)
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
