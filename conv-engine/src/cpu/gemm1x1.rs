//! `Gemm1x1` on the CPU: a 1x1, stride-1, unpadded convolution is, per image and group,
//! `Out[K/g, pixels] = W[K/g, C/g] × X[C/g, pixels]` over the tensors in place — the gemm
//! crate reads the input and writes the output through strides, no copy of ours.

use crate::dispatch::Chunk;
use crate::error::ConvError;
use crate::problem::{ConvDType, ConvProblem};
use half::f16;
use implicit_gemm::cpu::Element;
use implicit_gemm::{ConvGeometry, ConvKind};
use std::any::TypeId;

/// The gemm crate keeps one L2-sized packing slab per thread.
pub(super) fn l2_slab_bytes() -> usize {
    gemm_common::cache::CACHE_INFO[1].cache_bytes
}

pub(super) fn supports(problem: &ConvProblem) -> bool {
    let g = &problem.geometry;
    g.kind == ConvKind::Forward
        && g.kernel == [1, 1]
        && g.stride == [1, 1]
        && g.pad_begin == [0, 0]
        && g.pad_end == [0, 0]
        && problem.dtype != ConvDType::BF16 // the gemm crate has no bf16
}

/// Upper bound of the gemm crate's buffers: per-thread slabs and a packed copy of at most
/// the whole right-hand operand (in f32 for f16 inputs).
pub(super) fn workspace_bytes(problem: &ConvProblem, chunk: &Chunk, threads: usize) -> Option<usize> {
    if !supports(problem) {
        return None;
    }
    let g = &problem.geometry;
    let pixels = chunk.rows.len() * g.out_hw()[1];
    let (m, k) = (g.out_channels_per_group(), g.in_channels_per_group());
    Some(threads * l2_slab_bytes() + (k * pixels + m * k) * 4)
}

/// Output rows `rows` of every image in `g` (which `supports` accepted).
pub(super) fn run<T: Element>(
    g: &ConvGeometry,
    x: &[T],
    w: &[T],
    bias: Option<&[T]>,
    out: &mut [T],
    rows: std::ops::Range<usize>,
    threads: usize,
) -> Result<(), ConvError> {
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
            // SAFETY: the slices hold every element addressed: rows `rows` of `k` input
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
    }
    if let Some(b) = bias {
        for n in 0..g.batch {
            for ch in 0..g.out_channels {
                let bv = b[ch].to_f32();
                let dst = &mut out[((n * g.out_channels + ch) * p + rows.start) * q..][..pixels];
                dst.iter_mut().for_each(|v| *v = T::from_f32(v.to_f32() + bv));
            }
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
