// Implicit-GEMM convolution, forward and transposed: shared-memory (LDS) tiled, plain FMA
// arithmetic in f32 whatever the storage dtype (the matrix-core versions are separate).
// No im2col buffer: the A operand is gathered from the NCHW input while a tile is loaded.
//
// GEMM view, per group grp (grid.z):
//   M = n*p*q            output pixels of all images, m = (img*p + y)*q + x
//   N = k/groups         output channels of the group
//   K = (c/groups)*r*s   reduction, kk = (ci*r + kr)*s + ks (OIHW order)
//   forward:     A[m][kk] = in[img][grp*cg + ci][y*stride_h - pad_h + kr*dil_h][x*stride_w - pad_w + ks*dil_w]
//                B[kk][j] = w[grp*kg + j][ci][kr][ks]                     (w: [k, c/groups, r, s])
//   transposed:  A[m][kk] = in[img][grp*cg + ci][(y + pad_h - kr*dil_h)/stride_h][...]
//                           when the division is exact and in range, else 0 (the dgrad mapping)
//                B[kk][j] = w[grp*cg + ci][j][kr][ks]                     (w: [c, k/groups, r, s])
//   out[img][grp*kg + j][y][x] = sum_kk A[m][kk] * B[kk][j] + bias[grp*kg + j]
// Any stride, dilation and groups; asymmetric padding through p, q (rv_conv2d).
//
// Entry points  igemm_fwd_<cfg>_<dtype>, igemm_tconv_<cfg>_<dtype>, dtype in f32 f16 bf16,
//   cfg = <BM>x<BN>x<BK>_<TM>x<TN>: block tile BM (pixels) x BN (channels), reduction step
//   BK, each thread computing a TM x TN sub-tile; threads per block = (BM/TM)*(BN/TN) = 256.
//     64x64x16_4x4    general purpose
//     128x128x8_8x8   large problems (c, k >= 128)
//     128x16x16_4x2   few output channels (k/groups <= 16, e.g. a 3-channel RGB head)
//   (rv_conv2d g, const T* in, const T* w, const T* bias, T* out)   bias may be null.
//   Launch: blockDim = (256, 1, 1); grid = (ceil(n*p*q / BM), ceil((k/groups) / BN), groups).
//   Requires n*p*q < 2^31 and (c/groups)*r*s < 2^31 (chunk the batch otherwise); offsets
//   into the tensors are 64-bit.
//
// Pipeline: the next tile's global loads are issued into registers before the current
// tile is multiplied out of LDS, then stored to LDS after a barrier (one LDS buffer, two
// barriers per step). The reduction index is advanced incrementally (a fixed carry step
// per tile), so the inner loop has no division; the per-pixel decomposition happens once
// per thread, with multiply-high division (rv_fastdiv).
#include "prelude.h"

template <typename T, int BM, int BN, int BK, int TM, int TN, bool TRANSPOSED>
struct rv_igemm {
    static constexpr int NT = (BM / TM) * (BN / TN);
    static constexpr int KSTEP = NT / BM;              // A loads: rows of the k tile one thread visits
    static constexpr int A_LOADS = BM * BK / NT;
    static constexpr int JSTEP = NT / BK;              // B loads: columns one thread visits
    static constexpr int B_LOADS = BN * BK / NT;
    static constexpr int BPAD = 4;                     // keeps 16-byte rows, spreads B's stores over banks
    static_assert(BM % TM == 0 && BN % TN == 0, "tile must divide into thread tiles");
    static_assert(NT % BM == 0 && (BM * BK) % NT == 0, "A tile must split evenly over the threads");
    static_assert(NT % BK == 0 && (BN * BK) % NT == 0, "B tile must split evenly over the threads");
    static_assert(A_LOADS * KSTEP == BK && B_LOADS * JSTEP == BN, "load mapping must cover the tiles");

    // Position of one A element in the reduction: input channel and kernel tap.
    struct tap {
        int ci, kr, ks;
    };

    static __device__ __forceinline__ void advance(tap& t, const tap& step, int r, int s) {
        t.ci += step.ci;
        t.kr += step.kr;
        t.ks += step.ks;
        if (t.ks >= s) { t.ks -= s; ++t.kr; }
        if (t.kr >= r) { t.kr -= r; ++t.ci; }
    }

    static __device__ __forceinline__ tap decompose(int kk, int r, int s) {
        tap t;
        const int rs = r * s;
        t.ci = kk / rs;
        const int rem = kk - t.ci * rs;
        t.kr = rem / s;
        t.ks = rem - t.kr * s;
        return t;
    }

    static __device__ void run(const rv_conv2d& g, const T* __restrict__ in, const T* __restrict__ w,
                               const T* __restrict__ bias, T* __restrict__ out) {
        __shared__ float As[BK][BM];
        __shared__ float Bs[BK][BN + BPAD];

        const int tid = threadIdx.x;
        const int grp = blockIdx.z;
        const int cg = g.c / g.groups, kg = g.k / g.groups;
        const int pq = g.p * g.q;
        const int M = g.n * pq;
        const int KD = cg * g.r * g.s;
        const int m0 = blockIdx.x * BM, j0 = blockIdx.y * BN;
        const rv_i64 hw = (rv_i64)g.h * g.w;
        const rv_fastdiv div_pq = rv_fastdiv_make((unsigned)pq), div_q = rv_fastdiv_make((unsigned)g.q);

        // ---- A loads: this thread's pixel is fixed, its reduction rows step by KSTEP.
        const int am = tid % BM, ak0 = tid / BM;
        const int m_a = m0 + am;
        const bool m_ok = m_a < M;
        int ay0, ax0;  // forward: top-left input tap; transposed: y + pad_h, x + pad_w
        rv_i64 abase;  // input offset of (img, grp*cg, 0, 0)
        {
            unsigned pix;
            const unsigned img = rv_divmod(m_ok ? (unsigned)m_a : 0u, div_pq, &pix);
            unsigned ox;
            const int oy = (int)rv_divmod(pix, div_q, &ox);
            if (TRANSPOSED) {
                ay0 = oy + g.pad_h;
                ax0 = (int)ox + g.pad_w;
            } else {
                ay0 = oy * g.stride_h - g.pad_h;
                ax0 = (int)ox * g.stride_w - g.pad_w;
            }
            abase = ((rv_i64)img * g.c + (rv_i64)grp * cg) * hw;
        }
        rv_fastdiv div_sh = {1u, 1u, 0u}, div_sw = {1u, 1u, 0u};
        if (TRANSPOSED) {
            div_sh = rv_fastdiv_make((unsigned)g.stride_h);
            div_sw = rv_fastdiv_make((unsigned)g.stride_w);
        }
        const tap kstep = decompose(BK, g.r, g.s);  // carry step per k tile
        tap at[A_LOADS];
#pragma unroll
        for (int i = 0; i < A_LOADS; ++i) at[i] = decompose(ak0 + i * KSTEP, g.r, g.s);

        // ---- B loads: this thread's reduction row is fixed, its output channels step by JSTEP.
        const int bk = tid % BK, bj0 = tid / BK;
        int b_kk = bk;       // forward: linear reduction index
        tap bt = decompose(bk, g.r, g.s);  // transposed: (ci, kr, ks) of the same index

        float ra[A_LOADS], rb[B_LOADS];

        auto load_tiles = [&](int kt) {
#pragma unroll
            for (int i = 0; i < A_LOADS; ++i) {
                const tap t = at[i];
                float v = 0.0f;
                if (m_ok && t.ci < cg) {
                    int iy, ix;
                    bool ok;
                    if (TRANSPOSED) {
                        const int ty = ay0 - t.kr * g.dil_h, tx = ax0 - t.ks * g.dil_w;
                        unsigned ry = 1, rx = 1;
                        iy = ty >= 0 ? (int)rv_divmod((unsigned)ty, div_sh, &ry) : -1;
                        ix = tx >= 0 ? (int)rv_divmod((unsigned)tx, div_sw, &rx) : -1;
                        ok = ry == 0 && rx == 0 && iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
                    } else {
                        iy = ay0 + t.kr * g.dil_h;
                        ix = ax0 + t.ks * g.dil_w;
                        ok = iy >= 0 && iy < g.h && ix >= 0 && ix < g.w;
                    }
                    if (ok) v = rv_to_f32(in[abase + (rv_i64)t.ci * hw + (rv_i64)iy * g.w + ix]);
                }
                ra[i] = v;
            }
            const bool k_ok = kt * BK + bk < KD;
#pragma unroll
            for (int i = 0; i < B_LOADS; ++i) {
                const int j = j0 + bj0 + i * JSTEP;
                float v = 0.0f;
                if (k_ok && j < kg) {
                    rv_i64 off;
                    if (TRANSPOSED)
                        off = (((rv_i64)grp * cg + bt.ci) * kg + j) * (g.r * g.s) + bt.kr * g.s + bt.ks;
                    else
                        off = ((rv_i64)grp * kg + j) * KD + b_kk;
                    v = rv_to_f32(w[off]);
                }
                rb[i] = v;
            }
            // Step the reduction positions to the next tile.
#pragma unroll
            for (int i = 0; i < A_LOADS; ++i) advance(at[i], kstep, g.r, g.s);
            if (TRANSPOSED)
                advance(bt, kstep, g.r, g.s);
            else
                b_kk += BK;
        };

        auto store_tiles = [&]() {
#pragma unroll
            for (int i = 0; i < A_LOADS; ++i) As[ak0 + i * KSTEP][am] = ra[i];
#pragma unroll
            for (int i = 0; i < B_LOADS; ++i) Bs[bk][bj0 + i * JSTEP] = rb[i];
        };

        // ---- Thread tile: TM consecutive pixels x TN consecutive channels.
        const int tm = tid % (BM / TM), tn = tid / (BM / TM);
        float acc[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

        const int ktiles = (KD + BK - 1) / BK;
        load_tiles(0);
        store_tiles();
        __syncthreads();
        for (int kt = 0; kt < ktiles; ++kt) {
            if (kt + 1 < ktiles) load_tiles(kt + 1);
            // Partly unrolled: a full unroll lets the scheduler hoist every LDS read of the
            // tile at once, which doubles the register count for no speed.
#pragma unroll 2
            for (int k = 0; k < BK; ++k) {
                float a[TM], b[TN];
#pragma unroll
                for (int i = 0; i < TM; ++i) a[i] = As[k][tm * TM + i];
#pragma unroll
                for (int j = 0; j < TN; ++j) b[j] = Bs[k][tn * TN + j];
#pragma unroll
                for (int i = 0; i < TM; ++i)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = rv_fma(a[i], b[j], acc[i][j]);
            }
            __syncthreads();
            if (kt + 1 < ktiles) {
                store_tiles();
                __syncthreads();
            }
        }

        // ---- Epilogue: bias, convert, write NCHW. Consecutive threads own consecutive
        // pixel runs, so the stores of a warp cover contiguous memory within an image.
        float bv[TN];
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int jj = j0 + tn * TN + j;
            bv[j] = (bias && jj < kg) ? rv_to_f32(bias[(rv_i64)grp * kg + jj]) : 0.0f;
        }
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            const int m = m0 + tm * TM + i;
            if (m >= M) continue;
            unsigned pix;
            const unsigned img = rv_divmod((unsigned)m, div_pq, &pix);
            const rv_i64 obase = ((rv_i64)img * g.k + (rv_i64)grp * kg) * pq + pix;
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const int jj = j0 + tn * TN + j;
                if (jj < kg) out[obase + (rv_i64)jj * pq] = rv_convert<T>::from(acc[i][j] + bv[j]);
            }
        }
    }
};

#define RV_EXPORT_IGEMM(NAME, T, BM, BN, BK, TM, TN, TRANSPOSED)                                                   \
    RV_KERNEL void __launch_bounds__((BM / TM) * (BN / TN))                                                 \
        NAME(rv_conv2d g, const T* in, const T* w, const T* bias, T* out) {                                \
        rv_igemm<T, BM, BN, BK, TM, TN, TRANSPOSED>::run(g, in, w, bias, out);                             \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_IGEMM(igemm_fwd_64x64x16_4x4_f32, float, 64, 64, 16, 4, 4, false)
RV_EXPORT_IGEMM(igemm_fwd_64x64x16_4x4_f16, rv_half, 64, 64, 16, 4, 4, false)
RV_EXPORT_IGEMM(igemm_fwd_64x64x16_4x4_bf16, rv_bf16, 64, 64, 16, 4, 4, false)
RV_EXPORT_IGEMM(igemm_fwd_128x128x8_8x8_f32, float, 128, 128, 8, 8, 8, false)
RV_EXPORT_IGEMM(igemm_fwd_128x128x8_8x8_f16, rv_half, 128, 128, 8, 8, 8, false)
RV_EXPORT_IGEMM(igemm_fwd_128x128x8_8x8_bf16, rv_bf16, 128, 128, 8, 8, 8, false)
RV_EXPORT_IGEMM(igemm_fwd_128x16x16_4x2_f32, float, 128, 16, 16, 4, 2, false)
RV_EXPORT_IGEMM(igemm_fwd_128x16x16_4x2_f16, rv_half, 128, 16, 16, 4, 2, false)
RV_EXPORT_IGEMM(igemm_fwd_128x16x16_4x2_bf16, rv_bf16, 128, 16, 16, 4, 2, false)
RV_EXPORT_IGEMM(igemm_tconv_64x64x16_4x4_f32, float, 64, 64, 16, 4, 4, true)
RV_EXPORT_IGEMM(igemm_tconv_64x64x16_4x4_f16, rv_half, 64, 64, 16, 4, 4, true)
RV_EXPORT_IGEMM(igemm_tconv_64x64x16_4x4_bf16, rv_bf16, 64, 64, 16, 4, 4, true)
RV_EXPORT_IGEMM(igemm_tconv_128x128x8_8x8_f32, float, 128, 128, 8, 8, 8, true)
RV_EXPORT_IGEMM(igemm_tconv_128x128x8_8x8_f16, rv_half, 128, 128, 8, 8, 8, true)
RV_EXPORT_IGEMM(igemm_tconv_128x128x8_8x8_bf16, rv_bf16, 128, 128, 8, 8, 8, true)
RV_EXPORT_IGEMM(igemm_tconv_128x16x16_4x2_f32, float, 128, 16, 16, 4, 2, true)
RV_EXPORT_IGEMM(igemm_tconv_128x16x16_4x2_f16, rv_half, 128, 16, 16, 4, 2, true)
RV_EXPORT_IGEMM(igemm_tconv_128x16x16_4x2_bf16, rv_bf16, 128, 16, 16, 4, 2, true)
