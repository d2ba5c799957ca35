/*
 * libhiprtc.so of hip-on-cuda: the hiprtc entry points rocm-backend calls
 * (rocm-backend/FFI.md), implemented over NVRTC.
 *
 * TEST INFRASTRUCTURE, NOT A PRODUCT FEATURE (see ../README.md).
 *
 * Compiled against the real hip/hiprtc.h, so every definition must match ROCm's.
 *
 * Options are translated, not passed through (NVRTC rejects hiprtc's):
 *   --offload-arch=sm_90[:features]  -> --gpu-architecture=sm_90 (features dropped)
 *   --offload-arch=gfx...            -> HIPRTC_ERROR_INVALID_OPTION (no AMD code here)
 *   -O0 .. -O3, -Os                  -> dropped (NVRTC has no -O; it always optimises)
 *   -D..., -U..., -I..., -std=...    -> passed through (-D X / -U X / -I X joined)
 *   anything else                    -> passed through; NVRTC judges it
 * and always added: -I<CUDA include dir> (and its cccl/ subfolder, where CUDA 13 keeps
 * what cuda_fp16.h includes), so that cuda_fp16.h / cuda_bf16.h resolve, and
 * --std=c++17 unless a -std option was given (hiprtc's default dialect).
 *
 * The CUDA include dir: $CUDA_HOME/include, $CUDA_PATH/include, the directory this library
 * was built against (HOC_CUDA_INCLUDE, set by build.sh), /usr/local/cuda/include: the first
 * that holds cuda_fp16.h.
 *
 * hiprtcGetCode returns a cubin (an ELF file, as hiprtc returns an AMD code object) when
 * the target is a real architecture (sm_XX), so that the driver loads it without JIT; for
 * a virtual target (compute_XX) it returns NUL-terminated PTX.
 */
#include <hip/hip_version.h>
#include <hip/hiprtc.h>

#include <nvrtc.h>

/* The string arrays hiprtcCreateProgram and hiprtcCompileProgram take: HIP 7's headers
 * declare them `const char* const*`, HIP 6's `const char**` (the same pointer: the ABI is
 * unchanged). A definition must match the headers it is compiled against, exactly as the
 * real library's does, so the type follows them. */
#if HIP_VERSION_MAJOR >= 7
typedef const char* const* hoc_strv;
#else
typedef const char** hoc_strv;
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hoc_internal.h"

#ifndef HOC_CUDA_INCLUDE
#define HOC_CUDA_INCLUDE ""
#endif

struct _hiprtcProgram {
    nvrtcProgram prog;
    char* code; /* cubin or PTX after a successful compile, else NULL */
    size_t code_size;
    char* extra_log; /* our own diagnostics (option translation), prepended to NVRTC's */
};

static hiprtcResult from_nvrtc(nvrtcResult r) {
    switch (r) {
    case NVRTC_SUCCESS: return HIPRTC_SUCCESS;
    case NVRTC_ERROR_OUT_OF_MEMORY: return HIPRTC_ERROR_OUT_OF_MEMORY;
    case NVRTC_ERROR_PROGRAM_CREATION_FAILURE: return HIPRTC_ERROR_PROGRAM_CREATION_FAILURE;
    case NVRTC_ERROR_INVALID_INPUT: return HIPRTC_ERROR_INVALID_INPUT;
    case NVRTC_ERROR_INVALID_PROGRAM: return HIPRTC_ERROR_INVALID_PROGRAM;
    case NVRTC_ERROR_INVALID_OPTION: return HIPRTC_ERROR_INVALID_OPTION;
    case NVRTC_ERROR_COMPILATION: return HIPRTC_ERROR_COMPILATION;
    case NVRTC_ERROR_BUILTIN_OPERATION_FAILURE: return HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE;
    case NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION:
        return HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION;
    case NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION:
        return HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION;
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID: return HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID;
    default: return HIPRTC_ERROR_INTERNAL_ERROR;
    }
}

static hiprtcResult logged(const char* fn, hiprtcResult r) {
    if (r != HIPRTC_SUCCESS && hoc_log_enabled())
        fprintf(stderr, "[hip-on-cuda] %s -> %s (%d)\n", fn, hiprtcGetErrorString(r), (int)r);
    return r;
}
#define RETURN(r) return logged(__func__, (r))

const char* hiprtcGetErrorString(hiprtcResult result) {
    switch (result) {
    case HIPRTC_SUCCESS: return "HIPRTC_SUCCESS";
    case HIPRTC_ERROR_OUT_OF_MEMORY: return "HIPRTC_ERROR_OUT_OF_MEMORY";
    case HIPRTC_ERROR_PROGRAM_CREATION_FAILURE: return "HIPRTC_ERROR_PROGRAM_CREATION_FAILURE";
    case HIPRTC_ERROR_INVALID_INPUT: return "HIPRTC_ERROR_INVALID_INPUT";
    case HIPRTC_ERROR_INVALID_PROGRAM: return "HIPRTC_ERROR_INVALID_PROGRAM";
    case HIPRTC_ERROR_INVALID_OPTION: return "HIPRTC_ERROR_INVALID_OPTION";
    case HIPRTC_ERROR_COMPILATION: return "HIPRTC_ERROR_COMPILATION";
    case HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE: return "HIPRTC_ERROR_BUILTIN_OPERATION_FAILURE";
    case HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION:
        return "HIPRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION";
    case HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION:
        return "HIPRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION";
    case HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID: return "HIPRTC_ERROR_NAME_EXPRESSION_NOT_VALID";
    case HIPRTC_ERROR_INTERNAL_ERROR: return "HIPRTC_ERROR_INTERNAL_ERROR";
    case HIPRTC_ERROR_LINKING: return "HIPRTC_ERROR_LINKING";
    default: return "Invalid HIPRTC error code";
    }
}

/* NVRTC's version: the compiler that actually produces the code, so that a cache keyed on
 * it notices a compiler change. */
hiprtcResult hiprtcVersion(int* major, int* minor) {
    if (major == NULL || minor == NULL) RETURN(HIPRTC_ERROR_INVALID_INPUT);
    RETURN(from_nvrtc(nvrtcVersion(major, minor)));
}

hiprtcResult hiprtcCreateProgram(hiprtcProgram* prog, const char* src, const char* name, int numHeaders,
                                 hoc_strv headers, hoc_strv includeNames) {
    if (prog == NULL || src == NULL || numHeaders < 0) RETURN(HIPRTC_ERROR_INVALID_INPUT);
    if (numHeaders > 0 && (headers == NULL || includeNames == NULL)) RETURN(HIPRTC_ERROR_INVALID_INPUT);
    struct _hiprtcProgram* p = calloc(1, sizeof *p);
    if (p == NULL) RETURN(HIPRTC_ERROR_OUT_OF_MEMORY);
    nvrtcResult r = nvrtcCreateProgram(&p->prog, src, name, numHeaders, headers, includeNames);
    if (r != NVRTC_SUCCESS) {
        free(p);
        RETURN(from_nvrtc(r));
    }
    *prog = p;
    RETURN(HIPRTC_SUCCESS);
}

hiprtcResult hiprtcDestroyProgram(hiprtcProgram* prog) {
    if (prog == NULL || *prog == NULL) RETURN(HIPRTC_ERROR_INVALID_PROGRAM);
    struct _hiprtcProgram* p = *prog;
    nvrtcResult r = nvrtcDestroyProgram(&p->prog);
    free(p->code);
    free(p->extra_log);
    free(p);
    *prog = NULL;
    RETURN(from_nvrtc(r));
}

static int has_file(const char* dir, const char* file) {
    char path[4096];
    struct stat st;
    if (snprintf(path, sizeof path, "%s/%s", dir, file) >= (int)sizeof path) return 0;
    return stat(path, &st) == 0;
}

/* The first candidate CUDA include directory holding cuda_fp16.h, written to `out`. */
static int find_cuda_include(char* out, size_t size) {
    const char* roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH")};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; ++i) {
        if (roots[i] == NULL || roots[i][0] == '\0') continue;
        if (snprintf(out, size, "%s/include", roots[i]) < (int)size && has_file(out, "cuda_fp16.h")) return 1;
    }
    const char* fixed[] = {HOC_CUDA_INCLUDE, "/usr/local/cuda/include"};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; ++i) {
        if (fixed[i][0] == '\0') continue;
        if (snprintf(out, size, "%s", fixed[i]) < (int)size && has_file(out, "cuda_fp16.h")) return 1;
    }
    return 0;
}

static void append_log(struct _hiprtcProgram* p, const char* text) {
    size_t old = p->extra_log ? strlen(p->extra_log) : 0;
    char* s = realloc(p->extra_log, old + strlen(text) + 2);
    if (s == NULL) return;
    strcpy(s + old, text);
    strcat(s + old, "\n");
    p->extra_log = s;
}

/* One translated option list; `store` owns the strings built here. */
struct options {
    const char** argv;
    int argc;
    char** store;
    int nstore;
};

static int push(struct options* o, const char* arg) {
    o->argv[o->argc++] = arg;
    return 1;
}

static const char* own(struct options* o, char* s) {
    if (s != NULL) o->store[o->nstore++] = s;
    return s;
}

static char* concat(const char* a, const char* b) {
    char* s = malloc(strlen(a) + strlen(b) + 1);
    if (s != NULL) {
        strcpy(s, a);
        strcat(s, b);
    }
    return s;
}

/* Translates hiprtc options to NVRTC's. Returns HIPRTC_SUCCESS or INVALID_OPTION (with a
 * line in the program log saying why). */
static hiprtcResult translate(struct _hiprtcProgram* p, int n, const char* const* in, struct options* o) {
    int have_std = 0;
    for (int i = 0; i < n; ++i) {
        const char* a = in[i];
        if (a == NULL) return HIPRTC_ERROR_INVALID_OPTION;
        if (strncmp(a, "--offload-arch=", 15) == 0 || strncmp(a, "--gpu-architecture=", 19) == 0 ||
            strncmp(a, "-arch=", 6) == 0) {
            const char* arch = strchr(a, '=') + 1;
            size_t len = strcspn(arch, ":"); /* drop target features such as ":sramecc+" */
            if (!((len > 3 && strncmp(arch, "sm_", 3) == 0) || (len > 8 && strncmp(arch, "compute_", 8) == 0))) {
                char msg[512];
                snprintf(msg, sizeof msg,
                         "hip-on-cuda hiprtc: architecture '%s' is not an NVIDIA one (sm_XX or compute_XX); "
                         "this library compiles for NVIDIA GPUs only",
                         arch);
                append_log(p, msg);
                return HIPRTC_ERROR_INVALID_OPTION;
            }
            char* opt = malloc(len + 21);
            if (opt == NULL) return HIPRTC_ERROR_OUT_OF_MEMORY;
            snprintf(opt, len + 21, "--gpu-architecture=%.*s", (int)len, arch);
            push(o, own(o, opt));
        } else if (a[0] == '-' && a[1] == 'O' && (a[2] == '\0' || (a[3] == '\0' && strchr("0123s", a[2]) != NULL))) {
            continue; /* NVRTC always optimises and rejects -O */
        } else if ((strcmp(a, "-D") == 0 || strcmp(a, "-U") == 0 || strcmp(a, "-I") == 0) && i + 1 < n &&
                   in[i + 1] != NULL) {
            const char* joined = own(o, concat(a, in[++i]));
            if (joined == NULL) return HIPRTC_ERROR_OUT_OF_MEMORY;
            push(o, joined);
        } else {
            if (strncmp(a, "-std=", 5) == 0 || strncmp(a, "--std=", 6) == 0) have_std = 1;
            push(o, a);
        }
    }
    if (!have_std) push(o, "--std=c++17");
    char inc[4096];
    if (find_cuda_include(inc, sizeof inc)) {
        const char* opt = own(o, concat("-I", inc));
        if (opt == NULL) return HIPRTC_ERROR_OUT_OF_MEMORY;
        push(o, opt);
        char cccl[4200];
        snprintf(cccl, sizeof cccl, "%s/cccl", inc);
        struct stat st;
        if (stat(cccl, &st) == 0 && S_ISDIR(st.st_mode)) {
            const char* copt = own(o, concat("-I", cccl));
            if (copt == NULL) return HIPRTC_ERROR_OUT_OF_MEMORY;
            push(o, copt);
        }
    } else {
        append_log(p, "hip-on-cuda hiprtc: no CUDA include directory with cuda_fp16.h found "
                      "(set CUDA_HOME); compiling without one");
    }
    return HIPRTC_SUCCESS;
}

hiprtcResult hiprtcCompileProgram(hiprtcProgram prog, int numOptions, hoc_strv options) {
    HOC_TIMED();
    if (prog == NULL) RETURN(HIPRTC_ERROR_INVALID_PROGRAM);
    if (numOptions < 0 || (numOptions > 0 && options == NULL)) RETURN(HIPRTC_ERROR_INVALID_INPUT);
    struct _hiprtcProgram* p = prog;
    free(p->code);
    p->code = NULL;
    p->code_size = 0;
    free(p->extra_log);
    p->extra_log = NULL;

    struct options o = {0};
    /* Each input gives at most one output; plus --std, -I include, -I cccl. */
    o.argv = calloc((size_t)numOptions + 4, sizeof *o.argv);
    o.store = calloc((size_t)numOptions + 4, sizeof *o.store);
    hiprtcResult res = HIPRTC_ERROR_OUT_OF_MEMORY;
    if (o.argv != NULL && o.store != NULL) res = translate(p, numOptions, options, &o);
    if (res == HIPRTC_SUCCESS) {
        if (hoc_log_enabled()) {
            fprintf(stderr, "[hip-on-cuda] hiprtcCompileProgram: NVRTC options:");
            for (int i = 0; i < o.argc; ++i) fprintf(stderr, " %s", o.argv[i]);
            fprintf(stderr, "\n");
        }
        res = from_nvrtc(nvrtcCompileProgram(p->prog, o.argc, o.argv));
    }
    if (res == HIPRTC_SUCCESS) {
        /* A cubin exists only for a real architecture; otherwise take the PTX. */
        size_t size = 0;
        if (nvrtcGetCUBINSize(p->prog, &size) == NVRTC_SUCCESS && size > 0) {
            p->code = malloc(size);
            if (p->code == NULL) {
                res = HIPRTC_ERROR_OUT_OF_MEMORY;
            } else {
                res = from_nvrtc(nvrtcGetCUBIN(p->prog, p->code));
            }
        } else {
            res = from_nvrtc(nvrtcGetPTXSize(p->prog, &size));
            if (res == HIPRTC_SUCCESS) {
                p->code = malloc(size);
                res = p->code == NULL ? HIPRTC_ERROR_OUT_OF_MEMORY : from_nvrtc(nvrtcGetPTX(p->prog, p->code));
            }
        }
        if (res == HIPRTC_SUCCESS) {
            p->code_size = size;
        } else {
            free(p->code);
            p->code = NULL;
        }
    }
    for (int i = 0; i < o.nstore; ++i) free(o.store[i]);
    free(o.store);
    free(o.argv);
    RETURN(res);
}

/* The log is our own lines (option translation) followed by NVRTC's; the size includes
 * the terminating NUL, as in hiprtc. */
hiprtcResult hiprtcGetProgramLogSize(hiprtcProgram prog, size_t* logSizeRet) {
    if (prog == NULL) RETURN(HIPRTC_ERROR_INVALID_PROGRAM);
    if (logSizeRet == NULL) RETURN(HIPRTC_ERROR_INVALID_INPUT);
    size_t n = 0;
    nvrtcResult r = nvrtcGetProgramLogSize(prog->prog, &n);
    if (r != NVRTC_SUCCESS) RETURN(from_nvrtc(r));
    if (n == 0) n = 1;
    *logSizeRet = (prog->extra_log ? strlen(prog->extra_log) : 0) + n;
    RETURN(HIPRTC_SUCCESS);
}

hiprtcResult hiprtcGetProgramLog(hiprtcProgram prog, char* log) {
    if (prog == NULL) RETURN(HIPRTC_ERROR_INVALID_PROGRAM);
    if (log == NULL) RETURN(HIPRTC_ERROR_INVALID_INPUT);
    size_t off = 0;
    if (prog->extra_log != NULL) {
        off = strlen(prog->extra_log);
        memcpy(log, prog->extra_log, off);
    }
    size_t n = 0;
    nvrtcResult r = nvrtcGetProgramLogSize(prog->prog, &n);
    if (r == NVRTC_SUCCESS && n > 0) r = nvrtcGetProgramLog(prog->prog, log + off);
    else log[off] = '\0';
    RETURN(from_nvrtc(r));
}

hiprtcResult hiprtcGetCodeSize(hiprtcProgram prog, size_t* codeSizeRet) {
    if (prog == NULL) RETURN(HIPRTC_ERROR_INVALID_PROGRAM);
    if (codeSizeRet == NULL) RETURN(HIPRTC_ERROR_INVALID_INPUT);
    /* No successful compile: nothing to return. */
    if (prog->code == NULL) RETURN(HIPRTC_ERROR_INVALID_PROGRAM);
    *codeSizeRet = prog->code_size;
    RETURN(HIPRTC_SUCCESS);
}

hiprtcResult hiprtcGetCode(hiprtcProgram prog, char* code) {
    if (prog == NULL) RETURN(HIPRTC_ERROR_INVALID_PROGRAM);
    if (code == NULL) RETURN(HIPRTC_ERROR_INVALID_INPUT);
    if (prog->code == NULL) RETURN(HIPRTC_ERROR_INVALID_PROGRAM);
    memcpy(code, prog->code, prog->code_size);
    RETURN(HIPRTC_SUCCESS);
}
