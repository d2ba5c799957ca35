//! ncnn `Input` (src/layer/input.cpp).

use super::super::{BlobShape, NcnnError};
use super::params::Params;
use super::unexpected_inputs;

/// ncnn `Input`: declared shape, 0 where the file leaves it open (Real-CUGAN leaves all open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input {
    pub w: usize,
    pub h: usize,
    pub c: usize,
}

impl Input {
    pub(super) fn load(p: &Params<'_>) -> Result<Self, NcnnError> {
        p.expect_blobs(0, Some(1))?;
        p.only(&[0, 1, 2, 11])?;
        p.require_int(11, 0, 0, "depth")?;
        let dim = |id, what| {
            let v = p.int(id, 0)?;
            usize::try_from(v).map_err(|_| p.err(format!("{what} (parameter {id}) must be >= 0, found {v}")))
        };
        Ok(Input { w: dim(0, "w")?, h: dim(1, "h")?, c: dim(2, "c")? })
    }

    pub(super) fn output_shape(&self, inputs: &[BlobShape]) -> Result<BlobShape, String> {
        match inputs {
            [] => Ok(BlobShape::Image { channels: (self.c > 0).then_some(self.c) }),
            _ => Err(unexpected_inputs("Input", inputs)),
        }
    }
}
