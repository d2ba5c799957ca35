/*
 * test_hip_on_cuda: checks the hip-on-cuda test libraries on an NVIDIA GPU.
 *
 * Written only against the HIP, hiprtc, rocBLAS and MIOpen headers, calling only the entry
 * points rocm-backend calls (rocm-backend/FFI.md), the way the backend uses them. Every
 * result is compared with a CPU reference computed in double precision on fresh random
 * inputs (the seed is printed; pass --seed N to repeat a run); outputs are poisoned with
 * NaN before each GPU run, so an unwritten element fails.
 *
 *   test_hip_on_cuda KERNEL_SRC_DIR [--all-kernels] [--seed N]
 *
 * KERNEL_SRC_DIR is the repository's kernels/src (elementwise.hip and the headers prelude.h
 * and mma.h are read from it). --all-kernels also compiles every *.hip there through hiprtc for the device's
 * architecture and resolves every RV_EXPORT_* entry point in the loaded module.
 *
 * Prints PASS/FAIL per check and a summary; exits 1 if any check failed.
 */
/* POSIX: clock_gettime, strdup, opendir. */
#define _POSIX_C_SOURCE 200809L
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <hip/hiprtc.h>
#include <rocblas/rocblas.h>
/* miopen.h names this struct without `struct` (valid C++ only); see miopen_api.c. */
typedef struct miopenTensorArgument_t miopenTensorArgument_t;
#include <miopen/miopen.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---------------------------------------------------------------------------------------
 * Reporting.
 */
static int g_pass = 0, g_fail = 0;

static void check(int ok, const char* name, const char* fmt, ...) {
    char detail[512] = "";
    if (fmt != NULL) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    printf("%s %s%s%s\n", ok ? "PASS" : "FAIL", name, detail[0] ? ": " : "", detail);
    fflush(stdout);
    if (ok) ++g_pass;
    else ++g_fail;
}

/* A HIP call that must succeed for the test to go on; a failure is reported and the
 * enclosing test function returns. */
#define HIP_OK(call)                                                                                       \
    do {                                                                                                   \
        hipError_t e_ = (call);                                                                            \
        if (e_ != hipSuccess) {                                                                            \
            check(0, #call, "%s (%d): %s", hipGetErrorName(e_), (int)e_, hipGetErrorString(e_));           \
            return;                                                                                        \
        }                                                                                                  \
    } while (0)

/* ---------------------------------------------------------------------------------------
 * Host helpers: random numbers, 16-bit float conversions, error norms.
 */
static uint64_t g_rng;
static double urand(void) { /* xorshift64*, uniform in [-1, 1) */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (double)((g_rng * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* f32 -> IEEE half, round to nearest even (finite, normal-range inputs only: the test data
 * are in [-4, 4]; subnormal results flush towards the nearest representable). */
static uint16_t f32_to_f16(float f) {
    const uint32_t u = f32_bits(f);
    const uint32_t sign = (u >> 16) & 0x8000u;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t mant = u & 0x7fffffu;
    if (exp <= 0) { /* subnormal half */
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        const int shift = 14 - exp;
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1))) ++h;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)exp << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1))) ++h;
    return (uint16_t)(sign | h);
}
static float f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
    if (exp == 0) return (sign ? -1.0f : 1.0f) * ldexpf((float)mant, -24);
    if (exp == 31) return bits_f32(sign | 0x7f800000u | (mant << 13));
    return bits_f32(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}
static uint16_t f32_to_bf16(float f) {
    const uint32_t u = f32_bits(f);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static float bf16_to_f32(uint16_t b) { return bits_f32((uint32_t)b << 16); }

enum dt { DT_F32, DT_F16, DT_BF16 };
static const char* dt_name(enum dt t) { return t == DT_F32 ? "f32" : t == DT_F16 ? "f16" : "bf16"; }
static size_t dt_size(enum dt t) { return t == DT_F32 ? 4 : 2; }

/* Random values in [-1, 1), rounded to the storage type; `vals` gets the rounded values
 * (what the GPU sees), `raw` the bytes to upload. */
static void fill_random(enum dt t, size_t n, double* vals, void* raw) {
    for (size_t i = 0; i < n; ++i) {
        const float f = (float)urand();
        if (t == DT_F32) {
            ((float*)raw)[i] = f;
            vals[i] = f;
        } else if (t == DT_F16) {
            const uint16_t h = f32_to_f16(f);
            ((uint16_t*)raw)[i] = h;
            vals[i] = f16_to_f32(h);
        } else {
            const uint16_t b = f32_to_bf16(f);
            ((uint16_t*)raw)[i] = b;
            vals[i] = bf16_to_f32(b);
        }
    }
}

static double load(enum dt t, const void* raw, size_t i) {
    if (t == DT_F32) return ((const float*)raw)[i];
    if (t == DT_F16) return f16_to_f32(((const uint16_t*)raw)[i]);
    return bf16_to_f32(((const uint16_t*)raw)[i]);
}

/* ||got - ref|| / ||ref|| over n values; NaN anywhere gives +inf. */
static double rel_error(enum dt t, const void* got, const double* ref, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; ++i) {
        const double g = load(t, got, i);
        if (g != g) return INFINITY;
        num += (g - ref[i]) * (g - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0.0 ? sqrt(num / den) : sqrt(num);
}

/* Relative error bound for results stored in type t from f32 accumulation. */
static double tolerance(enum dt t) { return t == DT_F32 ? 1e-5 : t == DT_F16 ? 2e-3 : 1.6e-2; }

static char* read_file(const char* path, size_t* size) {
    FILE* f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char* s = malloc((size_t)n + 1);
    if (s != NULL && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s != NULL) s[n] = '\0';
    fclose(f);
    if (size != NULL) *size = (size_t)n;
    return s;
}

/* ---------------------------------------------------------------------------------------
 * State shared between the tests.
 */
static hipDeviceProp_t g_prop;
static hipStream_t g_stream;
static char g_arch[64]; /* gcnArchName without ":features" */
static const char* g_kernel_dir;
/* The headers of kernels/src, given to every hiprtc compilation as in-memory files (the
 * backend gives each module those it includes; one it does not include is ignored). */
#define N_HEADERS 2
static const char* g_header_names[N_HEADERS] = {"prelude.h", "mma.h"};
static const char* g_headers[N_HEADERS];

/* ---------------------------------------------------------------------------------------
 * 1. Device discovery and properties.
 */
static void test_device(void) {
    HIP_OK(hipInit(0));
    int count = 0;
    HIP_OK(hipGetDeviceCount(&count));
    check(count >= 1, "hipGetDeviceCount", "%d device(s)", count);
    HIP_OK(hipSetDevice(0));
    int dev = -1;
    HIP_OK(hipGetDevice(&dev));
    check(dev == 0, "hipGetDevice after hipSetDevice(0)", "got %d", dev);

    HIP_OK(hipGetDeviceProperties(&g_prop, 0));
    snprintf(g_arch, sizeof g_arch, "%.*s", (int)strcspn(g_prop.gcnArchName, ":"), g_prop.gcnArchName);
    printf("  device 0: %s, gcnArchName %s, %d.%d, %zu MiB, %d SMs, warp %d, %zu B shared/block\n", g_prop.name,
           g_prop.gcnArchName, g_prop.major, g_prop.minor, g_prop.totalGlobalMem >> 20, g_prop.multiProcessorCount,
           g_prop.warpSize, g_prop.sharedMemPerBlock);
    char expect_arch[32];
    snprintf(expect_arch, sizeof expect_arch, "sm_%d%d", g_prop.major, g_prop.minor);
    check(strcmp(g_prop.gcnArchName, expect_arch) == 0, "props.gcnArchName is the NVIDIA arch", "'%s'",
          g_prop.gcnArchName);
    check(g_prop.name[0] != '\0' && g_prop.totalGlobalMem > ((size_t)1 << 30) && g_prop.warpSize == 32 &&
              g_prop.multiProcessorCount > 0 && g_prop.sharedMemPerBlock >= 16384 && g_prop.major >= 5,
          "props name/totalGlobalMem/warpSize/multiProcessorCount/sharedMemPerBlock/major", NULL);

    int smem = 0, warp = 0, sms = 0;
    HIP_OK(hipDeviceGetAttribute(&smem, hipDeviceAttributeMaxSharedMemoryPerBlock, 0));
    HIP_OK(hipDeviceGetAttribute(&warp, hipDeviceAttributeWarpSize, 0));
    HIP_OK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, 0));
    check((size_t)smem == g_prop.sharedMemPerBlock && warp == g_prop.warpSize && sms == g_prop.multiProcessorCount,
          "hipDeviceGetAttribute agrees with the properties", "smem %d warp %d SMs %d", smem, warp, sms);

    size_t free_b = 0, total_b = 0;
    HIP_OK(hipMemGetInfo(&free_b, &total_b));
    check(total_b > 0 && free_b <= total_b, "hipMemGetInfo", "%zu MiB free of %zu MiB", free_b >> 20, total_b >> 20);

    int rv = 0, dv = 0;
    HIP_OK(hipRuntimeGetVersion(&rv));
    HIP_OK(hipDriverGetVersion(&dv));
    check(rv == HIP_VERSION && dv > 0, "hipRuntimeGetVersion / hipDriverGetVersion", "runtime %d, driver %d", rv, dv);

    /* Errors: the code, then hipGetLastError returns it once and resets. */
    hipError_t e = hipSetDevice(count);
    hipError_t l1 = hipGetLastError(), l2 = hipGetLastError();
    check(e == hipErrorInvalidDevice && l1 == hipErrorInvalidDevice && l2 == hipSuccess,
          "hipSetDevice(count) -> hipErrorInvalidDevice; hipGetLastError returns it once", "%d, last %d then %d",
          (int)e, (int)l1, (int)l2);
    e = hipDeviceGetAttribute(NULL, hipDeviceAttributeWarpSize, 0);
    /* A later success does not clear the recorded error (HIP 6 / CUDA semantics). */
    HIP_OK(hipGetDevice(&dev));
    l1 = hipGetLastError();
    check(e == hipErrorInvalidValue && l1 == hipErrorInvalidValue,
          "hipDeviceGetAttribute(NULL) -> hipErrorInvalidValue, sticky past a success", "%d, last %d", (int)e,
          (int)l1);
    check(strcmp(hipGetErrorName(hipErrorOutOfMemory), "hipErrorOutOfMemory") == 0 &&
              strcmp(hipGetErrorName(hipErrorNoDevice), "hipErrorNoDevice") == 0 &&
              hipGetErrorString(hipErrorNotFound)[0] != '\0',
          "hipGetErrorName / hipGetErrorString", NULL);
}

/* ---------------------------------------------------------------------------------------
 * 2. Memory, copies of every kind, memset; stream and events.
 */
static void test_memory_stream_events(void) {
    HIP_OK(hipStreamCreateWithFlags(&g_stream, hipStreamNonBlocking));
    const size_t n = ((size_t)1 << 20) + 3; /* odd size */
    const size_t bytes = n * sizeof(float);
    float* host = malloc(bytes);
    float* back = malloc(bytes);
    void *a = NULL, *b = NULL;
    HIP_OK(hipMalloc(&a, bytes));
    HIP_OK(hipMalloc(&b, bytes));
    for (size_t i = 0; i < n; ++i) host[i] = (float)urand();
    HIP_OK(hipMemcpyAsync(a, host, bytes, hipMemcpyHostToDevice, g_stream));
    HIP_OK(hipMemsetD8Async(b, 0xff, bytes, g_stream)); /* poison */
    HIP_OK(hipMemcpyAsync(b, a, bytes, hipMemcpyDeviceToDevice, g_stream));
    /* Zero a misaligned middle range of b, byte-wise. */
    const size_t z0 = 4 * 1000 + 1, zn = 4 * 5000 + 2;
    HIP_OK(hipMemsetD8Async((char*)b + z0, 0, zn, g_stream));
    memset(back, 0xab, bytes);
    HIP_OK(hipMemcpyAsync(back, b, bytes, hipMemcpyDeviceToHost, g_stream));
    HIP_OK(hipStreamSynchronize(g_stream));
    unsigned char* expect = malloc(bytes);
    memcpy(expect, host, bytes);
    memset(expect + z0, 0, zn);
    check(memcmp(back, expect, bytes) == 0, "hipMalloc + hipMemcpyAsync H2D/D2D/D2H + hipMemsetD8Async",
          "%zu bytes", bytes);
    free(expect);

    void* z = (void*)1;
    hipError_t e = hipMalloc(&z, 0);
    check(e == hipSuccess && z == NULL, "hipMalloc(0) -> hipSuccess, NULL", "%d", (int)e);
    e = hipMemcpyAsync(back, b, 16, (hipMemcpyKind)77, g_stream);
    check(e == hipErrorInvalidMemcpyDirection, "hipMemcpyAsync(bad kind) -> hipErrorInvalidMemcpyDirection", "%d",
          (int)e);
    (void)hipGetLastError();

    /* Events: timing around enough copies to take measurable time, on the stream. */
    hipEvent_t start, stop, untimed;
    HIP_OK(hipEventCreateWithFlags(&start, 0));
    HIP_OK(hipEventCreateWithFlags(&stop, 0));
    HIP_OK(hipEventCreateWithFlags(&untimed, hipEventDisableTiming));
    HIP_OK(hipEventRecord(start, g_stream));
    for (int i = 0; i < 50; ++i) HIP_OK(hipMemcpyAsync(b, a, bytes, hipMemcpyDeviceToDevice, g_stream));
    HIP_OK(hipEventRecord(stop, g_stream));
    HIP_OK(hipEventRecord(untimed, g_stream));
    e = hipEventQuery(stop); /* likely still running: NotReady, which is not a recorded error */
    hipError_t last = hipGetLastError();
    check((e == hipErrorNotReady || e == hipSuccess) && last == hipSuccess,
          "hipEventQuery while pending -> hipErrorNotReady, not recorded as last error", "%s, last %d",
          hipGetErrorName(e), (int)last);
    HIP_OK(hipEventSynchronize(stop));
    check(hipEventQuery(stop) == hipSuccess && hipEventQuery(untimed) == hipSuccess,
          "hipEventQuery after hipEventSynchronize -> hipSuccess", NULL);
    float ms = 0.0f;
    HIP_OK(hipEventElapsedTime(&ms, start, stop));
    check(ms > 0.0f, "hipEventElapsedTime > 0", "%.3f ms for 50 x %zu-byte device copies (%.0f GB/s)", ms, bytes,
          100.0 * (double)bytes / (ms * 1e6));
    e = hipEventElapsedTime(&ms, start, untimed);
    (void)hipGetLastError();
    check(e == hipErrorInvalidHandle, "hipEventElapsedTime with a hipEventDisableTiming event -> hipErrorInvalidHandle",
          "%s", hipGetErrorName(e));
    HIP_OK(hipEventDestroy(start));
    HIP_OK(hipEventDestroy(stop));
    HIP_OK(hipEventDestroy(untimed));

    void* huge = (void*)1;
    e = hipMalloc(&huge, (size_t)1 << 50); /* 1 PiB */
    last = hipGetLastError();
    check(e == hipErrorOutOfMemory && huge == NULL && last == hipErrorOutOfMemory,
          "hipMalloc(1 PiB) -> hipErrorOutOfMemory (2)", "%s (%d), last %d", hipGetErrorName(e), (int)e, (int)last);

    /* Page-locked host memory: device -> pinned -> device -> pageable round trip. */
    unsigned char* pinned = NULL;
    HIP_OK(hipHostMalloc((void**)&pinned, bytes, hipHostMallocDefault));
    check(pinned != NULL, "hipHostMalloc gives memory", "%p", (void*)pinned);
    if (pinned != NULL) {
        memset(pinned, 0xcd, bytes);
        HIP_OK(hipMemcpyAsync(pinned, a, bytes, hipMemcpyDeviceToHost, g_stream));
        HIP_OK(hipMemsetD8Async(b, 0xff, bytes, g_stream));
        HIP_OK(hipMemcpyAsync(b, pinned, bytes, hipMemcpyHostToDevice, g_stream));
        memset(back, 0xab, bytes);
        HIP_OK(hipMemcpyAsync(back, b, bytes, hipMemcpyDeviceToHost, g_stream));
        HIP_OK(hipStreamSynchronize(g_stream));
        check(memcmp(back, host, bytes) == 0 && memcmp(pinned, host, bytes) == 0,
              "hipHostMalloc + hipMemcpyAsync D2H/H2D through page-locked memory", "%zu bytes", bytes);
        HIP_OK(hipHostFree(pinned));
    }
    HIP_OK(hipHostFree(NULL));
    HIP_OK(hipFree(a));
    HIP_OK(hipFree(b));
    HIP_OK(hipFree(NULL));
    free(host);
    free(back);
}

/* ---------------------------------------------------------------------------------------
 * 3. hiprtc + modules + launches: elementwise.hip's unary_silu_f32, as the backend runs it.
 */

/* Mirrors rv_strided of kernels/src/prelude.h (112 bytes). */
struct rv_strided {
    int64_t rank, contiguous, dims[6], strides[6];
};

/* One hiprtc compilation of a kernel source file, as the backend does it: the headers as
 * in-memory files; options --offload-arch=<gcnArchName without features>, -O3, -DRV_...
 * Touches no shared state, so several can run on parallel threads. */
struct compiled {
    const char* file;
    hiprtcResult result; /* of the first failing hiprtc call, or HIPRTC_SUCCESS */
    const char* stage;   /* which call that was */
    char* code;          /* the code object (malloc'd) on success */
    size_t size;
    char* log;           /* the program log on a failed compile */
    double seconds;
};

static void* compile_source(void* arg) {
    struct compiled* c = arg;
    c->result = HIPRTC_SUCCESS;
    c->stage = "";
    c->code = c->log = NULL;
    c->size = 0;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", g_kernel_dir, c->file);
    char* src = read_file(path, NULL);
    if (src == NULL) {
        c->result = HIPRTC_ERROR_INVALID_INPUT;
        c->stage = "read source";
        return NULL;
    }
    hiprtcProgram prog;
    hiprtcResult r = hiprtcCreateProgram(&prog, src, c->file, N_HEADERS, g_headers, g_header_names);
    free(src);
    if (r != HIPRTC_SUCCESS) {
        c->result = r;
        c->stage = "hiprtcCreateProgram";
        return NULL;
    }
    char arch_opt[96];
    snprintf(arch_opt, sizeof arch_opt, "--offload-arch=%s", g_arch);
    const char* opts[] = {arch_opt, "-O3", "-DRV_HIP_ON_CUDA_TEST=1"};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = hiprtcCompileProgram(prog, 3, opts);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    c->seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (r != HIPRTC_SUCCESS) {
        c->result = r;
        c->stage = "hiprtcCompileProgram";
        size_t log_size = 0;
        hiprtcGetProgramLogSize(prog, &log_size);
        c->log = calloc(log_size + 1, 1);
        if (c->log != NULL) hiprtcGetProgramLog(prog, c->log);
    } else {
        r = hiprtcGetCodeSize(prog, &c->size);
        c->code = r == HIPRTC_SUCCESS ? malloc(c->size) : NULL;
        if (c->code != NULL) r = hiprtcGetCode(prog, c->code);
        if (r != HIPRTC_SUCCESS || c->code == NULL) {
            c->result = r != HIPRTC_SUCCESS ? r : HIPRTC_ERROR_OUT_OF_MEMORY;
            c->stage = "hiprtcGetCode";
            free(c->code);
            c->code = NULL;
        }
    }
    hiprtcDestroyProgram(&prog);
    return NULL;
}

/* Reports a failed compilation; returns whether it succeeded. */
static int compiled_ok(const struct compiled* c) {
    if (c->result == HIPRTC_SUCCESS) return 1;
    check(0, c->stage, "%s: %s%s%s", c->file, hiprtcGetErrorString(c->result), c->log ? "\n" : "",
          c->log ? c->log : "");
    return 0;
}

static void test_hiprtc_and_launch(void) {
    int major = 0, minor = 0;
    hiprtcResult rr = hiprtcVersion(&major, &minor);
    check(rr == HIPRTC_SUCCESS && major > 0, "hiprtcVersion", "%d.%d", major, minor);

    struct compiled ew = {.file = "elementwise.hip"};
    compile_source(&ew);
    if (!compiled_ok(&ew)) return;
    const int elf = ew.size > 4 && memcmp(ew.code, "\177ELF", 4) == 0;
    check(elf, "hiprtcCompileProgram -> code object", "elementwise.hip for %s: %zu-byte %s in %.2f s", g_arch, ew.size,
          elf ? "ELF cubin" : "non-ELF image", ew.seconds);
    hipModule_t mod;
    HIP_OK(hipModuleLoadData(&mod, ew.code));
    free(ew.code);
    hipFunction_t silu;
    HIP_OK(hipModuleGetFunction(&silu, mod, "unary_silu_f32"));

    /* A rows x cols matrix read (a) contiguously and (b) through a transposed view. */
    const int64_t rows = 517, cols = 1031, n = rows * cols;
    float* x = malloc((size_t)n * sizeof *x);
    float* y = malloc((size_t)n * sizeof *y);
    for (int64_t i = 0; i < n; ++i) x[i] = (float)(urand() * 8.0);
    void *dx = NULL, *dy = NULL;
    HIP_OK(hipMalloc(&dx, (size_t)n * sizeof(float)));
    HIP_OK(hipMalloc(&dy, (size_t)n * sizeof(float)));
    HIP_OK(hipMemcpyAsync(dx, x, (size_t)n * sizeof(float), hipMemcpyHostToDevice, g_stream));
    for (int transposed = 0; transposed <= 1; ++transposed) {
        struct rv_strided v;
        memset(&v, 0, sizeof v);
        v.rank = 2;
        if (!transposed) {
            v.contiguous = 1;
            v.dims[0] = rows, v.dims[1] = cols;
            v.strides[0] = cols, v.strides[1] = 1;
        } else { /* out[j][i] = in[i][j]: dims [cols, rows], strides [1, cols] */
            v.dims[0] = cols, v.dims[1] = rows;
            v.strides[0] = 1, v.strides[1] = cols;
        }
        int64_t numel = n;
        double param = 0.0;
        void* args[] = {&numel, &v, &dx, &dy, &param};
        HIP_OK(hipMemsetD8Async(dy, 0xff, (size_t)n * sizeof(float), g_stream));
        const unsigned grid = (unsigned)((n + 255) / 256 < 65535 ? (n + 255) / 256 : 65535);
        HIP_OK(hipModuleLaunchKernel(silu, grid, 1, 1, 256, 1, 1, 0, g_stream, args, NULL));
        HIP_OK(hipMemcpyAsync(y, dy, (size_t)n * sizeof(float), hipMemcpyDeviceToHost, g_stream));
        HIP_OK(hipStreamSynchronize(g_stream));
        double worst = 0.0;
        for (int64_t o = 0; o < n; ++o) {
            const int64_t src = transposed ? (o % rows) * cols + o / rows : o;
            const double xv = x[src], ref = xv / (1.0 + exp(-xv));
            const double err = fabs((double)y[o] - ref) / fmax(1.0, fabs(ref));
            if (!(err <= worst)) worst = err; /* NaN-propagating max */
        }
        check(worst <= 2e-6, transposed ? "launch unary_silu_f32 (transposed view) vs CPU" : "launch unary_silu_f32 vs CPU",
              "%lld elements, max rel error %.2e", (long long)n, worst);
    }

    /* Error paths. */
    hipFunction_t missing = NULL;
    hipError_t e = hipModuleGetFunction(&missing, mod, "no_such_kernel_f32");
    hipError_t last = hipGetLastError();
    check(e == hipErrorNotFound && last == hipErrorNotFound,
          "hipModuleGetFunction(missing name) -> hipErrorNotFound (500)", "%s (%d)", hipGetErrorName(e), (int)e);
    e = hipModuleLaunchKernel(missing, 1, 1, 1, 1, 1, 1, 0, g_stream, NULL, NULL);
    (void)hipGetLastError();
    check(e == hipErrorInvalidResourceHandle, "hipModuleLaunchKernel(NULL function) -> hipErrorInvalidResourceHandle",
          "%s (%d)", hipGetErrorName(e), (int)e);
    {
        struct rv_strided v;
        memset(&v, 0, sizeof v);
        int64_t numel = 1;
        double param = 0.0;
        void* args[] = {&numel, &v, &dx, &dy, &param};
        e = hipModuleLaunchKernel(silu, 1, 1, 1, 4096, 1, 1, 0, g_stream, args, NULL);
        (void)hipGetLastError();
        check(e == hipErrorInvalidValue, "hipModuleLaunchKernel(4096 threads/block) -> hipErrorInvalidValue", "%s (%d)",
              hipGetErrorName(e), (int)e);
    }
    /* The dynamic shared-memory limit of a module function: raised to 96 KiB, refused past
     * the device's maximum, and an attribute HIP has no CUDA counterpart for is invalid. */
    e = hipFuncSetAttribute((const void*)silu, hipFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024);
    check(e == hipSuccess, "hipFuncSetAttribute(MaxDynamicSharedMemorySize, 96 KiB)", "%s (%d)", hipGetErrorName(e), (int)e);
    e = hipFuncSetAttribute((const void*)silu, hipFuncAttributeMaxDynamicSharedMemorySize, 1 << 30);
    (void)hipGetLastError();
    check(e != hipSuccess, "hipFuncSetAttribute(MaxDynamicSharedMemorySize, 1 GiB) fails", "%s (%d)", hipGetErrorName(e), (int)e);
    e = hipFuncSetAttribute((const void*)silu, hipFuncAttributeMax, 0);
    (void)hipGetLastError();
    check(e == hipErrorInvalidValue, "hipFuncSetAttribute(hipFuncAttributeMax) -> hipErrorInvalidValue", "%s (%d)",
          hipGetErrorName(e), (int)e);
    HIP_OK(hipStreamSynchronize(g_stream)); /* the failed launches left the stream usable */
    HIP_OK(hipModuleUnload(mod));

    hiprtcProgram prog;
    rr = hiprtcCreateProgram(&prog, "extern \"C\" __global__ void k(float* p) { p[0] = undeclared; }", "bad.hip", 0,
                             NULL, NULL);
    if (rr == HIPRTC_SUCCESS) {
        const char* opts[] = {"-O3"};
        char arch_opt[96];
        snprintf(arch_opt, sizeof arch_opt, "--offload-arch=%s", g_arch);
        opts[0] = arch_opt;
        rr = hiprtcCompileProgram(prog, 1, opts);
        size_t log_size = 0;
        hiprtcGetProgramLogSize(prog, &log_size);
        char* log = calloc(log_size + 1, 1);
        hiprtcGetProgramLog(prog, log);
        size_t code_size = 0;
        hiprtcResult rc = hiprtcGetCodeSize(prog, &code_size);
        check(rr == HIPRTC_ERROR_COMPILATION && strstr(log, "undeclared") != NULL && rc != HIPRTC_SUCCESS,
              "hiprtc compile error -> HIPRTC_ERROR_COMPILATION with the log", "%s", hiprtcGetErrorString(rr));
        free(log);
        const char* amd[] = {"--offload-arch=gfx1100"};
        rr = hiprtcCompileProgram(prog, 1, amd);
        check(rr == HIPRTC_ERROR_INVALID_OPTION, "hiprtc --offload-arch=gfx1100 -> HIPRTC_ERROR_INVALID_OPTION", "%s",
              hiprtcGetErrorString(rr));
        hiprtcDestroyProgram(&prog);
    }
    HIP_OK(hipFree(dx));
    HIP_OK(hipFree(dy));
    free(x);
    free(y);
}

/* --all-kernels: every source through hiprtc, every entry point resolved. */
static void test_all_kernels(void) {
    DIR* dir = opendir(g_kernel_dir);
    if (dir == NULL) {
        check(0, "open kernel directory", "%s", g_kernel_dir);
        return;
    }
    char* names[64];
    int nfiles = 0;
    struct dirent* ent;
    while ((ent = readdir(dir)) != NULL && nfiles < 64) {
        const size_t len = strlen(ent->d_name);
        if (len > 4 && strcmp(ent->d_name + len - 4, ".hip") == 0) names[nfiles++] = strdup(ent->d_name);
    }
    closedir(dir);
    /* Compile on one thread per source (hiprtc programs are independent), then check. */
    struct compiled jobs[64];
    pthread_t threads[64];
    int started[64];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < nfiles; ++i) {
        jobs[i].file = names[i];
        started[i] = pthread_create(&threads[i], NULL, compile_source, &jobs[i]) == 0;
        if (!started[i]) compile_source(&jobs[i]);
    }
    for (int i = 0; i < nfiles; ++i)
        if (started[i]) pthread_join(threads[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("  compiled %d sources on parallel threads in %.1f s\n", nfiles,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    int total_entries = 0, total_found = 0;
    for (int i = 0; i < nfiles; ++i) {
        if (!compiled_ok(&jobs[i])) continue;
        char* code = jobs[i].code;
        const size_t size = jobs[i].size;
        const double secs = jobs[i].seconds;
        hipModule_t mod;
        hipError_t e = hipModuleLoadData(&mod, code);
        free(code);
        if (e != hipSuccess) {
            check(0, "hipModuleLoadData", "%s: %s", names[i], hipGetErrorName(e));
            continue;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", g_kernel_dir, names[i]);
        char* src = read_file(path, NULL);
        int entries = 0, found = 0;
        char first_missing[128] = "";
        /* Entry points: lines `RV_EXPORT_<KIND>(symbol, ...)` at the start of a line. */
        for (char* line = src; line != NULL && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
            if (strncmp(line, "RV_EXPORT_", 10) != 0) continue;
            char* open = strchr(line, '(');
            char* nl = strchr(line, '\n');
            if (open == NULL || (nl != NULL && open > nl)) continue;
            char sym[128];
            size_t k = 0;
            for (char* p = open + 1; *p == ' '; ++p) open = p;
            for (char* p = open + 1; *p && *p != ',' && *p != ')' && *p != ' ' && k + 1 < sizeof sym; ++p) sym[k++] = *p;
            sym[k] = '\0';
            if (k == 0) continue;
            ++entries;
            hipFunction_t f;
            if (hipModuleGetFunction(&f, mod, sym) == hipSuccess) ++found;
            else if (!first_missing[0]) snprintf(first_missing, sizeof first_missing, "%s", sym);
        }
        (void)hipGetLastError();
        free(src);
        check(entries > 0 && found == entries, "all kernels: compile + load + resolve", "%-16s %3d/%3d entry points, %7zu-byte cubin, %.1f s%s%s",
              names[i], found, entries, size, secs, first_missing[0] ? ", missing " : "", first_missing);
        total_entries += entries;
        total_found += found;
        hipModuleUnload(mod);
    }
    printf("  all kernels: %d/%d entry points in %d sources\n", total_found, total_entries, nfiles);
    for (int i = 0; i < nfiles; ++i) free(names[i]);
}

/* ---------------------------------------------------------------------------------------
 * 4. rocBLAS strided-batched GEMM.
 */
static rocblas_datatype rb_type(enum dt t) {
    return t == DT_F32 ? rocblas_datatype_f32_r : t == DT_F16 ? rocblas_datatype_f16_r : rocblas_datatype_bf16_r;
}

/* D = alpha op(A) op(B) + beta C, column-major, strided batched; C and D separate unless
 * in_place. Checked against a double-precision CPU GEMM. */
static void gemm_case(rocblas_handle h, enum dt t, rocblas_operation ta, rocblas_operation tb, int m, int n, int k,
                      int batch, float alpha, float beta, int in_place) {
    const int rows_a = ta == rocblas_operation_none ? m : k, cols_a = ta == rocblas_operation_none ? k : m;
    const int rows_b = tb == rocblas_operation_none ? k : n, cols_b = tb == rocblas_operation_none ? n : k;
    const int lda = rows_a + 3, ldb = rows_b + 1, ldc = m + 2, ldd = in_place ? ldc : m + 5;
    const int64_t sa = (int64_t)lda * cols_a + 7, sb = (int64_t)ldb * cols_b + 1, sc = (int64_t)ldc * n + 4,
                  sd = in_place ? sc : (int64_t)ldd * n;
    const size_t na = (size_t)(sa * batch), nb = (size_t)(sb * batch), nc = (size_t)(sc * batch),
                 nd = (size_t)(sd * batch), es = dt_size(t);
    double *va = malloc(na * sizeof(double)), *vb = malloc(nb * sizeof(double)), *vc = malloc(nc * sizeof(double));
    void *ra = malloc(na * es), *rb = malloc(nb * es), *rc = malloc(nc * es), *rd = malloc(nd * es);
    fill_random(t, na, va, ra);
    fill_random(t, nb, vb, rb);
    fill_random(t, nc, vc, rc);
    void *da, *db, *dc, *dd;
    HIP_OK(hipMalloc(&da, na * es));
    HIP_OK(hipMalloc(&db, nb * es));
    HIP_OK(hipMalloc(&dc, nc * es));
    HIP_OK(hipMemcpyAsync(da, ra, na * es, hipMemcpyHostToDevice, g_stream));
    HIP_OK(hipMemcpyAsync(db, rb, nb * es, hipMemcpyHostToDevice, g_stream));
    HIP_OK(hipMemcpyAsync(dc, rc, nc * es, hipMemcpyHostToDevice, g_stream));
    if (in_place) {
        dd = dc;
    } else {
        HIP_OK(hipMalloc(&dd, nd * es));
        HIP_OK(hipMemsetD8Async(dd, 0xff, nd * es, g_stream));
    }
    const rocblas_datatype rt = rb_type(t);
    rocblas_status s = rocblas_gemm_strided_batched_ex(h, ta, tb, m, n, k, &alpha, da, rt, lda, sa, db, rt, ldb, sb, &beta,
                                                       dc, rt, ldc, sc, dd, rt, ldd, sd, batch, rocblas_datatype_f32_r,
                                                       rocblas_gemm_algo_standard, 0, 0);
    HIP_OK(hipMemcpyAsync(rd, dd, nd * es, hipMemcpyDeviceToHost, g_stream));
    HIP_OK(hipStreamSynchronize(g_stream));
    /* Reference and the compared elements (the m x n block of each batch). */
    const size_t count = (size_t)m * n * batch;
    double* ref = malloc(count * sizeof(double));
    void* got = malloc(count * es);
    size_t idx = 0;
    for (int bi = 0; bi < batch; ++bi)
        for (int j = 0; j < n; ++j)
            for (int i = 0; i < m; ++i, ++idx) {
                double acc = 0.0;
                for (int p = 0; p < k; ++p) {
                    const double av = ta == rocblas_operation_none ? va[bi * sa + i + (int64_t)p * lda]
                                                                   : va[bi * sa + p + (int64_t)i * lda];
                    const double bv = tb == rocblas_operation_none ? vb[bi * sb + p + (int64_t)j * ldb]
                                                                   : vb[bi * sb + j + (int64_t)p * ldb];
                    acc += av * bv;
                }
                ref[idx] = alpha * acc + beta * vc[bi * sc + i + (int64_t)j * ldc];
                memcpy((char*)got + idx * es, (char*)rd + (size_t)(bi * sd + i + (int64_t)j * ldd) * es, es);
            }
    const double err = rel_error(t, got, ref, count);
    char name[160];
    snprintf(name, sizeof name, "rocblas_gemm_strided_batched_ex %s %c%c %dx%dx%d batch %d%s vs CPU", dt_name(t),
             ta == rocblas_operation_none ? 'N' : 'T', tb == rocblas_operation_none ? 'N' : 'T', m, n, k, batch,
             in_place ? " (C == D)" : " (C != D)");
    check(s == rocblas_status_success && err <= tolerance(t), name, "%s, rel error %.2e (tol %.0e)",
          rocblas_status_to_string(s), err, tolerance(t));
    free(ref);
    free(got);
    hipFree(da);
    hipFree(db);
    hipFree(dc);
    if (!in_place) hipFree(dd);
    free(va), free(vb), free(vc), free(ra), free(rb), free(rc), free(rd);
}

static void test_rocblas(void) {
    rocblas_handle h;
    rocblas_status s = rocblas_create_handle(&h);
    check(s == rocblas_status_success, "rocblas_create_handle", "%s", rocblas_status_to_string(s));
    if (s != rocblas_status_success) return;
    s = rocblas_set_stream(h, g_stream);
    size_t vlen = 0;
    rocblas_status s2 = rocblas_get_version_string_size(&vlen);
    char ver[256] = "";
    rocblas_status s3 = vlen <= sizeof ver ? rocblas_get_version_string(ver, sizeof ver) : rocblas_status_invalid_size;
    check(s == rocblas_status_success && s2 == rocblas_status_success && s3 == rocblas_status_success &&
              strlen(ver) + 1 == vlen,
          "rocblas_set_stream / rocblas_get_version_string", "'%s'", ver);

    gemm_case(h, DT_F32, rocblas_operation_none, rocblas_operation_transpose, 37, 29, 53, 3, 1.5f, 0.5f, 0);
    gemm_case(h, DT_F32, rocblas_operation_transpose, rocblas_operation_none, 64, 33, 300, 2, 1.0f, -1.0f, 1);
    /* Big enough that a TF32 path would show: 1e-5 is far below TF32's ~3e-4. */
    gemm_case(h, DT_F32, rocblas_operation_none, rocblas_operation_none, 256, 192, 1024, 1, 1.0f, 0.0f, 0);
    gemm_case(h, DT_F16, rocblas_operation_none, rocblas_operation_none, 64, 48, 96, 2, 1.0f, 0.0f, 0);
    gemm_case(h, DT_F16, rocblas_operation_transpose, rocblas_operation_transpose, 31, 17, 250, 3, 0.75f, 0.25f, 0);
    gemm_case(h, DT_BF16, rocblas_operation_none, rocblas_operation_transpose, 40, 24, 130, 2, 1.0f, 1.0f, 1);

    /* Error paths. */
    float one = 1.0f;
    void* p = (void*)16; /* never dereferenced: each call must fail its checks first */
    s = rocblas_gemm_strided_batched_ex(h, rocblas_operation_none, rocblas_operation_none, 8, 8, 8, &one, p,
                                        rocblas_datatype_f16_r, 8, 64, p, rocblas_datatype_f16_r, 8, 64, &one, p,
                                        rocblas_datatype_f16_r, 8, 64, p, rocblas_datatype_f16_r, 8, 64, 1,
                                        rocblas_datatype_f16_r, rocblas_gemm_algo_standard, 0, 0);
    check(s == rocblas_status_not_implemented, "rocblas gemm f16 with f16 compute -> not_implemented", "%s",
          rocblas_status_to_string(s));
    s = rocblas_gemm_strided_batched_ex(h, rocblas_operation_none, rocblas_operation_none, 8, 8, 8, &one, p,
                                        rocblas_datatype_f32_r, 4, 64, p, rocblas_datatype_f32_r, 8, 64, &one, p,
                                        rocblas_datatype_f32_r, 8, 64, p, rocblas_datatype_f32_r, 8, 64, 1,
                                        rocblas_datatype_f32_r, rocblas_gemm_algo_standard, 0, 0);
    check(s == rocblas_status_invalid_size, "rocblas gemm lda < m -> invalid_size", "%s", rocblas_status_to_string(s));
    s = rocblas_gemm_strided_batched_ex(NULL, rocblas_operation_none, rocblas_operation_none, 8, 8, 8, &one, p,
                                        rocblas_datatype_f32_r, 8, 64, p, rocblas_datatype_f32_r, 8, 64, &one, p,
                                        rocblas_datatype_f32_r, 8, 64, p, rocblas_datatype_f32_r, 8, 64, 1,
                                        rocblas_datatype_f32_r, rocblas_gemm_algo_standard, 0, 0);
    check(s == rocblas_status_invalid_handle, "rocblas gemm NULL handle -> invalid_handle", "%s",
          rocblas_status_to_string(s));
    s = rocblas_destroy_handle(h);
    check(s == rocblas_status_success, "rocblas_destroy_handle", "%s", rocblas_status_to_string(s));
}

/* ---------------------------------------------------------------------------------------
 * 5. MIOpen Immediate-mode convolution.
 */
static miopenDataType_t mi_type(enum dt t) { return t == DT_F32 ? miopenFloat : t == DT_F16 ? miopenHalf : miopenBFloat16; }

struct conv_case {
    const char* label;
    enum dt t;
    int transpose;
    int n, c, h, w;  /* input */
    int wn, wc, r, s; /* weights: forward [K, C/g, R, S]; transposed [C, K/g, R, S] */
    int pad, stride, dil, groups;
};

/* CPU reference in double. */
static void conv_reference(const struct conv_case* cc, const double* x, const double* w, double* y, int oc, int oh,
                           int ow) {
    memset(y, 0, sizeof(double) * (size_t)cc->n * oc * oh * ow);
    const int g = cc->groups;
    if (!cc->transpose) {
        const int cg = cc->c / g, kg = oc / g;
        for (int b = 0; b < cc->n; ++b)
            for (int ko = 0; ko < oc; ++ko)
                for (int p = 0; p < oh; ++p)
                    for (int q = 0; q < ow; ++q) {
                        double acc = 0.0;
                        const int gi = ko / kg;
                        for (int ci = 0; ci < cg; ++ci)
                            for (int r = 0; r < cc->r; ++r)
                                for (int s = 0; s < cc->s; ++s) {
                                    const int ih = p * cc->stride - cc->pad + r * cc->dil;
                                    const int iw = q * cc->stride - cc->pad + s * cc->dil;
                                    if (ih < 0 || ih >= cc->h || iw < 0 || iw >= cc->w) continue;
                                    acc += x[(((size_t)b * cc->c + gi * cg + ci) * cc->h + ih) * cc->w + iw] *
                                           w[(((size_t)ko * cg + ci) * cc->r + r) * cc->s + s];
                                }
                        y[(((size_t)b * oc + ko) * oh + p) * ow + q] = acc;
                    }
    } else {
        const int cg = cc->c / g, kg = cc->wc; /* input channels per group, output channels per group */
        for (int b = 0; b < cc->n; ++b)
            for (int ci = 0; ci < cc->c; ++ci) {
                const int gi = ci / cg;
                for (int ih = 0; ih < cc->h; ++ih)
                    for (int iw = 0; iw < cc->w; ++iw) {
                        const double xv = x[(((size_t)b * cc->c + ci) * cc->h + ih) * cc->w + iw];
                        for (int kk = 0; kk < kg; ++kk)
                            for (int r = 0; r < cc->r; ++r)
                                for (int s = 0; s < cc->s; ++s) {
                                    const int p = ih * cc->stride - cc->pad + r * cc->dil;
                                    const int q = iw * cc->stride - cc->pad + s * cc->dil;
                                    if (p < 0 || p >= oh || q < 0 || q >= ow) continue;
                                    y[(((size_t)b * oc + gi * kg + kk) * oh + p) * ow + q] +=
                                        xv * w[(((size_t)ci * kg + kk) * cc->r + r) * cc->s + s];
                                }
                    }
            }
    }
}

static const char* algo_name(miopenConvAlgorithm_t a) {
    switch (a) {
    case miopenConvolutionAlgoGEMM: return "GEMM";
    case miopenConvolutionAlgoDirect: return "Direct";
    case miopenConvolutionAlgoFFT: return "FFT";
    case miopenConvolutionAlgoWinograd: return "Winograd";
    case miopenConvolutionAlgoImplicitGEMM: return "ImplicitGEMM";
    default: return "?";
    }
}

#define MI_OK(call)                                                                                        \
    do {                                                                                                   \
        miopenStatus_t s_ = (call);                                                                        \
        if (s_ != miopenStatusSuccess) {                                                                   \
            check(0, #call, "%s", miopenGetErrorString(s_));                                               \
            return;                                                                                        \
        }                                                                                                  \
    } while (0)

/* Every solution MIOpen lists for the problem is run and checked. */
static void conv_case_run(miopenHandle_t mh, const struct conv_case* cc, int error_paths) {
    miopenTensorDescriptor_t xd, wd, yd;
    miopenConvolutionDescriptor_t cd;
    MI_OK(miopenCreateTensorDescriptor(&xd));
    MI_OK(miopenCreateTensorDescriptor(&wd));
    MI_OK(miopenCreateTensorDescriptor(&yd));
    MI_OK(miopenCreateConvolutionDescriptor(&cd));
    MI_OK(miopenSet4dTensorDescriptor(xd, mi_type(cc->t), cc->n, cc->c, cc->h, cc->w));
    MI_OK(miopenSet4dTensorDescriptor(wd, mi_type(cc->t), cc->wn, cc->wc, cc->r, cc->s));
    MI_OK(miopenInitConvolutionDescriptor(cd, cc->transpose ? miopenTranspose : miopenConvolution, cc->pad, cc->pad,
                                          cc->stride, cc->stride, cc->dil, cc->dil));
    MI_OK(miopenSetConvolutionGroupCount(cd, cc->groups));
    int on, oc, oh, ow;
    MI_OK(miopenGetConvolutionForwardOutputDim(cd, xd, wd, &on, &oc, &oh, &ow));
    /* Expected output shape, computed independently. */
    int eoc, eoh, eow;
    if (cc->transpose) {
        eoc = cc->wc * cc->groups;
        eoh = cc->stride * (cc->h - 1) + cc->dil * (cc->r - 1) + 1 - 2 * cc->pad;
        eow = cc->stride * (cc->w - 1) + cc->dil * (cc->s - 1) + 1 - 2 * cc->pad;
    } else {
        eoc = cc->wn;
        eoh = (cc->h + 2 * cc->pad - cc->dil * (cc->r - 1) - 1) / cc->stride + 1;
        eow = (cc->w + 2 * cc->pad - cc->dil * (cc->s - 1) - 1) / cc->stride + 1;
    }
    char name[200];
    snprintf(name, sizeof name, "miopen %s %s: output dim", cc->label, dt_name(cc->t));
    check(on == cc->n && oc == eoc && oh == eoh && ow == eow, name, "[%d,%d,%d,%d]", on, oc, oh, ow);
    MI_OK(miopenSet4dTensorDescriptor(yd, mi_type(cc->t), on, oc, oh, ow));

    const size_t nx = (size_t)cc->n * cc->c * cc->h * cc->w, nw = (size_t)cc->wn * cc->wc * cc->r * cc->s,
                 ny = (size_t)on * oc * oh * ow, es = dt_size(cc->t);
    double *vx = malloc(nx * sizeof(double)), *vw = malloc(nw * sizeof(double)), *ref = malloc(ny * sizeof(double));
    void *rx = malloc(nx * es), *rw = malloc(nw * es), *ry = malloc(ny * es);
    fill_random(cc->t, nx, vx, rx);
    fill_random(cc->t, nw, vw, rw);
    conv_reference(cc, vx, vw, ref, oc, oh, ow);
    void *dx, *dw, *dy;
    HIP_OK(hipMalloc(&dx, nx * es));
    HIP_OK(hipMalloc(&dw, nw * es));
    HIP_OK(hipMalloc(&dy, ny * es));
    HIP_OK(hipMemcpyAsync(dx, rx, nx * es, hipMemcpyHostToDevice, g_stream));
    HIP_OK(hipMemcpyAsync(dw, rw, nw * es, hipMemcpyHostToDevice, g_stream));

    size_t count = 0;
    MI_OK(miopenConvolutionForwardGetSolutionCount(mh, wd, xd, cd, yd, &count));
    miopenConvSolution_t sol[32];
    size_t got = 0;
    MI_OK(miopenConvolutionForwardGetSolution(mh, wd, xd, cd, yd, 32, &got, sol));
    snprintf(name, sizeof name, "miopen %s %s: solutions", cc->label, dt_name(cc->t));
    check(count > 0 && got == count, name, "count %zu, listed %zu", count, got);
    size_t max_ws = 0;
    for (size_t i = 0; i < got; ++i) {
        size_t ws = 0;
        MI_OK(miopenConvolutionForwardGetSolutionWorkspaceSize(mh, wd, xd, cd, yd, sol[i].solution_id, &ws));
        MI_OK(miopenConvolutionForwardCompileSolution(mh, wd, xd, cd, yd, sol[i].solution_id));
        void* wsp = NULL;
        if (ws > 0) HIP_OK(hipMalloc(&wsp, ws));
        HIP_OK(hipMemsetD8Async(dy, 0xff, ny * es, g_stream)); /* poison: NaN in every type */
        miopenStatus_t s = miopenConvolutionForwardImmediate(mh, wd, dw, xd, dx, cd, yd, dy, wsp, ws, sol[i].solution_id);
        HIP_OK(hipMemcpyAsync(ry, dy, ny * es, hipMemcpyDeviceToHost, g_stream));
        HIP_OK(hipStreamSynchronize(g_stream));
        if (wsp != NULL) HIP_OK(hipFree(wsp));
        if (ws > max_ws) max_ws = ws;
        const double err = rel_error(cc->t, ry, ref, ny);
        /* FFT and Winograd transforms lose a little more precision in f32. */
        const int lossy = sol[i].algorithm == miopenConvolutionAlgoFFT || sol[i].algorithm == miopenConvolutionAlgoWinograd;
        const double tol = cc->t == DT_F32 && lossy ? 1e-4 : tolerance(cc->t);
        snprintf(name, sizeof name, "miopen %s %s: solution %llu (%s) vs CPU", cc->label, dt_name(cc->t),
                 (unsigned long long)sol[i].solution_id, algo_name(sol[i].algorithm));
        check(s == miopenStatusSuccess && ws == sol[i].workspace_size && err <= tol, name,
              "%s, workspace %zu B, rel error %.2e (tol %.0e)", miopenGetErrorString(s), ws, err, tol);
    }

    if (error_paths) {
        miopenStatus_t s;
        if (max_ws > 0) {
            for (size_t i = 0; i < got; ++i)
                if (sol[i].workspace_size > 0) {
                    s = miopenConvolutionForwardImmediate(mh, wd, dw, xd, dx, cd, yd, dy, NULL, 0, sol[i].solution_id);
                    check(s == miopenStatusBadParm, "miopen Immediate with too little workspace -> BadParm", "%s",
                          miopenGetErrorString(s));
                    break;
                }
        }
        const uint64_t other_mode = cc->transpose ? 1000 : 2000;
        s = miopenConvolutionForwardImmediate(mh, wd, dw, xd, dx, cd, yd, dy, NULL, 0, other_mode);
        check(s == miopenStatusBadParm, "miopen Immediate with another mode's solution id -> BadParm", "%s",
              miopenGetErrorString(s));
        s = miopenConvolutionForwardGetSolution(mh, wd, xd, cd, yd, 0, &got, sol);
        check(s == miopenStatusBadParm, "miopen GetSolution(maxSolutionCount 0) -> BadParm", "%s",
              miopenGetErrorString(s));
        miopenTensorDescriptor_t bad;
        MI_OK(miopenCreateTensorDescriptor(&bad));
        MI_OK(miopenSet4dTensorDescriptor(bad, mi_type(cc->t), on, oc, oh + 1, ow));
        s = miopenConvolutionForwardGetSolutionCount(mh, wd, xd, cd, bad, &count);
        check(s == miopenStatusBadParm, "miopen GetSolutionCount with a wrong y shape -> BadParm", "%s",
              miopenGetErrorString(s));
        /* An input with one channel too many for the weights. */
        MI_OK(miopenSet4dTensorDescriptor(bad, mi_type(cc->t), cc->n, cc->c + 1, cc->h, cc->w));
        int dn, dc, dh, dw2;
        s = miopenGetConvolutionForwardOutputDim(cd, bad, wd, &dn, &dc, &dh, &dw2);
        check(s == miopenStatusBadParm, "miopen GetConvolutionForwardOutputDim channel mismatch -> BadParm", "%s",
              miopenGetErrorString(s));
        MI_OK(miopenDestroyTensorDescriptor(bad));
    }
    HIP_OK(hipFree(dx));
    HIP_OK(hipFree(dw));
    HIP_OK(hipFree(dy));
    free(vx), free(vw), free(ref), free(rx), free(rw), free(ry);
    MI_OK(miopenDestroyTensorDescriptor(xd));
    MI_OK(miopenDestroyTensorDescriptor(wd));
    MI_OK(miopenDestroyTensorDescriptor(yd));
    MI_OK(miopenDestroyConvolutionDescriptor(cd));
}

static void test_miopen(void) {
    size_t vmaj = 0, vmin = 0, vpat = 0;
    MI_OK(miopenGetVersion(&vmaj, &vmin, &vpat));
    printf("  MIOpen API version %zu.%zu.%zu\n", vmaj, vmin, vpat);
    miopenHandle_t mh;
    MI_OK(miopenCreateWithStream(&mh, g_stream));
    /* label, type, transposed, x [n,c,h,w], w [n,c,r,s], pad, stride, dilation, groups */
    const struct conv_case cases[] = {
        {"conv 3x3 pad 1", DT_F32, 0, 2, 8, 19, 19, 12, 8, 3, 3, 1, 1, 1, 1},
        {"conv 3x3 pad 2 stride 2 dil 2 groups 2", DT_F32, 0, 2, 8, 21, 17, 12, 4, 3, 3, 2, 2, 2, 2},
        {"conv 3x3 pad 1 (VAE-like, 64 ch)", DT_F32, 0, 1, 64, 32, 32, 64, 64, 3, 3, 1, 1, 1, 1},
        {"conv 3x3 pad 1", DT_F16, 0, 2, 16, 19, 23, 16, 16, 3, 3, 1, 1, 1, 1},
        {"conv 3x3 pad 1", DT_BF16, 0, 2, 16, 19, 23, 16, 16, 3, 3, 1, 1, 1, 1},
        {"conv 1x1", DT_F16, 0, 3, 32, 9, 11, 24, 32, 1, 1, 0, 1, 1, 1},
        {"transposed 4x4 stride 2 pad 1", DT_F32, 1, 2, 8, 7, 9, 8, 6, 4, 4, 1, 2, 1, 1},
        {"transposed 3x3 stride 2 pad 1 groups 2", DT_F32, 1, 2, 8, 6, 5, 8, 3, 3, 3, 1, 2, 1, 2},
        {"transposed 4x4 stride 2 pad 1", DT_F16, 1, 2, 16, 8, 8, 16, 8, 4, 4, 1, 2, 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) conv_case_run(mh, &cases[i], i == 0 || i == 6);
    MI_OK(miopenDestroy(mh));
}

int main(int argc, char** argv) {
    int all_kernels = 0;
    g_rng = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull | 1;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--all-kernels") == 0) all_kernels = 1;
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) g_rng = strtoull(argv[++i], NULL, 0) | 1;
        else g_kernel_dir = argv[i];
    }
    if (g_kernel_dir == NULL) {
        fprintf(stderr, "usage: %s KERNEL_SRC_DIR [--all-kernels] [--seed N]\n", argv[0]);
        return 2;
    }
    printf("test_hip_on_cuda: seed %llu, kernels from %s\n", (unsigned long long)g_rng, g_kernel_dir);
    char path[4096];
    for (int i = 0; i < N_HEADERS; ++i) {
        snprintf(path, sizeof path, "%s/%s", g_kernel_dir, g_header_names[i]);
        g_headers[i] = read_file(path, NULL);
        if (g_headers[i] == NULL) {
            fprintf(stderr, "cannot read %s\n", path);
            return 2;
        }
    }

    printf("== device\n");
    test_device();
    if (g_fail == 0) {
        printf("== memory, stream, events\n");
        test_memory_stream_events();
        printf("== hiprtc, modules, launches\n");
        test_hiprtc_and_launch();
        if (all_kernels) {
            printf("== every kernel source through hiprtc\n");
            test_all_kernels();
        }
        printf("== rocBLAS\n");
        test_rocblas();
        printf("== MIOpen\n");
        test_miopen();
        if (g_stream != NULL) {
            hipError_t e = hipStreamDestroy(g_stream);
            check(e == hipSuccess, "hipStreamDestroy", "%s", hipGetErrorName(e));
        }
    }
    printf("== %d passed, %d failed\n", g_pass, g_fail);
    for (int i = 0; i < N_HEADERS; ++i) free((void*)g_headers[i]);
    return g_fail == 0 ? 0 : 1;
}
