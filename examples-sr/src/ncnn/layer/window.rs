//! The sliding-window parameters Convolution and Deconvolution share: the same ncnn ids
//! with the same defaults in both layers.

use super::super::NcnnError;
use super::params::Params;

/// Zero padding of a convolution input, or the border cut from a deconvolution output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pad {
    pub left: usize,
    pub right: usize,
    pub top: usize,
    pub bottom: usize,
}

/// Kernel, dilation, stride and padding of a (de)convolution; pairs are `[w, h]`, ncnn's
/// order.
pub(super) struct Window {
    pub kernel: [usize; 2],
    pub dilation: [usize; 2],
    pub stride: [usize; 2],
    pub pad: Pad,
}

impl Window {
    /// Ids 1/11 (kernel), 2/12 (dilation), 3/13 (stride), 4/15/14/16 (pads); each `_h` (and
    /// right/top/bottom pad) defaults to its `_w` (left) value, as in ncnn.
    pub(super) fn load(p: &Params<'_>) -> Result<Window, NcnnError> {
        let kernel_w = p.positive(1, 0, "kernel_w")?;
        let kernel_h = p.positive(11, kernel_w as i32, "kernel_h")?;
        let dilation_w = p.positive(2, 1, "dilation_w")?;
        let dilation_h = p.positive(12, dilation_w as i32, "dilation_h")?;
        let stride_w = p.positive(3, 1, "stride_w")?;
        let stride_h = p.positive(13, stride_w as i32, "stride_h")?;
        let left = p.pad(4, 0, "pad_left")?;
        let right = p.pad(15, left as i32, "pad_right")?;
        let top = p.pad(14, left as i32, "pad_top")?;
        let bottom = p.pad(16, top as i32, "pad_bottom")?;
        Ok(Window {
            kernel: [kernel_w, kernel_h],
            dilation: [dilation_w, dilation_h],
            stride: [stride_w, stride_h],
            pad: Pad { left, right, top, bottom },
        })
    }

    /// `kernel_w * kernel_h`, `None` on overflow.
    pub(super) fn taps(&self) -> Option<usize> {
        self.kernel[0].checked_mul(self.kernel[1])
    }
}
