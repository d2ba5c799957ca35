// Convolution building blocks: im2col, col2im, and the direct convolutions (forward and
// transposed) that serve as reference and fallback for any parameters.
// All take the geometry as an rv_conv2d by value (see prelude.h; 1-D convolutions are
// 2-D with h = r = p = 1). Accumulation in f32 (f64 for f64).
//
// im2col_<bits>  (rv_conv2d g, rv_i64 pix_begin, rv_i64 pix_count, const T* in, T* col)
//   One image: in [c, h, w] (the host offsets the pointer to the image). col is
//   [c*r*s, pix_count] row-major: col[(ci*r + kr)*s + ks][j] is the input under kernel tap
//   (kr, ks) for output pixel pix_begin + j (pixels numbered y*q + x), 0 in the padding.
//   So out_image[k, pix] = W[k, :] . col[:, pix] is a plain row-major GEMM (per group: rows
//   group*(c/groups)*r*s .. of col), and chunking the pixel range bounds the workspace.
//   Launch: blockDim = (256, 1, 1), grid = (ceil(pix_count/256), min(c*r*s, 65535), 1).
//   Data movement only, so per element size like copy.hip.
// col2im_<dtype>  (rv_conv2d g, const T* col, T* img)
//   The adjoint of im2col for one image, over the whole pixel range: col [c*r*s, p*q] ->
//   img [c, h, w], img = the sum of every col entry that im2col would have read from that
//   element (a gather, so no atomics and a deterministic sum). Used for conv_transpose as
//   GEMM: col = W^T . x, then col2im with the geometry of the forward conv whose input is
//   the transposed conv's output.
//   Launch: 1-D over c*h*w, blockDim.x <= 256, any gridDim.x.
// conv2d_direct_<dtype>  (rv_conv2d g, const T* in, const T* w, const T* bias, T* out)
//   in [n, c, h, w], w [k, c/groups, r, s], bias [k] or null, out [n, k, p, q].
//   One thread per output element. Launch: 1-D over n*k*p*q, blockDim.x <= 256, any gridDim.x.
// conv_transpose2d_direct_<dtype>  (rv_conv2d g, const T* in, const T* w, const T* bias, T* out)
//   in [n, c, h, w], w [c, k/groups, r, s] (PyTorch's ConvTranspose2d layout), bias [k] or
//   null, out [n, k, p, q]; output pixel y gathers input row (y + pad_h - kr*dil_h)/stride_h
//   when it divides exactly and is in range. Launch as conv2d_direct.
// conv_epilogue_<dtype>  dtype in f32 f16 bf16
//   (rv_i64 numel, rv_i64 plane, rv_i64 channels, rv_epilogue ep, const T* bias, const T* res, T* out)
//   In place over a contiguous NCHW convolution output (plane = p*q, channels = k):
//   out[i] = (act(out[i] + bias[(i / plane) % channels]) + res[i]) * scale (prelude.h's
//   rv_epilogue; bias and res may be null): the epilogue of the algorithms whose GEMM is
//   rocBLAS's or MIOpen's, in one pass. 1-D grid-stride launch, one thread per 16 bytes.
#include "prelude.h"

template <typename T>
__device__ void rv_im2col(const rv_conv2d& g, rv_i64 pix_begin, rv_i64 pix_count, const T* __restrict__ in,
                          T* __restrict__ col) {
    const rv_i64 kdim = (rv_i64)g.c * g.r * g.s;
    const rv_i64 j = (rv_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= pix_count) return;
    const rv_i64 pix = pix_begin + j;
    const int oy = (int)(pix / g.q), ox = (int)(pix - (rv_i64)oy * g.q);
    const int y0 = oy * g.stride_h - g.pad_h, x0 = ox * g.stride_w - g.pad_w;
    const rv_i64 hw = (rv_i64)g.h * g.w;
    // kk is the same for the whole block, so its decomposition runs on the scalar unit.
    for (rv_i64 kk = blockIdx.y; kk < kdim; kk += gridDim.y) {
        const int rs = (int)(kk % ((rv_i64)g.r * g.s));
        const rv_i64 ci = kk / ((rv_i64)g.r * g.s);
        const int kr = rs / g.s, ks = rs - kr * g.s;
        const int iy = y0 + kr * g.dil_h, ix = x0 + ks * g.dil_w;
        const bool inside = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
        col[kk * pix_count + j] = inside ? in[ci * hw + (rv_i64)iy * g.w + ix] : T(0);
    }
}

template <typename T>
__device__ void rv_col2im(const rv_conv2d& g, const T* __restrict__ col, T* __restrict__ img) {
    typedef typename rv_type<T>::acc A;
    const rv_i64 numel = (rv_i64)g.c * g.h * g.w;
    const rv_i64 pq = (rv_i64)g.p * g.q;
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        const rv_i64 row = i / g.w;
        const int x = (int)(i - row * g.w);
        const rv_i64 ci = row / g.h;
        const int y = (int)(row - ci * g.h);
        A acc = A(0);
        for (int kr = 0; kr < g.r; ++kr) {
            const int ty = y + g.pad_h - kr * g.dil_h;
            if (ty < 0 || ty % g.stride_h != 0) continue;
            const int oy = ty / g.stride_h;
            if (oy >= g.p) continue;
            for (int ks = 0; ks < g.s; ++ks) {
                const int tx = x + g.pad_w - ks * g.dil_w;
                if (tx < 0 || tx % g.stride_w != 0) continue;
                const int ox = tx / g.stride_w;
                if (ox >= g.q) continue;
                acc += rv_type<T>::to_acc(col[((ci * g.r + kr) * g.s + ks) * pq + (rv_i64)oy * g.q + ox]);
            }
        }
        img[i] = rv_type<T>::from_acc(acc);
    }
}

// Linear index over [n, k, p, q] -> (n, k, y, x).
RV_DEVICE void rv_nkyx(rv_i64 i, const rv_conv2d& g, rv_i64* n, int* k, int* y, int* x) {
    rv_i64 t = i / g.q;
    *x = (int)(i - t * g.q);
    rv_i64 t2 = t / g.p;
    *y = (int)(t - t2 * g.p);
    *n = t2 / g.k;
    *k = (int)(t2 - *n * g.k);
}

template <typename T>
__device__ void rv_conv2d_direct(const rv_conv2d& g, const T* __restrict__ in, const T* __restrict__ w,
                                 const T* __restrict__ bias, T* __restrict__ out) {
    typedef typename rv_type<T>::acc A;
    const rv_i64 numel = (rv_i64)g.n * g.k * g.p * g.q;
    const int cg = g.c / g.groups, kg = g.k / g.groups;
    const rv_i64 hw = (rv_i64)g.h * g.w;
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        rv_i64 n;
        int k, y, x;
        rv_nkyx(i, g, &n, &k, &y, &x);
        const int grp = k / kg;
        const int y0 = y * g.stride_h - g.pad_h, x0 = x * g.stride_w - g.pad_w;
        const T* src = in + (n * g.c + (rv_i64)grp * cg) * hw;
        const T* wk = w + (rv_i64)k * cg * g.r * g.s;
        A acc = bias ? rv_type<T>::to_acc(bias[k]) : A(0);
        for (int ci = 0; ci < cg; ++ci) {
            for (int kr = 0; kr < g.r; ++kr) {
                const int iy = y0 + kr * g.dil_h;
                if (iy < 0 || iy >= g.h) continue;
                for (int ks = 0; ks < g.s; ++ks) {
                    const int ix = x0 + ks * g.dil_w;
                    if (ix < 0 || ix >= g.w) continue;
                    acc = rv_fma(rv_type<T>::to_acc(src[ci * hw + (rv_i64)iy * g.w + ix]),
                                 rv_type<T>::to_acc(wk[(ci * g.r + kr) * g.s + ks]), acc);
                }
            }
        }
        out[i] = rv_type<T>::from_acc(acc);
    }
}

template <typename T>
__device__ void rv_conv_transpose2d_direct(const rv_conv2d& g, const T* __restrict__ in, const T* __restrict__ w,
                                           const T* __restrict__ bias, T* __restrict__ out) {
    typedef typename rv_type<T>::acc A;
    const rv_i64 numel = (rv_i64)g.n * g.k * g.p * g.q;
    const int cg = g.c / g.groups, kg = g.k / g.groups;
    const rv_i64 hw = (rv_i64)g.h * g.w;
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        rv_i64 n;
        int k, y, x;
        rv_nkyx(i, g, &n, &k, &y, &x);
        const int grp = k / kg, kl = k - grp * kg;
        A acc = bias ? rv_type<T>::to_acc(bias[k]) : A(0);
        for (int kr = 0; kr < g.r; ++kr) {
            const int ty = y + g.pad_h - kr * g.dil_h;
            if (ty < 0 || ty % g.stride_h != 0) continue;
            const int iy = ty / g.stride_h;
            if (iy >= g.h) continue;
            for (int ks = 0; ks < g.s; ++ks) {
                const int tx = x + g.pad_w - ks * g.dil_w;
                if (tx < 0 || tx % g.stride_w != 0) continue;
                const int ix = tx / g.stride_w;
                if (ix >= g.w) continue;
                const T* src = in + (n * g.c + (rv_i64)grp * cg) * hw + (rv_i64)iy * g.w + ix;
                const T* wt = w + (((rv_i64)grp * cg) * kg + kl) * g.r * g.s + kr * g.s + ks;
                for (int ci = 0; ci < cg; ++ci)
                    acc = rv_fma(rv_type<T>::to_acc(src[ci * hw]),
                                 rv_type<T>::to_acc(wt[(rv_i64)ci * kg * g.r * g.s]), acc);
            }
        }
        out[i] = rv_type<T>::from_acc(acc);
    }
}

template <typename T>
__device__ void rv_conv_epilogue(rv_i64 numel, rv_i64 plane, rv_i64 channels, const rv_epilogue& ep,
                                 const T* __restrict__ bias, const T* __restrict__ res, T* __restrict__ out) {
    constexpr int N = 16 / sizeof(T);
    typedef rv_vec<T, N> V;
    const bool small = rv_is_small(numel);
    rv_i64 head = 0;
    if (plane % N == 0 && rv_aligned(out, 16) && (res == nullptr || rv_aligned(res, 16))) {
        // A vector lies in one channel plane: one channel lookup per vector.
        head = numel / N;
        for (rv_i64 v = rv_global_id(); v < head; v += rv_grid_stride()) {
            const rv_i64 i = v * N;
            const rv_i64 ch = (small ? (rv_i64)((unsigned)i / (unsigned)plane) : i / plane) % channels;
            const float b = bias ? rv_to_f32(bias[ch]) : 0.0f;
            V x = ((V*)out)[v];
            V r;
            if (res) r = ((const V*)res)[v];
#pragma unroll
            for (int j = 0; j < N; ++j)
                x.e[j] = rv_convert<T>::from(rv_epilogue_apply(rv_to_f32(x.e[j]) + b, res ? rv_to_f32(r.e[j]) : 0.0f, ep));
            ((V*)out)[v] = x;
        }
        head *= N;
    }
    for (rv_i64 i = head + rv_global_id(); i < numel; i += rv_grid_stride()) {
        const float b = bias ? rv_to_f32(bias[(i / plane) % channels]) : 0.0f;
        out[i] = rv_convert<T>::from(rv_epilogue_apply(rv_to_f32(out[i]) + b, res ? rv_to_f32(res[i]) : 0.0f, ep));
    }
}

#define RV_EXPORT_CONV_EPILOGUE(NAME, T)                                                                           \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_i64 plane, rv_i64 channels, rv_epilogue ep, const T* bias,     \
                                  const T* res, T* out) {                                                          \
        rv_conv_epilogue<T>(numel, plane, channels, ep, bias, res, out);                                           \
    }
#define RV_EXPORT_IM2COL(NAME, T)                                                                                  \
    RV_KERNEL void RV_BOUNDS NAME(rv_conv2d g, rv_i64 pix_begin, rv_i64 pix_count, const T* in, T* col) {  \
        rv_im2col<T>(g, pix_begin, pix_count, in, col);                                                    \
    }
#define RV_EXPORT_COL2IM(NAME, T)                                                                                  \
    RV_KERNEL void RV_BOUNDS NAME(rv_conv2d g, const T* col, T* img) { rv_col2im<T>(g, col, img); }
#define RV_EXPORT_CONV2D_DIRECT(NAME, T)                                                                           \
    RV_KERNEL void RV_BOUNDS NAME(rv_conv2d g, const T* in, const T* w, const T* bias, T* out) {           \
        rv_conv2d_direct<T>(g, in, w, bias, out);                                                          \
    }
#define RV_EXPORT_CONV_TRANSPOSE2D_DIRECT(NAME, T)                                                                 \
    RV_KERNEL void RV_BOUNDS NAME(rv_conv2d g, const T* in, const T* w, const T* bias, T* out) {           \
        rv_conv_transpose2d_direct<T>(g, in, w, bias, out);                                                \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_IM2COL(im2col_b8, rv_u8)
RV_EXPORT_IM2COL(im2col_b16, rv_u16)
RV_EXPORT_IM2COL(im2col_b32, rv_u32)
RV_EXPORT_IM2COL(im2col_b64, rv_u64)
RV_EXPORT_COL2IM(col2im_f32, float)
RV_EXPORT_COL2IM(col2im_f16, rv_half)
RV_EXPORT_COL2IM(col2im_bf16, rv_bf16)
RV_EXPORT_COL2IM(col2im_f64, double)
RV_EXPORT_CONV2D_DIRECT(conv2d_direct_f32, float)
RV_EXPORT_CONV2D_DIRECT(conv2d_direct_f16, rv_half)
RV_EXPORT_CONV2D_DIRECT(conv2d_direct_bf16, rv_bf16)
RV_EXPORT_CONV2D_DIRECT(conv2d_direct_f64, double)
RV_EXPORT_CONV_TRANSPOSE2D_DIRECT(conv_transpose2d_direct_f32, float)
RV_EXPORT_CONV_TRANSPOSE2D_DIRECT(conv_transpose2d_direct_f16, rv_half)
RV_EXPORT_CONV_TRANSPOSE2D_DIRECT(conv_transpose2d_direct_bf16, rv_bf16)
RV_EXPORT_CONV_TRANSPOSE2D_DIRECT(conv_transpose2d_direct_f64, double)
RV_EXPORT_CONV_EPILOGUE(conv_epilogue_f32, float)
RV_EXPORT_CONV_EPILOGUE(conv_epilogue_f16, rv_half)
RV_EXPORT_CONV_EPILOGUE(conv_epilogue_bf16, rv_bf16)
