//! Resampling with candle's semantics: `upsample_nearest1d`, `upsample_nearest2d` and
//! `upsample_bilinear2d` (align_corners true and false), kernels of `resample.hip` (nearest-2d's
//! of `copy.hip`). The 1-D and bilinear inputs are read through their candle `Layout` (a
//! non-contiguous view is copied first); nearest-2d takes a contiguous array; outputs are
//! contiguous.

use crate::buffer::DeviceArray;
use crate::error::{Result, RocmError};
use crate::launch::{Arg, Grid, Kernel, launch};
use crate::ops::{check_view, contiguous, float_only, kernel_dtype};
use candle_core::Layout;
use kernels::family;

/// The kernels index sizes with i32.
fn fits_i32(op: &'static str, what: &str, v: usize) -> Result<i32> {
    i32::try_from(v).map_err(|_| RocmError::op(op, format!("{what} {v} exceeds the kernels' i32 range")))
}

/// `(batch, channels, l)` of a 3-D input, checked for `upsample_nearest1d` to `target`.
pub fn nearest1d_geometry(dims: &[usize], target: usize) -> Result<(usize, usize)> {
    let &[n, c, l] = dims else {
        return Err(RocmError::op("upsample_nearest1d", format!("needs a 3-D (n, c, l) input, got shape {dims:?}")));
    };
    if target == 0 || l == 0 {
        return Err(RocmError::op(
            "upsample_nearest1d",
            format!("input length {l} and target length {target} must both be positive"),
        ));
    }
    fits_i32("upsample_nearest1d", "length", l.max(target))?;
    Ok((n * c, l))
}

/// candle's scale of a nearest resize: `in / out` in f64.
pub fn nearest_scale(len_in: usize, len_out: usize) -> f64 {
    len_in as f64 / len_out as f64
}

/// candle's (and PyTorch's) scale of a bilinear resize along one axis.
pub fn bilinear_scale(len_in: usize, len_out: usize, align_corners: bool) -> f64 {
    if align_corners {
        if len_out > 1 { (len_in - 1) as f64 / (len_out - 1) as f64 } else { 0.0 }
    } else {
        len_in as f64 / len_out as f64
    }
}

/// `(planes, h, w)` of a 4-D input, checked for `upsample_bilinear2d` to `oh × ow`.
pub fn bilinear2d_geometry(dims: &[usize], oh: usize, ow: usize) -> Result<(usize, usize, usize)> {
    let &[n, c, h, w] = dims else {
        return Err(RocmError::op(
            "upsample_bilinear2d",
            format!("needs a 4-D (n, c, h, w) input, got shape {dims:?}"),
        ));
    };
    if h == 0 || w == 0 || oh == 0 || ow == 0 {
        return Err(RocmError::op(
            "upsample_bilinear2d",
            format!("input {h}x{w} and target {oh}x{ow} must all be positive"),
        ));
    }
    for (what, v) in [("height", h.max(oh)), ("width", w.max(ow)), ("output plane", oh * ow)] {
        fits_i32("upsample_bilinear2d", what, v)?;
    }
    Ok((n * c, h, w))
}

fn dense(op: &'static str, x: &DeviceArray, l: &Layout) -> Result<(DeviceArray, usize)> {
    check_view(op, x, l)?;
    if l.is_contiguous() { Ok((x.clone(), l.start_offset())) } else { Ok((contiguous(x, l)?, 0)) }
}

/// Nearest-neighbour resize of `(n, c, l)` to `(n, c, target)`, any dtype.
pub fn upsample_nearest1d(x: &DeviceArray, layout: &Layout, target: usize) -> Result<DeviceArray> {
    let (planes, l) = nearest1d_geometry(layout.dims(), target)?;
    let d = kernel_dtype(x.dtype)?;
    let out = DeviceArray::alloc(x.device(), x.dtype, planes * target)?;
    if out.len > 0 {
        let (s, off) = dense("upsample_nearest1d", x, layout)?;
        launch(
            x.device(),
            &Kernel::new(&family::UPSAMPLE_NEAREST1D, "", d)?,
            Grid::Elements(out.len),
            &mut [
                Arg::I64(planes as i64),
                Arg::I32(l as i32),
                Arg::I32(target as i32),
                Arg::F64(nearest_scale(l, target)),
                Arg::Ptr(s.ptr_at(off)),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}

/// Nearest-neighbour resize of a contiguous `[planes, h, w]` array to `oh × ow`.
pub fn upsample_nearest2d(
    x: &DeviceArray,
    planes: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
) -> Result<DeviceArray> {
    if planes * h * w != x.len {
        return Err(RocmError::op(
            "upsample_nearest2d",
            format!("[{planes}, {h}, {w}] does not cover a {}-element array", x.len),
        ));
    }
    let out = DeviceArray::alloc(x.device(), x.dtype, planes * oh * ow)?;
    if out.len > 0 {
        let d = kernel_dtype(x.dtype)?;
        launch(
            x.device(),
            &Kernel::new(&family::UPSAMPLE_NEAREST2D, "", d)?,
            Grid::Elements(out.len),
            &mut [
                Arg::I64(planes as i64),
                Arg::I32(h as i32),
                Arg::I32(w as i32),
                Arg::I32(oh as i32),
                Arg::I32(ow as i32),
                Arg::Ptr(x.ptr_at(0)),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}

/// Bilinear resize of `(n, c, h, w)` to `(n, c, oh, ow)`, float dtypes.
pub fn upsample_bilinear2d(
    x: &DeviceArray,
    layout: &Layout,
    oh: usize,
    ow: usize,
    align_corners: bool,
) -> Result<DeviceArray> {
    let (planes, h, w) = bilinear2d_geometry(layout.dims(), oh, ow)?;
    let d = float_only("upsample_bilinear2d", x.dtype)?;
    let out = DeviceArray::alloc(x.device(), x.dtype, planes * oh * ow)?;
    if out.len > 0 {
        let (s, off) = dense("upsample_bilinear2d", x, layout)?;
        launch(
            x.device(),
            &Kernel::new(&family::UPSAMPLE_BILINEAR2D, "", d)?,
            Grid::Elements(out.len),
            &mut [
                Arg::I64(planes as i64),
                Arg::I32(h as i32),
                Arg::I32(w as i32),
                Arg::I32(oh as i32),
                Arg::I32(ow as i32),
                Arg::F64(bilinear_scale(h, oh, align_corners)),
                Arg::F64(bilinear_scale(w, ow, align_corners)),
                Arg::I32(align_corners as i32),
                Arg::Ptr(s.ptr_at(off)),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest1d_checks() {
        assert_eq!(nearest1d_geometry(&[2, 3, 5], 9).unwrap(), (6, 5));
        let e = nearest1d_geometry(&[2, 5], 9).unwrap_err().to_string();
        assert!(e.contains("3-D") && e.contains("[2, 5]"), "{e}");
        let e = nearest1d_geometry(&[2, 3, 5], 0).unwrap_err().to_string();
        assert!(e.contains("target length 0"), "{e}");
        let e = nearest1d_geometry(&[1, 1, 4], 1 << 31).unwrap_err().to_string();
        assert!(e.contains("2147483648"), "{e}");
    }

    #[test]
    fn bilinear_checks_and_scales() {
        assert_eq!(bilinear2d_geometry(&[2, 3, 4, 5], 8, 10).unwrap(), (6, 4, 5));
        let e = bilinear2d_geometry(&[3, 4, 5], 8, 10).unwrap_err().to_string();
        assert!(e.contains("4-D") && e.contains("[3, 4, 5]"), "{e}");
        let e = bilinear2d_geometry(&[1, 1, 4, 5], 0, 10).unwrap_err().to_string();
        assert!(e.contains("target 0x10"), "{e}");
        assert_eq!(bilinear_scale(4, 8, false), 0.5);
        assert_eq!(bilinear_scale(4, 7, true), 0.5);
        assert_eq!(bilinear_scale(4, 1, true), 0.0);
        assert_eq!(nearest_scale(3, 6), 0.5);
    }
}
