//! The families of `nhwc_pack.hip`: the NHWC layout the implicit-GEMM kernels of
//! `igemm_mma.hip` read (input bands and filter phases), as bit copies per element width.

use crate::abi::{arg, cptr, mptr};
use crate::{ArgType, Elem, Family, Launch, Types};

/// `igemm_pack_input_{bits}`
pub const IGEMM_PACK_INPUT: Family = Family {
    pattern: "igemm_pack_input_{bits}",
    export_macro: "RV_EXPORT_IGEMM_PACK_INPUT",
    ops: &[],
    types: Types::Bits16And32,
    args: &[
        arg("g", ArgType::Conv2d, "the full input: n, c, h, w, groups"),
        arg("row0", ArgType::I32, "first input row of the band"),
        arg("rows", ArgType::I32, "rows in the band"),
        arg("cgp", ArgType::I32, "channel slots per group (>= c/groups; the extra slots are zero)"),
        arg("in", cptr(Elem::T), "NCHW input"),
        arg("out", mptr(Elem::T), "NHWC band [n][rows][w][groups*cgp]"),
    ],
    launch: Launch::TransposeTiles,
    doc: "NCHW -> NHWC of a band of input rows with padded channel slots (grid = (ceil(rows*w/32), ceil(groups*cgp/32), n)).",
};

/// `igemm_pack_weight_{bits}`
pub const IGEMM_PACK_WEIGHT: Family = Family {
    pattern: "igemm_pack_weight_{bits}",
    export_macro: "RV_EXPORT_IGEMM_PACK_WEIGHT",
    ops: &[],
    types: Types::Bits16And32,
    args: &[
        arg("g", ArgType::Conv2d, "the convolution: k, c, r, s (full filter), groups"),
        arg("cgp", ArgType::I32, "channel slots per group"),
        arg("transposed", ArgType::I32, "non-zero: weights are [c][k/groups][r][s]"),
        arg("r0", ArgType::I32, "first filter row of the phase"),
        arg("rstep", ArgType::I32, "filter row step"),
        arg("nr", ArgType::I32, "filter rows in the phase"),
        arg("s0", ArgType::I32, "first filter column"),
        arg("sstep", ArgType::I32, "filter column step"),
        arg("ns", ArgType::I32, "filter columns in the phase"),
        arg("w", cptr(Elem::T), "weights as the convolution takes them"),
        arg("out", mptr(Elem::T), "packed [k][nr][ns][cgp]"),
    ],
    launch: Launch::GridStride,
    doc: "Packs one phase's filter taps as [k][tap row][tap column][channel slot] for the NHWC kernels.",
};

pub(super) const FAMILIES: &[Family] = &[IGEMM_PACK_INPUT, IGEMM_PACK_WEIGHT];
