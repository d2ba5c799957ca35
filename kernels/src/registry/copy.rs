//! The families of `copy.hip`: data movement per element size.

use crate::abi::{arg, cptr, mptr};
use crate::{ArgType, Elem, Family, Launch, Types};

use super::NUMEL;

/// `copy_strided_{bits}`
pub const COPY_STRIDED: Family = Family {
    pattern: "copy_strided_{bits}",
    export_macro: "RV_EXPORT_COPY_STRIDED",
    ops: &[],
    types: Types::Bits,
    args: &[
        NUMEL,
        arg("src_view", ArgType::Strided, "view of the source, dims = output shape"),
        arg("in", cptr(Elem::T), "source"),
        arg("out", mptr(Elem::T), "contiguous destination"),
    ],
    launch: Launch::GridStride,
    doc: "Makes a strided view contiguous (rank <= 6).",
};

/// `copy2d_{bits}`
pub const COPY2D: Family = Family {
    pattern: "copy2d_{bits}",
    export_macro: "RV_EXPORT_COPY2D",
    ops: &[],
    types: Types::Bits,
    args: &[
        arg("rows", ArgType::I64, "rows to copy"),
        arg("cols", ArgType::I64, "elements per row"),
        arg("src_stride", ArgType::I64, "source row stride, elements"),
        arg("dst_stride", ArgType::I64, "destination row stride, elements"),
        arg("src", cptr(Elem::T), "source"),
        arg("dst", mptr(Elem::T), "destination"),
    ],
    launch: Launch::GridStride,
    doc: "dst[r*dst_stride + c] = src[r*src_stride + c] (concatenation, slicing).",
};

/// `transpose2d_{bits}`
pub const TRANSPOSE2D: Family = Family {
    pattern: "transpose2d_{bits}",
    export_macro: "RV_EXPORT_TRANSPOSE2D",
    ops: &[],
    types: Types::Bits,
    args: &[
        arg("batch", ArgType::I64, "number of matrices"),
        arg("rows", ArgType::I32, "rows of each input matrix"),
        arg("cols", ArgType::I32, "columns of each input matrix"),
        arg("in", cptr(Elem::T), "input [batch, rows, cols]"),
        arg("out", mptr(Elem::T), "output [batch, cols, rows]"),
    ],
    launch: Launch::TransposeTiles,
    doc: "Batched 2-D transpose through a 32x33 shared-memory tile (coalesced both ways).",
};

/// `pad2d_{op}_{bits}`
pub const PAD2D: Family = Family {
    pattern: "pad2d_{op}_{bits}",
    export_macro: "RV_EXPORT_PAD2D",
    ops: &["zero", "reflect", "replicate"],
    types: Types::Bits,
    args: &[
        arg("planes", ArgType::I64, "n*c"),
        arg("h", ArgType::I32, "input height"),
        arg("w", ArgType::I32, "input width"),
        arg("pad_top", ArgType::I32, "rows added above"),
        arg("pad_left", ArgType::I32, "columns added on the left"),
        arg("oh", ArgType::I32, "output height = h + pad_top + pad_bottom"),
        arg("ow", ArgType::I32, "output width = w + pad_left + pad_right"),
        arg("in", cptr(Elem::T), "input [planes, h, w]"),
        arg("out", mptr(Elem::T), "output [planes, oh, ow]"),
    ],
    launch: Launch::GridStride,
    doc: "2-D padding; reflect needs every pad < the dimension (PyTorch's rule), replicate repeats the edge.",
};

/// `upsample_nearest2d_{bits}`
pub const UPSAMPLE_NEAREST2D: Family = Family {
    pattern: "upsample_nearest2d_{bits}",
    export_macro: "RV_EXPORT_UPSAMPLE_NEAREST2D",
    ops: &[],
    types: Types::Bits,
    args: &[
        arg("planes", ArgType::I64, "n*c"),
        arg("h", ArgType::I32, "input height"),
        arg("w", ArgType::I32, "input width"),
        arg("oh", ArgType::I32, "output height"),
        arg("ow", ArgType::I32, "output width"),
        arg("in", cptr(Elem::T), "input [planes, h, w]"),
        arg("out", mptr(Elem::T), "output [planes, oh, ow]"),
    ],
    launch: Launch::GridStride,
    doc: "out[y][x] = in[floor(y*h/oh)][floor(x*w/ow)] in exact integer arithmetic.",
};

/// `pool2d_{op}_{dtype}`
pub const POOL2D: Family = Family {
    pattern: "pool2d_{op}_{dtype}",
    export_macro: "RV_EXPORT_POOL2D",
    ops: &["max", "avg"],
    types: Types::Float,
    args: &[
        arg("planes", ArgType::I64, "n*c"),
        arg("h", ArgType::I32, "input height"),
        arg("w", ArgType::I32, "input width"),
        arg("oh", ArgType::I32, "output height = (h - kh) / sh + 1"),
        arg("ow", ArgType::I32, "output width = (w - kw) / sw + 1"),
        arg("kh", ArgType::I32, "window height"),
        arg("kw", ArgType::I32, "window width"),
        arg("sh", ArgType::I32, "vertical stride"),
        arg("sw", ArgType::I32, "horizontal stride"),
        arg("in", cptr(Elem::T), "input [planes, h, w]"),
        arg("out", mptr(Elem::T), "output [planes, oh, ow]"),
    ],
    launch: Launch::GridStride,
    doc: "Max / average pooling without padding; the average accumulates in f32 (f64 for f64), max propagates NaN.",
};

pub(super) const FAMILIES: &[Family] = &[COPY_STRIDED, COPY2D, TRANSPOSE2D, PAD2D, UPSAMPLE_NEAREST2D, POOL2D];
