use crate::GroupStats;
use crate::error::Result;
use crate::tensor::Tensor;
use crate::weights::Weights;

/// Group normalisation with per-channel affine parameters, optionally followed by SiLU
/// (the pairing every VAE resnet uses).
///
/// ```
/// use rocm_vision::prelude::*;
/// let device = Device::cpu();
/// let norm = GroupNorm {
///     groups: 1,
///     weight: Tensor::ones(&[2], DType::F32, &device)?,
///     bias: Tensor::zeros(&[2], DType::F32, &device)?,
///     eps: 0.0,
/// };
/// // One group over both channels: mean 2.5, variance 1.25.
/// let x = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0], &[1, 2, 1, 2], &device)?;
/// let y = norm.forward(&x)?.to_vec::<f32>()?;
/// let expected = [-1.5f32, -0.5, 0.5, 1.5].map(|d| d / 1.25f32.sqrt());
/// assert!(y.iter().zip(expected).all(|(a, b)| (a - b).abs() < 1e-5));
/// // And with the SiLU after it, in the same pass.
/// let s = norm.forward_silu(&x)?.to_vec::<f32>()?;
/// assert!((s[3] - expected[3] / (1.0 + (-expected[3]).exp())).abs() < 1e-5);
/// # Ok::<(), rocm_vision::Error>(())
/// ```
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

    /// `silu(group_norm(x))` with `stats` (a whole map's, `x` one of its bands) instead of
    /// `x`'s own statistics.
    pub fn forward_silu_with_stats(&self, x: &Tensor, stats: &GroupStats) -> Result<Tensor> {
        x.group_norm_with_stats(stats, Some(&self.weight), Some(&self.bias), self.eps, true)
    }
}
