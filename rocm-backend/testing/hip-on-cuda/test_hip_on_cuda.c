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
 *
 * This file: reporting, host helpers, the state shared between the tests, the HIP runtime
 * tests (1. devices, 2. memory, stream and events) and main. 3. hiprtc, modules and launches
 * are in test_hiprtc_modules.c; 4. rocBLAS and 5. MIOpen in test_rocblas_miopen.c; what
 * they share is declared in test_hip_on_cuda.h.
 */
#include "test_hip_on_cuda.h"

#include <math.h>
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

void check(int ok, const char* name, const char* fmt, ...) {
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

/* ---------------------------------------------------------------------------------------
 * Host helpers: random numbers, 16-bit float conversions, error norms.
 */
static uint64_t g_rng;
double urand(void) { /* xorshift64*, uniform in [-1, 1) */
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

const char* dt_name(enum dt t) { return t == DT_F32 ? "f32" : t == DT_F16 ? "f16" : "bf16"; }
size_t dt_size(enum dt t) { return t == DT_F32 ? 4 : 2; }

/* Random values in [-1, 1), rounded to the storage type; `vals` gets the rounded values
 * (what the GPU sees), `raw` the bytes to upload. */
void fill_random(enum dt t, size_t n, double* vals, void* raw) {
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
double rel_error(enum dt t, const void* got, const double* ref, size_t n) {
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
double tolerance(enum dt t) { return t == DT_F32 ? 1e-5 : t == DT_F16 ? 2e-3 : 1.6e-2; }

char* read_file(const char* path, size_t* size) {
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
hipStream_t g_stream;
char g_arch[64]; /* gcnArchName without ":features" */
const char* g_kernel_dir;
const char* g_header_names[N_HEADERS] = {"prelude.h", "mma.h"};
const char* g_headers[N_HEADERS];

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
