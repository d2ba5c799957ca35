/*
 * test_hip_on_cuda: what the test program's three files share (test_hip_on_cuda.c: reporting,
 * host helpers, shared state, the HIP runtime tests and main; test_hiprtc_modules.c: hiprtc,
 * modules and launches; test_rocblas_miopen.c: rocBLAS and MIOpen). Like the tests, it sees
 * only the ROCm headers.
 */
#ifndef TEST_HIP_ON_CUDA_H
#define TEST_HIP_ON_CUDA_H

#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>
#include <hip/hiprtc.h>
#include <rocblas/rocblas.h>
/* miopen.h names this struct without `struct` (valid C++ only); see miopen_api.c. */
typedef struct miopenTensorArgument_t miopenTensorArgument_t;
#include <miopen/miopen.h>

#include <stddef.h>
#include <stdint.h>

/* Reporting (test_hip_on_cuda.c): prints PASS/FAIL name[: detail] and counts it. */
void check(int ok, const char* name, const char* fmt, ...);

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

/* Host helpers (test_hip_on_cuda.c): random numbers, 16-bit float types, error norms. */
double urand(void);
enum dt { DT_F32, DT_F16, DT_BF16 };
const char* dt_name(enum dt t);
size_t dt_size(enum dt t);
void fill_random(enum dt t, size_t n, double* vals, void* raw);
double rel_error(enum dt t, const void* got, const double* ref, size_t n);
double tolerance(enum dt t);
char* read_file(const char* path, size_t* size);

/* State shared between the tests (test_hip_on_cuda.c). */
extern hipStream_t g_stream;
extern char g_arch[64]; /* gcnArchName without ":features" */
extern const char* g_kernel_dir;
/* The headers of kernels/src, given to every hiprtc compilation as in-memory files (the
 * backend gives each module those it includes; one it does not include is ignored). */
#define N_HEADERS 2
extern const char* g_header_names[N_HEADERS];
extern const char* g_headers[N_HEADERS];

/* The tests in test_hiprtc_modules.c and test_rocblas_miopen.c, run by main. */
void test_hiprtc_and_launch(void);
void test_all_kernels(void);
void test_rocblas(void);
void test_miopen(void);

#endif
