// Reductions over one dimension, and softmax over the last dimension.
// Accumulation in f32 for f32/f16/bf16, f64 for f64. max/min propagate NaN (PyTorch's
// rule); argmax/argmin return the first index of the extreme value (a NaN counts as the
// extreme), as u32.
//
// The input is contiguous and viewed as [outer, len, inner]; the host makes any other
// layout contiguous first. Two launch shapes:
//
// reduce_<op>_lastdim_<dtype>   (inner == 1)  op in sum max min argmax argmin
//   (rv_i64 outer, rv_i64 len, const T* in, O* out)    out [outer]; O = T, or rv_u32 for arg*
//   One block per row (grid-stride over rows): blockDim.x a multiple of warpSize, <= 256
//   (256 recommended), any gridDim.x. Warp shuffles (reading warpSize) then one shared
//   array of RV_MAX_WARPS partials.
// reduce_<op>_strided_<dtype>   (inner > 1)
//   (rv_i64 outer, rv_i64 len, rv_i64 inner, const T* in, O* out)    out [outer, inner]
//   One thread per output element, looping over len; neighbouring threads read
//   neighbouring inner elements (coalesced). 1-D launch over outer*inner, blockDim.x <= 256.
// softmax_lastdim_<dtype>  (rv_i64 rows, rv_i64 cols, const T* in, T* out)
//   out[r, :] = exp(in[r, :] - max) / sum(exp(in[r, :] - max)); launch as reduce_*_lastdim.
// log_softmax_lastdim_<dtype>  same arguments: in - max - log(sum(exp(in - max))).
// exact_channel_sums_<dtype>   dtype in f32 f16 bf16
//   (rv_strided view, const T* in, rv_i64 per_block, rv_u64* buckets, rv_u32* non_finite)
//   `view` has dims [C, rows, cols] and the source's strides. Per channel c, every value
//   (as f32) adds its signed 24-bit significand into buckets[c*256 + biased exponent]
//   (subnormals into bucket 1): integer additions, so the result does not depend on the
//   order or grouping of the values -- a sum over tiles equals the sum over the whole map
//   bit for bit. An inf or NaN sets non_finite[c]. i64 sums as two's complement u64.
//   Launch: grid (ceil(rows*cols / per_block), C, 1), blockDim.x 256 (any multiple of 32);
//   buckets and non_finite zeroed by the host.
#include "prelude.h"

// A running (value, index) pair for argmax/argmin. `better` decides whether b replaces a;
// ties keep the smaller index so the result does not depend on the reduction order.
template <bool MAX>
struct rv_arg {
    template <typename A> static __device__ __forceinline__ bool better(A bv, int bi, A av, int ai) {
        const bool an = rv_isnan(av), bn = rv_isnan(bv);
        if (an || bn) return bn && (!an || bi < ai);
        if (bv == av) return bi < ai;
        return MAX ? (bv > av) : (bv < av);
    }
};

template <typename A, typename Op> RV_DEVICE A rv_identity();
template <> __device__ __forceinline__ float rv_identity<float, rv_op_sum>() { return 0.0f; }
template <> __device__ __forceinline__ double rv_identity<double, rv_op_sum>() { return 0.0; }
template <> __device__ __forceinline__ float rv_identity<float, rv_op_max>() { return rv_lowest<float>(); }
template <> __device__ __forceinline__ double rv_identity<double, rv_op_max>() { return rv_lowest<double>(); }
template <> __device__ __forceinline__ float rv_identity<float, rv_op_min>() { return rv_highest<float>(); }
template <> __device__ __forceinline__ double rv_identity<double, rv_op_min>() { return rv_highest<double>(); }

template <typename T, typename Op>
__device__ void rv_reduce_lastdim(rv_i64 outer, rv_i64 len, const T* __restrict__ in, T* __restrict__ out) {
    typedef typename rv_type<T>::acc A;
    __shared__ A scratch[RV_MAX_WARPS];
    for (rv_i64 row = blockIdx.x; row < outer; row += gridDim.x) {
        const T* x = in + row * len;
        A v = rv_identity<A, Op>();
        for (rv_i64 j = threadIdx.x; j < len; j += blockDim.x) v = Op::apply(v, rv_type<T>::to_acc(x[j]));
        v = rv_block_reduce<Op>(v, scratch);
        if (threadIdx.x == 0) out[row] = rv_type<T>::from_acc(v);
    }
}

template <typename T, typename Op>
__device__ void rv_reduce_strided(rv_i64 outer, rv_i64 len, rv_i64 inner, const T* __restrict__ in,
                                  T* __restrict__ out) {
    typedef typename rv_type<T>::acc A;
    const rv_i64 numel = outer * inner;
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        const rv_i64 o = i / inner, e = i - o * inner;
        const T* x = in + o * len * inner + e;
        A v = rv_identity<A, Op>();
        for (rv_i64 j = 0; j < len; ++j) v = Op::apply(v, rv_type<T>::to_acc(x[j * inner]));
        out[i] = rv_type<T>::from_acc(v);
    }
}

template <typename T, bool MAX>
__device__ void rv_argreduce_lastdim(rv_i64 outer, rv_i64 len, const T* __restrict__ in, rv_u32* __restrict__ out) {
    typedef typename rv_type<T>::acc A;
    __shared__ A sv[RV_MAX_WARPS];
    __shared__ int si[RV_MAX_WARPS];
    const int w = warpSize;
    for (rv_i64 row = blockIdx.x; row < outer; row += gridDim.x) {
        const T* x = in + row * len;
        A v = MAX ? rv_lowest<A>() : rv_highest<A>();
        int idx = 0x7fffffff;
        for (rv_i64 j = threadIdx.x; j < len; j += blockDim.x) {
            const A y = rv_type<T>::to_acc(x[j]);
            if (rv_arg<MAX>::better(y, (int)j, v, idx)) { v = y; idx = (int)j; }
        }
        for (int off = w / 2; off > 0; off >>= 1) {
            const A ov = rv_shfl_xor(v, off, w);
            const int oi = rv_shfl_xor(idx, off, w);
            if (rv_arg<MAX>::better(ov, oi, v, idx)) { v = ov; idx = oi; }
        }
        if (rv_lane() == 0) { sv[rv_warp_id()] = v; si[rv_warp_id()] = idx; }
        __syncthreads();
        if (threadIdx.x == 0) {
            const int nwarps = (int)((blockDim.x + w - 1) / w);
            for (int k = 1; k < nwarps; ++k)
                if (rv_arg<MAX>::better(sv[k], si[k], sv[0], si[0])) { sv[0] = sv[k]; si[0] = si[k]; }
            // A row of length 0 has no index; 0 is written rather than garbage.
            out[row] = len > 0 ? (rv_u32)si[0] : 0u;
        }
        __syncthreads();
    }
}

template <typename T, bool MAX>
__device__ void rv_argreduce_strided(rv_i64 outer, rv_i64 len, rv_i64 inner, const T* __restrict__ in,
                                     rv_u32* __restrict__ out) {
    typedef typename rv_type<T>::acc A;
    const rv_i64 numel = outer * inner;
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        const rv_i64 o = i / inner, e = i - o * inner;
        const T* x = in + o * len * inner + e;
        A v = MAX ? rv_lowest<A>() : rv_highest<A>();
        int idx = 0;
        for (rv_i64 j = 0; j < len; ++j) {
            const A y = rv_type<T>::to_acc(x[j * inner]);
            if (j == 0 || rv_arg<MAX>::better(y, (int)j, v, idx)) { v = y; idx = (int)j; }
        }
        out[i] = (rv_u32)idx;
    }
}

template <typename T, bool LOG>
__device__ void rv_softmax_lastdim(rv_i64 rows, rv_i64 cols, const T* __restrict__ in, T* __restrict__ out) {
    typedef typename rv_type<T>::acc A;
    __shared__ A scratch[RV_MAX_WARPS];
    for (rv_i64 row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* x = in + row * cols;
        T* y = out + row * cols;
        A m = rv_lowest<A>();
        for (rv_i64 j = threadIdx.x; j < cols; j += blockDim.x) m = rv_max(m, rv_type<T>::to_acc(x[j]));
        m = rv_block_reduce<rv_op_max>(m, scratch);
        A s = A(0);
        for (rv_i64 j = threadIdx.x; j < cols; j += blockDim.x) s += rv_exp(rv_type<T>::to_acc(x[j]) - m);
        s = rv_block_reduce<rv_op_sum>(s, scratch);
        if (LOG) {
            const A shift = m + rv_log(s);
            for (rv_i64 j = threadIdx.x; j < cols; j += blockDim.x)
                y[j] = rv_type<T>::from_acc(rv_type<T>::to_acc(x[j]) - shift);
        } else {
            const A inv = A(1) / s;
            for (rv_i64 j = threadIdx.x; j < cols; j += blockDim.x)
                y[j] = rv_type<T>::from_acc(rv_exp(rv_type<T>::to_acc(x[j]) - m) * inv);
        }
    }
}

template <typename T>
__device__ void rv_exact_channel_sums(const rv_strided& v, const T* __restrict__ in, rv_i64 per_block,
                                      rv_u64* __restrict__ buckets, rv_u32* __restrict__ non_finite) {
    __shared__ rv_u64 acc[256];
    for (int i = threadIdx.x; i < 256; i += blockDim.x) acc[i] = 0;
    __syncthreads();
    const unsigned cols = (unsigned)v.dims[2];
    const rv_i64 n = v.dims[1] * v.dims[2];
    const rv_i64 begin = (rv_i64)blockIdx.x * per_block;
    const rv_i64 end = begin + per_block < n ? begin + per_block : n;
    const T* base = in + (rv_i64)blockIdx.y * v.strides[0];
    const bool flat = v.strides[2] == 1 && v.strides[1] == (rv_i64)cols;
    bool bad = false;
    // Each thread keeps the sums of the last 8 exponents it met (direct-mapped by the low
    // bits, so neighbouring binades do not evict each other) and adds a sum to the shared
    // bucket only when its slot is taken over: one shared 64-bit atomic per value, all of
    // a block's values aiming at a handful of buckets, made this kernel 18% of Real-CUGAN's
    // kernel time on the H200. Integer sums, so the result is the same bit for bit. Eight
    // named slots, not an array: an indexed array went to the stack frame.
    rv_u64 s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    rv_u32 t0 = 0, t1 = 0, t2 = 0, t3 = 0, t4 = 0, t5 = 0, t6 = 0, t7 = 0;
#define RV_EXACT_SLOT(J)                                  \
    case J:                                               \
        if (t##J != b) {                                  \
            if (t##J != 0) atomicAdd(&acc[t##J], s##J);   \
            t##J = b;                                     \
            s##J = 0;                                     \
        }                                                 \
        s##J += val;                                      \
        break;
    for (rv_i64 i = begin + threadIdx.x; i < end; i += blockDim.x) {
        rv_i64 at = i;
        if (!flat) {
            const unsigned y = (unsigned)i / cols, x = (unsigned)i - y * cols;
            at = (rv_i64)y * v.strides[1] + (rv_i64)x * v.strides[2];
        }
        const rv_u32 bits = __float_as_uint(rv_type<T>::to_acc(base[at]));
        const rv_u32 e = (bits >> 23) & 0xffu;
        if (e == 0xffu) {
            bad = true;
            continue;
        }
        const rv_u64 frac = bits & 0x7fffffu;
        const rv_u64 sig = e == 0 ? frac : (frac | (1u << 23));
        const rv_u64 val = (bits >> 31) ? (rv_u64)0 - sig : sig;
        const rv_u32 b = e == 0 ? 1u : e;  // bucket 0 is never used: tag 0 = empty slot
        switch (b & 7u) {
            RV_EXACT_SLOT(0)
            RV_EXACT_SLOT(1)
            RV_EXACT_SLOT(2)
            RV_EXACT_SLOT(3)
            RV_EXACT_SLOT(4)
            RV_EXACT_SLOT(5)
            RV_EXACT_SLOT(6)
            RV_EXACT_SLOT(7)
        }
    }
#undef RV_EXACT_SLOT
    if (t0 != 0) atomicAdd(&acc[t0], s0);
    if (t1 != 0) atomicAdd(&acc[t1], s1);
    if (t2 != 0) atomicAdd(&acc[t2], s2);
    if (t3 != 0) atomicAdd(&acc[t3], s3);
    if (t4 != 0) atomicAdd(&acc[t4], s4);
    if (t5 != 0) atomicAdd(&acc[t5], s5);
    if (t6 != 0) atomicAdd(&acc[t6], s6);
    if (t7 != 0) atomicAdd(&acc[t7], s7);
    if (bad) atomicOr(&non_finite[blockIdx.y], 1u);
    __syncthreads();
    for (int i = threadIdx.x; i < 256; i += blockDim.x)
        if (acc[i] != 0) atomicAdd(&buckets[(rv_i64)blockIdx.y * 256 + i], acc[i]);
}

// f16: every value is an integer multiple of 2^-24 below 2^40 of them, so a thread adds its
// values exactly in one i64 of that unit (no exponent buckets, no divergent slots), the block
// adds its threads' sums in one shared i64 (below 2^54: 64 values per thread), and the block
// total goes to the buckets of 2^-24, 2^0 and 2^24 (biased f32 exponents 126, 150, 174) as
// two 24-bit digits and a signed top. The buckets then hold the same exact value as the
// per-exponent layout, and the host's sum is a function of that value alone.
__device__ void rv_exact_channel_sums_fixed(const rv_strided& v, const rv_half* __restrict__ in, rv_i64 per_block,
                                            rv_u64* __restrict__ buckets, rv_u32* __restrict__ non_finite) {
    __shared__ rv_u64 block_sum;
    if (threadIdx.x == 0) block_sum = 0;
    __syncthreads();
    const unsigned cols = (unsigned)v.dims[2];
    const rv_i64 n = v.dims[1] * v.dims[2];
    const rv_i64 begin = (rv_i64)blockIdx.x * per_block;
    const rv_i64 end = begin + per_block < n ? begin + per_block : n;
    const rv_half* base = in + (rv_i64)blockIdx.y * v.strides[0];
    const bool flat = v.strides[2] == 1 && v.strides[1] == (rv_i64)cols;
    bool bad = false;
    rv_i64 acc = 0;
    for (rv_i64 i = begin + threadIdx.x; i < end; i += blockDim.x) {
        rv_i64 at = i;
        if (!flat) {
            const unsigned y = (unsigned)i / cols, x = (unsigned)i - y * cols;
            at = (rv_i64)y * v.strides[1] + (rv_i64)x * v.strides[2];
        }
        const rv_u32 bits = rv_bits(base[at]);
        const rv_u32 e = (bits >> 10) & 31u;
        bad |= e == 31u;
        const rv_u32 frac = bits & 0x3ffu;
        // value = sig · 2^(e-25) = (sig << (e-1)) · 2^-24; subnormals frac · 2^-24.
        const rv_i64 fixed = e == 0 ? (rv_i64)frac : (rv_i64)(frac | 0x400u) << (e - 1);
        acc += e == 31u ? 0 : ((bits >> 15) ? -fixed : fixed);
    }
    atomicAdd(&block_sum, (rv_u64)acc);
    if (bad) atomicOr(&non_finite[blockIdx.y], 1u);
    __syncthreads();
    if (threadIdx.x == 0 && block_sum != 0) {
        const rv_i64 total = (rv_i64)block_sum;
        rv_u64* b = buckets + (rv_i64)blockIdx.y * 256;
        atomicAdd(&b[126], (rv_u64)(total & 0xffffff));
        atomicAdd(&b[150], (rv_u64)((total >> 24) & 0xffffff));
        atomicAdd(&b[174], (rv_u64)(total >> 48));
    }
}

template <typename T>
__device__ void rv_exact_channel_sums_of(const rv_strided& v, const T* in, rv_i64 per_block, rv_u64* buckets,
                                         rv_u32* non_finite) {
    rv_exact_channel_sums<T>(v, in, per_block, buckets, non_finite);
}
__device__ void rv_exact_channel_sums_of(const rv_strided& v, const rv_half* in, rv_i64 per_block, rv_u64* buckets,
                                         rv_u32* non_finite) {
    rv_exact_channel_sums_fixed(v, in, per_block, buckets, non_finite);
}

#define RV_EXPORT_EXACT_SUMS(NAME, T)                                                                              \
    RV_KERNEL void RV_BOUNDS NAME(rv_strided view, const T* in, rv_i64 per_block, rv_u64* buckets,         \
                                  rv_u32* non_finite) {                                                    \
        rv_exact_channel_sums_of(view, in, per_block, buckets, non_finite);                                \
    }
#define RV_EXPORT_REDUCE_LASTDIM(NAME, OP, T)                                                                      \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 outer, rv_i64 len, const T* in, T* out) {                         \
        rv_reduce_lastdim<T, rv_op_##OP>(outer, len, in, out);                                             \
    }
#define RV_EXPORT_REDUCE_STRIDED(NAME, OP, T)                                                                      \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 outer, rv_i64 len, rv_i64 inner, const T* in, T* out) {           \
        rv_reduce_strided<T, rv_op_##OP>(outer, len, inner, in, out);                                      \
    }
#define RV_EXPORT_ARGREDUCE_LASTDIM(NAME, MAX, T)                                                                  \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 outer, rv_i64 len, const T* in, rv_u32* out) {                    \
        rv_argreduce_lastdim<T, MAX>(outer, len, in, out);                                                 \
    }
#define RV_EXPORT_ARGREDUCE_STRIDED(NAME, MAX, T)                                                                  \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 outer, rv_i64 len, rv_i64 inner, const T* in, rv_u32* out) {      \
        rv_argreduce_strided<T, MAX>(outer, len, inner, in, out);                                          \
    }
#define RV_EXPORT_SOFTMAX(NAME, LOG, T)                                                                            \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 rows, rv_i64 cols, const T* in, T* out) {                         \
        rv_softmax_lastdim<T, LOG>(rows, cols, in, out);                                                   \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_REDUCE_LASTDIM(reduce_sum_lastdim_f32, sum, float)
RV_EXPORT_REDUCE_LASTDIM(reduce_sum_lastdim_f16, sum, rv_half)
RV_EXPORT_REDUCE_LASTDIM(reduce_sum_lastdim_bf16, sum, rv_bf16)
RV_EXPORT_REDUCE_LASTDIM(reduce_sum_lastdim_f64, sum, double)
RV_EXPORT_REDUCE_STRIDED(reduce_sum_strided_f32, sum, float)
RV_EXPORT_REDUCE_STRIDED(reduce_sum_strided_f16, sum, rv_half)
RV_EXPORT_REDUCE_STRIDED(reduce_sum_strided_bf16, sum, rv_bf16)
RV_EXPORT_REDUCE_STRIDED(reduce_sum_strided_f64, sum, double)
RV_EXPORT_REDUCE_LASTDIM(reduce_max_lastdim_f32, max, float)
RV_EXPORT_REDUCE_LASTDIM(reduce_max_lastdim_f16, max, rv_half)
RV_EXPORT_REDUCE_LASTDIM(reduce_max_lastdim_bf16, max, rv_bf16)
RV_EXPORT_REDUCE_LASTDIM(reduce_max_lastdim_f64, max, double)
RV_EXPORT_REDUCE_STRIDED(reduce_max_strided_f32, max, float)
RV_EXPORT_REDUCE_STRIDED(reduce_max_strided_f16, max, rv_half)
RV_EXPORT_REDUCE_STRIDED(reduce_max_strided_bf16, max, rv_bf16)
RV_EXPORT_REDUCE_STRIDED(reduce_max_strided_f64, max, double)
RV_EXPORT_REDUCE_LASTDIM(reduce_min_lastdim_f32, min, float)
RV_EXPORT_REDUCE_LASTDIM(reduce_min_lastdim_f16, min, rv_half)
RV_EXPORT_REDUCE_LASTDIM(reduce_min_lastdim_bf16, min, rv_bf16)
RV_EXPORT_REDUCE_LASTDIM(reduce_min_lastdim_f64, min, double)
RV_EXPORT_REDUCE_STRIDED(reduce_min_strided_f32, min, float)
RV_EXPORT_REDUCE_STRIDED(reduce_min_strided_f16, min, rv_half)
RV_EXPORT_REDUCE_STRIDED(reduce_min_strided_bf16, min, rv_bf16)
RV_EXPORT_REDUCE_STRIDED(reduce_min_strided_f64, min, double)
RV_EXPORT_ARGREDUCE_LASTDIM(reduce_argmax_lastdim_f32, true, float)
RV_EXPORT_ARGREDUCE_LASTDIM(reduce_argmax_lastdim_f16, true, rv_half)
RV_EXPORT_ARGREDUCE_LASTDIM(reduce_argmax_lastdim_bf16, true, rv_bf16)
RV_EXPORT_ARGREDUCE_LASTDIM(reduce_argmax_lastdim_f64, true, double)
RV_EXPORT_ARGREDUCE_STRIDED(reduce_argmax_strided_f32, true, float)
RV_EXPORT_ARGREDUCE_STRIDED(reduce_argmax_strided_f16, true, rv_half)
RV_EXPORT_ARGREDUCE_STRIDED(reduce_argmax_strided_bf16, true, rv_bf16)
RV_EXPORT_ARGREDUCE_STRIDED(reduce_argmax_strided_f64, true, double)
RV_EXPORT_ARGREDUCE_LASTDIM(reduce_argmin_lastdim_f32, false, float)
RV_EXPORT_ARGREDUCE_LASTDIM(reduce_argmin_lastdim_f16, false, rv_half)
RV_EXPORT_ARGREDUCE_LASTDIM(reduce_argmin_lastdim_bf16, false, rv_bf16)
RV_EXPORT_ARGREDUCE_LASTDIM(reduce_argmin_lastdim_f64, false, double)
RV_EXPORT_ARGREDUCE_STRIDED(reduce_argmin_strided_f32, false, float)
RV_EXPORT_ARGREDUCE_STRIDED(reduce_argmin_strided_f16, false, rv_half)
RV_EXPORT_ARGREDUCE_STRIDED(reduce_argmin_strided_bf16, false, rv_bf16)
RV_EXPORT_ARGREDUCE_STRIDED(reduce_argmin_strided_f64, false, double)
RV_EXPORT_SOFTMAX(softmax_lastdim_f32, false, float)
RV_EXPORT_SOFTMAX(softmax_lastdim_f16, false, rv_half)
RV_EXPORT_SOFTMAX(softmax_lastdim_bf16, false, rv_bf16)
RV_EXPORT_SOFTMAX(softmax_lastdim_f64, false, double)
RV_EXPORT_SOFTMAX(log_softmax_lastdim_f32, true, float)
RV_EXPORT_SOFTMAX(log_softmax_lastdim_f16, true, rv_half)
RV_EXPORT_SOFTMAX(log_softmax_lastdim_bf16, true, rv_bf16)
RV_EXPORT_SOFTMAX(log_softmax_lastdim_f64, true, double)
RV_EXPORT_EXACT_SUMS(exact_channel_sums_f32, float)
RV_EXPORT_EXACT_SUMS(exact_channel_sums_f16, rv_half)
RV_EXPORT_EXACT_SUMS(exact_channel_sums_bf16, rv_bf16)
