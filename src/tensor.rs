//! The inference tensor.
//!
//! A [`Tensor`] is data plus the [`Device`] handle whose convolution engine runs its
//! convolutions. On the CPU the data is a `candle_core::Tensor` and every other op is
//! candle's CPU kernel as it is; on ROCm it is a device array with a candle `Layout`, and
//! ops are the backend's kernels. Normalisations and softmax compute their statistics in
//! f32 whatever the dtype.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::rocm::RocmTensor;
use candle_core::{DType, WithDType};
use conv_engine::{Conv1dParams, Conv2dParams};
use implicit_gemm::cpu::Element;

/// What a convolution applies to its output in the same pass: `out = (act(conv + bias) +
/// residual) · scale` ([`Tensor::conv2d_fused`]).
pub type ConvEpilogue<'a> = conv_engine::Epilogue<&'a Tensor>;

/// How [`Tensor::pad2d`] fills the border.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    Zeros,
    /// Mirror without repeating the edge (PyTorch's `reflect`): `[a b c]` padded by 2 on
    /// the left is `[c b a b c]`.
    Reflect,
}

#[derive(Clone)]
enum Storage {
    Cpu(candle_core::Tensor),
    Rocm(RocmTensor),
}

#[derive(Clone)]
pub struct Tensor {
    s: Storage,
    device: Device,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor[{:?}, {:?}, {}]", self.dims(), self.dtype(), self.device)
    }
}

/// Runs `$cpu` on the candle tensor or `$rocm` on the ROCm tensor, wrapping the result.
macro_rules! on_device {
    ($self:ident, $c:ident => $cpu:expr, $r:ident => $rocm:expr) => {
        match &$self.s {
            Storage::Cpu($c) => $self.wrap_cpu($cpu?),
            Storage::Rocm($r) => $self.wrap_rocm($rocm?),
        }
    };
}

mod parity;
pub use parity::{Cmp, Reduce};

macro_rules! unary {
    ($($(#[$doc:meta])* $name:ident => $kernel:literal),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> Result<Tensor> {
                on_device!(self, t => t.$name(), r => r.unary($kernel, 0.0))
            }
        )*
    };
}

macro_rules! broadcast_binary {
    ($($(#[$doc:meta])* $name:ident => $candle:ident, $kernel:literal),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, rhs: &Tensor) -> Result<Tensor> {
                self.same_device(rhs, stringify!($name))?;
                match (&self.s, &rhs.s) {
                    (Storage::Cpu(a), Storage::Cpu(b)) => self.wrap_cpu(a.$candle(b)?),
                    (Storage::Rocm(a), Storage::Rocm(b)) => self.wrap_rocm(a.binary($kernel, b)?),
                    _ => unreachable!("same_device checked"),
                }
            }
        )*
    };
}

impl Tensor {
    /// Wraps a CPU candle tensor; for a ROCm `device` the data is uploaded.
    pub fn from_candle(t: candle_core::Tensor, device: &Device) -> Result<Tensor> {
        if !t.device().is_cpu() {
            return Err(Error::op(
                "from_candle",
                format!("a {:?} candle tensor; only CPU candle tensors are accepted", t.device().location()),
            ));
        }
        match device.rocm_context() {
            None => Ok(Tensor { s: Storage::Cpu(t), device: device.clone() }),
            Some(ctx) => {
                Ok(Tensor { s: Storage::Rocm(RocmTensor::from_candle(&ctx.device, &t)?), device: device.clone() })
            }
        }
    }

    /// The candle tensor of a CPU tensor (shares storage), or `None` on ROCm.
    pub fn as_candle(&self) -> Option<&candle_core::Tensor> {
        match &self.s {
            Storage::Cpu(t) => Some(t),
            Storage::Rocm(_) => None,
        }
    }

    pub(crate) fn rocm_storage(&self) -> Option<&RocmTensor> {
        match &self.s {
            Storage::Rocm(r) => Some(r),
            Storage::Cpu(_) => None,
        }
    }

    /// A CPU candle tensor with this data (shares storage on the CPU, downloads from ROCm).
    pub fn to_candle(&self) -> Result<candle_core::Tensor> {
        match &self.s {
            Storage::Cpu(t) => Ok(t.clone()),
            Storage::Rocm(r) => r.to_candle(),
        }
    }

    pub fn from_vec<T: WithDType>(data: Vec<T>, shape: &[usize], device: &Device) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if data.len() != n {
            return Err(Error::op(
                "from_vec",
                format!("{} elements do not fill shape {shape:?} ({n} elements)", data.len()),
            ));
        }
        match device.rocm_context() {
            None => Tensor::from_candle(candle_core::Tensor::from_vec(data, shape, &device.candle())?, device),
            Some(ctx) => Ok(Tensor {
                s: Storage::Rocm(RocmTensor::from_slice(&ctx.device, &data, shape)?),
                device: device.clone(),
            }),
        }
    }

    pub fn full(value: f64, shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        match device.rocm_context() {
            None => {
                Tensor::from_candle(candle_core::Tensor::full(value, shape, &device.candle())?.to_dtype(dtype)?, device)
            }
            Some(ctx) => {
                let a = rocm_backend::ops::full(&ctx.device, dtype, shape.iter().product(), value)
                    .map_err(|e| Error::op("full", e.to_string()))?;
                Ok(Tensor { s: Storage::Rocm(RocmTensor::contiguous_new(a, shape)), device: device.clone() })
            }
        }
    }

    pub fn zeros(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(0.0, shape, dtype, device)
    }

    pub fn ones(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::full(1.0, shape, dtype, device)
    }

    fn wrap_cpu(&self, t: candle_core::Tensor) -> Result<Tensor> {
        Ok(Tensor { s: Storage::Cpu(t), device: self.device.clone() })
    }

    fn wrap_rocm(&self, r: RocmTensor) -> Result<Tensor> {
        Ok(Tensor { s: Storage::Rocm(r), device: self.device.clone() })
    }

    fn same_device(&self, other: &Tensor, op: &'static str) -> Result<()> {
        if self.device != other.device {
            return Err(Error::op(op, format!("operands on {} and {}", self.device, other.device)));
        }
        Ok(())
    }

    fn rocm_of<'a>(&self, t: Option<&'a Tensor>, op: &'static str) -> Result<Option<&'a RocmTensor>> {
        match t.map(|t| (&t.s, t)) {
            None => Ok(None),
            Some((Storage::Rocm(r), _)) => Ok(Some(r)),
            Some((Storage::Cpu(_), t)) => Err(Error::op(op, format!("operands on {} and {}", self.device, t.device))),
        }
    }

    fn cpu_of<'a>(&self, t: Option<&'a Tensor>, op: &'static str) -> Result<Option<&'a candle_core::Tensor>> {
        match t.map(|t| (&t.s, t)) {
            None => Ok(None),
            Some((Storage::Cpu(c), _)) => Ok(Some(c)),
            Some((Storage::Rocm(_), t)) => Err(Error::op(op, format!("operands on {} and {}", self.device, t.device))),
        }
    }

    pub fn dims(&self) -> &[usize] {
        match &self.s {
            Storage::Cpu(t) => t.dims(),
            Storage::Rocm(r) => r.dims(),
        }
    }

    pub fn rank(&self) -> usize {
        self.dims().len()
    }

    pub fn dim(&self, d: usize) -> Result<usize> {
        self.dims()
            .get(d)
            .copied()
            .ok_or_else(|| Error::op("dim", format!("dimension {d} of a {}-D tensor {:?}", self.rank(), self.dims())))
    }

    pub fn elem_count(&self) -> usize {
        self.dims().iter().product()
    }

    pub fn dtype(&self) -> DType {
        match &self.s {
            Storage::Cpu(t) => t.dtype(),
            Storage::Rocm(r) => r.dtype(),
        }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// All elements, flattened, converted to `T`'s dtype, on the host.
    pub fn to_vec<T: WithDType>(&self) -> Result<Vec<T>> {
        if let Storage::Rocm(r) = &self.s {
            // Converted and compacted on the device, then read straight into the vector: the
            // host path (download, candle's to_dtype, another copy) made Real-CUGAN's 1080p
            // output a 0.2 s wait.
            let c = if r.dtype() == T::DTYPE { r.contiguous()? } else { r.to_dtype(T::DTYPE)? };
            return c.array.to_vec::<T>().map_err(|e| Error::op("to_vec", e.to_string()));
        }
        Ok(self.to_candle()?.flatten_all()?.to_dtype(T::DTYPE)?.to_vec1::<T>()?)
    }

    /// The same data on `device` (a copy unless it is already there).
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if self.device == *device {
            return Ok(self.clone());
        }
        Tensor::from_candle(self.to_candle()?, device)
    }

    // ---- convolution: through the device's conv engine --------------------------------

    fn conv(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        problem: conv_engine::ConvProblem,
        op: &'static str,
        epilogue: &ConvEpilogue<'_>,
    ) -> Result<Tensor> {
        self.same_device(weight, op)?;
        if let Some(r) = epilogue.residual {
            self.same_device(r, op)?;
            if r.dims() != problem.output_shape() || r.dtype() != self.dtype() {
                return Err(Error::op(
                    op,
                    format!(
                        "residual is {:?} {:?}; the output is {:?} {:?}",
                        r.dims(),
                        r.dtype(),
                        problem.output_shape(),
                        self.dtype()
                    ),
                ));
            }
        }
        match (&self.s, &weight.s) {
            (Storage::Cpu(x), Storage::Cpu(w)) => {
                let b = self.cpu_of(bias, op)?;
                let r = self.cpu_of(epilogue.residual, op)?;
                let ep = conv_engine::Epilogue { activation: epilogue.activation, residual: r, scale: epilogue.scale };
                self.wrap_cpu(self.device.cpu_conv().run_fused(&problem, x, w, b, &ep)?)
            }
            (Storage::Rocm(x), Storage::Rocm(w)) => {
                let ctx = self.device.rocm_context().expect("ROCm storage lives on a ROCm device");
                let b = self.rocm_of(bias, op)?;
                if let Some(b) = b
                    && b.dims() != [problem.geometry.out_channels]
                {
                    return Err(Error::op(
                        op,
                        format!("bias has shape {:?}, expected [{}]", b.dims(), problem.geometry.out_channels),
                    ));
                }
                let (x, w) = (x.contiguous()?, w.contiguous()?);
                let b = b.map(|b| b.contiguous()).transpose()?;
                let r = self.rocm_of(epilogue.residual, op)?.map(|r| r.contiguous()).transpose()?;
                let ep = rocm_backend::conv::Epilogue {
                    activation: epilogue.activation,
                    residual: r.as_ref().map(|r| &r.array),
                    scale: epilogue.scale,
                };
                let out = ctx
                    .conv
                    .run_fused(&problem, &x.array, &w.array, b.as_ref().map(|b| &b.array), ep)
                    .map_err(|e| Error::op(op, e.to_string()))?;
                self.wrap_rocm(RocmTensor::contiguous_new(out, &problem.output_shape()))
            }
            _ => unreachable!("same_device checked"),
        }
    }

    /// `conv2d` with its epilogue in the same pass over the output: `out = (act(conv +
    /// bias) + residual) · scale`, on either device (a residual must have the output's
    /// shape and dtype). A LeakyReLU after a conv, or a resnet's residual add, then costs
    /// no second pass over memory.
    pub fn conv2d_fused(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv2dParams,
        epilogue: &ConvEpilogue<'_>,
    ) -> Result<Tensor> {
        let p = conv_engine::ConvProblem::conv2d(self.dims(), weight.dims(), self.dtype(), weight.dtype(), params)?;
        self.conv(weight, bias, p, "conv2d", epilogue)
    }

    /// `conv_transpose2d` with its epilogue in the same pass (see [`Tensor::conv2d_fused`]).
    pub fn conv_transpose2d_fused(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv2dParams,
        epilogue: &ConvEpilogue<'_>,
    ) -> Result<Tensor> {
        let p = conv_engine::ConvProblem::conv_transpose2d(
            self.dims(),
            weight.dims(),
            self.dtype(),
            weight.dtype(),
            params,
        )?;
        self.conv(weight, bias, p, "conv_transpose2d", epilogue)
    }

    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv2dParams) -> Result<Tensor> {
        self.conv2d_fused(weight, bias, params, &ConvEpilogue::default())
    }

    pub fn conv_transpose2d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv2dParams) -> Result<Tensor> {
        self.conv_transpose2d_fused(weight, bias, params, &ConvEpilogue::default())
    }

    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv1dParams) -> Result<Tensor> {
        let p = conv_engine::ConvProblem::conv1d(self.dims(), weight.dims(), self.dtype(), weight.dtype(), params)?;
        self.conv(weight, bias, p, "conv1d", &ConvEpilogue::default())
    }

    pub fn conv_transpose1d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv1dParams) -> Result<Tensor> {
        let p = conv_engine::ConvProblem::conv_transpose1d(
            self.dims(),
            weight.dims(),
            self.dtype(),
            weight.dtype(),
            params,
        )?;
        self.conv(weight, bias, p, "conv_transpose1d", &ConvEpilogue::default())
    }

    // ---- elementwise ------------------------------------------------------------------

    unary!(
        /// `x · sigmoid(x)`.
        silu => "silu",
        /// GELU, tanh approximation.
        gelu => "gelu",
        /// GELU with the exact erf.
        gelu_erf => "gelu_erf",
        relu => "relu",
        tanh => "tanh",
        exp => "exp",
        sqrt => "sqrt",
        sqr => "sqr",
        abs => "abs",
        neg => "neg",
        recip => "recip",
    );

    broadcast_binary!(
        /// `self + rhs` with broadcasting.
        add => broadcast_add, "add",
        /// `self - rhs` with broadcasting.
        sub => broadcast_sub, "sub",
        /// `self · rhs` with broadcasting.
        mul => broadcast_mul, "mul",
        /// `self / rhs` with broadcasting.
        div => broadcast_div, "div",
        maximum => broadcast_maximum, "maximum",
        minimum => broadcast_minimum, "minimum",
    );

    /// `self · mul + add`.
    pub fn affine(&self, mul: f64, add: f64) -> Result<Tensor> {
        on_device!(self, t => t.affine(mul, add), r => r.affine(mul, add))
    }

    /// `x` where `x ≥ 0`, `slope · x` elsewhere.
    pub fn leaky_relu(&self, slope: f64) -> Result<Tensor> {
        on_device!(self,
            t => t.maximum(0.0).and_then(|p| p.add(&t.minimum(0.0)?.affine(slope, 0.0)?)),
            r => r.unary("leaky_relu", slope))
    }

    /// `1 / (1 + e^{-x})`.
    pub fn sigmoid(&self) -> Result<Tensor> {
        on_device!(self, t => t.neg()?.exp()?.affine(1.0, 1.0)?.recip(), r => r.unary("sigmoid", 0.0))
    }

    /// Softmax over the last dimension, computed in f32.
    pub fn softmax_last_dim(&self) -> Result<Tensor> {
        let d = self
            .rank()
            .checked_sub(1)
            .ok_or_else(|| Error::op("softmax_last_dim", "a 0-D tensor has no last dimension"))?;
        on_device!(self,
            t => {
                let x = t.to_dtype(DType::F32)?;
                let e = x.broadcast_sub(&x.max_keepdim(d)?)?.exp()?;
                e.broadcast_div(&e.sum_keepdim(d)?)?.to_dtype(self.dtype())
            },
            r => r.softmax_last_dim())
    }

    /// Per-channel [`ExactSum`](crate::ExactSum)s of the first `rows x cols` of each plane of
    /// a `[1, C, H, W]` tensor (f32, f16 or bf16; any strides). Order-independent: the sums
    /// of tiles merged equal the sum of the whole map bit for bit, on either device (the
    /// GPU sums on the device and reads back 2 KiB per channel).
    pub fn channel_exact_sums(&self, rows: usize, cols: usize) -> Result<Vec<crate::ExactSum>> {
        match &self.s {
            Storage::Cpu(t) => crate::exact_sum::cpu_channel_sums(t, rows, cols),
            Storage::Rocm(r) => r.channel_exact_sums(rows, cols),
        }
    }

    // ---- normalisation ----------------------------------------------------------------

    /// Group normalisation of an `[N, C, ...]` tensor over `groups` channel groups, with
    /// optional per-channel scale and shift; statistics in f64 (CPU) / f32 (GPU).
    pub fn group_norm(
        &self,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        self.group_norm_impl(groups, weight, bias, eps, false)
    }

    /// `silu(group_norm(x))`, the pair every VAE resnet block starts with, in one pass
    /// and one output buffer (no intermediate tensors).
    pub fn group_norm_silu(
        &self,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        self.group_norm_impl(groups, weight, bias, eps, true)
    }

    fn group_norm_impl(
        &self,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        silu: bool,
    ) -> Result<Tensor> {
        let dims = self.dims().to_vec();
        if dims.len() < 2 {
            return Err(Error::op("group_norm", format!("input must be [N, C, ...], got {dims:?}")));
        }
        let c = dims[1];
        if groups == 0 || c % groups != 0 {
            return Err(Error::op("group_norm", format!("groups = {groups} does not divide {c} channels")));
        }
        for (what, t) in [("weight", weight), ("bias", bias)] {
            if let Some(t) = t
                && t.dims() != [c]
            {
                return Err(Error::op("group_norm", format!("{what} has shape {:?}, expected [{c}]", t.dims())));
            }
        }
        match &self.s {
            Storage::Rocm(r) => {
                let (w, b) = (self.rocm_of(weight, "group_norm")?, self.rocm_of(bias, "group_norm")?);
                self.wrap_rocm(r.group_norm(groups, w, b, eps, silu)?)
            }
            Storage::Cpu(t) => {
                let affine =
                    |t: Option<&Tensor>| -> Result<Option<Vec<f32>>> { t.map(|t| t.to_vec::<f32>()).transpose() };
                let (w, b) = (affine(weight)?, affine(bias)?);
                let x = t.contiguous()?;
                let (st, layout) = x.storage_and_layout();
                let candle_core::Storage::Cpu(cpu) = &*st else {
                    return Err(Error::op("group_norm", "expected a CPU tensor"));
                };
                let range = layout.start_offset()..layout.start_offset() + layout.shape().elem_count();
                let norm = GroupNormSpec { channels: c, groups, eps, silu, weight: w.as_deref(), bias: b.as_deref() };
                match cpu {
                    candle_core::CpuStorage::F32(v) => norm.run(&v[range], &dims, &self.device),
                    candle_core::CpuStorage::F16(v) => norm.run(&v[range], &dims, &self.device),
                    candle_core::CpuStorage::BF16(v) => norm.run(&v[range], &dims, &self.device),
                    candle_core::CpuStorage::F64(v) => norm.run(&v[range], &dims, &self.device),
                    _ => Err(Error::op("group_norm", format!("unsupported dtype {:?}", self.dtype()))),
                }
            }
        }
    }

    /// Layer normalisation over the last dimension; statistics in f32.
    pub fn layer_norm(&self, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        let d =
            self.rank().checked_sub(1).ok_or_else(|| Error::op("layer_norm", "a 0-D tensor has no last dimension"))?;
        let c = self.dims()[d];
        for (what, t) in [("weight", weight), ("bias", bias)] {
            if let Some(t) = t
                && t.dims() != [c]
            {
                return Err(Error::op("layer_norm", format!("{what} has shape {:?}, expected [{c}]", t.dims())));
            }
        }
        match &self.s {
            Storage::Rocm(r) => {
                let (w, b) = (self.rocm_of(weight, "layer_norm")?, self.rocm_of(bias, "layer_norm")?);
                self.wrap_rocm(r.layer_norm(w, b, eps)?)
            }
            Storage::Cpu(t) => {
                let x = t.to_dtype(DType::F32)?;
                let centered = x.broadcast_sub(&x.mean_keepdim(d)?)?;
                let var = centered.sqr()?.mean_keepdim(d)?;
                let mut y = centered.broadcast_div(&var.affine(1.0, eps)?.sqrt()?)?;
                if let Some(w) = self.cpu_of(weight, "layer_norm")? {
                    y = y.broadcast_mul(&w.to_dtype(DType::F32)?)?;
                }
                if let Some(b) = self.cpu_of(bias, "layer_norm")? {
                    y = y.broadcast_add(&b.to_dtype(DType::F32)?)?;
                }
                self.wrap_cpu(y.to_dtype(self.dtype())?)
            }
        }
    }

    // ---- matrix product -----------------------------------------------------------------

    /// Matrix product over the last two dimensions, with batch broadcasting. On the CPU
    /// bf16 runs in f32 (candle's CPU GEMM has no bf16) and is rounded back; on ROCm
    /// rocBLAS accumulates in f32.
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.same_device(rhs, "matmul")?;
        if self.dtype() != rhs.dtype() {
            return Err(Error::op("matmul", format!("dtypes differ: {:?} and {:?}", self.dtype(), rhs.dtype())));
        }
        match (&self.s, &rhs.s) {
            (Storage::Cpu(a), Storage::Cpu(b)) => {
                if self.dtype() == DType::BF16 {
                    let y = a.to_dtype(DType::F32)?.broadcast_matmul(&b.to_dtype(DType::F32)?)?;
                    return self.wrap_cpu(y.to_dtype(DType::BF16)?);
                }
                self.wrap_cpu(a.broadcast_matmul(b)?)
            }
            (Storage::Rocm(a), Storage::Rocm(b)) => self.wrap_rocm(a.matmul(b)?),
            _ => unreachable!("same_device checked"),
        }
    }

    // ---- spatial ----------------------------------------------------------------------------

    /// Nearest-neighbour resize of an `[N, C, H, W]` tensor to `h × w`.
    pub fn upsample_nearest2d(&self, h: usize, w: usize) -> Result<Tensor> {
        self.require_rank(4, "upsample_nearest2d")?;
        on_device!(self, t => t.upsample_nearest2d(h, w), r => r.upsample_nearest2d(h, w))
    }

    pub fn avg_pool2d(&self, kernel: usize, stride: usize) -> Result<Tensor> {
        self.require_rank(4, "avg_pool2d")?;
        on_device!(self, t => t.avg_pool2d_with_stride(kernel, stride), r => r.pool2d(false, kernel, stride))
    }

    pub fn max_pool2d(&self, kernel: usize, stride: usize) -> Result<Tensor> {
        self.require_rank(4, "max_pool2d")?;
        on_device!(self, t => t.max_pool2d_with_stride(kernel, stride), r => r.pool2d(true, kernel, stride))
    }

    /// Mean over the spatial dimensions of an `[N, C, H, W]` tensor: `[N, C, 1, 1]`,
    /// accumulated in f32.
    pub fn mean_spatial(&self) -> Result<Tensor> {
        self.require_rank(4, "mean_spatial")?;
        let [n, c, h, w] = [self.dims()[0], self.dims()[1], self.dims()[2], self.dims()[3]];
        on_device!(self,
            t => t.to_dtype(DType::F32)?.mean_keepdim((2, 3))?.to_dtype(self.dtype()),
            r => r.reshape(&[n, c, h * w])?.reduce(rocm_backend::ops::Reduce::Sum, 2)?.affine(1.0 / (h * w) as f64, 0.0)?.reshape(&[n, c, 1, 1]))
    }

    /// Pads the last two dimensions.
    pub fn pad2d(&self, top: usize, bottom: usize, left: usize, right: usize, mode: PadMode) -> Result<Tensor> {
        if self.rank() < 2 {
            return Err(Error::op("pad2d", format!("needs at least 2 dimensions, got {:?}", self.dims())));
        }
        let (dh, dw) = (self.rank() - 2, self.rank() - 1);
        match (&self.s, mode) {
            (Storage::Cpu(t), PadMode::Zeros) => {
                self.wrap_cpu(t.pad_with_zeros(dh, top, bottom)?.pad_with_zeros(dw, left, right)?)
            }
            (Storage::Cpu(t), PadMode::Reflect) => {
                let t = reflect(t, dh, top, bottom)?;
                self.wrap_cpu(reflect(&t, dw, left, right)?)
            }
            (Storage::Rocm(r), mode) => self.wrap_rocm(r.pad2d(top, bottom, left, right, mode == PadMode::Reflect)?),
        }
    }

    fn require_rank(&self, rank: usize, op: &'static str) -> Result<()> {
        if self.rank() != rank {
            return Err(Error::op(op, format!("needs a {rank}-D tensor, got shape {:?}", self.dims())));
        }
        Ok(())
    }

    // ---- shape ------------------------------------------------------------------------------

    pub fn reshape(&self, shape: &[usize]) -> Result<Tensor> {
        if shape.iter().product::<usize>() != self.elem_count() {
            return Err(Error::op(
                "reshape",
                format!("cannot view {:?} ({} elements) as {shape:?}", self.dims(), self.elem_count()),
            ));
        }
        on_device!(self, t => t.reshape(shape), r => r.reshape(shape))
    }

    pub fn permute(&self, dims: &[usize]) -> Result<Tensor> {
        on_device!(self, t => t.permute(dims), r => r.permute(dims))
    }

    pub fn transpose(&self, a: usize, b: usize) -> Result<Tensor> {
        on_device!(self, t => t.transpose(a, b), r => r.transpose(a, b))
    }

    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
        on_device!(self, t => t.narrow(dim, start, len), r => r.narrow(dim, start, len))
    }

    pub fn cat(tensors: &[&Tensor], dim: usize) -> Result<Tensor> {
        let first = tensors.first().ok_or_else(|| Error::op("cat", "no tensors to concatenate"))?;
        for t in tensors {
            first.same_device(t, "cat")?;
        }
        match &first.s {
            Storage::Cpu(_) => {
                let ts: Vec<&candle_core::Tensor> = tensors.iter().filter_map(|t| t.as_candle()).collect();
                first.wrap_cpu(candle_core::Tensor::cat(&ts, dim)?)
            }
            Storage::Rocm(_) => {
                let rs: Vec<&RocmTensor> =
                    tensors.iter().filter_map(|t| if let Storage::Rocm(r) = &t.s { Some(r) } else { None }).collect();
                first.wrap_rocm(RocmTensor::cat(&rs, dim)?)
            }
        }
    }

    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        on_device!(self, t => t.to_dtype(dtype), r => r.to_dtype(dtype))
    }

    pub fn contiguous(&self) -> Result<Tensor> {
        on_device!(self, t => t.contiguous(), r => r.contiguous())
    }

    pub fn is_contiguous(&self) -> bool {
        match &self.s {
            Storage::Cpu(t) => t.is_contiguous(),
            Storage::Rocm(r) => r.layout.is_contiguous(),
        }
    }
}

/// Reflect-pads dimension `dim` by `before`/`after` (each smaller than the dimension, as
/// PyTorch requires) with one gather.
fn reflect(t: &candle_core::Tensor, dim: usize, before: usize, after: usize) -> Result<candle_core::Tensor> {
    if before == 0 && after == 0 {
        return Ok(t.clone());
    }
    let n = t.dims()[dim];
    if before >= n || after >= n {
        return Err(Error::op(
            "pad2d",
            format!(
                "reflect padding ({before}, {after}) must be smaller than the padded dimension ({n}) of shape {:?}",
                t.dims()
            ),
        ));
    }
    let idx: Vec<u32> = (-(before as isize)..(n + after) as isize)
        .map(|i| {
            let j = if i < 0 {
                -i
            } else if i >= n as isize {
                2 * (n as isize - 1) - i
            } else {
                i
            };
            j as u32
        })
        .collect();
    let idx = candle_core::Tensor::from_vec(idx, before + n + after, t.device())?;
    Ok(t.index_select(&idx, dim)?)
}

/// One group normalisation, run directly over a contiguous CPU buffer: per (image, group)
/// the mean and variance in f64, then one pass that normalises, applies the per-channel
/// affine and optionally SiLU, and writes the output.
struct GroupNormSpec<'a> {
    channels: usize,
    groups: usize,
    eps: f64,
    silu: bool,
    weight: Option<&'a [f32]>,
    bias: Option<&'a [f32]>,
}

impl GroupNormSpec<'_> {
    fn run<T: Element + WithDType>(&self, x: &[T], dims: &[usize], device: &Device) -> Result<Tensor> {
        use rayon::prelude::*;
        let per_channel: usize = dims[2..].iter().product();
        let per_group = self.channels / self.groups * per_channel;
        let mut out = vec![<T as Element>::from_f32(0.0); x.len()];
        out.par_chunks_mut(per_group).zip(x.par_chunks(per_group)).enumerate().for_each(|(i, (o, xs))| {
            let group = i % self.groups;
            let n = xs.len() as f64;
            let mean = xs.iter().map(|&v| Element::to_f64(v)).sum::<f64>() / n;
            let var = xs.iter().map(|&v| (Element::to_f64(v) - mean).powi(2)).sum::<f64>() / n;
            let rstd = 1.0 / (var + self.eps).sqrt();
            for (ci, (oc, xc)) in o.chunks_mut(per_channel).zip(xs.chunks(per_channel)).enumerate() {
                let ch = group * (self.channels / self.groups) + ci;
                // y = x·scale + shift with the normalisation folded into the affine.
                let w = self.weight.map_or(1.0, |w| w[ch] as f64);
                let scale = (rstd * w) as f32;
                let shift = (self.bias.map_or(0.0, |b| b[ch] as f64) - mean * rstd * w) as f32;
                for (ov, xv) in oc.iter_mut().zip(xc) {
                    let y = Element::to_f32(*xv) * scale + shift;
                    *ov = <T as Element>::from_f32(if self.silu { y / (1.0 + (-y).exp()) } else { y });
                }
            }
        });
        Tensor::from_candle(candle_core::Tensor::from_vec(out, dims, &device.candle())?, device)
    }
}
