//! ncnn `BinaryOp` (src/layer/binaryop.cpp).

use super::super::{BlobShape, NcnnError};
use super::params::Params;
use super::unexpected_inputs;

/// ncnn `BinaryOp` between two blobs (`with_scalar = 0`).
///
/// Broadcasting as ncnn does it for these files: two `[C, H, W]` blobs of the same shape
/// elementwise, or `[C, H, W]` (first input) times a 1-D blob of length `C` (second input,
/// the SE block's per-channel scale), each channel multiplied by its scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `op_type = 0`.
    Add,
    /// `op_type = 2`.
    Mul,
}

impl BinaryOp {
    pub(super) fn load(p: &Params<'_>) -> Result<Self, NcnnError> {
        p.expect_blobs(2, Some(1))?;
        p.only(&[0, 1, 2])?;
        p.require_int(1, 0, 0, "with_scalar")?;
        // `b` (id 2) is only read with a scalar operand; it must at least be a float.
        p.float(2, 0.0)?;
        match p.int(0, 0)? {
            0 => Ok(BinaryOp::Add),
            2 => Ok(BinaryOp::Mul),
            op => Err(p.err(format!("op_type {op} is not supported (only 0 = add, 2 = mul)"))),
        }
    }

    pub(super) fn output_shape(&self, inputs: &[BlobShape]) -> Result<BlobShape, String> {
        use BlobShape::{Image, Vector};
        match inputs {
            [Image { channels: a }, Image { channels: b }] => match (a, b) {
                (Some(a), Some(b)) if a != b => Err(format!("operands have {a} and {b} channels")),
                _ => Ok(Image { channels: a.or(*b) }),
            },
            [Vector { len: a }, Vector { len: b }] => match (a, b) {
                (Some(a), Some(b)) if a != b => Err(format!("operands have {a} and {b} values")),
                _ => Ok(Vector { len: a.or(*b) }),
            },
            // Per-channel broadcast: [C, H, W] op [C].
            [Image { channels }, Vector { len }] => match (channels, len) {
                (Some(c), Some(l)) if c != l => Err(format!("per-channel operand has {l} values for {c} channels")),
                _ => Ok(Image { channels: channels.or(*len) }),
            },
            _ => Err(unexpected_inputs("BinaryOp", inputs)),
        }
    }
}
