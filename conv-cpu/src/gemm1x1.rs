//! `Gemm1x1` on the CPU: a 1x1, stride-1, unpadded convolution is, per image and group,
//! `Out[K/g, pixels] = W[K/g, C/g] × X[C/g, pixels]` over the tensors in place — the gemm
//! crate reads the input and writes the output through strides, no copy of ours.
//!
//! Its transposed form, one GEMM over every tap of a transposed convolution on the
//! engine's own microkernel, is in [`super::tap_gemm`].

use crate::implicit_gemm::Element;
use conv_engine::dispatch::Chunk;
use conv_engine::error::ConvError;
use conv_engine::problem::{ConvDType, ConvProblem};
use conv_engine::{ConvGeometry, ConvKind, Epilogue};
use half::f16;
use std::any::TypeId;

/// The gemm crate keeps one L2-sized packing slab per thread.
pub(super) fn l2_slab_bytes() -> usize {
    gemm_common::cache::CACHE_INFO[1].cache_bytes
}

pub(super) fn supports(problem: &ConvProblem) -> bool {
    geometry_fits(problem.geometry()) && problem.dtype() != ConvDType::BF16 // the gemm crate has no bf16
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
    let pixels = chunk.rows.len() * g.out_hw()[1];
    let (m, k) = (g.out_channels_per_group(), g.in_channels_per_group());
    Some(threads * l2_slab_bytes() + (k * pixels + m * k) * 4)
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
    super::check_executor_args(geometry_fits(g), g, &rows, x, w, bias, epilogue.residual, out)?;
    let [h, wd] = g.in_size;
    let [p, q] = g.out_hw();
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
                        crate::implicit_gemm::apply_epilogue_in_place(epilogue, bv, dst, res);
                    }
                }
            });
        }
    }
    Ok(())
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
