//! The CPU implicit-GEMM convolution executor.
//!
//! Per (image, group, phase) the convolution is a GEMM whose right-hand matrix is the
//! virtual im2col matrix. The executor walks it in column blocks of `nc` output pixels;
//! for each block it packs `kc`-row slices of the virtual matrix straight from the input
//! into `nr`-column panels (no im2col buffer ever exists), runs the `mr × nr` microkernel
//! (the tile is the kernel's: 6×16 for AVX2, 14×32 for AVX-512) against the weights
//! (packed once per call into `mr`-row panels), and accumulates in an f32 tile that the
//! epilogue (bias, activation, residual, scale) finishes and narrows into the output in
//! the same pass.
//!
//! Workspace is exactly [`CpuConvPlan::workspace_bytes`]: the packed weights plus, per
//! worker, one packed block and one accumulator tile. It does not grow with the image.

mod element;
mod microkernel;
mod pack;
#[cfg(target_arch = "x86_64")]
pub mod simd;

#[cfg(test)]
mod tests;

pub use element::{Element, apply_epilogue_in_place};
pub use microkernel::{MAX_NR, MR, MicroKernel, NR};

use conv_engine::epilogue::Epilogue;
use conv_engine::geometry::{ConvGeometry, ConvKind, Phase, phases};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Evaluates `$body` compiled for the instruction set of the microkernel `$kernel`.
///
/// The body, written against the named arguments, is instantiated in `#[target_feature]`
/// entry points for AVX-512 and for AVX2 + FMA, so that it and its `#[inline(always)]`
/// callees (16-lane loops, packing, write-outs) compile at that width; the portable
/// microkernel (and any other architecture) runs it as compiled for the baseline. A
/// closure would not do: where LLVM declines to inline it, it compiles for the baseline.
/// The body must be `()` and is an unsafe context; the caller promises that `$kernel` is
/// supported by the CPU (`MicroKernel::is_supported`).
///
/// ```ignore
/// isa_entry!(self.kernel, [T: Element], [T], (plan: &Plan = self, x: &[T] = input) => plan.body(x));
/// ```
#[macro_export]
macro_rules! isa_entry {
    ($kernel:expr, [$($gp:tt)*], [$($ga:tt)*], ($($name:ident: $ty:ty = $val:expr),* $(,)?) => $body:expr) => {{
        // `name: T = name` rebinds on purpose: the entry points take the names as arguments.
        $(#[allow(clippy::redundant_locals)] let $name = $val;)*
        #[cfg(target_arch = "x86_64")]
        {
            #[target_feature(enable = "avx512f,avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx512<$($gp)*>($($name: $ty),*) {
                unsafe { $body }
            }
            #[target_feature(enable = "avx2,fma")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx2<$($gp)*>($($name: $ty),*) {
                unsafe { $body }
            }
            match $kernel {
                $crate::implicit_gemm::MicroKernel::Avx512 | $crate::implicit_gemm::MicroKernel::Avx512Narrow => {
                    return unsafe { avx512::<$($ga)*>($($name),*) };
                }
                $crate::implicit_gemm::MicroKernel::Avx2Fma => return unsafe { avx2::<$($ga)*>($($name),*) },
                $crate::implicit_gemm::MicroKernel::Portable => {}
            }
        }
        unsafe { $body }
    }};
}

/// Cache blocking of the CPU executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CpuTiling {
    /// Reduction rows per packed block.
    pub kc: usize,
    /// Output pixels (GEMM columns) per work unit; a multiple of the kernel's `nr`, at
    /// most 512.
    pub nc: usize,
    /// Output channels per inner block (a multiple of the kernel's `mr`): the `mc × kc`
    /// slice of packed weights the inner loops sweep while one packed panel sits in L1.
    pub mc: usize,
}

impl CpuTiling {
    /// BLIS-style blocking for a Zen/Skylake-class core (32 KiB L1, ≥ 512 KiB L2) and
    /// `kernel`'s tile: a `kc × nr` packed panel (16 KiB) stays in L1 while the `mc × kc`
    /// weights block (≤ 144 KiB) and the `kc × nc` packed block (≤ 128 KiB) share L2.
    pub fn for_gemm(kernel: MicroKernel, m: usize, k: usize, n: usize) -> Self {
        let (mr, nr) = (kernel.mr(), kernel.nr());
        let m_pad = m.div_ceil(mr) * mr;
        let kc = (4096 / nr).min(k.max(1));
        // 128 columns: with mc = 144 and kc = 256 the weights block (144 KiB), the packed
        // block (128 KiB) and the C rows of one mc pass (72 KiB) all stay in a 512 KiB L2.
        // An A/B on Zen 3 (2 cores, 2026-12-02, commit 01c5c3d) found 256 columns slower
        // on every VAE shape; the resulting speeds are in docs/measurements/*-cpu-conv.md.
        let nc = n.div_ceil(nr).clamp(1, 128usize.div_ceil(nr)) * nr;
        let mc = m_pad.min(144usize.div_ceil(mr) * mr);
        CpuTiling { kc, nc, mc }
    }
}

/// One unit of parallel work: a column block of one (image, group, phase) GEMM.
#[derive(Clone, Copy, Debug)]
struct WorkUnit {
    image: usize,
    group: usize,
    phase: usize,
    col_start: usize,
}

/// A convolution (or a band of its output rows) prepared for the CPU executor.
#[derive(Clone, Debug)]
pub struct CpuConvPlan {
    geom: ConvGeometry,
    phases: Vec<Phase>,
    tiling: CpuTiling,
    workers: usize,
    kernel: MicroKernel,
    /// The kernel's tile.
    mr: usize,
    nr: usize,
    m_pad: usize,
    /// Offset of each phase's packed weights inside one group's packed weights (floats).
    a_offsets: Vec<usize>,
    a_group_len: usize,
    units: Vec<WorkUnit>,
}

/// Raw output pointer shared by workers that write disjoint elements.
#[derive(Clone, Copy)]
struct SharedMut<T>(*mut T);
unsafe impl<T: Send> Send for SharedMut<T> {}
unsafe impl<T: Send> Sync for SharedMut<T> {}

impl CpuConvPlan {
    /// Plans output rows `rows` of `geom` for `threads` workers. `geom` must be valid
    /// (`out_size()` is `Some`) and `rows` within the output height.
    pub fn new(
        geom: &ConvGeometry,
        rows: Range<usize>,
        threads: usize,
        kernel: MicroKernel,
        tiling: Option<CpuTiling>,
    ) -> Self {
        let [p, _] = geom.out_hw();
        assert!(rows.start <= rows.end && rows.end <= p, "rows {rows:?} outside 0..{p}");
        let phases = phases(geom, rows);
        let m = geom.out_channels_per_group();
        let cg = geom.in_channels_per_group();
        let max_k = phases.iter().map(|ph| cg * ph.taps.len()).max().unwrap_or(0);
        let max_n = phases.iter().map(Phase::pixels).max().unwrap_or(0);
        let (mr, nr) = (kernel.mr(), kernel.nr());
        let mut tiling = tiling.unwrap_or_else(|| CpuTiling::for_gemm(kernel, m, max_k, max_n));
        tiling.kc = tiling.kc.clamp(1, max_k.max(1));
        tiling.nc = tiling.nc.clamp(nr, pack::MAX_COLS / nr * nr).div_ceil(nr) * nr;
        tiling.nc = tiling.nc.min(max_n.div_ceil(nr).max(1) * nr);
        let m_pad = m.div_ceil(mr) * mr;
        tiling.mc = (tiling.mc.max(mr) / mr * mr).min(m_pad.max(mr));
        let mut a_offsets = Vec::with_capacity(phases.len());
        let mut a_group_len = 0;
        for ph in &phases {
            a_offsets.push(a_group_len);
            a_group_len += m_pad * cg * ph.taps.len();
        }
        let mut units = Vec::new();
        for image in 0..geom.batch {
            for group in 0..geom.groups {
                for (pi, ph) in phases.iter().enumerate() {
                    for col_start in (0..ph.pixels()).step_by(tiling.nc) {
                        units.push(WorkUnit { image, group, phase: pi, col_start });
                    }
                }
            }
        }
        let workers = threads.clamp(1, units.len().max(1));
        assert!(kernel.is_supported(), "microkernel {kernel:?} not supported by this CPU");
        CpuConvPlan { geom: *geom, phases, tiling, workers, kernel, mr, nr, m_pad, a_offsets, a_group_len, units }
    }

    /// Like [`Self::new`] with the default tiling, but shrinks the column block, then the
    /// reduction block, then the number of workers until the workspace fits `max_bytes`.
    /// The packed weights cannot shrink: if they alone exceed `max_bytes`, the smallest
    /// plan is returned and its `workspace_bytes` says how much it needs.
    pub fn fitted(
        geom: &ConvGeometry,
        rows: Range<usize>,
        threads: usize,
        kernel: MicroKernel,
        max_bytes: usize,
    ) -> Self {
        let mut plan = Self::new(geom, rows.clone(), threads, kernel, None);
        let mut tiling = plan.tiling;
        let mut workers = threads;
        let nr = kernel.nr();
        while plan.workspace_bytes() > max_bytes {
            if tiling.nc > 4 * nr {
                tiling.nc = (tiling.nc / 2).div_ceil(nr) * nr;
            } else if tiling.kc > 32 {
                tiling.kc /= 2;
            } else if tiling.nc > nr {
                tiling.nc /= 2;
            } else if workers > 1 {
                workers -= 1;
            } else {
                break;
            }
            plan = Self::new(geom, rows.clone(), workers, kernel, Some(tiling));
        }
        plan
    }

    pub fn tiling(&self) -> CpuTiling {
        self.tiling
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    pub fn kernel(&self) -> MicroKernel {
        self.kernel
    }

    fn slot_floats(&self) -> usize {
        let cg = self.geom.in_channels_per_group();
        let max_k = self.phases.iter().map(|ph| cg * ph.taps.len()).max().unwrap_or(0);
        let kc = self.tiling.kc.min(max_k);
        (kc + self.m_pad) * self.tiling.nc
    }

    fn a_floats(&self) -> usize {
        self.a_group_len * self.geom.groups
    }

    /// Floats of workspace `run` needs.
    pub fn workspace_floats(&self) -> usize {
        self.a_floats() + self.workers * self.slot_floats()
    }

    /// Bytes of workspace `run` needs; exact, and independent of the image size.
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_floats() * std::mem::size_of::<f32>()
    }

    /// Computes the planned output rows into `output` (the whole NCHW output tensor).
    ///
    /// `input`, `weight`, `bias` and `output` are contiguous and sized as the geometry
    /// says; `workspace` holds at least [`Self::workspace_floats`] floats. Panics on a
    /// size mismatch — callers validate user input before they get here.
    pub fn run<T: Element>(
        &self,
        input: &[T],
        weight: &[T],
        bias: Option<&[T]>,
        output: &mut [T],
        workspace: &mut [f32],
    ) {
        self.run_fused(input, weight, bias, &Epilogue::default(), output, workspace)
    }

    /// [`Self::run`] with the epilogue applied in the write-out: `out = (act(acc + bias) +
    /// residual) · scale`, the residual indexed as the output (the whole NCHW tensor).
    pub fn run_fused<T: Element>(
        &self,
        input: &[T],
        weight: &[T],
        bias: Option<&[T]>,
        epilogue: &Epilogue<&[T]>,
        output: &mut [T],
        workspace: &mut [f32],
    ) {
        let g = &self.geom;
        g.assert_buffer_lengths(input.len(), weight.len(), bias.map(<[T]>::len), output.len());
        if let Some(r) = epilogue.residual {
            assert_eq!(r.len(), output.len(), "residual and output lengths differ");
        }
        assert!(workspace.len() >= self.workspace_floats(), "workspace too small");
        let (a_pack, slots) = workspace.split_at_mut(self.a_floats());
        self.pack_weights(weight, a_pack);
        let a_pack: &[f32] = a_pack;

        let slot_len = self.slot_floats();
        let next = AtomicUsize::new(0);
        let out = SharedMut(output.as_mut_ptr());
        let work = |slot: &mut [f32]| loop {
            let u = next.fetch_add(1, Ordering::Relaxed);
            let Some(unit) = self.units.get(u) else { break };
            // SAFETY: units cover disjoint output elements (distinct image, channel group,
            // phase or column block), so no two workers write the same element.
            unsafe { self.run_unit(unit, input, a_pack, bias, epilogue, out, slot) };
        };
        if self.workers == 1 {
            work(&mut slots[..slot_len]);
        } else {
            rayon::scope(|s| {
                for slot in slots.chunks_exact_mut(slot_len).take(self.workers) {
                    let work = &work;
                    s.spawn(move |_| work(slot));
                }
            });
        }
    }

    /// Packs every (group, phase) weight matrix into `mr`-row panels: panel `i` holds, for
    /// each reduction index `kk = c·taps + t`, the `mr` weights of rows `mr·i..mr·(i+1)`.
    fn pack_weights<T: Element>(&self, weight: &[T], a_pack: &mut [f32]) {
        let g = &self.geom;
        let (m, cg) = (g.out_channels_per_group(), g.in_channels_per_group());
        let [kr, ks] = g.kernel;
        let rs = kr * ks;
        for (group, group_pack) in a_pack.chunks_exact_mut(self.a_group_len.max(1)).enumerate() {
            if self.a_group_len == 0 {
                break;
            }
            for (ph, &off) in self.phases.iter().zip(&self.a_offsets) {
                let kdim = cg * ph.taps.len();
                let dst = &mut group_pack[off..off + self.m_pad * kdim];
                if kdim == 0 {
                    continue;
                }
                // Panels are independent: pack them on the worker threads (a 512x512x3x3
                // weight is 2.4M values, tens of milliseconds on one core).
                let mr = self.mr;
                let pack_panel = |(panel, panel_dst): (usize, &mut [f32])| {
                    for c in 0..cg {
                        for (t, tap) in ph.taps.iter().enumerate() {
                            let kk = c * ph.taps.len() + t;
                            for i in 0..mr {
                                let row = panel * mr + i;
                                panel_dst[kk * mr + i] = if row < m {
                                    let tap_off = tap.r * ks + tap.s;
                                    let idx = match g.kind {
                                        ConvKind::Forward => ((group * m + row) * cg + c) * rs + tap_off,
                                        ConvKind::Transposed => ((group * cg + c) * m + row) * rs + tap_off,
                                    };
                                    weight[idx].to_f32()
                                } else {
                                    0.0
                                };
                            }
                        }
                    }
                };
                if self.workers > 1 {
                    use rayon::prelude::*;
                    dst.par_chunks_exact_mut(kdim * mr).enumerate().for_each(pack_panel);
                } else {
                    dst.chunks_exact_mut(kdim * mr).enumerate().for_each(pack_panel);
                }
            }
        }
    }

    /// One unit, compiled for the vector ISA of the plan's microkernel, so that packing and
    /// the write-out (bias, epilogue, narrowing) run at its width too; compiled for the
    /// baseline they are 4-wide SSE. The arithmetic, and so every bit, is the same.
    ///
    /// # Safety
    /// `out` points at the whole output tensor and no other worker writes the elements of
    /// `unit`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn run_unit<T: Element>(
        &self,
        unit: &WorkUnit,
        input: &[T],
        a_pack: &[f32],
        bias: Option<&[T]>,
        epilogue: &Epilogue<&[T]>,
        out: SharedMut<T>,
        slot: &mut [f32],
    ) {
        // SAFETY: the plan's microkernel was checked to be supported.
        crate::isa_entry!(self.kernel, [T: Element], [T], (
            plan: &CpuConvPlan = self,
            unit: &WorkUnit = unit,
            input: &[T] = input,
            a_pack: &[f32] = a_pack,
            bias: Option<&[T]> = bias,
            epilogue: &Epilogue<&[T]> = epilogue,
            out: SharedMut<T> = out,
            slot: &mut [f32] = slot,
        ) => plan.unit_body(unit, input, a_pack, bias, epilogue, out, slot))
    }

    /// See [`Self::run_unit`].
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn unit_body<T: Element>(
        &self,
        unit: &WorkUnit,
        input: &[T],
        a_pack: &[f32],
        bias: Option<&[T]>,
        epilogue: &Epilogue<&[T]>,
        out: SharedMut<T>,
        slot: &mut [f32],
    ) {
        let g = &self.geom;
        let (m, cg) = (g.out_channels_per_group(), g.in_channels_per_group());
        let [h, w] = g.in_size;
        let [p, q] = g.out_hw();
        let ph = &self.phases[unit.phase];
        let ntaps = ph.taps.len();
        let kdim = cg * ntaps;
        let nc = self.tiling.nc;
        let ncols = nc.min(ph.pixels() - unit.col_start);
        let (mr, nr) = (self.mr, self.nr);
        let npanels = ncols.div_ceil(nr);
        let max_kc = self.slot_floats() / nc - self.m_pad;
        let (b_block, c_tile) = slot.split_at_mut(max_kc * nc);
        let ldc = nc;

        let x = &input[(unit.image * g.in_channels + unit.group * cg) * h * w..][..cg * h * w];
        let a_phase = &a_pack[unit.group * self.a_group_len + self.a_offsets[unit.phase]..];

        if kdim == 0 {
            // No tap of this phase lands on the input: the output is the bias alone.
            c_tile[..self.m_pad * ldc].fill(0.0);
        }
        let mut kb = 0;
        while kb < kdim {
            let kcb = self.tiling.kc.min(kdim - kb);
            pack::pack_b(x, [h, w], ph, kb..kb + kcb, unit.col_start, ncols, nr, b_block);
            let panels_m = self.m_pad / mr;
            let panels_mc = self.tiling.mc / mr;
            for ic in (0..panels_m).step_by(panels_mc) {
                for jr in 0..npanels {
                    let b = b_block[jr * kcb * nr..].as_ptr();
                    for ir in ic..(ic + panels_mc).min(panels_m) {
                        let a = a_phase[ir * kdim * mr + kb * mr..].as_ptr();
                        let c = c_tile[ir * mr * ldc + jr * nr..].as_mut_ptr();
                        // SAFETY: panels hold kcb·mr and kcb·nr floats; the C tile has
                        // m_pad rows of ldc ≥ npanels·nr columns; the kernel (whose tile
                        // is mr × nr) was checked at plan time.
                        unsafe { self.kernel.run(kcb, a, b, c, ldc, kb > 0) };
                    }
                }
            }
            kb += kcb;
        }

        // Epilogue: bias, activation, residual and scale, narrowing, and the store into NCHW.
        let plain = epilogue.is_plain();
        for row in 0..m {
            let ch = unit.group * m + row;
            let acc = &mut c_tile[row * ldc..row * ldc + ncols];
            if let Some(b) = bias {
                let bv = b[ch].to_f32();
                acc.iter_mut().for_each(|v| *v += bv);
            }
            let plane = (unit.image * g.out_channels + ch) * p * q;
            if g.kind == ConvKind::Forward {
                // A forward phase spans whole output rows: its pixels are contiguous.
                let start = plane + ph.row0 * q + unit.col_start;
                if !plain {
                    let res = epilogue.residual.map(|r| r[start..start + ncols].iter().map(|x| x.to_f32()));
                    epilogue.apply_row(acc, res);
                }
                // SAFETY: in bounds (row0·q + col_start + ncols ≤ p·q) and owned by this unit.
                let dst = unsafe { std::slice::from_raw_parts_mut(out.0.add(start), ncols) };
                T::narrow(acc, dst);
            } else {
                // A transposed phase's pixels are every col_step-th pixel of every
                // row_step-th output row: one segment per phase row.
                let (mut j, mut lin) = (0, unit.col_start);
                while j < ncols {
                    let (i, jj) = (lin / ph.cols, lin % ph.cols);
                    let run = (ph.cols - jj).min(ncols - j);
                    let base = plane + (ph.row0 + i * ph.row_step) * q + ph.col0 + jj * ph.col_step;
                    let step = ph.col_step;
                    let seg = &mut acc[j..j + run];
                    if !plain {
                        let res = epilogue.residual.map(|r| (0..run).map(move |t| r[base + t * step].to_f32()));
                        epilogue.apply_row(seg, res);
                    }
                    for (t, v) in seg.iter().enumerate() {
                        // SAFETY: the pixel is inside the output plane and owned by this unit.
                        unsafe { *out.0.add(base + t * step) = T::from_f32(*v) };
                    }
                    j += run;
                    lin += run;
                }
            }
        }
    }
}
