/*
 * hiprtc_smoke: what the HIP runtime and hiprtc do on a machine with no AMD GPU.
 * Built and run inside the ROCm chroot by scripts/rocm-smoke/run.sh.
 *
 * It prints the result codes of hipInit and hipGetDeviceCount (expected: hipErrorNoDevice,
 * 100), the runtime/driver versions, hiprtcVersion, and compiles one small kernel that uses
 * the fp16 and bf16 headers through hiprtc for gfx1100, gfx1201 and gfx942, printing the
 * size of each code object. Exit status: 0 when every hiprtc compile produced a non-empty
 * code object, 1 otherwise. The device calls are reported, not judged: their codes are the
 * finding.
 */
#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>
#include <stdio.h>
#include <stdlib.h>

static const char *kernel_src =
    "#include <hip/hip_fp16.h>\n"
    "#include <hip/hip_bf16.h>\n"
    "extern \"C\" __global__ void smoke_axpy(int n, float a, const __half *x, __hip_bfloat16 *y) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) {\n"
    "    float v = a * __half2float(x[i]) + __bfloat162float(y[i]);\n"
    "    y[i] = __float2bfloat16(v + __shfl_xor(v, 1, warpSize));\n"
    "  }\n"
    "}\n";

static int compile_for(const char *arch) {
    hiprtcProgram prog;
    hiprtcResult r = hiprtcCreateProgram(&prog, kernel_src, "smoke.hip", 0, NULL, NULL);
    if (r != HIPRTC_SUCCESS) {
        printf("  %-8s hiprtcCreateProgram: %d (%s)\n", arch, (int)r, hiprtcGetErrorString(r));
        return 0;
    }
    char opt[64];
    snprintf(opt, sizeof opt, "--offload-arch=%s", arch);
    const char *opts[] = {opt, "-O3"};
    r = hiprtcCompileProgram(prog, 2, opts);
    size_t log_size = 0;
    hiprtcGetProgramLogSize(prog, &log_size);
    if (log_size > 1) {
        char *log = malloc(log_size);
        hiprtcGetProgramLog(prog, log);
        printf("  %-8s log:\n%s\n", arch, log);
        free(log);
    }
    int ok = 0;
    if (r != HIPRTC_SUCCESS) {
        printf("  %-8s hiprtcCompileProgram: %d (%s)\n", arch, (int)r, hiprtcGetErrorString(r));
    } else {
        size_t code_size = 0;
        r = hiprtcGetCodeSize(prog, &code_size);
        char *code = malloc(code_size ? code_size : 1);
        hiprtcResult r2 = hiprtcGetCode(prog, code);
        /* A code object is an ELF file: check the magic, not just the size. */
        int elf = code_size > 4 && code[0] == 0x7f && code[1] == 'E' && code[2] == 'L' && code[3] == 'F';
        printf("  %-8s compiled: code object %zu bytes (GetCodeSize %d, GetCode %d, ELF %s)\n", arch,
               code_size, (int)r, (int)r2, elf ? "yes" : "NO");
        ok = code_size > 0 && elf && r == HIPRTC_SUCCESS && r2 == HIPRTC_SUCCESS;
        free(code);
    }
    hiprtcDestroyProgram(&prog);
    return ok;
}

int main(void) {
    hipError_t e = hipInit(0);
    printf("hipInit(0): %d (%s: %s)\n", (int)e, hipGetErrorName(e), hipGetErrorString(e));

    int count = -1;
    e = hipGetDeviceCount(&count);
    printf("hipGetDeviceCount: %d (%s), count=%d\n", (int)e, hipGetErrorName(e), count);

    int v = -1;
    e = hipRuntimeGetVersion(&v);
    printf("hipRuntimeGetVersion: %d (%s), version=%d\n", (int)e, hipGetErrorName(e), v);
    v = -1;
    e = hipDriverGetVersion(&v);
    printf("hipDriverGetVersion: %d (%s), version=%d\n", (int)e, hipGetErrorName(e), v);

    void *p = NULL;
    e = hipMalloc(&p, 1024);
    printf("hipMalloc(1024): %d (%s)\n", (int)e, hipGetErrorName(e));

    int major = -1, minor = -1;
    hiprtcResult r = hiprtcVersion(&major, &minor);
    printf("hiprtcVersion: %d, %d.%d\n", (int)r, major, minor);

    const char *archs[] = {"gfx1100", "gfx1201", "gfx942"};
    int all_ok = 1;
    printf("hiprtc compile of a fp16/bf16/shuffle kernel:\n");
    for (unsigned i = 0; i < sizeof archs / sizeof archs[0]; ++i) all_ok &= compile_for(archs[i]);
    printf("hiprtc: %s\n", all_ok ? "all compiles produced code objects" : "SOME COMPILES FAILED");
    return all_ok ? 0 : 1;
}
