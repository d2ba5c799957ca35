//! The families of `random.hip`: the Philox stream and its distributions.

use crate::abi::{arg, mptr};
use crate::{Arg, ArgType, Elem, Family, Launch, Types};

use super::NUMEL;

const RAND_HEAD: [Arg; 3] = [
    NUMEL,
    arg("seed", ArgType::I64, "key of the generator (u64 bit pattern)"),
    arg("offset", ArgType::I64, "index of the first 32-bit word of the stream used (< 2^62)"),
];

/// `rand_bits_{dtype}`
pub const RAND_BITS: Family = Family {
    pattern: "rand_bits_{dtype}",
    export_macro: "RV_EXPORT_RAND_BITS",
    ops: &[],
    types: Types::U32,
    args: &[RAND_HEAD[0], RAND_HEAD[1], RAND_HEAD[2], arg("out", mptr(Elem::T), "the raw words [numel]")],
    launch: Launch::GridStride,
    doc: "The raw Philox4x32-10 stream: out[i] = word offset + i of (seed).",
};

/// `rand_uniform_{dtype}`
pub const RAND_UNIFORM: Family = Family {
    pattern: "rand_uniform_{dtype}",
    export_macro: "RV_EXPORT_RAND_UNIFORM",
    ops: &[],
    types: Types::Float,
    args: &[
        RAND_HEAD[0],
        RAND_HEAD[1],
        RAND_HEAD[2],
        arg("lo", ArgType::F64, "lower bound"),
        arg("hi", ArgType::F64, "upper bound"),
        arg("out", mptr(Elem::T), "output [numel]"),
    ],
    launch: Launch::GridStride,
    doc: "Uniform in [lo, hi) from the Philox stream (24-bit uniforms; f64: 32-bit).",
};

/// `rand_normal_{dtype}`
pub const RAND_NORMAL: Family = Family {
    pattern: "rand_normal_{dtype}",
    export_macro: "RV_EXPORT_RAND_NORMAL",
    ops: &[],
    types: Types::Float,
    args: &[
        RAND_HEAD[0],
        RAND_HEAD[1],
        RAND_HEAD[2],
        arg("mean", ArgType::F64, "mean"),
        arg("std", ArgType::F64, "standard deviation"),
        arg("out", mptr(Elem::T), "output [numel]"),
    ],
    launch: Launch::GridStride,
    doc: "Normal(mean, std) by Box-Muller on word pairs of the Philox stream.",
};

pub(super) const FAMILIES: &[Family] = &[RAND_BITS, RAND_UNIFORM, RAND_NORMAL];
