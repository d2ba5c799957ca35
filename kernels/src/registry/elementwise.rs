//! The families of `elementwise.hip`: unary ops and affine.

use crate::abi::{arg, cptr, mptr};
use crate::{ArgType, Elem, Family, Launch, Types};

use super::NUMEL;

const UNARY_OPS: &[&str] = &[
    "neg",
    "exp",
    "log",
    "sqrt",
    "abs",
    "relu",
    "silu",
    "gelu",
    "gelu_erf",
    "sigmoid",
    "tanh",
    "sin",
    "cos",
    "recip",
    "sqr",
    "leaky_relu",
];

/// `unary_{op}_{dtype}`
pub const UNARY: Family = Family {
    pattern: "unary_{op}_{dtype}",
    export_macro: "RV_EXPORT_UNARY",
    ops: UNARY_OPS,
    types: Types::Float,
    args: &[
        NUMEL,
        arg("src", ArgType::Strided, "view of the input, dims = output shape"),
        arg("in", cptr(Elem::T), "input"),
        arg("out", mptr(Elem::T), "contiguous output"),
        arg("param", ArgType::F64, "leaky_relu's negative slope; ignored by the other ops"),
    ],
    launch: Launch::GridStride,
    doc: "out = op(in); f32 arithmetic for f32/f16/bf16, f64 for f64. gelu is the tanh approximation, gelu_erf the exact form.",
};

/// `affine_{dtype}`
pub const AFFINE: Family = Family {
    pattern: "affine_{dtype}",
    export_macro: "RV_EXPORT_AFFINE",
    ops: &[],
    types: Types::Float,
    args: &[
        NUMEL,
        arg("src", ArgType::Strided, "view of the input, dims = output shape"),
        arg("in", cptr(Elem::T), "input"),
        arg("out", mptr(Elem::T), "contiguous output"),
        arg("mul", ArgType::F64, "factor"),
        arg("add", ArgType::F64, "offset"),
    ],
    launch: Launch::GridStride,
    doc: "out = in * mul + add (fused multiply-add in the accumulate type).",
};

pub(super) const FAMILIES: &[Family] = &[UNARY, AFFINE];
