//! `Gemm1x1` on ROCm: a 1x1, stride-1, unpadded convolution is one rocBLAS GEMM per group
//! straight on the input and output (images as the batch); no workspace.

use crate::buffer::DeviceArray;
use crate::device::RocmDevice;
use crate::error::Result;
use conv_engine::ConvProblem;
use implicit_gemm::ConvKind;
use std::sync::Arc;

/// Whether `p` is a plain GEMM.
pub(super) fn applies(p: &ConvProblem) -> bool {
    let g = p.geometry();
    g.kind == ConvKind::Forward
        && g.kernel == [1, 1]
        && g.stride == [1, 1]
        && g.pad_begin == [0, 0]
        && g.pad_end == [0, 0]
}

/// Runs `p` into `out` (no bias).
pub(super) fn run(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    x: &DeviceArray,
    w: &DeviceArray,
    out: &DeviceArray,
) -> Result<()> {
    let g = p.geometry();
    let dtype = p.dtype().to_candle();
    let (img_in, img_out) = (g.input_len() / g.batch, g.output_len() / g.batch);
    let [pp, qq] = g.out_hw();
    let blas = device.blas()?;
    let (kg, cg) = (g.out_channels_per_group(), g.in_channels_per_group());
    let hw = pp * qq;
    // Row-major Out[kg, hw] = W[kg, cg] · X[cg, hw] is column-major
    // Outᵀ[hw, kg] = Xᵀ[hw, cg] · Wᵀ[cg, kg]; images are the batch.
    for grp in 0..g.groups {
        blas.gemm_strided_batched(
            dtype,
            false,
            false,
            (hw, kg, cg),
            (x.ptr_at(grp * cg * hw), hw, img_in),
            (w.ptr_at(grp * kg * cg), cg, 0),
            (out.ptr_at(grp * kg * hw), hw, img_out),
            g.batch,
        )?;
    }
    Ok(())
}
