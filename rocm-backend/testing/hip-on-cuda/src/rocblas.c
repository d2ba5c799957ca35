/*
 * librocblas.so of hip-on-cuda: the rocBLAS entry points rocm-backend calls
 * (rocm-backend/FFI.md), implemented over cuBLAS.
 *
 * TEST INFRASTRUCTURE, NOT A PRODUCT FEATURE (see ../README.md).
 *
 * Compiled against the real rocblas/rocblas.h, so every definition must match ROCm's.
 * (rocblas.h only forward-declares hipStream_t, so it can share this translation unit
 * with cuBLAS's headers; miopen.h cannot, see miopen_api.c.)
 *
 * Both libraries are column-major with the same (m, n, k, ld, stride) conventions, so a
 * strided-batched GEMM maps argument for argument. Differences handled here:
 *   - rocBLAS writes D = alpha*op(A)*op(B) + beta*C with C and D separate; cuBLAS updates
 *     C in place. When C and D differ and beta != 0, C is first copied into D (stream
 *     ordered) and cuBLAS then runs in place on D.
 *   - f32 compute never uses TF32: CUBLAS_COMPUTE_32F under CUBLAS_DEFAULT_MATH, as
 *     rocBLAS computes f32 in full f32. f16/bf16 inputs use tensor cores with f32
 *     accumulation, and CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION keeps split-K
 *     reductions in f32 too (rocBLAS's f32 compute type means f32 accumulation).
 */
#include <rocblas/rocblas.h>

#include <cublas_v2.h>
#include <cuda.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hoc_internal.h"

struct _rocblas_handle {
    cublasHandle_t cublas;
    hipStream_t stream; /* the stream set by rocblas_set_stream (NULL: the null stream) */
};

static rocblas_status logged(const char* fn, rocblas_status s) {
    if (s != rocblas_status_success && hoc_log_enabled())
        fprintf(stderr, "[hip-on-cuda] %s -> %s (%d)\n", fn, rocblas_status_to_string(s), (int)s);
    return s;
}
#define RETURN(s) return logged(__func__, (s))

static rocblas_status from_cublas(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return rocblas_status_success;
    case CUBLAS_STATUS_NOT_INITIALIZED: return rocblas_status_invalid_handle;
    case CUBLAS_STATUS_ALLOC_FAILED: return rocblas_status_memory_error;
    case CUBLAS_STATUS_INVALID_VALUE: return rocblas_status_invalid_value;
    case CUBLAS_STATUS_ARCH_MISMATCH: return rocblas_status_arch_mismatch;
    case CUBLAS_STATUS_MAPPING_ERROR: return rocblas_status_memory_error;
    case CUBLAS_STATUS_EXECUTION_FAILED: return rocblas_status_internal_error;
    case CUBLAS_STATUS_INTERNAL_ERROR: return rocblas_status_internal_error;
    case CUBLAS_STATUS_NOT_SUPPORTED: return rocblas_status_not_implemented;
    default: return rocblas_status_internal_error;
    }
}

const char* rocblas_status_to_string(rocblas_status status) {
    switch (status) {
    case rocblas_status_success: return "rocblas_status_success";
    case rocblas_status_invalid_handle: return "rocblas_status_invalid_handle";
    case rocblas_status_not_implemented: return "rocblas_status_not_implemented";
    case rocblas_status_invalid_pointer: return "rocblas_status_invalid_pointer";
    case rocblas_status_invalid_size: return "rocblas_status_invalid_size";
    case rocblas_status_memory_error: return "rocblas_status_memory_error";
    case rocblas_status_internal_error: return "rocblas_status_internal_error";
    case rocblas_status_perf_degraded: return "rocblas_status_perf_degraded";
    case rocblas_status_size_query_mismatch: return "rocblas_status_size_query_mismatch";
    case rocblas_status_size_increased: return "rocblas_status_size_increased";
    case rocblas_status_size_unchanged: return "rocblas_status_size_unchanged";
    case rocblas_status_invalid_value: return "rocblas_status_invalid_value";
    case rocblas_status_continue: return "rocblas_status_continue";
    case rocblas_status_check_numerics_fail: return "rocblas_status_check_numerics_fail";
    case rocblas_status_excluded_from_build: return "rocblas_status_excluded_from_build";
    case rocblas_status_arch_mismatch: return "rocblas_status_arch_mismatch";
    default: return "<undefined rocblas_status>";
    }
}

rocblas_status rocblas_create_handle(rocblas_handle* handle) {
    if (handle == NULL) RETURN(rocblas_status_invalid_handle);
    /* rocBLAS creates its handle on the HIP runtime's current device. */
    if (hoc_make_current() != 0) RETURN(rocblas_status_internal_error);
    struct _rocblas_handle* h = calloc(1, sizeof *h);
    if (h == NULL) RETURN(rocblas_status_memory_error);
    cublasStatus_t s = cublasCreate(&h->cublas);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetMathMode(h->cublas, CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION);
    /* alpha and beta are host values (rocBLAS's default pointer mode). */
    if (s == CUBLAS_STATUS_SUCCESS) s = cublasSetPointerMode(h->cublas, CUBLAS_POINTER_MODE_HOST);
    if (s != CUBLAS_STATUS_SUCCESS) {
        if (h->cublas != NULL) cublasDestroy(h->cublas);
        free(h);
        RETURN(from_cublas(s));
    }
    *handle = h;
    RETURN(rocblas_status_success);
}

rocblas_status rocblas_destroy_handle(rocblas_handle handle) {
    if (handle == NULL) RETURN(rocblas_status_invalid_handle);
    hoc_make_current();
    cublasStatus_t s = cublasDestroy(handle->cublas);
    free(handle);
    RETURN(from_cublas(s));
}

rocblas_status rocblas_set_stream(rocblas_handle handle, hipStream_t stream) {
    if (handle == NULL) RETURN(rocblas_status_invalid_handle);
    /* hipStream_t is this package's CUstream, which cuBLAS takes as a cudaStream_t. */
    cublasStatus_t s = cublasSetStream(handle->cublas, (cudaStream_t)stream);
    if (s == CUBLAS_STATUS_SUCCESS) handle->stream = stream;
    RETURN(from_cublas(s));
}

/* "<rocBLAS API version>-hip-on-cuda.cublas-<cuBLAS version>": the API level of the
 * headers this library implements, and the library that does the work. */
static void version_string(char* out, size_t size) {
    int major = 0, minor = 0, patch = 0;
    cublasGetProperty(MAJOR_VERSION, &major);
    cublasGetProperty(MINOR_VERSION, &minor);
    cublasGetProperty(PATCH_LEVEL, &patch);
    snprintf(out, size, "%d.%d.%d-hip-on-cuda.cublas-%d.%d.%d", ROCBLAS_VERSION_MAJOR, ROCBLAS_VERSION_MINOR,
             ROCBLAS_VERSION_PATCH, major, minor, patch);
}

rocblas_status rocblas_get_version_string_size(size_t* len) {
    if (len == NULL) RETURN(rocblas_status_invalid_pointer);
    char v[128];
    version_string(v, sizeof v);
    *len = strlen(v) + 1;
    RETURN(rocblas_status_success);
}

rocblas_status rocblas_get_version_string(char* buf, size_t len) {
    if (buf == NULL) RETURN(rocblas_status_invalid_pointer);
    char v[128];
    version_string(v, sizeof v);
    if (len < strlen(v) + 1) RETURN(rocblas_status_invalid_size);
    memcpy(buf, v, strlen(v) + 1);
    RETURN(rocblas_status_success);
}

static int elem_size(rocblas_datatype t) {
    switch (t) {
    case rocblas_datatype_f16_r:
    case rocblas_datatype_bf16_r: return 2;
    case rocblas_datatype_f32_r: return 4;
    case rocblas_datatype_f64_r: return 8;
    default: return 0;
    }
}

static cudaDataType cuda_type(rocblas_datatype t) {
    switch (t) {
    case rocblas_datatype_f16_r: return CUDA_R_16F;
    case rocblas_datatype_bf16_r: return CUDA_R_16BF;
    case rocblas_datatype_f64_r: return CUDA_R_64F;
    default: return CUDA_R_32F;
    }
}

/* D <- C for every batch (m x n column-major blocks), on the handle's stream. */
static rocblas_status copy_c_to_d(rocblas_handle handle, int es, rocblas_int m, rocblas_int n, const void* c,
                                  rocblas_int ldc, rocblas_stride stride_c, void* d, rocblas_int ldd,
                                  rocblas_stride stride_d, rocblas_int batch) {
    CUDA_MEMCPY2D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.srcPitch = (size_t)ldc * (size_t)es;
    cp.dstPitch = (size_t)ldd * (size_t)es;
    cp.WidthInBytes = (size_t)m * (size_t)es;
    /* When consecutive batches are laid out back to back in both, one copy does them all. */
    const int packed = stride_c == (rocblas_stride)ldc * n && stride_d == (rocblas_stride)ldd * n;
    const rocblas_int copies = packed ? 1 : batch;
    cp.Height = packed ? (size_t)n * (size_t)batch : (size_t)n;
    for (rocblas_int i = 0; i < copies; ++i) {
        cp.srcDevice = (CUdeviceptr)(uintptr_t)c + (CUdeviceptr)((size_t)i * (size_t)stride_c * (size_t)es);
        cp.dstDevice = (CUdeviceptr)(uintptr_t)d + (CUdeviceptr)((size_t)i * (size_t)stride_d * (size_t)es);
        CUresult r = cuMemcpy2DAsync(&cp, (CUstream)handle->stream);
        if (r != CUDA_SUCCESS) return r == CUDA_ERROR_OUT_OF_MEMORY ? rocblas_status_memory_error : rocblas_status_internal_error;
    }
    return rocblas_status_success;
}

/* The name is parenthesised because rocblas.h also defines a function-like macro of this
 * name (to accept the obsolete workspace arguments); parentheses stop its expansion. */
rocblas_status(rocblas_gemm_strided_batched_ex)(
    rocblas_handle handle, rocblas_operation transA, rocblas_operation transB, rocblas_int m, rocblas_int n,
    rocblas_int k, const void* alpha, const void* a, rocblas_datatype a_type, rocblas_int lda,
    rocblas_stride stride_a, const void* b, rocblas_datatype b_type, rocblas_int ldb, rocblas_stride stride_b,
    const void* beta, const void* c, rocblas_datatype c_type, rocblas_int ldc, rocblas_stride stride_c, void* d,
    rocblas_datatype d_type, rocblas_int ldd, rocblas_stride stride_d, rocblas_int batch_count,
    rocblas_datatype compute_type, rocblas_gemm_algo algo, int32_t solution_index, uint32_t flags) {
    HOC_TIMED();
    (void)flags; /* performance hints only (e.g. use_cu_efficiency); no effect on results */
    if (handle == NULL) RETURN(rocblas_status_invalid_handle);
    const int valid_op_a = transA == rocblas_operation_none || transA == rocblas_operation_transpose ||
                           transA == rocblas_operation_conjugate_transpose;
    const int valid_op_b = transB == rocblas_operation_none || transB == rocblas_operation_transpose ||
                           transB == rocblas_operation_conjugate_transpose;
    if (!valid_op_a || !valid_op_b) RETURN(rocblas_status_invalid_value);
    if (algo != rocblas_gemm_algo_standard && algo != rocblas_gemm_algo_solution_index)
        RETURN(rocblas_status_invalid_value);
    /* There is no list of rocBLAS solutions here: only "the default" (index <= 0) exists. */
    if (algo == rocblas_gemm_algo_solution_index && solution_index > 0) RETURN(rocblas_status_invalid_value);

    /* Sizes, as rocBLAS checks them: leading dimensions at least the stored rows. */
    const rocblas_int rows_a = transA == rocblas_operation_none ? m : k;
    const rocblas_int rows_b = transB == rocblas_operation_none ? k : n;
    if (m < 0 || n < 0 || k < 0 || batch_count < 0) RETURN(rocblas_status_invalid_size);
    if (lda < rows_a || ldb < rows_b || ldc < m || ldd < m) RETURN(rocblas_status_invalid_size);
    /* In place (C == D) the two descriptions must agree. */
    if (c == d && (ldc != ldd || stride_c != stride_d)) RETURN(rocblas_status_invalid_size);
    if (m == 0 || n == 0 || batch_count == 0) RETURN(rocblas_status_success);

    /* The supported type combinations (FFI.md): f32, f16 and bf16 with f32 compute, and
     * f64 with f64 compute. Anything else rocBLAS may support is reported unimplemented. */
    const int same = a_type == b_type && a_type == c_type && a_type == d_type;
    const int f32_compute = compute_type == rocblas_datatype_f32_r &&
                            (a_type == rocblas_datatype_f32_r || a_type == rocblas_datatype_f16_r ||
                             a_type == rocblas_datatype_bf16_r);
    const int f64_compute = compute_type == rocblas_datatype_f64_r && a_type == rocblas_datatype_f64_r;
    if (!same || !(f32_compute || f64_compute)) RETURN(rocblas_status_not_implemented);

    if (alpha == NULL || beta == NULL) RETURN(rocblas_status_invalid_pointer);
    const int alpha_zero = f64_compute ? *(const double*)alpha == 0.0 : *(const float*)alpha == 0.0f;
    const int beta_zero = f64_compute ? *(const double*)beta == 0.0 : *(const float*)beta == 0.0f;
    if (d == NULL || (!beta_zero && c == NULL) || (k > 0 && !alpha_zero && (a == NULL || b == NULL)))
        RETURN(rocblas_status_invalid_pointer);

    if (hoc_make_current() != 0) RETURN(rocblas_status_internal_error);
    const int es = elem_size(d_type);
    if (!beta_zero && c != d) {
        rocblas_status s = copy_c_to_d(handle, es, m, n, c, ldc, stride_c, d, ldd, stride_d, batch_count);
        if (s != rocblas_status_success) RETURN(s);
    }
    const cublasOperation_t op_a = transA == rocblas_operation_none ? CUBLAS_OP_N : CUBLAS_OP_T;
    const cublasOperation_t op_b = transB == rocblas_operation_none ? CUBLAS_OP_N : CUBLAS_OP_T;
    const cudaDataType t = cuda_type(a_type);
    const cublasComputeType_t ct = f64_compute ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    int tr = hoc_trace_begin("rocblas_gemm", NULL, (unsigned long long)m * n * k * batch_count, handle->stream);
    cublasStatus_t s = cublasGemmStridedBatchedEx(handle->cublas, op_a, op_b, m, n, k, alpha, a, t, lda,
                                                  (long long)stride_a, b, t, ldb, (long long)stride_b, beta, d, t,
                                                  ldd, (long long)stride_d, batch_count, ct, CUBLAS_GEMM_DEFAULT);
    hoc_trace_end(tr, handle->stream);
    RETURN(from_cublas(s));
}
