/*
 * libamdhip64.so of hip-on-cuda: the HIP runtime entry points rocm-backend calls
 * (rocm-backend/FFI.md), implemented over the CUDA driver API.
 *
 * TEST INFRASTRUCTURE, NOT A PRODUCT FEATURE (see ../README.md). It exists so that the
 * real rocm-backend code runs on an NVIDIA GPU (the GPU tier of docs/architecture.md).
 *
 * Compiled against the real HIP 6.4 headers with __HIP_PLATFORM_AMD__, as ROCm builds its
 * clients, so every definition below must match ROCm's declaration exactly; the compiler
 * rejects a signature that differs.
 *
 * Model: HIP device i = CUDA device i; all work runs in that device's primary context
 * (the context the CUDA runtime, cuBLAS and cuDNN use too), made current on each calling
 * thread on demand. Handles are the CUDA driver's own: hipStream_t = CUstream,
 * hipEvent_t = CUevent, hipModule_t = CUmodule, hipFunction_t = CUfunction,
 * device pointers = CUdeviceptr.
 *
 * This file holds the runtime's core: the per-thread error state and hipGetLastError, the
 * CUresult -> hipError_t mapping, driver initialisation, the primary contexts and the
 * per-thread current device, the timeline trace (HOC_TRACE) and the error names. The entry
 * points are in hip_device.c (devices, memory, streams, events) and hip_module.c (modules,
 * function attributes, launches); what the three share is declared in hoc_internal.h.
 */
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>

#include <cuda.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The libamdhip64 section of hoc_internal.h (it needs the HIP and CUDA headers above). */
#define HOC_LIBAMDHIP64
#include "hoc_internal.h"

/* ---------------------------------------------------------------------------------------
 * Error state. HIP 6.x keeps, per host thread, the last error that a runtime call returned
 * other than hipSuccess and hipErrorNotReady; hipGetLastError returns it and resets it
 * to hipSuccess (CUDA's cudaGetLastError semantics, which HIP adopted in 6.0).
 */
static _Thread_local hipError_t t_last_error = hipSuccess;

hipError_t hoc_record(const char* fn, hipError_t e) {
    if (e != hipSuccess && e != hipErrorNotReady) {
        t_last_error = e;
        if (hoc_log_enabled()) fprintf(stderr, "[hip-on-cuda] %s -> %s (%d)\n", fn, hipGetErrorName(e), (int)e);
    }
    return e;
}

/* CUresult -> hipError_t. HIP took most of its numbering from CUDA, but the mapping is
 * written out by name so that a renumbering on either side cannot go unnoticed. */
hipError_t hoc_from_cu(CUresult r) {
    switch (r) {
    case CUDA_SUCCESS: return hipSuccess;
    case CUDA_ERROR_INVALID_VALUE: return hipErrorInvalidValue;
    case CUDA_ERROR_OUT_OF_MEMORY: return hipErrorOutOfMemory;
    case CUDA_ERROR_NOT_INITIALIZED: return hipErrorNotInitialized;
    case CUDA_ERROR_DEINITIALIZED: return hipErrorDeinitialized;
    case CUDA_ERROR_PROFILER_DISABLED: return hipErrorProfilerDisabled;
    case CUDA_ERROR_PROFILER_NOT_INITIALIZED: return hipErrorProfilerNotInitialized;
    case CUDA_ERROR_PROFILER_ALREADY_STARTED: return hipErrorProfilerAlreadyStarted;
    case CUDA_ERROR_PROFILER_ALREADY_STOPPED: return hipErrorProfilerAlreadyStopped;
    /* A stub libcuda (toolkit stubs/ directory) or a driver older than the toolkit. */
    case CUDA_ERROR_STUB_LIBRARY: return hipErrorInsufficientDriver;
    case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER: return hipErrorInsufficientDriver;
    case CUDA_ERROR_DEVICE_UNAVAILABLE: return hipErrorNoDevice;
    case CUDA_ERROR_NO_DEVICE: return hipErrorNoDevice;
    case CUDA_ERROR_INVALID_DEVICE: return hipErrorInvalidDevice;
    case CUDA_ERROR_DEVICE_NOT_LICENSED: return hipErrorNoDevice;
    case CUDA_ERROR_INVALID_IMAGE: return hipErrorInvalidImage;
    case CUDA_ERROR_INVALID_CONTEXT: return hipErrorInvalidContext;
    case CUDA_ERROR_CONTEXT_ALREADY_CURRENT: return hipErrorContextAlreadyCurrent;
    case CUDA_ERROR_MAP_FAILED: return hipErrorMapFailed;
    case CUDA_ERROR_UNMAP_FAILED: return hipErrorUnmapFailed;
    case CUDA_ERROR_ARRAY_IS_MAPPED: return hipErrorArrayIsMapped;
    case CUDA_ERROR_ALREADY_MAPPED: return hipErrorAlreadyMapped;
    case CUDA_ERROR_NO_BINARY_FOR_GPU: return hipErrorNoBinaryForGpu;
    case CUDA_ERROR_ALREADY_ACQUIRED: return hipErrorAlreadyAcquired;
    case CUDA_ERROR_NOT_MAPPED: return hipErrorNotMapped;
    case CUDA_ERROR_NOT_MAPPED_AS_ARRAY: return hipErrorNotMappedAsArray;
    case CUDA_ERROR_NOT_MAPPED_AS_POINTER: return hipErrorNotMappedAsPointer;
    case CUDA_ERROR_ECC_UNCORRECTABLE: return hipErrorECCNotCorrectable;
    case CUDA_ERROR_UNSUPPORTED_LIMIT: return hipErrorUnsupportedLimit;
    case CUDA_ERROR_CONTEXT_ALREADY_IN_USE: return hipErrorContextAlreadyInUse;
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: return hipErrorPeerAccessUnsupported;
    /* Code the driver cannot use: HIP's name for CUDA's INVALID_PTX is InvalidKernelFile. */
    case CUDA_ERROR_INVALID_PTX: return hipErrorInvalidKernelFile;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return hipErrorInvalidKernelFile;
    case CUDA_ERROR_JIT_COMPILER_NOT_FOUND: return hipErrorInvalidKernelFile;
    case CUDA_ERROR_INVALID_GRAPHICS_CONTEXT: return hipErrorInvalidGraphicsContext;
    case CUDA_ERROR_INVALID_SOURCE: return hipErrorInvalidSource;
    case CUDA_ERROR_FILE_NOT_FOUND: return hipErrorFileNotFound;
    case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND: return hipErrorSharedObjectSymbolNotFound;
    case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED: return hipErrorSharedObjectInitFailed;
    case CUDA_ERROR_OPERATING_SYSTEM: return hipErrorOperatingSystem;
    case CUDA_ERROR_INVALID_HANDLE: return hipErrorInvalidHandle;
    case CUDA_ERROR_ILLEGAL_STATE: return hipErrorIllegalState;
    case CUDA_ERROR_NOT_FOUND: return hipErrorNotFound;
    case CUDA_ERROR_NOT_READY: return hipErrorNotReady;
    case CUDA_ERROR_ILLEGAL_ADDRESS: return hipErrorIllegalAddress;
    case CUDA_ERROR_MISALIGNED_ADDRESS: return hipErrorIllegalAddress;
    case CUDA_ERROR_INVALID_ADDRESS_SPACE: return hipErrorIllegalAddress;
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return hipErrorLaunchOutOfResources;
    case CUDA_ERROR_LAUNCH_TIMEOUT: return hipErrorLaunchTimeOut;
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: return hipErrorPeerAccessAlreadyEnabled;
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: return hipErrorPeerAccessNotEnabled;
    case CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE: return hipErrorSetOnActiveProcess;
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return hipErrorContextIsDestroyed;
    case CUDA_ERROR_ASSERT: return hipErrorAssert;
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED: return hipErrorHostMemoryAlreadyRegistered;
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: return hipErrorHostMemoryNotRegistered;
    /* Faults inside a kernel: HIP reports them all as a launch failure. */
    case CUDA_ERROR_HARDWARE_STACK_ERROR: return hipErrorLaunchFailure;
    case CUDA_ERROR_ILLEGAL_INSTRUCTION: return hipErrorLaunchFailure;
    case CUDA_ERROR_INVALID_PC: return hipErrorLaunchFailure;
    case CUDA_ERROR_LAUNCH_FAILED: return hipErrorLaunchFailure;
    case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: return hipErrorCooperativeLaunchTooLarge;
    case CUDA_ERROR_NOT_PERMITTED: return hipErrorNotSupported;
    case CUDA_ERROR_NOT_SUPPORTED: return hipErrorNotSupported;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: return hipErrorStreamCaptureUnsupported;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: return hipErrorStreamCaptureInvalidated;
    case CUDA_ERROR_STREAM_CAPTURE_MERGE: return hipErrorStreamCaptureMerge;
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED: return hipErrorStreamCaptureUnmatched;
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED: return hipErrorStreamCaptureUnjoined;
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION: return hipErrorStreamCaptureIsolation;
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: return hipErrorStreamCaptureImplicit;
    case CUDA_ERROR_CAPTURED_EVENT: return hipErrorCapturedEvent;
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: return hipErrorStreamCaptureWrongThread;
    case CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: return hipErrorGraphExecUpdateFailure;
    default: return hipErrorUnknown;
    }
}

/* ---------------------------------------------------------------------------------------
 * Driver initialisation and contexts.
 */
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static CUresult g_init_result = CUDA_ERROR_NOT_INITIALIZED;
int hoc_device_count = 0;
CUdevice* hoc_devices = NULL;         /* HIP ordinal -> CUdevice */
static CUcontext* g_contexts = NULL;  /* retained primary contexts, filled lazily */
static pthread_mutex_t g_ctx_mutex = PTHREAD_MUTEX_INITIALIZER;

/* HIP's current device is per host thread and starts at 0. */
_Thread_local int hoc_current_device = 0;

static void init_once(void) {
    CUresult r = cuInit(0);
    int count = 0;
    if (r == CUDA_SUCCESS) r = cuDeviceGetCount(&count);
    if (r == CUDA_SUCCESS && count <= 0) r = CUDA_ERROR_NO_DEVICE;
    if (r == CUDA_SUCCESS) {
        hoc_devices = calloc((size_t)count, sizeof *hoc_devices);
        g_contexts = calloc((size_t)count, sizeof *g_contexts);
        if (hoc_devices == NULL || g_contexts == NULL) r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; r == CUDA_SUCCESS && i < count; ++i) r = cuDeviceGet(&hoc_devices[i], i);
    if (r == CUDA_SUCCESS) hoc_device_count = count;
    g_init_result = r;
}

/* Initialises the driver once per process; every entry point starts here, as HIP
 * initialises implicitly on the first call. */
hipError_t hoc_ensure_init(void) {
    pthread_once(&g_once, init_once);
    return hoc_from_cu(g_init_result);
}

hipError_t hoc_check_device(int id) {
    hipError_t e = hoc_ensure_init();
    if (e != hipSuccess) return e;
    return (id < 0 || id >= hoc_device_count) ? hipErrorInvalidDevice : hipSuccess;
}

/* The retained primary context of HIP device `id` (already checked). */
static hipError_t primary_context(int id, CUcontext* out) {
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_ctx_mutex);
    if (g_contexts[id] == NULL) r = cuDevicePrimaryCtxRetain(&g_contexts[id], hoc_devices[id]);
    *out = g_contexts[id];
    pthread_mutex_unlock(&g_ctx_mutex);
    return hoc_from_cu(r);
}

/* Makes the primary context of the thread's current device current on this thread.
 * Compared against the driver's current context on every call rather than cached, so that
 * other code on the thread (the CUDA runtime, a test harness) cannot leave us in a
 * different context. */
hipError_t hoc_enter(void) {
    hipError_t e = hoc_check_device(hoc_current_device);
    if (e != hipSuccess) return e;
    CUcontext want, cur = NULL;
    e = primary_context(hoc_current_device, &want);
    if (e != hipSuccess) return e;
    CUresult r = cuCtxGetCurrent(&cur);
    if (r == CUDA_SUCCESS && cur != want) r = cuCtxSetCurrent(want);
    return hoc_from_cu(r);
}

int hoc_make_current(void) { return (int)hoc_enter(); }

/* ---------------------------------------------------------------------------------------
 * Timeline trace (HOC_TRACE=FILE; see hoc_internal.h).
 */
#define HOC_TRACE_MAX 500000
struct hoc_trace_rec {
    const char* kind;
    const char* name;
    unsigned long long bytes;
    CUevent ev0, ev1;
    long long t0, t1; /* host ns */
};
static struct hoc_trace_rec* g_trace;
static _Atomic int g_trace_n;
static CUevent g_trace_base;
static long long g_trace_t0;
static pthread_once_t g_trace_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_trace_lock = PTHREAD_MUTEX_INITIALIZER;

const char* hoc_trace_path(void) {
    static const char* cached = (const char*)1;
    if (cached == (const char*)1) {
        const char* v = getenv("HOC_TRACE");
        cached = (v != NULL && v[0] != '\0' && strcmp(v, "0") != 0) ? v : NULL;
    }
    return cached;
}

static long long trace_now_ns(void) {
    struct timespec t;
    timespec_get(&t, TIME_UTC);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void trace_dump(void) {
    FILE* f = fopen(hoc_trace_path(), "w");
    if (f == NULL) {
        fprintf(stderr, "[hip-on-cuda trace] cannot write %s\n", hoc_trace_path());
        return;
    }
    hoc_enter();
    int n = atomic_load(&g_trace_n);
    if (n > HOC_TRACE_MAX) n = HOC_TRACE_MAX;
    fprintf(f, "seq,kind,name,bytes,host_begin_us,host_end_us,gpu_begin_us,gpu_end_us\n");
    for (int i = 0; i < n; ++i) {
        const struct hoc_trace_rec* r = &g_trace[i];
        float g0 = -1.0f, g1 = -1.0f;
        if (r->ev0 != NULL && r->ev1 != NULL && g_trace_base != NULL && cuEventSynchronize(r->ev1) == CUDA_SUCCESS) {
            if (cuEventElapsedTime(&g0, g_trace_base, r->ev0) != CUDA_SUCCESS) g0 = -1.0f;
            if (cuEventElapsedTime(&g1, g_trace_base, r->ev1) != CUDA_SUCCESS) g1 = -1.0f;
        }
        fprintf(f, "%d,%s,%s,%llu,%.3f,%.3f,%.3f,%.3f\n", i, r->kind, r->name ? r->name : "", r->bytes,
                (r->t0 - g_trace_t0) / 1e3, (r->t1 - g_trace_t0) / 1e3, g0 * 1e3, g1 * 1e3);
    }
    fclose(f);
    fprintf(stderr, "[hip-on-cuda trace] %d records written to %s\n", n, hoc_trace_path());
}

static void trace_init(void) {
    g_trace = calloc(HOC_TRACE_MAX, sizeof *g_trace);
    g_trace_t0 = trace_now_ns();
    if (g_trace != NULL) atexit(trace_dump);
}

int hoc_trace_begin(const char* kind, const char* name, unsigned long long bytes, void* stream) {
    if (hoc_trace_path() == NULL) return -1;
    pthread_once(&g_trace_once, trace_init);
    if (g_trace == NULL) return -1;
    int i = atomic_fetch_add(&g_trace_n, 1);
    if (i >= HOC_TRACE_MAX) return -1;
    struct hoc_trace_rec* r = &g_trace[i];
    r->kind = kind;
    r->name = name;
    r->bytes = bytes;
    r->t0 = trace_now_ns();
    if (stream != HOC_TRACE_HOST && hoc_enter() == hipSuccess) {
        pthread_mutex_lock(&g_trace_lock);
        if (g_trace_base == NULL && cuEventCreate(&g_trace_base, CU_EVENT_DEFAULT) == CUDA_SUCCESS)
            cuEventRecord(g_trace_base, (CUstream)stream);
        pthread_mutex_unlock(&g_trace_lock);
        if (cuEventCreate(&r->ev0, CU_EVENT_DEFAULT) == CUDA_SUCCESS) cuEventRecord(r->ev0, (CUstream)stream);
    }
    return i;
}

void hoc_trace_end(int record, void* stream) {
    if (record < 0) return;
    struct hoc_trace_rec* r = &g_trace[record];
    if (r->ev0 != NULL && stream != HOC_TRACE_HOST && cuEventCreate(&r->ev1, CU_EVENT_DEFAULT) == CUDA_SUCCESS)
        cuEventRecord(r->ev1, (CUstream)stream);
    r->t1 = trace_now_ns();
}

/* ---------------------------------------------------------------------------------------
 * Error reporting.
 */
hipError_t hipGetLastError(void) {
    hipError_t e = t_last_error;
    t_last_error = hipSuccess;
    return e;
}

/* Name and description of each code; the names are the enumerators' (for values with two
 * enumerators, the one HIP's own hipGetErrorName returns). */
#define HOC_ERRORS(X)                                                                              \
    X(hipSuccess, "no error")                                                                      \
    X(hipErrorInvalidValue, "invalid argument")                                                    \
    X(hipErrorOutOfMemory, "out of memory")                                                        \
    X(hipErrorNotInitialized, "initialization error")                                              \
    X(hipErrorDeinitialized, "driver shutting down")                                               \
    X(hipErrorProfilerDisabled, "profiler disabled while using external profiling tool")          \
    X(hipErrorProfilerNotInitialized, "profiler is not initialized")                               \
    X(hipErrorProfilerAlreadyStarted, "profiler already started")                                  \
    X(hipErrorProfilerAlreadyStopped, "profiler already stopped")                                  \
    X(hipErrorInvalidConfiguration, "invalid configuration argument")                              \
    X(hipErrorInvalidPitchValue, "invalid pitch argument")                                         \
    X(hipErrorInvalidSymbol, "invalid device symbol")                                              \
    X(hipErrorInvalidDevicePointer, "invalid device pointer")                                      \
    X(hipErrorInvalidMemcpyDirection, "invalid copy direction for memcpy")                         \
    X(hipErrorInsufficientDriver, "driver version is insufficient for runtime version")            \
    X(hipErrorMissingConfiguration, "__global__ function call is not configured")                  \
    X(hipErrorPriorLaunchFailure, "unspecified launch failure in prior launch")                    \
    X(hipErrorInvalidDeviceFunction, "invalid device function")                                    \
    X(hipErrorNoDevice, "no ROCm-capable device is detected")                                      \
    X(hipErrorInvalidDevice, "invalid device ordinal")                                             \
    X(hipErrorInvalidImage, "device kernel image is invalid")                                      \
    X(hipErrorInvalidContext, "invalid device context")                                            \
    X(hipErrorContextAlreadyCurrent, "context is already current context")                         \
    X(hipErrorMapFailed, "mapping of buffer object failed")                                        \
    X(hipErrorUnmapFailed, "unmapping of buffer object failed")                                    \
    X(hipErrorArrayIsMapped, "array is mapped")                                                    \
    X(hipErrorAlreadyMapped, "resource already mapped")                                            \
    X(hipErrorNoBinaryForGpu, "no kernel image is available for execution on the device")          \
    X(hipErrorAlreadyAcquired, "resource already acquired")                                        \
    X(hipErrorNotMapped, "resource not mapped")                                                    \
    X(hipErrorNotMappedAsArray, "resource not mapped as array")                                    \
    X(hipErrorNotMappedAsPointer, "resource not mapped as pointer")                                \
    X(hipErrorECCNotCorrectable, "uncorrectable ECC error encountered")                            \
    X(hipErrorUnsupportedLimit, "limit is not supported on this architecture")                     \
    X(hipErrorContextAlreadyInUse, "exclusive-thread device already in use by a different thread") \
    X(hipErrorPeerAccessUnsupported, "peer access is not supported between these two devices")     \
    X(hipErrorInvalidKernelFile, "invalid kernel file")                                            \
    X(hipErrorInvalidGraphicsContext, "invalid OpenGL or DirectX context")                         \
    X(hipErrorInvalidSource, "device kernel image is invalid")                                     \
    X(hipErrorFileNotFound, "file not found")                                                      \
    X(hipErrorSharedObjectSymbolNotFound, "shared object symbol not found")                        \
    X(hipErrorSharedObjectInitFailed, "shared object initialization failed")                       \
    X(hipErrorOperatingSystem, "OS call failed or operation not supported on this OS")             \
    X(hipErrorInvalidHandle, "invalid resource handle")                                            \
    X(hipErrorIllegalState, "the operation cannot be performed in the present state")              \
    X(hipErrorNotFound, "named symbol not found")                                                  \
    X(hipErrorNotReady, "device not ready")                                                        \
    X(hipErrorIllegalAddress, "an illegal memory access was encountered")                          \
    X(hipErrorLaunchOutOfResources, "too many resources requested for launch")                     \
    X(hipErrorLaunchTimeOut, "the launch timed out and was terminated")                            \
    X(hipErrorPeerAccessAlreadyEnabled, "peer access is already enabled")                          \
    X(hipErrorPeerAccessNotEnabled, "peer access has not been enabled")                            \
    X(hipErrorSetOnActiveProcess, "cannot set while device is active in this process")             \
    X(hipErrorContextIsDestroyed, "context is destroyed")                                          \
    X(hipErrorAssert, "device-side assert triggered")                                              \
    X(hipErrorHostMemoryAlreadyRegistered, "part or all of the requested memory range is already mapped") \
    X(hipErrorHostMemoryNotRegistered, "pointer does not correspond to a registered memory region") \
    X(hipErrorLaunchFailure, "unspecified launch failure")                                         \
    X(hipErrorCooperativeLaunchTooLarge, "too many blocks in cooperative launch")                  \
    X(hipErrorNotSupported, "operation not supported")                                             \
    X(hipErrorStreamCaptureUnsupported, "operation not permitted when stream is capturing")        \
    X(hipErrorStreamCaptureInvalidated, "operation failed due to a previous error during capture") \
    X(hipErrorStreamCaptureMerge, "operation would result in a merge of separate capture sequences") \
    X(hipErrorStreamCaptureUnmatched, "capture was not ended in the same stream as it began")      \
    X(hipErrorStreamCaptureUnjoined, "capturing stream has unjoined work")                         \
    X(hipErrorStreamCaptureIsolation, "dependency created on uncaptured work in another stream")   \
    X(hipErrorStreamCaptureImplicit, "operation would make the legacy stream depend on a capturing blocking stream") \
    X(hipErrorCapturedEvent, "operation not permitted on an event last recorded in a capturing stream") \
    X(hipErrorStreamCaptureWrongThread, "attempt to terminate a thread-local capture sequence from another thread") \
    X(hipErrorGraphExecUpdateFailure, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update") \
    X(hipErrorInvalidChannelDescriptor, "invalid channel descriptor")                              \
    X(hipErrorInvalidTexture, "invalid texture")                                                   \
    X(hipErrorUnknown, "unknown error")                                                            \
    X(hipErrorRuntimeMemory, "runtime memory call returned error")                                 \
    X(hipErrorRuntimeOther, "runtime call other than memory returned error")

const char* hipGetErrorName(hipError_t hip_error) {
#define X(code, text) \
    case code: return #code;
    switch (hip_error) {
        HOC_ERRORS(X)
    default: return "hipErrorUnknown";
    }
#undef X
}

const char* hipGetErrorString(hipError_t hipError) {
#define X(code, text) \
    case code: return text;
    switch (hipError) {
        HOC_ERRORS(X)
    default: return "unknown error";
    }
#undef X
}
