//! The families of `cast.hip`: dtype conversion and fill.

use crate::abi::{arg, cptr, mptr};
use crate::{ArgType, Elem, Family, Launch, Types};

use super::NUMEL;

/// `cast_{src}_{dst}`
pub const CAST: Family = Family {
    pattern: "cast_{src}_{dst}",
    export_macro: "RV_EXPORT_CAST",
    ops: &[],
    types: Types::CastPairs,
    args: &[
        NUMEL,
        arg("src_view", ArgType::Strided, "view of the input, dims = output shape"),
        arg("in", cptr(Elem::Src), "input, source dtype"),
        arg("out", mptr(Elem::Dst), "contiguous output, destination dtype"),
    ],
    launch: Launch::GridStride,
    doc: "Dtype conversion: floats round to nearest even, float to integer truncates (C cast; out of range is undefined), f64 to f16 rounds through f32.",
};

/// `fill_{dtype}`
pub const FILL: Family = Family {
    pattern: "fill_{dtype}",
    export_macro: "RV_EXPORT_FILL",
    ops: &[],
    types: Types::All,
    args: &[
        NUMEL,
        arg("out", mptr(Elem::T), "output"),
        arg("value", ArgType::Value(Elem::T), "the value, as the element type itself"),
    ],
    launch: Launch::GridStride,
    doc: "out[i] = value.",
};

pub(super) const FAMILIES: &[Family] = &[CAST, FILL];
