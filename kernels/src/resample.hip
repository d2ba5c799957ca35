// Resampling with candle's semantics: nearest-neighbour 1-D and bilinear 2-D.
//
// Entry points  upsample_nearest1d_<bits>, bits in b8 b16 b32 b64
//   (rv_i64 planes, rv_i32 l, rv_i32 ol, double scale, const T* in, T* out)
//   in [planes, l] and out [planes, ol] contiguous; out[p][x] = in[p][min(l - 1,
//   floor(x * scale))] with scale = l / ol computed by the host in f64, the index in f64
//   as candle's CPU backend computes it (so the two pick the same source element).
// Entry points  upsample_bilinear2d_<dtype>, dtype in f32 f16 bf16 f64
//   (rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 oh, rv_i32 ow, double scale_h,
//    double scale_w, rv_i32 align_corners, const T* in, T* out)
//   in [planes, h, w] and out [planes, oh, ow] contiguous. PyTorch's (and candle's)
//   source coordinate: align_corners: y * scale_h with scale_h = (h - 1) / (oh - 1) (0 when
//   oh == 1); otherwise (y + 0.5) * scale_h - 0.5 with scale_h = h / oh, clamped at 0. Then
//   y0 = floor, y1 = min(y0 + 1, h - 1), weight = frac; the same along x. Coordinates in
//   f64, the blend in f32 (f64 for f64).
// Launch: 1-D, blockDim.x <= 256, any gridDim.x (grid-stride).
#include "prelude.h"

template <typename T>
__device__ void rv_upsample_nearest1d(rv_i64 planes, int l, int ol, double scale, const T* __restrict__ in,
                                      T* __restrict__ out) {
    const rv_i64 numel = planes * ol;
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        const rv_i64 p = i / ol;
        const int x = (int)(i - p * ol);
        int sx = (int)((double)x * scale);
        if (sx > l - 1) sx = l - 1;
        out[i] = in[p * l + sx];
    }
}

// Source index pair and weight along one axis.
struct rv_rs_tap {
    int i0, i1;
    double w;
};
RV_DEVICE rv_rs_tap rv_rs_coord(int o, int n, double scale, bool align_corners) {
    double s = align_corners ? scale * (double)o : scale * ((double)o + 0.5) - 0.5;
    if (s < 0.0) s = 0.0;
    rv_rs_tap t;
    t.i0 = (int)floor(s);
    if (t.i0 > n - 1) t.i0 = n - 1;
    t.i1 = t.i0 + 1 < n ? t.i0 + 1 : n - 1;
    double w = s - (double)t.i0;
    t.w = w < 0.0 ? 0.0 : (w > 1.0 ? 1.0 : w);
    return t;
}

template <typename T>
__device__ void rv_upsample_bilinear2d(rv_i64 planes, int h, int w, int oh, int ow, double scale_h, double scale_w,
                                       int align_corners, const T* __restrict__ in, T* __restrict__ out) {
    typedef typename rv_type<T>::acc A;
    const rv_i64 plane_out = (rv_i64)oh * ow;
    const rv_i64 numel = planes * plane_out;
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        const rv_i64 p = i / plane_out;
        const int rem = (int)(i - p * plane_out);
        const int y = rem / ow, x = rem - (rem / ow) * ow;
        const rv_rs_tap ty = rv_rs_coord(y, h, scale_h, align_corners != 0);
        const rv_rs_tap tx = rv_rs_coord(x, w, scale_w, align_corners != 0);
        const T* src = in + p * h * w;
        const A v00 = rv_type<T>::to_acc(src[ty.i0 * w + tx.i0]);
        const A v01 = rv_type<T>::to_acc(src[ty.i0 * w + tx.i1]);
        const A v10 = rv_type<T>::to_acc(src[ty.i1 * w + tx.i0]);
        const A v11 = rv_type<T>::to_acc(src[ty.i1 * w + tx.i1]);
        const A wx = (A)tx.w, wy = (A)ty.w;
        const A top = v00 * (A(1) - wx) + v01 * wx;
        const A bottom = v10 * (A(1) - wx) + v11 * wx;
        out[i] = rv_type<T>::from_acc(top * (A(1) - wy) + bottom * wy);
    }
}

#define RV_EXPORT_UPSAMPLE_NEAREST1D(NAME, T)                                                                      \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 planes, rv_i32 l, rv_i32 ol, double scale, const T* in, T* out) { \
        rv_upsample_nearest1d<T>(planes, l, ol, scale, in, out);                                           \
    }
#define RV_EXPORT_UPSAMPLE_BILINEAR2D(NAME, T)                                                                     \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 planes, rv_i32 h, rv_i32 w, rv_i32 oh, rv_i32 ow, double scale_h, \
                                  double scale_w, rv_i32 align_corners, const T* in, T* out) {             \
        rv_upsample_bilinear2d<T>(planes, h, w, oh, ow, scale_h, scale_w, align_corners, in, out);         \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_UPSAMPLE_NEAREST1D(upsample_nearest1d_b8, rv_u8)
RV_EXPORT_UPSAMPLE_NEAREST1D(upsample_nearest1d_b16, rv_u16)
RV_EXPORT_UPSAMPLE_NEAREST1D(upsample_nearest1d_b32, rv_u32)
RV_EXPORT_UPSAMPLE_NEAREST1D(upsample_nearest1d_b64, rv_u64)
RV_EXPORT_UPSAMPLE_BILINEAR2D(upsample_bilinear2d_f32, float)
RV_EXPORT_UPSAMPLE_BILINEAR2D(upsample_bilinear2d_f16, rv_half)
RV_EXPORT_UPSAMPLE_BILINEAR2D(upsample_bilinear2d_bf16, rv_bf16)
RV_EXPORT_UPSAMPLE_BILINEAR2D(upsample_bilinear2d_f64, double)
