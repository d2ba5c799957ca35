//! The families of `indexing.hip`: index_select, gather, scatter and index_add.

use crate::abi::{arg, cptr, mptr};
use crate::{Arg, ArgType, Elem, Family, Launch, Types};

/// The index types of the indexing kernels: the `{op}` part of their names.
pub const INDEX_TYPES: &[&str] = &["u32", "i64"];

/// `index_select_{op}_{dtype}`
pub const INDEX_SELECT: Family = Family {
    pattern: "index_select_{op}_{dtype}",
    export_macro: "RV_EXPORT_INDEX_SELECT",
    ops: INDEX_TYPES,
    types: Types::All,
    args: &[
        arg("left", ArgType::I64, "product of the dims before the indexed one"),
        arg("src_dim", ArgType::I64, "length of the indexed dimension of src"),
        arg("right", ArgType::I64, "product of the dims after it"),
        arg("n_ids", ArgType::I64, "number of indices"),
        arg("ids", cptr(Elem::Idx), "indices [n_ids]"),
        arg("src", cptr(Elem::T), "source [left, src_dim, right], contiguous"),
        arg("out", mptr(Elem::T), "output [left, n_ids, right]"),
    ],
    launch: Launch::GridStride,
    doc: "out[l, i, r] = src[l, ids[i], r]; an index outside [0, src_dim) (candle's max-value sentinel among them) gives 0.",
};

/// `gather_{op}_{dtype}`
pub const GATHER: Family = Family {
    pattern: "gather_{op}_{dtype}",
    export_macro: "RV_EXPORT_GATHER",
    ops: INDEX_TYPES,
    types: Types::All,
    args: &[
        arg("left", ArgType::I64, "product of the dims before the indexed one"),
        arg("src_dim", ArgType::I64, "length of the indexed dimension of src"),
        arg("ids_dim", ArgType::I64, "length of the indexed dimension of ids and out"),
        arg("right", ArgType::I64, "product of the dims after it"),
        arg("ids", cptr(Elem::Idx), "indices [left, ids_dim, right]"),
        arg("src", cptr(Elem::T), "source [left, src_dim, right], contiguous"),
        arg("out", mptr(Elem::T), "output [left, ids_dim, right]"),
    ],
    launch: Launch::GridStride,
    doc: "out[l, i, r] = src[l, ids[l, i, r], r]; an index outside [0, src_dim) gives 0.",
};

/// `scatter_set_{op}_{dtype}`
pub const SCATTER_SET: Family = Family {
    pattern: "scatter_set_{op}_{dtype}",
    export_macro: "RV_EXPORT_SCATTER_SET",
    ops: INDEX_TYPES,
    types: Types::All,
    args: SCATTER_ARGS,
    launch: Launch::GridStride,
    doc: "dst[l, ids[l, i, r], r] = src[l, i, r] in place, one thread per (l, r) walking i in order (the last write wins); an index outside [0, dst_dim) is skipped. Grid over left*right.",
};

/// `scatter_add_{op}_{dtype}`
pub const SCATTER_ADD: Family = Family {
    pattern: "scatter_add_{op}_{dtype}",
    export_macro: "RV_EXPORT_SCATTER_ADD",
    ops: INDEX_TYPES,
    types: Types::All,
    args: SCATTER_ARGS,
    launch: Launch::GridStride,
    doc: "dst[l, ids[l, i, r], r] += src[l, i, r] in place, sequential per (l, r) column: deterministic, no atomics. Grid over left*right.",
};

/// `index_add_{op}_{dtype}`
pub const INDEX_ADD: Family = Family {
    pattern: "index_add_{op}_{dtype}",
    export_macro: "RV_EXPORT_INDEX_ADD",
    ops: INDEX_TYPES,
    types: Types::All,
    args: &[
        arg("left", ArgType::I64, "product of the dims before the indexed one"),
        arg("dst_dim", ArgType::I64, "length of the indexed dimension of dst"),
        arg("n_ids", ArgType::I64, "number of indices = the indexed dimension of src"),
        arg("right", ArgType::I64, "product of the dims after it"),
        arg("ids", cptr(Elem::Idx), "indices [n_ids]"),
        arg("src", cptr(Elem::T), "source [left, n_ids, right], contiguous"),
        arg("dst", mptr(Elem::T), "destination [left, dst_dim, right], updated in place"),
    ],
    launch: Launch::GridStride,
    doc: "dst[l, ids[i], r] += src[l, i, r] in place, sequential per (l, r) column. Grid over left*right.",
};

pub(super) const FAMILIES: &[Family] = &[INDEX_SELECT, GATHER, SCATTER_SET, SCATTER_ADD, INDEX_ADD];

const SCATTER_ARGS: &[Arg] = &[
    arg("left", ArgType::I64, "product of the dims before the indexed one"),
    arg("dst_dim", ArgType::I64, "length of the indexed dimension of dst"),
    arg("ids_dim", ArgType::I64, "length of the indexed dimension of ids and src"),
    arg("right", ArgType::I64, "product of the dims after it"),
    arg("ids", cptr(Elem::Idx), "indices [left, ids_dim, right]"),
    arg("src", cptr(Elem::T), "source [left, ids_dim, right], contiguous"),
    arg("dst", mptr(Elem::T), "destination [left, dst_dim, right], updated in place"),
];
