//! The families of `reduce.hip`: reductions, arg-reductions and softmax.

use crate::abi::{arg, cptr, mptr};
use crate::{ArgType, Elem, Family, Launch, Types};

const RV_REDUCE_OPS: &[&str] = &["sum", "max", "min"];
const RV_ARG_OPS: &[&str] = &["argmax", "argmin"];

/// `reduce_{op}_lastdim_{dtype}`
pub const REDUCE_LASTDIM: Family = Family {
    pattern: "reduce_{op}_lastdim_{dtype}",
    export_macro: "RV_EXPORT_REDUCE_LASTDIM",
    ops: RV_REDUCE_OPS,
    types: Types::Float,
    args: &[
        arg("outer", ArgType::I64, "rows"),
        arg("len", ArgType::I64, "length of the reduced (last) dimension"),
        arg("in", cptr(Elem::T), "input [outer, len], contiguous"),
        arg("out", mptr(Elem::T), "output [outer]"),
    ],
    launch: Launch::BlockPerRow,
    doc: "Reduction over the last dimension; f32 accumulation (f64 for f64); max/min propagate NaN.",
};

/// `reduce_{op}_strided_{dtype}`
pub const REDUCE_STRIDED: Family = Family {
    pattern: "reduce_{op}_strided_{dtype}",
    export_macro: "RV_EXPORT_REDUCE_STRIDED",
    ops: RV_REDUCE_OPS,
    types: Types::Float,
    args: &[
        arg("outer", ArgType::I64, "product of the dims before the reduced one"),
        arg("len", ArgType::I64, "length of the reduced dimension"),
        arg("inner", ArgType::I64, "product of the dims after it (> 1)"),
        arg("in", cptr(Elem::T), "input [outer, len, inner], contiguous"),
        arg("out", mptr(Elem::T), "output [outer, inner]"),
    ],
    launch: Launch::GridStride,
    doc: "Reduction over a middle dimension: one thread per output, coalesced over inner.",
};

/// `reduce_{op}_lastdim_{dtype}`
pub const ARGREDUCE_LASTDIM: Family = Family {
    pattern: "reduce_{op}_lastdim_{dtype}",
    export_macro: "RV_EXPORT_ARGREDUCE_LASTDIM",
    ops: RV_ARG_OPS,
    types: Types::Float,
    args: &[
        arg("outer", ArgType::I64, "rows"),
        arg("len", ArgType::I64, "length of the reduced (last) dimension"),
        arg("in", cptr(Elem::T), "input [outer, len], contiguous"),
        arg("out", mptr(Elem::U32), "indices [outer], u32"),
    ],
    launch: Launch::BlockPerRow,
    doc: "Index of the first maximum/minimum (NaN counts as the extreme).",
};

/// `reduce_{op}_strided_{dtype}`
pub const ARGREDUCE_STRIDED: Family = Family {
    pattern: "reduce_{op}_strided_{dtype}",
    export_macro: "RV_EXPORT_ARGREDUCE_STRIDED",
    ops: RV_ARG_OPS,
    types: Types::Float,
    args: &[
        arg("outer", ArgType::I64, "product of the dims before the reduced one"),
        arg("len", ArgType::I64, "length of the reduced dimension"),
        arg("inner", ArgType::I64, "product of the dims after it (> 1)"),
        arg("in", cptr(Elem::T), "input [outer, len, inner], contiguous"),
        arg("out", mptr(Elem::U32), "indices [outer, inner], u32"),
    ],
    launch: Launch::GridStride,
    doc: "Index of the first maximum/minimum over a middle dimension.",
};

/// `{op}_lastdim_{dtype}`
pub const SOFTMAX: Family = Family {
    pattern: "{op}_lastdim_{dtype}",
    export_macro: "RV_EXPORT_SOFTMAX",
    ops: &["softmax", "log_softmax"],
    types: Types::Float,
    args: &[
        arg("rows", ArgType::I64, "rows"),
        arg("cols", ArgType::I64, "length of the last dimension"),
        arg("in", cptr(Elem::T), "input [rows, cols], contiguous"),
        arg("out", mptr(Elem::T), "output [rows, cols]"),
    ],
    launch: Launch::BlockPerRow,
    doc: "Softmax / log-softmax over the last dimension, max-subtracted, f32 accumulation.",
};

/// `exact_channel_sums_{dtype}`
pub const EXACT_SUMS: Family = Family {
    pattern: "exact_channel_sums_{dtype}",
    export_macro: "RV_EXPORT_EXACT_SUMS",
    ops: &[],
    types: Types::Gemm,
    args: &[
        arg("view", ArgType::Strided, "the [C, rows, cols] region, source strides"),
        arg("in", cptr(Elem::T), "input"),
        arg("per_block", ArgType::I64, "values of a channel per block"),
        arg("buckets", mptr(Elem::U64), "[C, 256] significand sums by biased exponent (i64 as u64), zeroed"),
        arg("non_finite", mptr(Elem::U32), "[C] set to 1 where an inf or NaN was seen, zeroed"),
    ],
    launch: Launch::ChannelBlocks,
    doc: "Order-independent exact per-channel sums (the buckets of rocm_vision::ExactSum).",
};

pub(super) const FAMILIES: &[Family] =
    &[REDUCE_LASTDIM, REDUCE_STRIDED, ARGREDUCE_LASTDIM, ARGREDUCE_STRIDED, SOFTMAX, EXACT_SUMS];
