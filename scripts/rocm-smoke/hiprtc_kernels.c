/*
 * hiprtc_kernels: compile kernel sources through hiprtc, the way the ROCm backend does at
 * run time, and check that every promised entry point is in the code object.
 *
 *   hiprtc_kernels --header kernels/src/prelude.h --header kernels/src/mma.h \
 *                  --arch gfx1100 --arch gfx1201 kernels/src/NAME.hip...
 *
 * Each source is given to hiprtc as a string, with every --header as an in-memory header
 * named after its file (the sources `#include "prelude.h"`, igemm_mma.hip also "mma.h"; one
 * a source does not include is ignored); nothing is read from an include path.
 * The entry points a source promises are its instantiation lines, `RV_EXPORT_<KIND>(symbol, ...)`
 * at the start of a line; each must appear in the code object's symbol table (as `symbol.kd`,
 * the kernel descriptor). Exit status 0 only when every compile succeeded and every symbol
 * was found.
 */
#include <hip/hiprtc.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        perror(path);
        fclose(f);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Does the byte string `needle` occur in `hay`? (memmem, without _GNU_SOURCE) */
static int contains(const char *hay, size_t hay_len, const char *needle, size_t n) {
    if (n == 0 || n > hay_len) return 0;
    for (size_t i = 0; i + n <= hay_len; ++i)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, n) == 0) return 1;
    return 0;
}

/* Check every instantiation-line symbol of `src` against the code object. Returns the
 * number of missing symbols; *count receives the number of symbols checked. */
static int check_symbols(const char *src, const char *code, size_t code_size, const char *what, int *count) {
    int missing = 0;
    *count = 0;
    const char *line = src;
    while (line && *line) {
        if (strncmp(line, "RV_EXPORT_", 10) == 0) {
            const char *p = line + 10;
            while (isupper((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_') ++p;
            if (*p == '(') {
                ++p;
                while (*p == ' ') ++p;
                const char *start = p;
                while (islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_') ++p;
                if (p > start && islower((unsigned char)*start) && (*p == ',' || *p == ' ')) {
                    /* "<symbol>.kd\0": the kernel descriptor symbol, exact name. */
                    char sym[256];
                    int len = snprintf(sym, sizeof sym, "%.*s.kd", (int)(p - start), start);
                    ++*count;
                    if (len <= 0 || len >= (int)sizeof sym || !contains(code, code_size, sym, (size_t)len + 1)) {
                        printf("    MISSING in %s: %.*s\n", what, (int)(p - start), start);
                        ++missing;
                    }
                }
            }
        }
        line = strchr(line, '\n');
        if (line) ++line;
    }
    return missing;
}

int main(int argc, char **argv) {
    const char *header_paths[8];
    int nheaders = 0;
    const char *archs[16];
    int narchs = 0;
    const char *files[64];
    int nfiles = 0;
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--header") == 0 && i + 1 < argc && nheaders < 8) header_paths[nheaders++] = argv[++i];
        else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc && narchs < 16) archs[narchs++] = argv[++i];
        else if (nfiles < 64) files[nfiles++] = argv[i];
    }
    if (nheaders == 0 || narchs == 0 || nfiles == 0) {
        fprintf(stderr, "usage: %s --header HEADER.h [--header ...] --arch ARCH [--arch ARCH...] SOURCE...\n", argv[0]);
        return 2;
    }
    const char *headers[8];
    const char *header_names[8];
    for (int h = 0; h < nheaders; ++h) {
        headers[h] = read_file(header_paths[h]);
        if (!headers[h]) return 2;
        header_names[h] = strrchr(header_paths[h], '/') ? strrchr(header_paths[h], '/') + 1 : header_paths[h];
    }

    int major = 0, minor = 0;
    hiprtcVersion(&major, &minor);
    printf("hiprtc %d.%d: %d sources x %d archs\n", major, minor, nfiles, narchs);

    int failures = 0;
    for (int f = 0; f < nfiles; ++f) {
        char *src = read_file(files[f]);
        if (!src) {
            ++failures;
            continue;
        }
        const char *name = strrchr(files[f], '/') ? strrchr(files[f], '/') + 1 : files[f];
        for (int a = 0; a < narchs; ++a) {
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            hiprtcProgram prog;
            hiprtcResult r = hiprtcCreateProgram(&prog, src, name, nheaders, headers, header_names);
            if (r != HIPRTC_SUCCESS) {
                printf("  %-18s %-8s hiprtcCreateProgram failed: %s\n", name, archs[a], hiprtcGetErrorString(r));
                ++failures;
                continue;
            }
            char opt[64];
            snprintf(opt, sizeof opt, "--offload-arch=%s", archs[a]);
            const char *opts[] = {opt, "-O3"};
            r = hiprtcCompileProgram(prog, 2, opts);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
            size_t log_size = 0;
            hiprtcGetProgramLogSize(prog, &log_size);
            char *log = NULL;
            if (log_size > 1) {
                log = malloc(log_size);
                hiprtcGetProgramLog(prog, log);
            }
            if (r != HIPRTC_SUCCESS) {
                printf("  %-18s %-8s COMPILE FAILED (%s) in %.1f s:\n%s\n", name, archs[a], hiprtcGetErrorString(r),
                       secs, log ? log : "(no log)");
                ++failures;
            } else {
                size_t code_size = 0;
                hiprtcGetCodeSize(prog, &code_size);
                char *code = malloc(code_size ? code_size : 1);
                hiprtcGetCode(prog, code);
                int elf = code_size > 4 && memcmp(code, "\x7f" "ELF", 4) == 0;
                int nsyms = 0;
                char what[96];
                snprintf(what, sizeof what, "%s/%s", name, archs[a]);
                int missing = check_symbols(src, code, code_size, what, &nsyms);
                printf("  %-18s %-8s ok: %7zu bytes, ELF %s, %3d/%3d entry points, %.1f s%s\n", name, archs[a],
                       code_size, elf ? "yes" : "NO", nsyms - missing, nsyms, secs,
                       log ? " (compiler printed a log, below)" : "");
                if (log) printf("%s\n", log);
                if (!elf || code_size == 0 || missing || nsyms == 0) ++failures;
                free(code);
            }
            free(log);
            hiprtcDestroyProgram(&prog);
        }
        free(src);
    }
    printf("hiprtc_kernels: %s (%d failures)\n", failures ? "FAILED" : "all sources compiled, all entry points present",
           failures);
    return failures ? 1 : 0;
}
