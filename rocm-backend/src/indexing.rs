//! Indexing ops with candle's semantics (`index_select`, `gather`, `scatter`,
//! `scatter_add`, `index_add`), u32 or i64 indices: kernels of `indexing.hip`.
//!
//! Every operand is read through its candle `Layout`; a non-contiguous view is copied to a
//! contiguous array first. The shape rules are checked on the host by the `*_geometry`
//! functions (no device needed) with errors that name the shapes and the dimension.
//! An index equal to the index type's maximum is candle's "no index" sentinel (zero for
//! index_select/gather, skipped by scatter/index_add). Any other index out of range is an
//! error naming it, as on candle's CPU backend: the indices are read back and checked
//! before the launch (one synchronisation per op; the kernels would treat such an index as
//! the sentinel, a wrong answer without a word).

use crate::buffer::DeviceArray;
use crate::error::{Result, RocmError};
use crate::launch::{Arg, Grid, Kernel, launch};
use crate::ops::{check_view, contiguous, kernel_dtype};
use candle_core::{DType, Layout};
use kernels::{Family, family};
use std::sync::Arc;

/// The geometry of an indexing op: every tensor viewed as `[left, dim, right]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexGeometry {
    /// Product of the dims before the indexed one.
    pub left: usize,
    /// Length of the indexed dimension of the tensor read (index_select, gather) or
    /// written (scatter, index_add).
    pub dim_len: usize,
    /// Length of the indexed dimension of the indices (gather, scatter) or their count.
    pub ids_len: usize,
    /// Product of the dims after the indexed one.
    pub right: usize,
    /// Shape of the result.
    pub out_dims: Vec<usize>,
}

fn check_dim(op: &'static str, dims: &[usize], dim: usize) -> Result<()> {
    if dim >= dims.len() {
        return Err(RocmError::op(op, format!("dimension {dim} out of range for shape {dims:?}")));
    }
    Ok(())
}

fn split(dims: &[usize], dim: usize) -> (usize, usize) {
    (dims[..dim].iter().product(), dims[dim + 1..].iter().product())
}

/// Whether `a` and `b` have the same rank and agree outside `dim`.
fn same_outside(a: &[usize], b: &[usize], dim: usize) -> bool {
    a.len() == b.len() && a.iter().zip(b).enumerate().all(|(i, (x, y))| i == dim || x == y)
}

/// `index_select(src, ids, dim)`: ids 1-D; out = src with `dims[dim] = ids.len()`.
pub fn index_select_geometry(src: &[usize], ids: &[usize], dim: usize) -> Result<IndexGeometry> {
    check_dim("index_select", src, dim)?;
    let &[n] = ids else {
        return Err(RocmError::op("index_select", format!("indices must be 1-D, got shape {ids:?}")));
    };
    let (left, right) = split(src, dim);
    let mut out_dims = src.to_vec();
    out_dims[dim] = n;
    Ok(IndexGeometry { left, dim_len: src[dim], ids_len: n, right, out_dims })
}

/// `gather(src, ids, dim)`: ids of src's rank, equal to src outside `dim`; out = ids' shape.
pub fn gather_geometry(src: &[usize], ids: &[usize], dim: usize) -> Result<IndexGeometry> {
    check_dim("gather", src, dim)?;
    if !same_outside(src, ids, dim) {
        return Err(RocmError::op(
            "gather",
            format!("indices of shape {ids:?} must match the source {src:?} in every dimension but {dim}"),
        ));
    }
    let (left, right) = split(src, dim);
    Ok(IndexGeometry { left, dim_len: src[dim], ids_len: ids[dim], right, out_dims: ids.to_vec() })
}

/// `scatter(dst, ids, src, dim)` / `scatter_add`: ids and src of one shape, equal to dst
/// outside `dim`; out = dst's shape.
pub fn scatter_geometry(dst: &[usize], ids: &[usize], src: &[usize], dim: usize) -> Result<IndexGeometry> {
    check_dim("scatter", dst, dim)?;
    if ids != src {
        return Err(RocmError::op("scatter", format!("indices of shape {ids:?} and source of shape {src:?} differ")));
    }
    if !same_outside(dst, src, dim) {
        return Err(RocmError::op(
            "scatter",
            format!("source of shape {src:?} must match the destination {dst:?} in every dimension but {dim}"),
        ));
    }
    let (left, right) = split(dst, dim);
    Ok(IndexGeometry { left, dim_len: dst[dim], ids_len: src[dim], right, out_dims: dst.to_vec() })
}

/// `index_add(dst, ids, src, dim)`: ids 1-D of length `src[dim]`; src equal to dst outside
/// `dim`; out = dst's shape.
pub fn index_add_geometry(dst: &[usize], ids: &[usize], src: &[usize], dim: usize) -> Result<IndexGeometry> {
    check_dim("index_add", dst, dim)?;
    if !same_outside(dst, src, dim) {
        return Err(RocmError::op(
            "index_add",
            format!("source of shape {src:?} must match the destination {dst:?} in every dimension but {dim}"),
        ));
    }
    match ids {
        &[n] if n == src[dim] => {}
        _ => {
            return Err(RocmError::op(
                "index_add",
                format!("indices must be 1-D of length {} (source dimension {dim}), got shape {ids:?}", src[dim]),
            ));
        }
    }
    let (left, right) = split(dst, dim);
    Ok(IndexGeometry { left, dim_len: dst[dim], ids_len: src[dim], right, out_dims: dst.to_vec() })
}

/// The `{op}` part of the indexing entry points for an index dtype.
pub fn index_type_name(dtype: DType) -> Result<&'static str> {
    match dtype {
        DType::U32 => Ok("u32"),
        DType::I64 => Ok("i64"),
        other => Err(RocmError::op("indexing", format!("indices must be u32 or i64, got {other:?}"))),
    }
}

/// `x` read through `l` as a contiguous array: (array, element offset of the view).
fn dense(op: &'static str, x: &DeviceArray, l: &Layout) -> Result<(DeviceArray, usize)> {
    check_view(op, x, l)?;
    if l.is_contiguous() { Ok((x.clone(), l.start_offset())) } else { Ok((contiguous(x, l)?, 0)) }
}

/// The `count` indices of `ids` from element `off` are each in `0..dim_len` or the "no
/// index" sentinel (the type's maximum); else an error naming the first that is not.
fn check_ids(op: &'static str, ids: &DeviceArray, off: usize, count: usize, dim_len: usize) -> Result<()> {
    let first_bad = match ids.dtype {
        DType::U32 => ids.to_vec::<u32>()?[off..off + count]
            .iter()
            .enumerate()
            .find(|&(_, &v)| v != u32::MAX && v as usize >= dim_len)
            .map(|(i, &v)| (i, v as i64)),
        DType::I64 => ids.to_vec::<i64>()?[off..off + count]
            .iter()
            .enumerate()
            .find(|&(_, &v)| v != i64::MAX && !(0..dim_len as i64).contains(&v))
            .map(|(i, &v)| (i, v)),
        other => return Err(RocmError::op(op, format!("indices must be u32 or i64, got {other:?}"))),
    };
    match first_bad {
        None => Ok(()),
        Some((i, v)) => Err(RocmError::op(
            op,
            format!("index {v} (element {i} of the indices) is out of range for a dimension of length {dim_len}"),
        )),
    }
}

fn same_device(op: &'static str, a: &DeviceArray, b: &DeviceArray) -> Result<()> {
    if !Arc::ptr_eq(a.device(), b.device()) {
        return Err(RocmError::op(op, "operands on different devices"));
    }
    Ok(())
}

/// `out[l, i, r] = src[l, ids[i], r]`. Returns the result and its shape.
pub fn index_select(
    src: &DeviceArray,
    src_l: &Layout,
    ids: &DeviceArray,
    ids_l: &Layout,
    dim: usize,
) -> Result<(DeviceArray, Vec<usize>)> {
    let g = index_select_geometry(src_l.dims(), ids_l.dims(), dim)?;
    gather_like("index_select", &family::INDEX_SELECT, src, src_l, ids, ids_l, &g)
}

/// `out[l, i, r] = src[l, ids[l, i, r], r]`. Returns the result and its shape.
pub fn gather(
    src: &DeviceArray,
    src_l: &Layout,
    ids: &DeviceArray,
    ids_l: &Layout,
    dim: usize,
) -> Result<(DeviceArray, Vec<usize>)> {
    let g = gather_geometry(src_l.dims(), ids_l.dims(), dim)?;
    gather_like("gather", &family::GATHER, src, src_l, ids, ids_l, &g)
}

fn gather_like(
    op: &'static str,
    family: &'static Family,
    src: &DeviceArray,
    src_l: &Layout,
    ids: &DeviceArray,
    ids_l: &Layout,
    g: &IndexGeometry,
) -> Result<(DeviceArray, Vec<usize>)> {
    same_device(op, src, ids)?;
    let idx = index_type_name(ids.dtype)?;
    let d = kernel_dtype(src.dtype)?;
    let n = g.left * g.ids_len * g.right;
    let out = DeviceArray::alloc(src.device(), src.dtype, n)?;
    if n > 0 {
        let (s, s_off) = dense(op, src, src_l)?;
        let (i, i_off) = dense(op, ids, ids_l)?;
        check_ids(op, &i, i_off, ids_l.shape().elem_count(), g.dim_len)?;
        let (a, b) = if op == "index_select" { (g.right, g.ids_len) } else { (g.ids_len, g.right) };
        launch(
            src.device(),
            &Kernel::new(family, idx, d)?,
            Grid::Elements(n),
            &mut [
                Arg::I64(g.left as i64),
                Arg::I64(g.dim_len as i64),
                Arg::I64(a as i64),
                Arg::I64(b as i64),
                Arg::Ptr(i.ptr_at(i_off)),
                Arg::Ptr(s.ptr_at(s_off)),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok((out, g.out_dims.clone()))
}

/// How [`scatter`] combines a source value with the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterMode {
    /// `dst = src` (candle's `scatter`; the last of duplicate indices wins).
    Set,
    /// `dst += src` (candle's `scatter_add`).
    Add,
}

/// A copy of `dst` with `dst[l, ids[l, i, r], r] = (or +=) src[l, i, r]`.
#[allow(clippy::too_many_arguments)]
pub fn scatter(
    dst: &DeviceArray,
    dst_l: &Layout,
    ids: &DeviceArray,
    ids_l: &Layout,
    src: &DeviceArray,
    src_l: &Layout,
    dim: usize,
    mode: ScatterMode,
) -> Result<DeviceArray> {
    let g = scatter_geometry(dst_l.dims(), ids_l.dims(), src_l.dims(), dim)?;
    let (name, family) = match mode {
        ScatterMode::Set => ("scatter_set", &family::SCATTER_SET),
        ScatterMode::Add => ("scatter_add", &family::SCATTER_ADD),
    };
    update(name, family, dst, dst_l, ids, ids_l, src, src_l, &g)
}

/// A copy of `dst` with `dst[l, ids[i], r] += src[l, i, r]`.
pub fn index_add(
    dst: &DeviceArray,
    dst_l: &Layout,
    ids: &DeviceArray,
    ids_l: &Layout,
    src: &DeviceArray,
    src_l: &Layout,
    dim: usize,
) -> Result<DeviceArray> {
    let g = index_add_geometry(dst_l.dims(), ids_l.dims(), src_l.dims(), dim)?;
    update("index_add", &family::INDEX_ADD, dst, dst_l, ids, ids_l, src, src_l, &g)
}

#[allow(clippy::too_many_arguments)]
fn update(
    op: &'static str,
    family: &'static Family,
    dst: &DeviceArray,
    dst_l: &Layout,
    ids: &DeviceArray,
    ids_l: &Layout,
    src: &DeviceArray,
    src_l: &Layout,
    g: &IndexGeometry,
) -> Result<DeviceArray> {
    same_device(op, dst, ids)?;
    same_device(op, dst, src)?;
    if dst.dtype != src.dtype {
        return Err(RocmError::op(op, format!("destination is {:?} but source is {:?}", dst.dtype, src.dtype)));
    }
    let idx = index_type_name(ids.dtype)?;
    let d = kernel_dtype(dst.dtype)?;
    check_view(op, dst, dst_l)?;
    // The result starts as a contiguous copy of dst and is updated in place.
    let out = contiguous(dst, dst_l)?;
    let columns = g.left * g.right;
    if columns > 0 && g.ids_len > 0 {
        let (s, s_off) = dense(op, src, src_l)?;
        let (i, i_off) = dense(op, ids, ids_l)?;
        check_ids(op, &i, i_off, ids_l.shape().elem_count(), g.dim_len)?;
        launch(
            dst.device(),
            &Kernel::new(family, idx, d)?,
            Grid::Elements(columns),
            &mut [
                Arg::I64(g.left as i64),
                Arg::I64(g.dim_len as i64),
                Arg::I64(g.ids_len as i64),
                Arg::I64(g.right as i64),
                Arg::Ptr(i.ptr_at(i_off)),
                Arg::Ptr(s.ptr_at(s_off)),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg<T: std::fmt::Debug>(r: Result<T>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn index_select_shapes() {
        let g = index_select_geometry(&[4, 5, 6], &[3], 1).unwrap();
        assert_eq!(g, IndexGeometry { left: 4, dim_len: 5, ids_len: 3, right: 6, out_dims: vec![4, 3, 6] });
        let g = index_select_geometry(&[7], &[0], 0).unwrap();
        assert_eq!((g.left, g.right, g.out_dims), (1, 1, vec![0]));
        let e = msg(index_select_geometry(&[4, 5], &[2, 2], 0));
        assert!(e.contains("1-D") && e.contains("[2, 2]"), "{e}");
        let e = msg(index_select_geometry(&[4, 5], &[2], 2));
        assert!(e.contains("dimension 2") && e.contains("[4, 5]"), "{e}");
    }

    #[test]
    fn gather_shapes() {
        let g = gather_geometry(&[2, 5, 3], &[2, 7, 3], 1).unwrap();
        assert_eq!((g.left, g.dim_len, g.ids_len, g.right), (2, 5, 7, 3));
        assert_eq!(g.out_dims, vec![2, 7, 3]);
        let e = msg(gather_geometry(&[2, 5, 3], &[2, 7, 4], 1));
        assert!(e.contains("[2, 7, 4]") && e.contains("[2, 5, 3]") && e.contains("but 1"), "{e}");
        let e = msg(gather_geometry(&[2, 5], &[2, 5, 1], 0));
        assert!(e.contains("[2, 5, 1]"), "{e}");
    }

    #[test]
    fn scatter_shapes() {
        let g = scatter_geometry(&[3, 8], &[3, 2], &[3, 2], 1).unwrap();
        assert_eq!((g.left, g.dim_len, g.ids_len, g.right, g.out_dims), (3, 8, 2, 1, vec![3, 8]));
        let e = msg(scatter_geometry(&[3, 8], &[3, 2], &[3, 3], 1));
        assert!(e.contains("[3, 2]") && e.contains("[3, 3]"), "{e}");
        let e = msg(scatter_geometry(&[3, 8], &[4, 2], &[4, 2], 1));
        assert!(e.contains("[4, 2]") && e.contains("[3, 8]"), "{e}");
        let e = msg(scatter_geometry(&[3, 8], &[3, 2], &[3, 2], 5));
        assert!(e.contains("dimension 5"), "{e}");
    }

    #[test]
    fn index_add_shapes() {
        let g = index_add_geometry(&[6, 4], &[3], &[3, 4], 0).unwrap();
        assert_eq!((g.left, g.dim_len, g.ids_len, g.right, g.out_dims), (1, 6, 3, 4, vec![6, 4]));
        let e = msg(index_add_geometry(&[6, 4], &[2], &[3, 4], 0));
        assert!(e.contains("length 3") && e.contains("[2]"), "{e}");
        let e = msg(index_add_geometry(&[6, 4], &[3], &[3, 5], 0));
        assert!(e.contains("[3, 5]") && e.contains("[6, 4]"), "{e}");
    }

    #[test]
    fn index_dtypes() {
        assert_eq!(index_type_name(DType::U32).unwrap(), "u32");
        assert_eq!(index_type_name(DType::I64).unwrap(), "i64");
        let e = msg(index_type_name(DType::F32));
        assert!(e.contains("u32 or i64") && e.contains("F32"), "{e}");
        for fam in ["index_select", "gather", "scatter_set", "scatter_add", "index_add"] {
            for idx in kernels::INDEX_TYPES {
                for d in kernels::DType::ALL {
                    let name = format!("{fam}_{idx}_{}", d.suffix());
                    assert!(kernels::module_of(&name).is_some(), "{name}");
                }
            }
        }
    }
}
