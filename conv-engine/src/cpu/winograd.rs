//! `Winograd` on the CPU: F(2x2, 3x3) for 3x3, stride-1, dilation-1, ungrouped forward
//! convolutions (Lavin & Gray's transforms, interpolation points 0, ±1, ∞).
//!
//! The output is cut into 2x2 tiles, anchored at the first output row of the chunk and
//! column 0. Each tile reads a 4x4 input patch (zero outside the image) and
//!
//! `Y = Aᵀ [ Σ_c (G g_kc Gᵀ) ⊙ (Bᵀ d_c B) ] A`,
//!
//! so the 4x4 transformed domain turns the convolution into 16 independent GEMMs
//! `M[e] (K × tiles) = U[e] (K × C) · V[e] (C × tiles)`, run by the implicit-GEMM
//! executor's 6×16 microkernel. The weights are transformed once per run straight into
//! 6-row panels; the input is transformed a block of tiles at a time straight into 16-tile
//! panels; the output transform adds the bias and narrows into NCHW. Arithmetic is f32
//! whatever the storage type.
//!
//! Why F(2x2, 3x3) and not F(4x4, 3x3) (2.25x fewer multiplies than direct instead of
//! 4x): measured in f32 with 256 input channels, F(4x4, 3x3) errs by about 1e-5 of the
//! largest output (points 0, ±1, ±2 and 0, ±1, ±1/2 alike; 3e-6 with 0, ±1, 2, -1/2),
//! which is the engine's f32 tolerance; F(2x2, 3x3) errs by about 6e-7.
//!
//! Workspace is exactly [`WinogradPlan::workspace_bytes`]: the transformed weights plus
//! one block's transformed input and GEMM output. Blocks shrink (down to 16 tiles) to fit
//! the dispatcher's limit.
//!
//! Results depend on where a pixel falls inside its tile, so chunking by rows (which moves
//! the tile anchor) can change the last bits of an output; they are deterministic for a
//! given plan.

use crate::dispatch::Chunk;
use crate::problem::ConvProblem;
use implicit_gemm::cpu::{Element, MR, MicroKernel, NR};
use implicit_gemm::{ConvGeometry, ConvKind};
use rayon::prelude::*;
use std::ops::Range;

/// Input tile edge.
const N: usize = 4;
/// Elements of the transformed domain (4x4).
const E: usize = N * N;
/// Output tile edge.
const TILE: usize = 2;
/// Reduction rows per microkernel call: a `KC × 16` input panel (16 KiB) stays in L1.
const KC: usize = 256;
/// Output channels per GEMM job (a multiple of [`MR`]): a `MC × KC` block of transformed
/// weights (144 KiB) stays in L2 while it sweeps the block's tile panels.
const MC: usize = 144;
/// Preferred bytes of one block's transformed input and output.
const TARGET_BLOCK_BYTES: usize = 2 << 20;
/// Preferred tile panels per block, whatever their size: enough to reuse each weight
/// block from L2 several times.
const MIN_PANELS: usize = 4;
/// At most this many tile panels per block.
const MAX_PANELS: usize = 32;

/// Whether Winograd F(2x2, 3x3) computes `problem`.
pub(super) fn supports(problem: &ConvProblem) -> bool {
    let g = problem.geometry();
    g.kind == ConvKind::Forward
        && g.kernel == [3, 3]
        && g.stride == [1, 1]
        && g.dilation == [1, 1]
        && g.groups == 1
        && g.in_channels > 0
        && g.out_channels > 0
}

/// One chunk of a Winograd convolution, sized for a workspace limit.
#[derive(Clone, Debug)]
pub(super) struct WinogradPlan {
    geom: ConvGeometry,
    rows: Range<usize>,
    kernel: MicroKernel,
    m_pad: usize,
    tiles_h: usize,
    tiles_w: usize,
    /// Tile panels (of [`NR`] tiles) per block.
    panels: usize,
}

impl WinogradPlan {
    /// The plan for `chunk` (whose geometry is `chunk_geom`: the problem restricted to the
    /// chunk's images), or `None` when the problem is not a Winograd one. Blocks are the
    /// preferred size where the limit allows, else as large as it allows (at least one
    /// panel: the workspace may then exceed `limit`).
    pub(super) fn fitted(
        problem: &ConvProblem,
        chunk: &Chunk,
        chunk_geom: &ConvGeometry,
        kernel: MicroKernel,
        limit: usize,
    ) -> Option<Self> {
        if !supports(problem) {
            return None;
        }
        let g = *chunk_geom;
        let [_, q] = g.out_hw();
        let m_pad = g.out_channels.div_ceil(MR) * MR;
        let tiles_h = chunk.rows.len().div_ceil(TILE);
        let tiles_w = q.div_ceil(TILE);
        let mut plan = WinogradPlan { geom: g, rows: chunk.rows.clone(), kernel, m_pad, tiles_h, tiles_w, panels: 1 };
        let total_panels = plan.tiles().div_ceil(NR).max(1);
        let panel_bytes = plan.panel_floats() * 4;
        let preferred = (TARGET_BLOCK_BYTES / panel_bytes).clamp(MIN_PANELS, MAX_PANELS);
        let fits = (limit / 4).saturating_sub(plan.weight_floats()) / plan.panel_floats();
        plan.panels = preferred.min(fits).min(total_panels).max(1);
        Some(plan)
    }

    fn tiles(&self) -> usize {
        self.geom.batch * self.tiles_h * self.tiles_w
    }

    fn weight_floats(&self) -> usize {
        E * self.m_pad * self.geom.in_channels
    }

    /// Transformed input and GEMM output of one panel of tiles.
    fn panel_floats(&self) -> usize {
        E * (self.geom.in_channels + self.m_pad) * NR
    }

    pub(super) fn workspace_floats(&self) -> usize {
        self.weight_floats() + self.panels * self.panel_floats()
    }

    pub(super) fn workspace_bytes(&self) -> usize {
        self.workspace_floats() * std::mem::size_of::<f32>()
    }

    /// Computes the chunk's output rows of every image into `output` (the chunk's images,
    /// all rows). `workspace` holds at least [`Self::workspace_floats`] floats.
    pub(super) fn run<T: Element>(
        &self,
        input: &[T],
        weight: &[T],
        bias: Option<&[T]>,
        output: &mut [T],
        workspace: &mut [f32],
    ) {
        let g = &self.geom;
        g.assert_buffer_lengths(input.len(), weight.len(), bias.map(<[T]>::len), output.len());
        assert!(workspace.len() >= self.workspace_floats(), "workspace too small");
        assert!(self.kernel.is_supported(), "microkernel not supported");
        let (u, rest) = workspace.split_at_mut(self.weight_floats());
        let (v, m) = rest[..self.panels * self.panel_floats()].split_at_mut(E * g.in_channels * NR * self.panels);
        self.transform_weights(weight, u);
        let u: &[f32] = u;
        let block = self.panels * NR;
        let out = SharedMut(output.as_mut_ptr());
        for t0 in (0..self.tiles()).step_by(block) {
            let tiles = t0..(t0 + block).min(self.tiles());
            let npanels = tiles.len().div_ceil(NR);
            self.transform_input(input, tiles.start, npanels, v);
            self.gemm(u, v, m, npanels);
            // SAFETY: `out` is the whole output of the chunk's images.
            unsafe { self.transform_output(m, bias, tiles, out) };
        }
    }

    /// `U[e]` in 6-row panels: `u[e][panel][c][i] = (G g Gᵀ)[e]` of output channel
    /// `6·panel + i` and input channel `c` (zero for padding rows).
    fn transform_weights<T: Element>(&self, weight: &[T], u: &mut [f32]) {
        let c_n = self.geom.in_channels;
        let k_n = self.geom.out_channels;
        let panel_len = c_n * MR;
        let e_len = self.m_pad * c_n;
        let u_ptr = SharedMut(u.as_mut_ptr());
        (0..self.m_pad / MR).into_par_iter().for_each(|panel| {
            for i in 0..MR {
                let k = panel * MR + i;
                for c in 0..c_n {
                    let t = if k < k_n {
                        let w = &weight[(k * c_n + c) * 9..][..9];
                        let gk: [f32; 9] = std::array::from_fn(|j| w[j].to_f32());
                        weight_tile(&gk)
                    } else {
                        [0.0; E]
                    };
                    for (e, val) in t.into_iter().enumerate() {
                        // SAFETY: in bounds (e < 16, panel < m_pad/6, c < C, i < 6); each
                        // panel is written by one job.
                        unsafe { *u_ptr.ptr().add(e * e_len + panel * panel_len + c * MR + i) = val };
                    }
                }
            }
        });
    }

    /// `V[e]` of tiles `t0..t0 + 16·npanels` in 16-tile panels: `v[e][panel][c][j]`
    /// (zero for tiles past the end).
    fn transform_input<T: Element>(&self, input: &[T], t0: usize, npanels: usize, v: &mut [f32]) {
        let g = &self.geom;
        let c_n = g.in_channels;
        let [h, w] = g.in_size;
        let e_len = self.panels * c_n * NR;
        let ntiles = self.tiles();
        const CB: usize = 8;
        let c_blocks = c_n.div_ceil(CB);
        let v_ptr = SharedMut(v.as_mut_ptr());
        (0..npanels * c_blocks).into_par_iter().for_each(|job| {
            let (panel, cb) = (job / c_blocks, job % c_blocks);
            // Input origin of each lane's tile (None past the last tile).
            let origin: [Option<(usize, isize, isize)>; NR] = std::array::from_fn(|j| {
                let t = t0 + panel * NR + j;
                (t < ntiles).then(|| {
                    let (oy, ox, n) = self.tile_origin(t);
                    (n, oy as isize - g.pad_begin[0] as isize, ox as isize - g.pad_begin[1] as isize)
                })
            });
            // All 16 tiles side by side in one tile row, horizontally inside the image:
            // each input row they read is one contiguous segment.
            let span = 2 * (NR - 1) + N;
            let row_run = match (origin[0], origin[NR - 1]) {
                (Some((n0, iy0, ix0)), Some((n1, iy1, ix1)))
                    if n0 == n1
                        && iy0 == iy1
                        && ix1 == ix0 + (TILE * (NR - 1)) as isize
                        && ix0 >= 0
                        && ix0 as usize + span <= w =>
                {
                    Some((n0, iy0, ix0 as usize))
                }
                _ => None,
            };
            for c in cb * CB..((cb + 1) * CB).min(c_n) {
                let mut d = [[[0f32; NR]; N]; N];
                if let Some((n, iy0, ix0)) = row_run {
                    let plane = &input[(n * c_n + c) * h * w..][..h * w];
                    let mut seg = [0f32; 2 * (NR - 1) + N];
                    for (r, drow) in d.iter_mut().enumerate() {
                        let iy = iy0 + r as isize;
                        if iy < 0 || iy >= h as isize {
                            continue;
                        }
                        T::widen(&plane[iy as usize * w + ix0..][..span], &mut seg);
                        for (s, cell) in drow.iter_mut().enumerate() {
                            for (j, x) in cell.iter_mut().enumerate() {
                                *x = seg[TILE * j + s];
                            }
                        }
                    }
                }
                for (j, o) in origin.iter().enumerate().filter(|_| row_run.is_none()) {
                    let Some((n, iy0, ix0)) = *o else { continue };
                    let plane = &input[(n * c_n + c) * h * w..][..h * w];
                    for (r, drow) in d.iter_mut().enumerate() {
                        let iy = iy0 + r as isize;
                        if iy < 0 || iy >= h as isize {
                            continue;
                        }
                        let row = &plane[iy as usize * w..][..w];
                        if ix0 >= 0 && ix0 + N as isize <= w as isize {
                            for (s, x) in row[ix0 as usize..ix0 as usize + N].iter().enumerate() {
                                drow[s][j] = x.to_f32();
                            }
                        } else {
                            for (s, cell) in drow.iter_mut().enumerate() {
                                let ix = ix0 + s as isize;
                                if ix >= 0 && ix < w as isize {
                                    cell[j] = row[ix as usize].to_f32();
                                }
                            }
                        }
                    }
                }
                let t = input_tile_lanes(&d);
                for (e, lanes) in t.iter().enumerate() {
                    // SAFETY: in bounds (e < 16, panel < panels, c < C); each (panel, c)
                    // is written by one job.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(v_ptr.ptr().add(e * e_len + (panel * c_n + c) * NR), NR)
                    };
                    dst.copy_from_slice(lanes);
                }
            }
        });
    }

    /// `M[e] = U[e] · V[e]` for the block's panels: `m[e][k][tile]`, row stride the block.
    fn gemm(&self, u: &[f32], v: &[f32], m: &mut [f32], npanels: usize) {
        let c_n = self.geom.in_channels;
        let ldc = self.panels * NR;
        let (u_e, v_e, m_e) = (self.m_pad * c_n, self.panels * c_n * NR, self.m_pad * ldc);
        let m_panels = self.m_pad / MR;
        let mc_panels = MC / MR;
        let m_blocks = m_panels.div_ceil(mc_panels);
        let m_ptr = SharedMut(m.as_mut_ptr());
        let kernel = self.kernel;
        (0..E * m_blocks).into_par_iter().for_each(|job| {
            let (e, mb) = (job / m_blocks, job % m_blocks);
            let (u, v) = (&u[e * u_e..][..u_e], &v[e * v_e..][..v_e]);
            let panels_m = mb * mc_panels..((mb + 1) * mc_panels).min(m_panels);
            let mut kb = 0;
            while kb < c_n {
                let kcb = KC.min(c_n - kb);
                for jp in 0..npanels {
                    let b = v[jp * c_n * NR + kb * NR..].as_ptr();
                    for ir in panels_m.clone() {
                        let a = u[ir * c_n * MR + kb * MR..].as_ptr();
                        // SAFETY: the panels hold kcb·6 and kcb·16 floats from these
                        // offsets; the 6×16 C tile (rows 6·ir.., columns 16·jp..) lies in
                        // M[e] (m_pad rows of ldc ≥ 16·npanels columns) and belongs to this
                        // job alone; the kernel was checked in `run`.
                        unsafe {
                            let c = m_ptr.ptr().add(e * m_e + ir * MR * ldc + jp * NR);
                            kernel.run(kcb, a, b, c, ldc, kb > 0);
                        }
                    }
                }
                kb += kcb;
            }
        });
    }

    /// Inverse transform of the block's tiles, plus bias, narrowed into the output.
    ///
    /// # Safety
    /// `out` addresses the whole output of the chunk's images, and nothing else writes it
    /// meanwhile.
    unsafe fn transform_output<T: Element>(
        &self,
        m: &[f32],
        bias: Option<&[T]>,
        tiles: Range<usize>,
        out: SharedMut<T>,
    ) {
        let g = &self.geom;
        let k_n = g.out_channels;
        let [p, q] = g.out_hw();
        let ldc = self.panels * NR;
        let m_e = self.m_pad * ldc;
        let npanels = tiles.len().div_ceil(NR);
        (0..npanels * k_n).into_par_iter().for_each(|job| {
            let (panel, k) = (job / k_n, job % k_n);
            let mut t = [[0f32; NR]; E];
            for (e, lanes) in t.iter_mut().enumerate() {
                lanes.copy_from_slice(&m[e * m_e + k * ldc + panel * NR..][..NR]);
            }
            let y = output_tile_lanes(&t);
            let b = bias.map_or(0.0, |b| b[k].to_f32());
            // Fast path: all 16 tiles side by side in one tile row, wholly inside the
            // chunk: each output row is one contiguous store.
            let first = tiles.start + panel * NR;
            if first + NR <= tiles.end {
                let ((oy, ox, n), (oy1, ox1, n1)) = (self.tile_origin(first), self.tile_origin(first + NR - 1));
                if n == n1
                    && oy == oy1
                    && ox1 == ox + TILE * (NR - 1)
                    && ox + TILE * NR <= q
                    && oy + TILE <= self.rows.end
                {
                    let plane = (n * k_n + k) * p * q;
                    let mut buf = [0f32; TILE * NR];
                    for (i, yrow) in y.iter().enumerate() {
                        for (s, cell) in yrow.iter().enumerate() {
                            for (j, v) in cell.iter().enumerate() {
                                buf[TILE * j + s] = v + b;
                            }
                        }
                        // SAFETY: row oy + i, columns ox..ox + 32 of plane (n, k) are inside
                        // the chunk's output and belong to this (panel, k) job alone.
                        let dst = unsafe {
                            std::slice::from_raw_parts_mut(out.ptr().add(plane + (oy + i) * q + ox), TILE * NR)
                        };
                        T::narrow(&buf, dst);
                    }
                    return;
                }
            }
            for j in 0..NR {
                let tile = tiles.start + panel * NR + j;
                if tile >= tiles.end {
                    break;
                }
                let (oy, ox, n) = self.tile_origin(tile);
                let plane = (n * k_n + k) * p * q;
                for (i, yrow) in y.iter().enumerate() {
                    if oy + i >= self.rows.end {
                        break;
                    }
                    for (s, cell) in yrow.iter().enumerate().take(q - ox) {
                        // SAFETY: (oy + i, ox + s) is inside the chunk's rows of plane
                        // (n, k); each element belongs to one (tile, k) job.
                        unsafe { *out.ptr().add(plane + (oy + i) * q + ox + s) = T::from_f32(cell[j] + b) };
                    }
                }
            }
        });
    }

    /// Output origin (row, column) and image of tile `t`.
    fn tile_origin(&self, t: usize) -> (usize, usize, usize) {
        let per_image = self.tiles_h * self.tiles_w;
        let (n, rem) = (t / per_image, t % per_image);
        (self.rows.start + (rem / self.tiles_w) * TILE, (rem % self.tiles_w) * TILE, n)
    }
}

/// Raw pointer shared by jobs that write disjoint elements.
#[derive(Clone, Copy)]
struct SharedMut<T>(*mut T);
unsafe impl<T: Send> Send for SharedMut<T> {}
unsafe impl<T: Send> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    /// By value, so closures capture the wrapper (Send + Sync), not the raw pointer.
    fn ptr(self) -> *mut T {
        self.0
    }
}

/// Arithmetic the 1-D transforms are written in (f32 to run, f64 to test).
trait Num: Copy + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self> {
    fn c(v: f64) -> Self;
}

impl Num for f32 {
    #[inline(always)]
    fn c(v: f64) -> Self {
        v as f32
    }
}

impl Num for f64 {
    #[inline(always)]
    fn c(v: f64) -> Self {
        v
    }
}

/// `Bᵀ d` for one 4-vector.
#[inline(always)]
fn bt<F: Num>(d: [F; N]) -> [F; N] {
    [d[0] - d[2], d[1] + d[2], d[2] - d[1], d[1] - d[3]]
}

/// `G g` for one 3-vector.
#[inline(always)]
fn gk<F: Num>(g: [F; 3]) -> [F; N] {
    let half = F::c(0.5);
    [g[0], half * (g[0] + g[1] + g[2]), half * (g[0] - g[1] + g[2]), g[2]]
}

/// `Aᵀ m` for one 4-vector.
#[inline(always)]
fn at<F: Num>(m: [F; N]) -> [F; TILE] {
    [m[0] + m[1] + m[2], m[1] - m[2] - m[3]]
}

/// `G g Gᵀ` of a row-major 3x3 kernel, row-major 4x4.
fn weight_tile<F: Num>(g: &[F; 9]) -> [F; E] {
    let cols: [[F; N]; 3] = std::array::from_fn(|s| gk([g[s], g[3 + s], g[6 + s]]));
    let mut out = [F::c(0.0); E];
    for r in 0..N {
        out[r * N..r * N + N].copy_from_slice(&gk([cols[0][r], cols[1][r], cols[2][r]]));
    }
    out
}

/// `Bᵀ d B` of a row-major 4x4 patch.
#[cfg(test)]
fn input_tile<F: Num>(d: &[F; E]) -> [F; E] {
    let cols: [[F; N]; N] = std::array::from_fn(|s| bt(std::array::from_fn(|r| d[r * N + s])));
    let mut out = [F::c(0.0); E];
    for r in 0..N {
        out[r * N..r * N + N].copy_from_slice(&bt(std::array::from_fn(|s| cols[s][r])));
    }
    out
}

/// `Aᵀ m A` of a row-major 4x4 product, row-major 2x2.
#[cfg(test)]
fn output_tile<F: Num>(m: &[F; E]) -> [F; TILE * TILE] {
    let cols: [[F; TILE]; N] = std::array::from_fn(|s| at(std::array::from_fn(|r| m[r * N + s])));
    let mut out = [F::c(0.0); TILE * TILE];
    for r in 0..TILE {
        out[r * TILE..r * TILE + TILE].copy_from_slice(&at(std::array::from_fn(|s| cols[s][r])));
    }
    out
}

/// [`input_tile`] over 16 lanes: `d[row][col][lane]` to `out[e][lane]`.
#[inline(always)]
fn input_tile_lanes(d: &[[[f32; NR]; N]; N]) -> [[f32; NR]; E] {
    let mut cols = [[[0f32; NR]; N]; N]; // cols[r][s]: Bᵀ applied down column s
    for s in 0..N {
        for j in 0..NR {
            let v = bt(std::array::from_fn(|r| d[r][s][j]));
            for r in 0..N {
                cols[r][s][j] = v[r];
            }
        }
    }
    let mut out = [[0f32; NR]; E];
    for r in 0..N {
        for j in 0..NR {
            let v = bt(std::array::from_fn(|s| cols[r][s][j]));
            for s in 0..N {
                out[r * N + s][j] = v[s];
            }
        }
    }
    out
}

/// [`output_tile`] over 16 lanes: `m[e][lane]` to `y[row][col][lane]`.
#[inline(always)]
fn output_tile_lanes(m: &[[f32; NR]; E]) -> [[[f32; NR]; TILE]; TILE] {
    let mut cols = [[[0f32; NR]; N]; TILE]; // cols[r][s]: Aᵀ applied down column s
    for s in 0..N {
        for j in 0..NR {
            let v = at(std::array::from_fn(|r| m[r * N + s][j]));
            for r in 0..TILE {
                cols[r][s][j] = v[r];
            }
        }
    }
    let mut y = [[[0f32; NR]; TILE]; TILE];
    for r in 0..TILE {
        for j in 0..NR {
            let v = at(std::array::from_fn(|s| cols[r][s][j]));
            for s in 0..TILE {
                y[r][s][j] = v[s];
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random value in [-1, 1).
    fn val(i: usize) -> f64 {
        let x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ 0x5851_f42d_4c95_7f2d;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    /// One tile in f64: Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A is the 3x3 correlation of the patch.
    #[test]
    fn one_tile_in_f64_is_the_correlation() {
        for seed in 0..20 {
            let d: [f64; E] = std::array::from_fn(|i| val(seed * 100 + i));
            let g: [f64; 9] = std::array::from_fn(|i| val(seed * 100 + 50 + i));
            let (u, v) = (weight_tile(&g), input_tile(&d));
            let prod: [f64; E] = std::array::from_fn(|e| u[e] * v[e]);
            let y = output_tile(&prod);
            for oy in 0..TILE {
                for ox in 0..TILE {
                    let mut want = 0.0;
                    for r in 0..3 {
                        for s in 0..3 {
                            want += d[(oy + r) * N + ox + s] * g[r * 3 + s];
                        }
                    }
                    let got = y[oy * TILE + ox];
                    assert!((got - want).abs() < 1e-12, "seed {seed} ({oy},{ox}): {got} vs {want}");
                }
            }
        }
    }

    /// The 16-lane transforms the executor runs equal the one-tile f32 transforms.
    #[test]
    fn lane_transforms_match_one_tile() {
        let mut d = [[[0f32; NR]; N]; N];
        let mut m = [[0f32; NR]; E];
        for r in 0..N {
            for s in 0..N {
                for j in 0..NR {
                    d[r][s][j] = val(j * 1000 + r * N + s) as f32;
                    m[r * N + s][j] = val(j * 1000 + 500 + r * N + s) as f32;
                }
            }
        }
        let (v, y) = (input_tile_lanes(&d), output_tile_lanes(&m));
        for j in 0..NR {
            let dj: [f32; E] = std::array::from_fn(|i| d[i / N][i % N][j]);
            let mj: [f32; E] = std::array::from_fn(|e| m[e][j]);
            let (vj, yj) = (input_tile(&dj), output_tile(&mj));
            for e in 0..E {
                assert_eq!(v[e][j], vj[e], "input transform lane {j} element {e}");
            }
            for i in 0..TILE * TILE {
                assert_eq!(y[i / TILE][i % TILE][j], yj[i], "output transform lane {j} element {i}");
            }
        }
    }
}
