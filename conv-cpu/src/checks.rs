//! The checks a CPU executor that indexes raw slices by a problem's geometry makes before
//! its unsafe code: errors that name the buffer and its length, never an out-of-bounds read.

use conv_engine::dispatch::Algorithm;
use conv_engine::error::ConvError;
use conv_engine::{ConvGeometry, ConvKind};

/// A buffer an executor reads by the problem's geometry has exactly `needed` elements.
pub(crate) fn check_len(what: &'static str, len: Option<usize>, needed: usize) -> Result<(), ConvError> {
    match len {
        Some(len) if len != needed => Err(ConvError::BufferLength { op: "conv", what, len, needed }),
        _ => Ok(()),
    }
}

/// What an executor that indexes raw slices by `g` checks before its unsafe code: that
/// `g` is a geometry it runs (`fits`), that `rows` lie inside the output, and that every
/// slice holds exactly what `g` addresses.
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_executor_args<T>(
    fits: bool,
    g: &ConvGeometry,
    rows: &std::ops::Range<usize>,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    residual: Option<&[T]>,
    out: &[T],
) -> Result<(), ConvError> {
    let op = if g.kind == ConvKind::Transposed { "conv_transpose" } else { "conv" };
    if !fits {
        return Err(ConvError::AlgorithmUnsupported {
            problem: format!("{g:?}"),
            algorithm: "Gemm1x1",
            chunking: None,
            requires: Algorithm::Gemm1x1.requirements(),
        });
    }
    let p = g.out_hw()[0];
    if rows.end > p || rows.start > rows.end {
        return Err(ConvError::Parameter {
            op,
            param: "output rows",
            value: format!("{rows:?} of {p}"),
            reason: "Gemm1x1 runs rows inside the output",
        });
    }
    check_len("input", Some(x.len()), g.input_len())?;
    check_len("weight", Some(w.len()), g.weight_len())?;
    check_len("output", Some(out.len()), g.output_len())?;
    check_len("bias", bias.map(<[T]>::len), g.out_channels)?;
    check_len("residual", residual.map(<[T]>::len), g.output_len())
}
