//! `Im2colGemm` on the CPU: candle's own convolution (tiled im2col + the gemm crate), the
//! anchor every CPU figure is compared with, selectable like any other algorithm.
//!
//! candle allocates its buffers itself, so its workspace is an upper bound derived from
//! candle 0.11.1's CPU implementation (`cpu_backend/conv2d.rs`, `cpu_backend/mod.rs`),
//! not a count; the budget tests check it against the allocator's real peak.

use super::{cpu_slice, output_buffer};
use crate::CpuPlan;
use crate::implicit_gemm::Element;
use candle_core::{Device, Tensor, WithDType};
use conv_engine::ConvKind;
use conv_engine::dispatch::Chunk;
use conv_engine::error::ConvError;
use conv_engine::problem::{ConvDType, ConvProblem, Rank};

/// Output pixels per im2col tile in candle's tiled conv2d (`TILE_SIZE`).
const CANDLE_TILE: usize = 512;

/// Bytes of the gemm crate's own buffers: its per-thread L2 slab plus its packing of one
/// operand.
fn gemm_internal_bytes(threads: usize, operand_elems: usize) -> usize {
    threads * super::gemm1x1::l2_slab_bytes() + operand_elems * 4
}

fn supports(problem: &ConvProblem, chunk: &Chunk) -> bool {
    let g = problem.geometry();
    let uniform_pad = g.pad_begin == g.pad_end && g.pad_begin[0] == g.pad_begin[1];
    let whole_rows = chunk.rows.len() == g.out_hw()[0];
    problem.dtype() != ConvDType::BF16 // candle's CPU matmul has no bf16
        && g.groups == 1
        && match (g.kind, problem.rank()) {
            (ConvKind::Forward, Rank::Two) => g.stride[0] == g.stride[1] && g.dilation[0] == g.dilation[1],
            (ConvKind::Forward, Rank::One) => true,
            (ConvKind::Transposed, Rank::Two) => {
                whole_rows
                    && uniform_pad
                    && g.stride[0] == g.stride[1]
                    && g.dilation[0] == g.dilation[1]
                    && g.output_padding[0] == g.output_padding[1]
            }
            // candle computes `(l_in - 1)·stride - 2·padding` first, which underflows
            // (a panic in debug builds) when the padding is larger, even if the output
            // size is valid.
            (ConvKind::Transposed, Rank::One) => {
                let col2im_path = g.dilation[1] == 1 && g.pad_begin[1] == 0 && g.output_padding[1] == 0;
                whole_rows
                    && g.pad_begin[1] == g.pad_end[1]
                    && (g.in_size[1] - 1) * g.stride[1] >= 2 * g.pad_begin[1]
                    // candle's col2im path gives wrong results for every image after the
                    // first (verified against the f64 reference): one image per chunk.
                    && (!col2im_path || chunk.batch.len() == 1)
            }
        }
}

/// Whether the chunk's input must be padded explicitly (candle takes one symmetric
/// padding for all sides, and a row chunk's padding differs at top and bottom).
fn needs_pad_copy(problem: &ConvProblem, chunk: &Chunk) -> bool {
    let g = problem.geometry();
    if g.kind == ConvKind::Transposed {
        return false;
    }
    let whole_rows = chunk.rows.len() == g.out_hw()[0];
    match problem.rank() {
        Rank::Two => !(whole_rows && g.pad_begin == g.pad_end && g.pad_begin[0] == g.pad_begin[1]),
        Rank::One => g.pad_begin[1] != g.pad_end[1],
    }
}

/// Upper bound of the bytes candle allocates for `chunk`, or `None` if it cannot run it.
pub(super) fn workspace_bytes(problem: &ConvProblem, chunk: &Chunk, threads: usize) -> Option<usize> {
    workspace_parts(problem, chunk, threads).map(|(candle, gemm)| candle + gemm)
}

/// The part of [`workspace_bytes`] that is the gemm crate's own buffers (see
/// `CpuConv::gemm_crate_bytes`).
pub(super) fn gemm_crate_bytes(problem: &ConvProblem, chunk: &Chunk, threads: usize) -> Option<usize> {
    workspace_parts(problem, chunk, threads).map(|(_, gemm)| gemm)
}

/// `(bytes candle allocates itself, bytes of the gemm crate's buffers)` for `chunk`.
fn workspace_parts(problem: &ConvProblem, chunk: &Chunk, threads: usize) -> Option<(usize, usize)> {
    if !supports(problem, chunk) {
        return None;
    }
    let g = problem.geometry();
    let sz = problem.dtype().size_in_bytes();
    let b = chunk.batch.len();
    let (c, k) = (g.in_channels, g.out_channels);
    let [r, s] = g.kernel;
    let [_, q] = g.out_hw();
    let rows = chunk.rows.len();
    let out = b * k * rows * q;
    let (elems, gemm) = match g.kind {
        ConvKind::Forward => {
            let (sub, _) = problem.output_rows(chunk.rows.clone()).ok()?;
            let sg = sub.geometry();
            let (h, w) = if needs_pad_copy(problem, chunk) {
                (sg.in_size[0] + sg.pad_begin[0] + sg.pad_end[0], sg.in_size[1] + sg.pad_begin[1] + sg.pad_end[1])
            } else {
                (sg.in_size[0], sg.in_size[1])
            };
            // pad_with_zeros pads one dimension at a time: two copies alive at once, then
            // the padded one while candle runs (which copies it again, below), so the
            // padding adds one copy to the peak.
            let pad_copy = if needs_pad_copy(problem, chunk) { b * c * h * w } else { 0 };
            let pixels = rows * q;
            let ksize = c * r * s;
            let (conv, gemm) = match problem.rank() {
                // conv1d: full im2col, the matmul result, and its transposed copy.
                Rank::One => (b * pixels * ksize + b * pixels * k, gemm_internal_bytes(threads, b * pixels * ksize)),
                Rank::Two
                    if r == 1
                        && s == 1
                        && g.stride[0] == 1
                        && !needs_pad_copy(problem, chunk)
                        && g.pad_begin == [0, 0] =>
                {
                    // conv2d_1x1: per concurrently processed image, a copy and a result.
                    (b.min(threads) * (c + k) * pixels, gemm_internal_bytes(threads, c * pixels))
                }
                Rank::Two if r == 1 && s == 1 => {
                    (b * pixels * (ksize + k), gemm_internal_bytes(threads, b * pixels * ksize))
                }
                Rank::Two => {
                    // conv2d_tiled: an NHWC copy of the input, the flattened kernel, and
                    // per thread one column tile, one result tile and the tile's output
                    // coordinates (a `(usize, usize)` per pixel).
                    let coords = (CANDLE_TILE * 2 * std::mem::size_of::<usize>()).div_ceil(sz);
                    (
                        b * c * h * w + k * ksize + threads * (ksize * CANDLE_TILE + k * CANDLE_TILE + coords),
                        gemm_internal_bytes(threads, ksize * CANDLE_TILE),
                    )
                }
            };
            (pad_copy + conv, gemm)
        }
        ConvKind::Transposed => {
            let [h, w] = g.in_size;
            match problem.rank() {
                // col2im path: a [b, L, K·k] column matrix.
                Rank::One => (b * w * k * s + b * c * w, gemm_internal_bytes(threads, b * w * c)),
                // An NHWC copy of the input and a per-task kernel column.
                Rank::Two => (b * c * h * w + threads * c, 0),
            }
        }
    };
    Some(((elems + out) * sz, gemm))
}

/// Runs `plan` through candle: every chunk is a candle conv on a view (or an explicitly
/// padded copy) of the input; results are copied into the output with the bias added.
pub(super) fn run<T: Element + WithDType>(
    plan: &CpuPlan,
    meter: &conv_engine::workspace::WorkspaceMeter,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
) -> Result<Tensor, ConvError> {
    let problem = plan.problem();
    let g = problem.geometry();
    let [p, q] = g.out_hw();
    let mut out = output_buffer::<T>(meter, g.output_len())?;
    let bias = bias.map(|b| b.to_vec1::<T>()).transpose()?;
    for chunk in plan.chunks() {
        let x = input.narrow(0, chunk.batch.start, chunk.batch.len())?;
        let y = match (g.kind, problem.rank()) {
            (ConvKind::Forward, Rank::Two) => {
                if needs_pad_copy(problem, &chunk) {
                    let (sub, in_rows) = problem.output_rows(chunk.rows.clone())?;
                    let sg = sub.geometry();
                    let x = x
                        .narrow(2, in_rows.start, in_rows.len())?
                        .pad_with_zeros(2, sg.pad_begin[0], sg.pad_end[0])?
                        .pad_with_zeros(3, sg.pad_begin[1], sg.pad_end[1])?;
                    x.conv2d(weight, 0, g.stride[0], g.dilation[0], 1)?
                } else {
                    x.conv2d(weight, g.pad_begin[0], g.stride[0], g.dilation[0], 1)?
                }
            }
            (ConvKind::Forward, Rank::One) => {
                if needs_pad_copy(problem, &chunk) {
                    let x = x.pad_with_zeros(2, g.pad_begin[1], g.pad_end[1])?;
                    x.conv1d(weight, 0, g.stride[1], g.dilation[1], 1)?
                } else {
                    x.conv1d(weight, g.pad_begin[1], g.stride[1], g.dilation[1], 1)?
                }
            }
            (ConvKind::Transposed, Rank::Two) => {
                x.conv_transpose2d(weight, g.pad_begin[0], g.output_padding[0], g.stride[0], g.dilation[0])?
            }
            (ConvKind::Transposed, Rank::One) => {
                x.conv_transpose1d(weight, g.pad_begin[1], g.output_padding[1], g.stride[1], g.dilation[1], 1)?
            }
        };
        let y = y.contiguous()?;
        let (st, layout) = y.storage_and_layout();
        let ys = cpu_slice::<T>(&st, layout)?;
        let rows = chunk.rows.len();
        for (i, n) in chunk.batch.clone().enumerate() {
            for ch in 0..g.out_channels {
                let src = &ys[(i * g.out_channels + ch) * rows * q..][..rows * q];
                let dst = &mut out[((n * g.out_channels + ch) * p + chunk.rows.start) * q..][..rows * q];
                match &bias {
                    Some(b) => {
                        let bv = b[ch].to_f32();
                        for (d, s) in dst.iter_mut().zip(src) {
                            *d = T::from_f32(s.to_f32() + bv);
                        }
                    }
                    None => dst.copy_from_slice(src),
                }
            }
        }
    }
    Ok(Tensor::from_vec(out, problem.output_shape(), &Device::Cpu)?)
}
