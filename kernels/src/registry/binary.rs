//! The family of `binary.hip`: broadcasting binary ops.

use crate::abi::{arg, cptr, mptr};
use crate::{ArgType, Elem, Family, Launch, Types};

use super::NUMEL;

/// `binary_{op}_{dtype}`
pub const BINARY: Family = Family {
    pattern: "binary_{op}_{dtype}",
    export_macro: "RV_EXPORT_BINARY",
    ops: &["add", "sub", "mul", "div", "maximum", "minimum"],
    types: Types::All,
    args: &[
        NUMEL,
        arg("lhs_view", ArgType::Strided, "view of lhs, dims = output shape, stride 0 where broadcast"),
        arg("rhs_view", ArgType::Strided, "view of rhs, dims = output shape, stride 0 where broadcast"),
        arg("lhs", cptr(Elem::T), "left operand"),
        arg("rhs", cptr(Elem::T), "right operand"),
        arg("out", mptr(Elem::T), "contiguous output"),
    ],
    launch: Launch::GridStride,
    doc: "out = lhs op rhs with broadcasting. Floats: f32 arithmetic (f64 for f64), maximum/minimum propagate NaN. Integers: wrapping, in their own type.",
};

pub(super) const FAMILIES: &[Family] = &[BINARY];
