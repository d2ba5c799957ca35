//! Reductions: sum / max / min over any dimensions and argmax / argmin over one, the
//! spatial mean, softmax over the last dimension and the per-channel exact sums.

use super::{Storage, Tensor};
use crate::cpu;
use crate::error::{Error, Result};
use kernels::ops::ReduceOp;

impl Tensor {
    /// Sum / max / min over `dims` (any number), or argmax / argmin over exactly one (u32
    /// positions); `keepdim` keeps the reduced dimensions with size 1. Sums of f16/bf16
    /// accumulate in f32.
    pub fn reduce(&self, op: ReduceOp, dims: &[usize], keepdim: bool) -> Result<Tensor> {
        let rank = self.rank();
        let mut sorted = dims.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if dims.is_empty() || sorted.len() != dims.len() || sorted.last().is_some_and(|&d| d >= rank) {
            return Err(Error::op(
                "reduce",
                format!(
                    "dimensions {dims:?} must be distinct, non-empty and below the rank of shape {:?}",
                    self.dims()
                ),
            ));
        }
        if op.is_arg() && dims.len() != 1 {
            return Err(Error::op("reduce", format!("{op:?} reduces exactly one dimension, got {dims:?}")));
        }
        match &self.s {
            Storage::Rocm(r) => self.wrap_rocm(r.reduce_dims(op, dims, keepdim)?),
            Storage::Cpu(t) => self.wrap_cpu(cpu::reduce(t, op, &sorted, keepdim)?),
        }
    }

    /// Mean over the spatial dimensions of an `[N, C, H, W]` tensor: `[N, C, 1, 1]`,
    /// accumulated in f32.
    pub fn mean_spatial(&self) -> Result<Tensor> {
        self.require_rank(4, "mean_spatial")?;
        let [n, c, h, w] = [self.dims()[0], self.dims()[1], self.dims()[2], self.dims()[3]];
        on_device!(self,
            t => cpu::mean_spatial(t),
            r => r.reshape(&[n, c, h * w])?.reduce(ReduceOp::Sum, 2)?.affine(1.0 / (h * w) as f64, 0.0)?.reshape(&[n, c, 1, 1]))
    }

    /// Softmax over the last dimension, computed in f32.
    pub fn softmax_last_dim(&self) -> Result<Tensor> {
        let d = self
            .rank()
            .checked_sub(1)
            .ok_or_else(|| Error::op("softmax_last_dim", "a 0-D tensor has no last dimension"))?;
        on_device!(self,
            t => cpu::softmax_last_dim(t, d),
            r => r.softmax_last_dim())
    }

    /// Per-channel [`ExactSum`](crate::ExactSum)s of the first `rows x cols` of each plane of
    /// a `[1, C, H, W]` tensor (f32, f16 or bf16; any strides). Order-independent: the sums
    /// of tiles merged equal the sum of the whole map bit for bit, on either device (the
    /// GPU sums on the device and reads back 2 KiB per channel).
    pub fn channel_exact_sums(&self, rows: usize, cols: usize) -> Result<Vec<crate::ExactSum>> {
        match &self.s {
            Storage::Cpu(t) => crate::exact_sum::cpu_channel_sums(t, rows, cols),
            Storage::Rocm(r) => r.channel_exact_sums(rows, cols),
        }
    }
}
