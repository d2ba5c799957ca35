/*
 * hip-on-cuda: declarations shared between the four test libraries (and, in the section
 * marked HOC_LIBAMDHIP64, between the three translation units of libamdhip64.so).
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
 * Call statistics, a measuring aid of the GPU tier (issue 12: where does the host time
 * go). With HOC_STATS set to a non-empty value other than "0", each timed entry point
 * counts its calls and the host time spent inside it, and each translation unit that has
 * timed entry points prints its table to stderr at exit (`[hip-on-cuda stats <file>] name
 * calls total_ms mean_us`; libamdhip64 prints two, hip_device.c's and hip_module.c's). Off,
 * a timed entry point costs one cached branch.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static inline int hoc_stats_enabled(void) {
    static int cached = -1; /* benign race: every thread computes the same value */
    if (cached < 0) {
        const char* v = getenv("HOC_STATS");
        cached = v != NULL && v[0] != '\0' && strcmp(v, "0") != 0;
    }
    return cached;
}

#define HOC_MAX_STATS 64
struct hoc_stat {
    const char* name;
    _Atomic unsigned long long calls, ns;
};
static struct hoc_stat hoc_stats[HOC_MAX_STATS];
static _Atomic int hoc_stat_count;
static pthread_mutex_t hoc_stats_lock = PTHREAD_MUTEX_INITIALIZER;

static void hoc_stats_print(void) {
    int n = atomic_load(&hoc_stat_count);
    int order[HOC_MAX_STATS];
    for (int i = 0; i < n; ++i) order[i] = i;
    for (int i = 1; i < n; ++i) /* insertion sort by total time, largest first */
        for (int j = i; j > 0 && hoc_stats[order[j]].ns > hoc_stats[order[j - 1]].ns; --j) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int i = 0; i < n; ++i) {
        const struct hoc_stat* s = &hoc_stats[order[i]];
        unsigned long long calls = s->calls, ns = s->ns;
        fprintf(stderr, "[hip-on-cuda stats %s] %-40s %10llu calls %12.3f ms %10.2f us/call\n", __BASE_FILE__,
                s->name, calls, ns / 1e6, calls ? ns / 1e3 / calls : 0.0);
    }
}

static inline struct hoc_stat* hoc_stat_slot(const char* name) {
    int n = atomic_load(&hoc_stat_count);
    for (int i = 0; i < n; ++i)
        if (hoc_stats[i].name == name) return &hoc_stats[i];
    pthread_mutex_lock(&hoc_stats_lock);
    struct hoc_stat* slot = NULL;
    n = atomic_load(&hoc_stat_count);
    for (int i = 0; i < n && slot == NULL; ++i)
        if (hoc_stats[i].name == name) slot = &hoc_stats[i];
    if (slot == NULL && n < HOC_MAX_STATS) {
        if (n == 0) atexit(hoc_stats_print);
        slot = &hoc_stats[n];
        slot->name = name;
        atomic_store(&hoc_stat_count, n + 1);
    }
    pthread_mutex_unlock(&hoc_stats_lock);
    return slot;
}

struct hoc_timer {
    const char* name;
    struct timespec t0;
};

static inline struct hoc_timer hoc_timer_begin(const char* name) {
    struct hoc_timer t = {NULL, {0, 0}};
    if (hoc_stats_enabled()) {
        t.name = name;
        timespec_get(&t.t0, TIME_UTC); /* C11; clock_gettime needs POSIX feature macros */
    }
    return t;
}

static inline void hoc_timer_end(struct hoc_timer* t) {
    if (t->name == NULL) return;
    struct timespec t1;
    timespec_get(&t1, TIME_UTC);
    struct hoc_stat* s = hoc_stat_slot(t->name);
    if (s == NULL) return;
    atomic_fetch_add(&s->calls, 1);
    atomic_fetch_add(&s->ns, (unsigned long long)((t1.tv_sec - t->t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t->t0.tv_nsec)));
}

/* First statement of a timed entry point: the time until it returns is counted. */
#define HOC_TIMED() struct hoc_timer hoc_timer_ __attribute__((cleanup(hoc_timer_end))) = hoc_timer_begin(__func__)

/* ---------------------------------------------------------------------------------------
 * Timeline trace, the GPU tier's stand-in for a profiler timeline (the H200 machine has no
 * nsys; issue 12.5: where is the GPU idle?). With HOC_TRACE=FILE, every operation put on a
 * stream (kernel launch, copy, memset, rocBLAS GEMM, MIOpen convolution) gets a CUDA event
 * before and after it, and every blocking call (stream synchronisation, allocation, free)
 * its host time; at exit libamdhip64 writes one CSV line per record to FILE:
 *   seq,kind,name,bytes,host_begin_us,host_end_us,gpu_begin_us,gpu_end_us
 * (host times from the first record; GPU times from the first event, -1 for host-only
 * records). scripts/hoc-trace-report.py turns it into GPU-idle gaps and what the host did
 * in them. Off, a traced entry point costs one cached branch. The events change timing by
 * a few microseconds per operation.
 * hoc_trace_begin returns a record number (negative: not traced) for hoc_trace_end;
 * HOC_TRACE_HOST as the stream marks a host-only record. Exported by libamdhip64.
 */
#define HOC_TRACE_HOST ((void*)-1)
int hoc_trace_begin(const char* kind, const char* name, unsigned long long bytes, void* stream);
void hoc_trace_end(int record, void* stream);

/* ---------------------------------------------------------------------------------------
 * libamdhip64.so: what its three translation units share (hip_runtime.c: error state,
 * CUresult mapping, driver initialisation, contexts, trace, error names; hip_device.c:
 * devices, memory, streams, events; hip_module.c: modules, function attributes, launches).
 * Only where HOC_LIBAMDHIP64 is defined, after <hip/hip_runtime_api.h> and <cuda.h>: unlike
 * the rest of this header, these use HIP and CUDA driver types. Hidden, and outside the
 * library's version script in any case.
 */
#ifdef HOC_LIBAMDHIP64
/* Records e as the calling thread's last error (what hipGetLastError returns) unless it is
 * hipSuccess or hipErrorNotReady, logging it under HOC_LOG with fn; returns e. */
HOC_HIDDEN hipError_t hoc_record(const char* fn, hipError_t e);
/* How every HIP entry point returns. */
#define RETURN(e) return hoc_record(__func__, (e))
/* CUresult -> hipError_t. */
HOC_HIDDEN hipError_t hoc_from_cu(CUresult r);
/* Initialises the driver once per process; every entry point starts here. */
HOC_HIDDEN hipError_t hoc_ensure_init(void);
/* hoc_ensure_init, then hipErrorInvalidDevice unless 0 <= id < hoc_device_count. */
HOC_HIDDEN hipError_t hoc_check_device(int id);
/* Makes the primary context of the thread's current device current on this thread. */
HOC_HIDDEN hipError_t hoc_enter(void);
/* The HOC_TRACE file, or NULL when tracing is off. */
HOC_HIDDEN const char* hoc_trace_path(void);
/* HIP ordinal -> CUdevice, and the device count (set once by hoc_ensure_init). */
HOC_HIDDEN extern CUdevice* hoc_devices;
HOC_HIDDEN extern int hoc_device_count;
/* HIP's current device: per host thread, starts at 0. */
HOC_HIDDEN extern _Thread_local int hoc_current_device;
#endif

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
