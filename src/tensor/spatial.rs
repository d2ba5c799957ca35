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
