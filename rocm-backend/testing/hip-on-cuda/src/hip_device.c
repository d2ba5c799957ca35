/*
 * libamdhip64.so of hip-on-cuda, part 2 of 3: devices (discovery, properties, attributes,
 * versions), memory (device and page-locked host allocations, copies, memset), streams and
 * events, over the CUDA driver API.
 *
 * TEST INFRASTRUCTURE, NOT A PRODUCT FEATURE (see ../README.md). The library's model and
 * its core (error state, CUresult mapping, contexts, trace) are in hip_runtime.c; modules and
 * launches in hip_module.c. Every definition must match ROCm's declaration exactly.
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
 * Device discovery and properties.
 */
hipError_t hipInit(unsigned int flags) {
    if (flags != 0) RETURN(hipErrorInvalidValue);
    RETURN(hoc_ensure_init());
}

hipError_t hipGetDeviceCount(int* count) {
    if (count == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = hoc_ensure_init();
    *count = e == hipSuccess ? hoc_device_count : 0;
    RETURN(e);
}

hipError_t hipSetDevice(int deviceId) {
    HOC_TIMED();
    hipError_t e = hoc_check_device(deviceId);
    if (e != hipSuccess) RETURN(e);
    hoc_current_device = deviceId;
    RETURN(hoc_enter());
}

hipError_t hipGetDevice(int* deviceId) {
    if (deviceId == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = hoc_ensure_init();
    if (e != hipSuccess) RETURN(e);
    *deviceId = hoc_current_device;
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
    hipError_t e = hoc_check_device(deviceId);
    if (e != hipSuccess) RETURN(e);
    const CUdevice d = hoc_devices[deviceId];
    memset(prop, 0, sizeof *prop);

    CUresult r = cuDeviceGetName(prop->name, (int)sizeof prop->name, d);
    size_t total = 0;
    if (r == CUDA_SUCCESS) r = cuDeviceTotalMem(&total, d);
    CUuuid uuid;
    if (r == CUDA_SUCCESS) r = cuDeviceGetUuid(&uuid, d);
    int major = 0, minor = 0;
    if (r == CUDA_SUCCESS) r = cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
    if (r == CUDA_SUCCESS) r = cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
    if (r != CUDA_SUCCESS) RETURN(hoc_from_cu(r));
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
    hipError_t e = hoc_check_device(deviceId);
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
    RETURN(hoc_from_cu(cuDeviceGetAttribute(pi, a, hoc_devices[deviceId])));
}

hipError_t hipMemGetInfo(size_t* free, size_t* total) {
    HOC_TIMED();
    if (free == NULL || total == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(hoc_from_cu(cuMemGetInfo(free, total)));
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
    RETURN(hoc_from_cu(cuDriverGetVersion(driverVersion)));
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
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    CUdeviceptr p = 0;
    int tr = hoc_trace_begin("malloc", NULL, size, HOC_TRACE_HOST);
    CUresult r = cuMemAlloc(&p, size);
    hoc_trace_end(tr, HOC_TRACE_HOST);
    if (r == CUDA_SUCCESS) *ptr = (void*)(uintptr_t)p;
    RETURN(hoc_from_cu(r));
}

hipError_t hipFree(void* ptr) {
    HOC_TIMED();
    if (ptr == NULL) RETURN(hipSuccess);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    int tr = hoc_trace_begin("free", NULL, 0, HOC_TRACE_HOST);
    CUresult r = cuMemFree((CUdeviceptr)(uintptr_t)ptr);
    hoc_trace_end(tr, HOC_TRACE_HOST);
    RETURN(hoc_from_cu(r));
}

/* Page-locked host memory (rocm-backend's PinnedHostBuffer asks for the default flags only). */
hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags) {
    HOC_TIMED();
    if (ptr == NULL) RETURN(hipErrorInvalidValue);
    *ptr = NULL;
    if (flags != hipHostMallocDefault) RETURN(hipErrorInvalidValue);
    if (size == 0) RETURN(hipSuccess);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(hoc_from_cu(cuMemHostAlloc(ptr, size, 0)));
}

hipError_t hipHostFree(void* ptr) {
    HOC_TIMED();
    if (ptr == NULL) RETURN(hipSuccess);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(hoc_from_cu(cuMemFreeHost(ptr)));
}

hipError_t hipMemcpyAsync(void* dst, const void* src, size_t sizeBytes, hipMemcpyKind kind, hipStream_t stream) {
    HOC_TIMED();
    if (sizeBytes == 0) RETURN(hipSuccess);
    if (dst == NULL || src == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = hoc_enter();
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
    RETURN(hoc_from_cu(r));
}

hipError_t hipMemsetD8Async(hipDeviceptr_t dest, unsigned char value, size_t count, hipStream_t stream) {
    HOC_TIMED();
    if (count == 0) RETURN(hipSuccess);
    if (dest == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    int tr = hoc_trace_begin("memset", NULL, count, stream);
    CUresult r = cuMemsetD8Async((CUdeviceptr)(uintptr_t)dest, value, count, (CUstream)stream);
    hoc_trace_end(tr, stream);
    RETURN(hoc_from_cu(r));
}

/* ---------------------------------------------------------------------------------------
 * Streams. hipStreamNonBlocking and CU_STREAM_NON_BLOCKING mean the same thing: no implicit
 * synchronisation with the null stream.
 */
hipError_t hipStreamCreateWithFlags(hipStream_t* stream, unsigned int flags) {
    if (stream == NULL) RETURN(hipErrorInvalidValue);
    if ((flags & ~(unsigned)hipStreamNonBlocking) != 0) RETURN(hipErrorInvalidValue);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    CUstream s = NULL;
    CUresult r = cuStreamCreate(&s, (flags & hipStreamNonBlocking) ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT);
    if (r == CUDA_SUCCESS) *stream = (hipStream_t)s;
    RETURN(hoc_from_cu(r));
}

hipError_t hipStreamDestroy(hipStream_t stream) {
    /* The null stream cannot be destroyed. */
    if (stream == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(hoc_from_cu(cuStreamDestroy((CUstream)stream)));
}

hipError_t hipStreamSynchronize(hipStream_t stream) {
    HOC_TIMED();
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    int tr = hoc_trace_begin("sync", NULL, 0, HOC_TRACE_HOST);
    CUresult r = cuStreamSynchronize((CUstream)stream);
    hoc_trace_end(tr, HOC_TRACE_HOST);
    RETURN(hoc_from_cu(r));
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
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    unsigned cf = CU_EVENT_DEFAULT;
    if (flags & hipEventBlockingSync) cf |= CU_EVENT_BLOCKING_SYNC;
    if (flags & hipEventDisableTiming) cf |= CU_EVENT_DISABLE_TIMING;
    if (flags & hipEventInterprocess) cf |= CU_EVENT_INTERPROCESS;
    CUevent ev = NULL;
    CUresult r = cuEventCreate(&ev, cf);
    if (r == CUDA_SUCCESS) *event = (hipEvent_t)ev;
    RETURN(hoc_from_cu(r));
}

hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream) {
    HOC_TIMED();
    if (event == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(hoc_from_cu(cuEventRecord((CUevent)event, (CUstream)stream)));
}

/* hipErrorNotReady while work before the event is pending; not recorded as an error. */
hipError_t hipEventQuery(hipEvent_t event) {
    HOC_TIMED();
    if (event == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(hoc_from_cu(cuEventQuery((CUevent)event)));
}

hipError_t hipEventSynchronize(hipEvent_t event) {
    HOC_TIMED();
    if (event == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    int tr = hoc_trace_begin("event_sync", NULL, 0, HOC_TRACE_HOST);
    CUresult r = cuEventSynchronize((CUevent)event);
    hoc_trace_end(tr, HOC_TRACE_HOST);
    RETURN(hoc_from_cu(r));
}

/* hipErrorInvalidHandle for events created with hipEventDisableTiming or never recorded,
 * hipErrorNotReady while either has not completed: the codes both runtimes use. */
hipError_t hipEventElapsedTime(float* ms, hipEvent_t start, hipEvent_t stop) {
    if (ms == NULL) RETURN(hipErrorInvalidValue);
    if (start == NULL || stop == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(hoc_from_cu(cuEventElapsedTime(ms, (CUevent)start, (CUevent)stop)));
}

hipError_t hipEventDestroy(hipEvent_t event) {
    HOC_TIMED();
    if (event == NULL) RETURN(hipErrorInvalidHandle);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(hoc_from_cu(cuEventDestroy((CUevent)event)));
}
