//! `Direct` on ROCm: one thread per output element, any parameters, no workspace; the
//! fallback for everything and the reference the GPU tests compare the others with.

use super::kernel_params;
use crate::buffer::DeviceArray;
use crate::device::RocmDevice;
use crate::error::Result;
use crate::launch::{Arg, Grid, Kernel, launch};
use crate::ops::kernel_dtype;
use conv_engine::ConvProblem;
use implicit_gemm::ConvKind;
use kernels::family;
use std::sync::Arc;

/// Runs `p` into `out` with the bias fused.
pub(super) fn run(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    out: &DeviceArray,
) -> Result<()> {
    let g = p.geometry();
    let kd = kernel_dtype(p.dtype().to_candle())?;
    let family = match g.kind {
        ConvKind::Forward => &family::CONV2D_DIRECT,
        ConvKind::Transposed => &family::CONV_TRANSPOSE2D_DIRECT,
    };
    launch(
        device,
        &Kernel::new(family, "", kd)?,
        Grid::Elements(out.len),
        &mut [
            Arg::Conv(kernel_params(g, g.batch)),
            Arg::Ptr(x.ptr_at(0)),
            Arg::Ptr(w.ptr_at(0)),
            Arg::Ptr(bias.map_or(0, |b| b.ptr_at(0))),
            Arg::Ptr(out.ptr_at(0)),
        ],
    )
}
