//! The families of `igemm.hip`: the NCHW implicit-GEMM convolutions.

use crate::{Family, Launch, Types};

use super::conv::CONV_ARGS;

// The names of `crate::IGEMM_CONFIGS`, in order (a test compares them).
const IGEMM_CONFIG_NAMES: &[&str] = &["64x64x16_4x4", "128x128x8_8x8", "128x16x16_4x2"];

/// `igemm_fwd_{op}_{dtype}`
pub const IGEMM_FWD: Family = Family {
    pattern: "igemm_fwd_{op}_{dtype}",
    export_macro: "RV_EXPORT_IGEMM",
    ops: IGEMM_CONFIG_NAMES,
    types: Types::Gemm,
    args: CONV_ARGS,
    launch: Launch::Igemm,
    doc: "Implicit-GEMM forward convolution: LDS tiles, FMA, f32 accumulation; M = n*p*q, N = k/groups, K = (c/groups)*r*s; any stride, padding, dilation, groups.",
};

/// `igemm_tconv_{op}_{dtype}`
pub const IGEMM_TCONV: Family = Family {
    pattern: "igemm_tconv_{op}_{dtype}",
    export_macro: "RV_EXPORT_IGEMM",
    ops: IGEMM_CONFIG_NAMES,
    types: Types::Gemm,
    args: CONV_ARGS,
    launch: Launch::Igemm,
    doc: "Implicit-GEMM transposed convolution through the dgrad mapping: input row (y + pad - r*dil)/stride when exact.",
};

pub(super) const FAMILIES: &[Family] = &[IGEMM_FWD, IGEMM_TCONV];
