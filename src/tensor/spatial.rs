//! Spatial ops on the last dimensions: nearest (1-D, 2-D) and bilinear resizing, pooling
//! and padding.

use super::{Storage, Tensor};
use crate::cpu;
use crate::error::{Error, Result};
use kernels::ops::{PadMode, PoolOp};

impl Tensor {
    /// Nearest-neighbour resize of an `[N, C, H, W]` tensor to `h × w`.
    pub fn upsample_nearest2d(&self, h: usize, w: usize) -> Result<Tensor> {
        self.require_rank(4, "upsample_nearest2d")?;
        on_device!(self, t => t.upsample_nearest2d(h, w), r => r.upsample_nearest2d(h, w))
    }

    /// `pixel_shuffle(self, r) + residual`: `self`, `[N, C·r², H, W]`, rearranged to
    /// `[N, C, H·r, W·r]` as PyTorch's `F.pixel_shuffle` does, plus `residual` of that shape
    /// (any view: a crop, say). On ROCm this is one pass that reads `self` through a
    /// strided view, so the shuffled copy is never made (Real-CUGAN's deconvolution + skip
    /// add: 7 ms of a 69 ms 1080p f16 upscale on the H200 was that copy); on the CPU the
    /// shuffle, then the add.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let dev = Device::cpu();
    /// let y = Tensor::from_vec((0..8).map(|v| v as f32).collect(), &[1, 4, 1, 2], &dev)?;
    /// let r = Tensor::full(0.5, &[1, 1, 2, 4], DType::F32, &dev)?;
    /// let out = y.pixel_shuffle_add(2, &r)?;
    /// // out[0, 0, i, 2·x + j] = y[0, 2·i + j, 0, x] + 0.5
    /// assert_eq!(out.to_vec::<f32>()?, vec![0.5, 2.5, 1.5, 3.5, 4.5, 6.5, 5.5, 7.5]);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn pixel_shuffle_add(&self, r: usize, residual: &Tensor) -> Result<Tensor> {
        self.require_rank(4, "pixel_shuffle_add")?;
        self.same_device(residual, "pixel_shuffle_add")?;
        let &[n, crr, h, w] = self.dims() else { unreachable!("rank checked") };
        if r == 0 || crr % (r * r) != 0 {
            return Err(Error::op("pixel_shuffle_add", format!("cannot shuffle {:?} by {r}", self.dims())));
        }
        let c = crr / (r * r);
        let out = [n, c, h * r, w * r];
        if residual.dims() != out || residual.dtype() != self.dtype() {
            return Err(Error::op(
                "pixel_shuffle_add",
                format!(
                    "residual is {:?} {:?}, the shuffled tensor {out:?} {:?}",
                    residual.dims(),
                    residual.dtype(),
                    self.dtype()
                ),
            ));
        }
        match (self.as_rocm(), residual.as_rocm()) {
            (Some(y), Some(res)) => self.wrap_rocm(y.pixel_shuffle_add(r, res)?),
            _ => match (self.as_candle(), residual.as_candle()) {
                (Some(y), Some(res)) => self.wrap_cpu(crate::cpu::pixel_shuffle_add(y, r, res)?),
                _ => Err(Error::op("pixel_shuffle_add", "operands on different devices".to_string())),
            },
        }
    }

    /// Nearest-neighbour resize of an `[N, C, L]` tensor to length `target`.
    pub fn upsample_nearest1d(&self, target: usize) -> Result<Tensor> {
        self.require_rank(3, "upsample_nearest1d")?;
        on_device!(self, t => t.upsample_nearest1d(target), r => r.upsample_nearest1d(target))
    }

    /// Bilinear resize of an `[N, C, H, W]` tensor to `h × w` (PyTorch's coordinates, with
    /// or without `align_corners`).
    pub fn upsample_bilinear2d(&self, h: usize, w: usize, align_corners: bool) -> Result<Tensor> {
        self.require_rank(4, "upsample_bilinear2d")?;
        on_device!(self,
            t => t.upsample_bilinear2d(h, w, align_corners),
            r => r.upsample_bilinear2d(h, w, align_corners))
    }

    pub fn avg_pool2d(&self, kernel: usize, stride: usize) -> Result<Tensor> {
        self.require_rank(4, "avg_pool2d")?;
        on_device!(self, t => cpu::pool2d(t, PoolOp::Avg, kernel, stride), r => r.pool2d(PoolOp::Avg, kernel, stride))
    }

    pub fn max_pool2d(&self, kernel: usize, stride: usize) -> Result<Tensor> {
        self.require_rank(4, "max_pool2d")?;
        on_device!(self, t => cpu::pool2d(t, PoolOp::Max, kernel, stride), r => r.pool2d(PoolOp::Max, kernel, stride))
    }

    /// Pads the last two dimensions.
    pub fn pad2d(&self, top: usize, bottom: usize, left: usize, right: usize, mode: PadMode) -> Result<Tensor> {
        if self.rank() < 2 {
            return Err(Error::op("pad2d", format!("needs at least 2 dimensions, got {:?}", self.dims())));
        }
        on_device!(self,
            t => cpu::pad2d(t, top, bottom, left, right, mode),
            r => r.pad2d(top, bottom, left, right, mode))
    }
}
