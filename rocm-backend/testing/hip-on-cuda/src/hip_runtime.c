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
 */
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>

#include <cuda.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hoc_internal.h"

/* ---------------------------------------------------------------------------------------
 * Error state. HIP 6.x keeps, per host thread, the last error that a runtime call returned
 * other than hipSuccess and hipErrorNotReady; hipGetLastError returns it and resets it
 * to hipSuccess (CUDA's cudaGetLastError semantics, which HIP adopted in 6.0).
 */
static _Thread_local hipError_t t_last_error = hipSuccess;

static hipError_t record(const char* fn, hipError_t e) {
    if (e != hipSuccess && e != hipErrorNotReady) {
        t_last_error = e;
        if (hoc_log_enabled()) fprintf(stderr, "[hip-on-cuda] %s -> %s (%d)\n", fn, hipGetErrorName(e), (int)e);
    }
    return e;
}
#define RETURN(e) return record(__func__, (e))

/* CUresult -> hipError_t. HIP took most of its numbering from CUDA, but the mapping is
 * written out by name so that a renumbering on either side cannot go unnoticed. */
static hipError_t from_cu(CUresult r) {
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
static int g_device_count = 0;
static CUdevice* g_devices = NULL;    /* HIP ordinal -> CUdevice */
static CUcontext* g_contexts = NULL;  /* retained primary contexts, filled lazily */
static pthread_mutex_t g_ctx_mutex = PTHREAD_MUTEX_INITIALIZER;

/* HIP's current device is per host thread and starts at 0. */
static _Thread_local int t_device = 0;

static void init_once(void) {
    CUresult r = cuInit(0);
    int count = 0;
    if (r == CUDA_SUCCESS) r = cuDeviceGetCount(&count);
    if (r == CUDA_SUCCESS && count <= 0) r = CUDA_ERROR_NO_DEVICE;
    if (r == CUDA_SUCCESS) {
        g_devices = calloc((size_t)count, sizeof *g_devices);
        g_contexts = calloc((size_t)count, sizeof *g_contexts);
        if (g_devices == NULL || g_contexts == NULL) r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (int i = 0; r == CUDA_SUCCESS && i < count; ++i) r = cuDeviceGet(&g_devices[i], i);
    if (r == CUDA_SUCCESS) g_device_count = count;
    g_init_result = r;
}

/* Initialises the driver once per process; every entry point starts here, as HIP
 * initialises implicitly on the first call. */
static hipError_t ensure_init(void) {
    pthread_once(&g_once, init_once);
    return from_cu(g_init_result);
}

static hipError_t check_device(int id) {
    hipError_t e = ensure_init();
    if (e != hipSuccess) return e;
    return (id < 0 || id >= g_device_count) ? hipErrorInvalidDevice : hipSuccess;
}

/* The retained primary context of HIP device `id` (already checked). */
static hipError_t primary_context(int id, CUcontext* out) {
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_ctx_mutex);
    if (g_contexts[id] == NULL) r = cuDevicePrimaryCtxRetain(&g_contexts[id], g_devices[id]);
    *out = g_contexts[id];
    pthread_mutex_unlock(&g_ctx_mutex);
    return from_cu(r);
}

/* Makes the primary context of the thread's current device current on this thread.
 * Compared against the driver's current context on every call rather than cached, so that
 * other code on the thread (the CUDA runtime, a test harness) cannot leave us in a
 * different context. */
static hipError_t enter(void) {
    hipError_t e = check_device(t_device);
    if (e != hipSuccess) return e;
    CUcontext want, cur = NULL;
    e = primary_context(t_device, &want);
    if (e != hipSuccess) return e;
    CUresult r = cuCtxGetCurrent(&cur);
    if (r == CUDA_SUCCESS && cur != want) r = cuCtxSetCurrent(want);
    return from_cu(r);
}

int hoc_make_current(void) { return (int)enter(); }

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

static const char* trace_path(void) {
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
    FILE* f = fopen(trace_path(), "w");
    if (f == NULL) {
        fprintf(stderr, "[hip-on-cuda trace] cannot write %s\n", trace_path());
        return;
    }
    enter();
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
    fprintf(stderr, "[hip-on-cuda trace] %d records written to %s\n", n, trace_path());
}

static void trace_init(void) {
    g_trace = calloc(HOC_TRACE_MAX, sizeof *g_trace);
    g_trace_t0 = trace_now_ns();
    if (g_trace != NULL) atexit(trace_dump);
}

int hoc_trace_begin(const char* kind, const char* name, unsigned long long bytes, void* stream) {
    if (trace_path() == NULL) return -1;
    pthread_once(&g_trace_once, trace_init);
    if (g_trace == NULL) return -1;
    int i = atomic_fetch_add(&g_trace_n, 1);
    if (i >= HOC_TRACE_MAX) return -1;
    struct hoc_trace_rec* r = &g_trace[i];
    r->kind = kind;
    r->name = name;
    r->bytes = bytes;
    r->t0 = trace_now_ns();
    if (stream != HOC_TRACE_HOST && enter() == hipSuccess) {
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

/* The kernel's name for the trace (cuFuncGetName: CUDA 12.3 and later). */
static const char* trace_kernel_name(CUfunction f) {
#if CUDA_VERSION >= 12030
    const char* name = NULL;
    if (cuFuncGetName(&name, f) == CUDA_SUCCESS && name != NULL) return name;
#else
    (void)f;
#endif
    return "kernel";
}

/* ---------------------------------------------------------------------------------------
 * Device discovery and properties.
 */
hipError_t hipInit(unsigned int flags) {
    if (flags != 0) RETURN(hipErrorInvalidValue);
    RETURN(ensure_init());
}

hipError_t hipGetDeviceCount(int* count) {
    if (count == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = ensure_init();
    *count = e == hipSuccess ? g_device_count : 0;
    RETURN(e);
}

hipError_t hipSetDevice(int deviceId) {
    HOC_TIMED();
    hipError_t e = check_device(deviceId);
    if (e != hipSuccess) RETURN(e);
    t_device = deviceId;
    RETURN(enter());
}

hipError_t hipGetDevice(int* deviceId) {
    if (deviceId == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = ensure_init();
    if (e != hipSuccess) RETURN(e);
    *deviceId = t_device;
    RETURN(hipSuccess);
}

/* An attribute that the driver may not report on every device or driver: 0 when absent. */
static int attr_or_zero(CUdevice d, CUdevice_attribute a) {
    int v = 0;
    if (cuDeviceGetAttribute(&v, a, d) != CUDA_SUCCESS) v = 0;
    return v;
}

/* Expands to the R0600 name through hip_runtime_api.h's macros, as in ROCm. */
hipError_t hipGetDeviceProperties(hipDeviceProp_t* prop, int deviceId) {
    if (prop == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = check_device(deviceId);
    if (e != hipSuccess) RETURN(e);
    const CUdevice d = g_devices[deviceId];
    memset(prop, 0, sizeof *prop);

    CUresult r = cuDeviceGetName(prop->name, (int)sizeof prop->name, d);
    size_t total = 0;
    if (r == CUDA_SUCCESS) r = cuDeviceTotalMem(&total, d);
    CUuuid uuid;
    if (r == CUDA_SUCCESS) r = cuDeviceGetUuid(&uuid, d);
    int major = 0, minor = 0;
    if (r == CUDA_SUCCESS) r = cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
    if (r == CUDA_SUCCESS) r = cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
    if (r != CUDA_SUCCESS) RETURN(from_cu(r));
    memcpy(prop->uuid.bytes, uuid.bytes, sizeof prop->uuid.bytes);

    prop->totalGlobalMem = total;
    prop->major = major;
    prop->minor = minor;
    /* The architecture name the backend compiles for (hiprtc --offload-arch=): the NVIDIA
     * SM version, e.g. "sm_90", with no ":feature" suffix. */
    snprintf(prop->gcnArchName, sizeof prop->gcnArchName, "sm_%d%d", major, minor);

    /* Static shared memory a block can use without opt-in: what a kernel launched with
     * sharedMemBytes = 0 and statically sized __shared__ arrays can have (48 KiB). */
    prop->sharedMemPerBlock = (size_t)attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    prop->sharedMemPerBlockOptin = (size_t)attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    prop->sharedMemPerMultiprocessor = (size_t)attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    prop->maxSharedMemoryPerMultiProcessor = prop->sharedMemPerMultiprocessor;
    prop->reservedSharedMemPerBlock = (size_t)attr_or_zero(d, CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK);
    prop->regsPerBlock = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
    prop->regsPerMultiprocessor = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    prop->warpSize = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    prop->memPitch = (size_t)attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_PITCH);
    prop->maxThreadsPerBlock = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    prop->maxThreadsDim[0] = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X);
    prop->maxThreadsDim[1] = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y);
    prop->maxThreadsDim[2] = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z);
    prop->maxGridSize[0] = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
    prop->maxGridSize[1] = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y);
    prop->maxGridSize[2] = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z);
    prop->clockRate = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    /* clock64() counts SM cycles on NVIDIA: its rate is the SM clock. */
    prop->clockInstructionRate = prop->clockRate;
    prop->totalConstMem = (size_t)attr_or_zero(d, CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY);
    prop->textureAlignment = (size_t)attr_or_zero(d, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT);
    prop->texturePitchAlignment = (size_t)attr_or_zero(d, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT);
    prop->asyncEngineCount = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT);
    prop->deviceOverlap = prop->asyncEngineCount > 0;
    prop->multiProcessorCount = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    prop->kernelExecTimeoutEnabled = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT);
    prop->integrated = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_INTEGRATED);
    prop->canMapHostMemory = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY);
    prop->computeMode = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE);
    prop->concurrentKernels = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS);
    prop->ECCEnabled = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_ECC_ENABLED);
    prop->pciBusID = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID);
    prop->pciDeviceID = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID);
    prop->pciDomainID = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID);
    prop->tccDriver = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_TCC_DRIVER);
    prop->unifiedAddressing = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING);
    prop->memoryClockRate = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    prop->memoryBusWidth = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    prop->l2CacheSize = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    prop->persistingL2CacheMaxSize = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE);
    prop->maxThreadsPerMultiProcessor = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    prop->streamPrioritiesSupported = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED);
    prop->globalL1CacheSupported = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED);
    prop->localL1CacheSupported = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED);
    prop->managedMemory = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY);
    prop->isMultiGpuBoard = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD);
    prop->multiGpuBoardGroupID = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID);
    prop->hostNativeAtomicSupported = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED);
    prop->singleToDoublePrecisionPerfRatio = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO);
    prop->pageableMemoryAccess = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS);
    prop->concurrentManagedAccess = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS);
    prop->computePreemptionSupported = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED);
    prop->canUseHostPointerForRegisteredMem = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
    prop->cooperativeLaunch = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH);
    prop->pageableMemoryAccessUsesHostPageTables =
        attr_or_zero(d, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
    prop->directManagedMemAccessFromHost = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
    prop->maxBlocksPerMultiProcessor = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
    prop->accessPolicyMaxWindowSize = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE);
    prop->hostRegisterSupported = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED);
    prop->memoryPoolsSupported = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
    prop->clusterLaunch = attr_or_zero(d, CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH);
    /* Feature flags: every NVIDIA GPU this library can drive (sm_50 and later) has all of
     * them; dynamic parallelism is not usable through hiprtc, so it is left off. */
    prop->arch.hasGlobalInt32Atomics = 1;
    prop->arch.hasGlobalFloatAtomicExch = 1;
    prop->arch.hasSharedInt32Atomics = 1;
    prop->arch.hasSharedFloatAtomicExch = 1;
    prop->arch.hasFloatAtomicAdd = 1;
    prop->arch.hasGlobalInt64Atomics = 1;
    prop->arch.hasSharedInt64Atomics = 1;
    prop->arch.hasDoubles = 1;
    prop->arch.hasWarpVote = 1;
    prop->arch.hasWarpBallot = 1;
    prop->arch.hasWarpShuffle = 1;
    prop->arch.hasFunnelShift = 1;
    prop->arch.hasThreadFenceSystem = 1;
    prop->arch.hasSyncThreadsExt = 1;
    prop->arch.hasSurfaceFuncs = 1;
    prop->arch.has3dGrid = 1;
    RETURN(hipSuccess);
}

hipError_t hipDeviceGetAttribute(int* pi, hipDeviceAttribute_t attr, int deviceId) {
    if (pi == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = check_device(deviceId);
    if (e != hipSuccess) RETURN(e);
    CUdevice_attribute a;
    switch (attr) {
    case hipDeviceAttributeMaxSharedMemoryPerBlock: a = CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK; break;
    case hipDeviceAttributeSharedMemPerBlockOptin: a = CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN; break;
    case hipDeviceAttributeSharedMemPerMultiprocessor:
    case hipDeviceAttributeMaxSharedMemoryPerMultiprocessor:
        a = CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR;
        break;
    case hipDeviceAttributeWarpSize: a = CU_DEVICE_ATTRIBUTE_WARP_SIZE; break;
    case hipDeviceAttributeMultiprocessorCount: a = CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT; break;
    case hipDeviceAttributeMaxThreadsPerBlock: a = CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK; break;
    case hipDeviceAttributeMaxBlockDimX: a = CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X; break;
    case hipDeviceAttributeMaxBlockDimY: a = CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y; break;
    case hipDeviceAttributeMaxBlockDimZ: a = CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z; break;
    case hipDeviceAttributeMaxGridDimX: a = CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X; break;
    case hipDeviceAttributeMaxGridDimY: a = CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y; break;
    case hipDeviceAttributeMaxGridDimZ: a = CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z; break;
    case hipDeviceAttributeMaxThreadsPerMultiProcessor: a = CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR; break;
    case hipDeviceAttributeMaxBlocksPerMultiProcessor: a = CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR; break;
    case hipDeviceAttributeMaxRegistersPerBlock: a = CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK; break;
    case hipDeviceAttributeMaxRegistersPerMultiprocessor: a = CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR; break;
    case hipDeviceAttributeComputeCapabilityMajor: a = CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR; break;
    case hipDeviceAttributeComputeCapabilityMinor: a = CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR; break;
    case hipDeviceAttributeClockRate:
    case hipDeviceAttributeClockInstructionRate:
        a = CU_DEVICE_ATTRIBUTE_CLOCK_RATE;
        break;
    case hipDeviceAttributeMemoryClockRate: a = CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE; break;
    case hipDeviceAttributeMemoryBusWidth: a = CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH; break;
    case hipDeviceAttributeL2CacheSize: a = CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE; break;
    case hipDeviceAttributeTotalConstantMemory: a = CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY; break;
    case hipDeviceAttributeConcurrentKernels: a = CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS; break;
    case hipDeviceAttributeAsyncEngineCount: a = CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT; break;
    case hipDeviceAttributeEccEnabled: a = CU_DEVICE_ATTRIBUTE_ECC_ENABLED; break;
    case hipDeviceAttributeIntegrated: a = CU_DEVICE_ATTRIBUTE_INTEGRATED; break;
    case hipDeviceAttributePciBusId: a = CU_DEVICE_ATTRIBUTE_PCI_BUS_ID; break;
    case hipDeviceAttributePciDeviceId: a = CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID; break;
    case hipDeviceAttributePciDomainID: a = CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID; break;
    case hipDeviceAttributeUnifiedAddressing: a = CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING; break;
    case hipDeviceAttributeManagedMemory: a = CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY; break;
    case hipDeviceAttributeCooperativeLaunch: a = CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH; break;
    case hipDeviceAttributeComputeMode: a = CU_DEVICE_ATTRIBUTE_COMPUTE_MODE; break;
    case hipDeviceAttributeKernelExecTimeout: a = CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT; break;
    case hipDeviceAttributeCanMapHostMemory: a = CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY; break;
    case hipDeviceAttributeStreamPrioritiesSupported: a = CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED; break;
    case hipDeviceAttributeMemoryPoolsSupported: a = CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED; break;
    case hipDeviceAttributeMaxPitch: a = CU_DEVICE_ATTRIBUTE_MAX_PITCH; break;
    case hipDeviceAttributeTextureAlignment: a = CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT; break;
    case hipDeviceAttributeTexturePitchAlignment: a = CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT; break;
    /* Attributes with no CUDA counterpart (AMD-specific), or that do not fit an int
     * (hipDeviceAttributeTotalGlobalMem on a 141 GB card): not provided. */
    default: RETURN(hipErrorInvalidValue);
    }
    RETURN(from_cu(cuDeviceGetAttribute(pi, a, g_devices[deviceId])));
}

hipError_t hipMemGetInfo(size_t* free, size_t* total) {
    HOC_TIMED();
    if (free == NULL || total == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(from_cu(cuMemGetInfo(free, total)));
}

/* The HIP API level these libraries implement (the headers' HIP_VERSION, 60443484 for
 * HIP 6.4.43484), as the real runtime reports its own version. */
hipError_t hipRuntimeGetVersion(int* runtimeVersion) {
    if (runtimeVersion == NULL) RETURN(hipErrorInvalidValue);
    *runtimeVersion = HIP_VERSION;
    RETURN(hipSuccess);
}

/* The CUDA driver's version (e.g. 13000 for CUDA 13.0): the component underneath that
 * changes behaviour, so that caches keyed on it notice a driver update. */
hipError_t hipDriverGetVersion(int* driverVersion) {
    if (driverVersion == NULL) RETURN(hipErrorInvalidValue);
    RETURN(from_cu(cuDriverGetVersion(driverVersion)));
}

/* ---------------------------------------------------------------------------------------
 * Memory.
 */
hipError_t hipMalloc(void** ptr, size_t size) {
    HOC_TIMED();
    if (ptr == NULL) RETURN(hipErrorInvalidValue);
    *ptr = NULL;
    /* HIP returns success and a null pointer for a zero-byte request; CUDA would reject it. */
    if (size == 0) RETURN(hipSuccess);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    CUdeviceptr p = 0;
    int tr = hoc_trace_begin("malloc", NULL, size, HOC_TRACE_HOST);
    CUresult r = cuMemAlloc(&p, size);
    hoc_trace_end(tr, HOC_TRACE_HOST);
    if (r == CUDA_SUCCESS) *ptr = (void*)(uintptr_t)p;
    RETURN(from_cu(r));
}

hipError_t hipFree(void* ptr) {
    HOC_TIMED();
    if (ptr == NULL) RETURN(hipSuccess);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    int tr = hoc_trace_begin("free", NULL, 0, HOC_TRACE_HOST);
    CUresult r = cuMemFree((CUdeviceptr)(uintptr_t)ptr);
    hoc_trace_end(tr, HOC_TRACE_HOST);
    RETURN(from_cu(r));
}

/* Page-locked host memory (rocm-backend's PinnedHostBuffer asks for the default flags only). */
hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
    HOC_TIMED();
    if (ptr == NULL) RETURN(hipErrorInvalidValue);
    *ptr = NULL;
    if (flags != hipHostMallocDefault) RETURN(hipErrorInvalidValue);
    if (size == 0) RETURN(hipSuccess);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(from_cu(cuMemHostAlloc(ptr, size, 0)));
}

hipError_t hipHostFree(void* ptr) {
    HOC_TIMED();
    if (ptr == NULL) RETURN(hipSuccess);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(from_cu(cuMemFreeHost(ptr)));
}

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream) {
    HOC_TIMED();
    if (sizeBytes == 0) RETURN(hipSuccess);
    if (dst == NULL || src == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    CUstream s = (CUstream)stream;
    const CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, sp = (CUdeviceptr)(uintptr_t)src;
    static const char* const kinds[] = {"memcpy_h2h", "memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memcpy"};
    int tr = hoc_trace_begin(kind >= 0 && kind <= 4 ? kinds[kind] : "memcpy", NULL, sizeBytes, stream);
    CUresult r;
    switch (kind) {
    case hipMemcpyHostToDevice: r = cuMemcpyHtoDAsync(d, src, sizeBytes, s); break;
    case hipMemcpyDeviceToHost: r = cuMemcpyDtoHAsync(dst, sp, sizeBytes, s); break;
    case hipMemcpyDeviceToDevice:
    case hipMemcpyDeviceToDeviceNoCU: r = cuMemcpyDtoDAsync(d, sp, sizeBytes, s); break;
    /* Unified addressing: the driver infers the direction from the pointers, which also
     * covers host-to-host in stream order. */
    case hipMemcpyHostToHost:
    case hipMemcpyDefault: r = cuMemcpyAsync(d, sp, sizeBytes, s); break;
    default: hoc_trace_end(tr, stream); RETURN(hipErrorInvalidMemcpyDirection);
    }
    hoc_trace_end(tr, stream);
    RETURN(from_cu(r));
}

hipError_t hipMemsetD8Async(hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream) {
    HOC_TIMED();
    if (count == 0) RETURN(hipSuccess);
    if (dest == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    int tr = hoc_trace_begin("memset", NULL, count, stream);
    CUresult r = cuMemsetD8Async((CUdeviceptr)(uintptr_t)dest, value, count, (CUstream)stream);
    hoc_trace_end(tr, stream);
    RETURN(from_cu(r));
}

/* ---------------------------------------------------------------------------------------
 * Streams. hipStreamNonBlocking and CU_STREAM_NON_BLOCKING mean the same thing: no implicit
 * synchronisation with the null stream.
 */
hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
    if (stream == NULL) RETURN(hipErrorInvalidValue);
    if ((flags & ~(unsigned)hipStreamNonBlocking) != 0) RETURN(hipErrorInvalidValue);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    CUstream s = NULL;
    CUresult r = cuStreamCreate(&s, (flags & hipStreamNonBlocking) ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT);
    if (r == CUDA_SUCCESS) *stream = (hipStream_t)s;
    RETURN(from_cu(r));
}

hipError_t hipStreamDestroy(hipStream_t stream) {
    /* The null stream cannot be destroyed. */
    if (stream == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(from_cu(cuStreamDestroy((CUstream)stream)));
}

hipError_t hipStreamSynchronize(hipStream_t stream) {
    HOC_TIMED();
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    int tr = hoc_trace_begin("sync", NULL, 0, HOC_TRACE_HOST);
    CUresult r = cuStreamSynchronize((CUstream)stream);
    hoc_trace_end(tr, HOC_TRACE_HOST);
    RETURN(from_cu(r));
}

/* ---------------------------------------------------------------------------------------
 * Events.
 */
hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
    HOC_TIMED();
    if (event == NULL) RETURN(hipErrorInvalidValue);
    /* The AMD-only release-scope flags only choose cache flushes on AMD hardware; CUDA
     * events always order memory for the host, so they are accepted and have no effect. */
    const unsigned amd_only = hipEventDisableSystemFence | hipEventReleaseToDevice | hipEventReleaseToSystem;
    const unsigned known = hipEventBlockingSync | hipEventDisableTiming | hipEventInterprocess | amd_only;
    if ((flags & ~known) != 0) RETURN(hipErrorInvalidValue);
    /* As in both runtimes, an interprocess event must have timing disabled. */
    if ((flags & hipEventInterprocess) && !(flags & hipEventDisableTiming)) RETURN(hipErrorInvalidValue);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    unsigned cf = CU_EVENT_DEFAULT;
    if (flags & hipEventBlockingSync) cf |= CU_EVENT_BLOCKING_SYNC;
    if (flags & hipEventDisableTiming) cf |= CU_EVENT_DISABLE_TIMING;
    if (flags & hipEventInterprocess) cf |= CU_EVENT_INTERPROCESS;
    CUevent ev = NULL;
    CUresult r = cuEventCreate(&ev, cf);
    if (r == CUDA_SUCCESS) *event = (hipEvent_t)ev;
    RETURN(from_cu(r));
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
    HOC_TIMED();
    if (event == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(from_cu(cuEventRecord((CUevent)event, (CUstream)stream)));
}

/* hipErrorNotReady while work before the event is pending; not recorded as an error. */
hipError_t hipEventQuery(hipEvent_t event) {
    HOC_TIMED();
    if (event == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(from_cu(cuEventQuery((CUevent)event)));
}

hipError_t hipEventSynchronize(hipEvent_t event) {
    HOC_TIMED();
    if (event == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    int tr = hoc_trace_begin("event_sync", NULL, 0, HOC_TRACE_HOST);
    CUresult r = cuEventSynchronize((CUevent)event);
    hoc_trace_end(tr, HOC_TRACE_HOST);
    RETURN(from_cu(r));
}

/* hipErrorInvalidHandle for events created with hipEventDisableTiming or never recorded,
 * hipErrorNotReady while either has not completed: the codes both runtimes use. */
hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
    if (ms == NULL) RETURN(hipErrorInvalidValue);
    if (start == NULL || stop == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(from_cu(cuEventElapsedTime(ms, (CUevent)start, (CUevent)stop)));
}

hipError_t hipEventDestroy(hipEvent_t event) {
    HOC_TIMED();
    if (event == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(from_cu(cuEventDestroy((CUevent)event)));
}

/* ---------------------------------------------------------------------------------------
 * Modules and launches. The image is what this package's hiprtc returns: a cubin for a
 * real architecture (sm_XX), or PTX text when compiled for a virtual one; the driver
 * accepts both (and fatbins).
 */
hipError_t hipModuleLoadData(hipModule_t* module, const void* image) {
    HOC_TIMED();
    if (module == NULL || image == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    CUmodule m = NULL;
    CUresult r = cuModuleLoadData(&m, image);
    if (r == CUDA_SUCCESS) *module = (hipModule_t)m;
    RETURN(from_cu(r));
}

hipError_t hipModuleUnload(hipModule_t module) {
    if (module == NULL) RETURN(hipErrorInvalidResourceHandle);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(from_cu(cuModuleUnload((CUmodule)module)));
}

/* A name the module does not define gives hipErrorNotFound, as in HIP. */
hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module, const char* kname) {
    HOC_TIMED();
    if (function == NULL || kname == NULL) RETURN(hipErrorInvalidValue);
    if (module == NULL) RETURN(hipErrorInvalidResourceHandle);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    CUfunction f = NULL;
    CUresult r = cuModuleGetFunction(&f, (CUmodule)module, kname);
    if (r == CUDA_SUCCESS) *function = (hipFunction_t)f;
    RETURN(from_cu(r));
}

/* On a module's function (the only kind this library hands out, so `func` is a CUfunction):
 * the dynamic shared-memory limit and the carveout, CUDA's attributes of the same meaning.
 * HIP's enum values are not CUDA's, so each is mapped by name; others are invalid. */
hipError_t hipFuncSetAttribute(const void* func, hipFuncAttribute attr, int value) {
    HOC_TIMED();
    if (func == NULL) RETURN(hipErrorInvalidDeviceFunction);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    CUfunction_attribute cu_attr;
    switch (attr) {
    case hipFuncAttributeMaxDynamicSharedMemorySize: cu_attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; break;
    case hipFuncAttributePreferredSharedMemoryCarveout: cu_attr = CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT; break;
    default: RETURN(hipErrorInvalidValue);
    }
    RETURN(from_cu(cuFuncSetAttribute((CUfunction)func, cu_attr, value)));
}

hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                 unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, hipStream_t stream, void** kernelParams,
                                 void** extra) {
    HOC_TIMED();
    if (f == NULL) RETURN(hipErrorInvalidResourceHandle);
    hipError_t e = enter();
    if (e != hipSuccess) RETURN(e);
    /* `extra`: HIP's list ends with HIP_LAUNCH_PARAM_END (0x3), CUDA's with
     * CU_LAUNCH_PARAM_END (0x0); the buffer pointer/size markers have the same values.
     * Copy the list, translating its terminator. */
    void* cu_extra[8];
    void** extra_arg = NULL;
    if (extra != NULL) {
        size_t n = 0;
        while (extra[n] != HIP_LAUNCH_PARAM_END) {
            /* At most the two (marker, value) pairs that exist, plus the terminator. */
            if (n >= 6) RETURN(hipErrorInvalidValue);
            if (extra[n] == HIP_LAUNCH_PARAM_BUFFER_POINTER) {
                cu_extra[n] = CU_LAUNCH_PARAM_BUFFER_POINTER;
            } else if (extra[n] == HIP_LAUNCH_PARAM_BUFFER_SIZE) {
                cu_extra[n] = CU_LAUNCH_PARAM_BUFFER_SIZE;
            } else {
                RETURN(hipErrorInvalidValue);
            }
            cu_extra[n + 1] = extra[n + 1];
            n += 2;
        }
        cu_extra[n] = CU_LAUNCH_PARAM_END;
        extra_arg = cu_extra;
    }
    int tr = hoc_trace_begin("kernel", trace_path() ? trace_kernel_name((CUfunction)f) : NULL, 0, stream);
    CUresult r = cuLaunchKernel((CUfunction)f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                sharedMemBytes, (CUstream)stream, kernelParams, extra_arg);
    hoc_trace_end(tr, stream);
    RETURN(from_cu(r));
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
