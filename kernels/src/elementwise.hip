// Unary elementwise kernels and affine: one thread per element, grid-stride loop.
// Arithmetic in f32 for f32/f16/bf16 and in f64 for f64 (rv_type<T>::acc).
//
// Entry points  unary_<op>_<dtype>, op in neg exp log sqrt abs relu silu gelu gelu_erf
//               sigmoid tanh sin cos recip sqr leaky_relu; dtype in f32 f16 bf16 f64
//   (rv_i64 numel, rv_strided src, const T* in, T* out, double param)
//   in is read through the view `src` (dims = the output shape); out is contiguous.
//   param is leaky_relu's negative slope; the other ops ignore it (one signature for all).
// Entry points  affine_<dtype>: out = in * mul + add
//   (rv_i64 numel, rv_strided src, const T* in, T* out, double mul, double add)
// Launch: 1-D, blockDim.x <= 256, any gridDim.x (grid-stride). Contiguous inputs take the
// prelude's 16-byte vector paths (rv_map1).
#include "prelude.h"

// gelu (tanh approximation, as PyTorch's approximate="tanh") and gelu_erf (exact).
#define RV_SQRT_2_OVER_PI 0.7978845608028654
#define RV_SQRT_1_2 0.7071067811865476

#define RV_UNARY_OP(NAME, EXPR)                                                                             \
    struct rv_unary_##NAME {                                                                               \
        template <typename A> static __device__ __forceinline__ A apply(A x, A param) {                    \
            (void)param;                                                                                   \
            return (EXPR);                                                                                 \
        }                                                                                                  \
    };
RV_UNARY_OP(neg, -x)
RV_UNARY_OP(exp, rv_exp(x))
RV_UNARY_OP(log, rv_log(x))
RV_UNARY_OP(sqrt, rv_sqrt(x))
RV_UNARY_OP(abs, rv_abs(x))
RV_UNARY_OP(relu, x > A(0) ? x : A(0))
RV_UNARY_OP(silu, x * rv_sigmoid(x))
RV_UNARY_OP(gelu, A(0.5) * x * (A(1) + rv_tanh(A(RV_SQRT_2_OVER_PI) * (x + A(0.044715) * x * x * x))))
RV_UNARY_OP(gelu_erf, A(0.5) * x * (A(1) + rv_erf(x * A(RV_SQRT_1_2))))
RV_UNARY_OP(sigmoid, rv_sigmoid(x))
RV_UNARY_OP(tanh, rv_tanh(x))
RV_UNARY_OP(sin, rv_sin(x))
RV_UNARY_OP(cos, rv_cos(x))
RV_UNARY_OP(recip, A(1) / x)
RV_UNARY_OP(sqr, x * x)
RV_UNARY_OP(leaky_relu, x >= A(0) ? x : x * param)

// in and out may be the same array (in place): each element is read before it is written.
template <typename T, typename Op>
__device__ void rv_unary(rv_i64 numel, const rv_strided& src, const T* in, T* out, double param) {
    typedef typename rv_type<T>::acc A;
    const A p = (A)param;
    rv_map1(numel, src, in, out, [p](T x) { return rv_type<T>::from_acc(Op::apply(rv_type<T>::to_acc(x), p)); });
}

template <typename T>
__device__ void rv_affine(rv_i64 numel, const rv_strided& src, const T* in, T* out, double mul, double add) {
    typedef typename rv_type<T>::acc A;
    const A m = (A)mul, a = (A)add;
    rv_map1(numel, src, in, out, [m, a](T x) { return rv_type<T>::from_acc(rv_fma(rv_type<T>::to_acc(x), m, a)); });
}

#define RV_EXPORT_UNARY(NAME, OP, T)                                                                               \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_strided src, const T* in, T* out, double param) {       \
        rv_unary<T, rv_unary_##OP>(numel, src, in, out, param);                                            \
    }
#define RV_EXPORT_AFFINE(NAME, T)                                                                                  \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_strided src, const T* in, T* out, double mul, double add) { \
        rv_affine<T>(numel, src, in, out, mul, add);                                                       \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_UNARY(unary_neg_f32, neg, float)
RV_EXPORT_UNARY(unary_neg_f16, neg, rv_half)
RV_EXPORT_UNARY(unary_neg_bf16, neg, rv_bf16)
RV_EXPORT_UNARY(unary_neg_f64, neg, double)
RV_EXPORT_UNARY(unary_exp_f32, exp, float)
RV_EXPORT_UNARY(unary_exp_f16, exp, rv_half)
RV_EXPORT_UNARY(unary_exp_bf16, exp, rv_bf16)
RV_EXPORT_UNARY(unary_exp_f64, exp, double)
RV_EXPORT_UNARY(unary_log_f32, log, float)
RV_EXPORT_UNARY(unary_log_f16, log, rv_half)
RV_EXPORT_UNARY(unary_log_bf16, log, rv_bf16)
RV_EXPORT_UNARY(unary_log_f64, log, double)
RV_EXPORT_UNARY(unary_sqrt_f32, sqrt, float)
RV_EXPORT_UNARY(unary_sqrt_f16, sqrt, rv_half)
RV_EXPORT_UNARY(unary_sqrt_bf16, sqrt, rv_bf16)
RV_EXPORT_UNARY(unary_sqrt_f64, sqrt, double)
RV_EXPORT_UNARY(unary_abs_f32, abs, float)
RV_EXPORT_UNARY(unary_abs_f16, abs, rv_half)
RV_EXPORT_UNARY(unary_abs_bf16, abs, rv_bf16)
RV_EXPORT_UNARY(unary_abs_f64, abs, double)
RV_EXPORT_UNARY(unary_relu_f32, relu, float)
RV_EXPORT_UNARY(unary_relu_f16, relu, rv_half)
RV_EXPORT_UNARY(unary_relu_bf16, relu, rv_bf16)
RV_EXPORT_UNARY(unary_relu_f64, relu, double)
RV_EXPORT_UNARY(unary_silu_f32, silu, float)
RV_EXPORT_UNARY(unary_silu_f16, silu, rv_half)
RV_EXPORT_UNARY(unary_silu_bf16, silu, rv_bf16)
RV_EXPORT_UNARY(unary_silu_f64, silu, double)
RV_EXPORT_UNARY(unary_gelu_f32, gelu, float)
RV_EXPORT_UNARY(unary_gelu_f16, gelu, rv_half)
RV_EXPORT_UNARY(unary_gelu_bf16, gelu, rv_bf16)
RV_EXPORT_UNARY(unary_gelu_f64, gelu, double)
RV_EXPORT_UNARY(unary_gelu_erf_f32, gelu_erf, float)
RV_EXPORT_UNARY(unary_gelu_erf_f16, gelu_erf, rv_half)
RV_EXPORT_UNARY(unary_gelu_erf_bf16, gelu_erf, rv_bf16)
RV_EXPORT_UNARY(unary_gelu_erf_f64, gelu_erf, double)
RV_EXPORT_UNARY(unary_sigmoid_f32, sigmoid, float)
RV_EXPORT_UNARY(unary_sigmoid_f16, sigmoid, rv_half)
RV_EXPORT_UNARY(unary_sigmoid_bf16, sigmoid, rv_bf16)
RV_EXPORT_UNARY(unary_sigmoid_f64, sigmoid, double)
RV_EXPORT_UNARY(unary_tanh_f32, tanh, float)
RV_EXPORT_UNARY(unary_tanh_f16, tanh, rv_half)
RV_EXPORT_UNARY(unary_tanh_bf16, tanh, rv_bf16)
RV_EXPORT_UNARY(unary_tanh_f64, tanh, double)
RV_EXPORT_UNARY(unary_sin_f32, sin, float)
RV_EXPORT_UNARY(unary_sin_f16, sin, rv_half)
RV_EXPORT_UNARY(unary_sin_bf16, sin, rv_bf16)
RV_EXPORT_UNARY(unary_sin_f64, sin, double)
RV_EXPORT_UNARY(unary_cos_f32, cos, float)
RV_EXPORT_UNARY(unary_cos_f16, cos, rv_half)
RV_EXPORT_UNARY(unary_cos_bf16, cos, rv_bf16)
RV_EXPORT_UNARY(unary_cos_f64, cos, double)
RV_EXPORT_UNARY(unary_recip_f32, recip, float)
RV_EXPORT_UNARY(unary_recip_f16, recip, rv_half)
RV_EXPORT_UNARY(unary_recip_bf16, recip, rv_bf16)
RV_EXPORT_UNARY(unary_recip_f64, recip, double)
RV_EXPORT_UNARY(unary_sqr_f32, sqr, float)
RV_EXPORT_UNARY(unary_sqr_f16, sqr, rv_half)
RV_EXPORT_UNARY(unary_sqr_bf16, sqr, rv_bf16)
RV_EXPORT_UNARY(unary_sqr_f64, sqr, double)
RV_EXPORT_UNARY(unary_leaky_relu_f32, leaky_relu, float)
RV_EXPORT_UNARY(unary_leaky_relu_f16, leaky_relu, rv_half)
RV_EXPORT_UNARY(unary_leaky_relu_bf16, leaky_relu, rv_bf16)
RV_EXPORT_UNARY(unary_leaky_relu_f64, leaky_relu, double)
RV_EXPORT_AFFINE(affine_f32, float)
RV_EXPORT_AFFINE(affine_f16, rv_half)
RV_EXPORT_AFFINE(affine_bf16, rv_bf16)
RV_EXPORT_AFFINE(affine_f64, double)
