//! Elementwise, reduction and copy operations on device arrays, and the helpers every op
//! module shares (dtype mapping, view checks): each op is one or two kernel launches on the
//! device's stream, with the input read through its candle `Layout` (strides, offset).
//! Outputs are new contiguous arrays. The ops are named by [`kernels::ops`], the vocabulary
//! the CPU path shares.

use crate::buffer::DeviceArray;
use crate::device::RocmDevice;
use crate::error::{Result, RocmError};
use crate::launch::{Arg, BLOCK, Grid, Kernel, launch};
use candle_core::{DType, Layout};
use kernels::StridedLayout;
use kernels::family;
use kernels::ops::{BinaryOp, PadMode, PoolOp, ReduceOp, UnaryOp};
use std::sync::Arc;

/// The kernels' dtype for a candle dtype.
pub fn kernel_dtype(dtype: DType) -> Result<kernels::DType> {
    Ok(match dtype {
        DType::F32 => kernels::DType::F32,
        DType::F16 => kernels::DType::F16,
        DType::BF16 => kernels::DType::BF16,
        DType::F64 => kernels::DType::F64,
        DType::U8 => kernels::DType::U8,
        DType::U32 => kernels::DType::U32,
        DType::I64 => kernels::DType::I64,
        other => return Err(RocmError::op("kernel", format!("dtype {other:?} is not supported on ROCm"))),
    })
}

pub(crate) fn float_only(op: &'static str, dtype: DType) -> Result<kernels::DType> {
    let d = kernel_dtype(dtype)?;
    if !kernels::DType::FLOAT.contains(&d) {
        return Err(RocmError::op(op, format!("needs a float dtype, got {dtype:?}")));
    }
    Ok(d)
}

/// The view `layout` describes with its mergeable dimensions merged (for the elementwise
/// kernels, whose index arithmetic is their cost on views).
pub fn coalesced(layout: &Layout) -> Result<StridedLayout> {
    let [v] = StridedLayout::coalesced(layout.dims(), [layout.stride()])
        .map_err(|e| RocmError::op("layout", format!("{:?}: {e}", layout.dims())))?;
    Ok(v)
}

/// Two views over the same dims (a binary op's operands), merged together.
pub fn coalesced2(a: &Layout, b: &Layout) -> Result<[StridedLayout; 2]> {
    StridedLayout::coalesced(a.dims(), [a.stride(), b.stride()])
        .map_err(|e| RocmError::op("layout", format!("{:?}: {e}", a.dims())))
}

/// The view `layout` describes, as the kernels take it.
pub fn strided(layout: &Layout) -> Result<StridedLayout> {
    StridedLayout::new(layout.dims(), layout.stride())
        .map_err(|e| RocmError::op("layout", format!("{:?}: {e}", layout.dims())))
}

pub(crate) fn check_view(op: &'static str, x: &DeviceArray, layout: &Layout) -> Result<()> {
    let dims = layout.dims();
    let last = dims.iter().zip(layout.stride()).map(|(&d, &s)| if d == 0 { 0 } else { (d - 1) * s }).sum::<usize>()
        + layout.start_offset();
    if layout.shape().elem_count() > 0 && last >= x.len {
        return Err(RocmError::op(op, format!("layout {:?} reads element {last} of a {}-element array", dims, x.len)));
    }
    Ok(())
}

fn device(x: &DeviceArray) -> &Arc<RocmDevice> {
    x.device()
}

/// `out = op(x)` (`param`: leaky_relu's slope, powf's exponent, elu's alpha; ignored by the
/// other ops).
pub fn unary(op: UnaryOp, x: &DeviceArray, layout: &Layout, param: f64) -> Result<DeviceArray> {
    check_view(op.name(), x, layout)?;
    let d = float_only(op.name(), x.dtype)?;
    let vector_path = match op {
        UnaryOp::Powf | UnaryOp::Elu => {
            if !param.is_finite() {
                return Err(RocmError::op(op.name(), format!("the parameter must be finite, got {param}")));
            }
            // Kernels of pointwise.hip: one element per thread, no 16-byte vector path.
            false
        }
        _ => true,
    };
    let n = layout.shape().elem_count();
    let out = DeviceArray::alloc(device(x), x.dtype, n)?;
    if n > 0 {
        let grid = if vector_path {
            Grid::Vectors { elements: n, widest_bytes: x.dtype.size_in_bytes() }
        } else {
            Grid::Elements(n)
        };
        launch(
            device(x),
            &Kernel::new(op.family(), op.name(), d)?,
            grid,
            &mut [
                Arg::I64(n as i64),
                Arg::Strided(coalesced(layout)?),
                Arg::Ptr(x.ptr_at(layout.start_offset())),
                Arg::Ptr(out.ptr_at(0)),
                Arg::F64(param),
            ],
        )?;
    }
    Ok(out)
}

/// `out = x · mul + add`.
pub fn affine(x: &DeviceArray, layout: &Layout, mul: f64, add: f64) -> Result<DeviceArray> {
    check_view("affine", x, layout)?;
    let d = float_only("affine", x.dtype)?;
    let n = layout.shape().elem_count();
    let out = DeviceArray::alloc(device(x), x.dtype, n)?;
    if n > 0 {
        launch(
            device(x),
            &Kernel::new(&family::AFFINE, "", d)?,
            Grid::Vectors { elements: n, widest_bytes: x.dtype.size_in_bytes() },
            &mut [
                Arg::I64(n as i64),
                Arg::Strided(coalesced(layout)?),
                Arg::Ptr(x.ptr_at(layout.start_offset())),
                Arg::Ptr(out.ptr_at(0)),
                Arg::F64(mul),
                Arg::F64(add),
            ],
        )?;
    }
    Ok(out)
}

/// `out = lhs op rhs`; both layouts already broadcast to the output shape (stride 0 on
/// broadcast dimensions).
pub fn binary(
    op: BinaryOp,
    lhs: &DeviceArray,
    lhs_l: &Layout,
    rhs: &DeviceArray,
    rhs_l: &Layout,
) -> Result<DeviceArray> {
    let out = DeviceArray::alloc(device(lhs), lhs.dtype, lhs_l.shape().elem_count())?;
    binary_into(op, lhs, lhs_l, rhs, rhs_l, &out)?;
    Ok(out)
}

/// [`binary`] into an existing contiguous array of the output's size (which may be
/// `lhs` itself when `lhs_l` is contiguous from offset 0: elementwise ops read each
/// element before writing it).
pub fn binary_into(
    op: BinaryOp,
    lhs: &DeviceArray,
    lhs_l: &Layout,
    rhs: &DeviceArray,
    rhs_l: &Layout,
    out: &DeviceArray,
) -> Result<()> {
    check_view("binary", lhs, lhs_l)?;
    check_view("binary", rhs, rhs_l)?;
    if lhs.dtype != rhs.dtype {
        return Err(RocmError::op("binary", format!("dtypes differ: {:?} and {:?}", lhs.dtype, rhs.dtype)));
    }
    if lhs_l.dims() != rhs_l.dims() {
        return Err(RocmError::op(
            "binary",
            format!("shapes differ after broadcasting: {:?} and {:?}", lhs_l.dims(), rhs_l.dims()),
        ));
    }
    if !Arc::ptr_eq(device(lhs), device(rhs)) {
        return Err(RocmError::op("binary", "operands on different devices"));
    }
    let d = kernel_dtype(lhs.dtype)?;
    let n = lhs_l.shape().elem_count();
    if out.len < n || out.dtype != lhs.dtype {
        return Err(RocmError::op(
            "binary",
            format!("output holds {} {:?} elements, {n} {:?} needed", out.len, out.dtype, lhs.dtype),
        ));
    }
    if n > 0 {
        let views = coalesced2(lhs_l, rhs_l)?;
        launch(
            device(lhs),
            &Kernel::new(op.family(), op.name(), d)?,
            Grid::Vectors { elements: n, widest_bytes: lhs.dtype.size_in_bytes() },
            &mut [
                Arg::I64(n as i64),
                Arg::Strided(views[0]),
                Arg::Strided(views[1]),
                Arg::Ptr(lhs.ptr_at(lhs_l.start_offset())),
                Arg::Ptr(rhs.ptr_at(rhs_l.start_offset())),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(())
}

/// Converts to `dtype` (contiguous output).
pub fn cast(x: &DeviceArray, layout: &Layout, dtype: DType) -> Result<DeviceArray> {
    if dtype == x.dtype {
        return contiguous(x, layout);
    }
    check_view("cast", x, layout)?;
    let (s, d) = (kernel_dtype(x.dtype)?, kernel_dtype(dtype)?);
    let n = layout.shape().elem_count();
    let out = DeviceArray::alloc(device(x), dtype, n)?;
    if n > 0 {
        launch(
            device(x),
            &Kernel::pair(&family::CAST, s, d)?,
            Grid::Vectors { elements: n, widest_bytes: x.dtype.size_in_bytes().max(dtype.size_in_bytes()) },
            &mut [
                Arg::I64(n as i64),
                Arg::Strided(coalesced(layout)?),
                Arg::Ptr(x.ptr_at(layout.start_offset())),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}

/// The view made contiguous (a device copy; a plain memcpy when it already is).
pub fn contiguous(x: &DeviceArray, layout: &Layout) -> Result<DeviceArray> {
    check_view("contiguous", x, layout)?;
    let n = layout.shape().elem_count();
    let out = DeviceArray::alloc(device(x), x.dtype, n)?;
    if n == 0 {
        return Ok(out);
    }
    if layout.is_contiguous() {
        let es = x.dtype.size_in_bytes();
        out.buffer.copy_from(0, &x.buffer, layout.start_offset() * es, n * es)?;
        return Ok(out);
    }
    let d = kernel_dtype(x.dtype)?;
    launch(
        device(x),
        &Kernel::new(&family::COPY_STRIDED, "", d)?,
        Grid::Elements(n),
        &mut [
            Arg::I64(n as i64),
            Arg::Strided(coalesced(layout)?),
            Arg::Ptr(x.ptr_at(layout.start_offset())),
            Arg::Ptr(out.ptr_at(0)),
        ],
    )?;
    Ok(out)
}

/// An array of `len` elements all equal to `value`.
pub fn full(dev: &Arc<RocmDevice>, dtype: DType, len: usize, value: f64) -> Result<DeviceArray> {
    let out = DeviceArray::alloc(dev, dtype, len)?;
    if len == 0 {
        return Ok(out);
    }
    let d = kernel_dtype(dtype)?;
    let v = match dtype {
        DType::F32 => Arg::B32((value as f32).to_bits()),
        DType::F16 => Arg::B16(half::f16::from_f64(value).to_bits()),
        DType::BF16 => Arg::B16(half::bf16::from_f64(value).to_bits()),
        DType::F64 => Arg::B64(value.to_bits()),
        DType::U8 => Arg::B8(value as u8),
        DType::U32 => Arg::B32(value as u32),
        DType::I64 => Arg::B64((value as i64) as u64),
        other => return Err(RocmError::op("full", format!("dtype {other:?} is not supported on ROCm"))),
    };
    launch(
        dev,
        &Kernel::new(&family::FILL, "", d)?,
        Grid::Vectors { elements: len, widest_bytes: dtype.size_in_bytes() },
        &mut [Arg::I64(len as i64), Arg::Ptr(out.ptr_at(0)), v],
    )?;
    Ok(out)
}

/// `[batch, rows, cols]` → `[batch, cols, rows]` through shared-memory tiles.
pub fn transpose2d(x: &DeviceArray, batch: usize, rows: usize, cols: usize) -> Result<DeviceArray> {
    if batch * rows * cols > x.len {
        return Err(RocmError::op(
            "transpose2d",
            format!("[{batch}, {rows}, {cols}] exceeds a {}-element array", x.len),
        ));
    }
    let out = DeviceArray::alloc(device(x), x.dtype, batch * rows * cols)?;
    if out.len == 0 {
        return Ok(out);
    }
    let d = kernel_dtype(x.dtype)?;
    launch(
        device(x),
        &Kernel::new(&family::TRANSPOSE2D, "", d)?,
        Grid::Explicit {
            grid: (cols.div_ceil(32) as u32, rows.div_ceil(32) as u32, batch.min(65535) as u32),
            block: (32, 8, 1),
        },
        &mut [
            Arg::I64(batch as i64),
            Arg::I32(rows as i32),
            Arg::I32(cols as i32),
            Arg::Ptr(x.ptr_at(0)),
            Arg::Ptr(out.ptr_at(0)),
        ],
    )?;
    Ok(out)
}

/// `dst[r·dst_stride + c] = src[r·src_stride + c]` for `rows × cols` elements, at
/// element offsets `src_off` / `dst_off` (concatenation and slicing).
#[allow(clippy::too_many_arguments)]
pub fn copy2d(
    src: &DeviceArray,
    src_off: usize,
    src_stride: usize,
    dst: &DeviceArray,
    dst_off: usize,
    dst_stride: usize,
    rows: usize,
    cols: usize,
) -> Result<()> {
    if src.dtype != dst.dtype {
        return Err(RocmError::op("copy2d", format!("dtypes differ: {:?} and {:?}", src.dtype, dst.dtype)));
    }
    if rows == 0 || cols == 0 {
        return Ok(());
    }
    let last_src = src_off + (rows - 1) * src_stride + cols;
    let last_dst = dst_off + (rows - 1) * dst_stride + cols;
    if last_src > src.len || last_dst > dst.len {
        return Err(RocmError::op("copy2d", "copy reaches past the end of an array"));
    }
    let d = kernel_dtype(src.dtype)?;
    launch(
        device(src),
        &Kernel::new(&family::COPY2D, "", d)?,
        Grid::Elements(rows * cols),
        &mut [
            Arg::I64(rows as i64),
            Arg::I64(cols as i64),
            Arg::I64(src_stride as i64),
            Arg::I64(dst_stride as i64),
            Arg::Ptr(src.ptr_at(src_off)),
            Arg::Ptr(dst.ptr_at(dst_off)),
        ],
    )
}

/// Reduces the middle dimension of a contiguous `[outer, len, inner]` array. Arg
/// reductions return u32 indices.
pub fn reduce(op: ReduceOp, x: &DeviceArray, outer: usize, len: usize, inner: usize) -> Result<DeviceArray> {
    let d = float_only("reduce", x.dtype)?;
    if outer * len * inner != x.len {
        return Err(RocmError::op(
            "reduce",
            format!("[{outer}, {len}, {inner}] does not cover a {}-element array", x.len),
        ));
    }
    if len == 0 {
        return Err(RocmError::op("reduce", "cannot reduce an empty dimension"));
    }
    let out_dtype = if op.is_arg() { DType::U32 } else { x.dtype };
    let out = DeviceArray::alloc(device(x), out_dtype, outer * inner)?;
    if out.len == 0 {
        return Ok(out);
    }
    if inner == 1 {
        launch(
            device(x),
            &Kernel::new(op.lastdim_family(), op.name(), d)?,
            Grid::Rows(outer),
            &mut [Arg::I64(outer as i64), Arg::I64(len as i64), Arg::Ptr(x.ptr_at(0)), Arg::Ptr(out.ptr_at(0))],
        )?;
    } else {
        launch(
            device(x),
            &Kernel::new(op.strided_family(), op.name(), d)?,
            Grid::Elements(outer * inner),
            &mut [
                Arg::I64(outer as i64),
                Arg::I64(len as i64),
                Arg::I64(inner as i64),
                Arg::Ptr(x.ptr_at(0)),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}

/// Adds the per-channel exact sums of a `[C, rows, cols]` view of `x` (f32/f16/bf16) into
/// `buckets` (`C x 256` i64: for each channel and each biased f32 exponent, the sum of the
/// signed 24-bit significands of the elements with that exponent; the root crate's
/// `ExactSum` reads this layout) and sets `flags[c]` (u32) where an inf
/// or NaN was seen. Order-independent, so tiles and whole maps agree bit for bit. Nothing
/// is read back: the sums of several maps (a pass's tiles) accumulate on the device, and
/// the caller reads 2 KiB per channel once.
pub fn exact_channel_sums_into(
    x: &DeviceArray,
    view: &Layout,
    buckets: &DeviceArray,
    flags: &DeviceArray,
) -> Result<()> {
    check_view("exact_channel_sums", x, view)?;
    let d = kernel_dtype(x.dtype)?;
    let &[c, rows, cols] = view.dims() else {
        return Err(RocmError::op(
            "exact_channel_sums",
            format!("needs a [C, rows, cols] view, got {:?}", view.dims()),
        ));
    };
    if !kernels::DType::GEMM.contains(&d) || rows * cols >= 1 << 31 || c > 65535 {
        return Err(RocmError::op(
            "exact_channel_sums",
            format!(
                "{c} channels of {rows}x{cols} {:?}: needs f32/f16/bf16, under 2^31 values per channel, at most 65535 channels",
                x.dtype
            ),
        ));
    }
    if buckets.dtype != DType::I64 || buckets.len != c * 256 || flags.dtype != DType::U32 || flags.len != c {
        return Err(RocmError::op(
            "exact_channel_sums",
            format!(
                "{c} channels need {} i64 buckets and {c} u32 flags, got {} {:?} and {} {:?}",
                c * 256,
                buckets.len,
                buckets.dtype,
                flags.len,
                flags.dtype
            ),
        ));
    }
    // 64 values per thread: the block's bucket clearing and flush are paid per block.
    let per_block = 64 * BLOCK as usize;
    if c > 0 && rows * cols > 0 {
        launch(
            device(x),
            &Kernel::new(&family::EXACT_SUMS, "", d)?,
            Grid::Explicit { grid: ((rows * cols).div_ceil(per_block) as u32, c as u32, 1), block: (BLOCK, 1, 1) },
            &mut [
                Arg::Strided(strided(view)?),
                Arg::Ptr(x.ptr_at(view.start_offset())),
                Arg::I64(per_block as i64),
                Arg::Ptr(buckets.ptr_at(0)),
                Arg::Ptr(flags.ptr_at(0)),
            ],
        )?;
    }
    Ok(())
}

/// Softmax over the last dimension of a contiguous `[rows, cols]` array.
pub fn softmax_last_dim(x: &DeviceArray, rows: usize, cols: usize) -> Result<DeviceArray> {
    let d = float_only("softmax", x.dtype)?;
    if rows * cols != x.len {
        return Err(RocmError::op("softmax", format!("[{rows}, {cols}] does not cover a {}-element array", x.len)));
    }
    let out = DeviceArray::alloc(device(x), x.dtype, x.len)?;
    if x.len > 0 {
        launch(
            device(x),
            &Kernel::new(&family::SOFTMAX, "softmax", d)?,
            Grid::Rows(rows),
            &mut [Arg::I64(rows as i64), Arg::I64(cols as i64), Arg::Ptr(x.ptr_at(0)), Arg::Ptr(out.ptr_at(0))],
        )?;
    }
    Ok(out)
}

/// Pads the last two dimensions of a contiguous `[planes, h, w]` array.
#[allow(clippy::too_many_arguments)]
pub fn pad2d(
    x: &DeviceArray,
    planes: usize,
    h: usize,
    w: usize,
    top: usize,
    bottom: usize,
    left: usize,
    right: usize,
    mode: PadMode,
) -> Result<DeviceArray> {
    if planes * h * w != x.len {
        return Err(RocmError::op("pad2d", format!("[{planes}, {h}, {w}] does not cover a {}-element array", x.len)));
    }
    if mode == PadMode::Reflect && (top >= h || bottom >= h || left >= w || right >= w) {
        return Err(RocmError::op(
            "pad2d",
            format!(
                "reflect padding ({top}, {bottom}, {left}, {right}) must be smaller than the padded dimensions ({h}, {w})"
            ),
        ));
    }
    let (oh, ow) = (h + top + bottom, w + left + right);
    let out = DeviceArray::alloc(device(x), x.dtype, planes * oh * ow)?;
    if out.len > 0 {
        let d = kernel_dtype(x.dtype)?;
        launch(
            device(x),
            &Kernel::new(mode.family(), mode.name(), d)?,
            Grid::Elements(out.len),
            &mut [
                Arg::I64(planes as i64),
                Arg::I32(h as i32),
                Arg::I32(w as i32),
                Arg::I32(top as i32),
                Arg::I32(left as i32),
                Arg::I32(oh as i32),
                Arg::I32(ow as i32),
                Arg::Ptr(x.ptr_at(0)),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}

/// Max or average pooling of a contiguous `[planes, h, w]` array, square window, no
/// padding.
#[allow(clippy::too_many_arguments)]
pub fn pool2d(
    x: &DeviceArray,
    op: PoolOp,
    planes: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    kernel: usize,
    stride: usize,
) -> Result<DeviceArray> {
    let d = float_only("pool2d", x.dtype)?;
    if planes * h * w != x.len {
        return Err(RocmError::op("pool2d", format!("[{planes}, {h}, {w}] does not cover a {}-element array", x.len)));
    }
    let out = DeviceArray::alloc(device(x), x.dtype, planes * oh * ow)?;
    if out.len > 0 {
        launch(
            device(x),
            &Kernel::new(op.family(), op.name(), d)?,
            Grid::Elements(out.len),
            &mut [
                Arg::I64(planes as i64),
                Arg::I32(h as i32),
                Arg::I32(w as i32),
                Arg::I32(oh as i32),
                Arg::I32(ow as i32),
                Arg::I32(kernel as i32),
                Arg::I32(kernel as i32),
                Arg::I32(stride as i32),
                Arg::I32(stride as i32),
                Arg::Ptr(x.ptr_at(0)),
                Arg::Ptr(out.ptr_at(0)),
            ],
        )?;
    }
    Ok(out)
}
