//! `Gemm1x1`'s transposed form on the CPU: a deconvolution whose kernel equals its stride
//! `s` (no padding, dilation, output padding or groups: Real-CUGAN's 2x2 stride-2 layers).
//! Output pixel `(s·y + i, s·x + j)` is tap `(i, j)` of input pixel `(y, x)` alone, so the
//! layer is one GEMM, `P[(tap, k), pixel] = W[(tap, k), c] · X[c, pixel]`, whose write-out
//! interleaves the taps into the output rows with the bias and epilogue (as ncnn runs a
//! deconvolution whose kernel is its stride).
//!
//! The implicit GEMM runs such a layer over output pixels with every tap in its reduction,
//! `s²` times the work (3 of 4 taps are zero for 2x2 stride 2); as a 1x1 convolution to
//! `s²·K` channels and a pixel shuffle it writes and reads that map once more (68 MB per
//! layer in Real-CUGAN's 2x at 256²). Here a worker takes a band of input rows: packs
//! them (about L2's size with their products), runs the engine's 6×16 microkernel over
//! every tap ([`super::panel_gemm`]) and writes each output row once.
//!
//! Each output is summed over the input channels in one fixed order whatever the band or
//! the image size, so the form is also one of the size-independent kernels
//! (`ConvRounding::SizeIndependent`, which tiled == untiled needs).

use super::panel_gemm;
use crate::error::ConvError;
use crate::problem::ConvProblem;
use implicit_gemm::cpu::{Element, MR, MicroKernel, NR};
use implicit_gemm::{ConvGeometry, ConvKind, Epilogue};
use std::any::TypeId;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of a worker's band: its packed input rows and their products with every tap,
/// about L2's size so that the write-out reads the products from L2.
const BAND_BYTES: usize = 1 << 20;

/// A transposed convolution whose kernel equals its stride, without padding, dilation,
/// output padding or groups: every output pixel is one tap of one input pixel.
pub(super) fn fits(g: &ConvGeometry) -> bool {
    g.kind == ConvKind::Transposed
        && g.kernel == g.stride
        && g.pad_begin == [0, 0]
        && g.pad_end == [0, 0]
        && g.dilation == [1, 1]
        && g.output_padding == [0, 0]
        && g.groups == 1
}

/// Rows of the packed weights: every (tap, output channel), padded to the tile's 6.
fn m_pad(g: &ConvGeometry) -> usize {
    (g.taps() * g.out_channels).div_ceil(MR) * MR
}

/// Input rows per band (at least one).
fn band_rows(g: &ConvGeometry) -> usize {
    let per_row = (m_pad(g) + g.in_channels) * g.in_size[1].next_multiple_of(NR) * 4;
    (BAND_BYTES / per_row.max(1)).clamp(1, g.in_size[0].max(1))
}

/// Floats of scratch [`run`] takes with `threads` workers: the packed weights, and per
/// worker a band's packed input and products and one output row.
pub(super) fn scratch_floats(g: &ConvGeometry, threads: usize) -> usize {
    let cols = (band_rows(g) * g.in_size[1]).next_multiple_of(NR);
    m_pad(g) * g.in_channels + threads.max(1) * ((g.in_channels + m_pad(g)) * cols + g.out_hw()[1])
}

/// The workspace [`run`] takes (all of it the engine's, metered), or `None` when `problem`
/// is not such a deconvolution.
pub(super) fn workspace_bytes(problem: &ConvProblem, threads: usize) -> Option<usize> {
    let g = problem.geometry();
    fits(g).then(|| scratch_floats(g, threads) * 4)
}

/// Output rows `rows` of every image, with the bias and `epilogue` (residual indexed as
/// `out`) in the write-out, on `kernel` (a supported 6×16 microkernel). `scratch` holds
/// [`scratch_floats`]`(g, threads)` floats. Checks the geometry, the kernel, the rows and
/// every slice's length before the unsafe GEMMs.
#[allow(clippy::too_many_arguments)]
pub(super) fn run<T: Element>(
    kernel: MicroKernel,
    g: &ConvGeometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    epilogue: &Epilogue<&[T]>,
    out: &mut [T],
    rows: std::ops::Range<usize>,
    threads: usize,
    scratch: &mut [f32],
) -> Result<(), ConvError> {
    if !fits(g) {
        return Err(ConvError::AlgorithmUnsupported {
            problem: format!("{g:?}"),
            algorithm: "Gemm1x1",
            chunking: None,
            requires: crate::dispatch::Algorithm::Gemm1x1.requirements(),
        });
    }
    assert!(kernel.is_narrow() && kernel.is_supported(), "{kernel:?}: a supported 6x16 microkernel");
    let [h, wd] = g.in_size;
    let [p, q] = g.out_hw();
    let [sh, sw] = g.stride;
    let (c_n, k_n, taps) = (g.in_channels, g.out_channels, g.taps());
    if rows.end > p || rows.start > rows.end {
        return Err(ConvError::Parameter {
            op: "conv_transpose",
            param: "output rows",
            value: format!("{rows:?} of {p}"),
            reason: "Gemm1x1 runs rows inside the output",
        });
    }
    super::check_len("input", Some(x.len()), g.input_len())?;
    super::check_len("weight", Some(w.len()), g.weight_len())?;
    super::check_len("output", Some(out.len()), g.output_len())?;
    super::check_len("bias", bias.map(<[T]>::len), k_n)?;
    super::check_len("residual", epilogue.residual.map(<[T]>::len), g.output_len())?;
    let threads = threads.max(1);
    let need = scratch_floats(g, threads);
    if scratch.len() < need {
        return Err(ConvError::BufferLength {
            op: "conv_transpose",
            what: "scratch",
            len: scratch.len(),
            needed: need,
        });
    }
    let m_pad = m_pad(g);
    let (a, per_worker) = scratch[..need].split_at_mut(m_pad * c_n);
    // w[c][k][tap] packed as 6-row panels of rows (tap, k): a[panel][c][i].
    for (r0, panel) in a.chunks_exact_mut(c_n * MR).enumerate() {
        for c in 0..c_n {
            for i in 0..MR {
                let r = r0 * MR + i;
                let (t, k) = (r / k_n, r % k_n);
                panel[c * MR + i] = if t < taps { w[(c * k_n + k) * taps + t].to_f32() } else { 0.0 };
            }
        }
    }
    let a: &[f32] = a;
    let band = band_rows(g);
    let max_cols = (band * wd).next_multiple_of(NR);
    let slot_floats = (c_n + m_pad) * max_cols + q;
    let out_ptr = super::direct::SharedOut(out.as_mut_ptr());
    // The input rows that `rows` read, in bands.
    let in_rows = rows.start / sh..rows.end.div_ceil(sh);
    let bands = in_rows.len().div_ceil(band);
    let units = g.batch * bands;
    let next = AtomicUsize::new(0);
    let is_f32 = TypeId::of::<T>() == TypeId::of::<f32>();
    let work = |slot: &mut [f32]| {
        let (b, rest) = slot.split_at_mut(c_n * max_cols);
        let (prod, row_f32) = rest.split_at_mut(m_pad * max_cols);
        let row_f32 = &mut row_f32[..q];
        loop {
            let u = next.fetch_add(1, Ordering::Relaxed);
            if u >= units {
                break;
            }
            let (n, y0) = (u / bands, in_rows.start + (u % bands) * band);
            let ys = y0..(y0 + band).min(in_rows.end);
            // The band's pixels, consecutive rows of each input plane, in 16-pixel panels.
            let pixels = ys.len() * wd;
            let n_panels = pixels.div_ceil(NR);
            for c in 0..c_n {
                let src = &x[((n * c_n + c) * h + ys.start) * wd..][..pixels];
                for jp in 0..n_panels {
                    let lanes = &mut b[(jp * c_n + c) * NR..][..NR];
                    let from = &src[(jp * NR).min(pixels)..((jp + 1) * NR).min(pixels)];
                    T::widen(from, &mut lanes[..from.len()]);
                    lanes[from.len()..].fill(0.0);
                }
            }
            let ldc = n_panels * NR;
            let pp = prod.as_mut_ptr();
            // SAFETY: the kernel is a supported 6×16 one (asserted); tile (ir, jp) lies in
            // `prod` (m_pad rows of ldc ≤ max_cols), this worker's own.
            unsafe {
                panel_gemm::gemm(kernel, c_n, a, m_pad / MR, &b[..n_panels * c_n * NR], n_panels, ldc, |ir, jp| {
                    pp.add(ir * MR * ldc + jp * NR)
                })
            };
            let prod: &[f32] = prod;
            for (y, i) in ys.clone().flat_map(|y| (0..sh).map(move |i| (y, i))) {
                let oy = y * sh + i;
                if !rows.contains(&oy) {
                    continue;
                }
                // Products of tap (i, j) and output channel k with input row y.
                let tap = |j: usize, k: usize| &prod[((i * sw + j) * k_n + k) * ldc + (y - ys.start) * wd..][..wd];
                for k in 0..k_n {
                    let bv = bias.map_or(0.0, |b| b[k].to_f32());
                    let start = ((n * k_n + k) * p + oy) * q;
                    // SAFETY: output row oy of plane (n, k) is this unit's alone.
                    let dst = unsafe { std::slice::from_raw_parts_mut(out_ptr.ptr().add(start), q) };
                    // An f32 row is built in place; others in `row_f32`, then narrowed.
                    let row: &mut [f32] = if is_f32 { bytemuck::cast_slice_mut(&mut *dst) } else { &mut *row_f32 };
                    if sw == 2 {
                        // The common case, pairs (vectorised by the compiler).
                        for ((d, &l), &r) in row.chunks_exact_mut(2).zip(tap(0, k)).zip(tap(1, k)) {
                            d[0] = l + bv;
                            d[1] = r + bv;
                        }
                    } else {
                        for j in 0..sw {
                            for (xx, v) in tap(j, k).iter().enumerate() {
                                row[sw * xx + j] = v + bv;
                            }
                        }
                    }
                    if !epilogue.is_plain() {
                        let res = epilogue.residual.map(|r| r[start..start + q].iter().map(|v| v.to_f32()));
                        epilogue.apply_row(row, res);
                    }
                    if !is_f32 {
                        T::narrow(row_f32, dst);
                    }
                }
            }
        }
    };
    let workers = threads.min(units.max(1));
    if workers == 1 {
        work(&mut per_worker[..slot_floats]);
    } else {
        rayon::scope(|sc| {
            for slot in per_worker.chunks_exact_mut(slot_floats).take(workers) {
                let work = &work;
                sc.spawn(move |_| work(slot));
            }
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};
    use implicit_gemm::Activation;
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
        crate::cpu::direct::direct_conv::<f64, f64>(g, &widen(&x), &widen(&w), Some(&widen(&b)), &mut want, 0..p);
        let ep = Epilogue { activation: act, residual: with_res.then_some(res.as_slice()), scale: 0.5 };
        let mut out = vec![T::from_f32(f32::NAN); g.output_len()];
        let threads = 2;
        let mut scratch = vec![f32::NAN; scratch_floats(g, threads)];
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
    /// their strides (square and not), f32, f16 and bf16, bias, every activation with and
    /// without a residual, rows run in two chunks, inputs wide enough for bands of one row,
    /// the output poisoned first.
    #[test]
    fn matches_the_f64_definition_with_every_microkernel() {
        for (mk, why) in MicroKernel::all_unsupported() {
            crate::testing::skipped(format!("{mk:?}: this CPU lacks {why}"));
        }
        let mut rng = StdRng::seed_from_u64(0x2d2);
        let acts = [Activation::Identity, Activation::LeakyRelu(0.1), Activation::Relu, Activation::Silu];
        let shapes = [
            ([2, 2], 1, 64, 8, [5, 19]),
            ([2, 2], 2, 3, 5, [7, 4]),
            ([3, 3], 1, 7, 4, [3, 6]),
            ([2, 3], 2, 5, 3, [4, 5]),
            ([1, 1], 1, 6, 2, [3, 3]),
            ([2, 2], 1, 300, 2, [3, 7]),
            // Rows wide enough for bands of a single input row.
            ([2, 2], 1, 4, 64, [5, 1100]),
        ];
        let mut kernels: Vec<MicroKernel> = MicroKernel::all_supported().into_iter().map(MicroKernel::narrow).collect();
        kernels.dedup();
        for kernel in kernels {
            for (i, &(stride, batch, c, k, size)) in shapes.iter().enumerate() {
                let g = ConvGeometry {
                    kind: ConvKind::Transposed,
                    batch,
                    in_channels: c,
                    in_size: size,
                    out_channels: k,
                    kernel: stride,
                    stride,
                    pad_begin: [0, 0],
                    pad_end: [0, 0],
                    dilation: [1, 1],
                    output_padding: [0, 0],
                    groups: 1,
                };
                assert!(fits(&g));
                assert!(size[1] < 1000 || band_rows(&g) < size[0], "{g:?} runs in several bands");
                let act = acts[i % acts.len()];
                check::<f32>(kernel, &g, &mut rng, act, i % 2 == 0, 1e-6);
                check::<f32>(kernel, &g, &mut rng, Activation::Identity, i % 2 == 1, 1e-6);
                check::<f16>(kernel, &g, &mut rng, act, i % 2 == 1, 2e-3);
                check::<bf16>(kernel, &g, &mut rng, act, i % 2 == 0, 1e-2);
            }
        }
    }

    /// An output's bits do not depend on the image's size: a crop of the input gives the
    /// same bits as the whole image at the crop's pixels (what lossless tiling needs).
    #[test]
    fn rounding_is_independent_of_the_image_size() {
        let kernel = MicroKernel::detect().narrow();
        let geometry = |size: [usize; 2]| ConvGeometry {
            kind: ConvKind::Transposed,
            batch: 1,
            in_channels: 37,
            in_size: size,
            out_channels: 5,
            kernel: [2, 2],
            stride: [2, 2],
            pad_begin: [0, 0],
            pad_end: [0, 0],
            dilation: [1, 1],
            output_padding: [0, 0],
            groups: 1,
        };
        let mut rng = StdRng::seed_from_u64(7);
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
            let mut scratch = vec![f32::NAN; scratch_floats(g, 2)];
            let p = g.out_hw()[0];
            run(kernel, g, x, &w, None, &Epilogue::default(), &mut out, 0..p, 2, &mut scratch).unwrap();
            out
        };
        let (a, b) = (run_on(&whole, &x), run_on(&crop, &xc));
        for k in 0..5 {
            for oy in 0..8 {
                for ox in 0..42 {
                    let want = a[(k * 18 + 2 * y0 + oy) * 106 + 2 * x0 + ox];
                    assert_eq!(b[(k * 8 + oy) * 42 + ox].to_bits(), want.to_bits(), "({k}, {oy}, {ox})");
                }
            }
        }
    }
}
