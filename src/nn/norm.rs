use crate::error::Result;
use crate::tensor::Tensor;
use crate::weights::Weights;

/// Group normalisation with per-channel affine parameters, optionally followed by SiLU
/// (the pairing every VAE resnet uses).
#[derive(Clone, Debug)]
pub struct GroupNorm {
    pub groups: usize,
    pub weight: Tensor,
    pub bias: Tensor,
    pub eps: f64,
}

impl GroupNorm {
    pub fn load(w: &Weights, groups: usize, channels: usize, eps: f64) -> Result<Self> {
        Ok(GroupNorm { groups, weight: w.get("weight", &[channels])?, bias: w.get("bias", &[channels])?, eps })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        x.group_norm(self.groups, Some(&self.weight), Some(&self.bias), self.eps)
    }

    /// `silu(group_norm(x))`.
    pub fn forward_silu(&self, x: &Tensor) -> Result<Tensor> {
        x.group_norm_silu(self.groups, Some(&self.weight), Some(&self.bias), self.eps)
    }
}
