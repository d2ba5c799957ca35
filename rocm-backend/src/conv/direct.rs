//! `Direct` on ROCm: one thread per output element, any parameters, no workspace; the
//! fallback for everything and the reference the GPU tests compare the others with.

use super::kernel_params;
use crate::buffer::DeviceArray;
use crate::device::RocmDevice;
use crate::error::Result;
use crate::launch::{Arg, grid_for, launch};
use crate::ops::kernel_dtype;
use conv_engine::ConvProblem;
use implicit_gemm::ConvKind;
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
    let g = &p.geometry;
    let kd = kernel_dtype(p.dtype.to_candle())?;
    let entry = match g.kind {
        ConvKind::Forward => format!("conv2d_direct_{}", kd.suffix()),
        ConvKind::Transposed => format!("conv_transpose2d_direct_{}", kd.suffix()),
    };
    launch(
        device,
        &entry,
        (grid_for(out.len, 256), 1, 1),
        (256, 1, 1),
        &mut [
            Arg::Conv(kernel_params(g, g.batch)),
            Arg::Ptr(x.ptr_at(0)),
            Arg::Ptr(w.ptr_at(0)),
            Arg::Ptr(bias.map_or(0, |b| b.ptr_at(0))),
            Arg::Ptr(out.ptr_at(0)),
        ],
    )
}
