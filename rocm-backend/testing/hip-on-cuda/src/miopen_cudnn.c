/*
 * libMIOpen.so of hip-on-cuda, cuDNN half: the convolution work behind miopen_api.c.
 *
 * TEST INFRASTRUCTURE, NOT A PRODUCT FEATURE (see ../README.md).
 *
 * This file sees only cuDNN's headers (miopen.h pulls in hip_runtime_api.h, whose vector
 * types collide with CUDA's); the two halves talk through hoc_internal.h.
 *
 * cuDNN's legacy convolution API (descriptors, cudnnGetConvolution*Algorithm_v7 heuristics,
 * cudnnConvolutionForward / BackwardData) is deprecated in cuDNN 9 but still shipped; it is
 * the one that matches MIOpen's Immediate mode (rank algorithms without running them,
 * query workspace, run one), so the deprecation warnings are silenced here.
 */
#include <cudnn.h>

#include <stdlib.h>

#include "hoc_internal.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

static int from_cudnn(cudnnStatus_t s) {
    if (s == CUDNN_STATUS_SUCCESS) return HOC_DNN_OK;
    /* cuDNN 9 groups its codes by thousands: 1xxx not initialised / version / licence,
     * 2xxx bad parameter, 3xxx not supported, 4xxx internal (4003/4004: allocation
     * failures), 5xxx execution failed. */
    const int code = (int)s;
    if (code == 1002 || code == 1003) return HOC_DNN_VERSION_MISMATCH;
    if (code / 1000 == 1) return HOC_DNN_NOT_INITIALIZED;
    if (code / 1000 == 2) return HOC_DNN_BAD_PARAM;
    if (code / 1000 == 3) return HOC_DNN_NOT_SUPPORTED;
    if (code == 4003 || code == 4004) return HOC_DNN_ALLOC_FAILED;
    return HOC_DNN_INTERNAL;
}

size_t hoc_dnn_version(void) { return cudnnGetVersion(); }

int hoc_dnn_create(void** handle, void* stream) {
    cudnnHandle_t h = NULL;
    cudnnStatus_t s = cudnnCreate(&h);
    /* The stream is this package's CUstream, which cuDNN takes as a cudaStream_t. */
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetStream(h, (cudaStream_t)stream);
    if (s != CUDNN_STATUS_SUCCESS) {
        if (h != NULL) cudnnDestroy(h);
        return from_cudnn(s);
    }
    *handle = h;
    return HOC_DNN_OK;
}

int hoc_dnn_destroy(void* handle) { return from_cudnn(cudnnDestroy((cudnnHandle_t)handle)); }

static cudnnDataType_t data_type(int dtype) {
    switch (dtype) {
    case HOC_F16: return CUDNN_DATA_HALF;
    case HOC_BF16: return CUDNN_DATA_BFLOAT16;
    case HOC_F64: return CUDNN_DATA_DOUBLE;
    default: return CUDNN_DATA_FLOAT;
    }
}

/* The cuDNN descriptors of one problem, built per call: cheap host-side objects, and
 * nothing shared between threads. For a transposed convolution, x is cuDNN's dy and y
 * its dx; the weights [C_in, K_out/groups, R, S] are exactly the forward filter
 * [K_fwd, C_fwd/groups, R, S] of the convolution being transposed. */
struct problem {
    cudnnTensorDescriptor_t x, y;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
};

static void release(struct problem* p) {
    if (p->x) cudnnDestroyTensorDescriptor(p->x);
    if (p->y) cudnnDestroyTensorDescriptor(p->y);
    if (p->w) cudnnDestroyFilterDescriptor(p->w);
    if (p->conv) cudnnDestroyConvolutionDescriptor(p->conv);
}

static int build(const struct hoc_tensor* w, const struct hoc_tensor* x, const struct hoc_conv* c,
                 const struct hoc_tensor* y, struct problem* p) {
    p->x = p->y = NULL;
    p->w = NULL;
    p->conv = NULL;
    const cudnnDataType_t t = data_type(x->dtype);
    cudnnStatus_t s = cudnnCreateTensorDescriptor(&p->x);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnCreateTensorDescriptor(&p->y);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnCreateFilterDescriptor(&p->w);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnCreateConvolutionDescriptor(&p->conv);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetTensor4dDescriptor(p->x, CUDNN_TENSOR_NCHW, t, x->n, x->c, x->h, x->w);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetTensor4dDescriptor(p->y, CUDNN_TENSOR_NCHW, t, y->n, y->c, y->h, y->w);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetFilter4dDescriptor(p->w, t, CUDNN_TENSOR_NCHW, w->n, w->c, w->h, w->w);
    /* MIOpen's miopenConvolution is a cross-correlation, like PyTorch's conv2d. f16 and
     * bf16 accumulate in f32 (MIOpen does too); f64 in f64. */
    const cudnnDataType_t compute = x->dtype == HOC_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
    if (s == CUDNN_STATUS_SUCCESS)
        s = cudnnSetConvolution2dDescriptor(p->conv, c->pad_h, c->pad_w, c->stride_h, c->stride_w, c->dil_h, c->dil_w,
                                            CUDNN_CROSS_CORRELATION, compute);
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetConvolutionGroupCount(p->conv, c->groups);
    /* f32/f64: FMA kernels only. CUDNN_DEFAULT_MATH would let cuDNN use TF32 tensor cores
     * for f32 on Ampere and later, which MIOpen's f32 convolutions never do.
     * f16/bf16: tensor cores allowed. */
    const int half = x->dtype == HOC_F16 || x->dtype == HOC_BF16;
    if (s == CUDNN_STATUS_SUCCESS) s = cudnnSetConvolutionMathType(p->conv, half ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH);
    if (s != CUDNN_STATUS_SUCCESS) {
        release(p);
        return from_cudnn(s);
    }
    return HOC_DNN_OK;
}

static int fwd_family(int algo) {
    switch ((cudnnConvolutionFwdAlgo_t)algo) {
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return HOC_FAMILY_GEMM;
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return HOC_FAMILY_DIRECT;
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT:
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return HOC_FAMILY_FFT;
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD:
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return HOC_FAMILY_WINOGRAD;
    default: return HOC_FAMILY_IMPLICIT_GEMM; /* IMPLICIT_GEMM, IMPLICIT_PRECOMP_GEMM */
    }
}

static int bwd_family(int algo) {
    switch ((cudnnConvolutionBwdDataAlgo_t)algo) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT:
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING: return HOC_FAMILY_FFT;
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD:
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED: return HOC_FAMILY_WINOGRAD;
    default: return HOC_FAMILY_IMPLICIT_GEMM; /* ALGO_0, ALGO_1: implicit-GEMM style kernels */
    }
}

static cudnnStatus_t workspace_of(cudnnHandle_t h, const struct problem* p, int transpose, int algo, size_t* bytes) {
    if (transpose)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(h, p->w, p->x, p->conv, p->y,
                                                            (cudnnConvolutionBwdDataAlgo_t)algo, bytes);
    return cudnnGetConvolutionForwardWorkspaceSize(h, p->x, p->w, p->conv, p->y, (cudnnConvolutionFwdAlgo_t)algo,
                                                   bytes);
}

/* Keeps an entry of cuDNN's ranking if it is usable under our math policy and not seen
 * before; its workspace is asked again under the descriptor we will run with. */
static void consider(cudnnHandle_t h, const struct problem* p, int transpose, int half, int algo,
                     cudnnStatus_t status, cudnnMathType_t math, float time, struct hoc_dnn_solution* out,
                     int* count) {
    if (status != CUDNN_STATUS_SUCCESS) return;
    if (!half && (math == CUDNN_TENSOR_OP_MATH || math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) return;
    for (int i = 0; i < *count; ++i)
        if (out[i].algo == algo) return;
    size_t ws = 0;
    if (workspace_of(h, p, transpose, algo, &ws) != CUDNN_STATUS_SUCCESS) return;
    if (*count >= HOC_DNN_MAX_ALGOS) return;
    struct hoc_dnn_solution* s = &out[(*count)++];
    s->algo = algo;
    s->family = transpose ? bwd_family(algo) : fwd_family(algo);
    s->workspace = ws;
    s->time_ms = time >= 0.0f ? time : -1.0f;
}

int hoc_dnn_solutions(void* handle, const struct hoc_tensor* w, const struct hoc_tensor* x, const struct hoc_conv* c,
                      const struct hoc_tensor* y, struct hoc_dnn_solution* out, int* count) {
    cudnnHandle_t h = (cudnnHandle_t)handle;
    struct problem p;
    int st = build(w, x, c, y, &p);
    if (st != HOC_DNN_OK) return st;
    const int half = x->dtype == HOC_F16 || x->dtype == HOC_BF16;
    *count = 0;
    int returned = 0;
    cudnnStatus_t s;
    /* The heuristic ranking (_v7): no kernel is run, so this is cheap and deterministic,
     * like MIOpen's Immediate mode without a find-db entry. */
    if (c->transpose) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[HOC_DNN_MAX_ALGOS];
        s = cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.x, p.conv, p.y, HOC_DNN_MAX_ALGOS, &returned, perf);
        for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < returned; ++i)
            consider(h, &p, 1, half, (int)perf[i].algo, perf[i].status, perf[i].mathType, perf[i].time, out, count);
    } else {
        cudnnConvolutionFwdAlgoPerf_t perf[HOC_DNN_MAX_ALGOS];
        s = cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, HOC_DNN_MAX_ALGOS, &returned, perf);
        for (int i = 0; s == CUDNN_STATUS_SUCCESS && i < returned; ++i)
            consider(h, &p, 0, half, (int)perf[i].algo, perf[i].status, perf[i].mathType, perf[i].time, out, count);
    }
    release(&p);
    return from_cudnn(s);
}

int hoc_dnn_workspace(void* handle, const struct hoc_tensor* w, const struct hoc_tensor* x, const struct hoc_conv* c,
                      const struct hoc_tensor* y, int algo, size_t* bytes) {
    struct problem p;
    int st = build(w, x, c, y, &p);
    if (st != HOC_DNN_OK) return st;
    cudnnStatus_t s = workspace_of((cudnnHandle_t)handle, &p, c->transpose, algo, bytes);
    release(&p);
    return from_cudnn(s);
}

int hoc_dnn_run(void* handle, const struct hoc_tensor* w, const void* wp, const struct hoc_tensor* x, const void* xp,
                const struct hoc_conv* c, const struct hoc_tensor* y, void* yp, void* workspace,
                size_t workspace_bytes, int algo) {
    cudnnHandle_t h = (cudnnHandle_t)handle;
    struct problem p;
    int st = build(w, x, c, y, &p);
    if (st != HOC_DNN_OK) return st;
    /* y = 1 * conv + 0 * y: MIOpen's Immediate API has no alpha/beta. The scaling factors
     * are double for double data and float otherwise, as cuDNN requires. */
    const float one_f = 1.0f, zero_f = 0.0f;
    const double one_d = 1.0, zero_d = 0.0;
    const void* one = x->dtype == HOC_F64 ? (const void*)&one_d : (const void*)&one_f;
    const void* zero = x->dtype == HOC_F64 ? (const void*)&zero_d : (const void*)&zero_f;
    cudnnStatus_t s;
    if (c->transpose)
        s = cudnnConvolutionBackwardData(h, one, p.w, wp, p.x, xp, p.conv, (cudnnConvolutionBwdDataAlgo_t)algo,
                                         workspace, workspace_bytes, zero, p.y, yp);
    else
        s = cudnnConvolutionForward(h, one, p.x, xp, p.w, wp, p.conv, (cudnnConvolutionFwdAlgo_t)algo, workspace,
                                    workspace_bytes, zero, p.y, yp);
    release(&p);
    return from_cudnn(s);
}
