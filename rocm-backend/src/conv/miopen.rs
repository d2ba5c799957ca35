//! `Miopen` (feature `miopen`): MIOpen's Immediate mode on the device's MIOpen handle
//! (opened once per device, on first use). Its workspace is the chosen solution's: the
//! fastest by MIOpen's estimate among those whose workspace fits what the budget leaves,
//! so a problem MIOpen does not support, or whose solutions all need more, is never
//! planned on it. Whole problems or batch chunks (each a sub-problem of its own); never
//! output-row chunks. Without the feature the catalog does not offer it.

use super::RocmPlan;
use crate::buffer::DeviceArray;
use crate::device::RocmDevice;
use crate::error::{Result, RocmError};
use conv_engine::{Chunk, ConvProblem};
use std::sync::Arc;

/// The sub-problem a `Miopen` plan runs for `chunk` of `p`: the chunk's images, all output
/// rows (`None` for a chunk of output rows, which MIOpen cannot run).
pub fn miopen_chunk_problem(p: &ConvProblem, chunk: &Chunk) -> Option<ConvProblem> {
    (chunk.rows == (0..p.geometry().out_hw()[0]) && !chunk.batch.is_empty())
        .then(|| p.with_batch(chunk.batch.len()).ok())
        .flatten()
}

/// `Miopen`'s workspace for `chunk` of `p` within `limit` bytes (see
/// [`crate::miopen::offered_workspace`]); `None` when MIOpen cannot run it.
#[cfg(feature = "miopen")]
pub(super) fn miopen_workspace(device: &RocmDevice, p: &ConvProblem, chunk: &Chunk, limit: usize) -> Option<usize> {
    let sub = miopen_chunk_problem(p, chunk)?;
    if !crate::miopen::supports(&sub) {
        return None;
    }
    let solutions = device.miopen().and_then(|m| m.solutions(&sub));
    match solutions {
        Ok(s) => crate::miopen::offered_workspace(&s, limit),
        Err(e) => {
            tracing::debug!(target: "rocm_backend::miopen", problem = %sub, error = %e, "MIOpen not offered");
            None
        }
    }
}

#[cfg(not(feature = "miopen"))]
pub(super) fn miopen_workspace(_device: &RocmDevice, _p: &ConvProblem, _chunk: &Chunk, _limit: usize) -> Option<usize> {
    None
}

/// Runs a `Miopen` plan into `out` (contiguous NCHW, no bias): per chunk, the solution
/// chosen within the plan's `workspace_limit` — the one the catalog reported when the plan
/// was made — with its workspace from the device's budgeted allocator.
#[cfg(feature = "miopen")]
pub fn run_miopen_into(
    device: &Arc<RocmDevice>,
    plan: &RocmPlan,
    x: &DeviceArray,
    w: &DeviceArray,
    out: &DeviceArray,
) -> Result<()> {
    let p = &plan.problem();
    if plan.algorithm() != conv_engine::Algorithm::Miopen {
        return Err(RocmError::op("conv", format!("run_miopen_into was given a {} plan for {p}", plan.algorithm())));
    }
    let mi = device.miopen()?;
    for chunk in plan.chunks() {
        let sub = miopen_chunk_problem(p, &chunk).ok_or_else(|| {
            RocmError::op("conv", format!("MIOpen cannot run output rows {:?} of {p} as a chunk", chunk.rows))
        })?;
        let solution = mi.best_within(&sub, plan.workspace_limit())?.ok_or_else(|| {
            RocmError::op(
                "conv",
                format!("no MIOpen solution for {sub} fits the plan's {} workspace bytes", plan.workspace_limit()),
            )
        })?;
        tracing::debug!(target: "rocm_backend::miopen", problem = %sub, images = ?chunk.batch, solution = solution.id, workspace_bytes = solution.workspace_bytes, "MIOpen run");
        mi.run(device, &sub, &solution, x, w, out, chunk.batch.start)?;
    }
    Ok(())
}

/// Without the `miopen` feature there is no MIOpen to run.
#[cfg(not(feature = "miopen"))]
pub fn run_miopen_into(
    _device: &Arc<RocmDevice>,
    _plan: &RocmPlan,
    _x: &DeviceArray,
    _w: &DeviceArray,
    _out: &DeviceArray,
) -> Result<()> {
    Err(RocmError::op("conv", "the Miopen algorithm is not built into this backend"))
}

/// Seconds this device has spent compiling MIOpen solutions (the one-time cost of the
/// `Miopen` algorithm; each compile is also a `tracing` event). Opens the device's MIOpen
/// if nothing has yet.
#[cfg(feature = "miopen")]
pub fn miopen_compile_seconds(device: &RocmDevice) -> Result<f64> {
    Ok(device.miopen()?.compile_seconds())
}

#[cfg(test)]
mod tests {
    use super::*;
    use conv_engine::Conv2dParams as Params;

    #[test]
    fn miopen_chunks_are_whole_images() {
        let dt = candle_core::DType::F32;
        let p = ConvProblem::conv2d(&[5, 4, 9, 7], &[6, 4, 3, 3], dt, dt, &Params::default().with_stride(2)).unwrap();
        let rows = p.geometry().out_hw()[0];
        assert_eq!(rows, 4);
        assert_eq!(miopen_chunk_problem(&p, &Chunk { batch: 0..5, rows: 0..rows }), Some(p));
        let sub = miopen_chunk_problem(&p, &Chunk { batch: 3..5, rows: 0..rows }).unwrap();
        assert_eq!(sub.geometry().batch, 2);
        assert_eq!(sub, p.with_batch(2).unwrap());
        // Output-row chunks are not MIOpen problems.
        assert_eq!(miopen_chunk_problem(&p, &Chunk { batch: 0..1, rows: 0..2 }), None);
        assert_eq!(miopen_chunk_problem(&p, &Chunk { batch: 0..1, rows: 2..4 }), None);
        assert_eq!(miopen_chunk_problem(&p, &Chunk { batch: 2..2, rows: 0..rows }), None);
    }
}
