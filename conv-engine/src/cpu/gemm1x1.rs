//! `Gemm1x1` on the CPU: a 1x1, stride-1, unpadded convolution is, per image and group,
//! `Out[K/g, pixels] = W[K/g, C/g] × X[C/g, pixels]` over the tensors in place — the gemm
//! crate reads the input and writes the output through strides, no copy of ours.
//!
//! A transposed convolution whose kernel equals its stride `s` (no padding, dilation,
//! groups or output padding: Real-CUGAN's 2x2 stride-2 deconvolutions) is one too: output
//! pixel `(s·y + i, s·x + j)` is tap `(i, j)` of input pixel `(y, x)` alone. Per output row
//! `s·y + i`, one GEMM takes input row `y` through the taps `(i, ·)` of every output channel,
//! and its write-out interleaves the taps into the row with the bias and epilogue
//! ([`run_transposed`]).

use crate::dispatch::Chunk;
use crate::error::ConvError;
use crate::problem::{ConvDType, ConvProblem};
use half::f16;
use implicit_gemm::cpu::Element;
use implicit_gemm::{ConvGeometry, ConvKind, Epilogue};
use std::any::TypeId;

/// The gemm crate keeps one L2-sized packing slab per thread.
pub(super) fn l2_slab_bytes() -> usize {
    gemm_common::cache::CACHE_INFO[1].cache_bytes
}

pub(super) fn supports(problem: &ConvProblem) -> bool {
    let g = problem.geometry();
    (geometry_fits(g) || transposed_fits(g)) && problem.dtype() != ConvDType::BF16 // the gemm crate has no bf16
}

/// A transposed convolution whose kernel equals its stride, without padding, dilation,
/// output padding or groups: every output pixel is one tap of one input pixel.
fn transposed_fits(g: &ConvGeometry) -> bool {
    g.kind == ConvKind::Transposed
        && g.kernel == g.stride
        && g.pad_begin == [0, 0]
        && g.pad_end == [0, 0]
        && g.dilation == [1, 1]
        && g.output_padding == [0, 0]
        && g.groups == 1
}

/// Bytes of one worker's GEMM output in [`run_transposed`]: a band of input rows' products
/// with every tap, about L2-sized, so that its write-out reads it from L2.
const BAND_BYTES: usize = 1 << 20;

/// Input rows per GEMM of [`run_transposed`] (at least one).
fn band_rows(g: &ConvGeometry, elem_bytes: usize) -> usize {
    let row_bytes = g.taps() * g.out_channels * g.in_size[1] * elem_bytes;
    (BAND_BYTES / row_bytes.max(1)).clamp(1, g.in_size[0].max(1))
}

/// Floats of scratch [`run_transposed`] takes for elements of `elem_bytes` with `threads`
/// workers: the weights packed per tap, and per worker one band's GEMM output (every
/// tap's products with [`band_rows`] input rows) and one output row in f32.
pub(super) fn transposed_scratch_floats(g: &ConvGeometry, elem_bytes: usize, threads: usize) -> usize {
    let floats = |elems: usize| (elems * elem_bytes).div_ceil(4);
    let (k, w, q) = (g.out_channels, g.in_size[1], g.out_hw()[1]);
    let band = band_rows(g, elem_bytes) * w;
    floats(g.weight_len()) + threads.max(1) * (floats(g.taps() * k * band) + q)
}

/// A 1x1, stride-1, unpadded forward convolution: its output planes are its input planes.
fn geometry_fits(g: &ConvGeometry) -> bool {
    g.kind == ConvKind::Forward
        && g.kernel == [1, 1]
        && g.stride == [1, 1]
        && g.pad_begin == [0, 0]
        && g.pad_end == [0, 0]
        && g.groups >= 1
        && g.in_channels % g.groups == 0
        && g.out_channels % g.groups == 0
}

/// Upper bound of the gemm crate's buffers: per-thread slabs and a packed copy of at most
/// the whole right-hand operand (in f32 for f16 inputs).
pub(super) fn workspace_bytes(problem: &ConvProblem, chunk: &Chunk, threads: usize) -> Option<usize> {
    if !supports(problem) {
        return None;
    }
    let g = problem.geometry();
    if transposed_fits(g) {
        // The crate's slab and its packing of one input row per worker, and our scratch.
        let scratch = transposed_scratch_floats(g, problem.dtype().size_in_bytes(), threads);
        return Some(threads * (l2_slab_bytes() + g.in_channels * g.in_size[1] * 4) + scratch * 4);
    }
    let pixels = chunk.rows.len() * g.out_hw()[1];
    let (m, k) = (g.out_channels_per_group(), g.in_channels_per_group());
    Some(threads * l2_slab_bytes() + (k * pixels + m * k) * 4)
}

/// The part of [`workspace_bytes`] that is the gemm crate's own buffers (not metered by
/// the engine): `None` where all of it is (the forward form, which packs the operands it
/// reads in place).
pub(super) fn transposed_crate_bytes(problem: &ConvProblem, threads: usize) -> Option<usize> {
    let g = problem.geometry();
    transposed_fits(g).then(|| threads * (l2_slab_bytes() + g.in_channels * g.in_size[1] * 4))
}

/// Output rows `rows` of every image in `g`, with `epilogue` (residual indexed as `out`)
/// applied with the bias in one pass over each output block right after its GEMM.
/// Checks, before the unsafe GEMM, that `g` is a geometry this algorithm runs and that
/// every slice holds what `g` addresses.
#[allow(clippy::too_many_arguments)]
pub(super) fn run<T: Element>(
    g: &ConvGeometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    epilogue: &Epilogue<&[T]>,
    out: &mut [T],
    rows: std::ops::Range<usize>,
    threads: usize,
) -> Result<(), ConvError> {
    if !geometry_fits(g) {
        return Err(ConvError::AlgorithmUnsupported {
            problem: format!("{g:?}"),
            algorithm: "Gemm1x1",
            chunking: None,
            requires: crate::dispatch::Algorithm::Gemm1x1.requirements(),
        });
    }
    let [h, wd] = g.in_size;
    let [p, q] = g.out_hw();
    if rows.end > p || rows.start > rows.end {
        return Err(ConvError::Parameter {
            op: "conv",
            param: "output rows",
            value: format!("{rows:?} of {p}"),
            reason: "Gemm1x1 runs rows inside the output",
        });
    }
    super::check_len("input", Some(x.len()), g.input_len())?;
    super::check_len("weight", Some(w.len()), g.weight_len())?;
    super::check_len("output", Some(out.len()), g.output_len())?;
    super::check_len("bias", bias.map(<[T]>::len), g.out_channels)?;
    super::check_len("residual", epilogue.residual.map(<[T]>::len), g.output_len())?;
    let (m, k) = (g.out_channels_per_group(), g.in_channels_per_group());
    let pixels = rows.len() * q;
    let parallelism = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    for n in 0..g.batch {
        for grp in 0..g.groups {
            let x0 = ((n * g.in_channels + grp * k) * h + rows.start) * wd;
            let o0 = ((n * g.out_channels + grp * m) * p + rows.start) * q;
            let w0 = grp * m * k;
            // SAFETY: checked above: `g` is 1x1/stride 1/unpadded, `rows` lie inside the output,
            // and the slices have `g`'s exact lengths, so they hold every element addressed: rows `rows` of `k` input
            // planes (stride h·w) and of `m` output planes (stride p·q), and an m×k
            // weight block; the output block is written by this call alone.
            unsafe {
                gemm_dispatch(
                    m,
                    pixels,
                    k,
                    out[o0..].as_mut_ptr(),
                    (p * q) as isize,
                    w[w0..].as_ptr(),
                    k as isize,
                    x[x0..].as_ptr(),
                    (h * wd) as isize,
                    parallelism,
                )?
            };
        }
        // Bias and epilogue in one pass over this image's output rows, while the last
        // GEMM's blocks may still be in cache.
        if bias.is_some() || !epilogue.is_plain() {
            use rayon::prelude::*;
            let image = &mut out[n * g.out_channels * p * q..(n + 1) * g.out_channels * p * q];
            image.par_chunks_mut(p * q).enumerate().for_each(|(ch, plane)| {
                let bv = bias.map_or(0.0, |b| b[ch].to_f32());
                let start = ((n * g.out_channels + ch) * p + rows.start) * q;
                let dst = &mut plane[rows.start * q..][..pixels];
                match epilogue.residual {
                    None if epilogue.is_plain() => dst.iter_mut().for_each(|v| *v = T::from_f32(v.to_f32() + bv)),
                    res => {
                        let res = res.map(|r| &r[start..start + pixels]);
                        implicit_gemm::cpu::apply_epilogue_in_place(epilogue, bv, dst, res);
                    }
                }
            });
        }
    }
    Ok(())
}

/// Output rows `rows` of every image of a transposed convolution whose kernel equals its
/// stride (see the module), with the bias and `epilogue` (residual indexed as `out`) in
/// the write-out. `scratch` holds [`transposed_scratch_floats`]`(g, size of T, threads)`
/// floats. Checks the geometry, the rows and every slice's length before the unsafe GEMMs.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_transposed<T: Element>(
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
    if !transposed_fits(g) {
        return Err(ConvError::AlgorithmUnsupported {
            problem: format!("{g:?}"),
            algorithm: "Gemm1x1",
            chunking: None,
            requires: crate::dispatch::Algorithm::Gemm1x1.requirements(),
        });
    }
    let [h, wd] = g.in_size;
    let [p, q] = g.out_hw();
    let [sh, sw] = g.stride;
    let (c_n, k_n) = (g.in_channels, g.out_channels);
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
    let need = transposed_scratch_floats(g, std::mem::size_of::<T>(), threads);
    if scratch.len() < need {
        return Err(ConvError::BufferLength {
            op: "conv_transpose",
            what: "scratch",
            len: scratch.len(),
            needed: need,
        });
    }
    let elems = |floats: usize| floats * 4 / std::mem::size_of::<T>();
    let taps = sh * sw;
    let packed_floats = (g.weight_len() * std::mem::size_of::<T>()).div_ceil(4);
    let (packed, per_worker) = scratch[..need].split_at_mut(packed_floats);
    // w[c][k][i][j] packed as wp[i][j][k][c]: for tap row i, rows (j, k) of an
    // (sw·K) × C matrix with row stride C.
    let wp: &mut [T] = &mut bytemuck::cast_slice_mut::<f32, T>(packed)[..g.weight_len()];
    for c in 0..c_n {
        for k in 0..k_n {
            for t in 0..taps {
                wp[(t * k_n + k) * c_n + c] = w[(c * k_n + k) * taps + t];
            }
        }
    }
    let wp: &[T] = wp;
    let slot_floats = per_worker.len() / threads;
    let band = band_rows(g, std::mem::size_of::<T>());
    let gemm_floats = (taps * k_n * band * wd * std::mem::size_of::<T>()).div_ceil(4);
    let out_ptr = super::direct::SharedOut(out.as_mut_ptr());
    // The input rows that `rows` read, in bands of `band`.
    let in_rows = rows.start / sh..rows.end.div_ceil(sh);
    let bands = in_rows.len().div_ceil(band);
    let units = g.batch * bands;
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::Mutex::new(None);
    let is_f32 = std::any::TypeId::of::<T>() == TypeId::of::<f32>();
    let work = |slot: &mut [f32]| {
        let (gemm_out, row_f32) = slot.split_at_mut(gemm_floats);
        let gemm_out: &mut [T] = &mut bytemuck::cast_slice_mut::<f32, T>(gemm_out)[..elems(gemm_floats)];
        let row_f32 = &mut row_f32[..q];
        loop {
            let u = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if u >= units {
                break;
            }
            let (n, b0) = (u / bands, in_rows.start + (u % bands) * band);
            let ys = b0..(b0 + band).min(in_rows.end);
            let cols = ys.len() * wd;
            // SAFETY: lhs is `wp`, (taps·K) × C with row stride C; rhs is rows `ys` of the
            // C input planes of image n (consecutive rows are one run of `cols` columns,
            // row stride h·w); dst is `gemm_out`, taps·K rows of `cols` (row stride
            // `cols` ≤ band·W), this worker's own.
            let r = unsafe {
                gemm_dispatch(
                    taps * k_n,
                    cols,
                    c_n,
                    gemm_out.as_mut_ptr(),
                    cols as isize,
                    wp.as_ptr(),
                    c_n as isize,
                    x[(n * c_n * h + ys.start) * wd..].as_ptr(),
                    (h * wd) as isize,
                    gemm::Parallelism::None,
                )
            };
            if let Err(e) = r {
                *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                break;
            }
            for (y, i) in ys.clone().flat_map(|y| (0..sh).map(move |i| (y, i))) {
                let oy = y * sh + i;
                if !rows.contains(&oy) {
                    continue;
                }
                // Products of tap (i, j) with input row y.
                let tap = |j: usize, k: usize| &gemm_out[((i * sw + j) * k_n + k) * cols + (y - ys.start) * wd..][..wd];
                for k in 0..k_n {
                    let b = bias.map_or(0.0, |b| b[k].to_f32());
                    let start = ((n * k_n + k) * p + oy) * q;
                    // SAFETY: output row oy of plane (n, k) is this unit's alone.
                    let dst = unsafe { std::slice::from_raw_parts_mut(out_ptr.ptr().add(start), q) };
                    // An f32 row is built in place; others in `row_f32`, then narrowed.
                    let row: &mut [f32] = if is_f32 { bytemuck::cast_slice_mut(&mut *dst) } else { &mut *row_f32 };
                    if sw == 2 {
                        // The common case, pairs (vectorised by the compiler).
                        for ((d, a), c) in row.chunks_exact_mut(2).zip(tap(0, k)).zip(tap(1, k)) {
                            d[0] = a.to_f32() + b;
                            d[1] = c.to_f32() + b;
                        }
                    } else {
                        for j in 0..sw {
                            for (xx, v) in tap(j, k).iter().enumerate() {
                                row[sw * xx + j] = v.to_f32() + b;
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
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// `dst[m×n] = lhs[m×k] · rhs[k×n]`, all row-major with unit column stride.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_dispatch<T: Element>(
    m: usize,
    n: usize,
    k: usize,
    dst: *mut T,
    dst_rs: isize,
    lhs: *const T,
    lhs_rs: isize,
    rhs: *const T,
    rhs_rs: isize,
    parallelism: gemm::Parallelism,
) -> Result<(), ConvError> {
    macro_rules! call {
        ($t:ty, $zero:expr, $one:expr) => {
            unsafe {
                gemm::gemm::<$t>(
                    m,
                    n,
                    k,
                    dst as *mut $t,
                    1,
                    dst_rs,
                    false,
                    lhs as *const $t,
                    1,
                    lhs_rs,
                    rhs as *const $t,
                    1,
                    rhs_rs,
                    $zero,
                    $one,
                    false,
                    false,
                    false,
                    parallelism,
                )
            }
        };
    }
    if TypeId::of::<T>() == TypeId::of::<f32>() {
        call!(f32, 0.0, 1.0);
    } else if TypeId::of::<T>() == TypeId::of::<f16>() {
        call!(f16, f16::ZERO, f16::ONE);
    } else {
        return Err(ConvError::Candle(candle_core::Error::Msg(format!("Gemm1x1: no gemm kernel for {}", T::NAME))));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geometry(kernel: usize) -> ConvGeometry {
        ConvGeometry {
            kind: ConvKind::Forward,
            batch: 1,
            in_channels: 4,
            in_size: [6, 6],
            out_channels: 2,
            kernel: [kernel, kernel],
            stride: [1, 1],
            pad_begin: [0, 0],
            pad_end: [0, 0],
            dilation: [1, 1],
            output_padding: [0, 0],
            groups: 1,
        }
    }

    /// The transposed form against the f64 definition: kernels equal to their strides
    /// (square and not), f32 and f16, bias, every activation with and without a residual,
    /// output rows run in two bands, the output poisoned first.
    #[test]
    fn transposed_kernel_equal_to_stride_matches_the_f64_definition() {
        use implicit_gemm::Activation;
        use rand::{Rng, SeedableRng, rngs::StdRng};
        fn check<T: Element>(g: &ConvGeometry, rng: &mut StdRng, act: Activation, with_res: bool, tol: f64) {
            let rand = |n: usize, rng: &mut StdRng| -> Vec<T> {
                (0..n).map(|_| T::from_f32(rng.random_range(-1.0..1.0))).collect()
            };
            let (x, w, b, res) = (
                rand(g.input_len(), rng),
                rand(g.weight_len(), rng),
                rand(g.out_channels, rng),
                rand(g.output_len(), rng),
            );
            let widen = |v: &[T]| v.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
            let [p, _] = g.out_hw();
            let mut want = vec![0f64; g.output_len()];
            crate::cpu::direct::direct_conv::<f64, f64>(g, &widen(&x), &widen(&w), Some(&widen(&b)), &mut want, 0..p);
            let ep = Epilogue { activation: act, residual: with_res.then_some(res.as_slice()), scale: 0.5 };
            let mut out = vec![T::from_f32(f32::NAN); g.output_len()];
            let threads = 2;
            let mut scratch = vec![f32::NAN; transposed_scratch_floats(g, std::mem::size_of::<T>(), threads)];
            for rows in [0..p / 3, p / 3..p] {
                run_transposed(g, &x, &w, Some(&b), &ep, &mut out, rows, threads, &mut scratch).unwrap();
            }
            for (i, (o, c)) in out.iter().zip(&want).enumerate() {
                let r = if with_res { res[i].to_f64() } else { 0.0 };
                let want = (act.apply(*c as f32) as f64 + r) * 0.5;
                let o = o.to_f64();
                let taps = g.in_channels as f64;
                assert!(
                    (o - want).abs() <= tol * taps.sqrt() * want.abs().max(1.0),
                    "{g:?} {act:?} residual {with_res}: element {i}: {o} vs {want}"
                );
            }
        }
        let mut rng = StdRng::seed_from_u64(0x2d2);
        let acts = [Activation::Identity, Activation::LeakyRelu(0.1), Activation::Relu, Activation::Silu];
        for (i, (stride, batch, c, k, size)) in [
            ([2, 2], 1, 64, 8, [5, 19]),
            ([2, 2], 2, 3, 5, [7, 4]),
            ([3, 3], 1, 7, 4, [3, 6]),
            ([2, 3], 2, 5, 3, [4, 5]),
            ([1, 1], 1, 6, 2, [3, 3]),
            // Rows wide enough for bands of a single input row.
            ([2, 2], 1, 4, 64, [5, 1100]),
            ([2, 2], 2, 3, 40, [9, 900]),
        ]
        .into_iter()
        .enumerate()
        {
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
            assert!(transposed_fits(&g));
            assert!(size[1] < 900 || band_rows(&g, 4) < size[0], "{g:?} runs in several bands");
            let act = acts[i % acts.len()];
            check::<f32>(&g, &mut rng, act, i % 2 == 0, 1e-6);
            check::<f32>(&g, &mut rng, Activation::Identity, i % 2 == 1, 1e-6);
            check::<f16>(&g, &mut rng, act, i % 2 == 1, 2e-3);
        }
    }

    /// The executor itself refuses what would make its unsafe GEMM read out of bounds: a
    /// geometry that is not 1x1, rows past the output, and short slices.
    #[test]
    fn checks_geometry_rows_and_lengths_before_the_gemm() {
        let g = geometry(3);
        let (x, w, mut out) = (vec![1f32; g.input_len()], vec![1f32; g.weight_len()], vec![0f32; g.output_len()]);
        let e = run(&g, &x, &w, None, &Epilogue::default(), &mut out, 0..4, 1).unwrap_err();
        assert!(matches!(e, ConvError::AlgorithmUnsupported { algorithm: "Gemm1x1", .. }), "{e:?}");
        let g = geometry(1);
        let (x, w, mut out) = (vec![1f32; g.input_len()], vec![1f32; g.weight_len()], vec![0f32; g.output_len()]);
        let e = run(&g, &x, &w, None, &Epilogue::default(), &mut out, 0..7, 1).unwrap_err();
        assert!(matches!(e, ConvError::Parameter { param: "output rows", .. }), "{e:?}");
        let e = run(&g, &x[..x.len() - 1], &w, None, &Epilogue::default(), &mut out, 0..6, 1).unwrap_err();
        assert!(matches!(e, ConvError::BufferLength { what: "input", len: 143, needed: 144, .. }), "{e:?}");
        let e = run(&g, &x, &w, Some(&[0.0]), &Epilogue::default(), &mut out, 0..6, 1).unwrap_err();
        assert!(matches!(e, ConvError::BufferLength { what: "bias", len: 1, needed: 2, .. }), "{e:?}");
        run(&g, &x, &w, None, &Epilogue::default(), &mut out, 0..6, 1).unwrap();
        assert!(out.iter().all(|&v| v == 4.0));
    }
}
