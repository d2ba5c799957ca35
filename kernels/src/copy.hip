// Data movement: strided copy, 2-D copy, tiled transpose, 2-D padding, nearest upsampling.
// These kernels only move bits, so they are instantiated per element size, not per dtype:
// b8 (u8), b16 (f16, bf16), b32 (f32, u32), b64 (f64, i64). Zero padding writes all-zero
// bits, which is 0 in every dtype.
//
// copy_strided_<bits>  (rv_i64 numel, rv_strided src_view, const T* in, T* out)
//   out (contiguous, shape src_view.dims) = in read through src_view (rank <= 6).
//   Launch: 1-D, blockDim.x <= 256, any gridDim.x.
// copy2d_<bits>  (rv_i64 rows, rv_i64 cols, rv_i64 src_stride, rv_i64 dst_stride, const T* src, T* dst)
//   dst[r*dst_stride + c] = src[r*src_stride + c]: a block of rows (concatenation, slicing).
//   Launch: 1-D over rows*cols, blockDim.x <= 256, any gridDim.x.
// transpose2d_<bits>  (rv_i64 batch, rv_i32 rows, rv_i32 cols, const T* in, T* out)
//   in [batch, rows, cols] -> out [batch, cols, rows], both contiguous, through a 32x33
//   shared-memory tile so both reads and writes are coalesced.
//   Launch: blockDim = (32, 8, 1); grid = (ceil(cols/32), ceil(rows/32), min(batch, 65535)).
// pad2d_<mode>_<bits>, mode in zero reflect replicate
//   (rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 pad_top, rv_i32 pad_left, rv_i32 oh, rv_i32 ow,
//    const T* in, T* out)
//   in [planes, h, w] -> out [planes, oh, ow] with oh = h + pad_top + pad_bottom (and the
//   same for w): the end paddings are implied by oh, ow. reflect needs pads < h, w
//   (PyTorch's rule); replicate repeats the edge.
//   Launch: 1-D over planes*oh*ow, blockDim.x <= 256, any gridDim.x.
// upsample_nearest2d_<bits>  (rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 oh, rv_i32 ow, const T* in, T* out)
//   out[y][x] = in[floor(y*h/oh)][floor(x*w/ow)], computed exactly in integers (PyTorch's
//   "nearest" for integer scale factors).
//   Launch: 1-D over planes*oh*ow, blockDim.x <= 256, any gridDim.x.
// pool2d_{max,avg}_<dtype>  (rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 oh, rv_i32 ow, rv_i32 kh,
//                           rv_i32 kw, rv_i32 sh, rv_i32 sw, const T* in, T* out)
//   Max / average over kh x kw windows at stride (sh, sw), no padding (every window lies
//   inside the input: oh = (h - kh) / sh + 1). The average accumulates in f32 (f64 for f64).
//   Launch: 1-D over planes*oh*ow, blockDim.x <= 256, any gridDim.x.
#include "prelude.h"

template <typename T>
__device__ void rv_copy_strided(rv_i64 numel, const rv_strided& sv, const T* __restrict__ in, T* __restrict__ out) {
    const bool small = rv_is_small(numel);
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) out[i] = in[rv_offset(i, sv, small)];
}

template <typename T>
__device__ void rv_copy2d(rv_i64 rows, rv_i64 cols, rv_i64 ss, rv_i64 ds, const T* __restrict__ src,
                          T* __restrict__ dst) {
    const rv_i64 numel = rows * cols;
    const bool small = rv_is_small(numel);
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        rv_i64 r, c;
        if (small) {
            const unsigned q = (unsigned)i / (unsigned)cols;
            r = q;
            c = (unsigned)i - q * (unsigned)cols;
        } else {
            r = i / cols;
            c = i - r * cols;
        }
        dst[r * ds + c] = src[r * ss + c];
    }
}

#define RV_TILE 32
template <typename T>
__device__ void rv_transpose2d(rv_i64 batch, rv_i32 rows, rv_i32 cols, const T* __restrict__ in, T* __restrict__ out) {
    // +1 column: the column-wise read of the tile hits distinct banks.
    __shared__ T tile[RV_TILE][RV_TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c0 = blockIdx.x * RV_TILE, r0 = blockIdx.y * RV_TILE;
    for (rv_i64 b = blockIdx.z; b < batch; b += gridDim.z) {
        const T* src = in + b * (rv_i64)rows * cols;
        T* dst = out + b * (rv_i64)rows * cols;
        for (int j = ty; j < RV_TILE; j += blockDim.y) {
            const int r = r0 + j, c = c0 + tx;
            if (r < rows && c < cols) tile[j][tx] = src[(rv_i64)r * cols + c];
        }
        __syncthreads();
        for (int j = ty; j < RV_TILE; j += blockDim.y) {
            const int c = c0 + j, r = r0 + tx;  // out row = in column
            if (r < rows && c < cols) dst[(rv_i64)c * rows + r] = tile[tx][j];
        }
        __syncthreads();
    }
}

// Linear index over [planes, oh, ow] -> (plane, y, x).
RV_DEVICE void rv_plane_yx(rv_i64 i, rv_i32 oh, rv_i32 ow, bool small, rv_i64* plane, int* y, int* x) {
    if (small) {
        const unsigned u = (unsigned)i, row = u / (unsigned)ow;
        *x = (int)(u - row * (unsigned)ow);
        const unsigned pl = row / (unsigned)oh;
        *y = (int)(row - pl * (unsigned)oh);
        *plane = pl;
    } else {
        const rv_i64 row = i / ow;
        *x = (int)(i - row * ow);
        *plane = row / oh;
        *y = (int)(row - *plane * oh);
    }
}

enum { RV_PAD_ZERO = 0, RV_PAD_REFLECT = 1, RV_PAD_REPLICATE = 2 };
template <int MODE>
RV_DEVICE int rv_pad_src(int o, int pad, int n) {
    int i = o - pad;
    if (MODE == RV_PAD_REFLECT) {
        i = i < 0 ? -i : i;
        i = i >= n ? 2 * (n - 1) - i : i;
    } else if (MODE == RV_PAD_REPLICATE) {
        i = i < 0 ? 0 : (i >= n ? n - 1 : i);
    }
    return i;
}

template <typename T, int MODE>
__device__ void rv_pad2d(rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 pt, rv_i32 pl, rv_i32 oh, rv_i32 ow,
                         const T* __restrict__ in, T* __restrict__ out) {
    const rv_i64 numel = planes * oh * ow;
    const bool small = rv_is_small(numel);
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        rv_i64 plane;
        int y, x;
        rv_plane_yx(i, oh, ow, small, &plane, &y, &x);
        const int sy = rv_pad_src<MODE>(y, pt, h), sx = rv_pad_src<MODE>(x, pl, w);
        const bool inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
        out[i] = inside ? in[(plane * h + sy) * w + sx] : T(0);
    }
}

template <typename T>
__device__ void rv_upsample_nearest2d(rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 oh, rv_i32 ow,
                                      const T* __restrict__ in, T* __restrict__ out) {
    const rv_i64 numel = planes * oh * ow;
    const bool small = rv_is_small(numel);
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        rv_i64 plane;
        int y, x;
        rv_plane_yx(i, oh, ow, small, &plane, &y, &x);
        const int sy = (int)(((rv_i64)y * h) / oh), sx = (int)(((rv_i64)x * w) / ow);
        out[i] = in[(plane * h + sy) * w + sx];
    }
}

template <typename T, bool MAX>
__device__ void rv_pool2d(rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 oh, rv_i32 ow, rv_i32 kh, rv_i32 kw, rv_i32 sh,
                          rv_i32 sw, const T* __restrict__ in, T* __restrict__ out) {
    typedef typename rv_type<T>::acc A;
    const rv_i64 numel = planes * oh * ow;
    const bool small = rv_is_small(numel);
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        rv_i64 plane;
        int y, x;
        rv_plane_yx(i, oh, ow, small, &plane, &y, &x);
        const T* src = in + (plane * h + (rv_i64)y * sh) * w + (rv_i64)x * sw;
        A acc = MAX ? rv_type<T>::to_acc(src[0]) : (A)0;
        for (int r = 0; r < kh; ++r) {
            for (int c = 0; c < kw; ++c) {
                const A v = rv_type<T>::to_acc(src[(rv_i64)r * w + c]);
                // NaN propagates through max, as in PyTorch.
                if (MAX) acc = (v > acc || v != v) ? v : acc;
                else acc += v;
            }
        }
        out[i] = rv_type<T>::from_acc(MAX ? acc : acc / (A)(kh * kw));
    }
}

#define RV_EXPORT_COPY_STRIDED(NAME, T)                                                                            \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_strided src_view, const T* in, T* out) {                \
        rv_copy_strided<T>(numel, src_view, in, out);                                                      \
    }
#define RV_EXPORT_COPY2D(NAME, T)                                                                                  \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 rows, rv_i64 cols, rv_i64 src_stride, rv_i64 dst_stride,          \
                                  const T* src, T* dst) {                                                  \
        rv_copy2d<T>(rows, cols, src_stride, dst_stride, src, dst);                                        \
    }
#define RV_EXPORT_TRANSPOSE2D(NAME, T)                                                                             \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 batch, rv_i32 rows, rv_i32 cols, const T* in, T* out) {           \
        rv_transpose2d<T>(batch, rows, cols, in, out);                                                     \
    }
#define RV_EXPORT_PAD2D(NAME, MODE, T)                                                                             \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 pad_top, rv_i32 pad_left,      \
                                  rv_i32 oh, rv_i32 ow, const T* in, T* out) {                             \
        rv_pad2d<T, MODE>(planes, h, w, pad_top, pad_left, oh, ow, in, out);                               \
    }
#define RV_EXPORT_UPSAMPLE_NEAREST2D(NAME, T)                                                                      \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 oh, rv_i32 ow, const T* in,    \
                                  T* out) {                                                                \
        rv_upsample_nearest2d<T>(planes, h, w, oh, ow, in, out);                                           \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_COPY_STRIDED(copy_strided_b8, rv_u8)
RV_EXPORT_COPY_STRIDED(copy_strided_b16, rv_u16)
RV_EXPORT_COPY_STRIDED(copy_strided_b32, rv_u32)
RV_EXPORT_COPY_STRIDED(copy_strided_b64, rv_u64)
RV_EXPORT_COPY2D(copy2d_b8, rv_u8)
RV_EXPORT_COPY2D(copy2d_b16, rv_u16)
RV_EXPORT_COPY2D(copy2d_b32, rv_u32)
RV_EXPORT_COPY2D(copy2d_b64, rv_u64)
RV_EXPORT_TRANSPOSE2D(transpose2d_b8, rv_u8)
RV_EXPORT_TRANSPOSE2D(transpose2d_b16, rv_u16)
RV_EXPORT_TRANSPOSE2D(transpose2d_b32, rv_u32)
RV_EXPORT_TRANSPOSE2D(transpose2d_b64, rv_u64)
RV_EXPORT_PAD2D(pad2d_zero_b8, RV_PAD_ZERO, rv_u8)
RV_EXPORT_PAD2D(pad2d_zero_b16, RV_PAD_ZERO, rv_u16)
RV_EXPORT_PAD2D(pad2d_zero_b32, RV_PAD_ZERO, rv_u32)
RV_EXPORT_PAD2D(pad2d_zero_b64, RV_PAD_ZERO, rv_u64)
RV_EXPORT_PAD2D(pad2d_reflect_b8, RV_PAD_REFLECT, rv_u8)
RV_EXPORT_PAD2D(pad2d_reflect_b16, RV_PAD_REFLECT, rv_u16)
RV_EXPORT_PAD2D(pad2d_reflect_b32, RV_PAD_REFLECT, rv_u32)
RV_EXPORT_PAD2D(pad2d_reflect_b64, RV_PAD_REFLECT, rv_u64)
RV_EXPORT_PAD2D(pad2d_replicate_b8, RV_PAD_REPLICATE, rv_u8)
RV_EXPORT_PAD2D(pad2d_replicate_b16, RV_PAD_REPLICATE, rv_u16)
RV_EXPORT_PAD2D(pad2d_replicate_b32, RV_PAD_REPLICATE, rv_u32)
RV_EXPORT_PAD2D(pad2d_replicate_b64, RV_PAD_REPLICATE, rv_u64)
#define RV_EXPORT_POOL2D(NAME, MAX, T)                                                                             \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 oh, rv_i32 ow, rv_i32 kh, rv_i32 kw,   \
                                  rv_i32 sh, rv_i32 sw, const T* in, T* out) {                                     \
        rv_pool2d<T, MAX>(planes, h, w, oh, ow, kh, kw, sh, sw, in, out);                                          \
    }

RV_EXPORT_POOL2D(pool2d_max_f32, true, float)
RV_EXPORT_POOL2D(pool2d_max_f16, true, rv_half)
RV_EXPORT_POOL2D(pool2d_max_bf16, true, rv_bf16)
RV_EXPORT_POOL2D(pool2d_max_f64, true, double)
RV_EXPORT_POOL2D(pool2d_avg_f32, false, float)
RV_EXPORT_POOL2D(pool2d_avg_f16, false, rv_half)
RV_EXPORT_POOL2D(pool2d_avg_bf16, false, rv_bf16)
RV_EXPORT_POOL2D(pool2d_avg_f64, false, double)

RV_EXPORT_UPSAMPLE_NEAREST2D(upsample_nearest2d_b8, rv_u8)
RV_EXPORT_UPSAMPLE_NEAREST2D(upsample_nearest2d_b16, rv_u16)
RV_EXPORT_UPSAMPLE_NEAREST2D(upsample_nearest2d_b32, rv_u32)
RV_EXPORT_UPSAMPLE_NEAREST2D(upsample_nearest2d_b64, rv_u64)
