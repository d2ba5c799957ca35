// Implicit-GEMM convolution on matrix cores (f16/bf16: RDNA3/RDNA4 WMMA, CDNA MFMA, NVIDIA
// mma.sync through the MMA layer of mma.h) and on FMA units (f32, no TF32), with one set
// of iterators, one pipeline and one epilogue.
//
// Data the kernels read (prepared by the pack kernels of nhwc_pack.hip into the workspace):
//   input   NHWC band: [n][h][w][groups * cgp], channel ci of group grp at slot grp*cgp + ci,
//           slots ci >= c/groups zero. cgp (channels per group, padded) is a multiple of the
//           16-byte vector (8 for f16/bf16, 4 for f32), so every A load is one aligned 16-byte
//           access, never split over two filter taps; it is also the few-channels path: an
//           RGB input (3 channels) becomes 8 (4 for f32) slots per tap instead of a scalar
//           gather.
//   weights [k][taps_r][taps_s][cgp] (packed per phase; channel fastest, so B rows are
//           contiguous along the reduction).
// The geometry `g` is a forward convolution over the phase grid (see "Transposed" below):
//   g.n images, g.c input channels (before padding), g.h x g.w the band, g.k output channels,
//   g.r x g.s taps, g.p x g.q output grid, groups; grid row yy with tap row tr reads input row
//   yy*stride_h - pad_h + tr*dil_h (and the same for columns). pad and dil may be negative.
// GEMM per group: M = n*p*q (output pixels), N = k/groups, K = r*s*cgp, kk = (tr*s + ts)*cgp + ci.
//
// The output is written through a strided view, out + img*os_n + ch*os_c + yy*os_y + xx*os_x
// (elements), so that the same kernel writes a forward convolution's NCHW output, a band of
// output rows of it (row chunking), or one phase of a transposed convolution (every
// stride-th row and column). Epilogue (rv_epilogue, prelude.h): out = (act(acc + bias[ch]) +
// residual) * scale (residual read through the same view; null = none), converted to T.
//
// Transposed convolution ("dgrad" mapping, stride > 1 by filter phase): the host splits
// the output into stride_h * stride_w phases by residue; each phase is a forward
// convolution with stride 1 over its grid whose taps are only the filter taps that land on
// real input pixels (implicit_gemm::phases), packed into their own weight matrix. No
// multiply is spent on the zeros of a zero-stuffed input.
//
// Split-K (small M*N, long K): grid.z = groups * splits; split s reduces its range of
// k-tiles and writes f32 partial sums to partial[s][ch][m] (ch = grp*kg + n); the
// igemm_splitk_* kernel then sums the splits and applies the epilogue.
//
// Iterators (CUTLASS's "optimized" activation iterator is the model): each thread loads a
// fixed 16-byte chunk column of its fixed A rows (pixels). The pixel decomposition, the
// 64-bit base offset of (img, y0, x0) and the per-pixel padding masks (one bit per tap row
// and per tap column: 0 <= y0 + tr*dil_h < h) are computed once per thread; a k-tile step
// moves the (tap, channel) position of the chunk with additions only, no division, no
// per-element bounds arithmetic. r and s must be <= 32 (the host checks).
//
// Pipeline: LDS tiles in the MMA layer's swizzled 64-byte-row format (rv_mma_chunk): per
// stage A [BM rows][64 B] and B [BN rows][64 B]. NVIDIA: cp.async 16-byte copies straight
// to LDS (zero-fill for padding) with STAGES stages in flight, one barrier per k-tile. AMD
// (no asynchronous global->LDS copy on RDNA): two LDS stages; the next tile's loads go to
// registers before the current tile's math, and to LDS after it, one barrier per k-tile.
// Epilogue: accumulators go through LDS in slices of SW output channels ([SW][BM + 4]
// floats), so that global stores run along output pixels -- contiguous in NCHW -- four at
// a time (one 8- or 16-byte store where the view allows it).
// Entry points (registry: kernels::IGEMM_MMA_CONFIGS / IGEMM_SIMT_CONFIGS):
//   igemm_mma_<BM>x<BN>_<WM>x<WN>_<f16|bf16>     matrix cores of the compiling target
//   igemm_emu11_<cfg>_<f16|bf16>, igemm_emu12_<cfg>_<f16|bf16>   the gfx11 / gfx12 fragment
//        code with the WMMA instruction emulated by shuffles (warp 32; the GPU tier's check
//        of the RDNA layouts)
//   igemm_simt_<BM>x<BN>_<TM>x<TN>_f32            FMA, f32 accumulate, TM x TN per thread
//   Arguments: kernels/src/registry/igemm_mma.rs (and the RV_EXPORT_IGEMM_* macros below).
//   Launch: blockDim.x = WM*WN*32 (MMA; 256 or 128) or 256 (SIMT), whatever the hardware
//   wave size (on wave64 the warps pair up); grid = (ceil(n*p*q / BM), ceil((k/groups) / BN),
//   groups * splits). Needs n*p*q < 2^31.
//
// Tuning knobs (defaults are the measured choice; scripts/igemm-lab.py -D overrides them to
// compare variants in one run, docs/measurements/*-igemm-lab.md):
//   RV_IG_FRAGS    2 (NVIDIA's default): fragments double-buffered in registers across k16
//                  steps and k-tiles (rv_ig_mma::load; 3-6% on the H100 against 0, the
//                  plain schedule of rv_ig_mma::compute, which AMD and the emulations use,
//                  docs/measurements/2026-12-07-igemm-pipelined-fragments.md)
//   (Removed after measuring no gain on the H100: RV_IG_RASTER, RV_IG_TAPS_INNER (2026-12-06),
//   RV_IG_STEP, an incremental k-tile step with per-tap masks (2026-12-07).)
//   RV_IG_A_CACHE  NVIDIA A loads: 0 = cp.async.cg (L2 only), 1 = cp.async.ca (L1 too)
//   RV_IG_NV_SMEM_KIB  NVIDIA stage count from a shared-memory budget instead of the
//                  configuration's STAGES (experiments; the host must pass the bytes)
#ifndef RV_IG_A_CACHE
#define RV_IG_A_CACHE 0
#endif
#include "prelude.h"
#include "mma.h"
#ifndef RV_IG_FRAGS
#if defined(RV_MMA_HAVE_NV)
#define RV_IG_FRAGS 2
#else
#define RV_IG_FRAGS 0
#endif
#endif

// The kernel's view of its arguments.
struct rv_ig_args {
    rv_conv2d g;
    int cgp, splits;
    rv_epilogue ep;
    rv_i64 os_n, os_c, os_y, os_x;
};

// ---------------------------------------------------------------------------------------
// Epilogue arithmetic and stores.
RV_DEVICE void rv_ig_store4(float* p, float a, float b, float c, float d) {
    rv_v16 v;
    v.x = __float_as_uint(a), v.y = __float_as_uint(b), v.z = __float_as_uint(c), v.w = __float_as_uint(d);
    *(rv_v16*)p = v;
}
template <typename H> RV_DEVICE void rv_ig_store4_16(H* p, float a, float b, float c, float d) {
    rv_v8 v;
    v.x = (rv_u32)rv_bits(rv_type<H>::from_acc(a)) | ((rv_u32)rv_bits(rv_type<H>::from_acc(b)) << 16);
    v.y = (rv_u32)rv_bits(rv_type<H>::from_acc(c)) | ((rv_u32)rv_bits(rv_type<H>::from_acc(d)) << 16);
    *(rv_v8*)p = v;
}
RV_DEVICE void rv_ig_store4(rv_half* p, float a, float b, float c, float d) { rv_ig_store4_16(p, a, b, c, d); }
RV_DEVICE void rv_ig_store4(rv_bf16* p, float a, float b, float c, float d) { rv_ig_store4_16(p, a, b, c, d); }

// Writes values v[0..cnt) of output channel ch at GEMM rows m..m+cnt-1 (cnt <= 4, all < M)
// through the output view, with bias, activation and residual.
template <typename T>
RV_DEVICE void rv_ig_write(const rv_ig_args& a, rv_fastdiv div_pq, rv_fastdiv div_q, int ch, int m, int cnt, float (&v)[4],
                           const T* __restrict__ bias, const T* __restrict__ res, T* __restrict__ out) {
    const float bv = bias ? rv_to_f32(bias[ch]) : 0.0f;
    unsigned rem, xx;
    const unsigned img = rv_divmod((unsigned)m, div_pq, &rem);
    const unsigned yy = rv_divmod(rem, div_q, &xx);
    const rv_i64 off = (rv_i64)img * a.os_n + (rv_i64)ch * a.os_c + (rv_i64)yy * a.os_y + (rv_i64)xx * a.os_x;
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = rv_activate(v[e] + bv, a.ep);
    // Four pixels of one row, contiguous and aligned: one vector store.
    if (cnt == 4 && a.os_x == 1 && (int)xx + 3 < a.g.q && ((rv_u64)(out + off) & (4 * sizeof(T) - 1)) == 0) {
#pragma unroll
        for (int e = 0; e < 4; ++e) v[e] = (v[e] + (res ? rv_to_f32(res[off + e]) : 0.0f)) * a.ep.scale;
        rv_ig_store4(out + off, v[0], v[1], v[2], v[3]);
        return;
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) {
        if (e >= cnt) continue;
        rv_i64 o = off;
        if (e > 0) {
            unsigned r2, x2;
            const unsigned i2 = rv_divmod((unsigned)(m + e), div_pq, &r2);
            const unsigned y2 = rv_divmod(r2, div_q, &x2);
            o = (rv_i64)i2 * a.os_n + (rv_i64)ch * a.os_c + (rv_i64)y2 * a.os_y + (rv_i64)x2 * a.os_x;
        }
        const float x = (v[e] + (res ? rv_to_f32(res[o]) : 0.0f)) * a.ep.scale;
        out[o] = rv_convert<T>::from(x);
    }
}

// ---------------------------------------------------------------------------------------
// Math policies: what a block computes from one stage of LDS tiles, and how its
// accumulators reach the LDS slice of the epilogue.

// Whether the MMA layer has the shared-address fragment loads of RV_IG_FRAGS 2 (NVIDIA).
template <class P, class = void> struct rv_ig_has_ldsm { static constexpr bool value = false; };
template <class P> struct rv_ig_has_ldsm<P, decltype(void(P::frag_a(0, 0, 0)))> { static constexpr bool value = true; };

// Matrix cores: warps (of P::WARP lanes) in a PWM x PWN grid, each a WTM x WTN tile of
// 16x16 atoms. The configuration counts 32-lane warps (WM x WN); on wave64 two of them
// make one wave, so the grid halves along M (or N when WM == 1) and each wave's tile
// doubles -- the same work per lane and the same block size on every target.
template <typename T, int BM, int BN, int WM, int WN, class P>
struct rv_ig_mma {
    static constexpr int NT = WM * WN * 32;
    static constexpr bool W64 = P::WARP == 64;
    static constexpr int PWM = (W64 && WM >= 2) ? WM / 2 : WM;
    static constexpr int PWN = (W64 && WM < 2) ? WN / 2 : WN;
    static constexpr int WTM = BM / PWM, WTN = BN / PWN;
    static constexpr int AM = WTM / 16, AN = WTN / 16;
    static_assert(PWM * PWN * P::WARP == NT, "warp grid must cover the block");
    static_assert(AM * 16 * PWM == BM && AN * 16 * PWN == BN && AM > 0 && AN > 0, "warp tiles must be whole 16x16 atoms");

    float acc[AM][AN][P::C_REGS];
    int wm, wn, lane;

    __device__ __forceinline__ void init(int tid) {
        const int warp = tid / P::WARP;
        lane = tid % P::WARP;
        wm = warp % PWM;
        wn = warp / PWM;
#pragma unroll
        for (int i = 0; i < AM; ++i)
#pragma unroll
            for (int j = 0; j < AN; ++j)
#pragma unroll
                for (int r = 0; r < P::C_REGS; ++r) acc[i][j][r] = 0.0f;
    }

    // Two k16 steps per 64-byte tile row: all A fragments of the warp tile live, B loaded
    // one atom column at a time (fewest registers). (A schedule that loaded both steps'
    // fragments before the first MMA, RV_IG_FRAGS 1, measured no gain on the H100,
    // 2026-12-06, and was removed; NVIDIA pipelines its fragments instead, see load.)
    __device__ __forceinline__ void compute(const rv_v16* As, const rv_v16* Bs) {
        // Fragment rows start at multiples of 16, which the swizzle of rv_mma_chunk leaves
        // alone: a fragment is the lane's fragment of rows 0-15 (loop-invariant) moved by
        // 64 bytes per row, an immediate offset in the load instead of its address
        // recomputed every k-tile.
        As += wm * WTM * 4;
        Bs += wn * WTN * 4;
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
            rv_u32 a[AM][P::A_REGS];
#pragma unroll
            for (int i = 0; i < AM; ++i) P::load_a(a[i], As + i * 64, 0, ks, lane);
#pragma unroll
            for (int j = 0; j < AN; ++j) {
                rv_u32 b[P::B_REGS];
                P::load_b(b, Bs + j * 64, 0, ks, lane);
#pragma unroll
                for (int i = 0; i < AM; ++i) P::mma(acc[i][j], a[i], b);
            }
        }
    }

    // RV_IG_FRAGS 2 (NVIDIA): one k16 step's fragments double-buffered in registers (buf is
    // a constant where inlined), so the pipeline loads step ks+1, or across the barrier the
    // next k-tile's step 0, under the MMAs of step ks (CUTLASS's warp-level pipelining).
    // fa_at/fb_at: bytes from a stage's start to this lane's row of the warp's first
    // fragment per step; every other fragment is an immediate offset from it.
    static constexpr bool PIPELINED = rv_ig_has_ldsm<P>::value;
#if RV_IG_FRAGS == 2 && defined(RV_MMA_HAVE_NV)
    rv_u32 fa[2][AM][P::A_REGS], fb[2][AN][P::B_REGS];
    unsigned fa_at[2], fb_at[2];
    __device__ __forceinline__ void init_frags() {
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
            fa_at[ks] = (unsigned)(wm * WTM * 4 + P::frag_a(0, ks, lane)) * 16u;
            fb_at[ks] = (unsigned)(BM * 4 + wn * WTN * 4 + P::frag_b(0, ks, lane)) * 16u;
        }
    }
    __device__ __forceinline__ void load(int buf, unsigned stage_at, int ks) {
#pragma unroll
        for (int i = 0; i < AM; ++i) P::load_at(fa[buf][i], stage_at + fa_at[ks] + i * 1024u);
#pragma unroll
        for (int j = 0; j < AN; ++j) P::load_at(fb[buf][j], stage_at + fb_at[ks] + j * 1024u);
    }
    __device__ __forceinline__ void mma(int buf) {
#pragma unroll
        for (int j = 0; j < AN; ++j)
#pragma unroll
            for (int i = 0; i < AM; ++i) P::mma(acc[i][j], fa[buf][i], fb[buf][j]);
    }
#endif  // RV_IG_FRAGS == 2 && RV_MMA_HAVE_NV

    // Accumulators of output channels [slice*SW, slice*SW + SW) into cs[n - slice*SW][m].
    template <int SW, int CLD>
    __device__ __forceinline__ void stage(float* cs, int slice) const {
#pragma unroll
        for (int j = 0; j < AN; ++j) {
            const int n0 = wn * WTN + j * 16;
            if (n0 / SW != slice) continue;
#pragma unroll
            for (int i = 0; i < AM; ++i)
#pragma unroll
                for (int r = 0; r < P::C_REGS; ++r) {
                    int m, n;
                    P::coord(r, lane, m, n);
                    cs[(n0 - slice * SW + n) * CLD + wm * WTM + i * 16 + m] = acc[i][j][r];
                }
        }
    }
};

// FMA (f32): each of the 256 threads owns TM rows (pixels tm + i*BM/TM) and TN columns
// (channels tn + j*BN/TN) -- strided, so that the 8 threads of a 16-byte LDS access phase
// read 8 consecutive tile rows, which rv_mma_chunk places in 8 different bank groups.
// A 16-byte chunk holds 4 consecutive k of f32.
template <int BM, int BN, int TM, int TN>
struct rv_ig_simt {
    static constexpr int NT = 256;
    static constexpr int RM = BM / TM, RN = BN / TN;
    static_assert(RM * RN == NT, "thread tiles must cover the block with 256 threads");
    static constexpr bool PIPELINED = false;  // no fragment registers to double-buffer
    float acc[TM][TN];
    int tm, tn;

    __device__ __forceinline__ void init(int tid) {
        tm = tid % RM;
        tn = tid / RM;
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    }

    // The chunk loop stays rolled: unrolled, the scheduler hoists all four chunks' LDS reads
    // and the 8x8 tile runs out of registers on RDNA (spills); one chunk is 4*TM*TN FMAs.
    __device__ __forceinline__ void compute(const rv_v16* As, const rv_v16* Bs) {
#pragma unroll 1
        for (int q = 0; q < 4; ++q) {
            float b[TN][4];
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const rv_v16 v = Bs[rv_mma_chunk(tn + j * RN, q)];
                b[j][0] = __uint_as_float(v.x), b[j][1] = __uint_as_float(v.y);
                b[j][2] = __uint_as_float(v.z), b[j][3] = __uint_as_float(v.w);
            }
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const rv_v16 v = As[rv_mma_chunk(tm + i * RM, q)];
                const float a[4] = {__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w)};
#pragma unroll
                for (int e = 0; e < 4; ++e)
#pragma unroll
                    for (int j = 0; j < TN; ++j) acc[i][j] = rv_fma(a[e], b[j][e], acc[i][j]);
            }
        }
    }

    template <int SW, int CLD>
    __device__ __forceinline__ void stage(float* cs, int slice) const {
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int n = tn + j * RN;
            if (n / SW != slice) continue;
#pragma unroll
            for (int i = 0; i < TM; ++i) cs[(n - slice * SW) * CLD + tm + i * RM] = acc[i][j];
        }
    }
};

// ---------------------------------------------------------------------------------------
// The A (activation) and B (weight) iterators of one thread: the chunk column tid%4 of A
// rows (pixels) tid/4 + i*NT/4 and of B rows (output channels) likewise. Per A row: a byte
// pointer to (img, y0, x0, grp*cgp) in the NHWC band and the padding masks (bit tr of mh:
// 0 <= y0 + tr*dil_h < h; bit ts of mw for columns); per thread: the (tap row, tap column,
// channel) position of its chunk, moved by additions each k-tile, and the one byte offset
// of that position, which every A row of the thread shares (the rows differ only in their
// base). Rows i of a thread sit NT/4 tile rows apart, which the swizzle of rv_mma_chunk
// maps to the same chunk column, so one LDS offset per thread serves every row of A and
// B. (Each k-tile's address arithmetic is then one 64-bit add per row: the issue-bound
// loop of the first version spent ~380 of its 443 instructions per 64 MMAs on it, ncu
// and scripts/nvrtc-sass.py, 2026-12-06.)
template <typename T, int BM, int BN, int NT>
struct rv_ig_iter {
    static constexpr int VE = 16 / (int)sizeof(T);
    static constexpr int BKE = 4 * VE;
    static constexpr int A_IT = BM * 4 / NT;
    static constexpr int B_IT = (BN * 4 + NT - 1) / NT;
    static constexpr bool B_FULL = (BN * 4) % NT == 0;  // every thread has B_IT whole B rows
    static_assert((NT / 4) % 8 == 0, "rows NT/4 apart must share the swizzle (rv_mma_chunk)");
    const char* in;
    const char* arow[A_IT];
    const char* brow[B_IT];
    rv_u32 mh[A_IT], mw[A_IT];
    rv_i64 dh_step, dw_step;  // bytes
    rv_i64 aoff;              // bytes: tr*dh_step + ts*dw_step + tc*sizeof(T)
    int r, s, cgp, tr, ts, tc, K, bkk;
    int dst;                  // 16-byte units: this thread's chunk of tile row tid/4
    rv_u32 bin;               // bit i: B row i of this thread is inside the BN-row tile
    bool bok[B_IT];
#if !defined(RV_MMA_HAVE_NV)
    rv_v16 ra[A_IT], rb[B_IT];
#endif

    __device__ __forceinline__ void init(const rv_ig_args& a, const T* in_, const T* w, int tid, int grp, int kg, int ct, int K_,
                                         int M, int m0, int j0, int kt0, rv_fastdiv div_pq, rv_fastdiv div_q) {
        const rv_conv2d& g = a.g;
        in = (const char*)in_;
        r = g.r, s = g.s, cgp = a.cgp, K = K_;
        const int chunk = tid & 3;
        dst = rv_mma_chunk(tid >> 2, chunk);
#pragma unroll
        for (int i = 0; i < A_IT; ++i) {
            const int m = m0 + (tid >> 2) + i * (NT / 4);
            unsigned rem, xx;
            const unsigned img = rv_divmod(m < M ? (unsigned)m : 0u, div_pq, &rem);
            const unsigned yy = rv_divmod(rem, div_q, &xx);
            const int y0 = (int)yy * g.stride_h - g.pad_h, x0 = (int)xx * g.stride_w - g.pad_w;
            arow[i] = in + ((((rv_i64)img * g.h + y0) * g.w + x0) * ct + (rv_i64)grp * cgp) * (rv_i64)sizeof(T);
            rv_u32 bh = 0, bw = 0;
            if (m < M) {
                for (int t = 0; t < g.r; ++t) {
                    const int y = y0 + t * g.dil_h;
                    bh |= (rv_u32)(y >= 0 && y < g.h) << t;
                }
                for (int t = 0; t < g.s; ++t) {
                    const int x = x0 + t * g.dil_w;
                    bw |= (rv_u32)(x >= 0 && x < g.w) << t;
                }
            }
            mh[i] = bh;
            mw[i] = bw;
        }
        dh_step = (rv_i64)g.dil_h * g.w * ct * (rv_i64)sizeof(T);
        dw_step = (rv_i64)g.dil_w * ct * (rv_i64)sizeof(T);
        const int kk = kt0 * BKE + chunk * VE;
        const int t = kk / cgp;
        tc = kk - t * cgp;
        tr = t / g.s;
        ts = t - tr * g.s;
        bkk = kk;
        aoff = tr * dh_step + ts * dw_step + (rv_i64)tc * (rv_i64)sizeof(T);
#pragma unroll
        for (int i = 0; i < B_IT; ++i) {
            const int idx = tid + i * NT;
            const int n = j0 + (idx >> 2);
            const bool inside = B_FULL || idx < BN * 4;
            bin = (i == 0 ? 0u : bin) | ((rv_u32)inside << i);
            bok[i] = inside && n < kg;
            brow[i] = (const char*)(w + ((rv_i64)grp * kg + (bok[i] ? n : 0)) * K);
        }
    }

    // Source of A row i's chunk at the current position, and whether it is real data.
    __device__ __forceinline__ const char* a_src(int i, bool& ok) const {
        ok = tr < r && ((mh[i] >> tr) & (mw[i] >> ts) & 1u);
        return arow[i] + aoff;
    }
    __device__ __forceinline__ const char* b_src(int i, bool& ok) const {
        ok = bok[i] && bkk < K;
        return brow[i] + (rv_i64)bkk * (rv_i64)sizeof(T);
    }
    __device__ __forceinline__ void advance() {
        tc += BKE;
        bkk += BKE;
        while (tc >= cgp) {
            tc -= cgp;
            if (++ts == s) {
                ts = 0;
                ++tr;
            }
        }
        aoff = tr * dh_step + ts * dw_step + (rv_i64)tc * (rv_i64)sizeof(T);
    }

#if defined(RV_MMA_HAVE_NV)
    // cp.async the current k-tile into stage `st`, then step to the next one. A chunk that
    // is padding gets src-size 0: zeros, and its address (which may lie outside the band)
    // is never read (PTX ISA, cp.async: "src-size ... remaining bytes are zero-filled").
    __device__ __forceinline__ void issue(rv_v16* st) {
#pragma unroll
        for (int i = 0; i < A_IT; ++i) {
            bool ok;
            const char* src = a_src(i, ok);
            rv_cp_async16_a(st + dst + i * NT, src, ok);
        }
#pragma unroll
        for (int i = 0; i < B_IT; ++i) {
            if (B_FULL || ((bin >> i) & 1u)) {
                bool ok;
                const char* src = b_src(i, ok);
                rv_cp_async16(st + BM * 4 + dst + i * NT, src, ok);
            }
        }
        advance();
    }
#else
    // Load the current k-tile into registers, then step to the next one.
    __device__ __forceinline__ void fetch() {
#pragma unroll
        for (int i = 0; i < A_IT; ++i) {
            bool ok;
            const char* src = a_src(i, ok);
            rv_v16 v = {0u, 0u, 0u, 0u};
            if (ok) v = *(const rv_v16*)src;
            ra[i] = v;
        }
#pragma unroll
        for (int i = 0; i < B_IT; ++i) {
            bool ok;
            const char* src = b_src(i, ok);
            rv_v16 v = {0u, 0u, 0u, 0u};
            if (ok) v = *(const rv_v16*)src;
            rb[i] = v;
        }
        advance();
    }
    __device__ __forceinline__ void store(rv_v16* st) const {
#pragma unroll
        for (int i = 0; i < A_IT; ++i) st[dst + i * NT] = ra[i];
#pragma unroll
        for (int i = 0; i < B_IT; ++i)
            if (B_FULL || ((bin >> i) & 1u)) st[BM * 4 + dst + i * NT] = rb[i];
    }
#endif
};

// ---------------------------------------------------------------------------------------
// The kernel: iterators, pipeline, epilogue; the arithmetic is Math's.
template <typename T, int BM, int BN, int STAGES, class Math>
struct rv_igemm_nhwc {
    static constexpr int NT = Math::NT;
    static constexpr int VE = 16 / (int)sizeof(T);  // elements per 16-byte chunk
    static constexpr int BKE = 4 * VE;              // reduction elements per k-tile (64-byte rows)
    static_assert((BM * 4) % NT == 0, "A tile chunks must split evenly over the threads");
    static constexpr int STAGE = (BM + BN) * 4;  // 16-byte units per stage
#if defined(RV_MMA_HAVE_NV) && defined(RV_IG_NV_SMEM_KIB)
    static constexpr int S0 = RV_IG_NV_SMEM_KIB * 1024 / (STAGE * 16);
    static constexpr int S = S0 < 2 ? 2 : S0 > 8 ? 8 : S0;
#elif defined(RV_MMA_HAVE_NV)
    static constexpr int S = STAGES;
#else
    static constexpr int S = 2;
#endif
    // Epilogue slice: SW output channels x BM pixels of f32, about 16 KiB.
    static constexpr int SW0 = 4096 / BM < 16 ? 16 : 4096 / BM;
    static constexpr int SW = SW0 > BN ? BN : SW0;
    static constexpr int CLD = BM + 4;
    static_assert(BN % SW == 0 && SW % 16 == 0 || SW == BN, "slices must divide the channel tile");
    static constexpr int EPI = (SW * CLD + 3) / 4;  // 16-byte units
    static constexpr int SMEM = S * STAGE > EPI ? S * STAGE : EPI;
    // NVIDIA: dynamic shared memory (the host passes SMEM * 16 bytes and raises the
    // function's limit above 48 KiB where needed); AMD: static LDS within 64 KiB.
#if defined(RV_MMA_HAVE_NV)
    static_assert(SMEM * 16 <= 227 * 1024, "shared memory per block must stay within 227 KiB (sm_90)");
#else
    static_assert(SMEM * 16 <= 64 * 1024, "LDS per block must stay within 64 KiB");
#endif

    static __device__ void run(const rv_ig_args& a, const T* __restrict__ in, const T* __restrict__ w,
                               const T* __restrict__ bias, const T* __restrict__ res, float* __restrict__ partial,
                               T* __restrict__ out) {
#if defined(RV_MMA_HAVE_NV)
        extern __shared__ rv_v16 smem[];
#else
        __shared__ rv_v16 smem[SMEM];
#endif
        const rv_conv2d& g = a.g;
        const int tid = (int)threadIdx.x;
        const int grp = (int)blockIdx.z % g.groups, split = (int)blockIdx.z / g.groups;
        const int kg = g.k / g.groups;
        const int ct = g.groups * a.cgp;  // channel slots per NHWC pixel
        const int K = g.r * g.s * a.cgp;
        const int pq = g.p * g.q;
        const int M = g.n * pq;
        const int m0 = (int)blockIdx.x * BM, j0 = (int)blockIdx.y * BN;
        const rv_fastdiv div_pq = rv_fastdiv_make((unsigned)pq), div_q = rv_fastdiv_make((unsigned)g.q);

        // k-tiles of this split.
        const int ktiles = (K + BKE - 1) / BKE;
        const int per = (ktiles + a.splits - 1) / a.splits;
        const int kt0 = split * per;
        const int kt1 = kt0 + per < ktiles ? kt0 + per : ktiles;
        const int nkt = kt1 > kt0 ? kt1 - kt0 : 0;

        // Iterators (no lambdas: a lambda capturing the per-row arrays by reference makes
        // them addressable, and AMDGPU then keeps them in scratch or LDS).
        rv_ig_iter<T, BM, BN, NT> it;
        it.init(a, in, w, tid, grp, kg, ct, K, M, m0, j0, kt0, div_pq, div_q);

        Math math;
        math.init(tid);

#if defined(RV_MMA_HAVE_NV)
#pragma unroll
        for (int s = 0; s < S - 1; ++s) {
            if (s < nkt) it.issue(smem + s * STAGE);
            rv_cp_async_commit();
        }
        // Stage ring positions (16-byte units) of the tile read and the tile written.
        int rd = 0, wr = (S - 1) * STAGE;
#if RV_IG_FRAGS == 2
        if constexpr (Math::PIPELINED) {
            // Per k-tile: load step 1's fragments, issue the copy of tile kt+S-1 into the
            // stage tile kt-1 used (every warp finished reading it before the previous
            // barrier), MMAs of step 0, wait for tile kt+1 and barrier, load its step 0,
            // MMAs of step 1. Copy groups committed before the wait in iteration kt:
            // S-1 + kt+1, so wait_group S-2 leaves tiles 0..kt+1 complete.
            math.init_frags();
            const unsigned smem_at = rv_smem_addr(smem);
            rv_cp_async_wait<S - 2>();
            __syncthreads();
            if (nkt > 0) math.load(0, smem_at, 0);
            for (int kt = 0; kt < nkt; ++kt) {
                math.load(1, smem_at + rd * 16u, 1);
                if (kt + S - 1 < nkt) it.issue(smem + wr);
                rv_cp_async_commit();
                math.mma(0);
                rv_cp_async_wait<S - 2>();
                __syncthreads();
                rd = rd + STAGE == S * STAGE ? 0 : rd + STAGE;
                wr = wr + STAGE == S * STAGE ? 0 : wr + STAGE;
                if (kt + 1 < nkt) math.load(0, smem_at + rd * 16u, 0);
                math.mma(1);
            }
        } else
#endif
        for (int kt = 0; kt < nkt; ++kt) {
            rv_cp_async_wait<S - 2>();
            __syncthreads();
            if (kt + S - 1 < nkt) it.issue(smem + wr);
            rv_cp_async_commit();
            const rv_v16* st = smem + rd;
            math.compute(st, st + BM * 4);
            rd = rd + STAGE == S * STAGE ? 0 : rd + STAGE;
            wr = wr + STAGE == S * STAGE ? 0 : wr + STAGE;
        }
        rv_cp_async_wait<0>();
        __syncthreads();
#else
        if (nkt > 0) {
            it.fetch();
            it.store(smem);
        }
        __syncthreads();
        for (int kt = 0; kt < nkt; ++kt) {
            if (kt + 1 < nkt) it.fetch();
            const rv_v16* st = smem + (kt & 1) * STAGE;
            math.compute(st, st + BM * 4);
            if (kt + 1 < nkt) it.store(smem + ((kt + 1) & 1) * STAGE);
            __syncthreads();
        }
#endif

        // ---- Epilogue, one slice of SW output channels at a time.
        float* cs = (float*)smem;
        for (int slice = 0; slice < BN / SW; ++slice) {
            if (j0 + slice * SW >= kg) break;
            math.template stage<SW, CLD>(cs, slice);
            __syncthreads();
            for (int v = tid; v < SW * (BM / 4); v += NT) {
                const int nl = v / (BM / 4), ml = (v - nl * (BM / 4)) * 4;
                const int n = j0 + slice * SW + nl, m = m0 + ml;
                if (n >= kg || m >= M) continue;
                const rv_v16 raw = *(const rv_v16*)(cs + nl * CLD + ml);
                float vals[4] = {__uint_as_float(raw.x), __uint_as_float(raw.y), __uint_as_float(raw.z), __uint_as_float(raw.w)};
                const int cnt = M - m < 4 ? M - m : 4;
                if (a.splits > 1) {
                    float* dst = partial + ((rv_i64)split * g.k + (rv_i64)grp * kg + n) * M + m;
                    if (cnt == 4 && (M & 3) == 0) {
                        rv_ig_store4(dst, vals[0], vals[1], vals[2], vals[3]);
                    } else {
#pragma unroll
                        for (int e = 0; e < 4; ++e)
                            if (e < cnt) dst[e] = vals[e];
                    }
                } else {
                    rv_ig_write<T>(a, div_pq, div_q, grp * kg + n, m, cnt, vals, bias, res, out);
                }
            }
            __syncthreads();
        }
    }
};

#define RV_IG_ARGS_PACK                                                                                       \
    rv_ig_args a;                                                                                             \
    a.g = g, a.cgp = cgp, a.splits = splits, a.ep = ep, a.os_n = os_n, a.os_c = os_c, a.os_y = os_y, a.os_x = os_x;

// The RDNA emulations run only where waves have 32 lanes (RV_MMA_WAVE32, mma.h).
#if defined(RV_MMA_WAVE32)
#define RV_IG_WAVE32_ONLY(...) __VA_ARGS__
#else
#define RV_IG_WAVE32_ONLY(...) __builtin_trap()
#endif

#define RV_EXPORT_IGEMM_MMA(NAME, T, BM, BN, WM, WN, STAGES)                                                          \
    RV_KERNEL void __launch_bounds__(WM * WN * 32)                                                                    \
        NAME(rv_conv2d g, rv_i32 cgp, rv_i32 splits, rv_epilogue ep, rv_i64 os_n, rv_i64 os_c, rv_i64 os_y, rv_i64 os_x, \
             const T* in, const T* w, const T* bias, const T* res, float* partial, T* out) {                         \
        RV_IG_ARGS_PACK                                                                                               \
        rv_igemm_nhwc<T, BM, BN, STAGES, rv_ig_mma<T, BM, BN, WM, WN, rv_mma_native<T>>>::run(a, in, w, bias, res, partial, out); \
    }
// The NVIDIA-only configurations (kernels::IgemmNhwcConfig::nvidia_only) trap elsewhere.
#if defined(RV_MMA_HAVE_NV)
#define RV_IG_NVIDIA_ONLY(...) __VA_ARGS__
#else
#define RV_IG_NVIDIA_ONLY(...) __builtin_trap()
#endif
#define RV_EXPORT_IGEMM_MMA_NV(NAME, T, BM, BN, WM, WN, STAGES)                                                       \
    RV_KERNEL void __launch_bounds__(WM * WN * 32)                                                                    \
        NAME(rv_conv2d g, rv_i32 cgp, rv_i32 splits, rv_epilogue ep, rv_i64 os_n, rv_i64 os_c, rv_i64 os_y, rv_i64 os_x, \
             const T* in, const T* w, const T* bias, const T* res, float* partial, T* out) {                         \
        RV_IG_ARGS_PACK                                                                                               \
        RV_IG_NVIDIA_ONLY(rv_igemm_nhwc<T, BM, BN, STAGES, rv_ig_mma<T, BM, BN, WM, WN, rv_mma_native<T>>>::run(a, in, w, bias, res, partial, out)); \
    }
#define RV_EXPORT_IGEMM_EMU11(NAME, T, BM, BN, WM, WN, STAGES)                                                        \
    RV_KERNEL void __launch_bounds__(WM * WN * 32)                                                                    \
        NAME(rv_conv2d g, rv_i32 cgp, rv_i32 splits, rv_epilogue ep, rv_i64 os_n, rv_i64 os_c, rv_i64 os_y, rv_i64 os_x, \
             const T* in, const T* w, const T* bias, const T* res, float* partial, T* out) {                         \
        RV_IG_ARGS_PACK                                                                                               \
        RV_IG_WAVE32_ONLY(rv_igemm_nhwc<T, BM, BN, STAGES, rv_ig_mma<T, BM, BN, WM, WN, rv_mma_gfx11<T, true>>>::run(a, in, w, bias, res, partial, out)); \
    }
#define RV_EXPORT_IGEMM_EMU12(NAME, T, BM, BN, WM, WN, STAGES)                                                        \
    RV_KERNEL void __launch_bounds__(WM * WN * 32)                                                                    \
        NAME(rv_conv2d g, rv_i32 cgp, rv_i32 splits, rv_epilogue ep, rv_i64 os_n, rv_i64 os_c, rv_i64 os_y, rv_i64 os_x, \
             const T* in, const T* w, const T* bias, const T* res, float* partial, T* out) {                         \
        RV_IG_ARGS_PACK                                                                                               \
        RV_IG_WAVE32_ONLY(rv_igemm_nhwc<T, BM, BN, STAGES, rv_ig_mma<T, BM, BN, WM, WN, rv_mma_gfx12<T, true>>>::run(a, in, w, bias, res, partial, out)); \
    }
#define RV_EXPORT_IGEMM_SIMT(NAME, T, BM, BN, TM, TN, STAGES)                                                         \
    RV_KERNEL void __launch_bounds__(256)                                                                             \
        NAME(rv_conv2d g, rv_i32 cgp, rv_i32 splits, rv_epilogue ep, rv_i64 os_n, rv_i64 os_c, rv_i64 os_y, rv_i64 os_x, \
             const T* in, const T* w, const T* bias, const T* res, float* partial, T* out) {                         \
        RV_IG_ARGS_PACK                                                                                               \
        rv_igemm_nhwc<T, BM, BN, STAGES, rv_ig_simt<BM, BN, TM, TN>>::run(a, in, w, bias, res, partial, out);          \
    }

// ---------------------------------------------------------------------------------------
// Split-K reduction: out = epilogue(sum over splits of partial[s][ch][m]), ch over all g.k.
// Grid-stride over g.k * M elements, four pixels per thread step.
template <typename T>
RV_DEVICE void rv_ig_splitk(const rv_ig_args& a, const float* __restrict__ partial, const T* __restrict__ bias,
                            const T* __restrict__ res, T* __restrict__ out) {
    const rv_conv2d& g = a.g;
    const int pq = g.p * g.q;
    const int M = g.n * pq;
    const int mv = (M + 3) / 4;
    const rv_i64 total = (rv_i64)g.k * mv;
    const rv_fastdiv div_pq = rv_fastdiv_make((unsigned)pq), div_q = rv_fastdiv_make((unsigned)g.q);
    for (rv_i64 i = rv_global_id(); i < total; i += rv_grid_stride()) {
        const int ch = (int)(i / mv);
        const int m = (int)(i - (rv_i64)ch * mv) * 4;
        const int cnt = M - m < 4 ? M - m : 4;
        float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int s = 0; s < a.splits; ++s) {
            const float* p = partial + ((rv_i64)s * g.k + ch) * M + m;
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (e < cnt) v[e] += p[e];
        }
        rv_ig_write<T>(a, div_pq, div_q, ch, m, cnt, v, bias, res, out);
    }
}
#define RV_EXPORT_IGEMM_SPLITK(NAME, T)                                                                               \
    RV_KERNEL void RV_BOUNDS NAME(rv_conv2d g, rv_i32 splits, rv_epilogue ep, rv_i64 os_n, rv_i64 os_c, rv_i64 os_y,      \
                                  rv_i64 os_x, const float* partial, const T* bias, const T* res, T* out) {           \
        rv_ig_args a;                                                                                                 \
        a.g = g, a.cgp = 0, a.splits = splits, a.ep = ep, a.os_n = os_n, a.os_c = os_c, a.os_y = os_y, a.os_x = os_x; \
        rv_ig_splitk<T>(a, partial, bias, res, out);                                                                  \
    }

// ---------------------------------------------------------------------------------------
// One atom through a family's fragment code, for the layer's own test: A [16][32] and B
// [16 n][32 k] (K contiguous, row-major) are copied into LDS tiles in the rv_mma_chunk
// format, then two k16 steps of load_a / load_b / mma accumulate onto C, and D [16][16]
// (row-major, f32) is written through P::coord. Launch: one block of P::WARP threads
// (the native family: the device's wave size; the emulations: 32).
template <typename T, class P>
RV_DEVICE void rv_mma_tile(const T* __restrict__ a, const T* __restrict__ b, const float* __restrict__ c, float* __restrict__ d) {
    __shared__ rv_v16 at[64], bt[64];
    const int lane = (int)threadIdx.x;
    for (int i = lane; i < 64; i += P::WARP) {
        at[rv_mma_chunk(i >> 2, i & 3)] = ((const rv_v16*)a)[i];
        bt[rv_mma_chunk(i >> 2, i & 3)] = ((const rv_v16*)b)[i];
    }
    __syncthreads();
    float acc[P::C_REGS];
    for (int r = 0; r < P::C_REGS; ++r) {
        int m, n;
        P::coord(r, lane, m, n);
        acc[r] = c[m * 16 + n];
    }
    for (int ks = 0; ks < 2; ++ks) {
        rv_u32 fa[P::A_REGS], fb[P::B_REGS];
        P::load_a(fa, at, 0, ks, lane);
        P::load_b(fb, bt, 0, ks, lane);
        P::mma(acc, fa, fb);
    }
    for (int r = 0; r < P::C_REGS; ++r) {
        int m, n;
        P::coord(r, lane, m, n);
        d[m * 16 + n] = acc[r];
    }
}
#define RV_EXPORT_MMA_TILE_NATIVE(NAME, T)                                                                           \
    RV_KERNEL void RV_BOUNDS NAME(const T* a, const T* b, const float* c, float* d) { rv_mma_tile<T, rv_mma_native<T>>(a, b, c, d); }
#define RV_EXPORT_MMA_TILE_EMU11(NAME, T)                                                                            \
    RV_KERNEL void RV_BOUNDS NAME(const T* a, const T* b, const float* c, float* d) { RV_IG_WAVE32_ONLY(rv_mma_tile<T, rv_mma_gfx11<T, true>>(a, b, c, d)); }
#define RV_EXPORT_MMA_TILE_EMU12(NAME, T)                                                                            \
    RV_KERNEL void RV_BOUNDS NAME(const T* a, const T* b, const float* c, float* d) { RV_IG_WAVE32_ONLY(rv_mma_tile<T, rv_mma_gfx12<T, true>>(a, b, c, d)); }

// ---------------------------------------------------------------------------------------
// Instantiations (RV_EXPORT_* lines: symbol, storage type, BM, BN, warps or thread tile,
// NVIDIA pipeline stages). Stage counts fill (BM + BN) * 64 B per stage up to 48 KiB.
RV_EXPORT_IGEMM_MMA(igemm_mma_128x128_2x4_f16, rv_half, 128, 128, 2, 4, 3)
RV_EXPORT_IGEMM_MMA(igemm_mma_128x128_2x4_bf16, rv_bf16, 128, 128, 2, 4, 3)
RV_EXPORT_IGEMM_MMA(igemm_mma_128x64_2x2_f16, rv_half, 128, 64, 2, 2, 4)
RV_EXPORT_IGEMM_MMA(igemm_mma_128x64_2x2_bf16, rv_bf16, 128, 64, 2, 2, 4)
RV_EXPORT_IGEMM_MMA(igemm_mma_64x128_2x2_f16, rv_half, 64, 128, 2, 2, 4)
RV_EXPORT_IGEMM_MMA(igemm_mma_64x128_2x2_bf16, rv_bf16, 64, 128, 2, 2, 4)
RV_EXPORT_IGEMM_MMA(igemm_mma_64x64_2x2_f16, rv_half, 64, 64, 2, 2, 4)
RV_EXPORT_IGEMM_MMA(igemm_mma_64x64_2x2_bf16, rv_bf16, 64, 64, 2, 2, 4)
RV_EXPORT_IGEMM_MMA(igemm_mma_128x32_4x1_f16, rv_half, 128, 32, 4, 1, 4)
RV_EXPORT_IGEMM_MMA(igemm_mma_128x32_4x1_bf16, rv_bf16, 128, 32, 4, 1, 4)
RV_EXPORT_IGEMM_MMA(igemm_mma_128x16_4x1_f16, rv_half, 128, 16, 4, 1, 4)
RV_EXPORT_IGEMM_MMA(igemm_mma_128x16_4x1_bf16, rv_bf16, 128, 16, 4, 1, 4)
RV_EXPORT_IGEMM_MMA_NV(igemm_mma_128x128_2x2_f16, rv_half, 128, 128, 2, 2, 3)
RV_EXPORT_IGEMM_MMA_NV(igemm_mma_128x128_2x2_bf16, rv_bf16, 128, 128, 2, 2, 3)
RV_EXPORT_IGEMM_MMA_NV(igemm_mma_128x256_2x4_f16, rv_half, 128, 256, 2, 4, 2)
RV_EXPORT_IGEMM_MMA_NV(igemm_mma_128x256_2x4_bf16, rv_bf16, 128, 256, 2, 4, 2)
RV_EXPORT_IGEMM_MMA_NV(igemm_mma_256x128_4x2_f16, rv_half, 256, 128, 4, 2, 2)
RV_EXPORT_IGEMM_MMA_NV(igemm_mma_256x128_4x2_bf16, rv_bf16, 256, 128, 4, 2, 2)
RV_EXPORT_IGEMM_EMU11(igemm_emu11_128x128_2x4_f16, rv_half, 128, 128, 2, 4, 3)
RV_EXPORT_IGEMM_EMU11(igemm_emu11_128x128_2x4_bf16, rv_bf16, 128, 128, 2, 4, 3)
RV_EXPORT_IGEMM_EMU11(igemm_emu11_64x64_2x2_f16, rv_half, 64, 64, 2, 2, 4)
RV_EXPORT_IGEMM_EMU11(igemm_emu11_64x64_2x2_bf16, rv_bf16, 64, 64, 2, 2, 4)
RV_EXPORT_IGEMM_EMU12(igemm_emu12_128x128_2x4_f16, rv_half, 128, 128, 2, 4, 3)
RV_EXPORT_IGEMM_EMU12(igemm_emu12_128x128_2x4_bf16, rv_bf16, 128, 128, 2, 4, 3)
RV_EXPORT_IGEMM_EMU12(igemm_emu12_64x64_2x2_f16, rv_half, 64, 64, 2, 2, 4)
RV_EXPORT_IGEMM_EMU12(igemm_emu12_64x64_2x2_bf16, rv_bf16, 64, 64, 2, 2, 4)
RV_EXPORT_IGEMM_SIMT(igemm_simt_128x128_8x8_f32, float, 128, 128, 8, 8, 3)
RV_EXPORT_IGEMM_SIMT(igemm_simt_128x64_8x4_f32, float, 128, 64, 8, 4, 4)
RV_EXPORT_IGEMM_SIMT(igemm_simt_64x64_4x4_f32, float, 64, 64, 4, 4, 4)
RV_EXPORT_IGEMM_SIMT(igemm_simt_128x32_4x4_f32, float, 128, 32, 4, 4, 4)
RV_EXPORT_IGEMM_SIMT(igemm_simt_128x16_4x2_f32, float, 128, 16, 4, 2, 4)
RV_EXPORT_IGEMM_SPLITK(igemm_splitk_f32, float)
RV_EXPORT_IGEMM_SPLITK(igemm_splitk_f16, rv_half)
RV_EXPORT_IGEMM_SPLITK(igemm_splitk_bf16, rv_bf16)
RV_EXPORT_MMA_TILE_NATIVE(mma_tile_native_f16, rv_half)
RV_EXPORT_MMA_TILE_NATIVE(mma_tile_native_bf16, rv_bf16)
RV_EXPORT_MMA_TILE_EMU11(mma_tile_emu11_f16, rv_half)
RV_EXPORT_MMA_TILE_EMU11(mma_tile_emu11_bf16, rv_bf16)
RV_EXPORT_MMA_TILE_EMU12(mma_tile_emu12_f16, rv_half)
RV_EXPORT_MMA_TILE_EMU12(mma_tile_emu12_bf16, rv_bf16)
