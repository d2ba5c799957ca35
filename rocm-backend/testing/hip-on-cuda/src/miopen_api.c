/*
 * libMIOpen.so of hip-on-cuda, API half: the MIOpen entry points rocm-backend calls
 * (rocm-backend/FFI.md: handles, 4-D tensor and 2-D convolution descriptors, Immediate-mode
 * forward convolution), implemented over cuDNN through miopen_cudnn.c.
 *
 * TEST INFRASTRUCTURE, NOT A PRODUCT FEATURE (see ../README.md).
 *
 * Compiled against the real miopen/miopen.h, so every definition must match ROCm's.
 *
 * Immediate mode maps onto cuDNN's heuristics:
 *   GetSolutionCount / GetSolution   cuDNN's _v7 heuristic ranking (no kernels run) of the
 *                                    forward algorithms (miopenConvolution) or the
 *                                    backward-data algorithms (miopenTranspose), each with
 *                                    its workspace size; best first.
 *   solution_id                      1000 + cudnnConvolutionFwdAlgo_t (forward) or
 *                                    2000 + cudnnConvolutionBwdDataAlgo_t (transposed)
 *   GetSolutionWorkspaceSize         cuDNN's workspace size for that algorithm
 *   CompileSolution                  nothing to compile; checks the solution applies
 *   ConvolutionForwardImmediate      cudnnConvolutionForward, or cudnnConvolutionBackwardData
 *                                    for a transposed convolution
 */

/* miopen.h names this struct without `struct` in a prototype (valid C++ only); a typedef
 * of the incomplete struct beforehand makes the header valid C without changing it. */
typedef struct miopenTensorArgument_t miopenTensorArgument_t;
#include <miopen/miopen.h>
#include <miopen/version.h>

#include <stdio.h>
#include <stdlib.h>

#include "hoc_internal.h"

/* Our objects behind MIOpen's opaque handle types (which the header declares as pointers
 * to empty structs; they are only ever cast back here). */
struct hoc_handle {
    void* dnn;    /* cudnnHandle_t */
    void* stream; /* the handle's stream, for the timeline trace */
};
struct hoc_tensor_desc {
    int set; /* miopenSet4dTensorDescriptor was called */
    struct hoc_tensor t;
};
struct hoc_conv_desc {
    struct hoc_conv c;
};

#define SOLUTION_FWD_BASE 1000u
#define SOLUTION_BWD_BASE 2000u

static miopenStatus_t logged(const char* fn, miopenStatus_t s) {
    if (s != miopenStatusSuccess && hoc_log_enabled())
        fprintf(stderr, "[hip-on-cuda] %s -> %s (%d)\n", fn, miopenGetErrorString(s), (int)s);
    return s;
}
#define RETURN(s) return logged(__func__, (s))

static miopenStatus_t from_dnn(int s) {
    switch (s) {
    case HOC_DNN_OK: return miopenStatusSuccess;
    case HOC_DNN_NOT_INITIALIZED: return miopenStatusNotInitialized;
    case HOC_DNN_BAD_PARAM: return miopenStatusBadParm;
    case HOC_DNN_ALLOC_FAILED: return miopenStatusAllocFailed;
    case HOC_DNN_NOT_SUPPORTED: return miopenStatusNotImplemented;
    case HOC_DNN_VERSION_MISMATCH: return miopenStatusVersionMismatch;
    default: return miopenStatusInternalError;
    }
}

const char* miopenGetErrorString(miopenStatus_t error) {
    switch (error) {
    case miopenStatusSuccess: return "miopenStatusSuccess";
    case miopenStatusNotInitialized: return "miopenStatusNotInitialized";
    case miopenStatusInvalidValue: return "miopenStatusInvalidValue";
    case miopenStatusBadParm: return "miopenStatusBadParm";
    case miopenStatusAllocFailed: return "miopenStatusAllocFailed";
    case miopenStatusInternalError: return "miopenStatusInternalError";
    case miopenStatusNotImplemented: return "miopenStatusNotImplemented";
    case miopenStatusUnknownError: return "miopenStatusUnknownError";
    case miopenStatusUnsupportedOp: return "miopenStatusUnsupportedOp";
    case miopenStatusGpuOperationsSkipped: return "miopenStatusGpuOperationsSkipped";
    case miopenStatusVersionMismatch: return "miopenStatusVersionMismatch";
    default: return "Unknown Error";
    }
}

/* The MIOpen API level these libraries implement (the headers' version). The library
 * doing the work is cuDNN; its version is printed with HOC_LOG=1 at handle creation. */
miopenStatus_t miopenGetVersion(size_t* major, size_t* minor, size_t* patch) {
    if (major == NULL || minor == NULL || patch == NULL) RETURN(miopenStatusBadParm);
    *major = MIOPEN_VERSION_MAJOR;
    *minor = MIOPEN_VERSION_MINOR;
    *patch = MIOPEN_VERSION_PATCH;
    RETURN(miopenStatusSuccess);
}

miopenStatus_t miopenCreateWithStream(miopenHandle_t* handle, miopenAcceleratorQueue_t stream) {
    if (handle == NULL) RETURN(miopenStatusBadParm);
    /* MIOpen binds its handle to the HIP runtime's current device. */
    if (hoc_make_current() != 0) RETURN(miopenStatusNotInitialized);
    struct hoc_handle* h = calloc(1, sizeof *h);
    if (h == NULL) RETURN(miopenStatusAllocFailed);
    h->stream = (void*)stream;
    int s = hoc_dnn_create(&h->dnn, (void*)stream);
    if (s != HOC_DNN_OK) {
        free(h);
        RETURN(from_dnn(s));
    }
    if (hoc_log_enabled()) fprintf(stderr, "[hip-on-cuda] miopenCreateWithStream: cuDNN %zu\n", hoc_dnn_version());
    *handle = (miopenHandle_t)h;
    RETURN(miopenStatusSuccess);
}

miopenStatus_t miopenDestroy(miopenHandle_t handle) {
    if (handle == NULL) RETURN(miopenStatusBadParm);
    struct hoc_handle* h = (struct hoc_handle*)handle;
    hoc_make_current();
    int s = hoc_dnn_destroy(h->dnn);
    free(h);
    RETURN(from_dnn(s));
}

miopenStatus_t miopenCreateTensorDescriptor(miopenTensorDescriptor_t* tensorDesc) {
    if (tensorDesc == NULL) RETURN(miopenStatusBadParm);
    struct hoc_tensor_desc* d = calloc(1, sizeof *d);
    if (d == NULL) RETURN(miopenStatusAllocFailed);
    *tensorDesc = (miopenTensorDescriptor_t)d;
    RETURN(miopenStatusSuccess);
}

/* A packed NCHW tensor. Only the element types the convolution supports here are
 * accepted (f16, f32, bf16, f64); MIOpen itself also stores int8/int32 descriptors. */
miopenStatus_t miopenSet4dTensorDescriptor(miopenTensorDescriptor_t tensorDesc, miopenDataType_t dataType, int n,
                                           int c, int h, int w) {
    if (tensorDesc == NULL) RETURN(miopenStatusBadParm);
    if (n <= 0 || c <= 0 || h <= 0 || w <= 0) RETURN(miopenStatusBadParm);
    int t;
    switch (dataType) {
    case miopenHalf: t = HOC_F16; break;
    case miopenFloat: t = HOC_F32; break;
    case miopenBFloat16: t = HOC_BF16; break;
    case miopenDouble: t = HOC_F64; break;
    default: RETURN(miopenStatusNotImplemented);
    }
    struct hoc_tensor_desc* d = (struct hoc_tensor_desc*)tensorDesc;
    d->t.dtype = t;
    d->t.n = n;
    d->t.c = c;
    d->t.h = h;
    d->t.w = w;
    d->set = 1;
    RETURN(miopenStatusSuccess);
}

miopenStatus_t miopenDestroyTensorDescriptor(miopenTensorDescriptor_t tensorDesc) {
    free(tensorDesc);
    RETURN(miopenStatusSuccess);
}

miopenStatus_t miopenCreateConvolutionDescriptor(miopenConvolutionDescriptor_t* convDesc) {
    if (convDesc == NULL) RETURN(miopenStatusBadParm);
    struct hoc_conv_desc* d = calloc(1, sizeof *d);
    if (d == NULL) RETURN(miopenStatusAllocFailed);
    /* MIOpen's defaults: a cross-correlation with no padding, unit stride and dilation, one group. */
    d->c.transpose = 0;
    d->c.stride_h = d->c.stride_w = 1;
    d->c.dil_h = d->c.dil_w = 1;
    d->c.groups = 1;
    *convDesc = (miopenConvolutionDescriptor_t)d;
    RETURN(miopenStatusSuccess);
}

/* As in MIOpen, (re)initialising resets the group count to 1. */
miopenStatus_t miopenInitConvolutionDescriptor(miopenConvolutionDescriptor_t convDesc, miopenConvolutionMode_t c_mode,
                                               int pad_h, int pad_w, int stride_h, int stride_w, int dilation_h,
                                               int dilation_w) {
    if (convDesc == NULL) RETURN(miopenStatusBadParm);
    if (pad_h < 0 || pad_w < 0 || stride_h < 1 || stride_w < 1 || dilation_h < 1 || dilation_w < 1)
        RETURN(miopenStatusBadParm);
    /* The deprecated miopenGroupConv / miopenDepthwise modes are not provided: groups are
     * set with miopenSetConvolutionGroupCount. */
    if (c_mode != miopenConvolution && c_mode != miopenTranspose) RETURN(miopenStatusNotImplemented);
    struct hoc_conv_desc* d = (struct hoc_conv_desc*)convDesc;
    d->c.transpose = c_mode == miopenTranspose;
    d->c.pad_h = pad_h;
    d->c.pad_w = pad_w;
    d->c.stride_h = stride_h;
    d->c.stride_w = stride_w;
    d->c.dil_h = dilation_h;
    d->c.dil_w = dilation_w;
    d->c.groups = 1;
    RETURN(miopenStatusSuccess);
}

miopenStatus_t miopenSetConvolutionGroupCount(miopenConvolutionDescriptor_t convDesc, int groupCount) {
    if (convDesc == NULL || groupCount < 1) RETURN(miopenStatusBadParm);
    ((struct hoc_conv_desc*)convDesc)->c.groups = groupCount;
    RETURN(miopenStatusSuccess);
}

miopenStatus_t miopenDestroyConvolutionDescriptor(miopenConvolutionDescriptor_t convDesc) {
    free(convDesc);
    RETURN(miopenStatusSuccess);
}

/* The output shape of the convolution of x by w, or miopenStatusBadParm when the channel
 * counts do not match the weights and groups or the output would be empty.
 *   forward:    w = [K, C/g, R, S], y = [N, K, (H + 2p - d(R-1) - 1)/s + 1, ...]
 *   transposed: w = [C, K/g, R, S], y = [N, K, s(H-1) + d(R-1) + 1 - 2p, ...]
 * (MIOpen clamps an empty output to 1 instead; cuDNN cannot run such a problem.) */
static miopenStatus_t output_shape(const struct hoc_conv* c, const struct hoc_tensor* x, const struct hoc_tensor* w,
                                   struct hoc_tensor* y) {
    if (x->dtype != w->dtype) return miopenStatusBadParm;
    const int g = c->groups;
    long long oc, oh, ow;
    if (c->transpose) {
        if (x->c != w->n || w->n % g != 0) return miopenStatusBadParm;
        oc = (long long)w->c * g;
        oh = (long long)c->stride_h * (x->h - 1) + (long long)c->dil_h * (w->h - 1) + 1 - 2LL * c->pad_h;
        ow = (long long)c->stride_w * (x->w - 1) + (long long)c->dil_w * (w->w - 1) + 1 - 2LL * c->pad_w;
    } else {
        if (x->c != w->c * g || w->n % g != 0) return miopenStatusBadParm;
        oc = w->n;
        const long long eh = (long long)x->h + 2LL * c->pad_h - (long long)c->dil_h * (w->h - 1) - 1;
        const long long ew = (long long)x->w + 2LL * c->pad_w - (long long)c->dil_w * (w->w - 1) - 1;
        if (eh < 0 || ew < 0) return miopenStatusBadParm;
        oh = eh / c->stride_h + 1;
        ow = ew / c->stride_w + 1;
    }
    if (oh < 1 || ow < 1 || oh > 0x7fffffffLL || ow > 0x7fffffffLL || oc > 0x7fffffffLL) return miopenStatusBadParm;
    y->dtype = x->dtype;
    y->n = x->n;
    y->c = (int)oc;
    y->h = (int)oh;
    y->w = (int)ow;
    return miopenStatusSuccess;
}

miopenStatus_t miopenGetConvolutionForwardOutputDim(miopenConvolutionDescriptor_t convDesc,
                                                    const miopenTensorDescriptor_t inputTensorDesc,
                                                    const miopenTensorDescriptor_t filterDesc, int* n, int* c, int* h,
                                                    int* w) {
    const struct hoc_conv_desc* cd = (const struct hoc_conv_desc*)convDesc;
    const struct hoc_tensor_desc* xd = (const struct hoc_tensor_desc*)inputTensorDesc;
    const struct hoc_tensor_desc* wd = (const struct hoc_tensor_desc*)filterDesc;
    if (cd == NULL || xd == NULL || wd == NULL || !xd->set || !wd->set) RETURN(miopenStatusBadParm);
    if (n == NULL || c == NULL || h == NULL || w == NULL) RETURN(miopenStatusBadParm);
    struct hoc_tensor y;
    miopenStatus_t s = output_shape(&cd->c, &xd->t, &wd->t, &y);
    if (s != miopenStatusSuccess) RETURN(s);
    *n = y.n;
    *c = y.c;
    *h = y.h;
    *w = y.w;
    RETURN(miopenStatusSuccess);
}

/* The common checks of the Immediate-mode calls: every object present and set, and y the
 * shape and type the convolution produces. */
static miopenStatus_t problem(miopenHandle_t handle, const miopenTensorDescriptor_t wDesc,
                              const miopenTensorDescriptor_t xDesc, const miopenConvolutionDescriptor_t convDesc,
                              const miopenTensorDescriptor_t yDesc, const struct hoc_tensor** w,
                              const struct hoc_tensor** x, const struct hoc_conv** c, const struct hoc_tensor** y) {
    const struct hoc_tensor_desc* wd = (const struct hoc_tensor_desc*)wDesc;
    const struct hoc_tensor_desc* xd = (const struct hoc_tensor_desc*)xDesc;
    const struct hoc_tensor_desc* yd = (const struct hoc_tensor_desc*)yDesc;
    const struct hoc_conv_desc* cd = (const struct hoc_conv_desc*)convDesc;
    if (handle == NULL || wd == NULL || xd == NULL || yd == NULL || cd == NULL) return miopenStatusBadParm;
    if (!wd->set || !xd->set || !yd->set) return miopenStatusBadParm;
    struct hoc_tensor expect;
    miopenStatus_t s = output_shape(&cd->c, &xd->t, &wd->t, &expect);
    if (s != miopenStatusSuccess) return s;
    if (yd->t.dtype != expect.dtype || yd->t.n != expect.n || yd->t.c != expect.c || yd->t.h != expect.h ||
        yd->t.w != expect.w)
        return miopenStatusBadParm;
    *w = &wd->t;
    *x = &xd->t;
    *c = &cd->c;
    *y = &yd->t;
    return miopenStatusSuccess;
}

static miopenConvAlgorithm_t algorithm_of(int family) {
    switch (family) {
    case HOC_FAMILY_GEMM: return miopenConvolutionAlgoGEMM;
    case HOC_FAMILY_DIRECT: return miopenConvolutionAlgoDirect;
    case HOC_FAMILY_FFT: return miopenConvolutionAlgoFFT;
    case HOC_FAMILY_WINOGRAD: return miopenConvolutionAlgoWinograd;
    default: return miopenConvolutionAlgoImplicitGEMM;
    }
}

/* The cuDNN algorithm of a solution id, or -1 when the id is not one of ours or belongs to
 * the other mode (a forward solution on a transposed problem, or the reverse). */
static int algo_of(const struct hoc_conv* c, uint64_t solution_id) {
    const uint64_t base = c->transpose ? SOLUTION_BWD_BASE : SOLUTION_FWD_BASE;
    if (solution_id < base || solution_id >= base + HOC_DNN_MAX_ALGOS) return -1;
    return (int)(solution_id - base);
}

/* The workspace of a solution, or BadParm when it does not apply to the problem (as MIOpen
 * answers for a solver that is not applicable). */
static miopenStatus_t solution_workspace(struct hoc_handle* h, const struct hoc_tensor* w, const struct hoc_tensor* x,
                                         const struct hoc_conv* c, const struct hoc_tensor* y, uint64_t solution_id,
                                         size_t* bytes) {
    const int algo = algo_of(c, solution_id);
    if (algo < 0) return miopenStatusBadParm;
    int s = hoc_dnn_workspace(h->dnn, w, x, c, y, algo, bytes);
    if (s == HOC_DNN_NOT_SUPPORTED || s == HOC_DNN_BAD_PARAM) return miopenStatusBadParm;
    return from_dnn(s);
}

miopenStatus_t miopenConvolutionForwardGetSolutionCount(miopenHandle_t handle, const miopenTensorDescriptor_t wDesc,
                                                        const miopenTensorDescriptor_t xDesc,
                                                        const miopenConvolutionDescriptor_t convDesc,
                                                        const miopenTensorDescriptor_t yDesc, size_t* solutionCount) {
    const struct hoc_tensor *w, *x, *y;
    const struct hoc_conv* c;
    if (solutionCount == NULL) RETURN(miopenStatusBadParm);
    miopenStatus_t st = problem(handle, wDesc, xDesc, convDesc, yDesc, &w, &x, &c, &y);
    if (st != miopenStatusSuccess) RETURN(st);
    if (hoc_make_current() != 0) RETURN(miopenStatusNotInitialized);
    struct hoc_dnn_solution sol[HOC_DNN_MAX_ALGOS];
    int count = 0;
    int s = hoc_dnn_solutions(((struct hoc_handle*)handle)->dnn, w, x, c, y, sol, &count);
    if (s != HOC_DNN_OK) RETURN(from_dnn(s));
    *solutionCount = (size_t)count;
    RETURN(miopenStatusSuccess);
}

/* Best first. `time` is cuDNN's estimate in milliseconds where its heuristic gives one;
 * otherwise the 1-based rank (1.0, 2.0, ...), which keeps the order meaningful to a caller
 * that sorts or picks by time. */
miopenStatus_t miopenConvolutionForwardGetSolution(miopenHandle_t handle, const miopenTensorDescriptor_t wDesc,
                                                   const miopenTensorDescriptor_t xDesc,
                                                   const miopenConvolutionDescriptor_t convDesc,
                                                   const miopenTensorDescriptor_t yDesc, const size_t maxSolutionCount,
                                                   size_t* solutionCount, miopenConvSolution_t* solutions) {
    const struct hoc_tensor *w, *x, *y;
    const struct hoc_conv* c;
    if (solutionCount == NULL || solutions == NULL || maxSolutionCount == 0) RETURN(miopenStatusBadParm);
    miopenStatus_t st = problem(handle, wDesc, xDesc, convDesc, yDesc, &w, &x, &c, &y);
    if (st != miopenStatusSuccess) RETURN(st);
    if (hoc_make_current() != 0) RETURN(miopenStatusNotInitialized);
    struct hoc_dnn_solution sol[HOC_DNN_MAX_ALGOS];
    int count = 0;
    int s = hoc_dnn_solutions(((struct hoc_handle*)handle)->dnn, w, x, c, y, sol, &count);
    if (s != HOC_DNN_OK) RETURN(from_dnn(s));
    const size_t n = (size_t)count < maxSolutionCount ? (size_t)count : maxSolutionCount;
    const uint64_t base = c->transpose ? SOLUTION_BWD_BASE : SOLUTION_FWD_BASE;
    for (size_t i = 0; i < n; ++i) {
        solutions[i].time = sol[i].time_ms >= 0.0f ? sol[i].time_ms : (float)(i + 1);
        solutions[i].workspace_size = sol[i].workspace;
        solutions[i].solution_id = base + (uint64_t)sol[i].algo;
        solutions[i].algorithm = algorithm_of(sol[i].family);
    }
    *solutionCount = n;
    RETURN(miopenStatusSuccess);
}

miopenStatus_t miopenConvolutionForwardGetSolutionWorkspaceSize(miopenHandle_t handle,
                                                                const miopenTensorDescriptor_t wDesc,
                                                                const miopenTensorDescriptor_t xDesc,
                                                                const miopenConvolutionDescriptor_t convDesc,
                                                                const miopenTensorDescriptor_t yDesc,
                                                                const uint64_t solution_id, size_t* workSpaceSize) {
    const struct hoc_tensor *w, *x, *y;
    const struct hoc_conv* c;
    if (workSpaceSize == NULL) RETURN(miopenStatusBadParm);
    miopenStatus_t st = problem(handle, wDesc, xDesc, convDesc, yDesc, &w, &x, &c, &y);
    if (st != miopenStatusSuccess) RETURN(st);
    if (hoc_make_current() != 0) RETURN(miopenStatusNotInitialized);
    RETURN(solution_workspace((struct hoc_handle*)handle, w, x, c, y, solution_id, workSpaceSize));
}

/* cuDNN's kernels are precompiled: nothing to build. The call still checks that the
 * solution applies, as MIOpen's does. */
miopenStatus_t miopenConvolutionForwardCompileSolution(miopenHandle_t handle, const miopenTensorDescriptor_t wDesc,
                                                       const miopenTensorDescriptor_t xDesc,
                                                       const miopenConvolutionDescriptor_t convDesc,
                                                       const miopenTensorDescriptor_t yDesc,
                                                       const uint64_t solution_id) {
    const struct hoc_tensor *w, *x, *y;
    const struct hoc_conv* c;
    miopenStatus_t st = problem(handle, wDesc, xDesc, convDesc, yDesc, &w, &x, &c, &y);
    if (st != miopenStatusSuccess) RETURN(st);
    if (hoc_make_current() != 0) RETURN(miopenStatusNotInitialized);
    size_t ws = 0;
    RETURN(solution_workspace((struct hoc_handle*)handle, w, x, c, y, solution_id, &ws));
}

miopenStatus_t miopenConvolutionForwardImmediate(miopenHandle_t handle, const miopenTensorDescriptor_t wDesc,
                                                 const void* w, const miopenTensorDescriptor_t xDesc, const void* x,
                                                 const miopenConvolutionDescriptor_t convDesc,
                                                 const miopenTensorDescriptor_t yDesc, void* y, void* workSpace,
                                                 size_t workSpaceSize, const uint64_t solution_id) {
    const struct hoc_tensor *wt, *xt, *yt;
    const struct hoc_conv* c;
    miopenStatus_t st = problem(handle, wDesc, xDesc, convDesc, yDesc, &wt, &xt, &c, &yt);
    if (st != miopenStatusSuccess) RETURN(st);
    if (w == NULL || x == NULL || y == NULL) RETURN(miopenStatusBadParm);
    if (hoc_make_current() != 0) RETURN(miopenStatusNotInitialized);
    struct hoc_handle* h = (struct hoc_handle*)handle;
    size_t need = 0;
    st = solution_workspace(h, wt, xt, c, yt, solution_id, &need);
    if (st != miopenStatusSuccess) RETURN(st);
    /* The caller provides the workspace; too little of it is a caller error. */
    if (need > 0 && (workSpace == NULL || workSpaceSize < need)) RETURN(miopenStatusBadParm);
    int tr = hoc_trace_begin("miopen_conv", NULL, 0, h->stream);
    int r = hoc_dnn_run(h->dnn, wt, w, xt, x, c, yt, y, workSpace, workSpaceSize, algo_of(c, solution_id));
    hoc_trace_end(tr, h->stream);
    RETURN(from_dnn(r));
}
