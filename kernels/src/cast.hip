// Dtype conversion and fill.
//
// Entry points  cast_<src>_<dst>, src != dst, both in f32 f16 bf16 f64 u8 u32 i64
//   (rv_i64 numel, rv_strided src_view, const S* in, D* out)
//   in is read through src_view (dims = the output shape); out is contiguous.
//   Float to float rounds to nearest even; float to integer truncates toward zero like a
//   C cast (out-of-range values and NaN are undefined, as in candle's CUDA kernels);
//   f64 to f16 rounds through f32 (HIP has no direct conversion).
// Entry points  fill_<dtype>, dtype in f32 f16 bf16 f64 u8 u32 i64
//   (rv_i64 numel, T* out, T value)
//   value is passed as the element type itself (f16/bf16: their 2-byte bit pattern).
// Launch: 1-D, blockDim.x <= 256, any gridDim.x (grid-stride).
#include "prelude.h"

template <typename S, typename D>
__device__ void rv_cast(rv_i64 numel, const rv_strided& sv, const S* __restrict__ in, D* __restrict__ out) {
    rv_map1(numel, sv, in, out, [](S x) { return rv_convert<D>::from(x); });
}

template <typename T>
__device__ void rv_fill(rv_i64 numel, T* __restrict__ out, T value) {
    constexpr int N = 16 / sizeof(T);
    typedef rv_vec<T, N> V;
    rv_i64 head = 0;
    if (rv_aligned(out, (int)sizeof(V))) {
        V v;
#pragma unroll
        for (int j = 0; j < N; ++j) v.e[j] = value;
        head = numel / N;
        for (rv_i64 i = rv_global_id(); i < head; i += rv_grid_stride()) ((V*)out)[i] = v;
        head *= N;
    }
    for (rv_i64 i = head + rv_global_id(); i < numel; i += rv_grid_stride()) out[i] = value;
}

#define RV_EXPORT_CAST(NAME, S, D)                                                                                 \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_strided src_view, const S* in, D* out) {                \
        rv_cast<S, D>(numel, src_view, in, out);                                                           \
    }
#define RV_EXPORT_FILL(NAME, T)                                                                                    \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, T* out, T value) { rv_fill<T>(numel, out, value); }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_CAST(cast_f32_f16, float, rv_half)
RV_EXPORT_CAST(cast_f32_bf16, float, rv_bf16)
RV_EXPORT_CAST(cast_f32_f64, float, double)
RV_EXPORT_CAST(cast_f32_u8, float, rv_u8)
RV_EXPORT_CAST(cast_f32_u32, float, rv_u32)
RV_EXPORT_CAST(cast_f32_i64, float, rv_i64)
RV_EXPORT_CAST(cast_f16_f32, rv_half, float)
RV_EXPORT_CAST(cast_f16_bf16, rv_half, rv_bf16)
RV_EXPORT_CAST(cast_f16_f64, rv_half, double)
RV_EXPORT_CAST(cast_f16_u8, rv_half, rv_u8)
RV_EXPORT_CAST(cast_f16_u32, rv_half, rv_u32)
RV_EXPORT_CAST(cast_f16_i64, rv_half, rv_i64)
RV_EXPORT_CAST(cast_bf16_f32, rv_bf16, float)
RV_EXPORT_CAST(cast_bf16_f16, rv_bf16, rv_half)
RV_EXPORT_CAST(cast_bf16_f64, rv_bf16, double)
RV_EXPORT_CAST(cast_bf16_u8, rv_bf16, rv_u8)
RV_EXPORT_CAST(cast_bf16_u32, rv_bf16, rv_u32)
RV_EXPORT_CAST(cast_bf16_i64, rv_bf16, rv_i64)
RV_EXPORT_CAST(cast_f64_f32, double, float)
RV_EXPORT_CAST(cast_f64_f16, double, rv_half)
RV_EXPORT_CAST(cast_f64_bf16, double, rv_bf16)
RV_EXPORT_CAST(cast_f64_u8, double, rv_u8)
RV_EXPORT_CAST(cast_f64_u32, double, rv_u32)
RV_EXPORT_CAST(cast_f64_i64, double, rv_i64)
RV_EXPORT_CAST(cast_u8_f32, rv_u8, float)
RV_EXPORT_CAST(cast_u8_f16, rv_u8, rv_half)
RV_EXPORT_CAST(cast_u8_bf16, rv_u8, rv_bf16)
RV_EXPORT_CAST(cast_u8_f64, rv_u8, double)
RV_EXPORT_CAST(cast_u8_u32, rv_u8, rv_u32)
RV_EXPORT_CAST(cast_u8_i64, rv_u8, rv_i64)
RV_EXPORT_CAST(cast_u32_f32, rv_u32, float)
RV_EXPORT_CAST(cast_u32_f16, rv_u32, rv_half)
RV_EXPORT_CAST(cast_u32_bf16, rv_u32, rv_bf16)
RV_EXPORT_CAST(cast_u32_f64, rv_u32, double)
RV_EXPORT_CAST(cast_u32_u8, rv_u32, rv_u8)
RV_EXPORT_CAST(cast_u32_i64, rv_u32, rv_i64)
RV_EXPORT_CAST(cast_i64_f32, rv_i64, float)
RV_EXPORT_CAST(cast_i64_f16, rv_i64, rv_half)
RV_EXPORT_CAST(cast_i64_bf16, rv_i64, rv_bf16)
RV_EXPORT_CAST(cast_i64_f64, rv_i64, double)
RV_EXPORT_CAST(cast_i64_u8, rv_i64, rv_u8)
RV_EXPORT_CAST(cast_i64_u32, rv_i64, rv_u32)
RV_EXPORT_FILL(fill_f32, float)
RV_EXPORT_FILL(fill_f16, rv_half)
RV_EXPORT_FILL(fill_bf16, rv_bf16)
RV_EXPORT_FILL(fill_f64, double)
RV_EXPORT_FILL(fill_u8, rv_u8)
RV_EXPORT_FILL(fill_u32, rv_u32)
RV_EXPORT_FILL(fill_i64, rv_i64)
