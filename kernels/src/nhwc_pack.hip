// The NHWC layout of the implicit-GEMM kernels of igemm_mma.hip: packing a band of NCHW
// input rows into NHWC with padded channel slots, and one phase of a filter into
// [k][tap row][tap column][channel slot]. Bit copies (the 16-bit entries serve f16 and bf16,
// the 32-bit ones f32), so each pack kernel exists once per element width. A module of its
// own: it needs the prelude only, not the MMA layer, and it is what a model whose
// activations stay NHWC runs at its input alone.
#include "prelude.h"

// Input packing: a band of input rows, NCHW -> NHWC with cgp channel slots per group
// (zeros in the padding slots), through a 64x64 LDS tile so that both the reads (along
// pixels) and the writes (along channel slots) are coalesced, two elements per thread
// access (4 or 8 bytes). With one 2-byte element per access (a 32x32 tile) the kernel ran
// at a quarter of the copy rate on the H200: too few bytes in flight per thread.
//   g: the full input (n, c, h, w, groups); rows [row0, row0 + rows) of it are packed.
//   out: [n][rows][w][groups * cgp].
//   Launch: blockDim = (32, 8, 1); grid = (ceil(rows*w / 64), ceil(groups*cgp / 64), n).
template <typename T>
RV_DEVICE void rv_ig_pack_input(const rv_conv2d& g, int row0, int rows, int cgp, const T* __restrict__ in, T* __restrict__ out) {
    typedef rv_vec<T, 2> P;
    constexpr int TILE = 64, STRIDE = TILE + 1;  // the odd stride spreads a column over the banks
    __shared__ T tile[TILE * STRIDE];
    const int cg = g.c / g.groups, ct = g.groups * cgp;
    const int npix = rows * g.w;
    const int pix0 = (int)blockIdx.x * TILE, slot0 = (int)blockIdx.y * TILE;
    const int img = (int)blockIdx.z;
    const int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    const rv_i64 plane = (rv_i64)g.h * g.w;
    // Reads: thread tx takes pixels pix0 + 2tx and + 1 of slot rows ty, ty + 8, ...
    const int pix = pix0 + 2 * tx;
    for (int i = ty; i < TILE; i += 8) {
        const int slot = slot0 + i;
        T v0 = 0, v1 = 0;
        if (slot < ct && pix < npix) {
            const int grp = slot / cgp, ci = slot - grp * cgp;
            if (ci < cg) {
                const T* src = in + ((rv_i64)img * g.c + (rv_i64)grp * cg + ci) * plane + (rv_i64)row0 * g.w + pix;
                if (pix + 1 < npix && rv_aligned(src, (int)sizeof(P))) {
                    const P v = *(const P*)src;
                    v0 = v.e[0], v1 = v.e[1];
                } else {
                    v0 = src[0];
                    if (pix + 1 < npix) v1 = src[1];
                }
            }
        }
        tile[i * STRIDE + 2 * tx] = v0;
        tile[i * STRIDE + 2 * tx + 1] = v1;
    }
    __syncthreads();
    // Writes: thread tx takes slots slot0 + 2tx and + 1 of pixels ty, ty + 8, ...
    const int slot = slot0 + 2 * tx;
    if (slot >= ct) return;
    for (int i = ty; i < TILE; i += 8) {
        const int p = pix0 + i;
        if (p >= npix) break;
        T* dst = out + ((rv_i64)img * npix + p) * ct + slot;
        const T v0 = tile[2 * tx * STRIDE + i], v1 = tile[(2 * tx + 1) * STRIDE + i];
        if (slot + 1 < ct && rv_aligned(dst, (int)sizeof(P))) {
            P v;
            v.e[0] = v0, v.e[1] = v1;
            *(P*)dst = v;
        } else {
            dst[0] = v0;
            if (slot + 1 < ct) dst[1] = v1;
        }
    }
}
#define RV_EXPORT_IGEMM_PACK_INPUT(NAME, T)                                                                     \
    RV_KERNEL void RV_BOUNDS NAME(rv_conv2d g, rv_i32 row0, rv_i32 rows, rv_i32 cgp, const T* in, T* out) {     \
        rv_ig_pack_input<T>(g, row0, rows, cgp, in, out);                                                       \
    }

// Weight packing for one phase: out[ch][tr][ts][ci] (ch over all g.k output channels, ci
// over cgp slots, zero for ci >= c/groups) from the filter taps r = r0 + tr*rstep,
// s = s0 + ts*sstep. Forward weights are [k][c/groups][r][s]; transposed ones
// [c][k/groups][r][s]. Grid-stride over g.k * nr * ns * cgp elements.
template <typename T>
RV_DEVICE void rv_ig_pack_weight(const rv_conv2d& g, int cgp, int transposed, int r0, int rstep, int nr, int s0, int sstep,
                                 int ns, const T* __restrict__ w, T* __restrict__ out) {
    const int cg = g.c / g.groups, kg = g.k / g.groups;
    const rv_i64 total = (rv_i64)g.k * nr * ns * cgp;
    for (rv_i64 i = rv_global_id(); i < total; i += rv_grid_stride()) {
        rv_i64 t = i / cgp;
        const int ci = (int)(i - t * cgp);
        const int ts = (int)(t % ns);
        t /= ns;
        const int tr = (int)(t % nr);
        const int ch = (int)(t / nr);
        T v = 0;
        if (ci < cg) {
            const int grp = ch / kg, j = ch - grp * kg;
            const int r = r0 + tr * rstep, s = s0 + ts * sstep;
            const rv_i64 tap = (rv_i64)r * g.s + s;
            if (transposed)
                v = w[(((rv_i64)grp * cg + ci) * kg + j) * g.r * g.s + tap];
            else
                v = w[((rv_i64)ch * cg + ci) * g.r * g.s + tap];
        }
        out[i] = v;
    }
}
#define RV_EXPORT_IGEMM_PACK_WEIGHT(NAME, T)                                                                          \
    RV_KERNEL void RV_BOUNDS NAME(rv_conv2d g, rv_i32 cgp, rv_i32 transposed, rv_i32 r0, rv_i32 rstep, rv_i32 nr,      \
                                  rv_i32 s0, rv_i32 sstep, rv_i32 ns, const T* w, T* out) {                           \
        rv_ig_pack_weight<T>(g, cgp, transposed, r0, rstep, nr, s0, sstep, ns, w, out);                               \
    }

// ---------------------------------------------------------------------------------------
// Entry points
RV_EXPORT_IGEMM_PACK_INPUT(igemm_pack_input_b16, rv_u16)
RV_EXPORT_IGEMM_PACK_INPUT(igemm_pack_input_b32, rv_u32)
RV_EXPORT_IGEMM_PACK_WEIGHT(igemm_pack_weight_b16, rv_u16)
RV_EXPORT_IGEMM_PACK_WEIGHT(igemm_pack_weight_b32, rv_u32)
