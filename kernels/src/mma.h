// rocm-vision MMA layer: the matrix-core fragment code and the policy of each target family,
// used only by igemm_mma.hip, which includes this header right after the prelude.
//
// It lives outside the prelude so that the other modules neither parse nor compile it. It
// builds on the prelude (the rv_ integer and 16-bit types, shuffles, conversions, RV_CUDA /
// RV_HIP) and, like the prelude, includes nothing and declares only rv_/RV_ names.
#pragma once

#if !defined(RV_KERNEL)
#error "mma.h builds on the prelude: include prelude.h first"
#endif

// =======================================================================================
// MMA: the matrix-multiply-accumulate layer. One 16x16x16 "atom" per warp --
//   D[16][16] (f32) += A[16][16] (f16|bf16, rows = M, cols = K) * B[16][16] (cols = N)
// -- with one implementation per family; the kernels above this layer (igemm_mma.hip) are
// shared. A family policy P (template over the 16-bit storage type T) provides
//   P::WARP                      lanes that execute one atom together (32 or 64)
//   P::A_REGS, B_REGS, C_REGS    32-bit registers per lane of the A, B and D fragments
//   P::load_a(a, tile, row0, ks, lane)  A fragment of rows row0..row0+15, k16 step ks
//   P::load_b(b, tile, row0, ks, lane)  B fragment of columns (tile rows) row0..row0+15
//   P::mma(c, a, b)                      c += a * b
//   P::coord(i, lane, &m, &n)            which D element c[i] of this lane holds
// from operand tiles in LDS in one fixed format (rv_mma_chunk): a tile row holds 64 bytes
// (32 16-bit elements: two k16 steps) of one M row (A) or one N column (B), K contiguous.
//
// Families and where their lane layouts are documented (facts only; nothing copied):
//   rv_mma_nv     NVIDIA mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} (two per atom)
//                 with ldmatrix.x4: PTX ISA, "Matrix Fragments for mma.m16n8k16 with
//                 floating point type" and "Warp-level matrix load instruction: ldmatrix".
//   rv_mma_gfx11  RDNA3 V_WMMA_F32_16X16X16_{F16,BF16} wave32: RDNA3 ISA Reference Guide,
//                 section 7.9 "Wave Matrix Multiply Accumulate"; AMD GPUOpen "How to
//                 accelerate AI applications on RDNA 3 using WMMA"; AMD Matrix Instruction
//                 Calculator (--architecture rdna3). A: lane l holds row l%16, all 16 K;
//                 B: lane l holds column l%16, all 16 K; lanes 16-31 must hold the same A
//                 and B as lanes 0-15. D (8 f32): c[i] = D[2i + l/16][l%16].
//   rv_mma_gfx12  RDNA4 V_WMMA_F32_16X16X16_{F16,BF16} (the _w32_gfx12 builtins): RDNA4 ISA
//                 Reference Guide, section 7.9; AMD GPUOpen "Using the Matrix Cores of AMD
//                 RDNA 4 architecture GPUs" (2025). A: lane l holds row l%16, K 8*(l/16)..+7
//                 (no replication); B: column l%16, K 8*(l/16)..+7; D: c[i] = D[i + 8*(l/16)][l%16].
//   rv_mma_cdna   CDNA2/3 V_MFMA_F32_16X16X16F16 / V_MFMA_F32_16X16X16BF16_1K, wave64: AMD
//                 Instinct MI200/MI300 ISA Reference Guides, "Matrix Arithmetic
//                 Instructions"; AMD lab notes "AMD matrix cores"; AMD Matrix Instruction
//                 Calculator (--architecture cdna2/cdna3 --register-layout). A: lane l holds
//                 row l%16, K 4*(l/16)..+3; B: column l%16, K 4*(l/16)..+3; D (4 f32):
//                 c[i] = D[4*(l/16) + i][l%16].
// Emulation: rv_mma_gfx11<T, true> and rv_mma_gfx12<T, true> keep the AMD fragment code and
// replace only the WMMA instruction by warp shuffles that follow the documented lane
// layout, so the GPU tier (NVIDIA, warp 32) executes the RDNA fragment loads and stores.
// The gfx11 emulation also checks the replication rule: a warp whose two half-waves hold
// different A or B data gets NaN in every D element, so a fragment loader that breaks
// the rule fails the tests instead of passing by accident.

// Whether the target runs 32-lane waves (NVIDIA, RDNA in its default wave32 mode): the
// RDNA emulations need it. On wave64 targets (CDNA) their entry points exist -- every
// module exports the same symbols everywhere -- but trap; the host never launches them there.
// clang up to 21 (ROCm 6.4) defines __AMDGCN_WAVEFRONT_SIZE__; clang 22 (ROCm 7.2) no longer
// does, so there the family decides: gfx10/11/12 default to wave32 (we never pass
// -mwavefrontsize64), gfx9 (GCN, CDNA) is wave64.
#if defined(__AMDGCN_WAVEFRONT_SIZE__)
#define RV_MMA_WAVE_LANES __AMDGCN_WAVEFRONT_SIZE__
#elif defined(__GFX10__) || defined(__GFX11__) || defined(__GFX12__)
#define RV_MMA_WAVE_LANES 32
#else
#define RV_MMA_WAVE_LANES 64
#endif
#if defined(RV_CUDA) || !defined(__HIP_DEVICE_COMPILE__) || RV_MMA_WAVE_LANES == 32
#define RV_MMA_WAVE32 1
#endif

// 16 bytes, 16-byte aligned: the unit of global->LDS copies and of LDS tile rows; and 8
// bytes. On AMD a first-class vector type: a struct copy of these becomes a memcpy that
// keeps the surrounding arrays in scratch memory; clang's vectors stay in registers.
#if defined(RV_HIP)
typedef rv_u32 rv_v16 __attribute__((ext_vector_type(4)));
typedef rv_u32 rv_v8 __attribute__((ext_vector_type(2)));
#else
struct alignas(16) rv_v16 {
    rv_u32 x, y, z, w;
};
struct alignas(8) rv_v8 {
    rv_u32 x, y;
};
#endif

// Position (in 16-byte units) of logical chunk `chunk` (0..3) of row `row` in an MMA
// operand tile. XOR-swizzling the chunk with (row/2)%4 makes the eight rows of an 8x16-byte
// access (ldmatrix, a ds_read_b128 per lane, cp.async stores) fall into eight different
// 16-byte bank groups, with no padding: rows r and r^2, r^4, r^6 would otherwise collide.
RV_DEVICE int rv_mma_chunk(int row, int chunk) { return (row << 2) | (chunk ^ ((row >> 1) & 3)); }

// The two 16-bit halves of a register as f32 (low half = lower K index).
template <typename T> RV_DEVICE float rv_mma_lo(rv_u32 x) { return rv_to_f32(rv_from_bits<T>((rv_u16)(x & 0xffffu))); }
template <typename T> RV_DEVICE float rv_mma_hi(rv_u32 x) { return rv_to_f32(rv_from_bits<T>((rv_u16)(x >> 16))); }

// Shuffle of a register from lane `src` of the caller's 32-lane group (the emulations run
// in 32-lane groups whatever the hardware wave size).
#if defined(RV_CUDA)
RV_DEVICE rv_u32 rv_mma_shfl(rv_u32 v, int src) { return __shfl_sync(RV_FULL_MASK, v, src, 32); }
#else
RV_DEVICE rv_u32 rv_mma_shfl(rv_u32 v, int src) { return (rv_u32)__shfl((int)v, src, 32); }
#endif
// 1 on every lane of the 32-lane group when `ok` holds on all of them, else 0.
RV_DEVICE int rv_mma_all32(int ok) {
    for (int off = 16; off > 0; off >>= 1) ok &= rv_shfl_xor(ok, off, 32);
    return ok;
}
RV_DEVICE float rv_mma_nan() { return __int_as_float(0x7fc00000); }

// ---- RDNA3 (gfx11) WMMA ---------------------------------------------------------------
// Emulation of V_WMMA_F32_16X16X16 on 32 lanes, per the layout above: D row m = 2i + l/16
// needs A row m, held by lane m (and, replicated, by lane m+16); D column l%16 needs B
// column l%16, which the lane holds itself.
// The D-element loop stays rolled (results are selected into c[] by unrolled compares,
// so c[] is never indexed at run time): unrolled, the scheduler interleaves 64 shuffles
// and the test kernels spill on AMD targets, where they are compiled too.
template <typename T>
RV_DEVICE void rv_wmma_gfx11_emulate(float (&c)[8], const rv_u32 (&a)[8], const rv_u32 (&b)[8]) {
    const int lane = (int)(threadIdx.x & 31u);
    int same = 1;
#pragma unroll
    for (int r = 0; r < 8; ++r) same &= (rv_mma_shfl(a[r], lane ^ 16) == a[r]) & (rv_mma_shfl(b[r], lane ^ 16) == b[r]);
    const int replicated = rv_mma_all32(same);
    float d[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) d[i] = c[i];
#pragma unroll 1
    for (int i = 0; i < 8; ++i) {
        const int m = 2 * i + (lane >> 4);
        float acc = 0.0f;
#pragma unroll
        for (int r = 0; r < 8; ++r) {
            const rv_u32 ar = rv_mma_shfl(a[r], m);
            acc = rv_fma(rv_mma_lo<T>(ar), rv_mma_lo<T>(b[r]), acc);
            acc = rv_fma(rv_mma_hi<T>(ar), rv_mma_hi<T>(b[r]), acc);
        }
#pragma unroll
        for (int j = 0; j < 8; ++j)
            if (j == i) d[j] += acc;
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) c[i] = replicated ? d[i] : rv_mma_nan();
}

// The native instruction, defined only where it exists (the primary template is left
// undefined, so instantiating it anywhere else is a compile error, not a silent fallback).
template <typename T> struct rv_wmma_gfx11_native;
#if defined(__GFX11__) && defined(__HIP_DEVICE_COMPILE__)
typedef _Float16 rv_v16f16 __attribute__((ext_vector_type(16)));
typedef short rv_v16i16 __attribute__((ext_vector_type(16)));
typedef float rv_v8f32 __attribute__((ext_vector_type(8)));
struct rv_u32x8 {
    rv_u32 r[8];
};
struct rv_f32x8 {
    float r[8];
};
template <> struct rv_wmma_gfx11_native<rv_half> {
    static __device__ __forceinline__ void run(float (&c)[8], const rv_u32 (&a)[8], const rv_u32 (&b)[8]) {
        rv_u32x8 ua, ub;
        rv_f32x8 uc;
        for (int i = 0; i < 8; ++i) ua.r[i] = a[i], ub.r[i] = b[i], uc.r[i] = c[i];
        const rv_v8f32 d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(
            __builtin_bit_cast(rv_v16f16, ua), __builtin_bit_cast(rv_v16f16, ub), __builtin_bit_cast(rv_v8f32, uc));
        for (int i = 0; i < 8; ++i) c[i] = d[i];
    }
};
template <> struct rv_wmma_gfx11_native<rv_bf16> {
    static __device__ __forceinline__ void run(float (&c)[8], const rv_u32 (&a)[8], const rv_u32 (&b)[8]) {
        rv_u32x8 ua, ub;
        rv_f32x8 uc;
        for (int i = 0; i < 8; ++i) ua.r[i] = a[i], ub.r[i] = b[i], uc.r[i] = c[i];
        const rv_v8f32 d = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32(
            __builtin_bit_cast(rv_v16i16, ua), __builtin_bit_cast(rv_v16i16, ub), __builtin_bit_cast(rv_v8f32, uc));
        for (int i = 0; i < 8; ++i) c[i] = d[i];
    }
};
#endif
template <typename T, bool EMULATE> struct rv_wmma_gfx11_op {
    static __device__ __forceinline__ void run(float (&c)[8], const rv_u32 (&a)[8], const rv_u32 (&b)[8]) {
        rv_wmma_gfx11_native<T>::run(c, a, b);
    }
};
template <typename T> struct rv_wmma_gfx11_op<T, true> {
    static __device__ __forceinline__ void run(float (&c)[8], const rv_u32 (&a)[8], const rv_u32 (&b)[8]) {
        rv_wmma_gfx11_emulate<T>(c, a, b);
    }
};

template <typename T, bool EMULATE> struct rv_mma_gfx11 {
    static constexpr int WARP = 32, A_REGS = 8, B_REGS = 8, C_REGS = 8;
    // Lane l reads row row0 + l%16 whole (both 16-byte chunks of the k16 step): lanes l and
    // l+16 read the same row, which is the replication the instruction requires.
    static __device__ __forceinline__ void load_rows(rv_u32 (&f)[8], const rv_v16* tile, int row0, int ks, int lane) {
        const int row = row0 + (lane & 15);
        const rv_v16 lo = tile[rv_mma_chunk(row, 2 * ks)], hi = tile[rv_mma_chunk(row, 2 * ks + 1)];
        f[0] = lo.x, f[1] = lo.y, f[2] = lo.z, f[3] = lo.w;
        f[4] = hi.x, f[5] = hi.y, f[6] = hi.z, f[7] = hi.w;
    }
    static __device__ __forceinline__ void load_a(rv_u32 (&a)[8], const rv_v16* t, int row0, int ks, int lane) { load_rows(a, t, row0, ks, lane); }
    static __device__ __forceinline__ void load_b(rv_u32 (&b)[8], const rv_v16* t, int row0, int ks, int lane) { load_rows(b, t, row0, ks, lane); }
    static __device__ __forceinline__ void mma(float (&c)[8], const rv_u32 (&a)[8], const rv_u32 (&b)[8]) {
        rv_wmma_gfx11_op<T, EMULATE>::run(c, a, b);
    }
    static __device__ __forceinline__ void coord(int i, int lane, int& m, int& n) {
        m = 2 * i + ((lane >> 4) & 1);
        n = lane & 15;
    }
};

// ---- RDNA4 (gfx12) WMMA ---------------------------------------------------------------
// Emulation: D row m = i + 8*(l/16) needs A row m, K 0..7 from lane m and K 8..15 from
// lane m+16; D column n = l%16 needs B column n, K 0..7 from lane n, K 8..15 from lane n+16.
template <typename T>
RV_DEVICE void rv_wmma_gfx12_emulate(float (&c)[8], const rv_u32 (&a)[4], const rv_u32 (&b)[4]) {
    const int lane = (int)(threadIdx.x & 31u);
    const int n = lane & 15;
    rv_u32 bcol[2][4];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int r = 0; r < 4; ++r) bcol[h][r] = rv_mma_shfl(b[r], n + 16 * h);
#pragma unroll 1
    for (int i = 0; i < 8; ++i) {
        const int m = i + 8 * ((lane >> 4) & 1);
        float acc = 0.0f;
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int r = 0; r < 4; ++r) {
                const rv_u32 ar = rv_mma_shfl(a[r], m + 16 * h);
                acc = rv_fma(rv_mma_lo<T>(ar), rv_mma_lo<T>(bcol[h][r]), acc);
                acc = rv_fma(rv_mma_hi<T>(ar), rv_mma_hi<T>(bcol[h][r]), acc);
            }
#pragma unroll
        for (int j = 0; j < 8; ++j)
            if (j == i) c[j] += acc;
    }
}

template <typename T> struct rv_wmma_gfx12_native;
#if defined(__GFX12__) && defined(__HIP_DEVICE_COMPILE__)
typedef _Float16 rv_v8f16 __attribute__((ext_vector_type(8)));
typedef short rv_v8i16 __attribute__((ext_vector_type(8)));
typedef float rv_v8f32_12 __attribute__((ext_vector_type(8)));
struct rv_u32x4 {
    rv_u32 r[4];
};
struct rv_f32x8_12 {
    float r[8];
};
template <> struct rv_wmma_gfx12_native<rv_half> {
    static __device__ __forceinline__ void run(float (&c)[8], const rv_u32 (&a)[4], const rv_u32 (&b)[4]) {
        rv_u32x4 ua, ub;
        rv_f32x8_12 uc;
        for (int i = 0; i < 4; ++i) ua.r[i] = a[i], ub.r[i] = b[i];
        for (int i = 0; i < 8; ++i) uc.r[i] = c[i];
        const rv_v8f32_12 d = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(
            __builtin_bit_cast(rv_v8f16, ua), __builtin_bit_cast(rv_v8f16, ub), __builtin_bit_cast(rv_v8f32_12, uc));
        for (int i = 0; i < 8; ++i) c[i] = d[i];
    }
};
template <> struct rv_wmma_gfx12_native<rv_bf16> {
    static __device__ __forceinline__ void run(float (&c)[8], const rv_u32 (&a)[4], const rv_u32 (&b)[4]) {
        rv_u32x4 ua, ub;
        rv_f32x8_12 uc;
        for (int i = 0; i < 4; ++i) ua.r[i] = a[i], ub.r[i] = b[i];
        for (int i = 0; i < 8; ++i) uc.r[i] = c[i];
        const rv_v8f32_12 d = __builtin_amdgcn_wmma_f32_16x16x16_bf16_w32_gfx12(
            __builtin_bit_cast(rv_v8i16, ua), __builtin_bit_cast(rv_v8i16, ub), __builtin_bit_cast(rv_v8f32_12, uc));
        for (int i = 0; i < 8; ++i) c[i] = d[i];
    }
};
#endif
template <typename T, bool EMULATE> struct rv_wmma_gfx12_op {
    static __device__ __forceinline__ void run(float (&c)[8], const rv_u32 (&a)[4], const rv_u32 (&b)[4]) {
        rv_wmma_gfx12_native<T>::run(c, a, b);
    }
};
template <typename T> struct rv_wmma_gfx12_op<T, true> {
    static __device__ __forceinline__ void run(float (&c)[8], const rv_u32 (&a)[4], const rv_u32 (&b)[4]) {
        rv_wmma_gfx12_emulate<T>(c, a, b);
    }
};

template <typename T, bool EMULATE> struct rv_mma_gfx12 {
    static constexpr int WARP = 32, A_REGS = 4, B_REGS = 4, C_REGS = 8;
    // Lane l reads one 16-byte chunk: row row0 + l%16, K half l/16 of the k16 step.
    static __device__ __forceinline__ void load_rows(rv_u32 (&f)[4], const rv_v16* tile, int row0, int ks, int lane) {
        const rv_v16 v = tile[rv_mma_chunk(row0 + (lane & 15), 2 * ks + ((lane >> 4) & 1))];
        f[0] = v.x, f[1] = v.y, f[2] = v.z, f[3] = v.w;
    }
    static __device__ __forceinline__ void load_a(rv_u32 (&a)[4], const rv_v16* t, int row0, int ks, int lane) { load_rows(a, t, row0, ks, lane); }
    static __device__ __forceinline__ void load_b(rv_u32 (&b)[4], const rv_v16* t, int row0, int ks, int lane) { load_rows(b, t, row0, ks, lane); }
    static __device__ __forceinline__ void mma(float (&c)[8], const rv_u32 (&a)[4], const rv_u32 (&b)[4]) {
        rv_wmma_gfx12_op<T, EMULATE>::run(c, a, b);
    }
    static __device__ __forceinline__ void coord(int i, int lane, int& m, int& n) {
        m = i + 8 * ((lane >> 4) & 1);
        n = lane & 15;
    }
};

// ---- CDNA (gfx90a, gfx94x) MFMA, wave64 -----------------------------------------------
#if (defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)) && defined(__HIP_DEVICE_COMPILE__)
#define RV_MMA_HAVE_CDNA 1
typedef _Float16 rv_v4f16 __attribute__((ext_vector_type(4)));
typedef short rv_v4i16 __attribute__((ext_vector_type(4)));
typedef float rv_v4f32 __attribute__((ext_vector_type(4)));
struct rv_u32x2 {
    rv_u32 r[2];
};
struct rv_f32x4 {
    float r[4];
};
template <typename T> struct rv_mfma_op;
template <> struct rv_mfma_op<rv_half> {
    static __device__ __forceinline__ rv_v4f32 run(rv_u32x2 a, rv_u32x2 b, rv_v4f32 c) {
        return __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(rv_v4f16, a), __builtin_bit_cast(rv_v4f16, b), c, 0, 0, 0);
    }
};
template <> struct rv_mfma_op<rv_bf16> {
    static __device__ __forceinline__ rv_v4f32 run(rv_u32x2 a, rv_u32x2 b, rv_v4f32 c) {
        return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(__builtin_bit_cast(rv_v4i16, a), __builtin_bit_cast(rv_v4i16, b), c, 0, 0, 0);
    }
};
template <typename T> struct rv_mma_cdna {
    static constexpr int WARP = 64, A_REGS = 2, B_REGS = 2, C_REGS = 4;
    // Lane l reads 8 bytes: row row0 + l%16, K quarter l/16 of the k16 step (chunk 2*ks +
    // l/32, half (l/16)%2).
    static __device__ __forceinline__ void load_rows(rv_u32 (&f)[2], const rv_v16* tile, int row0, int ks, int lane) {
        const rv_v8* p = (const rv_v8*)(tile + rv_mma_chunk(row0 + (lane & 15), 2 * ks + ((lane >> 5) & 1)));
        const rv_v8 v = p[(lane >> 4) & 1];
        f[0] = v.x, f[1] = v.y;
    }
    static __device__ __forceinline__ void load_a(rv_u32 (&a)[2], const rv_v16* t, int row0, int ks, int lane) { load_rows(a, t, row0, ks, lane); }
    static __device__ __forceinline__ void load_b(rv_u32 (&b)[2], const rv_v16* t, int row0, int ks, int lane) { load_rows(b, t, row0, ks, lane); }
    static __device__ __forceinline__ void mma(float (&c)[4], const rv_u32 (&a)[2], const rv_u32 (&b)[2]) {
        rv_u32x2 ua, ub;
        rv_f32x4 uc;
        ua.r[0] = a[0], ua.r[1] = a[1], ub.r[0] = b[0], ub.r[1] = b[1];
        for (int i = 0; i < 4; ++i) uc.r[i] = c[i];
        const rv_v4f32 d = rv_mfma_op<T>::run(ua, ub, __builtin_bit_cast(rv_v4f32, uc));
        for (int i = 0; i < 4; ++i) c[i] = d[i];
    }
    static __device__ __forceinline__ void coord(int i, int lane, int& m, int& n) {
        m = 4 * ((lane >> 4) & 3) + i;
        n = lane & 15;
    }
};
#endif

// ---- NVIDIA mma.sync (the GPU tier) ---------------------------------------------------
#if defined(RV_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define RV_MMA_HAVE_NV 1
RV_DEVICE unsigned rv_smem_addr(const void* p) { return (unsigned)__cvta_generic_to_shared(p); }
// ldmatrix.x4: lanes 8j..8j+7 give the row addresses of 8x8 matrix j; register j of lane
// l receives row l/4, elements 2*(l%4) and 2*(l%4)+1 of matrix j.
// _at takes the lane's row as a shared-window address, the other its generic pointer.
RV_DEVICE void rv_ldmatrix_x4_at(rv_u32 (&r)[4], unsigned row_saddr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(row_saddr));
}
RV_DEVICE void rv_ldmatrix_x4(rv_u32 (&r)[4], const void* row_addr) { rv_ldmatrix_x4_at(r, rv_smem_addr(row_addr)); }
template <typename T> struct rv_mma_sync_op;
template <> struct rv_mma_sync_op<rv_half> {
    static __device__ __forceinline__ void run(float* d, rv_u32 a0, rv_u32 a1, rv_u32 a2, rv_u32 a3, rv_u32 b0, rv_u32 b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
};
template <> struct rv_mma_sync_op<rv_bf16> {
    static __device__ __forceinline__ void run(float* d, rv_u32 a0, rv_u32 a1, rv_u32 a2, rv_u32 a3, rv_u32 b0, rv_u32 b1) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
};
template <typename T> struct rv_mma_nv {
    static constexpr int WARP = 32, A_REGS = 4, B_REGS = 4, C_REGS = 8;
    // A (16x16, m16n8k16 "row"): a0a1 = A[g][2t..], a2a3 = A[g+8][2t..], a4a5 = A[g][2t+8..],
    // a6a7 = A[g+8][2t+8..] (g = lane/4, t = lane%4): exactly ldmatrix.x4 of the matrices
    // (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15).
    static __device__ __forceinline__ void load_a(rv_u32 (&a)[4], const rv_v16* tile, int row0, int ks, int lane) {
        rv_ldmatrix_x4(a, tile + frag_a(row0, ks, lane));
    }
    // B (16x8 "col", two per atom): b0b1 = B[k=2t..][n=g], b2b3 = B[k=2t+8..][n=g]; with the
    // tile stored as rows of N, ldmatrix.x4 of (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7),
    // (n 8-15, k 8-15) gives {b0b1, b2b3} of the first n8 block, then of the second.
    static __device__ __forceinline__ void load_b(rv_u32 (&b)[4], const rv_v16* tile, int row0, int ks, int lane) {
        rv_ldmatrix_x4(b, tile + frag_b(row0, ks, lane));
    }
    // The lane's ldmatrix row (16-byte units) of the A (B) fragment of tile rows
    // row0..row0+15 at k16 step ks. For row0 % 16 == 0, which the swizzle leaves alone, it
    // is row0 * 4 plus its row0 = 0 value: with load_at, a pipeline keeps one shared address
    // per operand and step and reaches every fragment by an immediate offset (igemm_mma.hip,
    // RV_IG_FRAGS 2).
    static __device__ __forceinline__ int frag_a(int row0, int ks, int lane) {
        const int j = lane >> 3;
        return rv_mma_chunk(row0 + (lane & 7) + 8 * (j & 1), 2 * ks + (j >> 1));
    }
    static __device__ __forceinline__ int frag_b(int row0, int ks, int lane) {
        const int j = lane >> 3;
        return rv_mma_chunk(row0 + (lane & 7) + 8 * (j >> 1), 2 * ks + (j & 1));
    }
    static __device__ __forceinline__ void load_at(rv_u32 (&r)[4], unsigned saddr) { rv_ldmatrix_x4_at(r, saddr); }
    // D of one m16n8k16: d0d1 = D[g][2t..2t+1], d2d3 = D[g+8][2t..2t+1]; c[0..3] is the
    // first n8 block, c[4..7] the second.
    static __device__ __forceinline__ void mma(float (&c)[8], const rv_u32 (&a)[4], const rv_u32 (&b)[4]) {
        rv_mma_sync_op<T>::run(c, a[0], a[1], a[2], a[3], b[0], b[1]);
        rv_mma_sync_op<T>::run(c + 4, a[0], a[1], a[2], a[3], b[2], b[3]);
    }
    static __device__ __forceinline__ void coord(int i, int lane, int& m, int& n) {
        m = (lane >> 2) + 8 * ((i >> 1) & 1);
        n = 8 * (i >> 2) + 2 * (lane & 3) + (i & 1);
    }
};
// cp.async: a 16-byte global->shared copy that bypasses registers; src_bytes 0 writes zeros
// (the padding / out-of-range case) without reading global memory.
RV_DEVICE void rv_cp_async16(void* smem, const void* gmem, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(rv_smem_addr(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}
// The activation operand's copy: through L1 too when RV_IG_A_CACHE is 1 (neighbouring taps
// read overlapping rows), else like the weights (L2 only).
RV_DEVICE void rv_cp_async16_a(void* smem, const void* gmem, bool valid) {
#if defined(RV_IG_A_CACHE) && RV_IG_A_CACHE == 1
    asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(rv_smem_addr(smem)), "l"(gmem), "r"(valid ? 16 : 0));
#else
    rv_cp_async16(smem, gmem, valid);
#endif
}
RV_DEVICE void rv_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> RV_DEVICE void rv_cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
#endif

// The family this compilation targets. Targets without matrix cores (gfx103x and other
// wave32 RDNA, older GCN) get the gfx11 emulation so that every kernel compiles everywhere;
// the host never dispatches matrix-core kernels there (it uses the FMA kernels).
#if defined(RV_MMA_HAVE_NV)
template <typename T> using rv_mma_native = rv_mma_nv<T>;
#elif defined(__GFX11__) && defined(__HIP_DEVICE_COMPILE__)
template <typename T> using rv_mma_native = rv_mma_gfx11<T, false>;
#elif defined(__GFX12__) && defined(__HIP_DEVICE_COMPILE__)
template <typename T> using rv_mma_native = rv_mma_gfx12<T, false>;
#elif defined(RV_MMA_HAVE_CDNA)
template <typename T> using rv_mma_native = rv_mma_cdna<T>;
#else
template <typename T> using rv_mma_native = rv_mma_gfx11<T, true>;
#endif
