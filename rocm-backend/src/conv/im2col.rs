//! `Im2colGemm` on ROCm: the im2col kernel into a column buffer (one image, a band of
//! output rows per chunk — the buffer is the workspace) and a rocBLAS GEMM; transposed
//! convolutions as a GEMM into columns and `col2im` over whole images.

use super::kernel_params;
use crate::buffer::DeviceArray;
use crate::device::RocmDevice;
use crate::error::Result;
use crate::launch::{Arg, Grid, Kernel, launch};
use crate::ops::kernel_dtype;
use conv_engine::{Chunk, Chunking, ConvProblem};
use implicit_gemm::ConvKind;
use kernels::family;
use std::sync::Arc;

/// Column-buffer elements of one chunk.
pub(super) fn col_elems(p: &ConvProblem, chunk: &Chunk) -> Option<usize> {
    let g = p.geometry();
    let [_, q] = g.out_hw();
    match g.kind {
        // One image at a time; a band of output rows.
        ConvKind::Forward => Some(g.in_channels * g.taps() * chunk.rows.len() * q),
        // GEMM into columns then col2im over whole images: no row chunks.
        ConvKind::Transposed => {
            (chunk.rows.len() == g.out_hw()[0]).then(|| g.out_channels * g.taps() * g.in_size[0] * g.in_size[1])
        }
    }
}

/// Whether `chunking` is one this algorithm runs: transposed convolutions only in whole images.
pub(super) fn runs(p: &ConvProblem, chunking: Chunking) -> bool {
    p.geometry().kind == ConvKind::Forward || chunking.rows_per_chunk >= p.geometry().out_hw()[0]
}

/// Runs `p` into `out` (no bias) with column buffers of `rows_per_chunk` output rows.
pub(super) fn run(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    rows_per_chunk: usize,
    x: &DeviceArray,
    w: &DeviceArray,
    out: &DeviceArray,
) -> Result<()> {
    let g = p.geometry();
    let dtype = p.dtype().to_candle();
    let kd = kernel_dtype(dtype)?;
    let (img_in, img_out) = (g.input_len() / g.batch, g.output_len() / g.batch);
    let [pp, qq] = g.out_hw();
    let blas = device.blas()?;
    let (kg, cg) = (g.out_channels_per_group(), g.in_channels_per_group());
    let rs = g.taps();
    match g.kind {
        ConvKind::Forward => {
            let rows = rows_per_chunk;
            let col = DeviceArray::alloc(device, dtype, g.in_channels * rs * rows * qq)?;
            let params = kernel_params(g, 1);
            for n in 0..g.batch {
                for r0 in (0..pp).step_by(rows) {
                    let count = rows.min(pp - r0) * qq;
                    let pix_begin = r0 * qq;
                    launch(
                        device,
                        &Kernel::new(&family::IM2COL, "", kd)?,
                        Grid::Explicit {
                            grid: (count.div_ceil(256) as u32, (g.in_channels * rs).min(65535) as u32, 1),
                            block: (256, 1, 1),
                        },
                        &mut [
                            Arg::Conv(params),
                            Arg::I64(pix_begin as i64),
                            Arg::I64(count as i64),
                            Arg::Ptr(x.ptr_at(n * img_in)),
                            Arg::Ptr(col.ptr_at(0)),
                        ],
                    )?;
                    // Per group: Out[kg, count] (ld = p·q) = W[kg, cg·rs] · col[cg·rs, count];
                    // column-major: Outᵀ = colᵀ · Wᵀ, groups as the batch.
                    blas.gemm_strided_batched(
                        dtype,
                        false,
                        false,
                        (count, kg, cg * rs),
                        (col.ptr_at(0), count, cg * rs * count),
                        (w.ptr_at(0), cg * rs, kg * cg * rs),
                        (out.ptr_at(n * img_out + pix_begin), pp * qq, kg * pp * qq),
                        g.groups,
                    )?;
                }
            }
        }
        ConvKind::Transposed => {
            let [h, wd] = g.in_size;
            let hw = h * wd;
            let col = DeviceArray::alloc(device, dtype, g.out_channels * rs * hw)?;
            // col2im sees the forward convolution whose input is our output.
            let mut fwd = kernel_params(g, 1);
            fwd.c = g.out_channels as i32;
            fwd.h = pp as i32;
            fwd.w = qq as i32;
            fwd.k = g.in_channels as i32;
            fwd.p = h as i32;
            fwd.q = wd as i32;
            for n in 0..g.batch {
                // Per group: col[kg·rs, hw] = W_gᵀ[kg·rs, cg] · X_g[cg, hw]; column-major:
                // colᵀ[hw, kg·rs] = X_gᵀ[hw, cg] · W_g[cg, kg·rs] with W_g stored
                // row-major [cg, kg·rs], i.e. transposed for BLAS.
                blas.gemm_strided_batched(
                    dtype,
                    false,
                    true,
                    (hw, kg * rs, cg),
                    (x.ptr_at(n * img_in), hw, cg * hw),
                    (w.ptr_at(0), kg * rs, cg * kg * rs),
                    (col.ptr_at(0), hw, kg * rs * hw),
                    g.groups,
                )?;
                launch(
                    device,
                    &Kernel::new(&family::COL2IM, "", kd)?,
                    Grid::Elements(img_out),
                    &mut [Arg::Conv(fwd), Arg::Ptr(col.ptr_at(0)), Arg::Ptr(out.ptr_at(n * img_out))],
                )?;
            }
        }
    }
    Ok(())
}
