// Comparisons, selection and the unary ops with a parameter that candle has and the
// elementwise module does not: cmp, where_cond, powf, elu.
//
// Entry points  cmp_<op>_<dtype>, op in eq ne lt le gt ge, dtype in f32 f16 bf16 f64 u8 u32 i64
//   (rv_i64 numel, rv_strided lhs_view, rv_strided rhs_view, const T* lhs, const T* rhs, rv_u8* out)
//   out[i] = (lhs op rhs) ? 1 : 0. Both views carry the output dims and their own strides
//   (0 along a broadcast dimension). Floats compare exactly (f16/bf16 widen to f32, which
//   is exact); NaN compares unequal to everything, as in C and Rust.
// Entry points  where_u8_<dtype>, every dtype
//   (rv_i64 numel, rv_strided mask_view, rv_strided true_view, rv_strided false_view,
//    const rv_u8* mask, const T* on_true, const T* on_false, T* out)
//   out[i] = mask != 0 ? on_true : on_false, each operand read through its own view.
// Entry points  unary_<op>_<dtype>, op in powf elu, dtype in f32 f16 bf16 f64
//   (rv_i64 numel, rv_strided src, const T* in, T* out, double param)
//   powf: in^param; elu: in >= 0 ? in : param * (exp(in) - 1). Same signature as the
//   elementwise module's unary kernels, so one host launch serves both.
// Launch: 1-D, blockDim.x <= 256, any gridDim.x (grid-stride). out is contiguous.
#include "prelude.h"

// The comparison type of each storage type: floats widen (exactly), integers stay.
template <typename T> struct rv_pw_cmp_type {
    typedef typename rv_type<T>::acc acc;
    static __device__ __forceinline__ acc load(T x) { return rv_type<T>::to_acc(x); }
};
#define RV_PW_INT(T)                                                                                        \
    template <> struct rv_pw_cmp_type<T> {                                                                 \
        typedef T acc;                                                                                     \
        static __device__ __forceinline__ T load(T x) { return x; }                                        \
    };
RV_PW_INT(rv_u8)
RV_PW_INT(rv_u32)
RV_PW_INT(rv_i64)
#undef RV_PW_INT

struct rv_cmp_eq { template <typename A> static __device__ __forceinline__ bool apply(A a, A b) { return a == b; } };
struct rv_cmp_ne { template <typename A> static __device__ __forceinline__ bool apply(A a, A b) { return a != b; } };
struct rv_cmp_lt { template <typename A> static __device__ __forceinline__ bool apply(A a, A b) { return a < b; } };
struct rv_cmp_le { template <typename A> static __device__ __forceinline__ bool apply(A a, A b) { return a <= b; } };
struct rv_cmp_gt { template <typename A> static __device__ __forceinline__ bool apply(A a, A b) { return a > b; } };
struct rv_cmp_ge { template <typename A> static __device__ __forceinline__ bool apply(A a, A b) { return a >= b; } };

template <typename T, typename Op>
__device__ void rv_cmp(rv_i64 numel, const rv_strided& lv, const rv_strided& rv, const T* __restrict__ lhs,
                       const T* __restrict__ rhs, rv_u8* __restrict__ out) {
    typedef rv_pw_cmp_type<T> C;
    const bool small = rv_is_small(numel);
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        rv_i64 a, b;
        rv_offset2(i, lv, rv, small, &a, &b);
        out[i] = Op::apply(C::load(lhs[a]), C::load(rhs[b])) ? (rv_u8)1 : (rv_u8)0;
    }
}

template <typename T>
__device__ void rv_where(rv_i64 numel, const rv_strided& mv, const rv_strided& tv, const rv_strided& fv,
                         const rv_u8* __restrict__ mask, const T* __restrict__ on_true, const T* __restrict__ on_false,
                         T* __restrict__ out) {
    const bool small = rv_is_small(numel);
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        const bool m = mask[rv_offset(i, mv, small)] != 0;
        out[i] = m ? on_true[rv_offset(i, tv, small)] : on_false[rv_offset(i, fv, small)];
    }
}

RV_DEVICE float rv_pw_pow(float x, float e) { return powf(x, e); }
RV_DEVICE double rv_pw_pow(double x, double e) { return pow(x, e); }

struct rv_unary_powf {
    template <typename A> static __device__ __forceinline__ A apply(A x, A e) { return rv_pw_pow(x, e); }
};
struct rv_unary_elu {
    template <typename A> static __device__ __forceinline__ A apply(A x, A alpha) {
        return x >= A(0) ? x : alpha * (rv_exp(x) - A(1));
    }
};

template <typename T, typename Op>
__device__ void rv_unary_param(rv_i64 numel, const rv_strided& src, const T* __restrict__ in, T* __restrict__ out,
                               double param) {
    typedef typename rv_type<T>::acc A;
    const A p = (A)param;
    const bool small = rv_is_small(numel);
    for (rv_i64 i = rv_global_id(); i < numel; i += rv_grid_stride()) {
        const A x = rv_type<T>::to_acc(in[rv_offset(i, src, small)]);
        out[i] = rv_type<T>::from_acc(Op::apply(x, p));
    }
}

#define RV_EXPORT_CMP(NAME, OP, T)                                                                                 \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_strided lhs_view, rv_strided rhs_view, const T* lhs,    \
                                  const T* rhs, rv_u8* out) {                                              \
        rv_cmp<T, rv_cmp_##OP>(numel, lhs_view, rhs_view, lhs, rhs, out);                                  \
    }
#define RV_EXPORT_WHERE(NAME, T)                                                                                   \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_strided mask_view, rv_strided true_view,                \
                                  rv_strided false_view, const rv_u8* mask, const T* on_true,              \
                                  const T* on_false, T* out) {                                             \
        rv_where<T>(numel, mask_view, true_view, false_view, mask, on_true, on_false, out);                \
    }
#define RV_EXPORT_UNARY_PARAM(NAME, OP, T)                                                                         \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_strided src, const T* in, T* out, double param) {       \
        rv_unary_param<T, rv_unary_##OP>(numel, src, in, out, param);                                      \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_CMP(cmp_eq_f32, eq, float)
RV_EXPORT_CMP(cmp_eq_f16, eq, rv_half)
RV_EXPORT_CMP(cmp_eq_bf16, eq, rv_bf16)
RV_EXPORT_CMP(cmp_eq_f64, eq, double)
RV_EXPORT_CMP(cmp_eq_u8, eq, rv_u8)
RV_EXPORT_CMP(cmp_eq_u32, eq, rv_u32)
RV_EXPORT_CMP(cmp_eq_i64, eq, rv_i64)
RV_EXPORT_CMP(cmp_ne_f32, ne, float)
RV_EXPORT_CMP(cmp_ne_f16, ne, rv_half)
RV_EXPORT_CMP(cmp_ne_bf16, ne, rv_bf16)
RV_EXPORT_CMP(cmp_ne_f64, ne, double)
RV_EXPORT_CMP(cmp_ne_u8, ne, rv_u8)
RV_EXPORT_CMP(cmp_ne_u32, ne, rv_u32)
RV_EXPORT_CMP(cmp_ne_i64, ne, rv_i64)
RV_EXPORT_CMP(cmp_lt_f32, lt, float)
RV_EXPORT_CMP(cmp_lt_f16, lt, rv_half)
RV_EXPORT_CMP(cmp_lt_bf16, lt, rv_bf16)
RV_EXPORT_CMP(cmp_lt_f64, lt, double)
RV_EXPORT_CMP(cmp_lt_u8, lt, rv_u8)
RV_EXPORT_CMP(cmp_lt_u32, lt, rv_u32)
RV_EXPORT_CMP(cmp_lt_i64, lt, rv_i64)
RV_EXPORT_CMP(cmp_le_f32, le, float)
RV_EXPORT_CMP(cmp_le_f16, le, rv_half)
RV_EXPORT_CMP(cmp_le_bf16, le, rv_bf16)
RV_EXPORT_CMP(cmp_le_f64, le, double)
RV_EXPORT_CMP(cmp_le_u8, le, rv_u8)
RV_EXPORT_CMP(cmp_le_u32, le, rv_u32)
RV_EXPORT_CMP(cmp_le_i64, le, rv_i64)
RV_EXPORT_CMP(cmp_gt_f32, gt, float)
RV_EXPORT_CMP(cmp_gt_f16, gt, rv_half)
RV_EXPORT_CMP(cmp_gt_bf16, gt, rv_bf16)
RV_EXPORT_CMP(cmp_gt_f64, gt, double)
RV_EXPORT_CMP(cmp_gt_u8, gt, rv_u8)
RV_EXPORT_CMP(cmp_gt_u32, gt, rv_u32)
RV_EXPORT_CMP(cmp_gt_i64, gt, rv_i64)
RV_EXPORT_CMP(cmp_ge_f32, ge, float)
RV_EXPORT_CMP(cmp_ge_f16, ge, rv_half)
RV_EXPORT_CMP(cmp_ge_bf16, ge, rv_bf16)
RV_EXPORT_CMP(cmp_ge_f64, ge, double)
RV_EXPORT_CMP(cmp_ge_u8, ge, rv_u8)
RV_EXPORT_CMP(cmp_ge_u32, ge, rv_u32)
RV_EXPORT_CMP(cmp_ge_i64, ge, rv_i64)
RV_EXPORT_WHERE(where_u8_f32, float)
RV_EXPORT_WHERE(where_u8_f16, rv_half)
RV_EXPORT_WHERE(where_u8_bf16, rv_bf16)
RV_EXPORT_WHERE(where_u8_f64, double)
RV_EXPORT_WHERE(where_u8_u8, rv_u8)
RV_EXPORT_WHERE(where_u8_u32, rv_u32)
RV_EXPORT_WHERE(where_u8_i64, rv_i64)
RV_EXPORT_UNARY_PARAM(unary_powf_f32, powf, float)
RV_EXPORT_UNARY_PARAM(unary_powf_f16, powf, rv_half)
RV_EXPORT_UNARY_PARAM(unary_powf_bf16, powf, rv_bf16)
RV_EXPORT_UNARY_PARAM(unary_powf_f64, powf, double)
RV_EXPORT_UNARY_PARAM(unary_elu_f32, elu, float)
RV_EXPORT_UNARY_PARAM(unary_elu_f16, elu, rv_half)
RV_EXPORT_UNARY_PARAM(unary_elu_bf16, elu, rv_bf16)
RV_EXPORT_UNARY_PARAM(unary_elu_f64, elu, double)
