//! The families of `norm.hip`: group, layer and RMS normalisation.

use crate::abi::{arg, cptr, mptr};
use crate::{ArgType, Elem, Family, Launch, Types};

/// `group_norm_stats_{dtype}`
pub const GROUP_NORM_STATS: Family = Family {
    pattern: "group_norm_stats_{dtype}",
    export_macro: "RV_EXPORT_GROUP_NORM_STATS",
    ops: &[],
    types: Types::Float,
    args: &[
        arg("n", ArgType::I32, "batch"),
        arg("c", ArgType::I32, "channels (multiple of groups)"),
        arg("hw", ArgType::I64, "spatial size H*W"),
        arg("groups", ArgType::I32, "groups"),
        arg("chunks", ArgType::I32, "slices per group (gridDim.x)"),
        arg("in", cptr(Elem::T), "input [n, c, hw]"),
        arg("partial", mptr(Elem::F32), "workspace [n, groups, chunks, 3] f32: count, mean, M2"),
    ],
    launch: Launch::GroupChunks,
    doc: "First pass of group_norm: Welford statistics of each slice of each group.",
};

/// `group_norm_apply_{dtype}`
pub const GROUP_NORM_APPLY: Family = Family {
    pattern: "group_norm_apply_{dtype}",
    export_macro: "RV_EXPORT_GROUP_NORM_APPLY",
    ops: &[],
    types: Types::Float,
    args: &[
        arg("n", ArgType::I32, "batch"),
        arg("c", ArgType::I32, "channels"),
        arg("hw", ArgType::I64, "spatial size H*W"),
        arg("groups", ArgType::I32, "groups"),
        arg("chunks", ArgType::I32, "as in group_norm_stats (same grid)"),
        arg("partial", cptr(Elem::F32), "the statistics written by group_norm_stats"),
        arg("eps", ArgType::F64, "added to the variance"),
        arg("gamma", cptr(Elem::T), "scale [c], or null"),
        arg("beta", cptr(Elem::T), "shift [c], or null"),
        arg("in", cptr(Elem::T), "input [n, c, hw]"),
        arg("out", mptr(Elem::T), "output [n, c, hw]"),
        arg("fuse_silu", ArgType::I32, "non-zero: apply silu after the affine step"),
    ],
    launch: Launch::GroupChunks,
    doc: "Second pass of group_norm: (x - mean) / sqrt(var + eps) * gamma + beta, biased variance, optional fused silu.",
};

/// `{op}_{dtype}`
pub const ROW_NORM: Family = Family {
    pattern: "{op}_{dtype}",
    export_macro: "RV_EXPORT_ROW_NORM",
    ops: &["layer_norm", "rms_norm"],
    types: Types::Float,
    args: &[
        arg("rows", ArgType::I64, "rows"),
        arg("cols", ArgType::I64, "normalised length"),
        arg("eps", ArgType::F64, "added to the variance (mean square for rms_norm)"),
        arg("gamma", cptr(Elem::T), "scale [cols], or null"),
        arg("beta", cptr(Elem::T), "shift [cols], or null"),
        arg("in", cptr(Elem::T), "input [rows, cols]"),
        arg("out", mptr(Elem::T), "output [rows, cols]"),
    ],
    launch: Launch::BlockPerRow,
    doc: "layer_norm: (x - mean) / sqrt(var + eps) * gamma + beta; rms_norm: x / sqrt(mean(x^2) + eps) * gamma + beta. f32 statistics.",
};

pub(super) const FAMILIES: &[Family] = &[GROUP_NORM_STATS, GROUP_NORM_APPLY, ROW_NORM];
