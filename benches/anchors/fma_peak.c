/*
 * fma_peak.c: this machine's f32 FMA peak, roughly (AVX2 + FMA, 256-bit).
 *
 * Each thread runs NACC independent accumulator chains of _mm256_fmadd_ps, enough to
 * cover the FMA latency times the number of FMA pipes (Zen3: 4 cycles x 2 pipes = 8
 * chains minimum; 12 are used). Every FMA is 8 lanes x 2 flops = 16 flop.
 * Threads are pinned one per CPU (pthread_setaffinity_np) and released together.
 *
 * Build: gcc -O3 -mavx2 -mfma -pthread -o fma_peak benches/anchors/fma_peak.c
 * Run:   ./fma_peak [max_threads [seconds_per_run]]     (defaults: all CPUs, 1.0 s)
 * Prints one line per thread count 1..max_threads (best of 5 runs) and a JSON line each.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NACC 12

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs iters x NACC FMAs; returns a value that depends on every accumulator.
 * Twelve named accumulators so that they stay in registers (an array plus an asm
 * barrier made gcc keep them on the stack). Without -ffast-math the compiler may not
 * reassociate or collapse the chains; the loop count is a run-time value. */
static __attribute__((noipa)) float fma_kernel(long iters, float seed) {
    __m256 a0 = _mm256_set1_ps(seed), a1 = _mm256_set1_ps(seed + 0.001f), a2 = _mm256_set1_ps(seed + 0.002f),
           a3 = _mm256_set1_ps(seed + 0.003f), a4 = _mm256_set1_ps(seed + 0.004f), a5 = _mm256_set1_ps(seed + 0.005f),
           a6 = _mm256_set1_ps(seed + 0.006f), a7 = _mm256_set1_ps(seed + 0.007f), a8 = _mm256_set1_ps(seed + 0.008f),
           a9 = _mm256_set1_ps(seed + 0.009f), a10 = _mm256_set1_ps(seed + 0.010f), a11 = _mm256_set1_ps(seed + 0.011f);
    const __m256 m = _mm256_set1_ps(0.999999f);
    const __m256 b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; it++) {
        a0 = _mm256_fmadd_ps(a0, m, b);
        a1 = _mm256_fmadd_ps(a1, m, b);
        a2 = _mm256_fmadd_ps(a2, m, b);
        a3 = _mm256_fmadd_ps(a3, m, b);
        a4 = _mm256_fmadd_ps(a4, m, b);
        a5 = _mm256_fmadd_ps(a5, m, b);
        a6 = _mm256_fmadd_ps(a6, m, b);
        a7 = _mm256_fmadd_ps(a7, m, b);
        a8 = _mm256_fmadd_ps(a8, m, b);
        a9 = _mm256_fmadd_ps(a9, m, b);
        a10 = _mm256_fmadd_ps(a10, m, b);
        a11 = _mm256_fmadd_ps(a11, m, b);
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                             _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
    s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(a8, a9), _mm256_add_ps(a10, a11)));
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

typedef struct {
    int cpu;
    long iters;
    pthread_barrier_t *start;
    double t0, t1;
    float sink;
} job_t;

static void *worker(void *p) {
    job_t *j = (job_t *)p;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(j->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set); /* best effort */
    j->sink = fma_kernel(j->iters / 20 + 1, 1.0f);            /* warm up clocks */
    pthread_barrier_wait(j->start);
    j->t0 = now();
    j->sink += fma_kernel(j->iters, 1.0f + j->cpu);
    j->t1 = now();
    return NULL;
}

/* GFLOP/s of nthreads running together: total flop / (last end - first start). */
static double run(int nthreads, long iters, float *sink) {
    pthread_t th[256];
    job_t jobs[256];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, nthreads);
    for (int t = 0; t < nthreads; t++) {
        jobs[t] = (job_t){.cpu = t, .iters = iters, .start = &bar};
        pthread_create(&th[t], NULL, worker, &jobs[t]);
    }
    double t0 = 1e300, t1 = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
        if (jobs[t].t0 < t0) t0 = jobs[t].t0;
        if (jobs[t].t1 > t1) t1 = jobs[t].t1;
        *sink += jobs[t].sink;
    }
    pthread_barrier_destroy(&bar);
    double flop = (double)nthreads * iters * NACC * 16.0;
    return flop / (t1 - t0) / 1e9;
}

int main(int argc, char **argv) {
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int maxt = argc > 1 ? atoi(argv[1]) : (int)ncpu;
    double secs = argc > 2 ? atof(argv[2]) : 1.0;
    if (maxt < 1 || maxt > 256 || secs <= 0) {
        fprintf(stderr, "usage: %s [max_threads (1..256)] [seconds_per_run]\n", argv[0]);
        return 2;
    }
    float sink = 0;
    /* calibrate iterations for ~secs on one thread */
    long iters = 1000000;
    double t = now();
    sink += fma_kernel(iters, 1.0f); /* noipa + used result: the call cannot be dropped */
    t = now() - t;
    iters = (long)(iters * secs / t);
    printf("# f32 FMA peak: AVX2 256-bit _mm256_fmadd_ps, %d independent chains/thread, "
           "%ld iterations/thread, best of 5, %ld CPUs online\n", NACC, iters, ncpu);
    for (int n = 1; n <= maxt; n++) {
        double best = 0;
        for (int rep = 0; rep < 5; rep++) {
            double g = run(n, iters, &sink);
            if (g > best) best = g;
        }
        printf("threads %d: %.1f GFLOP/s (%.1f per thread)\n", n, best, best / n);
        printf("{\"anchor\": \"fma_peak\", \"threads\": %d, \"gflops\": %.2f, \"chains\": %d, \"isa\": \"avx2+fma\"}\n",
               n, best, NACC);
    }
    fprintf(stderr, "# sink %g\n", (double)sink);
    return 0;
}
