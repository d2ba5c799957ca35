// Indexing kernels with candle's semantics: index_select, gather, scatter (set / add) and
// index_add, with u32 or i64 indices. Every tensor is contiguous (the host copies views)
// and viewed as [left, dim, right] around the indexed dimension `dim`.
//
// An index equal to the index type's maximum (u32::MAX, i64::MAX) is candle's "no index"
// sentinel: index_select and gather write zero there, scatter and index_add skip it. Any
// other index outside [0, dim) is treated the same way here, but never reaches a kernel:
// the host checks the indices first and returns candle's error (rocm-backend indexing.rs).
//
// Entry points  index_select_<idx>_<dtype>, idx in u32 i64, every dtype
//   (rv_i64 left, rv_i64 src_dim, rv_i64 right, rv_i64 n_ids, const I* ids, const T* src, T* out)
//   src [left, src_dim, right], ids [n_ids], out [left, n_ids, right]:
//   out[l, i, r] = src[l, ids[i], r]. One thread per output element.
// Entry points  gather_<idx>_<dtype>
//   (rv_i64 left, rv_i64 src_dim, rv_i64 ids_dim, rv_i64 right, const I* ids, const T* src, T* out)
//   src [left, src_dim, right], ids and out [left, ids_dim, right]:
//   out[l, i, r] = src[l, ids[l, i, r], r]. One thread per output element.
// Entry points  scatter_set_<idx>_<dtype>, scatter_add_<idx>_<dtype>
//   (rv_i64 left, rv_i64 dst_dim, rv_i64 ids_dim, rv_i64 right, const I* ids, const T* src, T* dst)
//   dst [left, dst_dim, right] updated in place; ids and src [left, ids_dim, right]:
//   dst[l, ids[l, i, r], r] = (or +=) src[l, i, r].
// Entry points  index_add_<idx>_<dtype>
//   (rv_i64 left, rv_i64 dst_dim, rv_i64 n_ids, rv_i64 right, const I* ids, const T* src, T* dst)
//   dst [left, dst_dim, right] updated in place; ids [n_ids]; src [left, n_ids, right]:
//   dst[l, ids[i], r] += src[l, i, r].
// The updating kernels run one thread per (l, r) column, which walks i in order: no
// atomics, deterministic, and duplicate indices behave as in candle's sequential loop (the
// last set wins; adds accumulate, rounded to T after each add as candle's CPU does).
// Launch: 1-D, blockDim.x <= 256, any gridDim.x (grid-stride).
#include "prelude.h"

// The position an index names in a dimension of `dim`, or -1 for none.
template <typename I> RV_DEVICE rv_i64 rv_ix_pos(I v, rv_i64 dim) {
    const rv_i64 j = (rv_i64)v;
    return (j >= 0 && j < dim) ? j : -1;
}

// Addition in the arithmetic type of T: floats widen, integers wrap in their own type.
template <typename T> struct rv_ix_arith {
    static __device__ __forceinline__ T add(T a, T b) {
        return rv_type<T>::from_acc(rv_type<T>::to_acc(a) + rv_type<T>::to_acc(b));
    }
};
#define RV_IX_INT(T)                                                                                        \
    template <> struct rv_ix_arith<T> {                                                                    \
        static __device__ __forceinline__ T add(T a, T b) { return (T)(a + b); }                           \
    };
RV_IX_INT(rv_u8)
RV_IX_INT(rv_u32)
RV_IX_INT(rv_i64)
#undef RV_IX_INT

template <typename I, typename T>
__device__ void rv_index_select(rv_i64 left, rv_i64 src_dim, rv_i64 right, rv_i64 n_ids, const I* __restrict__ ids,
                                const T* __restrict__ src, T* __restrict__ out) {
    const rv_i64 numel = left * n_ids * right;
    const T zero = rv_convert<T>::from(0.0f);
    for (rv_i64 o = rv_global_id(); o < numel; o += rv_grid_stride()) {
        const rv_i64 r = o % right, li = o / right;
        const rv_i64 i = li % n_ids, l = li / n_ids;
        const rv_i64 j = rv_ix_pos(ids[i], src_dim);
        out[o] = j < 0 ? zero : src[(l * src_dim + j) * right + r];
    }
}

template <typename I, typename T>
__device__ void rv_gather(rv_i64 left, rv_i64 src_dim, rv_i64 ids_dim, rv_i64 right, const I* __restrict__ ids,
                          const T* __restrict__ src, T* __restrict__ out) {
    const rv_i64 numel = left * ids_dim * right;
    const T zero = rv_convert<T>::from(0.0f);
    for (rv_i64 o = rv_global_id(); o < numel; o += rv_grid_stride()) {
        const rv_i64 r = o % right, l = o / (right * ids_dim);
        const rv_i64 j = rv_ix_pos(ids[o], src_dim);
        out[o] = j < 0 ? zero : src[(l * src_dim + j) * right + r];
    }
}

// One thread per (l, r) column; `per_column_ids` selects gather-shaped ids ([left, n, right],
// scatter) or one shared list ([n], index_add).
template <typename I, typename T, bool ADD, bool PER_COLUMN_IDS>
__device__ void rv_scatter(rv_i64 left, rv_i64 dst_dim, rv_i64 n, rv_i64 right, const I* __restrict__ ids,
                           const T* __restrict__ src, T* __restrict__ dst) {
    const rv_i64 columns = left * right;
    for (rv_i64 c = rv_global_id(); c < columns; c += rv_grid_stride()) {
        const rv_i64 r = c % right, l = c / right;
        const rv_i64 src_base = l * n * right + r;
        const rv_i64 dst_base = l * dst_dim * right + r;
        for (rv_i64 i = 0; i < n; ++i) {
            const rv_i64 s = src_base + i * right;
            const rv_i64 j = rv_ix_pos(ids[PER_COLUMN_IDS ? s : i], dst_dim);
            if (j < 0) continue;
            T* d = dst + dst_base + j * right;
            *d = ADD ? rv_ix_arith<T>::add(*d, src[s]) : src[s];
        }
    }
}

#define RV_EXPORT_INDEX_SELECT(NAME, IDX, T)                                                                       \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 left, rv_i64 src_dim, rv_i64 right, rv_i64 n_ids,                 \
                                  const rv_##IDX* ids, const T* src, T* out) {                             \
        rv_index_select<rv_##IDX, T>(left, src_dim, right, n_ids, ids, src, out);                          \
    }
#define RV_EXPORT_GATHER(NAME, IDX, T)                                                                             \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 left, rv_i64 src_dim, rv_i64 ids_dim, rv_i64 right,               \
                                  const rv_##IDX* ids, const T* src, T* out) {                             \
        rv_gather<rv_##IDX, T>(left, src_dim, ids_dim, right, ids, src, out);                              \
    }
#define RV_EXPORT_SCATTER_SET(NAME, IDX, T)                                                                        \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 left, rv_i64 dst_dim, rv_i64 ids_dim, rv_i64 right,               \
                                  const rv_##IDX* ids, const T* src, T* dst) {                             \
        rv_scatter<rv_##IDX, T, false, true>(left, dst_dim, ids_dim, right, ids, src, dst);                \
    }
#define RV_EXPORT_SCATTER_ADD(NAME, IDX, T)                                                                        \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 left, rv_i64 dst_dim, rv_i64 ids_dim, rv_i64 right,               \
                                  const rv_##IDX* ids, const T* src, T* dst) {                             \
        rv_scatter<rv_##IDX, T, true, true>(left, dst_dim, ids_dim, right, ids, src, dst);                 \
    }
#define RV_EXPORT_INDEX_ADD(NAME, IDX, T)                                                                          \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 left, rv_i64 dst_dim, rv_i64 n_ids, rv_i64 right,                 \
                                  const rv_##IDX* ids, const T* src, T* dst) {                             \
        rv_scatter<rv_##IDX, T, true, false>(left, dst_dim, n_ids, right, ids, src, dst);                  \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol; the
// second is the index type (rv_u32 / rv_i64).
RV_EXPORT_INDEX_SELECT(index_select_u32_f32, u32, float)
RV_EXPORT_INDEX_SELECT(index_select_u32_f16, u32, rv_half)
RV_EXPORT_INDEX_SELECT(index_select_u32_bf16, u32, rv_bf16)
RV_EXPORT_INDEX_SELECT(index_select_u32_f64, u32, double)
RV_EXPORT_INDEX_SELECT(index_select_u32_u8, u32, rv_u8)
RV_EXPORT_INDEX_SELECT(index_select_u32_u32, u32, rv_u32)
RV_EXPORT_INDEX_SELECT(index_select_u32_i64, u32, rv_i64)
RV_EXPORT_INDEX_SELECT(index_select_i64_f32, i64, float)
RV_EXPORT_INDEX_SELECT(index_select_i64_f16, i64, rv_half)
RV_EXPORT_INDEX_SELECT(index_select_i64_bf16, i64, rv_bf16)
RV_EXPORT_INDEX_SELECT(index_select_i64_f64, i64, double)
RV_EXPORT_INDEX_SELECT(index_select_i64_u8, i64, rv_u8)
RV_EXPORT_INDEX_SELECT(index_select_i64_u32, i64, rv_u32)
RV_EXPORT_INDEX_SELECT(index_select_i64_i64, i64, rv_i64)
RV_EXPORT_GATHER(gather_u32_f32, u32, float)
RV_EXPORT_GATHER(gather_u32_f16, u32, rv_half)
RV_EXPORT_GATHER(gather_u32_bf16, u32, rv_bf16)
RV_EXPORT_GATHER(gather_u32_f64, u32, double)
RV_EXPORT_GATHER(gather_u32_u8, u32, rv_u8)
RV_EXPORT_GATHER(gather_u32_u32, u32, rv_u32)
RV_EXPORT_GATHER(gather_u32_i64, u32, rv_i64)
RV_EXPORT_GATHER(gather_i64_f32, i64, float)
RV_EXPORT_GATHER(gather_i64_f16, i64, rv_half)
RV_EXPORT_GATHER(gather_i64_bf16, i64, rv_bf16)
RV_EXPORT_GATHER(gather_i64_f64, i64, double)
RV_EXPORT_GATHER(gather_i64_u8, i64, rv_u8)
RV_EXPORT_GATHER(gather_i64_u32, i64, rv_u32)
RV_EXPORT_GATHER(gather_i64_i64, i64, rv_i64)
RV_EXPORT_SCATTER_SET(scatter_set_u32_f32, u32, float)
RV_EXPORT_SCATTER_SET(scatter_set_u32_f16, u32, rv_half)
RV_EXPORT_SCATTER_SET(scatter_set_u32_bf16, u32, rv_bf16)
RV_EXPORT_SCATTER_SET(scatter_set_u32_f64, u32, double)
RV_EXPORT_SCATTER_SET(scatter_set_u32_u8, u32, rv_u8)
RV_EXPORT_SCATTER_SET(scatter_set_u32_u32, u32, rv_u32)
RV_EXPORT_SCATTER_SET(scatter_set_u32_i64, u32, rv_i64)
RV_EXPORT_SCATTER_SET(scatter_set_i64_f32, i64, float)
RV_EXPORT_SCATTER_SET(scatter_set_i64_f16, i64, rv_half)
RV_EXPORT_SCATTER_SET(scatter_set_i64_bf16, i64, rv_bf16)
RV_EXPORT_SCATTER_SET(scatter_set_i64_f64, i64, double)
RV_EXPORT_SCATTER_SET(scatter_set_i64_u8, i64, rv_u8)
RV_EXPORT_SCATTER_SET(scatter_set_i64_u32, i64, rv_u32)
RV_EXPORT_SCATTER_SET(scatter_set_i64_i64, i64, rv_i64)
RV_EXPORT_SCATTER_ADD(scatter_add_u32_f32, u32, float)
RV_EXPORT_SCATTER_ADD(scatter_add_u32_f16, u32, rv_half)
RV_EXPORT_SCATTER_ADD(scatter_add_u32_bf16, u32, rv_bf16)
RV_EXPORT_SCATTER_ADD(scatter_add_u32_f64, u32, double)
RV_EXPORT_SCATTER_ADD(scatter_add_u32_u8, u32, rv_u8)
RV_EXPORT_SCATTER_ADD(scatter_add_u32_u32, u32, rv_u32)
RV_EXPORT_SCATTER_ADD(scatter_add_u32_i64, u32, rv_i64)
RV_EXPORT_SCATTER_ADD(scatter_add_i64_f32, i64, float)
RV_EXPORT_SCATTER_ADD(scatter_add_i64_f16, i64, rv_half)
RV_EXPORT_SCATTER_ADD(scatter_add_i64_bf16, i64, rv_bf16)
RV_EXPORT_SCATTER_ADD(scatter_add_i64_f64, i64, double)
RV_EXPORT_SCATTER_ADD(scatter_add_i64_u8, i64, rv_u8)
RV_EXPORT_SCATTER_ADD(scatter_add_i64_u32, i64, rv_u32)
RV_EXPORT_SCATTER_ADD(scatter_add_i64_i64, i64, rv_i64)
RV_EXPORT_INDEX_ADD(index_add_u32_f32, u32, float)
RV_EXPORT_INDEX_ADD(index_add_u32_f16, u32, rv_half)
RV_EXPORT_INDEX_ADD(index_add_u32_bf16, u32, rv_bf16)
RV_EXPORT_INDEX_ADD(index_add_u32_f64, u32, double)
RV_EXPORT_INDEX_ADD(index_add_u32_u8, u32, rv_u8)
RV_EXPORT_INDEX_ADD(index_add_u32_u32, u32, rv_u32)
RV_EXPORT_INDEX_ADD(index_add_u32_i64, u32, rv_i64)
RV_EXPORT_INDEX_ADD(index_add_i64_f32, i64, float)
RV_EXPORT_INDEX_ADD(index_add_i64_f16, i64, rv_half)
RV_EXPORT_INDEX_ADD(index_add_i64_bf16, i64, rv_bf16)
RV_EXPORT_INDEX_ADD(index_add_i64_f64, i64, double)
RV_EXPORT_INDEX_ADD(index_add_i64_u8, i64, rv_u8)
RV_EXPORT_INDEX_ADD(index_add_i64_u32, i64, rv_u32)
RV_EXPORT_INDEX_ADD(index_add_i64_i64, i64, rv_i64)
