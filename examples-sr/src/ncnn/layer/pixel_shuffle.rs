//! ncnn `PixelShuffle` (src/layer/pixelshuffle.cpp).

use super::super::{BlobShape, NcnnError};
use super::params::Params;
use super::unexpected_inputs;

/// ncnn `PixelShuffle` with `mode = 0` (PyTorch `pixel_shuffle`): `[C*r*r, H, W]` ->
/// `[C, H*r, W*r]`, `out[c][y*r + i][x*r + j] = in[c*r*r + i*r + j][y][x]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixelShuffle {
    pub upscale_factor: usize,
}

impl PixelShuffle {
    pub(super) fn load(p: &Params<'_>) -> Result<Self, NcnnError> {
        p.expect_blobs(1, Some(1))?;
        p.only(&[0, 1])?;
        p.require_int(1, 0, 0, "mode")?;
        Ok(PixelShuffle { upscale_factor: p.positive(0, 1, "upscale_factor")? })
    }

    pub(super) fn output_shape(&self, inputs: &[BlobShape]) -> Result<BlobShape, String> {
        let [BlobShape::Image { channels }] = inputs else {
            return Err(unexpected_inputs("PixelShuffle", inputs));
        };
        let r2 = self
            .upscale_factor
            .checked_mul(self.upscale_factor)
            .ok_or_else(|| format!("upscale_factor {} is too large", self.upscale_factor))?;
        match channels {
            Some(c) if c % r2 != 0 => Err(format!("{c} channels are not a multiple of upscale_factor^2 = {r2}")),
            _ => Ok(BlobShape::Image { channels: channels.map(|c| c / r2) }),
        }
    }
}
