/*
 * test_hip_on_cuda, 4. rocBLAS strided-batched GEMMs (f32, f16, bf16; transposes, padded
 * leading dimensions and strides, C == D and C != D) and 5. MIOpen Immediate-mode
 * convolutions (forward and transposed, every listed solution run), each against a CPU
 * reference in double, with their error paths. See test_hip_on_cuda.c.
 */
#include "test_hip_on_cuda.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

void test_rocblas(void) {
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

void test_miopen(void) {
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
