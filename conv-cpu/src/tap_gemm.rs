//! `Gemm1x1`'s transposed form on the CPU: an ungrouped transposed convolution as one GEMM
//! per band of input rows, `P[(tap, k), pixel] = W[(tap, k), c] · X[c, pixel]` (each tap a
//! 1x1 convolution), whose write-out sums each output pixel's products in a fixed tap order
//! with the bias and applies the epilogue (col2im; ncnn runs its deconvolutions so).
//!
//! The implicit GEMM runs a transposed layer over output pixels with every tap in its
//! reduction, about `stride²` times the work (3 of 4 taps are zero for Real-CUGAN's 2x2
//! stride-2 layers, 12 of 16 for its 4x4 one). Where the kernel equals the stride, each
//! output pixel is one product: the write-out only interleaves the taps. (As a 1x1
//! convolution to `s²·K` channels and a pixel shuffle, that layer wrote and read the
//! `s²·K`-channel map once more: 68 MB per layer in Real-CUGAN's 2x at 256².) A worker
//! takes a band of output rows: packs the input rows they read (a quarter of L2 with
//! their products), runs the engine's microkernel over every tap on its own tile (AVX-512's
//! 14×32 where the CPU has it; [`super::panel_gemm`]) and writes each output row once, the
//! interleave a permute per 16 lanes ([`super::stride2`]) and the stores non-temporal, all
//! compiled for the kernel's ISA. The write-out of one band runs between the microkernel
//! calls of the next band's GEMM ([`super::band_pipeline`]): the output is 4x the input
//! for a 2x2 stride-2 layer, and written after the GEMM it took as long as the GEMM.
//!
//! Each output is summed in one fixed order whatever the band or the image size (each
//! product over the input channels, then the taps in turn), so the form is also one of
//! the size-independent kernels (`ConvRounding::SizeIndependent`, which tiled == untiled
//! needs).

use super::band_pipeline::{self, BandJob, BandOperands};
use super::stride2;
use crate::implicit_gemm::{Element, MicroKernel};
use conv_engine::error::ConvError;
use conv_engine::problem::ConvProblem;
use conv_engine::{ConvGeometry, ConvKind, Epilogue};
use std::any::TypeId;
use std::ops::Range;

/// Bytes of one band's packed input rows and their products with every tap: a quarter
/// of this CPU's L2 (512 KiB of Sapphire Rapids' 2 MiB), so that a worker's two product
/// buffers ([`band_pipeline`]) stay in L2 with the packed input and the weights. On the
/// 2 MiB-L2 Xeon (2026-12-07, `realcugan_layers`), 512 KiB ran deconvrelu_2 (64 channels)
/// 0.5-1 ms faster than 1 MiB and deconvrelu_1 (128) as fast.
fn band_bytes() -> usize {
    (super::gemm1x1::l2_slab_bytes() / 4).clamp(128 << 10, 1 << 20)
}

/// An ungrouped transposed convolution.
pub(super) fn fits(g: &ConvGeometry) -> bool {
    g.kind == ConvKind::Transposed && g.groups == 1
}

/// Whether each output pixel is one tap of one input pixel: kernel = stride, no padding,
/// no dilation, no output padding (the write-out then only interleaves).
fn kernel_is_stride(g: &ConvGeometry) -> bool {
    g.kernel == g.stride
        && g.pad_begin == [0, 0]
        && g.pad_end == [0, 0]
        && g.dilation == [1, 1]
        && g.output_padding == [0, 0]
}

/// Rows of the packed weights: every (tap, output channel), padded to the tile's `mr`.
fn m_pad(g: &ConvGeometry, kernel: MicroKernel) -> usize {
    (g.taps() * g.out_channels).next_multiple_of(kernel.mr())
}

/// Input rows per band (at least one); a band is `stride` times as many output rows.
fn band_rows(g: &ConvGeometry, kernel: MicroKernel) -> usize {
    let per_row = (m_pad(g, kernel) + g.in_channels) * g.in_size[1].next_multiple_of(kernel.nr()) * 4;
    (band_bytes() / per_row.max(1)).clamp(1, g.in_size[0].max(1))
}

/// Most input rows one band of output rows reads: its own and those the kernel's extent
/// reaches across the band's edge.
fn band_input_rows(g: &ConvGeometry, kernel: MicroKernel) -> usize {
    let reach = ((g.kernel[0] - 1) * g.dilation[0]).div_ceil(g.stride[0]) + 1;
    (band_rows(g, kernel) + reach).min(g.in_size[0])
}

/// Most pixels (GEMM columns, padded to whole panels) one band reads.
fn max_cols(g: &ConvGeometry, kernel: MicroKernel) -> usize {
    (band_input_rows(g, kernel) * g.in_size[1]).next_multiple_of(kernel.nr())
}

/// Floats of one worker's slot.
fn slot_floats(g: &ConvGeometry, kernel: MicroKernel) -> usize {
    let cols = max_cols(g, kernel);
    band_pipeline::slot_floats(g.in_channels * cols, m_pad(g, kernel) * cols, g.out_hw()[1])
}

/// Floats of scratch [`run`] takes with `threads` workers on `kernel`: the packed weights
/// and one slot per worker.
pub(super) fn scratch_floats(g: &ConvGeometry, kernel: MicroKernel, threads: usize) -> usize {
    m_pad(g, kernel) * g.in_channels + threads.max(1) * slot_floats(g, kernel)
}

/// The workspace [`run`] takes (all of it the engine's, metered), or `None` when `problem`
/// is not such a deconvolution.
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
    let (c_n, k_n, taps) = (g.in_channels, g.out_channels, g.taps());
    let threads = threads.max(1);
    let need = scratch_floats(g, kernel, threads);
    if scratch.len() < need {
        return Err(ConvError::BufferLength {
            op: "conv_transpose",
            what: "scratch",
            len: scratch.len(),
            needed: need,
        });
    }
    let (mr, m_pad) = (kernel.mr(), m_pad(g, kernel));
    let (a, per_worker) = scratch[..need].split_at_mut(m_pad * c_n);
    // w[c][k][tap] packed as mr-row panels of rows (tap, k): a[panel][c][i].
    for (r0, panel) in a.chunks_exact_mut(c_n * mr).enumerate() {
        for c in 0..c_n {
            for i in 0..mr {
                let r = r0 * mr + i;
                let (t, k) = (r / k_n, r % k_n);
                panel[c * mr + i] = if t < taps { w[(c * k_n + k) * taps + t].to_f32() } else { 0.0 };
            }
        }
    }
    // Bands of output rows, `stride` times the input rows of a band.
    let band = band_rows(g, kernel) * g.stride[0];
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

/// Where a unit lies: its image, its output rows and the input rows they read.
struct Layout {
    n: usize,
    out_rows: Range<usize>,
    ys: Range<usize>,
}

impl<T: Element> Job<'_, T> {
    /// The input row output row `oy` reads through filter row `r`, if any.
    fn source_row(&self, oy: usize, r: usize) -> Option<usize> {
        let g = self.g;
        let (sh, h) = (g.stride[0] as isize, g.in_size[0]);
        let num = oy as isize + g.pad_begin[0] as isize - (r * g.dilation[0]) as isize;
        (num >= 0 && num % sh == 0 && ((num / sh) as usize) < h).then(|| (num / sh) as usize)
    }

    fn layout(&self, u: usize) -> Layout {
        let (n, out_rows) = self.unit_rows(u);
        // The input rows these output rows read: consecutive rows of each plane.
        let (mut y_lo, mut y_hi) = (self.g.in_size[0], 0);
        for oy in out_rows.clone() {
            for r in 0..self.g.kernel[0] {
                if let Some(iy) = self.source_row(oy, r) {
                    (y_lo, y_hi) = (y_lo.min(iy), y_hi.max(iy + 1));
                }
            }
        }
        Layout { n, out_rows, ys: y_lo..y_hi.max(y_lo) }
    }

    /// See [`BandJob::pack`].
    #[inline(always)]
    unsafe fn pack_body(&self, u: usize, b: &mut [f32]) {
        let (g, nr) = (self.g, self.kernel.nr());
        let [h, wd] = g.in_size;
        let c_n = g.in_channels;
        let Layout { n, ys, .. } = self.layout(u);
        let pixels = ys.len() * wd;
        assert!(pixels <= self.max_cols, "a band reads {} input rows, at most {} fit", ys.len(), self.max_cols / wd);
        let n_panels = pixels.div_ceil(nr);
        for c in 0..c_n {
            let src = &self.x[((n * c_n + c) * h + ys.start.min(h)) * wd..][..pixels];
            for jp in 0..n_panels {
                let lanes = &mut b[(jp * c_n + c) * nr..][..nr];
                let from = &src[(jp * nr).min(pixels)..((jp + 1) * nr).min(pixels)];
                if from.len() == nr {
                    // Whole panels as fixed 16-lane copies (a variable-length copy is a
                    // memcpy call per panel).
                    for (s, d) in from.chunks_exact(16).zip(lanes.chunks_exact_mut(16)) {
                        T::widen_panel(s.try_into().expect("16 values"), d.try_into().expect("16 lanes"));
                    }
                } else {
                    T::widen(from, &mut lanes[..from.len()]);
                    lanes[from.len()..].fill(0.0);
                }
            }
        }
    }

    /// See [`BandJob::write`]: part `i` is output row `i % rows` of channel `i / rows`.
    #[inline(always)]
    unsafe fn write_body(&self, u: usize, prod: &[f32], row_f32: &mut [f32], parts: Range<usize>) {
        let (g, kernel) = (self.g, self.kernel);
        let [_, wd] = g.in_size;
        let [p, q] = self.out_hw;
        let [sh, sw] = g.stride;
        let [kr, ks] = g.kernel;
        let [_, dw] = g.dilation;
        let pad_w = g.pad_begin[1] as isize;
        let k_n = g.out_channels;
        let Layout { n, out_rows, ys } = self.layout(u);
        let ldc = (ys.len() * wd).div_ceil(kernel.nr()) * kernel.nr();
        let row = &mut row_f32[..q];
        // Products of filter tap (r, t) and output channel k with input row iy.
        let tap = |r: usize, t: usize, k: usize, iy: usize| {
            &prod[((r * ks + t) * k_n + k) * ldc + (iy - ys.start) * wd..][..wd]
        };
        let interleave = kernel_is_stride(g);
        let is_f32 = TypeId::of::<T>() == TypeId::of::<f32>();
        for part in parts {
            let (k, oy) = (part / out_rows.len(), out_rows.start + part % out_rows.len());
            let bv = self.bias.map_or(0.0, |b| b[k].to_f32());
            let start = ((n * k_n + k) * p + oy) * q;
            if interleave {
                let (i, iy) = (oy % sh, oy / sh);
                if sw == 2 {
                    // SAFETY: the kernel's ISA is supported (contract).
                    unsafe { stride2::merge_pairs(kernel, tap(i, 0, k, iy), tap(i, 1, k, iy), bv, row) };
                } else {
                    for j in 0..sw {
                        for (xx, v) in tap(i, j, k, iy).iter().enumerate() {
                            row[sw * xx + j] = v + bv;
                        }
                    }
                }
            } else {
                // The bias, then each tap's products in (r, t) order (col2im).
                row.fill(bv);
                for r in 0..kr {
                    let Some(iy) = self.source_row(oy, r) else { continue };
                    for t in 0..ks {
                        // Input column ix lands on output column ix·sw + off.
                        let off = (t * dw) as isize - pad_w;
                        let lo = if off < 0 { ((-off) as usize).div_ceil(sw) } else { 0 };
                        let hi = (((q as isize - 1 - off).div_euclid(sw as isize)) + 1).clamp(0, wd as isize);
                        let src = tap(r, t, k, iy);
                        for ix in lo..(hi as usize).max(lo) {
                            row[((ix * sw) as isize + off) as usize] += src[ix];
                        }
                    }
                }
            }
            if !self.epilogue.is_plain() {
                let res = self.epilogue.residual.map(|r| r[start..start + q].iter().map(|v| v.to_f32()));
                self.epilogue.apply_row(row, res);
            }
            // SAFETY: output row oy of plane (n, k) is this unit's alone.
            let dst = unsafe { std::slice::from_raw_parts_mut(self.out.ptr().add(start), q) };
            if is_f32 {
                // SAFETY: the ISA is supported (contract).
                unsafe { stride2::stream_copy(kernel, row, bytemuck::cast_slice_mut(dst)) };
            } else {
                T::narrow(row, dst);
            }
        }
    }
}

impl<T: Element> BandJob for Job<'_, T> {
    fn kernel(&self) -> MicroKernel {
        self.kernel
    }

    fn depth(&self) -> usize {
        self.g.in_channels
    }

    fn a(&self) -> &[f32] {
        self.a
    }

    fn m_panels(&self) -> usize {
        m_pad(self.g, self.kernel) / self.kernel.mr()
    }

    fn b_floats(&self) -> usize {
        self.g.in_channels * self.max_cols
    }

    fn prod_floats(&self) -> usize {
        m_pad(self.g, self.kernel) * self.max_cols
    }

    fn row_floats(&self) -> usize {
        self.out_hw[1]
    }

    fn n_panels(&self, u: usize) -> usize {
        (self.layout(u).ys.len() * self.g.in_size[1]).div_ceil(self.kernel.nr())
    }

    fn input_runs(&self, u: usize) -> Vec<&[u8]> {
        let [h, wd] = self.g.in_size;
        let (n, ys, c_n) = (u / self.bands, self.layout(u).ys, self.g.in_channels);
        (0..c_n)
            .map(|c| bytemuck::cast_slice(&self.x[((n * c_n + c) * h + ys.start) * wd..][..ys.len() * wd]))
            .collect()
    }

    fn write_parts(&self, u: usize) -> usize {
        self.g.out_channels * self.layout(u).out_rows.len()
    }

    /// Compiled for the kernel's ISA (as the implicit GEMM's units are), so that the
    /// packing runs at its width.
    unsafe fn pack(&self, u: usize, b: &mut [f32]) {
        crate::isa_entry!(self.kernel, [T: Element], [T], (
            job: &Job<'_, T> = self,
            u: usize = u,
            b: &mut [f32] = b,
        ) => job.pack_body(u, b))
    }

    /// Compiled for the kernel's ISA: the interleave, the epilogue and the stores at its
    /// width.
    unsafe fn write(&self, u: usize, prod: &mut [f32], row: &mut [f32], parts: Range<usize>) {
        crate::isa_entry!(self.kernel, [T: Element], [T], (
            job: &Job<'_, T> = self,
            u: usize = u,
            prod: &[f32] = prod,
            row: &mut [f32] = row,
            parts: Range<usize> = parts,
        ) => job.write_body(u, prod, row, parts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conv_engine::Activation;
    use half::{bf16, f16};
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn check<T: Element>(
        kernel: MicroKernel,
        g: &ConvGeometry,
        rng: &mut StdRng,
        act: Activation,
        with_res: bool,
        tol: f64,
    ) {
        let rand = |n: usize, rng: &mut StdRng| -> Vec<T> {
            (0..n).map(|_| T::from_f32(rng.random_range(-1.0..1.0))).collect()
        };
        let (x, w, b, res) =
            (rand(g.input_len(), rng), rand(g.weight_len(), rng), rand(g.out_channels, rng), rand(g.output_len(), rng));
        let widen = |v: &[T]| v.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
        let [p, _] = g.out_hw();
        let mut want = vec![0f64; g.output_len()];
        crate::direct::direct_conv::<f64, f64>(g, &widen(&x), &widen(&w), Some(&widen(&b)), &mut want, 0..p);
        let ep = Epilogue { activation: act, residual: with_res.then_some(res.as_slice()), scale: 0.5 };
        let mut out = vec![T::from_f32(f32::NAN); g.output_len()];
        let threads = 2;
        let mut scratch = vec![f32::NAN; scratch_floats(g, kernel, threads)];
        // Two bands of output rows, the first ending inside an input row's taps.
        for rows in [0..p / 3, p / 3..p] {
            run(kernel, g, &x, &w, Some(&b), &ep, &mut out, rows, threads, &mut scratch).unwrap();
        }
        for (i, (o, c)) in out.iter().zip(&want).enumerate() {
            let r = if with_res { res[i].to_f64() } else { 0.0 };
            let want = (act.apply(*c as f32) as f64 + r) * 0.5;
            let o = o.to_f64();
            let taps = g.in_channels as f64;
            assert!(
                (o - want).abs() <= tol * taps.sqrt() * want.abs().max(1.0),
                "{kernel:?} {g:?} {act:?} residual {with_res}: element {i}: {o} vs {want}"
            );
        }
    }

    /// Against the f64 definition with every microkernel this CPU has: kernels equal to
    /// their strides (square and not) and overlapping ones with padding, dilation and
    /// output padding; f32, f16 and bf16, bias, every activation with and without a
    /// residual, rows run in two chunks, inputs wide enough for bands of one row, the
    /// output poisoned first.
    #[test]
    fn matches_the_f64_definition_with_every_microkernel() {
        for (mk, why) in MicroKernel::all_unsupported() {
            test_support::skipped(format!("{mk:?}: this CPU lacks {why}"));
        }
        let mut rng = StdRng::seed_from_u64(0x2d2);
        let acts = [Activation::Identity, Activation::LeakyRelu(0.1), Activation::Relu, Activation::Silu];
        // (kernel, stride, pad begin, pad end, dilation, output padding, N, C, K, input size)
        type Shape =
            ([usize; 2], [usize; 2], [usize; 2], [usize; 2], [usize; 2], [usize; 2], usize, usize, usize, [usize; 2]);
        let z = [0, 0];
        let one = [1, 1];
        let shapes: [Shape; 13] = [
            // Kernel = stride: the interleaving write-out.
            ([2, 2], [2, 2], z, z, one, z, 1, 64, 8, [5, 19]),
            ([2, 2], [2, 2], z, z, one, z, 2, 3, 5, [7, 4]),
            ([3, 3], [3, 3], z, z, one, z, 1, 7, 4, [3, 6]),
            ([2, 3], [2, 3], z, z, one, z, 2, 5, 3, [4, 5]),
            ([1, 1], [1, 1], z, z, one, z, 1, 6, 2, [3, 3]),
            ([2, 2], [2, 2], z, z, one, z, 1, 300, 2, [3, 7]),
            // Rows wide enough for bands of a single input row.
            ([2, 2], [2, 2], z, z, one, z, 1, 4, 64, [5, 1100]),
            // Overlapping taps summed (col2im): Real-CUGAN's 4x4 stride-2 output layer,
            // output padding, stride 1, a kernel smaller than its stride (pixels no tap
            // reaches), dilation, unequal axes, and a band edge inside a tap's reach.
            ([4, 4], [2, 2], [3, 3], [3, 3], one, z, 1, 8, 3, [6, 20]),
            ([3, 3], [2, 2], [1, 1], [1, 1], one, [1, 1], 2, 5, 4, [5, 7]),
            ([3, 3], [1, 1], z, z, one, z, 1, 6, 5, [4, 9]),
            ([2, 2], [3, 3], [1, 0], [0, 1], one, z, 1, 3, 2, [4, 5]),
            ([3, 2], [2, 1], [1, 0], [2, 1], [2, 1], z, 1, 4, 3, [5, 6]),
            ([4, 4], [2, 2], [3, 3], [3, 3], one, z, 1, 3, 40, [6, 1500]),
        ];
        for kernel in MicroKernel::all_supported() {
            for (i, &(kernel_size, stride, pad_begin, pad_end, dilation, output_padding, batch, c, k, size)) in
                shapes.iter().enumerate()
            {
                let g = ConvGeometry {
                    kind: ConvKind::Transposed,
                    batch,
                    in_channels: c,
                    in_size: size,
                    out_channels: k,
                    kernel: kernel_size,
                    stride,
                    pad_begin,
                    pad_end,
                    dilation,
                    output_padding,
                    groups: 1,
                };
                assert!(g.out_size().is_some(), "{g:?}");
                assert!(fits(&g));
                assert!(size[1] < 1000 || band_rows(&g, kernel) < size[0], "{g:?} runs in several bands");
                assert_eq!(kernel_is_stride(&g), i < 7, "{g:?}");
                let act = acts[i % acts.len()];
                check::<f32>(kernel, &g, &mut rng, act, i % 2 == 0, 1e-6);
                check::<f32>(kernel, &g, &mut rng, Activation::Identity, i % 2 == 1, 1e-6);
                check::<f16>(kernel, &g, &mut rng, act, i % 2 == 1, 2e-3);
                check::<bf16>(kernel, &g, &mut rng, act, i % 2 == 0, 1e-2);
            }
        }
    }

    /// Refused before any unsafe GEMM: a grouped layer, rows past the output, a short
    /// input, a short scratch.
    #[test]
    fn refuses_what_it_does_not_run_before_the_gemm() {
        let mut g = ConvGeometry {
            kind: ConvKind::Transposed,
            batch: 1,
            in_channels: 4,
            in_size: [3, 5],
            out_channels: 2,
            kernel: [2, 2],
            stride: [2, 2],
            pad_begin: [0, 0],
            pad_end: [0, 0],
            dilation: [1, 1],
            output_padding: [0, 0],
            groups: 1,
        };
        let kernel = MicroKernel::detect();
        let ep = Epilogue::default();
        let (x, w, mut out) = (vec![1f32; g.input_len()], vec![1f32; g.weight_len()], vec![0f32; g.output_len()]);
        let mut scratch = vec![0f32; scratch_floats(&g, kernel, 2)];
        let e = run(kernel, &g, &x, &w, None, &ep, &mut out, 0..7, 2, &mut scratch).unwrap_err();
        assert!(matches!(e, ConvError::Parameter { param: "output rows", .. }), "{e:?}");
        let e = run(kernel, &g, &x[1..], &w, None, &ep, &mut out, 0..6, 2, &mut scratch).unwrap_err();
        assert!(matches!(e, ConvError::BufferLength { what: "input", .. }), "{e:?}");
        let e = run(kernel, &g, &x, &w, None, &ep, &mut out, 0..6, 2, &mut scratch[1..]).unwrap_err();
        assert!(matches!(e, ConvError::BufferLength { what: "scratch", .. }), "{e:?}");
        run(kernel, &g, &x, &w, None, &ep, &mut out, 0..6, 2, &mut scratch).unwrap();
        assert!(out.iter().all(|&v| v == 4.0), "every output is one tap over 4 channels of ones");
        g.groups = 2;
        let e = run(kernel, &g, &x, &w, None, &ep, &mut out, 0..6, 2, &mut scratch).unwrap_err();
        assert!(matches!(e, ConvError::AlgorithmUnsupported { algorithm: "Gemm1x1", .. }), "{e:?}");
    }

    /// An output's bits do not depend on the image's size: a crop of the input gives the
    /// same bits as the whole image at every output pixel the crop has all the taps of
    /// (what lossless tiling needs), for an interleaving and an overlapping layer, with each
    /// microkernel.
    #[test]
    fn rounding_is_independent_of_the_image_size() {
        let mut rng = StdRng::seed_from_u64(7);
        for (kernel, (kernel_size, pad)) in
            MicroKernel::all_supported().into_iter().flat_map(|k| [(k, (2, 0)), (k, (4, 3))])
        {
            let geometry = |size: [usize; 2]| ConvGeometry {
                kind: ConvKind::Transposed,
                batch: 1,
                in_channels: 37,
                in_size: size,
                out_channels: 5,
                kernel: [kernel_size; 2],
                stride: [2, 2],
                pad_begin: [pad; 2],
                pad_end: [pad; 2],
                dilation: [1, 1],
                output_padding: [0, 0],
                groups: 1,
            };
            let (whole, crop) = (geometry([9, 53]), geometry([4, 21]));
            let x: Vec<f32> = (0..whole.input_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
            let w: Vec<f32> = (0..whole.weight_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
            let (y0, x0) = (3, 17);
            let xc: Vec<f32> = (0..37)
                .flat_map(|c| (0..4).flat_map(move |y| (0..21).map(move |xx| (c, y, xx))))
                .map(|(c, y, xx)| x[(c * 9 + y0 + y) * 53 + x0 + xx])
                .collect();
            let run_on = |g: &ConvGeometry, x: &[f32]| {
                let mut out = vec![f32::NAN; g.output_len()];
                let mut scratch = vec![f32::NAN; scratch_floats(g, kernel, 2)];
                let p = g.out_hw()[0];
                run(kernel, g, x, &w, None, &Epilogue::default(), &mut out, 0..p, 2, &mut scratch).unwrap();
                out
            };
            let (a, b) = (run_on(&whole, &x), run_on(&crop, &xc));
            // Every tap of crop output o reads an input inside the crop's `n` pixels.
            let inside = |o: usize, n: usize| {
                (0..kernel_size).all(|r| {
                    let num = o as isize + pad as isize - r as isize;
                    num % 2 != 0 || (num >= 0 && ((num / 2) as usize) < n)
                })
            };
            let ([pw, qw], [pc, qc]) = (whole.out_hw(), crop.out_hw());
            let mut compared = 0;
            for k in 0..5 {
                for oy in (0..pc).filter(|&o| inside(o, 4)) {
                    for ox in (0..qc).filter(|&o| inside(o, 21)) {
                        let want = a[(k * pw + 2 * y0 + oy) * qw + 2 * x0 + ox];
                        assert_eq!(
                            b[(k * pc + oy) * qc + ox].to_bits(),
                            want.to_bits(),
                            "k{kernel_size} ({k}, {oy}, {ox})"
                        );
                        compared += 1;
                    }
                }
            }
            assert!(compared >= 5 * 4 * 30, "{kernel:?} k{kernel_size}: compared only {compared} outputs");
        }
    }
}
