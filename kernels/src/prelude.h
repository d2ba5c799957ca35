// rocm-vision kernel prelude: the one header every kernel source includes.
//
// The kernel sources are written once, in the C++ dialect that HIP (hipcc, hiprtc) and
// CUDA (nvcc, NVRTC) share. This header maps the few names that differ between the two
// toolkits onto names under our own prefix (rv_, RV_). It never defines or redefines a
// name the toolkits provide: a shim that did broke with a later ROCm release.
//
// It must compile in four settings:
//   hipcc / clang -x hip    (__HIP__ defined, headers from the ROCm include dir)
//   hiprtc                  (__HIPCC_RTC__ defined; hip_runtime, hip_fp16 and hip_bf16 are
//                            built into libhiprtc-builtins, no file system include path)
//   NVRTC                   (__CUDACC_RTC__; cuda_fp16.h / cuda_bf16.h found through -I)
//   nvcc                    (__CUDACC__)
// so it includes nothing but the toolkit's own fp16/bf16 (and, for hipcc, runtime)
// headers, and no C or C++ standard library header.
//
// Host code never sees this file: the Rust side mirrors the by-value structs (rv_strided,
// rv_conv2d) with #[repr(C)] types of the same size, checked by static_asserts here and
// by the kernels crate's tests.
//
// The matrix-core (MMA) layer is not here but in mma.h: only igemm_mma.hip uses it, and it
// includes that header after this one.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define RV_CUDA 1
#elif defined(__HIP__) || defined(__HIPCC_RTC__) || defined(__HIPCC__)
#define RV_HIP 1
#else
#error "rocm-vision kernels: compile with hipcc, hiprtc, nvcc or NVRTC"
#endif

#if defined(RV_HIP)
#if !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif
#include <hip/hip_fp16.h>
#include <hip/hip_bf16.h>
typedef __half rv_half;
typedef __hip_bfloat16 rv_bf16;
#else
#include <cuda_fp16.h>
#include <cuda_bf16.h>
typedef __half rv_half;
typedef __nv_bfloat16 rv_bf16;
#endif

// ---------------------------------------------------------------------------------------
// Fixed-width integers of our own: <stdint.h> is not available under hiprtc or NVRTC.
typedef signed char rv_i8;
typedef unsigned char rv_u8;
typedef unsigned short rv_u16;
typedef int rv_i32;
typedef unsigned int rv_u32;
typedef long long rv_i64;
typedef unsigned long long rv_u64;
static_assert(sizeof(rv_u16) == 2 && sizeof(rv_u32) == 4 && sizeof(rv_i64) == 8 && sizeof(rv_u64) == 8,
              "rocm-vision kernels assume LP64 integer sizes");
static_assert(sizeof(rv_half) == 2 && sizeof(rv_bf16) == 2, "16-bit float types must be 2 bytes");

// Every kernel entry point is an unmangled C symbol. A source defines its entry points
// through macros named RV_EXPORT_<KIND>, invoked once per symbol at the start of a line,
// `RV_EXPORT_<KIND>(symbol, ...)`, so that the list of entry points can be read off the
// source (the Rust registry's tests, scripts/kernel-check.sh and the hiprtc check do).
#define RV_KERNEL extern "C" __global__
#define RV_DEVICE static __device__ __forceinline__
// All kernels are compiled for at most this many threads per block, so that the register
// allocator can budget for it; the host must launch with blockDim.x*y*z <= RV_MAX_THREADS.
#define RV_MAX_THREADS 256
#define RV_BOUNDS __launch_bounds__(RV_MAX_THREADS)
// Warps are 32 (NVIDIA, RDNA wave32) or 64 (CDNA, RDNA wave64) lanes: the smallest one
// sizes the per-warp scratch arrays; the code reads warpSize for everything else.
#define RV_MIN_WARP 32
#define RV_MAX_WARPS (RV_MAX_THREADS / RV_MIN_WARP)

RV_DEVICE int rv_warp_size() { return warpSize; }
RV_DEVICE int rv_lane() { return (int)(threadIdx.x % (unsigned)warpSize); }
RV_DEVICE int rv_warp_id() { return (int)(threadIdx.x / (unsigned)warpSize); }

// Grid-stride loops: the host may cap gridDim.x, the kernel covers the rest.
RV_DEVICE rv_i64 rv_global_id() { return (rv_i64)blockIdx.x * blockDim.x + threadIdx.x; }
RV_DEVICE rv_i64 rv_grid_stride() { return (rv_i64)gridDim.x * blockDim.x; }

// ---------------------------------------------------------------------------------------
// Warp shuffles with an explicit width. CUDA only has the _sync forms; HIP's __shfl_xor
// works on the whole wavefront. Callers guarantee that every lane of the warp takes part
// (blockDim.x is a multiple of warpSize and no lane has returned early).
#if defined(RV_CUDA)
#define RV_FULL_MASK 0xffffffffu
RV_DEVICE float rv_shfl_xor(float v, int mask, int width) { return __shfl_xor_sync(RV_FULL_MASK, v, mask, width); }
RV_DEVICE double rv_shfl_xor(double v, int mask, int width) { return __shfl_xor_sync(RV_FULL_MASK, v, mask, width); }
RV_DEVICE int rv_shfl_xor(int v, int mask, int width) { return __shfl_xor_sync(RV_FULL_MASK, v, mask, width); }
RV_DEVICE unsigned rv_shfl_xor(unsigned v, int mask, int width) { return __shfl_xor_sync(RV_FULL_MASK, v, mask, width); }
RV_DEVICE float rv_shfl(float v, int lane, int width) { return __shfl_sync(RV_FULL_MASK, v, lane, width); }
#else
RV_DEVICE float rv_shfl_xor(float v, int mask, int width) { return __shfl_xor(v, mask, width); }
RV_DEVICE double rv_shfl_xor(double v, int mask, int width) { return __shfl_xor(v, mask, width); }
RV_DEVICE int rv_shfl_xor(int v, int mask, int width) { return __shfl_xor(v, mask, width); }
RV_DEVICE unsigned rv_shfl_xor(unsigned v, int mask, int width) { return __shfl_xor(v, mask, width); }
RV_DEVICE float rv_shfl(float v, int lane, int width) { return __shfl(v, lane, width); }
#endif

// ---------------------------------------------------------------------------------------
// Scalar conversions. rv_type<T> gives the arithmetic ("accumulate") type of a storage
// type -- f32 for f32/f16/bf16, f64 for f64 -- and the conversions to and from it.
template <typename T> struct rv_type;
template <> struct rv_type<float> {
    typedef float acc;
    static __device__ __forceinline__ float to_acc(float x) { return x; }
    static __device__ __forceinline__ float from_acc(float x) { return x; }
};
template <> struct rv_type<double> {
    typedef double acc;
    static __device__ __forceinline__ double to_acc(double x) { return x; }
    static __device__ __forceinline__ double from_acc(double x) { return x; }
};
template <> struct rv_type<rv_half> {
    typedef float acc;
    static __device__ __forceinline__ float to_acc(rv_half x) { return __half2float(x); }
    static __device__ __forceinline__ rv_half from_acc(float x) { return __float2half(x); }
};
template <> struct rv_type<rv_bf16> {
    typedef float acc;
    static __device__ __forceinline__ float to_acc(rv_bf16 x) { return __bfloat162float(x); }
    static __device__ __forceinline__ rv_bf16 from_acc(float x) { return __float2bfloat16(x); }
};

RV_DEVICE float rv_to_f32(float x) { return x; }
RV_DEVICE float rv_to_f32(double x) { return (float)x; }
RV_DEVICE float rv_to_f32(rv_half x) { return __half2float(x); }
RV_DEVICE float rv_to_f32(rv_bf16 x) { return __bfloat162float(x); }
RV_DEVICE double rv_to_f64(float x) { return (double)x; }
RV_DEVICE double rv_to_f64(double x) { return x; }
RV_DEVICE double rv_to_f64(rv_half x) { return (double)__half2float(x); }
RV_DEVICE double rv_to_f64(rv_bf16 x) { return (double)__bfloat162float(x); }

// Conversion between any two storage types, used by the cast kernels. Integers go
// through i64/u64 and floats through f32 (f64 through f64), so that no value is rounded
// twice where a direct conversion exists.
template <typename D> struct rv_convert;
template <> struct rv_convert<float> {
    template <typename S> static __device__ __forceinline__ float from(S x) { return (float)x; }
    static __device__ __forceinline__ float from(rv_half x) { return __half2float(x); }
    static __device__ __forceinline__ float from(rv_bf16 x) { return __bfloat162float(x); }
};
template <> struct rv_convert<double> {
    template <typename S> static __device__ __forceinline__ double from(S x) { return (double)x; }
    static __device__ __forceinline__ double from(rv_half x) { return (double)__half2float(x); }
    static __device__ __forceinline__ double from(rv_bf16 x) { return (double)__bfloat162float(x); }
};
template <> struct rv_convert<rv_half> {
    // HIP has no __double2half: f64 rounds through f32 (a double rounding, at most 1 ulp of f16).
    template <typename S> static __device__ __forceinline__ rv_half from(S x) { return __float2half((float)x); }
    static __device__ __forceinline__ rv_half from(rv_half x) { return x; }
    static __device__ __forceinline__ rv_half from(rv_bf16 x) { return __float2half(__bfloat162float(x)); }
};
template <> struct rv_convert<rv_bf16> {
    template <typename S> static __device__ __forceinline__ rv_bf16 from(S x) { return __float2bfloat16((float)x); }
    static __device__ __forceinline__ rv_bf16 from(rv_half x) { return __float2bfloat16(__half2float(x)); }
    static __device__ __forceinline__ rv_bf16 from(rv_bf16 x) { return x; }
};
// Float to integer: C casts (as candle's own CUDA kernels do); f16/bf16 widen to f32 first.
#define RV_INT_CONVERT(D)                                                                                   \
    template <> struct rv_convert<D> {                                                                     \
        template <typename S> static __device__ __forceinline__ D from(S x) { return (D)x; }               \
        static __device__ __forceinline__ D from(rv_half x) { return (D)__half2float(x); }                 \
        static __device__ __forceinline__ D from(rv_bf16 x) { return (D)__bfloat162float(x); }             \
    };
RV_INT_CONVERT(rv_u8)
RV_INT_CONVERT(rv_u32)
RV_INT_CONVERT(rv_i64)
#undef RV_INT_CONVERT

// ---------------------------------------------------------------------------------------
// Math on the accumulate types. Explicit f/non-f names, so that neither toolkit's overload
// set decides the precision.
RV_DEVICE float rv_exp(float x) { return expf(x); }
RV_DEVICE double rv_exp(double x) { return exp(x); }
// The logistic function. In f32 (f32/f16/bf16 storage) through the fast exp and divide:
// at memory bandwidth SiLU is otherwise bound by expf's and the IEEE division's
// instructions (0.52x the copy rate in f16 on the H200); their error (a few ulp) is far
// inside every tolerance of f32 storage and below f16/bf16 rounding.
RV_DEVICE float rv_sigmoid(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }
RV_DEVICE double rv_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
RV_DEVICE float rv_log(float x) { return logf(x); }
RV_DEVICE double rv_log(double x) { return log(x); }
RV_DEVICE float rv_sqrt(float x) { return sqrtf(x); }
RV_DEVICE double rv_sqrt(double x) { return sqrt(x); }
RV_DEVICE float rv_rsqrt(float x) { return rsqrtf(x); }
RV_DEVICE double rv_rsqrt(double x) { return rsqrt(x); }
RV_DEVICE float rv_abs(float x) { return fabsf(x); }
RV_DEVICE double rv_abs(double x) { return fabs(x); }
RV_DEVICE float rv_tanh(float x) { return tanhf(x); }
RV_DEVICE double rv_tanh(double x) { return tanh(x); }
RV_DEVICE float rv_erf(float x) { return erff(x); }
// Not inlined: inlined into a grid-stride loop, its many 64-bit constants are hoisted out of
// the loop into scalar registers, and the kernel runs out of them (an SGPR spill on RDNA3/4).
static __device__ __noinline__ double rv_erf(double x) { return erf(x); }
RV_DEVICE float rv_sin(float x) { return sinf(x); }
RV_DEVICE double rv_sin(double x) { return sin(x); }
RV_DEVICE float rv_cos(float x) { return cosf(x); }
RV_DEVICE double rv_cos(double x) { return cos(x); }
RV_DEVICE bool rv_isnan(float x) { return x != x; }
RV_DEVICE bool rv_isnan(double x) { return x != x; }
RV_DEVICE float rv_fma(float a, float b, float c) { return fmaf(a, b, c); }
RV_DEVICE double rv_fma(double a, double b, double c) { return fma(a, b, c); }
// max/min that propagate NaN (as PyTorch does), unlike fmaxf/fminf.
template <typename A> RV_DEVICE A rv_max(A a, A b) { return (a > b || rv_isnan(a)) ? a : b; }
template <typename A> RV_DEVICE A rv_min(A a, A b) { return (a < b || rv_isnan(a)) ? a : b; }
template <typename A> RV_DEVICE A rv_lowest();
template <> __device__ __forceinline__ float rv_lowest<float>() { return -__int_as_float(0x7f800000); }
template <> __device__ __forceinline__ double rv_lowest<double>() { return -__longlong_as_double(0x7ff0000000000000ll); }
template <typename A> RV_DEVICE A rv_highest() { return -rv_lowest<A>(); }

// ---------------------------------------------------------------------------------------
// Atomic add on every float storage type. f32/f64 use the toolkit's atomicAdd; the 16-bit
// types use a compare-and-swap loop on the aligned 32-bit word that holds them, which both
// toolkits support on every architecture we target (native 16-bit atomics differ by arch).
RV_DEVICE void rv_atomic_add(float* p, float v) { atomicAdd(p, v); }
RV_DEVICE void rv_atomic_add(double* p, double v) { atomicAdd(p, v); }
RV_DEVICE rv_u16 rv_bits(rv_half x) { return __half_as_ushort(x); }
RV_DEVICE rv_u16 rv_bits(rv_bf16 x) { return __bfloat16_as_ushort(x); }
template <typename H> RV_DEVICE H rv_from_bits(rv_u16 b);
template <> __device__ __forceinline__ rv_half rv_from_bits<rv_half>(rv_u16 b) { return __ushort_as_half(b); }
template <> __device__ __forceinline__ rv_bf16 rv_from_bits<rv_bf16>(rv_u16 b) { return __ushort_as_bfloat16(b); }
template <typename H>
RV_DEVICE void rv_atomic_add_16(H* p, float v) {
    rv_u64 addr = (rv_u64)p;
    unsigned* word = (unsigned*)(addr & ~(rv_u64)3);
    const unsigned shift = (addr & 2) ? 16u : 0u;
    unsigned old = *word, assumed;
    do {
        assumed = old;
        const H h = rv_from_bits<H>((rv_u16)((assumed >> shift) & 0xffffu));
        const rv_u16 bits = rv_bits(rv_type<H>::from_acc(rv_type<H>::to_acc(h) + v));
        const unsigned updated = (assumed & ~(0xffffu << shift)) | ((unsigned)bits << shift);
        old = atomicCAS(word, assumed, updated);
    } while (old != assumed);
}
RV_DEVICE void rv_atomic_add(rv_half* p, float v) { rv_atomic_add_16(p, v); }
RV_DEVICE void rv_atomic_add(rv_bf16* p, float v) { rv_atomic_add_16(p, v); }

// ---------------------------------------------------------------------------------------
// Reductions within a warp and a block. Every lane of the block must call them.
struct rv_op_sum {
    template <typename A> static __device__ __forceinline__ A apply(A a, A b) { return a + b; }
};
struct rv_op_max {
    template <typename A> static __device__ __forceinline__ A apply(A a, A b) { return rv_max(a, b); }
};
struct rv_op_min {
    template <typename A> static __device__ __forceinline__ A apply(A a, A b) { return rv_min(a, b); }
};

template <typename Op, typename A>
RV_DEVICE A rv_warp_reduce(A v) {
    const int w = warpSize;
    for (int off = w / 2; off > 0; off >>= 1) v = Op::apply(v, rv_shfl_xor(v, off, w));
    return v;
}

// Block-wide reduction; the result is returned to every thread. `scratch` is shared
// memory of RV_MAX_WARPS elements. Ends with a barrier, so scratch can be reused at once.
template <typename Op, typename A>
RV_DEVICE A rv_block_reduce(A v, A* scratch) {
    const int nwarps = (int)((blockDim.x + warpSize - 1) / warpSize);
    v = rv_warp_reduce<Op>(v);
    if (rv_lane() == 0) scratch[rv_warp_id()] = v;
    __syncthreads();
    A r = scratch[0];
    for (int i = 1; i < nwarps; ++i) r = Op::apply(r, scratch[i]);
    __syncthreads();
    return r;
}

// Welford/Chan running statistics (count, mean, M2), combined across lanes by shuffles:
// numerically safe where sum and sum of squares in f32 are not (16M-element groups).
struct rv_welford {
    float n, mean, m2;
};
RV_DEVICE rv_welford rv_welford_push(rv_welford s, float x) {
    s.n += 1.0f;
    const float d = x - s.mean;
    s.mean += d / s.n;
    s.m2 += d * (x - s.mean);
    return s;
}
RV_DEVICE rv_welford rv_welford_merge(rv_welford a, rv_welford b) {
    const float n = a.n + b.n;
    if (n == 0.0f) return a;
    const float d = b.mean - a.mean;
    const float fb = b.n / n;
    rv_welford r;
    r.n = n;
    r.mean = a.mean + d * fb;
    r.m2 = a.m2 + b.m2 + d * d * a.n * fb;
    return r;
}
RV_DEVICE rv_welford rv_welford_warp(rv_welford s) {
    const int w = warpSize;
    for (int off = w / 2; off > 0; off >>= 1) {
        rv_welford o;
        o.n = rv_shfl_xor(s.n, off, w);
        o.mean = rv_shfl_xor(s.mean, off, w);
        o.m2 = rv_shfl_xor(s.m2, off, w);
        s = rv_welford_merge(s, o);
    }
    return s;
}
// Block-wide Welford; result returned to every thread; ends with a barrier.
RV_DEVICE rv_welford rv_welford_block(rv_welford s, rv_welford* scratch) {
    const int nwarps = (int)((blockDim.x + warpSize - 1) / warpSize);
    s = rv_welford_warp(s);
    if (rv_lane() == 0) scratch[rv_warp_id()] = s;
    __syncthreads();
    rv_welford r = scratch[0];
    for (int i = 1; i < nwarps; ++i) r = rv_welford_merge(r, scratch[i]);
    __syncthreads();
    return r;
}

// ---------------------------------------------------------------------------------------
// Division by a run-time constant without a divide instruction (multiply-high and shift,
// Granlund-Montgomery), for index decomposition in hot loops. Valid for 0 <= n < 2^31
// and 1 <= d < 2^31.
struct rv_fastdiv {
    unsigned d, mul, shift;
};
RV_DEVICE rv_fastdiv rv_fastdiv_make(unsigned d) {
    rv_fastdiv f;
    f.d = d;
    unsigned s = 0;
    while (s < 32 && (1ull << s) < d) ++s;
    f.shift = s;
    f.mul = (unsigned)((((1ull << 32) * ((1ull << s) - d)) / d) + 1);
    return f;
}
RV_DEVICE unsigned rv_div(unsigned n, rv_fastdiv f) {
    return (unsigned)(((rv_u64)__umulhi(n, f.mul) + n) >> f.shift);
}
// n / d and n % d together.
RV_DEVICE unsigned rv_divmod(unsigned n, rv_fastdiv f, unsigned* rem) {
    const unsigned q = rv_div(n, f);
    *rem = n - q * f.d;
    return q;
}

// ---------------------------------------------------------------------------------------
// A strided view, passed by value. dims are the logical (output) shape, strides are in
// elements of the source (0 for a broadcast dimension), row-major (last dim fastest).
// contiguous != 0 promises strides == the row-major strides of dims, so the element
// offset is the linear index (no index arithmetic at all).
#define RV_MAX_DIMS 6
struct rv_strided {
    rv_i64 rank;
    rv_i64 contiguous;
    rv_i64 dims[RV_MAX_DIMS];
    rv_i64 strides[RV_MAX_DIMS];
};
static_assert(sizeof(rv_strided) == 112, "rv_strided layout is mirrored by kernels::StridedLayout (112 bytes)");

// Element offset of linear index i. `small` (numel < 2^31, so every index and dim fits
// 31 bits) selects 32-bit division, several times cheaper than 64-bit on GPUs.
//
// RV_DIM_LOOP: on CUDA the loops over dimensions are unrolled to RV_MAX_DIMS so that the
// by-value view is only indexed with constants: a run-time index makes every thread copy
// the parameter to local memory first (224 bytes per thread for two views, measured as the
// bottleneck of binary_add on the H200). AMD reads kernel arguments from the kernarg
// segment with scalar loads at any offset, and unrolled loops there cost SGPRs (they
// spilled on every target): the loops stay rolled.
#if defined(RV_CUDA)
#define RV_DIM_LOOP _Pragma("unroll")
#else
#define RV_DIM_LOOP _Pragma("unroll 1")
#endif
RV_DEVICE bool rv_is_small(rv_i64 numel) { return numel < 0x7fffffffll; }
RV_DEVICE rv_i64 rv_offset(rv_i64 i, const rv_strided& l, bool small) {
    if (l.contiguous) return i;
    rv_i64 off = 0;
    if (small) {
        unsigned u = (unsigned)i;
        RV_DIM_LOOP
        for (int d = RV_MAX_DIMS - 1; d >= 0; --d) {
            if (d >= l.rank) continue;
            const unsigned n = (unsigned)l.dims[d];
            const unsigned q = u / n;
            off += (rv_i64)(u - q * n) * l.strides[d];
            u = q;
        }
    } else {
        RV_DIM_LOOP
        for (int d = RV_MAX_DIMS - 1; d >= 0; --d) {
            if (d >= l.rank) continue;
            const rv_i64 q = i / l.dims[d];
            off += (i - q * l.dims[d]) * l.strides[d];
            i = q;
        }
    }
    return off;
}

// Offsets of linear index i in two views of the same dims (binary ops with broadcasting).
RV_DEVICE void rv_offset2(rv_i64 i, const rv_strided& a, const rv_strided& b, bool small, rv_i64* oa, rv_i64* ob) {
    const rv_i64 linear = i;
    if (a.contiguous && b.contiguous) {
        *oa = linear;
        *ob = linear;
        return;
    }
    rv_i64 x = 0, y = 0;
    if (small) {
        unsigned u = (unsigned)i;
        RV_DIM_LOOP
        for (int d = RV_MAX_DIMS - 1; d >= 0; --d) {
            if (d >= a.rank) continue;
            const unsigned n = (unsigned)a.dims[d];
            const unsigned q = u / n;
            const rv_i64 idx = (rv_i64)(u - q * n);
            x += idx * a.strides[d];
            y += idx * b.strides[d];
            u = q;
        }
    } else {
        RV_DIM_LOOP
        for (int d = RV_MAX_DIMS - 1; d >= 0; --d) {
            if (d >= a.rank) continue;
            const rv_i64 q = i / a.dims[d];
            const rv_i64 idx = i - q * a.dims[d];
            x += idx * a.strides[d];
            y += idx * b.strides[d];
            i = q;
        }
    }
    *oa = a.contiguous ? linear : x;
    *ob = b.contiguous ? linear : y;
}

// ---------------------------------------------------------------------------------------
// Elementwise maps with vector fast paths: out[i] = f(a[i]) and out[i] = f(a[i], b[i]) for
// views a, b of the output's dims, out contiguous. At memory bandwidth the index
// arithmetic of the strided path is the bottleneck, so:
//   1. every view contiguous and every pointer aligned: N elements per 16-byte vector
//      (N = 16 / the larger element size), no index arithmetic; the tail element-wise;
//   2. every view's innermost dimension contiguous (stride 1) or broadcast (stride 0, a
//      per-channel bias or a scalar) and a multiple of N long: one index computation per
//      vector of N elements (they lie in one row); a broadcast operand is splat;
//   3. anything else: element by element through the strides.
template <typename T, int N> struct rv_vec_bytes { static constexpr int value = (int)sizeof(T) * N; };
template <typename T, int N>
struct alignas(rv_vec_bytes<T, N>::value) rv_vec {
    T e[N];
};

RV_DEVICE bool rv_aligned(const void* p, int bytes) { return ((rv_u64)p & (rv_u64)(bytes - 1)) == 0; }

// The innermost stride of a view whose rows the vector paths can read, else -1.
RV_DEVICE rv_i64 rv_row_stride(const rv_strided& v, int n) {
    rv_i64 inner = 0, s = -1;
    RV_DIM_LOOP
    for (int d = 0; d < RV_MAX_DIMS; ++d) // constant indices on CUDA: see rv_offset
        if (d == v.rank - 1) {
            inner = v.dims[d];
            s = v.contiguous ? 1 : v.strides[d];
        }
    return (inner > 0 && inner % n == 0 && (s == 0 || s == 1)) ? s : -1;
}

// N elements of a row starting at p with innermost stride s (0 or 1) into x.
template <typename T, int N> RV_DEVICE void rv_load_row(const T* p, rv_i64 s, T (&x)[N]) {
    if (s == 0) {
        const T v = *p;
#pragma unroll
        for (int j = 0; j < N; ++j) x[j] = v;
    } else if (rv_aligned(p, (int)sizeof(T) * N)) {
        const rv_vec<T, N> v = *(const rv_vec<T, N>*)p;
#pragma unroll
        for (int j = 0; j < N; ++j) x[j] = v.e[j];
    } else {
#pragma unroll
        for (int j = 0; j < N; ++j) x[j] = p[j];
    }
}

template <typename S, typename D>
struct rv_lanes { static constexpr int n = 16 / (sizeof(S) > sizeof(D) ? sizeof(S) : sizeof(D)); };

template <typename S, typename D, typename F>
__device__ void rv_map1(rv_i64 numel, const rv_strided& av, const S* a, D* out, F f) {
    constexpr int N = rv_lanes<S, D>::n;
    typedef rv_vec<S, N> VS;
    typedef rv_vec<D, N> VD;
    const bool small = rv_is_small(numel);
    if (rv_aligned(out, (int)sizeof(VD))) {
        const rv_i64 nv = numel / N;
        if (av.contiguous && rv_aligned(a, (int)sizeof(VS))) {
            for (rv_i64 v = rv_global_id(); v < nv; v += rv_grid_stride()) {
                const VS x = ((const VS*)a)[v];
                VD y;
#pragma unroll
                for (int j = 0; j < N; ++j) y.e[j] = f(x.e[j]);
                ((VD*)out)[v] = y;
            }
            for (rv_i64 i = nv * N + rv_global_id(); i < numel; i += rv_grid_stride()) out[i] = f(a[i]);
            return;
        }
        // The row paths for 2-byte and 4-byte elements only: with 8-byte ones a vector is two
        // values, and each path is another copy of f (f64 sin/cos then spilled SGPRs on CDNA).
        const rv_i64 sa = N > 2 ? rv_row_stride(av, N) : -1;
        if (sa >= 0 && small && av.rank <= 2) {
            // A view of at most two dimensions after the host's coalescing: the row of a
            // vector with one multiply-high, not a division (constant indices: see rv_offset).
            const rv_fastdiv fd = rv_fastdiv_make((unsigned)(av.rank == 2 ? av.dims[1] : av.dims[0]));
            const rv_i64 ar = av.rank == 2 ? av.strides[0] : 0;
            for (rv_i64 v = rv_global_id(); v < nv; v += rv_grid_stride()) {
                unsigned col;
                const unsigned row = rv_divmod((unsigned)(v * N), fd, &col);
                S x[N];
                rv_load_row<S, N>(a + row * ar + col * sa, sa, x);
                VD y;
#pragma unroll
                for (int j = 0; j < N; ++j) y.e[j] = f(x[j]);
                ((VD*)out)[v] = y;
            }
            return;
        }
        if (sa >= 0) {
            for (rv_i64 v = rv_global_id(); v < nv; v += rv_grid_stride()) {
                S x[N];
                rv_load_row<S, N>(a + rv_offset(v * N, av, small), sa, x);
                VD y;
#pragma unroll
                for (int j = 0; j < N; ++j) y.e[j] = f(x[j]);
                ((VD*)out)[v] = y;
            }
            return;
        }
    }
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) out[i] = f(a[rv_offset(i, av, small)]);
}

template <typename S, typename D, typename F>
__device__ void rv_map2(rv_i64 numel, const rv_strided& av, const rv_strided& bv, const S* a, const S* b,
                        D* out, F f) {
    constexpr int N = rv_lanes<S, D>::n;
    typedef rv_vec<S, N> VS;
    typedef rv_vec<D, N> VD;
    const bool small = rv_is_small(numel);
    if (rv_aligned(out, (int)sizeof(VD))) {
        const rv_i64 nv = numel / N;
        if (av.contiguous && bv.contiguous && rv_aligned(a, (int)sizeof(VS)) && rv_aligned(b, (int)sizeof(VS))) {
            for (rv_i64 v = rv_global_id(); v < nv; v += rv_grid_stride()) {
                const VS x = ((const VS*)a)[v], y = ((const VS*)b)[v];
                VD z;
#pragma unroll
                for (int j = 0; j < N; ++j) z.e[j] = f(x.e[j], y.e[j]);
                ((VD*)out)[v] = z;
            }
            for (rv_i64 i = nv * N + rv_global_id(); i < numel; i += rv_grid_stride()) out[i] = f(a[i], b[i]);
            return;
        }
        // Row paths for 2-byte and 4-byte elements only (see rv_map1).
        const rv_i64 sa = N > 2 ? rv_row_stride(av, N) : -1, sb = N > 2 ? rv_row_stride(bv, N) : -1;
        if (sa >= 0 && sb >= 0 && small && av.rank <= 2) {
            // Views of at most two dimensions after the host's coalescing (a per-channel
            // bias is [C, H*W], a scalar one dimension): the row of a vector with one
            // multiply-high, not a division (constant indices: see rv_offset).
            const rv_fastdiv fd = rv_fastdiv_make((unsigned)(av.rank == 2 ? av.dims[1] : av.dims[0]));
            const rv_i64 ar = av.rank == 2 ? av.strides[0] : 0, br = av.rank == 2 ? bv.strides[0] : 0;
            for (rv_i64 v = rv_global_id(); v < nv; v += rv_grid_stride()) {
                unsigned col;
                const unsigned row = rv_divmod((unsigned)(v * N), fd, &col);
                S x[N], y[N];
                rv_load_row<S, N>(a + row * ar + col * sa, sa, x);
                rv_load_row<S, N>(b + row * br + col * sb, sb, y);
                VD z;
#pragma unroll
                for (int j = 0; j < N; ++j) z.e[j] = f(x[j], y[j]);
                ((VD*)out)[v] = z;
            }
            return;
        }
        if (sa >= 0 && sb >= 0) {
            for (rv_i64 v = rv_global_id(); v < nv; v += rv_grid_stride()) {
                rv_i64 oa, ob;
                rv_offset2(v * N, av, bv, small, &oa, &ob);
                S x[N], y[N];
                rv_load_row<S, N>(a + oa, sa, x);
                rv_load_row<S, N>(b + ob, sb, y);
                VD z;
#pragma unroll
                for (int j = 0; j < N; ++j) z.e[j] = f(x[j], y[j]);
                ((VD*)out)[v] = z;
            }
            return;
        }
    }
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        rv_i64 oa, ob;
        rv_offset2(i, av, bv, small, &oa, &ob);
        out[i] = f(a[oa], b[ob]);
    }
}

// ---------------------------------------------------------------------------------------
// 2-D convolution geometry, passed by value (all kernels of conv.hip and igemm.hip).
// Forward conv: input [n, c, h, w], weights [k, c/groups, r, s] (OIHW), output
// [n, k, p, q]. Transposed conv: input [n, c, h, w], weights [c, k/groups, r, s],
// output [n, k, p, q]. Asymmetric padding: only the begin paddings enter the index math;
// the end paddings are expressed by the output size p, q, which the host computes.
// 1-D convolutions are 2-D ones with h = r = p = 1.
struct rv_conv2d {
    rv_i32 n, c, h, w;   // input batch, channels, height, width
    rv_i32 k, r, s;      // output channels, kernel height, kernel width
    rv_i32 p, q;         // output height, width
    rv_i32 stride_h, stride_w;
    rv_i32 pad_h, pad_w; // begin (top, left) padding
    rv_i32 dil_h, dil_w;
    rv_i32 groups;
};
static_assert(sizeof(rv_conv2d) == 64, "rv_conv2d layout is mirrored by kernels::Conv2dAbi (64 bytes)");

// ---------------------------------------------------------------------------------------
// A convolution's epilogue, passed by value: out = (act(acc + bias) + residual) * scale,
// in f32. act: 0 identity, 1 relu, 2 silu, 3 leaky relu (slope alpha), 4 gelu (tanh).
// Mirrored by kernels::EpilogueAbi; the host's definition is implicit_gemm::Epilogue.
struct rv_epilogue {
    rv_i32 act;
    float alpha;
    float scale;
    rv_i32 reserved;
};
static_assert(sizeof(rv_epilogue) == 16, "rv_epilogue layout is mirrored by kernels::EpilogueAbi (16 bytes)");

RV_DEVICE float rv_activate(float v, const rv_epilogue& e) {
    switch (e.act) {
    case 1: return v > 0.0f ? v : 0.0f;
    case 2: return v * rv_sigmoid(v);
    case 3: return v >= 0.0f ? v : v * e.alpha;
    case 4: return 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));
    default: return v;
    }
}
// `acc` with the bias already in; `res` 0 without a residual.
RV_DEVICE float rv_epilogue_apply(float acc, float res, const rv_epilogue& e) { return (rv_activate(acc, e) + res) * e.scale; }
