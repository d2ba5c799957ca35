//! Tensor ops on ROCm: a device array plus a candle `Layout` (shape, strides, offset),
//! so that views (transpose, narrow, broadcast) cost nothing until a kernel reads them.

use crate::error::{Error, Result};
use candle_core::{DType, Layout, Shape};
use kernels::ops::{BinaryOp, CmpOp, PadMode, PoolOp, ReduceOp, UnaryOp};
use rocm_backend::ops;
use rocm_backend::{DeviceArray, RocmDevice};
use std::sync::Arc;

#[derive(Clone, Debug)]
pub(crate) struct RocmTensor {
    pub array: DeviceArray,
    pub layout: Layout,
}

/// The backend's error as it is (each names its call or op already); `_op` says which
/// tensor op it came from at the call site.
fn op_err(_op: &'static str, e: rocm_backend::RocmError) -> Error {
    Error::from(e)
}

impl RocmTensor {
    pub fn contiguous_new(array: DeviceArray, shape: &[usize]) -> RocmTensor {
        RocmTensor { array, layout: Layout::contiguous(shape) }
    }

    pub fn device(&self) -> &Arc<RocmDevice> {
        self.array.device()
    }

    pub fn dims(&self) -> &[usize] {
        self.layout.dims()
    }

    pub fn dtype(&self) -> DType {
        self.array.dtype
    }

    pub fn elem_count(&self) -> usize {
        self.layout.shape().elem_count()
    }

    /// Upload a contiguous host slice.
    pub fn from_slice<T: candle_core::WithDType>(
        dev: &Arc<RocmDevice>,
        data: &[T],
        shape: &[usize],
    ) -> Result<RocmTensor> {
        let a = DeviceArray::from_slice(dev, data).map_err(|e| op_err("to_device", e))?;
        Ok(RocmTensor::contiguous_new(a, shape))
    }

    /// Upload a CPU candle tensor.
    pub fn from_candle(dev: &Arc<RocmDevice>, t: &candle_core::Tensor) -> Result<RocmTensor> {
        let t = t.contiguous()?;
        let shape = t.dims().to_vec();
        let flat = t.flatten_all()?;
        macro_rules! up {
            ($ty:ty) => {
                RocmTensor::from_slice(dev, &flat.to_vec1::<$ty>()?, &shape)
            };
        }
        match t.dtype() {
            DType::F32 => up!(f32),
            DType::F16 => up!(half::f16),
            DType::BF16 => up!(half::bf16),
            DType::F64 => up!(f64),
            DType::U8 => up!(u8),
            DType::U32 => up!(u32),
            DType::I64 => up!(i64),
            other => Err(Error::op("to_device", format!("dtype {other:?} is not supported on ROCm"))),
        }
    }

    /// Download to a CPU candle tensor.
    pub fn to_candle(&self) -> Result<candle_core::Tensor> {
        let c = self.contiguous()?;
        let shape = self.dims().to_vec();
        let dev = candle_core::Device::Cpu;
        macro_rules! down {
            ($ty:ty) => {
                candle_core::Tensor::from_vec(c.array.to_vec::<$ty>().map_err(|e| op_err("to_cpu", e))?, shape, &dev)?
            };
        }
        Ok(match self.dtype() {
            DType::F32 => down!(f32),
            DType::F16 => down!(half::f16),
            DType::BF16 => down!(half::bf16),
            DType::F64 => down!(f64),
            DType::U8 => down!(u8),
            DType::U32 => down!(u32),
            DType::I64 => down!(i64),
            other => return Err(Error::op("to_cpu", format!("dtype {other:?} is not supported on ROCm"))),
        })
    }

    pub fn contiguous(&self) -> Result<RocmTensor> {
        if self.layout.is_contiguous() && self.layout.start_offset() == 0 && self.array.len == self.elem_count() {
            return Ok(self.clone());
        }
        let a = ops::contiguous(&self.array, &self.layout).map_err(|e| op_err("contiguous", e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    fn with_layout(&self, layout: Layout) -> RocmTensor {
        RocmTensor { array: self.array.clone(), layout }
    }

    pub fn unary(&self, op: UnaryOp, param: f64) -> Result<RocmTensor> {
        let a = ops::unary(op, &self.array, &self.layout, param).map_err(|e| op_err(op.name(), e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    pub fn affine(&self, mul: f64, add: f64) -> Result<RocmTensor> {
        let a = ops::affine(&self.array, &self.layout, mul, add).map_err(|e| op_err("affine", e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    pub fn binary(&self, op: BinaryOp, rhs: &RocmTensor) -> Result<RocmTensor> {
        let shape = self.layout.shape().broadcast_shape_binary_op(rhs.layout.shape(), op.name())?;
        let l = self.layout.broadcast_as(shape.clone())?;
        let r = rhs.layout.broadcast_as(shape.clone())?;
        let a = ops::binary(op, &self.array, &l, &rhs.array, &r).map_err(|e| op_err(op.name(), e))?;
        Ok(RocmTensor::contiguous_new(a, shape.dims()))
    }

    /// `pixel_shuffle(self, r) + residual` (see `Tensor::pixel_shuffle_add`, which checks
    /// the shapes): both read as `[N, C, H, r, W, r]` views, so one binary pass writes the
    /// contiguous sum.
    pub fn pixel_shuffle_add(&self, r: usize, residual: &RocmTensor) -> Result<RocmTensor> {
        let y = self.contiguous()?;
        let &[n, crr, h, w] = y.dims() else {
            return Err(Error::op("pixel_shuffle_add", format!("needs [N, C·r², H, W], got {:?}", y.dims())));
        };
        let c = crr / (r * r);
        let six = [n, c, h, r, w, r];
        // y[n, (c·r + i)·r + j, hh, ww] at (n, c, hh, i, ww, j).
        let yl = Layout::new(
            Shape::from(&six[..]),
            vec![crr * h * w, r * r * h * w, w, r * h * w, 1, h * w],
            y.layout.start_offset(),
        );
        let rs = residual.layout.stride();
        let rl = Layout::new(
            Shape::from(&six[..]),
            vec![rs[0], rs[1], r * rs[2], rs[2], r * rs[3], rs[3]],
            residual.layout.start_offset(),
        );
        let a = ops::binary(BinaryOp::Add, &residual.array, &rl, &y.array, &yl)
            .map_err(|e| op_err("pixel_shuffle_add", e))?;
        Ok(RocmTensor::contiguous_new(a, &[n, c, h * r, w * r]))
    }

    pub fn to_dtype(&self, dtype: DType) -> Result<RocmTensor> {
        let a = ops::cast(&self.array, &self.layout, dtype).map_err(|e| op_err("to_dtype", e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    pub fn reshape(&self, shape: &[usize]) -> Result<RocmTensor> {
        let c = self.contiguous()?;
        Ok(RocmTensor { layout: Layout::contiguous_with_offset(shape, c.layout.start_offset()), array: c.array })
    }

    pub fn permute(&self, dims: &[usize]) -> Result<RocmTensor> {
        Ok(self.with_layout(self.layout.permute(dims)?))
    }

    pub fn transpose(&self, a: usize, b: usize) -> Result<RocmTensor> {
        Ok(self.with_layout(self.layout.transpose(a, b)?))
    }

    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<RocmTensor> {
        Ok(self.with_layout(self.layout.narrow(dim, start, len)?))
    }

    pub fn broadcast_as(&self, shape: &[usize]) -> Result<RocmTensor> {
        Ok(self.with_layout(self.layout.broadcast_as(shape)?))
    }

    /// Concatenation along `dim`: each input copied as a `[outer, inner·len]` block.
    pub fn cat(parts: &[&RocmTensor], dim: usize) -> Result<RocmTensor> {
        let first = parts[0];
        let mut shape = first.dims().to_vec();
        if dim >= shape.len() {
            return Err(Error::op("cat", format!("dimension {dim} of a {}-D tensor", shape.len())));
        }
        shape[dim] = 0;
        for p in parts {
            let d = p.dims();
            if d.len() != first.dims().len()
                || d.iter().enumerate().any(|(i, &v)| i != dim && v != first.dims()[i])
                || p.dtype() != first.dtype()
            {
                return Err(Error::op(
                    "cat",
                    format!("shapes {:?} and {:?} / dtypes do not match outside dimension {dim}", first.dims(), d),
                ));
            }
            shape[dim] += d[dim];
        }
        let outer: usize = shape[..dim].iter().product();
        let inner: usize = shape[dim + 1..].iter().product();
        let total = shape[dim] * inner;
        let out = DeviceArray::alloc(first.device(), first.dtype(), outer * total).map_err(|e| op_err("cat", e))?;
        let mut offset = 0;
        for p in parts {
            let c = p.contiguous()?;
            let cols = p.dims()[dim] * inner;
            ops::copy2d(&c.array, 0, cols, &out, offset, total, outer, cols).map_err(|e| op_err("cat", e))?;
            offset += cols;
        }
        Ok(RocmTensor::contiguous_new(out, &shape))
    }

    /// Reduces dimension `dim` (kept as size 1).
    pub fn reduce(&self, op: ReduceOp, dim: usize) -> Result<RocmTensor> {
        let dims = self.dims();
        let outer: usize = dims[..dim].iter().product();
        let inner: usize = dims[dim + 1..].iter().product();
        let c = self.contiguous()?;
        let a = ops::reduce(op, &c.array, outer, dims[dim], inner).map_err(|e| op_err("reduce", e))?;
        let mut shape = dims.to_vec();
        shape[dim] = 1;
        Ok(RocmTensor::contiguous_new(a, &shape))
    }

    /// Per-channel exact sums of the first `rows x cols` of a `[1, C, H, W]` tensor.
    pub fn channel_exact_sums(&self, rows: usize, cols: usize) -> Result<Vec<crate::ExactSum>> {
        let view = self.plane_view(rows, cols)?;
        let sums = DeviceSums::new(self.device(), view.dims()[0])?;
        self.channel_exact_sums_into(rows, cols, &sums)?;
        sums.read((view.dims()[1] * view.dims()[2]) as u64)
    }

    /// Adds the per-channel exact sums of the first `rows x cols` into device buckets
    /// (see [`DeviceSums`]); nothing is read back.
    pub(crate) fn channel_exact_sums_into(&self, rows: usize, cols: usize, acc: &DeviceSums) -> Result<()> {
        let view = self.plane_view(rows, cols)?;
        ops::exact_channel_sums_into(&self.array, &view, &acc.buckets, &acc.flags)
            .map_err(|e| op_err("channel_exact_sums", e))
    }

    /// The `[C, rows, cols]` view of the first `rows x cols` of each plane.
    fn plane_view(&self, rows: usize, cols: usize) -> Result<Layout> {
        let [c, rows, cols] = crate::exact_sum::plane_shape(self.dims(), rows, cols)?;
        let st = self.layout.stride();
        Ok(Layout::new(vec![c, rows, cols].into(), vec![st[1], st[2], st[3]], self.layout.start_offset()))
    }

    pub fn softmax_last_dim(&self) -> Result<RocmTensor> {
        let cols = *self.dims().last().ok_or_else(|| Error::op("softmax_last_dim", "a 0-D tensor"))?;
        let c = self.contiguous()?;
        let a =
            ops::softmax_last_dim(&c.array, self.elem_count() / cols.max(1), cols).map_err(|e| op_err("softmax", e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    pub fn group_norm(
        &self,
        groups: usize,
        weight: Option<&RocmTensor>,
        bias: Option<&RocmTensor>,
        eps: f64,
        silu: bool,
    ) -> Result<RocmTensor> {
        let dims = self.dims();
        let (n, c) = (dims[0], dims[1]);
        let hw: usize = dims[2..].iter().product();
        let x = self.contiguous()?;
        let w = weight.map(|t| t.contiguous()).transpose()?;
        let b = bias.map(|t| t.contiguous()).transpose()?;
        let a = rocm_backend::norm::group_norm(
            &x.array,
            n,
            c,
            hw,
            groups,
            w.as_ref().map(|t| &t.array),
            b.as_ref().map(|t| &t.array),
            eps,
            silu,
        )
        .map_err(|e| op_err("group_norm", e))?;
        Ok(RocmTensor::contiguous_new(a, dims))
    }

    /// Group normalisation of a `[1, C, ...]` tensor with the statistics given per group.
    pub fn group_norm_with_stats(
        &self,
        stats: &crate::GroupStats,
        weight: Option<&RocmTensor>,
        bias: Option<&RocmTensor>,
        eps: f64,
        silu: bool,
    ) -> Result<RocmTensor> {
        let dims = self.dims();
        let hw: usize = dims[2..].iter().product();
        let x = self.contiguous()?;
        let w = weight.map(|t| t.contiguous()).transpose()?;
        let b = bias.map(|t| t.contiguous()).transpose()?;
        let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let a = rocm_backend::norm::group_norm_with_stats(
            &x.array,
            dims[1],
            hw,
            &f32s(stats.mean()),
            &f32s(stats.var()),
            w.as_ref().map(|t| &t.array),
            b.as_ref().map(|t| &t.array),
            eps,
            silu,
        )
        .map_err(|e| op_err("group_norm", e))?;
        Ok(RocmTensor::contiguous_new(a, dims))
    }

    pub fn layer_norm(&self, weight: Option<&RocmTensor>, bias: Option<&RocmTensor>, eps: f64) -> Result<RocmTensor> {
        let cols = *self.dims().last().ok_or_else(|| Error::op("layer_norm", "a 0-D tensor"))?;
        let x = self.contiguous()?;
        let w = weight.map(|t| t.contiguous()).transpose()?;
        let b = bias.map(|t| t.contiguous()).transpose()?;
        let a = rocm_backend::norm::layer_norm(
            &x.array,
            self.elem_count() / cols.max(1),
            cols,
            w.as_ref().map(|t| &t.array),
            b.as_ref().map(|t| &t.array),
            eps,
        )
        .map_err(|e| op_err("layer_norm", e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    fn planes_hw(&self) -> (usize, usize, usize) {
        let d = self.dims();
        let r = d.len();
        (d[..r - 2].iter().product(), d[r - 2], d[r - 1])
    }

    pub fn upsample_nearest2d(&self, oh: usize, ow: usize) -> Result<RocmTensor> {
        let (planes, h, w) = self.planes_hw();
        let c = self.contiguous()?;
        let a = rocm_backend::resample::upsample_nearest2d(&c.array, planes, h, w, oh, ow)
            .map_err(|e| op_err("upsample_nearest2d", e))?;
        let mut shape = self.dims().to_vec();
        let r = shape.len();
        shape[r - 2] = oh;
        shape[r - 1] = ow;
        Ok(RocmTensor::contiguous_new(a, &shape))
    }

    pub fn pad2d(&self, top: usize, bottom: usize, left: usize, right: usize, mode: PadMode) -> Result<RocmTensor> {
        let (planes, h, w) = self.planes_hw();
        let c = self.contiguous()?;
        let a = ops::pad2d(&c.array, planes, h, w, top, bottom, left, right, mode).map_err(|e| op_err("pad2d", e))?;
        let mut shape = self.dims().to_vec();
        let r = shape.len();
        shape[r - 2] = h + top + bottom;
        shape[r - 1] = w + left + right;
        Ok(RocmTensor::contiguous_new(a, &shape))
    }

    pub fn pool2d(&self, op: PoolOp, kernel: usize, stride: usize) -> Result<RocmTensor> {
        let (planes, h, w) = self.planes_hw();
        if kernel == 0 || stride == 0 || kernel > h || kernel > w {
            return Err(Error::op("pool2d", format!("kernel {kernel}, stride {stride} on a {h}x{w} input")));
        }
        let (oh, ow) = ((h - kernel) / stride + 1, (w - kernel) / stride + 1);
        let c = self.contiguous()?;
        let a = ops::pool2d(&c.array, op, planes, h, w, oh, ow, kernel, stride).map_err(|e| op_err("pool2d", e))?;
        let mut shape = self.dims().to_vec();
        let r = shape.len();
        shape[r - 2] = oh;
        shape[r - 1] = ow;
        Ok(RocmTensor::contiguous_new(a, &shape))
    }

    /// Batched matrix product over the last two dimensions with batch broadcasting.
    pub fn matmul(&self, rhs: &RocmTensor) -> Result<RocmTensor> {
        let (ld, rd) = (self.dims(), rhs.dims());
        if ld.len() < 2 || rd.len() < 2 {
            return Err(Error::op("matmul", format!("needs at least 2-D operands, got {ld:?} and {rd:?}")));
        }
        let (m, k) = (ld[ld.len() - 2], ld[ld.len() - 1]);
        let (k2, n) = (rd[rd.len() - 2], rd[rd.len() - 1]);
        if k != k2 || self.dtype() != rhs.dtype() {
            return Err(Error::op(
                "matmul",
                format!("cannot multiply {ld:?} {:?} by {rd:?} {:?}", self.dtype(), rhs.dtype()),
            ));
        }
        let lb = Shape::from(&ld[..ld.len() - 2]);
        let rb = Shape::from(&rd[..rd.len() - 2]);
        let batch_shape = lb.broadcast_shape_binary_op(&rb, "matmul")?;
        let batch = batch_shape.elem_count();
        let mut lshape = batch_shape.dims().to_vec();
        lshape.extend([m, k]);
        let mut rshape = batch_shape.dims().to_vec();
        rshape.extend([k, n]);
        // Operands: contiguous per matrix, with a uniform batch stride (0 when the whole
        // batch is broadcast).
        let prep = |t: &RocmTensor, own_batch: usize, shape: &[usize]| -> Result<(RocmTensor, usize)> {
            if own_batch == 1 {
                let c = t.reshape(&shape[shape.len() - 2..])?;
                Ok((c, 0))
            } else {
                let c = t.broadcast_as(shape)?.contiguous()?;
                let mat = shape[shape.len() - 2] * shape[shape.len() - 1];
                Ok((c, mat))
            }
        };
        let (a, sa) = prep(self, lb.elem_count(), &lshape)?;
        let (b, sb) = prep(rhs, rb.elem_count(), &rshape)?;
        let out = DeviceArray::alloc(self.device(), self.dtype(), batch * m * n).map_err(|e| op_err("matmul", e))?;
        let blas = self.device().blas().map_err(|e| op_err("matmul", e))?;
        // Row-major C[m, n] = A[m, k] · B[k, n] is column-major Cᵀ = Bᵀ · Aᵀ.
        blas.gemm_strided_batched(
            self.dtype(),
            false,
            false,
            (n, m, k),
            (b.array.ptr_at(b.layout.start_offset()), n, sb),
            (a.array.ptr_at(a.layout.start_offset()), k, sa),
            (out.ptr_at(0), n, m * n),
            batch,
        )
        .map_err(|e| op_err("matmul", e))?;
        let mut shape = batch_shape.dims().to_vec();
        shape.extend([m, n]);
        Ok(RocmTensor::contiguous_new(out, &shape))
    }
}

/// How [`RocmTensor::reduce_dims`] lays a reduction out: the permutation that puts the kept
/// dimensions first (in order) and the reduced ones last, the `[outer, len]` it then
/// reduces over the last dimension, and the result's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ReducePlan {
    pub perm: Vec<usize>,
    pub outer: usize,
    pub len: usize,
    pub out_dims: Vec<usize>,
}

/// Validates `dims` (each in range, no repeats, at least one) and plans the reduction.
pub(crate) fn reduce_plan(shape: &[usize], dims: &[usize], keepdim: bool) -> Result<ReducePlan> {
    if dims.is_empty() {
        return Err(Error::op("reduce", format!("no dimension to reduce of shape {shape:?}")));
    }
    let mut reduced = vec![false; shape.len()];
    for &d in dims {
        if d >= shape.len() {
            return Err(Error::op("reduce", format!("dimension {d} out of range for shape {shape:?}")));
        }
        if std::mem::replace(&mut reduced[d], true) {
            return Err(Error::op("reduce", format!("dimension {d} given twice in {dims:?}")));
        }
    }
    let kept: Vec<usize> = (0..shape.len()).filter(|&i| !reduced[i]).collect();
    let mut red: Vec<usize> = dims.to_vec();
    red.sort_unstable();
    let perm: Vec<usize> = kept.iter().chain(&red).copied().collect();
    let outer = kept.iter().map(|&i| shape[i]).product();
    let len = red.iter().map(|&i| shape[i]).product();
    let out_dims = if keepdim {
        shape.iter().enumerate().map(|(i, &s)| if reduced[i] { 1 } else { s }).collect()
    } else {
        kept.iter().map(|&i| shape[i]).collect()
    };
    Ok(ReducePlan { perm, outer, len, out_dims })
}

impl RocmTensor {
    /// `self op rhs` as u8 (1 where it holds), with broadcasting.
    pub fn cmp(&self, op: CmpOp, rhs: &RocmTensor) -> Result<RocmTensor> {
        let shape = self.layout.shape().broadcast_shape_binary_op(rhs.layout.shape(), "cmp")?;
        let l = self.layout.broadcast_as(shape.clone())?;
        let r = rhs.layout.broadcast_as(shape.clone())?;
        let a = rocm_backend::compare::cmp(op, &self.array, &l, &rhs.array, &r).map_err(|e| op_err("cmp", e))?;
        Ok(RocmTensor::contiguous_new(a, shape.dims()))
    }

    /// `self` is a u8 mask: `on_true` where it is non-zero, else `on_false`. The three
    /// shapes must be equal (candle's rule).
    pub fn where_cond(&self, on_true: &RocmTensor, on_false: &RocmTensor) -> Result<RocmTensor> {
        if self.dims() != on_true.dims() || self.dims() != on_false.dims() {
            return Err(Error::op(
                "where_cond",
                format!(
                    "mask {:?}, on_true {:?} and on_false {:?} must have one shape",
                    self.dims(),
                    on_true.dims(),
                    on_false.dims()
                ),
            ));
        }
        let a = rocm_backend::compare::where_cond(
            &self.array,
            &self.layout,
            &on_true.array,
            &on_true.layout,
            &on_false.array,
            &on_false.layout,
        )
        .map_err(|e| op_err("where_cond", e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    pub fn index_select(&self, ids: &RocmTensor, dim: usize) -> Result<RocmTensor> {
        let (a, shape) = rocm_backend::indexing::index_select(&self.array, &self.layout, &ids.array, &ids.layout, dim)
            .map_err(|e| op_err("index_select", e))?;
        Ok(RocmTensor::contiguous_new(a, &shape))
    }

    pub fn gather(&self, ids: &RocmTensor, dim: usize) -> Result<RocmTensor> {
        let (a, shape) = rocm_backend::indexing::gather(&self.array, &self.layout, &ids.array, &ids.layout, dim)
            .map_err(|e| op_err("gather", e))?;
        Ok(RocmTensor::contiguous_new(a, &shape))
    }

    /// candle's `scatter` (`add == false`) and `scatter_add`: a new tensor.
    pub fn scatter(&self, ids: &RocmTensor, src: &RocmTensor, dim: usize, add: bool) -> Result<RocmTensor> {
        use rocm_backend::indexing::{ScatterMode, scatter};
        let mode = if add { ScatterMode::Add } else { ScatterMode::Set };
        let a = scatter(&self.array, &self.layout, &ids.array, &ids.layout, &src.array, &src.layout, dim, mode)
            .map_err(|e| op_err("scatter", e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    pub fn index_add(&self, ids: &RocmTensor, src: &RocmTensor, dim: usize) -> Result<RocmTensor> {
        let a = rocm_backend::indexing::index_add(
            &self.array,
            &self.layout,
            &ids.array,
            &ids.layout,
            &src.array,
            &src.layout,
            dim,
        )
        .map_err(|e| op_err("index_add", e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    /// Sum / max / min over several dimensions at once (one pass: the reduced dimensions
    /// are moved last), or argmax / argmin over one; `keepdim` keeps them as size 1.
    pub fn reduce_dims(&self, op: ReduceOp, dims: &[usize], keepdim: bool) -> Result<RocmTensor> {
        if op.is_arg() && dims.len() != 1 {
            return Err(Error::op("reduce", format!("{op:?} reduces exactly one dimension, got {dims:?}")));
        }
        let plan = reduce_plan(self.dims(), dims, keepdim)?;
        let c = self.permute(&plan.perm)?.contiguous()?;
        let a = ops::reduce(op, &c.array, plan.outer, plan.len, 1).map_err(|e| op_err("reduce", e))?;
        Ok(RocmTensor::contiguous_new(a, &plan.out_dims))
    }

    /// `x / sqrt(mean(x²) + eps) · weight` over the last dimension (candle_nn's rms_norm).
    pub fn rms_norm(&self, weight: Option<&RocmTensor>, eps: f64) -> Result<RocmTensor> {
        let cols = *self.dims().last().ok_or_else(|| Error::op("rms_norm", "a 0-D tensor"))?;
        let x = self.contiguous()?;
        let w = weight.map(|t| t.contiguous()).transpose()?;
        let a = rocm_backend::norm::rms_norm(
            &x.array,
            self.elem_count() / cols.max(1),
            cols,
            w.as_ref().map(|t| &t.array),
            None,
            eps,
        )
        .map_err(|e| op_err("rms_norm", e))?;
        Ok(RocmTensor::contiguous_new(a, self.dims()))
    }

    pub fn upsample_nearest1d(&self, target: usize) -> Result<RocmTensor> {
        let a = rocm_backend::resample::upsample_nearest1d(&self.array, &self.layout, target)
            .map_err(|e| op_err("upsample_nearest1d", e))?;
        let d = self.dims();
        Ok(RocmTensor::contiguous_new(a, &[d[0], d[1], target]))
    }

    pub fn upsample_bilinear2d(&self, oh: usize, ow: usize, align_corners: bool) -> Result<RocmTensor> {
        let a = rocm_backend::resample::upsample_bilinear2d(&self.array, &self.layout, oh, ow, align_corners)
            .map_err(|e| op_err("upsample_bilinear2d", e))?;
        let d = self.dims();
        Ok(RocmTensor::contiguous_new(a, &[d[0], d[1], oh, ow]))
    }

    /// Uniform in `[lo, hi)` from the Philox stream of `seed` at word `offset`.
    pub fn rand_uniform(
        dev: &Arc<RocmDevice>,
        shape: &[usize],
        dtype: DType,
        (lo, hi): (f64, f64),
        seed: u64,
        offset: u64,
    ) -> Result<RocmTensor> {
        let n = shape.iter().product();
        let a = rocm_backend::random::rand_uniform(dev, dtype, n, lo, hi, seed, offset)
            .map_err(|e| op_err("rand_uniform", e))?;
        Ok(RocmTensor::contiguous_new(a, shape))
    }

    /// Normal(mean, std) from the Philox stream of `seed` at word `offset`.
    pub fn rand_normal(
        dev: &Arc<RocmDevice>,
        shape: &[usize],
        dtype: DType,
        (mean, std): (f64, f64),
        seed: u64,
        offset: u64,
    ) -> Result<RocmTensor> {
        let n = shape.iter().product();
        let a = rocm_backend::random::rand_normal(dev, dtype, n, mean, std, seed, offset)
            .map_err(|e| op_err("rand_normal", e))?;
        Ok(RocmTensor::contiguous_new(a, shape))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduce_plans() {
        let p = reduce_plan(&[2, 3, 4, 5], &[3, 1], true).unwrap();
        assert_eq!(p, ReducePlan { perm: vec![0, 2, 1, 3], outer: 8, len: 15, out_dims: vec![2, 1, 4, 1] });
        let p = reduce_plan(&[2, 3, 4, 5], &[1, 3], false).unwrap();
        assert_eq!(p.out_dims, vec![2, 4]);
        let p = reduce_plan(&[6], &[0], false).unwrap();
        assert_eq!((p.outer, p.len, p.out_dims), (1, 6, vec![]));
        let e = reduce_plan(&[2, 3], &[2], true).unwrap_err().to_string();
        assert!(e.contains("dimension 2 out of range for shape [2, 3]"), "{e}");
        let e = reduce_plan(&[2, 3], &[1, 1], true).unwrap_err().to_string();
        assert!(e.contains("dimension 1 given twice"), "{e}");
        assert!(reduce_plan(&[2, 3], &[], true).is_err());
    }

    /// The wrappers on a real device against candle's CPU ops (GPU tier; skips otherwise).
    #[test]
    fn wrappers_match_candle_on_the_gpu() {
        let Some(dev) = test_support::device_or_skip(RocmDevice::open(0)) else { return };
        let cpu = candle_core::Device::Cpu;
        let x = candle_core::Tensor::randn(0f32, 1.0, (2, 3, 4, 5), &cpu).unwrap();
        let g = RocmTensor::from_candle(&dev, &x).unwrap();
        let close = |a: &RocmTensor, b: &candle_core::Tensor| {
            let a = a.to_candle().unwrap().to_dtype(DType::F64).unwrap().flatten_all().unwrap();
            let b = b.to_dtype(DType::F64).unwrap().flatten_all().unwrap();
            let d = (a - b).unwrap().abs().unwrap().max(0).unwrap().to_scalar::<f64>().unwrap();
            assert!(d <= 1e-5, "max difference {d}");
        };
        close(&g.reduce_dims(ReduceOp::Sum, &[1, 3], true).unwrap(), &x.sum_keepdim((1, 3)).unwrap());
        close(&g.reduce_dims(ReduceOp::Max, &[2], false).unwrap(), &x.max(2).unwrap());
        close(&g.unary(UnaryOp::Powf, 2.0).unwrap(), &x.powf(2.0).unwrap());
        close(&g.unary(UnaryOp::Elu, 0.7).unwrap(), &x.elu(0.7).unwrap());
        let t = g.transpose(2, 3).unwrap();
        close(
            &t.upsample_bilinear2d(7, 9, false).unwrap(),
            &x.transpose(2, 3).unwrap().upsample_bilinear2d(7, 9, false).unwrap(),
        );
        let ids = RocmTensor::from_slice(&dev, &[2u32, 0, 2], &[3]).unwrap();
        let cids = candle_core::Tensor::new(&[2u32, 0, 2], &cpu).unwrap();
        close(&g.index_select(&ids, 1).unwrap(), &x.index_select(&cids, 1).unwrap());
        let m = g.cmp(CmpOp::Gt, &g.affine(0.0, 0.0).unwrap()).unwrap();
        let zeros = x.zeros_like().unwrap();
        close(
            &m.where_cond(&g, &g.affine(0.0, 0.0).unwrap()).unwrap(),
            &x.gt(&zeros).unwrap().where_cond(&x, &zeros).unwrap(),
        );
        let a = RocmTensor::rand_uniform(&dev, &[1000], DType::F32, (0.0, 1.0), 3, 0).unwrap();
        let b = RocmTensor::rand_uniform(&dev, &[1000], DType::F32, (0.0, 1.0), 3, 0).unwrap();
        assert_eq!(a.to_candle().unwrap().to_vec1::<f32>().unwrap(), b.to_candle().unwrap().to_vec1::<f32>().unwrap());
    }
}

/// Exact per-channel sums accumulating on a device: `C x 256` i64 buckets and `C` u32
/// non-finite flags, read back once by [`DeviceSums::read`].
pub(crate) struct DeviceSums {
    buckets: DeviceArray,
    flags: DeviceArray,
}

impl DeviceSums {
    pub(crate) fn new(device: &Arc<RocmDevice>, channels: usize) -> Result<DeviceSums> {
        let zeros = |dtype, len| DeviceArray::zeros(device, dtype, len).map_err(|e| op_err("channel_exact_sums", e));
        Ok(DeviceSums { buckets: zeros(DType::I64, channels * 256)?, flags: zeros(DType::U32, channels)? })
    }

    /// The sums of `count` values per channel (waits for the device).
    pub(crate) fn read(&self, count: u64) -> Result<Vec<crate::ExactSum>> {
        let buckets = self.buckets.to_vec::<i64>().map_err(|e| op_err("channel_exact_sums", e))?;
        let flags = self.flags.to_vec::<u32>().map_err(|e| op_err("channel_exact_sums", e))?;
        Ok(buckets.chunks_exact(256).zip(flags).map(|(b, f)| crate::ExactSum::from_buckets(b, count, f != 0)).collect())
    }
}
