/*
 * hip-on-cuda: declarations shared between the four test libraries.
 *
 * TEST INFRASTRUCTURE, NOT A PRODUCT FEATURE (see ../README.md).
 *
 * This header uses plain C types only, so that it can be included both by translation
 * units that see the ROCm headers (hip_runtime_api.h, miopen.h) and by those that see the
 * CUDA library headers (cudnn.h): the two header families cannot share one translation
 * unit, because both define the CUDA/HIP vector types (char1, float4, ...).
 */
#ifndef HOC_INTERNAL_H
#define HOC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__)
#define HOC_HIDDEN __attribute__((visibility("hidden")))
#else
#define HOC_HIDDEN
#endif

/*
 * Exported by libamdhip64.so (the only non-HIP symbol it exports), called by librocblas.so
 * and libMIOpen.so before they touch cuBLAS/cuDNN: initialises the CUDA driver and makes
 * the primary context of the calling thread's current HIP device current on this thread,
 * as the real rocBLAS and MIOpen rely on the HIP runtime's current device. Returns a
 * hipError_t value (0 = hipSuccess). It does not touch hipGetLastError's state.
 */
int hoc_make_current(void);

/* Non-zero when the environment variable HOC_LOG is set to a non-empty value other than
 * "0": the libraries then print every failing call to stderr (a debugging aid; the
 * return codes are the interface, the log is not). */
static inline int hoc_log_enabled(void) {
    static int cached = -1; /* benign race: every thread computes the same value */
    if (cached < 0) {
        const char* v = getenv("HOC_LOG");
        cached = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
    }
    return cached;
}

/* ---------------------------------------------------------------------------------------
 * libMIOpen.so: the interface between miopen_api.c (MIOpen headers) and miopen_cudnn.c
 * (cuDNN headers).
 */

/* Element types the MIOpen shim supports. */
enum hoc_dtype { HOC_F16 = 0, HOC_F32 = 1, HOC_BF16 = 2, HOC_F64 = 3 };

/* Outcome of a cuDNN call, in the categories miopenStatus_t can express. */
enum hoc_dnn_status {
    HOC_DNN_OK = 0,
    HOC_DNN_NOT_INITIALIZED,
    HOC_DNN_BAD_PARAM,
    HOC_DNN_ALLOC_FAILED,
    HOC_DNN_NOT_SUPPORTED,
    HOC_DNN_INTERNAL,
    HOC_DNN_VERSION_MISMATCH,
};

/* Algorithm families (mapped onto miopenConvAlgorithm_t by miopen_api.c). */
enum hoc_algo_family {
    HOC_FAMILY_GEMM,
    HOC_FAMILY_DIRECT,
    HOC_FAMILY_FFT,
    HOC_FAMILY_WINOGRAD,
    HOC_FAMILY_IMPLICIT_GEMM,
};

/* A packed NCHW 4-D tensor. */
struct hoc_tensor {
    int dtype; /* enum hoc_dtype */
    int n, c, h, w;
};

/* A 2-D convolution. transpose = 0: y = conv(x, w), w = [K, C/groups, R, S].
 * transpose = 1: y = conv_transpose(x, w), w = [C_in, K_out/groups, R, S], computed as
 * cuDNN's backward-data of the forward convolution whose output is x. */
struct hoc_conv {
    int transpose;
    int pad_h, pad_w, stride_h, stride_w, dil_h, dil_w, groups;
};

/* One applicable cuDNN algorithm, in cuDNN's heuristic order. */
struct hoc_dnn_solution {
    int algo;         /* cudnnConvolutionFwdAlgo_t, or cudnnConvolutionBwdDataAlgo_t when transposed */
    int family;       /* enum hoc_algo_family */
    size_t workspace; /* bytes, as cuDNN reports for this algorithm */
    float time_ms;    /* cuDNN's time when it has one, else -1 */
};

/* Number of cuDNN algorithms of a kind (forward or backward-data); used to size arrays. */
#define HOC_DNN_MAX_ALGOS 16

HOC_HIDDEN int hoc_dnn_create(void** handle, void* stream);
HOC_HIDDEN int hoc_dnn_destroy(void* handle);
/* Heuristically ranked applicable algorithms (no benchmarking). *count <= HOC_DNN_MAX_ALGOS. */
HOC_HIDDEN int hoc_dnn_solutions(void* handle, const struct hoc_tensor* w, const struct hoc_tensor* x,
                                 const struct hoc_conv* conv, const struct hoc_tensor* y,
                                 struct hoc_dnn_solution* out, int* count);
HOC_HIDDEN int hoc_dnn_workspace(void* handle, const struct hoc_tensor* w, const struct hoc_tensor* x,
                                 const struct hoc_conv* conv, const struct hoc_tensor* y, int algo,
                                 size_t* bytes);
HOC_HIDDEN int hoc_dnn_run(void* handle, const struct hoc_tensor* w, const void* wp, const struct hoc_tensor* x,
                           const void* xp, const struct hoc_conv* conv, const struct hoc_tensor* y, void* yp,
                           void* workspace, size_t workspace_bytes, int algo);
/* cudnnGetVersion(), for logs. */
HOC_HIDDEN size_t hoc_dnn_version(void);

#endif
