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
///
/// ```
/// use rocm_vision::prelude::*;
/// let device = Device::cpu();
/// let c = 8;
/// let lin = |seed| -> rocm_vision::Result<Linear> {
///     Ok(Linear::new(Tensor::rand_normal(&[c, c], (0.0, 0.3), seed, 0, DType::F32, &device)?, None))
/// };
/// let attention = SpatialAttention {
///     norm: GroupNorm {
///         groups: 2,
///         weight: Tensor::ones(&[c], DType::F32, &device)?,
///         bias: Tensor::zeros(&[c], DType::F32, &device)?,
///         eps: 1e-6,
///     },
///     q: lin(1)?,
///     k: lin(2)?,
///     v: lin(3)?,
///     // A zero output projection: the block is the identity (x + 0).
///     out: Linear::new(Tensor::zeros(&[c, c], DType::F32, &device)?, None),
///     // Tiny chunks: 4 queries at a time (the result does not depend on it).
///     max_score_bytes: 4 * 4 * 36,
/// };
/// let x = Tensor::rand_normal(&[1, c, 6, 6], (0.0, 1.0), 4, 0, DType::F32, &device)?;
/// assert_eq!(attention.forward(&x)?.to_vec::<f32>()?, x.to_vec::<f32>()?);
/// # Ok::<(), rocm_vision::Error>(())
/// ```
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

    /// Loads diffusers' key layout: `group_norm`, `to_q`, `to_k`, `to_v`, `to_out.0`
    /// (see [`Weights`] for opening a file and [`Weights::pp`] for the block's prefix,
    /// e.g. `decoder.mid_block.attentions.0`).
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
