//! ncnn `Split` (src/layer/split.cpp): copies its one input to every output. It has no
//! parameters, so [`super::LayerKind::Split`] carries no data.

use super::super::{BlobShape, NcnnError};
use super::params::Params;
use super::unexpected_inputs;

pub(super) fn load(p: &Params<'_>) -> Result<(), NcnnError> {
    p.expect_blobs(1, None)?;
    p.only(&[])
}

pub(super) fn output_shape(inputs: &[BlobShape]) -> Result<BlobShape, String> {
    match inputs {
        [s] => Ok(*s),
        _ => Err(unexpected_inputs("Split", inputs)),
    }
}
