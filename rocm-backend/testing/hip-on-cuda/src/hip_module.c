/*
 * libamdhip64.so of hip-on-cuda, part 3 of 3: modules, function attributes and kernel
 * launches, over the CUDA driver API.
 *
 * TEST INFRASTRUCTURE, NOT A PRODUCT FEATURE (see ../README.md). The library's model and
 * its core (error state, CUresult mapping, contexts, trace) are in hip_runtime.c; devices,
 * memory, streams and events in hip_device.c. Every definition must match ROCm's declaration
 * exactly.
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
 * Modules and launches. The image is what this package's hiprtc returns: a cubin for a
 * real architecture (sm_XX), or PTX text when compiled for a virtual one; the driver
 * accepts both (and fatbins).
 */
hipError_t hipModuleLoadData(hipModule_t* module, const void* image) {
    HOC_TIMED();
    if (module == NULL || image == NULL) RETURN(hipErrorInvalidValue);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    CUmodule m = NULL;
    CUresult r = cuModuleLoadData(&m, image);
    if (r == CUDA_SUCCESS) *module = (hipModule_t)m;
    RETURN(hoc_from_cu(r));
}

hipError_t hipModuleUnload(hipModule_t module) {
    if (module == NULL) RETURN(hipErrorInvalidResourceHandle);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    RETURN(hoc_from_cu(cuModuleUnload((CUmodule)module)));
}

/* A name the module does not define gives hipErrorNotFound, as in HIP. */
hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t module, const char* kname) {
    HOC_TIMED();
    if (function == NULL || kname == NULL) RETURN(hipErrorInvalidValue);
    if (module == NULL) RETURN(hipErrorInvalidResourceHandle);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    CUfunction f = NULL;
    CUresult r = cuModuleGetFunction(&f, (CUmodule)module, kname);
    if (r == CUDA_SUCCESS) *function = (hipFunction_t)f;
    RETURN(hoc_from_cu(r));
}

/* On a module's function (the only kind this library hands out, so `func` is a CUfunction):
 * the dynamic shared-memory limit and the carveout, CUDA's attributes of the same meaning.
 * HIP's enum values are not CUDA's, so each is mapped by name; others are invalid. */
hipError_t hipFuncSetAttribute(const void* func, hipFuncAttribute attr, int value) {
    HOC_TIMED();
    if (func == NULL) RETURN(hipErrorInvalidDeviceFunction);
    hipError_t e = hoc_enter();
    if (e != hipSuccess) RETURN(e);
    CUfunction_attribute cu_attr;
    switch (attr) {
    case hipFuncAttributeMaxDynamicSharedMemorySize: cu_attr = CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES; break;
    case hipFuncAttributePreferredSharedMemoryCarveout: cu_attr = CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT; break;
    default: RETURN(hipErrorInvalidValue);
    }
    RETURN(hoc_from_cu(cuFuncSetAttribute((CUfunction)func, cu_attr, value)));
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

hipError_t hipModuleLaunchKernel(hipFunction_t f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
                                 unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
                                 unsigned int sharedMemBytes, hipStream_t stream, void** kernelParams,
                                 void** extra) {
    HOC_TIMED();
    if (f == NULL) RETURN(hipErrorInvalidResourceHandle);
    hipError_t e = hoc_enter();
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
    int tr = hoc_trace_begin("kernel", hoc_trace_path() ? trace_kernel_name((CUfunction)f) : NULL, 0, stream);
    CUresult r = cuLaunchKernel((CUfunction)f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                                sharedMemBytes, (CUstream)stream, kernelParams, extra_arg);
    hoc_trace_end(tr, stream);
    RETURN(hoc_from_cu(r));
}
