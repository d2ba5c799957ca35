// Normalisation: group_norm (optionally fused with silu), layer_norm and rms_norm.
// Statistics are always f32 (Welford/Chan, so 16M-element groups keep their precision),
// whatever the storage dtype; f64 tensors are normalised with f32 statistics too.
//
// group_norm runs as two launches over the same grid, so that a 1-image, 32-group
// problem still fills the GPU: every group is split into `chunks` contiguous slices.
// group_norm_stats_<dtype>
//   (rv_i32 n, rv_i32 c, rv_i64 hw, rv_i32 groups, rv_i32 chunks, const T* in, float* partial)
//   in [n, c, hw] contiguous (NCHW with hw = H*W); c % groups == 0.
//   partial: workspace of n*groups*chunks*3 f32 (count, mean, M2 per slice).
// group_norm_apply_<dtype>
//   (rv_i32 n, rv_i32 c, rv_i64 hw, rv_i32 groups, rv_i32 chunks, const float* partial,
//    double eps, const T* gamma, const T* beta, const T* in, T* out, rv_i32 fuse_silu)
//   out = (in - mean) / sqrt(var + eps) * gamma[ch] + beta[ch] (biased variance, as
//   PyTorch), then silu if fuse_silu != 0. gamma and beta may be null (no affine).
//   Both launches: grid = (chunks, groups, n) with n <= 65535, blockDim.x a multiple of
//   warpSize, <= 256 (256 recommended). Pick chunks so that chunks*groups*n is a few
//   times the CU count and each slice still has thousands of elements.
// layer_norm_<dtype>
//   (rv_i64 rows, rv_i64 cols, double eps, const T* gamma, const T* beta, const T* in, T* out)
//   Normalises each row of [rows, cols] over cols; gamma/beta [cols] may be null.
// rms_norm_<dtype>   same arguments; out = in / sqrt(mean(in^2) + eps) * gamma (beta, if
//   given, is added).
//   Both: one block per row (grid-stride over rows), blockDim.x a multiple of warpSize, <= 256.
#include "prelude.h"

// The statistics of N consecutive values, as one Welford state (a batch of the merge).
template <typename T, int N> RV_DEVICE rv_welford rv_welford_of(const rv_vec<T, N>& x) {
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < N; ++j) sum += rv_to_f32(x.e[j]);
    const float mean = sum * (1.0f / N);
    float m2 = 0.0f;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        const float d = rv_to_f32(x.e[j]) - mean;
        m2 += d * d;
    }
    rv_welford w = {(float)N, mean, m2};
    return w;
}

template <typename T>
__device__ void rv_group_norm_stats(rv_i32 n, rv_i32 c, rv_i64 hw, rv_i32 groups, rv_i32 chunks,
                                    const T* __restrict__ in, float* __restrict__ partial) {
    __shared__ rv_welford scratch[RV_MAX_WARPS];
    const int chunk = blockIdx.x, g = blockIdx.y, img = blockIdx.z;
    if (img >= n) return;
    const rv_i64 group_len = (rv_i64)(c / groups) * hw;
    const T* x = in + ((rv_i64)img * groups + g) * group_len;
    rv_welford s = {0.0f, 0.0f, 0.0f};
    constexpr int N = 16 / sizeof(T);
    if (group_len % N == 0 && rv_aligned(in, 16)) {
        // 16-byte vectors, one Welford merge (one division) per vector instead of per value:
        // the per-value division made this pass compute-bound.
        const rv_i64 nv = group_len / N;
        const rv_i64 per = (nv + chunks - 1) / chunks;
        const rv_i64 begin = chunk * per, end = begin + per < nv ? begin + per : nv;
        const rv_vec<T, N>* xv = (const rv_vec<T, N>*)x;
        for (rv_i64 v = begin + threadIdx.x; v < end; v += blockDim.x) s = rv_welford_merge(s, rv_welford_of<T, N>(xv[v]));
    } else {
        const rv_i64 per = (group_len + chunks - 1) / chunks;
        const rv_i64 begin = chunk * per;
        const rv_i64 end = begin + per < group_len ? begin + per : group_len;
        for (rv_i64 j = begin + threadIdx.x; j < end; j += blockDim.x) s = rv_welford_push(s, rv_to_f32(x[j]));
    }
    s = rv_welford_block(s, scratch);
    if (threadIdx.x == 0) {
        float* p = partial + (((rv_i64)img * groups + g) * chunks + chunk) * 3;
        p[0] = s.n;
        p[1] = s.mean;
        p[2] = s.m2;
    }
}

template <typename T>
__device__ void rv_group_norm_apply(rv_i32 n, rv_i32 c, rv_i64 hw, rv_i32 groups, rv_i32 chunks,
                                    const float* __restrict__ partial, double eps, const T* __restrict__ gamma,
                                    const T* __restrict__ beta, const T* __restrict__ in, T* __restrict__ out,
                                    rv_i32 fuse_silu) {
    __shared__ rv_welford scratch[RV_MAX_WARPS];
    const int chunk = blockIdx.x, g = blockIdx.y, img = blockIdx.z;
    if (img >= n) return;
    const int cg = c / groups;
    // The block merges the slice statistics together (a slice per thread, then the block
    // reduction). When every thread merged all of them, a group of 256 slices cost each
    // thread 256 divisions: group_norm_apply ran at a fifth of the copy rate.
    const float* p = partial + ((rv_i64)img * groups + g) * chunks * 3;
    rv_welford s = {0.0f, 0.0f, 0.0f};
    for (int k = threadIdx.x; k < chunks; k += blockDim.x) {
        rv_welford o = {p[3 * k], p[3 * k + 1], p[3 * k + 2]};
        s = rv_welford_merge(s, o);
    }
    s = rv_welford_block(s, scratch);
    const float var = s.n > 0.0f ? s.m2 / s.n : 0.0f;
    const float mean = s.mean, rstd = rv_rsqrt(var + (float)eps);
    const rv_i64 group_len = (rv_i64)cg * hw;
    const rv_i64 base = ((rv_i64)img * groups + g) * group_len;
    constexpr int N = 16 / sizeof(T);
    if (hw % N == 0 && rv_aligned(in, 16) && rv_aligned(out, 16)) {
        // 16-byte vectors; hw is a multiple of N, so a vector lies in one channel: one
        // channel lookup and one affine pair per vector.
        typedef rv_vec<T, N> V;
        const rv_i64 nv = group_len / N;
        const rv_i64 per = (nv + chunks - 1) / chunks;
        const rv_i64 begin = chunk * per, end = begin + per < nv ? begin + per : nv;
        const V* xv = (const V*)(in + base);
        V* yv = (V*)(out + base);
        const bool small = group_len < 0x7fffffffll;
        for (rv_i64 v = begin + threadIdx.x; v < end; v += blockDim.x) {
            const rv_i64 e = v * N;
            const int ch = g * cg + (int)(small ? (rv_i64)((unsigned)e / (unsigned)hw) : e / hw);
            const float a = rstd * (gamma ? rv_to_f32(gamma[ch]) : 1.0f);
            const float b = (beta ? rv_to_f32(beta[ch]) : 0.0f) - mean * a;
            V x = xv[v];
#pragma unroll
            for (int k = 0; k < N; ++k) {
                float f = rv_fma(rv_to_f32(x.e[k]), a, b);
                if (fuse_silu) f *= rv_sigmoid(f);
                x.e[k] = rv_convert<T>::from(f);
            }
            yv[v] = x;
        }
        return;
    }
    const rv_i64 per = (group_len + chunks - 1) / chunks;
    const rv_i64 begin = chunk * per;
    const rv_i64 end = begin + per < group_len ? begin + per : group_len;
    // Channel of element j, tracked incrementally: one division per thread, not per element.
    rv_i64 j = begin + threadIdx.x;
    rv_i64 cc = j / hw, rem = j - cc * hw;
    for (; j < end; j += blockDim.x) {
        const int ch = g * cg + (int)cc;
        float v = (rv_to_f32(in[base + j]) - mean) * rstd;
        if (gamma) v *= rv_to_f32(gamma[ch]);
        if (beta) v += rv_to_f32(beta[ch]);
        if (fuse_silu) v *= rv_sigmoid(v);
        out[base + j] = rv_convert<T>::from(v);
        for (rem += blockDim.x; rem >= hw; rem -= hw) ++cc;
    }
}

template <typename T, bool RMS>
__device__ void rv_row_norm(rv_i64 rows, rv_i64 cols, double eps, const T* __restrict__ gamma,
                            const T* __restrict__ beta, const T* __restrict__ in, T* __restrict__ out) {
    __shared__ rv_welford scratch[RV_MAX_WARPS];
    __shared__ float fscratch[RV_MAX_WARPS];
    for (rv_i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* x = in + row * cols;
        T* y = out + row * cols;
        float mean = 0.0f, rstd;
        if (RMS) {
            float ss = 0.0f;
            for (rv_i64 j = threadIdx.x; j < cols; j += blockDim.x) {
                const float v = rv_to_f32(x[j]);
                ss += v * v;
            }
            ss = rv_block_reduce<rv_op_sum>(ss, fscratch);
            rstd = rv_rsqrt(ss / (float)cols + (float)eps);
        } else {
            rv_welford s = {0.0f, 0.0f, 0.0f};
            for (rv_i64 j = threadIdx.x; j < cols; j += blockDim.x) s = rv_welford_push(s, rv_to_f32(x[j]));
            s = rv_welford_block(s, scratch);
            mean = s.mean;
            rstd = rv_rsqrt((s.n > 0.0f ? s.m2 / s.n : 0.0f) + (float)eps);
        }
        for (rv_i64 j = threadIdx.x; j < cols; j += blockDim.x) {
            float v = (rv_to_f32(x[j]) - mean) * rstd;
            if (gamma) v *= rv_to_f32(gamma[j]);
            if (beta) v += rv_to_f32(beta[j]);
            y[j] = rv_convert<T>::from(v);
        }
    }
}

#define RV_EXPORT_GROUP_NORM_STATS(NAME, T)                                                                        \
    RV_KERNEL void RV_BOUNDS NAME(rv_i32 n, rv_i32 c, rv_i64 hw, rv_i32 groups, rv_i32 chunks, const T* in, \
                                  float* partial) {                                                        \
        rv_group_norm_stats<T>(n, c, hw, groups, chunks, in, partial);                                     \
    }
#define RV_EXPORT_GROUP_NORM_APPLY(NAME, T)                                                                        \
    RV_KERNEL void RV_BOUNDS NAME(rv_i32 n, rv_i32 c, rv_i64 hw, rv_i32 groups, rv_i32 chunks,             \
                                  const float* partial, double eps, const T* gamma, const T* beta,         \
                                  const T* in, T* out, rv_i32 fuse_silu) {                                 \
        rv_group_norm_apply<T>(n, c, hw, groups, chunks, partial, eps, gamma, beta, in, out, fuse_silu);   \
    }
#define RV_EXPORT_ROW_NORM(NAME, RMS, T)                                                                           \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 rows, rv_i64 cols, double eps, const T* gamma, const T* beta,     \
                                  const T* in, T* out) {                                                   \
        rv_row_norm<T, RMS>(rows, cols, eps, gamma, beta, in, out);                                        \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_GROUP_NORM_STATS(group_norm_stats_f32, float)
RV_EXPORT_GROUP_NORM_STATS(group_norm_stats_f16, rv_half)
RV_EXPORT_GROUP_NORM_STATS(group_norm_stats_bf16, rv_bf16)
RV_EXPORT_GROUP_NORM_STATS(group_norm_stats_f64, double)
RV_EXPORT_GROUP_NORM_APPLY(group_norm_apply_f32, float)
RV_EXPORT_GROUP_NORM_APPLY(group_norm_apply_f16, rv_half)
RV_EXPORT_GROUP_NORM_APPLY(group_norm_apply_bf16, rv_bf16)
RV_EXPORT_GROUP_NORM_APPLY(group_norm_apply_f64, double)
RV_EXPORT_ROW_NORM(layer_norm_f32, false, float)
RV_EXPORT_ROW_NORM(layer_norm_f16, false, rv_half)
RV_EXPORT_ROW_NORM(layer_norm_bf16, false, rv_bf16)
RV_EXPORT_ROW_NORM(layer_norm_f64, false, double)
RV_EXPORT_ROW_NORM(rms_norm_f32, true, float)
RV_EXPORT_ROW_NORM(rms_norm_f16, true, rv_half)
RV_EXPORT_ROW_NORM(rms_norm_bf16, true, rv_bf16)
RV_EXPORT_ROW_NORM(rms_norm_f64, true, double)
