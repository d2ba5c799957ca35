// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel
// random numbers: as easy as 1, 2, 3", SC 2011), written here from the paper's definition.
//
// The stream of (seed, offset): 32-bit word j (j = 0, 1, 2, ...) is word j % 4 of
// Philox4x32-10(counter = {lo32(j / 4), hi32(j / 4), 0, 0}, key = {lo32(seed), hi32(seed)}).
// Element i of a launch uses word offset + i, so consecutive launches with offsets that
// advance by the element count never reuse a word, and a launch is reproducible from
// (seed, offset) alone, whatever the grid.
//
// Entry points  rand_bits_u32   (rv_i64 numel, rv_i64 seed, rv_i64 offset, rv_u32* out)
//   out[i] = word offset + i (the raw stream; the host's reference implementation and the
//   known-answer tests check it bit for bit).
// Entry points  rand_uniform_<dtype>, dtype in f32 f16 bf16 f64
//   (rv_i64 numel, rv_i64 seed, rv_i64 offset, double lo, double hi, T* out)
//   u = (word >> 8) * 2^-24 in [0, 1) (f64: word * 2^-32); out = lo + (hi - lo) * u in f32
//   (f64 for f64), rounded to T (for f16/bf16 the rounding may reach hi).
// Entry points  rand_normal_<dtype>
//   (rv_i64 numel, rv_i64 seed, rv_i64 offset, double mean, double std, T* out)
//   Box-Muller on the word pairs (0, 1) and (2, 3) of each block: u1 = ((w0 >> 8) + 1) *
//   2^-24 in (0, 1], u2 = (w1 >> 8) * 2^-24; r = sqrt(-2 ln u1); the even word of the pair
//   gives mean + std * r cos(2 pi u2), the odd one mean + std * r sin(2 pi u2).
// seed and offset are passed as i64 bit patterns (the host's u64 values); offset < 2^62.
// Launch: 1-D, blockDim.x <= 256, any gridDim.x (grid-stride over blocks of 4 words).
#include "prelude.h"

#define RV_PHILOX_M0 0xD2511F53u
#define RV_PHILOX_M1 0xCD9E8D57u
#define RV_PHILOX_W0 0x9E3779B9u
#define RV_PHILOX_W1 0xBB67AE85u

struct rv_philox_block {
    rv_u32 w[4];
};

RV_DEVICE rv_philox_block rv_philox4x32_10(rv_u64 block, rv_u64 seed) {
    rv_u32 c0 = (rv_u32)block, c1 = (rv_u32)(block >> 32), c2 = 0u, c3 = 0u;
    rv_u32 k0 = (rv_u32)seed, k1 = (rv_u32)(seed >> 32);
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += RV_PHILOX_W0;
            k1 += RV_PHILOX_W1;
        }
        const rv_u32 hi0 = __umulhi(RV_PHILOX_M0, c0), lo0 = RV_PHILOX_M0 * c0;
        const rv_u32 hi1 = __umulhi(RV_PHILOX_M1, c2), lo1 = RV_PHILOX_M1 * c2;
        const rv_u32 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    rv_philox_block b;
    b.w[0] = c0, b.w[1] = c1, b.w[2] = c2, b.w[3] = c3;
    return b;
}

// Uniform in [0, 1) from one word, in the accumulate type.
RV_DEVICE float rv_rand_unit(rv_u32 w, float) { return (float)(w >> 8) * (1.0f / 16777216.0f); }
RV_DEVICE double rv_rand_unit(rv_u32 w, double) { return (double)w * (1.0 / 4294967296.0); }

struct rv_rand_bits {
    template <typename T> static __device__ __forceinline__ T value(const rv_philox_block& b, int lane, double, double) {
        return (T)b.w[lane];
    }
};
struct rv_rand_uniform {
    template <typename T> static __device__ __forceinline__ T value(const rv_philox_block& b, int lane, double lo, double hi) {
        typedef typename rv_type<T>::acc A;
        const A u = rv_rand_unit(b.w[lane], A(0));
        return rv_type<T>::from_acc((A)lo + ((A)hi - (A)lo) * u);
    }
};
struct rv_rand_normal {
    template <typename T> static __device__ __forceinline__ T value(const rv_philox_block& b, int lane, double mean, double std) {
        typedef typename rv_type<T>::acc A;
        const int pair = lane & 2;
        const A u1 = (A)((b.w[pair] >> 8) + 1u) * A(1.0 / 16777216.0);
        const A u2 = (A)(b.w[pair + 1] >> 8) * A(1.0 / 16777216.0);
        const A r = rv_sqrt(A(-2) * rv_log(u1));
        const A theta = A(6.283185307179586) * u2;
        const A z = (lane & 1) ? r * rv_sin(theta) : r * rv_cos(theta);
        return rv_type<T>::from_acc((A)mean + (A)std * z);
    }
};

template <typename T, typename Op>
__device__ void rv_random(rv_i64 numel, rv_i64 seed, rv_i64 offset, double a, double b, T* __restrict__ out) {
    const rv_i64 first = offset >> 2;
    const rv_i64 blocks = ((offset + numel + 3) >> 2) - first;
    for (rv_i64 k = rv_global_id(); k < blocks; k += rv_grid_stride()) {
        const rv_i64 block = first + k;
        const rv_philox_block w = rv_philox4x32_10((rv_u64)block, (rv_u64)seed);
#pragma unroll
        for (int lane = 0; lane < 4; ++lane) {
            const rv_i64 i = block * 4 + lane - offset;
            if (i >= 0 && i < numel) out[i] = Op::template value<T>(w, lane, a, b);
        }
    }
}

#define RV_EXPORT_RAND_BITS(NAME, T)                                                                               \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_i64 seed, rv_i64 offset, T* out) {                      \
        rv_random<T, rv_rand_bits>(numel, seed, offset, 0.0, 0.0, out);                                    \
    }
#define RV_EXPORT_RAND_UNIFORM(NAME, T)                                                                            \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_i64 seed, rv_i64 offset, double lo, double hi, T* out) { \
        rv_random<T, rv_rand_uniform>(numel, seed, offset, lo, hi, out);                                   \
    }
#define RV_EXPORT_RAND_NORMAL(NAME, T)                                                                             \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_i64 seed, rv_i64 offset, double mean, double std, T* out) { \
        rv_random<T, rv_rand_normal>(numel, seed, offset, mean, std, out);                                 \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_RAND_BITS(rand_bits_u32, rv_u32)
RV_EXPORT_RAND_UNIFORM(rand_uniform_f32, float)
RV_EXPORT_RAND_UNIFORM(rand_uniform_f16, rv_half)
RV_EXPORT_RAND_UNIFORM(rand_uniform_bf16, rv_bf16)
RV_EXPORT_RAND_UNIFORM(rand_uniform_f64, double)
RV_EXPORT_RAND_NORMAL(rand_normal_f32, float)
RV_EXPORT_RAND_NORMAL(rand_normal_f16, rv_half)
RV_EXPORT_RAND_NORMAL(rand_normal_f64, double)
RV_EXPORT_RAND_NORMAL(rand_normal_bf16, rv_bf16)
