use super::attention_cpu;
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
/// would be 1 GiB. On the CPU in f32 a chunk is at least 128 queries (`attention_cpu`).
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
        let scale = 1.0 / (c as f64).sqrt();
        let attended = if x.device().is_cpu() && x.dtype() == candle_core::DType::F32 {
            let (k, v) = (self.k.forward(&seq)?, self.v.forward(&seq)?);
            self.attend_cpu_f32(&q, &k, &v, (n, t, c), scale)?
        } else {
            let k_t = self.k.forward(&seq)?.transpose(1, 2)?.contiguous()?;
            let v = self.v.forward(&seq)?;
            let chunk = (self.max_score_bytes / (4 * t * n).max(1)).clamp(1, t);
            let mut outs = Vec::with_capacity(t.div_ceil(chunk));
            for start in (0..t).step_by(chunk) {
                let len = chunk.min(t - start);
                let scores = q.narrow(1, start, len)?.matmul(&k_t)?.affine(scale, 0.0)?;
                outs.push(scores.softmax_last_dim()?.matmul(&v)?);
            }
            let refs: Vec<&Tensor> = outs.iter().collect();
            Tensor::cat(&refs, 1)?
        };
        let y = self.out.forward(&attended)?.transpose(1, 2)?.reshape(&[n, c, h, w])?;
        x.add(&y)
    }

    /// Bytes the CPU's f32 products allocate besides q, k, v and their output for `t`
    /// tokens of `c` channels under `max_score_bytes` (the memory plan counts them): the
    /// score chunk, at least [`attention_cpu::ROW_BLOCK`] rows whatever the cap.
    pub fn cpu_f32_scratch_bytes(t: usize, c: usize, max_score_bytes: usize) -> usize {
        attention_cpu::scratch_bytes(t, c, attention_cpu::chunk_rows(t, max_score_bytes))
    }

    /// The products of f32 `[n, t, c]` q, k, v on the CPU ([`attention_cpu`]): one batch
    /// item at a time, each with one score buffer within `max_score_bytes` but at least one
    /// [`attention_cpu::ROW_BLOCK`] of rows.
    fn attend_cpu_f32(&self, q: &Tensor, k: &Tensor, v: &Tensor, (n, t, c): Dims3, scale: f64) -> Result<Tensor> {
        let chunk = attention_cpu::chunk_rows(t, self.max_score_bytes);
        let threads = q.device().cpu_conv().threads();
        let mut out = vec![0f32; n * t * c];
        with_f32(q, |q| {
            with_f32(k, |k| {
                with_f32(v, |v| {
                    for (i, o) in out.chunks_mut((t * c).max(1)).enumerate() {
                        let item = i * t * c..(i + 1) * t * c;
                        attention_cpu::attend_f32(
                            &q[item.clone()],
                            &k[item.clone()],
                            &v[item],
                            (t, c),
                            scale as f32,
                            chunk,
                            threads,
                            o,
                        )?;
                    }
                    Ok(())
                })
            })
        })?;
        Tensor::from_vec(out, &[n, t, c], q.device())
    }
}

type Dims3 = (usize, usize, usize);

/// `f` on the elements of a contiguous f32 CPU tensor, borrowed (q, k and v are 512 MiB
/// each at a 512² latent).
fn with_f32<R>(t: &Tensor, f: impl FnOnce(&[f32]) -> Result<R>) -> Result<R> {
    let candle = t.as_candle().ok_or_else(|| Error::op("attention", "a CPU tensor was expected"))?;
    let (storage, layout) = candle.storage_and_layout();
    match (&*storage, layout.contiguous_offsets()) {
        (candle_core::Storage::Cpu(candle_core::CpuStorage::F32(data)), Some((a, b))) => f(&data[a..b]),
        _ => {
            drop(storage);
            f(&t.contiguous()?.to_vec::<f32>()?)
        }
    }
}
