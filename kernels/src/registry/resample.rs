//! The families of `resample.hip`: 1-D nearest and bilinear resizing.

use crate::abi::{arg, cptr, mptr};
use crate::{ArgType, Elem, Family, Launch, Types};

/// `upsample_nearest1d_{bits}`
pub const UPSAMPLE_NEAREST1D: Family = Family {
    pattern: "upsample_nearest1d_{bits}",
    export_macro: "RV_EXPORT_UPSAMPLE_NEAREST1D",
    ops: &[],
    types: Types::Bits,
    args: &[
        arg("planes", ArgType::I64, "n*c"),
        arg("l", ArgType::I32, "input length"),
        arg("ol", ArgType::I32, "output length"),
        arg("scale", ArgType::F64, "l / ol, computed in f64"),
        arg("in", cptr(Elem::T), "input [planes, l]"),
        arg("out", mptr(Elem::T), "output [planes, ol]"),
    ],
    launch: Launch::GridStride,
    doc: "out[p][x] = in[p][min(l - 1, floor(x * scale))], the index in f64 as candle computes it.",
};

/// `upsample_bilinear2d_{dtype}`
pub const UPSAMPLE_BILINEAR2D: Family = Family {
    pattern: "upsample_bilinear2d_{dtype}",
    export_macro: "RV_EXPORT_UPSAMPLE_BILINEAR2D",
    ops: &[],
    types: Types::Float,
    args: &[
        arg("planes", ArgType::I64, "n*c"),
        arg("h", ArgType::I32, "input height"),
        arg("w", ArgType::I32, "input width"),
        arg("oh", ArgType::I32, "output height"),
        arg("ow", ArgType::I32, "output width"),
        arg("scale_h", ArgType::F64, "align_corners: (h-1)/(oh-1) (0 if oh == 1); else h/oh"),
        arg("scale_w", ArgType::F64, "align_corners: (w-1)/(ow-1) (0 if ow == 1); else w/ow"),
        arg("align_corners", ArgType::I32, "non-zero: corner pixels aligned"),
        arg("in", cptr(Elem::T), "input [planes, h, w]"),
        arg("out", mptr(Elem::T), "output [planes, oh, ow]"),
    ],
    launch: Launch::GridStride,
    doc: "Bilinear resize with PyTorch's / candle's source coordinates; coordinates in f64, blend in f32 (f64 for f64).",
};

pub(super) const FAMILIES: &[Family] = &[UPSAMPLE_NEAREST1D, UPSAMPLE_BILINEAR2D];
