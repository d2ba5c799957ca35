// Binary elementwise kernels with strided and broadcast operands.
// Arithmetic in f32 for f32/f16/bf16, f64 for f64, and in the integer type itself for
// u8/u32/i64 (wrapping; integer division by zero is undefined, as in C).
//
// Entry points  binary_<op>_<dtype>, op in add sub mul div maximum minimum,
//               dtype in f32 f16 bf16 f64 u8 u32 i64
//   (rv_i64 numel, rv_strided lhs_view, rv_strided rhs_view, const T* lhs, const T* rhs, T* out)
//   Both views carry the output dims (lhs_view.dims == rhs_view.dims == out shape) and
//   their own strides, 0 along a broadcast dimension; out is contiguous.
// Launch: 1-D, blockDim.x <= 256, any gridDim.x (grid-stride). Contiguous and row-broadcast
// operands take the prelude's 16-byte vector paths (rv_map2).
#include "prelude.h"

// The computation type of each storage type: floats widen (rv_type), integers stay.
template <typename T> struct rv_bin_type {
    typedef typename rv_type<T>::acc acc;
    static __device__ __forceinline__ acc load(T x) { return rv_type<T>::to_acc(x); }
    static __device__ __forceinline__ T store(acc x) { return rv_type<T>::from_acc(x); }
};
#define RV_BIN_INT(T)                                                                                       \
    template <> struct rv_bin_type<T> {                                                                    \
        typedef T acc;                                                                                     \
        static __device__ __forceinline__ T load(T x) { return x; }                                        \
        static __device__ __forceinline__ T store(T x) { return x; }                                       \
    };
RV_BIN_INT(rv_u8)
RV_BIN_INT(rv_u32)
RV_BIN_INT(rv_i64)
#undef RV_BIN_INT

struct rv_binary_add { template <typename A> static __device__ __forceinline__ A apply(A a, A b) { return a + b; } };
struct rv_binary_sub { template <typename A> static __device__ __forceinline__ A apply(A a, A b) { return a - b; } };
struct rv_binary_mul { template <typename A> static __device__ __forceinline__ A apply(A a, A b) { return a * b; } };
struct rv_binary_div { template <typename A> static __device__ __forceinline__ A apply(A a, A b) { return a / b; } };
// NaN-propagating for floats; plain comparison for integers (rv_isnan is float-only).
struct rv_binary_maximum {
    template <typename A> static __device__ __forceinline__ A apply(A a, A b) { return a > b ? a : b; }
    static __device__ __forceinline__ float apply(float a, float b) { return rv_max(a, b); }
    static __device__ __forceinline__ double apply(double a, double b) { return rv_max(a, b); }
};
struct rv_binary_minimum {
    template <typename A> static __device__ __forceinline__ A apply(A a, A b) { return a < b ? a : b; }
    static __device__ __forceinline__ float apply(float a, float b) { return rv_min(a, b); }
    static __device__ __forceinline__ double apply(double a, double b) { return rv_min(a, b); }
};

// lhs and out may be the same array (in place): each element is read before it is written.
template <typename T, typename Op>
__device__ void rv_binary(rv_i64 numel, const rv_strided& lv, const rv_strided& rv, const T* lhs, const T* rhs,
                          T* out) {
    typedef rv_bin_type<T> B;
    rv_map2(numel, lv, rv, lhs, rhs, out, [](T a, T b) { return B::store(Op::apply(B::load(a), B::load(b))); });
}

#define RV_EXPORT_BINARY(NAME, OP, T)                                                                              \
    RV_KERNEL void RV_BOUNDS NAME(rv_i64 numel, rv_strided lhs_view, rv_strided rhs_view, const T* lhs,    \
                                  const T* rhs, T* out) {                                                  \
        rv_binary<T, rv_binary_##OP>(numel, lhs_view, rhs_view, lhs, rhs, out);                            \
    }

// Instantiations (RV_EXPORT_* lines): the first macro argument is the exported symbol.
RV_EXPORT_BINARY(binary_add_f32, add, float)
RV_EXPORT_BINARY(binary_add_f16, add, rv_half)
RV_EXPORT_BINARY(binary_add_bf16, add, rv_bf16)
RV_EXPORT_BINARY(binary_add_f64, add, double)
RV_EXPORT_BINARY(binary_add_u8, add, rv_u8)
RV_EXPORT_BINARY(binary_add_u32, add, rv_u32)
RV_EXPORT_BINARY(binary_add_i64, add, rv_i64)
RV_EXPORT_BINARY(binary_sub_f32, sub, float)
RV_EXPORT_BINARY(binary_sub_f16, sub, rv_half)
RV_EXPORT_BINARY(binary_sub_bf16, sub, rv_bf16)
RV_EXPORT_BINARY(binary_sub_f64, sub, double)
RV_EXPORT_BINARY(binary_sub_u8, sub, rv_u8)
RV_EXPORT_BINARY(binary_sub_u32, sub, rv_u32)
RV_EXPORT_BINARY(binary_sub_i64, sub, rv_i64)
RV_EXPORT_BINARY(binary_mul_f32, mul, float)
RV_EXPORT_BINARY(binary_mul_f16, mul, rv_half)
RV_EXPORT_BINARY(binary_mul_bf16, mul, rv_bf16)
RV_EXPORT_BINARY(binary_mul_f64, mul, double)
RV_EXPORT_BINARY(binary_mul_u8, mul, rv_u8)
RV_EXPORT_BINARY(binary_mul_u32, mul, rv_u32)
RV_EXPORT_BINARY(binary_mul_i64, mul, rv_i64)
RV_EXPORT_BINARY(binary_div_f32, div, float)
RV_EXPORT_BINARY(binary_div_f16, div, rv_half)
RV_EXPORT_BINARY(binary_div_bf16, div, rv_bf16)
RV_EXPORT_BINARY(binary_div_f64, div, double)
RV_EXPORT_BINARY(binary_div_u8, div, rv_u8)
RV_EXPORT_BINARY(binary_div_u32, div, rv_u32)
RV_EXPORT_BINARY(binary_div_i64, div, rv_i64)
RV_EXPORT_BINARY(binary_maximum_f32, maximum, float)
RV_EXPORT_BINARY(binary_maximum_f16, maximum, rv_half)
RV_EXPORT_BINARY(binary_maximum_bf16, maximum, rv_bf16)
RV_EXPORT_BINARY(binary_maximum_f64, maximum, double)
RV_EXPORT_BINARY(binary_maximum_u8, maximum, rv_u8)
RV_EXPORT_BINARY(binary_maximum_u32, maximum, rv_u32)
RV_EXPORT_BINARY(binary_maximum_i64, maximum, rv_i64)
RV_EXPORT_BINARY(binary_minimum_f32, minimum, float)
RV_EXPORT_BINARY(binary_minimum_f16, minimum, rv_half)
RV_EXPORT_BINARY(binary_minimum_bf16, minimum, rv_bf16)
RV_EXPORT_BINARY(binary_minimum_f64, minimum, double)
RV_EXPORT_BINARY(binary_minimum_u8, minimum, rv_u8)
RV_EXPORT_BINARY(binary_minimum_u32, minimum, rv_u32)
RV_EXPORT_BINARY(binary_minimum_i64, minimum, rv_i64)
