//! Comparisons and selection by their result (candle's `cmp` and `where_cond`): u8 masks
//! made and consumed, kernels of `pointwise.hip`, each operand read through its own candle
//! `Layout` (strides, offset, broadcast). Outputs are new contiguous arrays. (powf and elu,
//! the other kernels of that module, are unary ops: [`crate::ops::unary`].)

use crate::buffer::DeviceArray;
use crate::error::{Result, RocmError};
use crate::launch::{Arg, Grid, Kernel, launch};
use crate::ops::{check_view, kernel_dtype, strided};
use candle_core::{DType, Layout};
use kernels::family;
use kernels::ops::CmpOp;
use std::sync::Arc;

/// Checks that the views of an elementwise op all have the output's dims. `what` names
/// each operand in the error.
pub fn check_same_dims(op: &'static str, views: &[(&str, &Layout)]) -> Result<()> {
    let Some((first_name, first)) = views.first() else { return Ok(()) };
    for (name, l) in &views[1..] {
        if l.dims() != first.dims() {
            return Err(RocmError::op(
                op,
                format!(
                    "{name} has shape {:?} but {first_name} has {:?} (broadcast the views to the output shape first)",
                    l.dims(),
                    first.dims()
                ),
            ));
        }
    }
    Ok(())
}

/// `out = (lhs op rhs) as u8`; both layouts already broadcast to the output shape.
pub fn cmp(op: CmpOp, lhs: &DeviceArray, lhs_l: &Layout, rhs: &DeviceArray, rhs_l: &Layout) -> Result<DeviceArray> {
    check_view("cmp", lhs, lhs_l)?;
    check_view("cmp", rhs, rhs_l)?;
    if lhs.dtype != rhs.dtype {
        return Err(RocmError::op("cmp", format!("dtypes differ: lhs {:?}, rhs {:?}", lhs.dtype, rhs.dtype)));
    }
    check_same_dims("cmp", &[("lhs", lhs_l), ("rhs", rhs_l)])?;
    if !Arc::ptr_eq(lhs.device(), rhs.device()) {
        return Err(RocmError::op("cmp", "operands on different devices"));
    }
    let d = kernel_dtype(lhs.dtype)?;
    let n = lhs_l.shape().elem_count();
    let out = DeviceArray::alloc(lhs.device(), DType::U8, n)?;
    if n > 0 {
        launch(
            lhs.device(),
            &Kernel::new(op.family(), op.name(), d)?,
            Grid::Elements(n),
            &mut [
                Arg::I64(n as i64),
                Arg::Strided(strided(lhs_l)?),
                Arg::Strided(strided(rhs_l)?),
                Arg::Ptr(lhs.ptr_at(lhs_l.start_offset())),
                Arg::Ptr(rhs.ptr_at(rhs_l.start_offset())),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}

/// `out = mask != 0 ? on_true : on_false`, mask u8; the three layouts already broadcast to
/// the output shape.
pub fn where_cond(
    mask: &DeviceArray,
    mask_l: &Layout,
    on_true: &DeviceArray,
    true_l: &Layout,
    on_false: &DeviceArray,
    false_l: &Layout,
) -> Result<DeviceArray> {
    check_view("where_cond", mask, mask_l)?;
    check_view("where_cond", on_true, true_l)?;
    check_view("where_cond", on_false, false_l)?;
    if mask.dtype != DType::U8 {
        return Err(RocmError::op("where_cond", format!("the mask must be u8, got {:?}", mask.dtype)));
    }
    if on_true.dtype != on_false.dtype {
        return Err(RocmError::op(
            "where_cond",
            format!("on_true is {:?} but on_false is {:?}", on_true.dtype, on_false.dtype),
        ));
    }
    check_same_dims("where_cond", &[("mask", mask_l), ("on_true", true_l), ("on_false", false_l)])?;
    if !Arc::ptr_eq(mask.device(), on_true.device()) || !Arc::ptr_eq(mask.device(), on_false.device()) {
        return Err(RocmError::op("where_cond", "operands on different devices"));
    }
    let d = kernel_dtype(on_true.dtype)?;
    let n = mask_l.shape().elem_count();
    let out = DeviceArray::alloc(mask.device(), on_true.dtype, n)?;
    if n > 0 {
        launch(
            mask.device(),
            &Kernel::new(&family::WHERE, "", d)?,
            Grid::Elements(n),
            &mut [
                Arg::I64(n as i64),
                Arg::Strided(strided(mask_l)?),
                Arg::Strided(strided(true_l)?),
                Arg::Strided(strided(false_l)?),
                Arg::Ptr(mask.ptr_at(mask_l.start_offset())),
                Arg::Ptr(on_true.ptr_at(true_l.start_offset())),
                Arg::Ptr(on_false.ptr_at(false_l.start_offset())),
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
    fn mismatched_views_name_both_shapes() {
        let a = Layout::contiguous((2, 3));
        let b = Layout::contiguous((3, 2));
        let e = check_same_dims("cmp", &[("lhs", &a), ("rhs", &b)]).unwrap_err().to_string();
        assert!(e.contains("rhs has shape [3, 2]") && e.contains("lhs has [2, 3]"), "{e}");
        assert!(check_same_dims("cmp", &[("lhs", &a), ("rhs", &a.clone())]).is_ok());
        assert!(check_same_dims("cmp", &[]).is_ok());
    }

    #[test]
    fn every_cmp_op_has_an_entry_point() {
        for op in CmpOp::ALL {
            for d in kernels::DType::ALL {
                let name = format!("cmp_{}_{}", op.name(), d.suffix());
                assert!(kernels::module_of(&name).is_some(), "{name}");
            }
        }
        for d in kernels::DType::ALL {
            assert!(kernels::module_of(&format!("where_u8_{}", d.suffix())).is_some());
        }
    }
}
