//! The families of `pointwise.hip`: comparisons, where and parametrised unary ops.

use crate::abi::{arg, cptr, mptr};
use crate::{ArgType, Elem, Family, Launch, Types};

use super::NUMEL;

const CMP_OPS: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge"];

/// `cmp_{op}_{dtype}`
pub const CMP: Family = Family {
    pattern: "cmp_{op}_{dtype}",
    export_macro: "RV_EXPORT_CMP",
    ops: CMP_OPS,
    types: Types::All,
    args: &[
        NUMEL,
        arg("lhs_view", ArgType::Strided, "view of lhs, dims = output shape, stride 0 where broadcast"),
        arg("rhs_view", ArgType::Strided, "view of rhs, dims = output shape, stride 0 where broadcast"),
        arg("lhs", cptr(Elem::T), "left operand"),
        arg("rhs", cptr(Elem::T), "right operand"),
        arg("out", mptr(Elem::U8), "contiguous output, u8: 1 where the comparison holds, else 0"),
    ],
    launch: Launch::GridStride,
    doc: "out = (lhs op rhs) as u8, candle's cmp. Exact comparison; NaN is unequal to everything.",
};

/// `where_u8_{dtype}`
pub const WHERE: Family = Family {
    pattern: "where_u8_{dtype}",
    export_macro: "RV_EXPORT_WHERE",
    ops: &[],
    types: Types::All,
    args: &[
        NUMEL,
        arg("mask_view", ArgType::Strided, "view of the mask, dims = output shape"),
        arg("true_view", ArgType::Strided, "view of on_true, dims = output shape"),
        arg("false_view", ArgType::Strided, "view of on_false, dims = output shape"),
        arg("mask", cptr(Elem::U8), "mask, u8"),
        arg("on_true", cptr(Elem::T), "values where mask != 0"),
        arg("on_false", cptr(Elem::T), "values where mask == 0"),
        arg("out", mptr(Elem::T), "contiguous output"),
    ],
    launch: Launch::GridStride,
    doc: "out = mask != 0 ? on_true : on_false (candle's where_cond with a u8 mask).",
};

/// `unary_{op}_{dtype}`
pub const UNARY_PARAM: Family = Family {
    pattern: "unary_{op}_{dtype}",
    export_macro: "RV_EXPORT_UNARY_PARAM",
    ops: &["powf", "elu"],
    types: Types::Float,
    args: &[
        NUMEL,
        arg("src", ArgType::Strided, "view of the input, dims = output shape"),
        arg("in", cptr(Elem::T), "input"),
        arg("out", mptr(Elem::T), "contiguous output"),
        arg("param", ArgType::F64, "powf: the exponent; elu: alpha"),
    ],
    launch: Launch::GridStride,
    doc: "powf: in^param; elu: in >= 0 ? in : param * (exp(in) - 1). Same signature as the unary family.",
};

pub(super) const FAMILIES: &[Family] = &[CMP, WHERE, UNARY_PARAM];
