/*
 * test_hip_on_cuda, 3. hiprtc, modules and launches: elementwise.hip compiled as the backend
 * compiles it, loaded, and unary_silu_f32 launched and checked against the CPU; function
 * attributes; error paths; and (--all-kernels) every .hip source of kernels/src compiled on
 * parallel threads with every RV_EXPORT_* entry point resolved. See test_hip_on_cuda.c.
 */
/* POSIX: clock_gettime, strdup, opendir. */
#define _POSIX_C_SOURCE 200809L
#include "test_hip_on_cuda.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

void test_hiprtc_and_launch(void) {
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
void test_all_kernels(void) {
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
