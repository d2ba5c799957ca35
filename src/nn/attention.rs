use crate::error::{Error, Result};
use crate::nn::{GroupNorm, Linear};
use crate::tensor::Tensor;
use crate::weights::Weights;

/// Single-head self-attention over the pixels of an `[N, C, H, W]` map, with a residual:
/// `x + proj(softmax(q kᵀ / √C) v)` where `q, k, v` are linear maps of `group_norm(x)`
/// (the VAE mid-block attention, diffusers' `Attention` with one head).
///
/// Queries are processed in chunks so that the `chunk × H·W` score matrix stays within
/// `max_score_bytes` (f32): a 128² latent has 16384 pixels, and its full score matrix
/// would be 1 GiB.
#[derive(Clone, Debug)]
pub struct SpatialAttention {
    pub norm: GroupNorm,
    pub q: Linear,
    pub k: Linear,
    pub v: Linear,
    pub out: Linear,
    pub max_score_bytes: usize,
}

impl SpatialAttention {
    /// Default cap of the score matrix per query chunk.
    pub const DEFAULT_MAX_SCORE_BYTES: usize = 64 << 20;

    /// Loads diffusers' key layout: `group_norm`, `to_q`, `to_k`, `to_v`, `to_out.0`.
    pub fn load(w: &Weights, channels: usize, groups: usize, eps: f64) -> Result<Self> {
        Ok(SpatialAttention {
            norm: GroupNorm::load(&w.pp("group_norm"), groups, channels, eps)?,
            q: Linear::load(&w.pp("to_q"), channels, channels)?,
            k: Linear::load(&w.pp("to_k"), channels, channels)?,
            v: Linear::load(&w.pp("to_v"), channels, channels)?,
            out: Linear::load(&w.pp("to_out.0"), channels, channels)?,
            max_score_bytes: Self::DEFAULT_MAX_SCORE_BYTES,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        if x.rank() != 4 {
            return Err(Error::op("attention", format!("needs [N, C, H, W], got {:?}", x.dims())));
        }
        let (n, c, h, w) = (x.dims()[0], x.dims()[1], x.dims()[2], x.dims()[3]);
        let t = h * w;
        // [N, C, H, W] -> [N, HW, C]
        let seq = self.norm.forward(x)?.reshape(&[n, c, t])?.transpose(1, 2)?.contiguous()?;
        let q = self.q.forward(&seq)?;
        let k_t = self.k.forward(&seq)?.transpose(1, 2)?.contiguous()?;
        let v = self.v.forward(&seq)?;
        let scale = 1.0 / (c as f64).sqrt();
        let chunk = (self.max_score_bytes / (4 * t * n).max(1)).clamp(1, t);
        let mut outs = Vec::with_capacity(t.div_ceil(chunk));
        for start in (0..t).step_by(chunk) {
            let len = chunk.min(t - start);
            let scores = q.narrow(1, start, len)?.matmul(&k_t)?.affine(scale, 0.0)?;
            outs.push(scores.softmax_last_dim()?.matmul(&v)?);
        }
        let refs: Vec<&Tensor> = outs.iter().collect();
        let attended = Tensor::cat(&refs, 1)?;
        let y = self.out.forward(&attended)?.transpose(1, 2)?.reshape(&[n, c, h, w])?;
        x.add(&y)
    }
}
