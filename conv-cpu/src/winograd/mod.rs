//! `Winograd` on the CPU: F(2x2, 3x3) and F(4x4, 3x3) for 3x3, stride-1, dilation-1,
//! ungrouped forward convolutions (transforms and their interpolation points in
//! [`transforms`]).
//!
//! The output is cut into `M`x`M` tiles (M = 2 or 4) on a grid anchored at output pixel
//! (0, 0) of each image, whatever the chunk. Each tile reads an `N`x`N` input patch
//! (N = M + 2, zero outside the image) and
//!
//! `Y = Aᵀ [ Σ_c (G g_kc Gᵀ) ⊙ (Bᵀ d_c B) ] A`,
//!
//! so the transformed domain turns the convolution into N² independent GEMMs
//! `M[e] (K × tiles) = U[e] (K × C) · V[e] (C × tiles)`, run by the implicit-GEMM
//! executor's 6×16 microkernel. The weights are transformed once per run (in f64, rounded
//! once) straight into 6-row panels; the input is transformed a block of tiles at a time
//! straight into 16-tile panels; the output transform adds the bias, applies the epilogue
//! (activation, residual, scale) and narrows into NCHW: one write of each output.
//! Arithmetic is f32 whatever the storage type.
//!
//! Which output pixel a value comes from decides its rounding: a pixel's value depends on
//! the input values its transform tile reads and on its position in that tile. The grid is
//! fixed in output coordinates ([`WINOGRAD_GRID`]), so row chunks (which recompute a tile
//! cut by the chunk boundary, writing only their own rows), blocks of tiles and workspace
//! limits change no bit of the output; a caller that runs a window of a larger image gets
//! the larger image's bits wherever the window's origin is a multiple of the grid and the
//! tiles read the same input values (see examples-sr's tiler).
//!
//! F(4x4, 3x3) does 4x fewer multiplies than direct convolution, F(2x2, 3x3) 2.25x; F(4x4)'s
//! error is about 3e-6 of the largest output in f32 with 256 input channels (F(2x2)'s
//! 6e-7), inside the engine's 1e-5 f32 tolerance.
//!
//! Workspace is exactly [`WinogradPlan::workspace_bytes`]: the transformed weights plus
//! one block's transformed input and GEMM output. Blocks shrink (down to 16 tiles) to fit
//! the dispatcher's limit.

mod lanes;
mod transforms;

use super::panel_gemm;
use super::workers::SharedMut;
use crate::implicit_gemm::{Element, MR, MicroKernel, NR};
use conv_engine::dispatch::Chunk;
use conv_engine::problem::ConvProblem;
use conv_engine::{ConvGeometry, ConvKind, Epilogue};
use rayon::prelude::*;
use std::ops::Range;
use transforms::{input_tile_lanes, output_tile_lanes, weight_tile};

/// Period (in output pixels, both axes) of every Winograd tile grid the engine uses: each
/// output tile starts at a multiple of its size, and every tile size divides this.
pub const WINOGRAD_GRID: usize = 4;

/// Output tile size of a Winograd convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WinogradTile {
    /// F(2x2, 3x3): 4x4 transformed tiles.
    F2,
    /// F(4x4, 3x3): 6x6 transformed tiles.
    F4,
}

impl WinogradTile {
    /// Output tile edge.
    pub fn output(self) -> usize {
        match self {
            WinogradTile::F2 => 2,
            WinogradTile::F4 => 4,
        }
    }

    /// Input (transformed) tile edge.
    pub fn input(self) -> usize {
        self.output() + 2
    }

    /// Elements of the transformed domain.
    fn elements(self) -> usize {
        self.input() * self.input()
    }
}

impl std::fmt::Display for WinogradTile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "f{0}x{0}-3x3", self.output())
    }
}

/// Preferred bytes of one block's transformed input and output (a worker's, in its core's
/// L2 where the channels allow).
const TARGET_BLOCK_BYTES: usize = 1 << 20;
/// Preferred tile panels per block, whatever their size: enough to reuse each weight
/// block from L2 several times.
const MIN_PANELS: usize = 3;
/// At most this many tile panels per block.
const MAX_PANELS: usize = 32;
/// Longest input row segment of one panel's tiles side by side (F(4x4): 15 steps of 4,
/// plus a 6-wide tile).
const MAX_SPAN: usize = 4 * (NR - 1) + 6;

/// Whether Winograd computes `problem`.
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
    tile: WinogradTile,
    rows: Range<usize>,
    kernel: MicroKernel,
    m_pad: usize,
    /// Tile rows covering the chunk's output rows on the image's grid.
    tile_rows: Range<usize>,
    tiles_w: usize,
    /// Tile panels (of [`NR`] tiles) per block.
    panels: usize,
    /// Blocks run at once, each by one rayon job with its own part of the workspace.
    workers: usize,
}

impl WinogradPlan {
    /// The plan for `chunk` (whose geometry is `chunk_geom`: the problem restricted to the
    /// chunk's images), or `None` when the problem is not a Winograd one. Blocks are the
    /// preferred size where the limit allows, else as large as it allows (at least one
    /// panel: the workspace may then exceed `limit`).
    pub(super) fn fitted(
        problem: &ConvProblem,
        tile: WinogradTile,
        chunk: &Chunk,
        chunk_geom: &ConvGeometry,
        kernel: MicroKernel,
        threads: usize,
        limit: usize,
    ) -> Option<Self> {
        if !supports(problem) || chunk.rows.is_empty() {
            return None;
        }
        let g = *chunk_geom;
        let [_, q] = g.out_hw();
        let t = tile.output();
        let m_pad = g.out_channels.div_ceil(MR) * MR;
        let tile_rows = chunk.rows.start / t..chunk.rows.end.div_ceil(t);
        let tiles_w = q.div_ceil(t);
        let mut plan = WinogradPlan {
            geom: g,
            tile,
            rows: chunk.rows.clone(),
            kernel,
            m_pad,
            tile_rows,
            tiles_w,
            panels: 1,
            workers: 1,
        };
        let total_panels = plan.tiles().div_ceil(NR).max(1);
        let panel_bytes = plan.panel_floats() * 4;
        // Preferred blocks, but at least one per thread where the tiles allow.
        let preferred = (TARGET_BLOCK_BYTES / panel_bytes)
            .clamp(MIN_PANELS, MAX_PANELS)
            .min(total_panels.div_ceil(threads.max(1)))
            .max(1);
        let workers = threads.max(1).min(total_panels.div_ceil(preferred));
        // Panels that fit beside the transformed weights, over all workers.
        let fits = (limit / 4).saturating_sub(plan.weight_floats()) / plan.panel_floats();
        plan.workers = workers.min(fits).max(1);
        plan.panels = preferred.min(fits / plan.workers).max(1);
        Some(plan)
    }

    fn tiles(&self) -> usize {
        self.geom.batch * self.tile_rows.len() * self.tiles_w
    }

    fn weight_floats(&self) -> usize {
        self.tile.elements() * self.m_pad * self.geom.in_channels
    }

    /// Transformed input and GEMM output of one panel of tiles.
    fn panel_floats(&self) -> usize {
        self.tile.elements() * (self.geom.in_channels + self.m_pad) * NR
    }

    pub(super) fn workspace_floats(&self) -> usize {
        self.weight_floats() + self.workers * self.block_floats()
    }

    /// One worker's transformed input and GEMM output.
    fn block_floats(&self) -> usize {
        self.panels * self.panel_floats()
    }

    pub(super) fn workspace_bytes(&self) -> usize {
        self.workspace_floats() * std::mem::size_of::<f32>()
    }

    /// Computes the chunk's output rows of every image into `output` (the chunk's images,
    /// all rows), `epilogue` applied (its residual: the chunk's images, like `output`).
    /// `workspace` holds at least [`Self::workspace_floats`] floats.
    pub(super) fn run<T: Element>(
        &self,
        input: &[T],
        weight: &[T],
        bias: Option<&[T]>,
        epilogue: &Epilogue<&[T]>,
        output: &mut [T],
        workspace: &mut [f32],
    ) {
        if let Some(r) = epilogue.residual {
            assert_eq!(r.len(), output.len(), "residual length");
        }
        match self.tile {
            WinogradTile::F2 => self.run_tiles::<T, 2, 4, 16>(input, weight, bias, epilogue, output, workspace),
            WinogradTile::F4 => self.run_tiles::<T, 4, 6, 36>(input, weight, bias, epilogue, output, workspace),
        }
    }

    /// [`Self::run`] for output tiles of `M`x`M`, input tiles of `N`x`N`, `E` = `N`².
    fn run_tiles<T: Element, const M: usize, const N: usize, const E: usize>(
        &self,
        input: &[T],
        weight: &[T],
        bias: Option<&[T]>,
        epilogue: &Epilogue<&[T]>,
        output: &mut [T],
        workspace: &mut [f32],
    ) {
        let g = &self.geom;
        assert_eq!((M, N, E), (self.tile.output(), self.tile.input(), self.tile.elements()));
        g.assert_buffer_lengths(input.len(), weight.len(), bias.map(<[T]>::len), output.len());
        assert!(workspace.len() >= self.workspace_floats(), "workspace too small");
        assert!(self.kernel.is_supported(), "microkernel not supported");
        let (u, rest) = workspace.split_at_mut(self.weight_floats());
        self.transform_weights::<T, N, E>(weight, u);
        let u: &[f32] = u;
        let block = self.panels * NR;
        let blocks = self.tiles().div_ceil(block);
        let out = SharedMut(output.as_mut_ptr());
        // Each worker takes the next block and runs it start to end (input transform, the
        // E GEMMs, output transform) in its own scratch, so a block stays in its core's
        // cache and the workers meet only at the end; taking blocks as they come (not a
        // fixed share) keeps a worker whose core is busy with other work from holding the
        // rest up.
        let next = std::sync::atomic::AtomicUsize::new(0);
        let scratch = &mut rest[..self.workers * self.block_floats()];
        scratch.par_chunks_mut(self.block_floats()).for_each(|ws| {
            let (v, m) = ws.split_at_mut(E * g.in_channels * NR * self.panels);
            loop {
                let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if b >= blocks {
                    break;
                }
                let tiles = b * block..((b + 1) * block).min(self.tiles());
                // SAFETY: `out` is the whole output of the chunk's images; blocks hold
                // disjoint tiles, and a tile's outputs are written by its block alone.
                unsafe { self.run_block::<T, M, N, E>(input, u, bias, epilogue, tiles, v, m, out) };
            }
        });
    }

    /// One block start to end, compiled for the vector ISA of the plan's microkernel: the
    /// transforms' 16-lane loops are then one AVX-512 (or two AVX2) operations each.
    /// Compiled for the baseline they ran 4-wide SSE and took 2.3x the GEMMs' time (perf,
    /// Real-CUGAN on the 2-core Zen 4, 2026-12-04). The arithmetic, and so every bit of
    /// the output, is the same (no contraction into FMA without fast-math).
    ///
    /// # Safety
    /// As [`Self::transform_output`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_block<T: Element, const M: usize, const N: usize, const E: usize>(
        &self,
        input: &[T],
        u: &[f32],
        bias: Option<&[T]>,
        epilogue: &Epilogue<&[T]>,
        tiles: Range<usize>,
        v: &mut [f32],
        m: &mut [f32],
        out: SharedMut<T>,
    ) {
        // SAFETY: the plan's microkernel is supported (checked in `run_tiles`).
        crate::isa_entry!(self.kernel, [T: Element, const M: usize, const N: usize, const E: usize], [T, M, N, E], (
            plan: &WinogradPlan = self,
            input: &[T] = input,
            u: &[f32] = u,
            bias: Option<&[T]> = bias,
            epilogue: &Epilogue<&[T]> = epilogue,
            tiles: Range<usize> = tiles,
            v: &mut [f32] = v,
            m: &mut [f32] = m,
            out: SharedMut<T> = out,
        ) => plan.block_body::<T, M, N, E>(input, u, bias, epilogue, tiles, v, m, out))
    }

    /// See [`Self::run_block`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block_body<T: Element, const M: usize, const N: usize, const E: usize>(
        &self,
        input: &[T],
        u: &[f32],
        bias: Option<&[T]>,
        epilogue: &Epilogue<&[T]>,
        tiles: Range<usize>,
        v: &mut [f32],
        m: &mut [f32],
        out: SharedMut<T>,
    ) {
        let npanels = tiles.len().div_ceil(NR);
        self.transform_input::<T, M, N, E>(input, tiles.start, npanels, v);
        self.gemm(E, u, v, m, npanels);
        unsafe { self.transform_output::<T, M, N, E>(m, bias, epilogue, tiles, out) };
    }

    /// `U[e]` in 6-row panels: `u[e][panel][c][i] = (G g Gᵀ)[e]` of output channel
    /// `6·panel + i` and input channel `c` (zero for padding rows).
    fn transform_weights<T: Element, const N: usize, const E: usize>(&self, weight: &[T], u: &mut [f32]) {
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
                        let gk: [f64; 9] = std::array::from_fn(|j| f64::from(w[j].to_f32()));
                        weight_tile::<N, E>(&gk)
                    } else {
                        [0.0; E]
                    };
                    for (e, val) in t.into_iter().enumerate() {
                        // SAFETY: in bounds (e < E, panel < m_pad/6, c < C, i < 6); each
                        // panel is written by one job.
                        unsafe { *u_ptr.ptr().add(e * e_len + panel * panel_len + c * MR + i) = val as f32 };
                    }
                }
            }
        });
    }

    /// `V[e]` of tiles `t0..t0 + 16·npanels` in 16-tile panels: `v[e][panel][c][j]`
    /// (zero for tiles past the end).
    #[inline(always)]
    fn transform_input<T: Element, const M: usize, const N: usize, const E: usize>(
        &self,
        input: &[T],
        t0: usize,
        npanels: usize,
        v: &mut [f32],
    ) {
        let g = &self.geom;
        let c_n = g.in_channels;
        let [h, w] = g.in_size;
        let e_len = self.panels * c_n * NR;
        let ntiles = self.tiles();
        const CB: usize = 8;
        let c_blocks = c_n.div_ceil(CB);
        let v_ptr = SharedMut(v.as_mut_ptr());
        let wide = self.kernel.is_avx512();
        let is_f32 = std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>();
        #[cfg(target_arch = "x86_64")]
        debug_assert_eq!(lanes::avx512::split_span(M, N), M * (NR - 1) + N);
        for job in 0..npanels * c_blocks {
            let (panel, cb) = (job / c_blocks, job % c_blocks);
            // Input origin of each lane's tile (None past the last tile).
            let origin: [Option<(usize, isize, isize)>; NR] = std::array::from_fn(|j| {
                let t = t0 + panel * NR + j;
                (t < ntiles).then(|| {
                    let (oy, ox, n) = self.tile_origin(t);
                    (n, oy as isize - g.pad_begin[0] as isize, ox as isize - g.pad_begin[1] as isize)
                })
            });
            let mut seg = [0f32; MAX_SPAN];
            // All 16 tiles side by side in one tile row, horizontally inside the image:
            // each input row they read is one contiguous segment.
            let span = M * (NR - 1) + N;
            let row_run = match (origin[0], origin[NR - 1]) {
                (Some((n0, iy0, ix0)), Some((n1, iy1, ix1)))
                    if n0 == n1
                        && iy0 == iy1
                        && ix1 == ix0 + (M * (NR - 1)) as isize
                        && ix0 >= 0
                        && ix0 as usize + span <= w =>
                {
                    Some((n0, iy0, ix0 as usize))
                }
                _ => None,
            };
            for c in cb * CB..((cb + 1) * CB).min(c_n) {
                let d = match row_run {
                    Some((n, iy0, ix0)) => {
                        let plane = &input[(n * c_n + c) * h * w..][..h * w];
                        // Every row written below, none first zeroed: the zeroing of the
                        // whole patch cost as much as its transform (perf).
                        let mut d = std::mem::MaybeUninit::<[[[f32; NR]; N]; N]>::uninit();
                        let rows = d.as_mut_ptr() as *mut [[f32; NR]; N];
                        for r in 0..N {
                            // SAFETY: r < N rows of the patch.
                            let drow = unsafe { rows.add(r) };
                            let iy = iy0 + r as isize;
                            if iy < 0 || iy >= h as isize {
                                // SAFETY: as above.
                                unsafe { drow.write([[0.0; NR]; N]) };
                                continue;
                            }
                            let src = &plane[iy as usize * w + ix0..][..span];
                            #[cfg(target_arch = "x86_64")]
                            if wide {
                                let row: *const f32 = if is_f32 {
                                    src.as_ptr().cast()
                                } else {
                                    T::widen(src, &mut seg[..span]);
                                    seg.as_ptr()
                                };
                                // SAFETY: AVX-512 (`wide`); `row` holds `span` floats,
                                // `drow` N·16.
                                unsafe { lanes::avx512::split_row::<M, N>(row, drow.cast()) };
                                continue;
                            }
                            T::widen(src, &mut seg[..span]);
                            let split = std::array::from_fn(|s| std::array::from_fn(|j| seg[M * j + s]));
                            // SAFETY: as above.
                            unsafe { drow.write(split) };
                        }
                        // SAFETY: every row was written.
                        unsafe { d.assume_init() }
                    }
                    None => {
                        let mut d = [[[0f32; NR]; N]; N];
                        for (j, o) in origin.iter().enumerate() {
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
                        d
                    }
                };
                input_tile_lanes::<N, E>(&d, |e, lanes| {
                    // SAFETY: in bounds (e < E, panel < panels, c < C); each (panel, c) is
                    // written by one job.
                    let dst = unsafe {
                        std::slice::from_raw_parts_mut(v_ptr.ptr().add(e * e_len + (panel * c_n + c) * NR), NR)
                    };
                    dst.copy_from_slice(lanes);
                });
            }
        }
    }

    /// `M[e] = U[e] · V[e]` (`e < elements`) for the block's panels, stored
    /// `m[panel][k][e][j]`: the output transform of one (panel, k) then reads its `E`
    /// values of 16 tiles as one contiguous run. (Stored `m[e][k][tile]`, that read was 36
    /// loads from 36 planes, the hottest spot of Real-CUGAN's Winograd layers.)
    fn gemm(&self, elements: usize, u: &[f32], v: &[f32], m: &mut [f32], npanels: usize) {
        let c_n = self.geom.in_channels;
        let ldc = elements * NR;
        let (u_e, v_e) = (self.m_pad * c_n, self.panels * c_n * NR);
        assert!(m.len() >= npanels * self.m_pad * ldc, "GEMM output too small");
        let m_ptr = SharedMut(m.as_mut_ptr());
        for e in 0..elements {
            let (u, v) = (&u[e * u_e..][..u_e], &v[e * v_e..][..v_e]);
            // SAFETY: the 6×16 tile (rows k = 6·ir.. of panel jp, element e) lies in the
            // block's M (npanels · m_pad · E · 16 floats, asserted) and is written by this
            // call alone; the kernel was checked in `run`.
            unsafe {
                panel_gemm::gemm(self.kernel, c_n, u, self.m_pad / MR, v, npanels, ldc, |ir, jp| {
                    m_ptr.ptr().add((jp * self.m_pad + ir * MR) * ldc + e * NR)
                })
            };
        }
    }

    /// Inverse transform of the block's tiles, plus bias, through the epilogue, narrowed into
    /// the output (the chunk's rows only: a tile cut by the chunk's edge writes its rows
    /// inside).
    ///
    /// # Safety
    /// `out` addresses the whole output of the chunk's images, and nothing else writes the
    /// chunk's rows meanwhile.
    #[inline(always)]
    unsafe fn transform_output<T: Element, const M: usize, const N: usize, const E: usize>(
        &self,
        m: &[f32],
        bias: Option<&[T]>,
        epilogue: &Epilogue<&[T]>,
        tiles: Range<usize>,
        out: SharedMut<T>,
    ) {
        let plain = epilogue.is_plain();
        // `v` (bias included) through the epilogue, at output element `at`.
        let finish = |v: f32, at: usize| {
            if plain { v } else { epilogue.apply(v, epilogue.residual.map_or(0.0, |r| r[at].to_f32())) }
        };
        let g = &self.geom;
        let k_n = g.out_channels;
        let [p, q] = g.out_hw();
        let npanels = tiles.len().div_ceil(NR);
        let rows = self.rows.clone();
        let wide = self.kernel.is_avx512();
        for job in 0..npanels * k_n {
            let (panel, k) = (job / k_n, job % k_n);
            let (t, _) = m[(panel * self.m_pad + k) * E * NR..][..E * NR].as_chunks::<NR>();
            let t: &[[f32; NR]; E] = t.try_into().expect("E lanes of 16 tiles");
            let y = output_tile_lanes::<N, M, E>(t);
            let b = bias.map_or(0.0, |b| b[k].to_f32());
            // Fast path: all 16 tiles side by side in one tile row, wholly inside the
            // chunk: each output row is one contiguous store.
            let first = tiles.start + panel * NR;
            if first + NR <= tiles.end {
                let ((oy, ox, n), (oy1, ox1, n1)) = (self.tile_origin(first), self.tile_origin(first + NR - 1));
                if n == n1
                    && oy == oy1
                    && ox1 == ox + M * (NR - 1)
                    && ox + M * NR <= q
                    && oy >= rows.start
                    && oy + M <= rows.end
                {
                    let plane = (n * k_n + k) * p * q;
                    let mut buf = [0f32; 4 * NR];
                    for (i, yrow) in y.iter().enumerate() {
                        let row = plane + (oy + i) * q + ox;
                        #[cfg(target_arch = "x86_64")]
                        let joined = wide && {
                            // SAFETY: AVX-512 (`wide`).
                            unsafe { lanes::avx512::join_row::<M>(yrow, b, &mut buf) };
                            true
                        };
                        #[cfg(not(target_arch = "x86_64"))]
                        let joined = false;
                        for (s, cell) in yrow.iter().enumerate().filter(|_| !joined) {
                            for (j, v) in cell.iter().enumerate() {
                                buf[M * j + s] = v + b;
                            }
                        }
                        if !plain {
                            let res = epilogue.residual.map(|r| r[row..row + M * NR].iter().map(|x| x.to_f32()));
                            epilogue.apply_row(&mut buf[..M * NR], res);
                        }
                        // SAFETY: row oy + i, columns ox..ox + 16·M of plane (n, k) are
                        // inside the chunk's output and belong to this (panel, k) job alone.
                        let dst = unsafe { std::slice::from_raw_parts_mut(out.ptr().add(row), M * NR) };
                        T::narrow(&buf[..M * NR], dst);
                    }
                    continue;
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
                    if !rows.contains(&(oy + i)) {
                        continue;
                    }
                    for (s, cell) in yrow.iter().enumerate().take(q - ox) {
                        // SAFETY: (oy + i, ox + s) is inside the chunk's rows of plane
                        // (n, k); each element belongs to one (tile, k) job.
                        let at = plane + (oy + i) * q + ox + s;
                        unsafe { *out.ptr().add(at) = T::from_f32(finish(cell[j] + b, at)) };
                    }
                }
            }
        }
    }

    /// Output origin (row, column) and image of tile `t`.
    fn tile_origin(&self, t: usize) -> (usize, usize, usize) {
        let per_image = self.tile_rows.len() * self.tiles_w;
        let (n, rem) = (t / per_image, t % per_image);
        let m = self.tile.output();
        ((self.tile_rows.start + rem / self.tiles_w) * m, (rem % self.tiles_w) * m, n)
    }
}
