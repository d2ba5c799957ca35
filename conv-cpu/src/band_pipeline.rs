//! The worker loop of the band executors (`Gemm1x1`'s transposed and space-to-depth
//! forms): each unit (a band of output rows) packs its input, runs one GEMM over it and
//! writes its outputs. Run one after another, packing waits on DRAM for the input and
//! the write-out for the output while the FMA units idle: on Real-CUGAN's 64-channel 2x2
//! stride-2 layers each took about as long as the GEMM. Here, while a unit's GEMM runs, a
//! worker's microkernel calls fetch the input of its next unit into cache a few lines
//! every few reduction steps (a burst of prefetches would wait on the line-fill buffers
//! as the loads did), and between the calls it writes its previous unit out a slice at a
//! time (non-temporal stores, drained while the FMAs run); two product buffers per
//! worker. The next unit is packed after the GEMM, from cache.
//!
//! The order in which a unit's parts are written changes no output's arithmetic: each
//! output is still its GEMM sum, then the write-out's epilogue.

use super::panel_gemm;
use super::workers::{SharedMut, run_on_workers};
use crate::implicit_gemm::MicroKernel;
use conv_engine::{ConvGeometry, Epilogue};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One call's operands, shared by the workers of a band executor (each wraps it in a
/// type of its own that implements [`BandJob`]).
pub(super) struct BandOperands<'a, T> {
    pub kernel: MicroKernel,
    pub g: &'a ConvGeometry,
    pub x: &'a [T],
    /// The packed weights.
    pub a: &'a [f32],
    pub bias: Option<&'a [T]>,
    pub epilogue: &'a Epilogue<&'a [T]>,
    pub out: SharedMut<T>,
    pub rows: Range<usize>,
    /// Output rows per band, and bands per image.
    pub band: usize,
    pub bands: usize,
    pub max_cols: usize,
    /// The output's size (`out_hw`, kept: the write-out asks for it per row).
    pub out_hw: [usize; 2],
}

impl<'a, T> BandOperands<'a, T> {
    /// Output rows `rows` of every image of `g` in bands of `band` rows.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        kernel: MicroKernel,
        g: &'a ConvGeometry,
        x: &'a [T],
        a: &'a [f32],
        bias: Option<&'a [T]>,
        epilogue: &'a Epilogue<&'a [T]>,
        out: &mut [T],
        rows: Range<usize>,
        band: usize,
        max_cols: usize,
    ) -> Self {
        let bands = rows.len().div_ceil(band);
        let out = SharedMut(out.as_mut_ptr());
        BandOperands { kernel, g, x, a, bias, epilogue, out, rows, band, bands, max_cols, out_hw: g.out_hw() }
    }

    /// Units of work: every band of every image.
    pub fn units(&self) -> usize {
        self.g.batch * self.bands
    }

    /// Image and output rows of unit `u`.
    pub fn unit_rows(&self, u: usize) -> (usize, Range<usize>) {
        let (n, o0) = (u / self.bands, self.rows.start + (u % self.bands) * self.band);
        (n, o0..(o0 + self.band).min(self.rows.end))
    }
}

/// What a band executor brings to [`run`].
pub(super) trait BandJob: Sync {
    fn kernel(&self) -> MicroKernel;
    /// The GEMM's reduction length and its packed weights (`m_panels` panels of the
    /// kernel's `mr` rows).
    fn depth(&self) -> usize;
    fn a(&self) -> &[f32];
    fn m_panels(&self) -> usize;
    /// Floats of one packed input and of one product buffer.
    fn b_floats(&self) -> usize;
    fn prod_floats(&self) -> usize;
    /// Floats of the worker's staging row for the write-out.
    fn row_floats(&self) -> usize;
    /// Panels of the kernel's `nr` columns in unit `u`'s GEMM.
    fn n_panels(&self, u: usize) -> usize;
    /// The runs of input unit `u` packs.
    fn input_runs(&self, u: usize) -> Vec<&[u8]>;
    /// How many parts unit `u`'s write-out splits into.
    fn write_parts(&self, u: usize) -> usize;
    /// Packs unit `u` into `b` (which holds [`Self::b_floats`]).
    ///
    /// # Safety
    /// The kernel is supported.
    unsafe fn pack(&self, u: usize, b: &mut [f32]);
    /// Writes parts `parts` of unit `u` from its products (row stride `n_panels·nr`),
    /// which it may overwrite (they are read once).
    ///
    /// # Safety
    /// The kernel is supported; no other worker writes unit `u`'s outputs.
    unsafe fn write(&self, u: usize, prod: &mut [f32], row: &mut [f32], parts: Range<usize>);
}

/// Hands out `total` parts over `steps` calls, front-loaded.
struct Spread {
    total: usize,
    per_step: usize,
    done: usize,
}

impl Spread {
    fn new(total: usize, steps: usize) -> Self {
        Spread { total, per_step: total.div_ceil(steps.max(1)), done: 0 }
    }

    fn next(&mut self) -> Range<usize> {
        let start = self.done;
        self.done = (start + self.per_step).min(self.total);
        start..self.done
    }

    fn rest(&mut self) -> Range<usize> {
        let start = self.done;
        self.done = self.total;
        start..self.total
    }
}

/// The cache lines of some runs, a window at a time.
struct Lines<'a> {
    runs: Vec<&'a [u8]>,
    /// The next run and the byte offset in it.
    run: usize,
    offset: usize,
    per_call: usize,
}

impl<'a> Lines<'a> {
    /// `runs` over `calls` windows, front-loaded (done by half-way) so that the lines
    /// arrive before the GEMM ends.
    fn new(runs: Vec<&'a [u8]>, calls: usize) -> Self {
        let lines: usize = runs.iter().map(|r| r.len().div_ceil(64)).sum();
        Lines { runs, run: 0, offset: 0, per_call: (2 * lines).div_ceil(calls.max(1)) }
    }

    /// The next lines, at most `capacity`, inside one run.
    fn window(&mut self, capacity: usize) -> (*const u8, usize) {
        while let Some(r) = self.runs.get(self.run) {
            if self.offset < r.len() {
                let lines = ((r.len() - self.offset).div_ceil(64)).min(self.per_call).min(capacity);
                let at = r[self.offset..].as_ptr();
                self.offset += lines * 64;
                return (at, lines);
            }
            (self.run, self.offset) = (self.run + 1, 0);
        }
        (std::ptr::null(), 0)
    }
}

/// Floats of one worker's slot: a packed input, two product buffers, a staging row.
pub(super) fn slot_floats(b: usize, prod: usize, row: usize) -> usize {
    b + 2 * prod + row
}

/// Runs units `0..units` of `job` on `workers` threads, each with its own
/// [`slot_floats`]-sized slot of `slots`.
///
/// # Safety
/// The job's kernel is supported; its units write disjoint outputs.
pub(super) unsafe fn run<J: BandJob>(job: &J, units: usize, slots: &mut [f32], workers: usize) {
    let slot_len = slot_floats(job.b_floats(), job.prod_floats(), job.row_floats());
    let next = AtomicUsize::new(0);
    let claim = || Some(next.fetch_add(1, Ordering::Relaxed)).filter(|&u| u < units);
    let work = |slot: &mut [f32]| {
        let (b, rest) = slot.split_at_mut(job.b_floats());
        let (ps, row) = rest.split_at_mut(2 * job.prod_floats());
        let (mut p_cur, mut p_prev) = ps.split_at_mut(job.prod_floats());
        let Some(mut u) = claim() else { return };
        // SAFETY (every call below): the kernel is supported and units are disjoint
        // (contract); each buffer is this worker's.
        unsafe { job.pack(u, b) };
        let mut pending: Option<usize> = None;
        let (kernel, nr, mr) = (job.kernel(), job.kernel().nr(), job.kernel().mr());
        loop {
            let ahead = claim();
            let n_panels = job.n_panels(u);
            let ldc = n_panels * nr;
            let steps = panel_gemm::steps(kernel, job.depth(), job.m_panels(), n_panels);
            let mut lines = Lines::new(ahead.map_or(Vec::new(), |v| job.input_runs(v)), steps);
            let mut writes = Spread::new(pending.map_or(0, |v| job.write_parts(v)), steps);
            {
                let (p_prev, row) = (&mut *p_prev, &mut *row);
                let pp = p_cur.as_mut_ptr();
                let before = |capacity: usize| {
                    if let Some(v) = pending {
                        let parts = writes.next();
                        if !parts.is_empty() {
                            unsafe { job.write(v, p_prev, row, parts) };
                        }
                    }
                    lines.window(capacity)
                };
                let b = &b[..n_panels * job.depth() * nr];
                // SAFETY: tile (ir, jp) lies in p_cur (m_panels·mr rows of ldc ≤ the
                // buffer's columns, the job's promise), this worker's own; the windows
                // lie in the job's input.
                unsafe {
                    panel_gemm::gemm_with(
                        kernel,
                        job.depth(),
                        job.a(),
                        job.m_panels(),
                        b,
                        n_panels,
                        ldc,
                        |ir, jp| pp.add(ir * mr * ldc + jp * nr),
                        before,
                    )
                };
            }
            if let Some(v) = pending {
                unsafe { job.write(v, p_prev, row, writes.rest()) };
            }
            pending = Some(u);
            std::mem::swap(&mut p_cur, &mut p_prev);
            match ahead {
                Some(v) => {
                    unsafe { job.pack(v, b) };
                    u = v;
                }
                None => break,
            }
        }
        if let Some(v) = pending {
            unsafe { job.write(v, p_prev, row, 0..job.write_parts(v)) };
        }
        super::stride2::store_fence();
    };
    run_on_workers(slots, slot_len, workers, work);
}
