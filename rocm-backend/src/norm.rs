//! Normalisations of contiguous arrays, kernels of `norm.hip`: group normalisation (with
//! its fused SiLU) over `[n, c, hw]`, and layer / RMS normalisation over the last dimension
//! of `[rows, cols]`. Statistics in f32 whatever the dtype.

use crate::buffer::DeviceArray;
use crate::error::{Result, RocmError};
use crate::launch::{Arg, BLOCK, Grid, Kernel, launch};
use crate::ops::float_only;
use candle_core::DType;
use kernels::family;

/// Group normalisation of a contiguous `[n, c, hw]` array, optional affine and fused SiLU.
#[allow(clippy::too_many_arguments)]
pub fn group_norm(
    x: &DeviceArray,
    n: usize,
    c: usize,
    hw: usize,
    groups: usize,
    gamma: Option<&DeviceArray>,
    beta: Option<&DeviceArray>,
    eps: f64,
    silu: bool,
) -> Result<DeviceArray> {
    let d = float_only("group_norm", x.dtype)?;
    if n * c * hw != x.len || groups == 0 || c % groups != 0 {
        return Err(RocmError::op(
            "group_norm",
            format!("[{n}, {c}, {hw}] with {groups} groups does not fit a {}-element array", x.len),
        ));
    }
    check_affine(x, c, gamma, beta)?;
    let out = DeviceArray::alloc(x.device(), x.dtype, x.len)?;
    if x.len == 0 {
        return Ok(out);
    }
    let chunks = slices_per_group(c, groups, hw);
    let partial = DeviceArray::alloc(x.device(), DType::F32, n * groups * chunks * 3)?;
    let grid = (chunks as u32, groups as u32, n as u32);
    launch(
        x.device(),
        &Kernel::new(&family::GROUP_NORM_STATS, "", d)?,
        Grid::Explicit { grid, block: (BLOCK, 1, 1) },
        &mut [
            Arg::I32(n as i32),
            Arg::I32(c as i32),
            Arg::I64(hw as i64),
            Arg::I32(groups as i32),
            Arg::I32(chunks as i32),
            Arg::Ptr(x.ptr_at(0)),
            Arg::Ptr(partial.ptr_at(0)),
        ],
    )?;
    apply(x, &out, (n, c, hw, groups, chunks), &partial, gamma, beta, eps, silu)?;
    Ok(out)
}

/// Slices per group for both launches: enough to fill the GPU, each slice at least a few
/// thousand values.
fn slices_per_group(c: usize, groups: usize, hw: usize) -> usize {
    ((c / groups) * hw).div_ceil(8192).clamp(1, 256)
}

/// Group normalisation of a contiguous `[1, c, hw]` array with statistics given per group
/// (`mean`, biased `var`; a banded decode's, taken over the whole map): the second launch
/// of [`group_norm`] alone. Each group's first slice holds the statistics as a one-value
/// Welford state `(1, mean, var)` and the others are empty, which the kernel's merge
/// leaves unchanged (adding an empty state is exact), so every slice reads `mean` and
/// `var` as given.
#[allow(clippy::too_many_arguments)]
pub fn group_norm_with_stats(
    x: &DeviceArray,
    c: usize,
    hw: usize,
    mean: &[f32],
    var: &[f32],
    gamma: Option<&DeviceArray>,
    beta: Option<&DeviceArray>,
    eps: f64,
    silu: bool,
) -> Result<DeviceArray> {
    float_only("group_norm", x.dtype)?;
    let groups = mean.len();
    if c * hw != x.len || groups == 0 || c % groups != 0 || var.len() != groups {
        return Err(RocmError::op(
            "group_norm",
            format!(
                "[1, {c}, {hw}] with {groups} group means and {} variances does not fit a {}-element array",
                var.len(),
                x.len
            ),
        ));
    }
    check_affine(x, c, gamma, beta)?;
    let out = DeviceArray::alloc(x.device(), x.dtype, x.len)?;
    if x.len == 0 {
        return Ok(out);
    }
    let chunks = slices_per_group(c, groups, hw);
    let mut states = vec![0f32; groups * chunks * 3];
    for g in 0..groups {
        states[g * chunks * 3..][..3].copy_from_slice(&[1.0, mean[g], var[g]]);
    }
    let partial = DeviceArray::from_slice(x.device(), &states)?;
    apply(x, &out, (1, c, hw, groups, chunks), &partial, gamma, beta, eps, silu)?;
    Ok(out)
}

fn check_affine(x: &DeviceArray, c: usize, gamma: Option<&DeviceArray>, beta: Option<&DeviceArray>) -> Result<()> {
    for t in [gamma, beta].into_iter().flatten() {
        if t.len != c || t.dtype != x.dtype {
            return Err(RocmError::op(
                "group_norm",
                format!("affine parameter has {} {:?} elements, expected {c} {:?}", t.len, t.dtype, x.dtype),
            ));
        }
    }
    Ok(())
}

/// `group_norm_apply`: normalises `x` into `out` with the slice statistics in `partial`.
#[allow(clippy::too_many_arguments)]
fn apply(
    x: &DeviceArray,
    out: &DeviceArray,
    (n, c, hw, groups, chunks): (usize, usize, usize, usize, usize),
    partial: &DeviceArray,
    gamma: Option<&DeviceArray>,
    beta: Option<&DeviceArray>,
    eps: f64,
    silu: bool,
) -> Result<()> {
    let d = float_only("group_norm", x.dtype)?;
    let grid = (chunks as u32, groups as u32, n as u32);
    launch(
        x.device(),
        &Kernel::new(&family::GROUP_NORM_APPLY, "", d)?,
        Grid::Explicit { grid, block: (BLOCK, 1, 1) },
        &mut [
            Arg::I32(n as i32),
            Arg::I32(c as i32),
            Arg::I64(hw as i64),
            Arg::I32(groups as i32),
            Arg::I32(chunks as i32),
            Arg::Ptr(partial.ptr_at(0)),
            Arg::F64(eps),
            Arg::Ptr(gamma.map_or(0, |g| g.ptr_at(0))),
            Arg::Ptr(beta.map_or(0, |b| b.ptr_at(0))),
            Arg::Ptr(x.ptr_at(0)),
            Arg::Ptr(out.ptr_at(0)),
            Arg::I32(silu as i32),
        ],
    )
}

/// Layer normalisation over the last dimension of a contiguous `[rows, cols]` array.
pub fn layer_norm(
    x: &DeviceArray,
    rows: usize,
    cols: usize,
    gamma: Option<&DeviceArray>,
    beta: Option<&DeviceArray>,
    eps: f64,
) -> Result<DeviceArray> {
    row_norm("layer_norm", x, rows, cols, gamma, beta, eps)
}

/// RMS normalisation over the last dimension of a contiguous `[rows, cols]` array:
/// `x / sqrt(mean(x²) + eps) · gamma (+ beta)` (candle_nn's `rms_norm` has gamma only).
pub fn rms_norm(
    x: &DeviceArray,
    rows: usize,
    cols: usize,
    gamma: Option<&DeviceArray>,
    beta: Option<&DeviceArray>,
    eps: f64,
) -> Result<DeviceArray> {
    row_norm("rms_norm", x, rows, cols, gamma, beta, eps)
}

fn row_norm(
    name: &'static str,
    x: &DeviceArray,
    rows: usize,
    cols: usize,
    gamma: Option<&DeviceArray>,
    beta: Option<&DeviceArray>,
    eps: f64,
) -> Result<DeviceArray> {
    let d = float_only(name, x.dtype)?;
    if rows * cols != x.len {
        return Err(RocmError::op(name, format!("[{rows}, {cols}] does not cover a {}-element array", x.len)));
    }
    for t in [gamma, beta].into_iter().flatten() {
        if t.len != cols || t.dtype != x.dtype {
            return Err(RocmError::op(
                name,
                format!("affine parameter has {} {:?} elements, expected {cols} {:?}", t.len, t.dtype, x.dtype),
            ));
        }
    }
    let out = DeviceArray::alloc(x.device(), x.dtype, x.len)?;
    if x.len > 0 {
        launch(
            x.device(),
            &Kernel::new(&family::ROW_NORM, name, d)?,
            Grid::Rows(rows),
            &mut [
                Arg::I64(rows as i64),
                Arg::I64(cols as i64),
                Arg::F64(eps),
                Arg::Ptr(gamma.map_or(0, |g| g.ptr_at(0))),
                Arg::Ptr(beta.map_or(0, |b| b.ptr_at(0))),
                Arg::Ptr(x.ptr_at(0)),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}
