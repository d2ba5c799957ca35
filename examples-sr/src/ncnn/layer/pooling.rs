//! ncnn `Pooling` (src/layer/pooling.cpp).

use super::super::{BlobShape, NcnnError};
use super::params::Params;
use super::unexpected_inputs;

/// ncnn `Pooling`: Real-CUGAN only uses global average pooling (`0=1 4=1`), which turns a
/// `[C, H, W]` blob into a 1-D blob of `C` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    GlobalAverage,
}

impl Pooling {
    pub(super) fn load(p: &Params<'_>) -> Result<Self, NcnnError> {
        p.expect_blobs(1, Some(1))?;
        // ncnn reads 0..8, 11..15, 18; with global pooling only 0 and 4 matter.
        p.only(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 18])?;
        p.require_int(0, 0, 1, "pooling_type (1 = average)")?;
        p.require_int(4, 0, 1, "global_pooling")?;
        Ok(Pooling::GlobalAverage)
    }

    pub(super) fn output_shape(&self, inputs: &[BlobShape]) -> Result<BlobShape, String> {
        match (self, inputs) {
            (Pooling::GlobalAverage, [BlobShape::Image { channels }]) => Ok(BlobShape::Vector { len: *channels }),
            _ => Err(unexpected_inputs("Pooling", inputs)),
        }
    }
}
