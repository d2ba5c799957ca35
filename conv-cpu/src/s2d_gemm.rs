//! `Gemm1x1`'s space-to-depth form on the CPU: a forward convolution whose kernel equals
//! its stride (no padding, no dilation, ungrouped; Real-CUGAN's 2x2 stride-2
//! downsamplers) reads each input pixel through exactly one tap, so it is a 1x1
//! convolution of the input rearranged space-to-depth: `Out[k, pixel] = W[k, (c, r, s)] ·
//! X[(c, r, s), pixel]`. A worker takes a band of whole output rows: packs the input rows
//! they read (one contiguous run of each channel plane) straight into the microkernel's
//! B panels, each input row split into its stride-2 column phases by a permute per 16
//! lanes ([`super::stride2`]), runs the engine's microkernel on its own tile over the
//! band ([`super::panel_gemm`]) and writes each channel's rows of the band as one run
//! (non-temporal stores), the bias and the epilogue on the way, all compiled for the
//! kernel's ISA. The next band's input is fetched into L2, and the previous band written
//! out, during this band's GEMM ([`super::band_pipeline`]).
//!
//! The implicit GEMM packs the same matrix a column block (128 pixels) at a time, a
//! strided gather per tap from 128 short runs of the input (compiled to 8-lane shuffles
//! with a scalar tail): on Real-CUGAN's 64-channel layer packing took longer than its
//! microkernel (perf, 2026-12-07: 34% of the layer's samples against 35%).
//!
//! Each output sums its reduction `(c, r, s)` in the implicit GEMM's order and blocks
//! (`c·taps + r·s_w + s`, `KC` rows a microkernel call), whatever the band or the image
//! size, so the form is one of the size-independent kernels
//! (`ConvRounding::SizeIndependent`) and gives the implicit GEMM's bits on the same
//! microkernel.

use super::band_pipeline::{self, BandJob, BandOperands};
use super::stride2;
use crate::implicit_gemm::{Element, MicroKernel};
use conv_engine::error::ConvError;
use conv_engine::problem::ConvProblem;
use conv_engine::{ConvGeometry, ConvKind, Epilogue};
use std::any::TypeId;
use std::ops::Range;

/// Bytes of one band's packed input and its products: half of this CPU's L2 (1 MiB of
/// Sapphire Rapids' 2 MiB), with room for the worker's second product buffer
/// ([`band_pipeline`]) and the next band's input as it is fetched. On the 2 MiB-L2 Xeon
/// (2026-12-07, `realcugan_layers`), 1 MiB ran convrelu_13 (128 channels, one output row
/// of 270 pixels per 700 KiB) 1 ms faster than 512 KiB and convrelu_9 (64) as fast.
fn band_bytes() -> usize {
    (super::gemm1x1::l2_slab_bytes() / 2).clamp(128 << 10, 2 << 20)
}

/// A forward, ungrouped convolution whose kernel is its stride, unpadded and undilated:
/// every input pixel it reads is read by one tap of one output pixel.
pub(super) fn fits(g: &ConvGeometry) -> bool {
    g.kind == ConvKind::Forward
        && g.groups == 1
        && g.kernel == g.stride
        && g.pad_begin == [0, 0]
        && g.pad_end == [0, 0]
        && g.dilation == [1, 1]
}

/// Rows of the GEMM's reduction: every (input channel, tap).
fn depth(g: &ConvGeometry) -> usize {
    g.in_channels * g.taps()
}

/// Rows of the packed weights: the output channels, padded to the tile's `mr`.
fn m_pad(g: &ConvGeometry, kernel: MicroKernel) -> usize {
    g.out_channels.next_multiple_of(kernel.mr())
}

/// Output rows per band (at least one).
fn band_rows(g: &ConvGeometry, kernel: MicroKernel) -> usize {
    let [p, q] = g.out_hw();
    let per_row = (depth(g) + m_pad(g, kernel)) * q * 4;
    (band_bytes() / per_row.max(1)).clamp(1, p.max(1))
}

/// Most pixels (GEMM columns, padded to whole panels) of one band.
fn max_cols(g: &ConvGeometry, kernel: MicroKernel) -> usize {
    (band_rows(g, kernel) * g.out_hw()[1]).next_multiple_of(kernel.nr())
}

/// Floats of one worker's slot.
fn slot_floats(g: &ConvGeometry, kernel: MicroKernel) -> usize {
    let cols = max_cols(g, kernel);
    band_pipeline::slot_floats(depth(g) * cols, m_pad(g, kernel) * cols, 0)
}

/// Floats of scratch [`run`] takes with `threads` workers on `kernel`: the packed weights
/// and one slot per worker.
pub(super) fn scratch_floats(g: &ConvGeometry, kernel: MicroKernel, threads: usize) -> usize {
    m_pad(g, kernel) * depth(g) + threads.max(1) * slot_floats(g, kernel)
}

/// The workspace [`run`] takes (all of it the engine's, metered), or `None` when `problem`
/// is not such a convolution.
pub(super) fn workspace_bytes(problem: &ConvProblem, kernel: MicroKernel, threads: usize) -> Option<usize> {
    let g = problem.geometry();
    fits(g).then(|| scratch_floats(g, kernel, threads) * 4)
}

/// Output rows `rows` of every image, with the bias and `epilogue` (residual indexed as
/// `out`) in the write-out, on `kernel` (a supported microkernel, whose tile the packing
/// follows). `scratch` holds [`scratch_floats`]`(g, kernel, threads)` floats. Checks the
/// geometry, the kernel, the rows and every slice's length before the unsafe GEMMs.
#[allow(clippy::too_many_arguments)]
pub(super) fn run<T: Element>(
    kernel: MicroKernel,
    g: &ConvGeometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    epilogue: &Epilogue<&[T]>,
    out: &mut [T],
    rows: Range<usize>,
    threads: usize,
    scratch: &mut [f32],
) -> Result<(), ConvError> {
    super::check_executor_args(fits(g), g, &rows, x, w, bias, epilogue.residual, out)?;
    assert!(kernel.is_supported(), "{kernel:?}: not supported by this CPU");
    let threads = threads.max(1);
    let need = scratch_floats(g, kernel, threads);
    if scratch.len() < need {
        return Err(ConvError::BufferLength { op: "conv", what: "scratch", len: scratch.len(), needed: need });
    }
    let (mr, m_pad, depth, k_n) = (kernel.mr(), m_pad(g, kernel), depth(g), g.out_channels);
    let (a, per_worker) = scratch[..need].split_at_mut(m_pad * depth);
    // w[k][c][r][s] is row k of the GEMM's A, its reduction index (c, r, s) contiguous:
    // mr-row panels a[panel][kk][i].
    for (r0, panel) in a.chunks_exact_mut(depth * mr).enumerate() {
        for kk in 0..depth {
            for i in 0..mr {
                let k = r0 * mr + i;
                panel[kk * mr + i] = if k < k_n { w[k * depth + kk].to_f32() } else { 0.0 };
            }
        }
    }
    let band = band_rows(g, kernel);
    let job = Job(BandOperands::new(kernel, g, x, a, bias, epilogue, out, rows, band, max_cols(g, kernel)));
    let units = job.units();
    // SAFETY: the kernel is supported (asserted above); units write disjoint output rows
    // (distinct images or bands).
    unsafe { band_pipeline::run(&job, units, per_worker, threads.min(units.max(1))) };
    Ok(())
}

/// One call's operands, shared by its workers.
struct Job<'a, T>(BandOperands<'a, T>);

impl<'a, T> std::ops::Deref for Job<'a, T> {
    type Target = BandOperands<'a, T>;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<T: Element> Job<'_, T> {
    /// See [`BandJob::pack`]: channel by channel, each one run of its plane (the band's
    /// input rows in memory order).
    #[inline(always)]
    unsafe fn pack_body(&self, u: usize, b: &mut [f32]) {
        let (g, kernel) = (self.g, self.kernel);
        let [h, wd] = g.in_size;
        let [_, q] = self.out_hw;
        let [sh, sw] = g.stride;
        let (c_n, depth, nr) = (g.in_channels, depth(g), kernel.nr());
        let (n, out_rows) = self.unit_rows(u);
        let pixels = out_rows.len() * q;
        assert!(pixels <= self.max_cols, "a band of {} pixels, at most {} fit", pixels, self.max_cols);
        let n_panels = pixels.div_ceil(nr);
        // Lanes past the band's last pixel: zero, so that their (unwritten) products stay
        // finite.
        let tail = pixels % nr;
        if tail != 0 {
            let last = &mut b[(n_panels - 1) * depth * nr..][..depth * nr];
            for row in last.chunks_exact_mut(nr) {
                row[tail..].fill(0.0);
            }
        }
        for c in 0..c_n {
            let plane = &self.x[(n * c_n + c) * h * wd..][..h * wd];
            for oy in out_rows.clone() {
                let j0 = (oy - out_rows.start) * q;
                for r in 0..sh {
                    let src = &plane[(oy * sh + r) * wd..][..q * sw];
                    // Reduction rows (c, r, 0..sw) of pixels j0..j0 + q, split where the
                    // pixels cross from one panel into the next.
                    let kk0 = (c * sh + r) * sw;
                    let mut ox = 0;
                    while ox < q {
                        let (jp, lane) = ((j0 + ox) / nr, (j0 + ox) % nr);
                        let len = (nr - lane).min(q - ox);
                        let rows_at = &mut b[(jp * depth + kk0) * nr..][..sw * nr];
                        let seg = &src[ox * sw..(ox + len) * sw];
                        match sw {
                            1 => T::widen(seg, &mut rows_at[lane..lane + len]),
                            2 => {
                                let (even, odd) = rows_at.split_at_mut(nr);
                                // SAFETY: the kernel's ISA is supported (contract).
                                unsafe {
                                    stride2::split_pairs(
                                        kernel,
                                        seg,
                                        &mut even[lane..lane + len],
                                        &mut odd[lane..][..len],
                                    )
                                };
                            }
                            _ => {
                                for (s, row) in rows_at.chunks_exact_mut(nr).enumerate() {
                                    for (d, v) in row[lane..lane + len].iter_mut().zip(seg[s..].iter().step_by(sw)) {
                                        *d = v.to_f32();
                                    }
                                }
                            }
                        }
                        ox += len;
                    }
                }
            }
        }
    }

    /// See [`BandJob::write`]: parts are output channels, the band's rows of each one run
    /// of its plane.
    #[inline(always)]
    unsafe fn write_body(&self, u: usize, prod: &mut [f32], parts: Range<usize>) {
        let (g, kernel) = (self.g, self.kernel);
        let [p, q] = self.out_hw;
        let k_n = g.out_channels;
        let (n, out_rows) = self.unit_rows(u);
        let pixels = out_rows.len() * q;
        let ldc = pixels.next_multiple_of(kernel.nr());
        let (plain, is_f32) = (self.epilogue.is_plain(), TypeId::of::<T>() == TypeId::of::<f32>());
        for k in parts {
            // The epilogue works on the products in place (read once).
            let acc = &mut prod[k * ldc..][..pixels];
            if let Some(b) = self.bias {
                let bv = b[k].to_f32();
                acc.iter_mut().for_each(|v| *v += bv);
            }
            let start = ((n * k_n + k) * p + out_rows.start) * q;
            if !plain {
                let res = self.epilogue.residual.map(|r| r[start..start + pixels].iter().map(|v| v.to_f32()));
                self.epilogue.apply_row(acc, res);
            }
            // SAFETY: rows out_rows of plane (n, k) are this unit's alone.
            let dst = unsafe { std::slice::from_raw_parts_mut(self.out.ptr().add(start), pixels) };
            if is_f32 {
                // SAFETY: the ISA is supported (contract).
                unsafe { stride2::stream_copy(kernel, acc, bytemuck::cast_slice_mut(dst)) };
            } else {
                T::narrow(acc, dst);
            }
        }
    }
}

impl<T: Element> BandJob for Job<'_, T> {
    fn kernel(&self) -> MicroKernel {
        self.kernel
    }

    fn depth(&self) -> usize {
        depth(self.g)
    }

    fn a(&self) -> &[f32] {
        self.a
    }

    fn m_panels(&self) -> usize {
        m_pad(self.g, self.kernel) / self.kernel.mr()
    }

    fn b_floats(&self) -> usize {
        depth(self.g) * self.max_cols
    }

    fn prod_floats(&self) -> usize {
        m_pad(self.g, self.kernel) * self.max_cols
    }

    fn row_floats(&self) -> usize {
        0
    }

    fn n_panels(&self, u: usize) -> usize {
        (self.unit_rows(u).1.len() * self.out_hw[1]).div_ceil(self.kernel.nr())
    }

    fn input_runs(&self, u: usize) -> Vec<&[u8]> {
        let [h, wd] = self.g.in_size;
        let (n, rows) = self.unit_rows(u);
        let sh = self.g.stride[0];
        let c_n = self.g.in_channels;
        (0..c_n)
            .map(|c| {
                bytemuck::cast_slice(&self.x[((n * c_n + c) * h + rows.start * sh) * wd..][..rows.len() * sh * wd])
            })
            .collect()
    }

    fn write_parts(&self, _u: usize) -> usize {
        self.g.out_channels
    }

    /// Compiled for the kernel's ISA (as the implicit GEMM's units are): the stride-2
    /// split at its width.
    unsafe fn pack(&self, u: usize, b: &mut [f32]) {
        crate::isa_entry!(self.kernel, [T: Element], [T], (
            job: &Job<'_, T> = self,
            u: usize = u,
            b: &mut [f32] = b,
        ) => job.pack_body(u, b))
    }

    /// Compiled for the kernel's ISA: the bias, the epilogue and the stores at its width.
    unsafe fn write(&self, u: usize, prod: &mut [f32], _row: &mut [f32], parts: Range<usize>) {
        crate::isa_entry!(self.kernel, [T: Element], [T], (
            job: &Job<'_, T> = self,
            u: usize = u,
            prod: &mut [f32] = prod,
            parts: Range<usize> = parts,
        ) => job.write_body(u, prod, parts))
    }
}

#[cfg(test)]
#[path = "s2d_gemm_tests.rs"]
mod tests;
