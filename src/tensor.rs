//! The inference tensor.
//!
//! On the CPU a [`Tensor`] is a `candle_core::Tensor` plus the [`Device`] handle whose
//! convolution engine runs its convolutions; every other op is candle's CPU kernel as it
//! is. Normalisations and softmax compute their statistics in f32 whatever the dtype.

use crate::device::Device;
use crate::error::{Error, Result};
use candle_core::{DType, WithDType};
use conv_engine::{Conv1dParams, Conv2dParams};
use implicit_gemm::cpu::Element;

/// How [`Tensor::pad2d`] fills the border.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PadMode {
    Zeros,
    /// Mirror without repeating the edge (PyTorch's `reflect`): `[a b c]` padded by 2 on
    /// the left is `[c b a b c]`.
    Reflect,
}

#[derive(Clone)]
pub struct Tensor {
    t: candle_core::Tensor,
    device: Device,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tensor[{:?}, {:?}, {}]", self.dims(), self.dtype(), self.device)
    }
}

macro_rules! unary {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> Result<Tensor> {
                self.wrap(self.t.$name()?)
            }
        )*
    };
}

macro_rules! broadcast_binary {
    ($($(#[$doc:meta])* $name:ident => $candle:ident),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, rhs: &Tensor) -> Result<Tensor> {
                self.same_device(rhs, stringify!($name))?;
                self.wrap(self.t.$candle(&rhs.t)?)
            }
        )*
    };
}

impl Tensor {
    /// Wraps a candle tensor that lives on `device`.
    pub fn from_candle(t: candle_core::Tensor, device: &Device) -> Result<Tensor> {
        if !t.device().is_cpu() || !device.is_cpu() {
            return Err(Error::op(
                "from_candle",
                format!("a {:?} candle tensor cannot live on {device}", t.device().location()),
            ));
        }
        Ok(Tensor { t, device: device.clone() })
    }

    /// The candle tensor (shares storage; no copy).
    pub fn as_candle(&self) -> &candle_core::Tensor {
        &self.t
    }

    /// The candle tensor on the CPU (shares storage when already there).
    pub fn to_candle(&self) -> Result<candle_core::Tensor> {
        Ok(self.t.clone())
    }

    pub fn from_vec<T: WithDType>(data: Vec<T>, shape: &[usize], device: &Device) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if data.len() != n {
            return Err(Error::op(
                "from_vec",
                format!("{} elements do not fill shape {shape:?} ({n} elements)", data.len()),
            ));
        }
        Tensor::from_candle(candle_core::Tensor::from_vec(data, shape, &device.candle())?, device)
    }

    pub fn zeros(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::from_candle(candle_core::Tensor::zeros(shape, dtype, &device.candle())?, device)
    }

    pub fn ones(shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        Tensor::from_candle(candle_core::Tensor::ones(shape, dtype, &device.candle())?, device)
    }

    fn wrap(&self, t: candle_core::Tensor) -> Result<Tensor> {
        Ok(Tensor { t, device: self.device.clone() })
    }

    fn same_device(&self, other: &Tensor, op: &'static str) -> Result<()> {
        if self.device != other.device {
            return Err(Error::op(op, format!("operands on {} and {}", self.device, other.device)));
        }
        Ok(())
    }

    pub fn dims(&self) -> &[usize] {
        self.t.dims()
    }

    pub fn rank(&self) -> usize {
        self.t.rank()
    }

    pub fn dim(&self, d: usize) -> Result<usize> {
        self.dims()
            .get(d)
            .copied()
            .ok_or_else(|| Error::op("dim", format!("dimension {d} of a {}-D tensor {:?}", self.rank(), self.dims())))
    }

    pub fn elem_count(&self) -> usize {
        self.t.elem_count()
    }

    pub fn dtype(&self) -> DType {
        self.t.dtype()
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// All elements, flattened, converted to `T`'s dtype.
    pub fn to_vec<T: WithDType>(&self) -> Result<Vec<T>> {
        Ok(self.t.flatten_all()?.to_dtype(T::DTYPE)?.to_vec1::<T>()?)
    }

    /// The same data on `device`.
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        Tensor::from_candle(self.t.clone(), device)
    }

    // ---- convolution: through the device's conv engine --------------------------------

    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv2dParams) -> Result<Tensor> {
        self.same_device(weight, "conv2d")?;
        self.wrap(self.device.cpu_conv().conv2d(&self.t, &weight.t, bias.map(|b| &b.t), params)?)
    }

    pub fn conv_transpose2d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv2dParams) -> Result<Tensor> {
        self.same_device(weight, "conv_transpose2d")?;
        self.wrap(self.device.cpu_conv().conv_transpose2d(&self.t, &weight.t, bias.map(|b| &b.t), params)?)
    }

    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv1dParams) -> Result<Tensor> {
        self.same_device(weight, "conv1d")?;
        self.wrap(self.device.cpu_conv().conv1d(&self.t, &weight.t, bias.map(|b| &b.t), params)?)
    }

    pub fn conv_transpose1d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv1dParams) -> Result<Tensor> {
        self.same_device(weight, "conv_transpose1d")?;
        self.wrap(self.device.cpu_conv().conv_transpose1d(&self.t, &weight.t, bias.map(|b| &b.t), params)?)
    }

    // ---- elementwise ------------------------------------------------------------------

    unary!(
        /// `x · sigmoid(x)`.
        silu,
        /// GELU, tanh approximation.
        gelu,
        /// GELU with the exact erf.
        gelu_erf,
        relu,
        tanh,
        exp,
        sqrt,
        sqr,
        abs,
        neg,
        recip,
    );

    broadcast_binary!(
        /// `self + rhs` with broadcasting.
        add => broadcast_add,
        /// `self - rhs` with broadcasting.
        sub => broadcast_sub,
        /// `self · rhs` with broadcasting.
        mul => broadcast_mul,
        /// `self / rhs` with broadcasting.
        div => broadcast_div,
        maximum => broadcast_maximum,
        minimum => broadcast_minimum,
    );

    /// `self · mul + add`.
    pub fn affine(&self, mul: f64, add: f64) -> Result<Tensor> {
        self.wrap(self.t.affine(mul, add)?)
    }

    /// `x` where `x ≥ 0`, `slope · x` elsewhere.
    pub fn leaky_relu(&self, slope: f64) -> Result<Tensor> {
        let neg = self.t.minimum(0.0)?.affine(slope, 0.0)?;
        self.wrap(self.t.maximum(0.0)?.add(&neg)?)
    }

    /// `1 / (1 + e^{-x})`.
    pub fn sigmoid(&self) -> Result<Tensor> {
        self.wrap(self.t.neg()?.exp()?.affine(1.0, 1.0)?.recip()?)
    }

    /// Softmax over the last dimension, computed in f32.
    pub fn softmax_last_dim(&self) -> Result<Tensor> {
        let d = self
            .rank()
            .checked_sub(1)
            .ok_or_else(|| Error::op("softmax_last_dim", "a 0-D tensor has no last dimension"))?;
        let x = self.t.to_dtype(DType::F32)?;
        let e = x.broadcast_sub(&x.max_keepdim(d)?)?.exp()?;
        let y = e.broadcast_div(&e.sum_keepdim(d)?)?;
        self.wrap(y.to_dtype(self.dtype())?)
    }

    // ---- normalisation ----------------------------------------------------------------

    /// Group normalisation of an `[N, C, ...]` tensor over `groups` channel groups, with
    /// optional per-channel scale and shift; statistics in f64, arithmetic in f32.
    pub fn group_norm(&self, groups: usize, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        self.group_norm_impl(groups, weight, bias, eps, false)
    }

    /// `silu(group_norm(x))`, the pair every VAE resnet block starts with, in one pass
    /// and one output buffer (no intermediate tensors).
    pub fn group_norm_silu(&self, groups: usize, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        self.group_norm_impl(groups, weight, bias, eps, true)
    }

    fn group_norm_impl(&self, groups: usize, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64, silu: bool) -> Result<Tensor> {
        let dims = self.dims().to_vec();
        if dims.len() < 2 {
            return Err(Error::op("group_norm", format!("input must be [N, C, ...], got {dims:?}")));
        }
        let c = dims[1];
        if groups == 0 || c % groups != 0 {
            return Err(Error::op("group_norm", format!("groups = {groups} does not divide {c} channels")));
        }
        let affine = |what: &str, t: Option<&Tensor>| -> Result<Option<Vec<f32>>> {
            match t {
                Some(t) if t.dims() != [c] => {
                    Err(Error::op("group_norm", format!("{what} has shape {:?}, expected [{c}]", t.dims())))
                }
                Some(t) => Ok(Some(t.to_vec::<f32>()?)),
                None => Ok(None),
            }
        };
        let (w, b) = (affine("weight", weight)?, affine("bias", bias)?);
        let x = self.t.contiguous()?;
        let (st, layout) = x.storage_and_layout();
        let out = match &*st {
            candle_core::Storage::Cpu(cpu) => {
                let range = layout.start_offset()..layout.start_offset() + layout.shape().elem_count();
                let norm = GroupNormSpec { channels: c, groups, eps, silu, weight: w.as_deref(), bias: b.as_deref() };
                match cpu {
                    candle_core::CpuStorage::F32(v) => norm.run(&v[range], &dims, &self.device)?,
                    candle_core::CpuStorage::F16(v) => norm.run(&v[range], &dims, &self.device)?,
                    candle_core::CpuStorage::BF16(v) => norm.run(&v[range], &dims, &self.device)?,
                    candle_core::CpuStorage::F64(v) => norm.run(&v[range], &dims, &self.device)?,
                    _ => return Err(Error::op("group_norm", format!("unsupported dtype {:?}", self.dtype()))),
                }
            }
            _ => return Err(Error::op("group_norm", "expected a CPU tensor")),
        };
        Ok(out)
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
        let x = self.t.to_dtype(DType::F32)?;
        let centered = x.broadcast_sub(&x.mean_keepdim(d)?)?;
        let var = centered.sqr()?.mean_keepdim(d)?;
        let y = centered.broadcast_div(&var.affine(1.0, eps)?.sqrt()?)?;
        let y = self.scale_shift(y, weight, bias, &[c])?;
        self.wrap(y.to_dtype(self.dtype())?)
    }

    fn scale_shift(
        &self,
        mut y: candle_core::Tensor,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        shape: &[usize],
    ) -> Result<candle_core::Tensor> {
        if let Some(w) = weight {
            y = y.broadcast_mul(&w.t.to_dtype(DType::F32)?.reshape(shape)?)?;
        }
        if let Some(b) = bias {
            y = y.broadcast_add(&b.t.to_dtype(DType::F32)?.reshape(shape)?)?;
        }
        Ok(y)
    }

    // ---- matrix product -----------------------------------------------------------------

    /// Matrix product over the last two dimensions, with batch broadcasting. bf16 runs in
    /// f32 on the CPU (candle's CPU GEMM has no bf16) and is rounded back.
    pub fn matmul(&self, rhs: &Tensor) -> Result<Tensor> {
        self.same_device(rhs, "matmul")?;
        if self.dtype() != rhs.dtype() {
            return Err(Error::op("matmul", format!("dtypes differ: {:?} and {:?}", self.dtype(), rhs.dtype())));
        }
        if self.dtype() == DType::BF16 {
            let y = self.t.to_dtype(DType::F32)?.broadcast_matmul(&rhs.t.to_dtype(DType::F32)?)?;
            return self.wrap(y.to_dtype(DType::BF16)?);
        }
        self.wrap(self.t.broadcast_matmul(&rhs.t)?)
    }

    // ---- spatial ----------------------------------------------------------------------------

    /// Nearest-neighbour resize of an `[N, C, H, W]` tensor to `h × w`.
    pub fn upsample_nearest2d(&self, h: usize, w: usize) -> Result<Tensor> {
        self.require_rank(4, "upsample_nearest2d")?;
        self.wrap(self.t.upsample_nearest2d(h, w)?)
    }

    pub fn avg_pool2d(&self, kernel: usize, stride: usize) -> Result<Tensor> {
        self.require_rank(4, "avg_pool2d")?;
        self.wrap(self.t.avg_pool2d_with_stride(kernel, stride)?)
    }

    pub fn max_pool2d(&self, kernel: usize, stride: usize) -> Result<Tensor> {
        self.require_rank(4, "max_pool2d")?;
        self.wrap(self.t.max_pool2d_with_stride(kernel, stride)?)
    }

    /// Mean over the spatial dimensions of an `[N, C, H, W]` tensor: `[N, C, 1, 1]`,
    /// accumulated in f32.
    pub fn mean_spatial(&self) -> Result<Tensor> {
        self.require_rank(4, "mean_spatial")?;
        self.wrap(self.t.to_dtype(DType::F32)?.mean_keepdim((2, 3))?.to_dtype(self.dtype())?)
    }

    /// Pads the last two dimensions.
    pub fn pad2d(&self, top: usize, bottom: usize, left: usize, right: usize, mode: PadMode) -> Result<Tensor> {
        if self.rank() < 2 {
            return Err(Error::op("pad2d", format!("needs at least 2 dimensions, got {:?}", self.dims())));
        }
        let (dh, dw) = (self.rank() - 2, self.rank() - 1);
        match mode {
            PadMode::Zeros => self.wrap(self.t.pad_with_zeros(dh, top, bottom)?.pad_with_zeros(dw, left, right)?),
            PadMode::Reflect => {
                let t = reflect(&self.t, dh, top, bottom)?;
                self.wrap(reflect(&t, dw, left, right)?)
            }
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
        self.wrap(self.t.reshape(shape)?)
    }

    pub fn permute(&self, dims: &[usize]) -> Result<Tensor> {
        self.wrap(self.t.permute(dims)?)
    }

    pub fn transpose(&self, a: usize, b: usize) -> Result<Tensor> {
        self.wrap(self.t.transpose(a, b)?)
    }

    pub fn narrow(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
        self.wrap(self.t.narrow(dim, start, len)?)
    }

    pub fn cat(tensors: &[&Tensor], dim: usize) -> Result<Tensor> {
        let first = tensors.first().ok_or_else(|| Error::op("cat", "no tensors to concatenate"))?;
        for t in tensors {
            first.same_device(t, "cat")?;
        }
        let ts: Vec<&candle_core::Tensor> = tensors.iter().map(|t| &t.t).collect();
        first.wrap(candle_core::Tensor::cat(&ts, dim)?)
    }

    pub fn to_dtype(&self, dtype: DType) -> Result<Tensor> {
        self.wrap(self.t.to_dtype(dtype)?)
    }

    pub fn contiguous(&self) -> Result<Tensor> {
        self.wrap(self.t.contiguous()?)
    }

    pub fn is_contiguous(&self) -> bool {
        self.t.is_contiguous()
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
