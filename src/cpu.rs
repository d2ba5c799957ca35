//! Tensor ops on the CPU, beside `rocm.rs`: the data is a candle CPU tensor and each op is
//! candle's own CPU kernel where candle has it, reached through the op vocabulary both
//! devices share ([`kernels::ops`]). Written here: group normalisation (one pass over the
//! buffer, f64 statistics), reflect padding, and the ops computed in f32 for half types
//! where candle would accumulate in the narrow type.

use crate::error::{Error, Result};
use candle_core::{DType, Tensor, WithDType};
use conv_cpu::Element;
use kernels::ops::{BinaryOp, CmpOp, PadMode, PoolOp, ReduceOp, UnaryOp};

fn is_half(dtype: DType) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
}

/// `op(t)`; `param` as [`UnaryOp`] documents it.
pub(crate) fn unary(t: &Tensor, op: UnaryOp, param: f64) -> Result<Tensor> {
    Ok(match op {
        UnaryOp::Neg => t.neg()?,
        UnaryOp::Exp => t.exp()?,
        UnaryOp::Log => t.log()?,
        UnaryOp::Sqrt => t.sqrt()?,
        UnaryOp::Abs => t.abs()?,
        UnaryOp::Relu => t.relu()?,
        UnaryOp::Silu => t.silu()?,
        UnaryOp::Gelu => t.gelu()?,
        UnaryOp::GeluErf => t.gelu_erf()?,
        UnaryOp::Sigmoid => t.neg()?.exp()?.affine(1.0, 1.0)?.recip()?,
        UnaryOp::Tanh => t.tanh()?,
        UnaryOp::Sin => t.sin()?,
        UnaryOp::Cos => t.cos()?,
        UnaryOp::Recip => t.recip()?,
        UnaryOp::Sqr => t.sqr()?,
        UnaryOp::LeakyRelu => t.maximum(0.0)?.add(&t.minimum(0.0)?.affine(param, 0.0)?)?,
        UnaryOp::Powf => t.powf(param)?,
        UnaryOp::Elu => t.elu(param)?,
    })
}

/// `a op b` with broadcasting.
pub(crate) fn binary(a: &Tensor, op: BinaryOp, b: &Tensor) -> Result<Tensor> {
    Ok(match op {
        BinaryOp::Add => a.broadcast_add(b)?,
        BinaryOp::Sub => a.broadcast_sub(b)?,
        BinaryOp::Mul => a.broadcast_mul(b)?,
        BinaryOp::Div => a.broadcast_div(b)?,
        BinaryOp::Maximum => a.broadcast_maximum(b)?,
        BinaryOp::Minimum => a.broadcast_minimum(b)?,
    })
}

/// `a op b` with broadcasting, as u8.
pub(crate) fn cmp(a: &Tensor, op: CmpOp, b: &Tensor) -> Result<Tensor> {
    use candle_core::op::CmpOp as Candle;
    let candle = match op {
        CmpOp::Eq => Candle::Eq,
        CmpOp::Ne => Candle::Ne,
        CmpOp::Lt => Candle::Lt,
        CmpOp::Le => Candle::Le,
        CmpOp::Gt => Candle::Gt,
        CmpOp::Ge => Candle::Ge,
    };
    let shape = a.shape().broadcast_shape_binary_op(b.shape(), "cmp")?;
    Ok(a.broadcast_as(shape.clone())?.cmp(&b.broadcast_as(shape)?, candle)?)
}

/// `op` over the distinct, ascending `dims` (one for the arg reductions); sums of half
/// types accumulate in f32.
pub(crate) fn reduce(t: &Tensor, op: ReduceOp, dims: &[usize], keepdim: bool) -> Result<Tensor> {
    let mut y = match op {
        ReduceOp::Sum if is_half(t.dtype()) => t.to_dtype(DType::F32)?.sum_keepdim(dims)?.to_dtype(t.dtype())?,
        ReduceOp::Sum => t.sum_keepdim(dims)?,
        ReduceOp::Max | ReduceOp::Min => {
            let mut y = t.clone();
            for &d in dims {
                y = if op == ReduceOp::Max { y.max_keepdim(d)? } else { y.min_keepdim(d)? };
            }
            y
        }
        ReduceOp::ArgMax => t.argmax_keepdim(dims[0])?,
        ReduceOp::ArgMin => t.argmin_keepdim(dims[0])?,
    };
    if !keepdim {
        for &d in dims.iter().rev() {
            y = y.squeeze(d)?;
        }
    }
    Ok(y)
}

/// Mean over the last two dimensions of an `[N, C, H, W]` tensor, kept as size 1,
/// accumulated in f32.
pub(crate) fn mean_spatial(t: &Tensor) -> Result<Tensor> {
    Ok(t.to_dtype(DType::F32)?.mean_keepdim((2, 3))?.to_dtype(t.dtype())?)
}

/// Softmax over dimension `d`, the last, in f32.
pub(crate) fn softmax_last_dim(t: &Tensor, d: usize) -> Result<Tensor> {
    let x = t.to_dtype(DType::F32)?;
    let e = x.broadcast_sub(&x.max_keepdim(d)?)?.exp()?;
    Ok(e.broadcast_div(&e.sum_keepdim(d)?)?.to_dtype(t.dtype())?)
}

/// Matrix product with batch broadcasting; bf16 runs in f32 (candle's CPU GEMM has no
/// bf16) and is rounded back.
pub(crate) fn matmul(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    if a.dtype() == DType::BF16 {
        let y = a.to_dtype(DType::F32)?.broadcast_matmul(&b.to_dtype(DType::F32)?)?;
        return Ok(y.to_dtype(DType::BF16)?);
    }
    Ok(a.broadcast_matmul(b)?)
}

/// Layer normalisation over dimension `d`, the last, in f32.
pub(crate) fn layer_norm(
    t: &Tensor,
    d: usize,
    weight: Option<&Tensor>,
    bias: Option<&Tensor>,
    eps: f64,
) -> Result<Tensor> {
    let x = t.to_dtype(DType::F32)?;
    let centered = x.broadcast_sub(&x.mean_keepdim(d)?)?;
    let var = centered.sqr()?.mean_keepdim(d)?;
    let mut y = centered.broadcast_div(&var.affine(1.0, eps)?.sqrt()?)?;
    if let Some(w) = weight {
        y = y.broadcast_mul(&w.to_dtype(DType::F32)?)?;
    }
    if let Some(b) = bias {
        y = y.broadcast_add(&b.to_dtype(DType::F32)?)?;
    }
    Ok(y.to_dtype(t.dtype())?)
}

/// `x / sqrt(mean(x²) + eps) · weight` over dimension `d`, the last, in f32.
pub(crate) fn rms_norm(t: &Tensor, d: usize, weight: Option<&Tensor>, eps: f64) -> Result<Tensor> {
    let x = t.to_dtype(DType::F32)?;
    let mut y = x.broadcast_div(&x.sqr()?.mean_keepdim(d)?.affine(1.0, eps)?.sqrt()?)?;
    if let Some(w) = weight {
        y = y.broadcast_mul(&w.to_dtype(DType::F32)?)?;
    }
    Ok(y.to_dtype(t.dtype())?)
}

/// Group normalisation of an `[N, C, ...]` tensor whose channel count `groups` divides,
/// with the per-channel affine as f32 and optionally SiLU after it.
pub(crate) fn group_norm(
    t: &Tensor,
    groups: usize,
    weight: Option<&[f32]>,
    bias: Option<&[f32]>,
    eps: f64,
    silu: bool,
    stats: Option<&crate::GroupStats>,
) -> Result<Tensor> {
    let dims = t.dims().to_vec();
    let x = t.contiguous()?;
    let (st, layout) = x.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*st else {
        return Err(Error::op("group_norm", "expected a CPU tensor"));
    };
    let range = layout.start_offset()..layout.start_offset() + layout.shape().elem_count();
    let norm = GroupNormSpec { channels: dims[1], groups, eps, silu, weight, bias, stats };
    match cpu {
        candle_core::CpuStorage::F32(v) => norm.run(&v[range], &dims),
        candle_core::CpuStorage::F16(v) => norm.run(&v[range], &dims),
        candle_core::CpuStorage::BF16(v) => norm.run(&v[range], &dims),
        candle_core::CpuStorage::F64(v) => norm.run(&v[range], &dims),
        _ => Err(Error::op("group_norm", format!("unsupported dtype {:?}", t.dtype()))),
    }
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
    /// Given statistics (of a whole map this tensor is a band of) instead of its own.
    stats: Option<&'a crate::GroupStats>,
}

impl GroupNormSpec<'_> {
    fn run<T: Element + WithDType>(&self, x: &[T], dims: &[usize]) -> Result<Tensor> {
        use rayon::prelude::*;
        let per_channel: usize = dims[2..].iter().product();
        let per_group = self.channels / self.groups * per_channel;
        let mut out = vec![<T as Element>::from_f32(0.0); x.len()];
        out.par_chunks_mut(per_group).zip(x.par_chunks(per_group)).enumerate().for_each(|(i, (o, xs))| {
            let group = i % self.groups;
            let (mean, var) = match self.stats {
                Some(s) => (s.mean()[group], s.var()[group]),
                None => {
                    let n = xs.len() as f64;
                    let mean = xs.iter().map(|&v| Element::to_f64(v)).sum::<f64>() / n;
                    (mean, xs.iter().map(|&v| (Element::to_f64(v) - mean).powi(2)).sum::<f64>() / n)
                }
            };
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
        Ok(Tensor::from_vec(out, dims, &candle_core::Device::Cpu)?)
    }
}

/// Pads the last two dimensions (the tensor has at least two).
pub(crate) fn pad2d(t: &Tensor, top: usize, bottom: usize, left: usize, right: usize, mode: PadMode) -> Result<Tensor> {
    let (dh, dw) = (t.rank() - 2, t.rank() - 1);
    Ok(match mode {
        PadMode::Zeros => t.pad_with_zeros(dh, top, bottom)?.pad_with_zeros(dw, left, right)?,
        PadMode::Reflect => reflect(&reflect(t, dh, top, bottom)?, dw, left, right)?,
        PadMode::Replicate => t.pad_with_same(dh, top, bottom)?.pad_with_same(dw, left, right)?,
    })
}

/// Reflect-pads dimension `dim` by `before`/`after` (each smaller than the dimension, as
/// PyTorch requires) with one gather.
fn reflect(t: &Tensor, dim: usize, before: usize, after: usize) -> Result<Tensor> {
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
    let idx = Tensor::from_vec(idx, before + n + after, t.device())?;
    // candle's CPU gather reads contiguous tensors only (a permuted view failed here).
    Ok(t.contiguous()?.index_select(&idx, dim)?)
}

/// Pooling of an `[N, C, H, W]` tensor, square window, no padding.
pub(crate) fn pool2d(t: &Tensor, op: PoolOp, kernel: usize, stride: usize) -> Result<Tensor> {
    Ok(match op {
        PoolOp::Max => t.max_pool2d_with_stride(kernel, stride)?,
        PoolOp::Avg => t.avg_pool2d_with_stride(kernel, stride)?,
    })
}

/// `pixel_shuffle(y, r) + residual` in one pass over the output: each output row
/// interleaves its `r` source rows and adds the residual's row, read through its strides (a
/// crop view is not copied first). The arithmetic is candle's add (`y + residual`, half
/// types through f32, rounded once); the data movement is one read of each input and one
/// write, where the shuffled copy and an add made two of each (Real-CUGAN's 2x2
/// deconvolutions on the CPU, 2026-12-04).
pub(crate) fn pixel_shuffle_add(y: &Tensor, r: usize, residual: &Tensor) -> Result<Tensor> {
    match y.dtype() {
        DType::F32 => shuffle_add::<f32>(y, r, residual),
        DType::F16 => shuffle_add::<half::f16>(y, r, residual),
        DType::BF16 => shuffle_add::<half::bf16>(y, r, residual),
        DType::F64 => shuffle_add::<f64>(y, r, residual),
        other => Err(Error::op("pixel_shuffle_add", format!("{other:?} is not a float type"))),
    }
}

fn shuffle_add<T: WithDType>(y: &Tensor, r: usize, residual: &Tensor) -> Result<Tensor> {
    use candle_core::Storage;
    use rayon::prelude::*;
    let y = y.contiguous()?;
    let &[n, crr, h, w] = y.dims() else {
        return Err(Error::op("pixel_shuffle_add", format!("needs [N, C·r², H, W], got {:?}", y.dims())));
    };
    let c = crr / (r * r);
    let (y_st, y_l) = y.storage_and_layout();
    let (r_st, r_l) = residual.storage_and_layout();
    let (Storage::Cpu(ys), Storage::Cpu(rs)) = (&*y_st, &*r_st) else {
        return Err(Error::op("pixel_shuffle_add", "CPU tensors expected".to_string()));
    };
    let ys = &ys.as_slice::<T>()?[y_l.start_offset()..][..n * crr * h * w];
    let rs = rs.as_slice::<T>()?;
    let (r_off, r_st) = (r_l.start_offset(), r_l.stride().to_vec());
    let (ho, wo) = (h * r, w * r);
    let mut out = vec![T::zero(); n * c * ho * wo];
    out.par_chunks_mut(wo).enumerate().for_each(|(row, dst)| {
        let (plane, oy) = (row / ho, row % ho);
        let (img, ch) = (plane / c, plane % c);
        let (iy, i) = (oy / r, oy % r);
        let res = r_off + img * r_st[0] + ch * r_st[1] + oy * r_st[2];
        let src = |j: usize| &ys[((img * crr + (ch * r + i) * r + j) * h + iy) * w..][..w];
        if r == 2 && r_st[3] == 1 {
            // The common case (2x upscalers, a crop of a contiguous map): pairs, vectorised.
            let res_row = &rs[res..res + wo];
            let (a, b) = (src(0), src(1));
            for (((d, rr), &a), &b) in dst.chunks_exact_mut(2).zip(res_row.chunks_exact(2)).zip(a).zip(b) {
                d[0] = a + rr[0];
                d[1] = b + rr[1];
            }
            return;
        }
        for j in 0..r {
            for (x, v) in src(j).iter().enumerate() {
                let ox = x * r + j;
                dst[ox] = *v + rs[res + ox * r_st[3]];
            }
        }
    });
    Ok(Tensor::from_vec(out, &[n, c, ho, wo], &candle_core::Device::Cpu)?)
}
