//! The rest of candle's backend operations on [`Tensor`]: comparison, selection, indexing,
//! reductions over several dimensions, 1-D/bilinear resampling, RMS normalisation and
//! random tensors. On the CPU they are candle's own ops (half types computed in f32 where
//! candle would accumulate in the narrow type); on ROCm the backend's kernels
//! (`rocm_backend::{pointwise, indexing, resample, random}`), compared with these CPU results
//! by the GPU tier's parity tests.

use super::{Storage, Tensor};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::rocm::RocmTensor;
use candle_core::DType;
pub use rocm_backend::ops::Reduce;
pub use rocm_backend::pointwise::Cmp;

fn is_half(dtype: DType) -> bool {
    matches!(dtype, DType::F16 | DType::BF16)
}

impl Tensor {
    fn rocm_operand<'a>(&self, t: &'a Tensor, op: &'static str) -> Result<&'a RocmTensor> {
        Ok(self.rocm_of(Some(t), op)?.expect("Some in, Some out"))
    }

    fn cpu_operand<'a>(&self, t: &'a Tensor, op: &'static str) -> Result<&'a candle_core::Tensor> {
        Ok(self.cpu_of(Some(t), op)?.expect("Some in, Some out"))
    }

    // ---- comparison and selection --------------------------------------------------------

    /// `self op rhs` elementwise with broadcasting: a u8 tensor, 1 where it holds.
    pub fn cmp(&self, op: Cmp, rhs: &Tensor) -> Result<Tensor> {
        self.same_device(rhs, "cmp")?;
        if self.dtype() != rhs.dtype() {
            return Err(Error::op("cmp", format!("dtypes differ: {:?} and {:?}", self.dtype(), rhs.dtype())));
        }
        match &self.s {
            Storage::Cpu(a) => {
                let b = self.cpu_operand(rhs, "cmp")?;
                let shape = a.shape().broadcast_shape_binary_op(b.shape(), "cmp")?;
                self.wrap_cpu(a.broadcast_as(shape.clone())?.cmp(&b.broadcast_as(shape)?, op.to_candle())?)
            }
            Storage::Rocm(a) => self.wrap_rocm(a.cmp(op, self.rocm_operand(rhs, "cmp")?)?),
        }
    }

    /// `self` is a u8 mask of the shape of `on_true` and `on_false`: `on_true` where it is
    /// non-zero, `on_false` elsewhere.
    pub fn where_cond(&self, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        self.same_device(on_true, "where_cond")?;
        self.same_device(on_false, "where_cond")?;
        if self.dtype() != DType::U8 {
            return Err(Error::op("where_cond", format!("the mask must be u8, got {:?}", self.dtype())));
        }
        if on_true.dtype() != on_false.dtype() {
            return Err(Error::op(
                "where_cond",
                format!("on_true is {:?} but on_false is {:?}", on_true.dtype(), on_false.dtype()),
            ));
        }
        match &self.s {
            Storage::Cpu(m) => self.wrap_cpu(
                m.where_cond(self.cpu_operand(on_true, "where_cond")?, self.cpu_operand(on_false, "where_cond")?)?,
            ),
            Storage::Rocm(m) => self.wrap_rocm(
                m.where_cond(self.rocm_operand(on_true, "where_cond")?, self.rocm_operand(on_false, "where_cond")?)?,
            ),
        }
    }

    /// `x^e` elementwise.
    pub fn powf(&self, e: f64) -> Result<Tensor> {
        on_device!(self, t => t.powf(e), r => r.powf(e))
    }

    /// `x` where `x ≥ 0`, `alpha · (e^x − 1)` elsewhere.
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        on_device!(self, t => t.elu(alpha), r => r.elu(alpha))
    }

    // ---- indexing (ids are u32 or i64) ---------------------------------------------------

    /// The slices `ids[i]` of dimension `dim`, in order (`ids` is 1-D).
    pub fn index_select(&self, ids: &Tensor, dim: usize) -> Result<Tensor> {
        self.same_device(ids, "index_select")?;
        match &self.s {
            Storage::Cpu(t) => self.wrap_cpu(t.index_select(self.cpu_operand(ids, "index_select")?, dim)?),
            Storage::Rocm(r) => self.wrap_rocm(r.index_select(self.rocm_operand(ids, "index_select")?, dim)?),
        }
    }

    /// `out[.., i, ..] = self[.., ids[.., i, ..], ..]` along `dim` (`ids` has the shape of the
    /// output).
    pub fn gather(&self, ids: &Tensor, dim: usize) -> Result<Tensor> {
        self.same_device(ids, "gather")?;
        match &self.s {
            Storage::Cpu(t) => self.wrap_cpu(t.gather(self.cpu_operand(ids, "gather")?, dim)?),
            Storage::Rocm(r) => self.wrap_rocm(r.gather(self.rocm_operand(ids, "gather")?, dim)?),
        }
    }

    /// A copy of `self` with `self[.., ids[.., i, ..], ..] = src[.., i, ..]` along `dim`
    /// (`add`: `+=`, duplicates accumulate; else the last duplicate wins).
    pub fn scatter(&self, ids: &Tensor, src: &Tensor, dim: usize, add: bool) -> Result<Tensor> {
        self.same_device(ids, "scatter")?;
        self.same_device(src, "scatter")?;
        match &self.s {
            Storage::Cpu(t) => {
                let (i, s) = (self.cpu_operand(ids, "scatter")?, self.cpu_operand(src, "scatter")?);
                self.wrap_cpu(if add { t.scatter_add(i, s, dim)? } else { t.scatter(i, s, dim)? })
            }
            Storage::Rocm(r) => self.wrap_rocm(r.scatter(
                self.rocm_operand(ids, "scatter")?,
                self.rocm_operand(src, "scatter")?,
                dim,
                add,
            )?),
        }
    }

    /// A copy of `self` with `self[.., ids[i], ..] += src[.., i, ..]` along `dim` (`ids` 1-D).
    pub fn index_add(&self, ids: &Tensor, src: &Tensor, dim: usize) -> Result<Tensor> {
        self.same_device(ids, "index_add")?;
        self.same_device(src, "index_add")?;
        match &self.s {
            Storage::Cpu(t) => self.wrap_cpu(t.index_add(
                self.cpu_operand(ids, "index_add")?,
                self.cpu_operand(src, "index_add")?,
                dim,
            )?),
            Storage::Rocm(r) => self.wrap_rocm(r.index_add(
                self.rocm_operand(ids, "index_add")?,
                self.rocm_operand(src, "index_add")?,
                dim,
            )?),
        }
    }

    // ---- reductions ----------------------------------------------------------------------

    /// Sum / max / min over `dims` (any number), or argmax / argmin over exactly one (u32
    /// positions); `keepdim` keeps the reduced dimensions with size 1. Sums of f16/bf16
    /// accumulate in f32.
    pub fn reduce(&self, op: Reduce, dims: &[usize], keepdim: bool) -> Result<Tensor> {
        let rank = self.rank();
        let mut sorted = dims.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if dims.is_empty() || sorted.len() != dims.len() || sorted.last().is_some_and(|&d| d >= rank) {
            return Err(Error::op(
                "reduce",
                format!(
                    "dimensions {dims:?} must be distinct, non-empty and below the rank of shape {:?}",
                    self.dims()
                ),
            ));
        }
        if matches!(op, Reduce::ArgMax | Reduce::ArgMin) && dims.len() != 1 {
            return Err(Error::op("reduce", format!("{op:?} reduces exactly one dimension, got {dims:?}")));
        }
        match &self.s {
            Storage::Rocm(r) => self.wrap_rocm(r.reduce_dims(op, dims, keepdim)?),
            Storage::Cpu(t) => {
                let mut y = match op {
                    Reduce::Sum if is_half(t.dtype()) => {
                        t.to_dtype(DType::F32)?.sum_keepdim(sorted.clone())?.to_dtype(t.dtype())?
                    }
                    Reduce::Sum => t.sum_keepdim(sorted.clone())?,
                    Reduce::Max | Reduce::Min => {
                        let mut y = t.clone();
                        for &d in &sorted {
                            y = if op == Reduce::Max { y.max_keepdim(d)? } else { y.min_keepdim(d)? };
                        }
                        y
                    }
                    Reduce::ArgMax => t.argmax_keepdim(dims[0])?,
                    Reduce::ArgMin => t.argmin_keepdim(dims[0])?,
                };
                if !keepdim {
                    for &d in sorted.iter().rev() {
                        y = y.squeeze(d)?;
                    }
                }
                self.wrap_cpu(y)
            }
        }
    }

    /// `x / sqrt(mean(x²) + eps) · weight` over the last dimension, computed in f32.
    pub fn rms_norm(&self, weight: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        let d =
            self.rank().checked_sub(1).ok_or_else(|| Error::op("rms_norm", "a 0-D tensor has no last dimension"))?;
        let c = self.dims()[d];
        if let Some(w) = weight
            && w.dims() != [c]
        {
            return Err(Error::op("rms_norm", format!("weight has shape {:?}, expected [{c}]", w.dims())));
        }
        match &self.s {
            Storage::Rocm(r) => self.wrap_rocm(r.rms_norm(self.rocm_of(weight, "rms_norm")?, eps)?),
            Storage::Cpu(t) => {
                let x = t.to_dtype(DType::F32)?;
                let mut y = x.broadcast_div(&x.sqr()?.mean_keepdim(d)?.affine(1.0, eps)?.sqrt()?)?;
                if let Some(w) = self.cpu_of(weight, "rms_norm")? {
                    y = y.broadcast_mul(&w.to_dtype(DType::F32)?)?;
                }
                self.wrap_cpu(y.to_dtype(self.dtype())?)
            }
        }
    }

    // ---- resampling --------------------------------------------------------------------------

    /// Nearest-neighbour resize of an `[N, C, L]` tensor to length `target`.
    pub fn upsample_nearest1d(&self, target: usize) -> Result<Tensor> {
        self.require_rank(3, "upsample_nearest1d")?;
        on_device!(self, t => t.upsample_nearest1d(target), r => r.upsample_nearest1d(target))
    }

    /// Bilinear resize of an `[N, C, H, W]` tensor to `h × w` (PyTorch's coordinates, with
    /// or without `align_corners`).
    pub fn upsample_bilinear2d(&self, h: usize, w: usize, align_corners: bool) -> Result<Tensor> {
        self.require_rank(4, "upsample_bilinear2d")?;
        on_device!(self,
            t => t.upsample_bilinear2d(h, w, align_corners),
            r => r.upsample_bilinear2d(h, w, align_corners))
    }

    // ---- random ------------------------------------------------------------------------------

    /// Uniform values in `[lo, hi)` from the counter-based Philox4x32-10 stream of `seed`,
    /// starting at word `offset`: the same numbers on every device and every run (computed
    /// in f32, then cast to `dtype`).
    pub fn rand_uniform(
        shape: &[usize],
        (lo, hi): (f64, f64),
        seed: u64,
        offset: u64,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        rocm_backend::random::check_uniform(lo, hi).map_err(|e| Error::op("rand_uniform", e.to_string()))?;
        match device.rocm_context() {
            Some(ctx) => Ok(Tensor {
                s: Storage::Rocm(RocmTensor::rand_uniform(&ctx.device, shape, dtype, (lo, hi), seed, offset)?),
                device: device.clone(),
            }),
            None => {
                let n = shape.iter().product();
                let v = rocm_backend::random::reference_uniform_f32(seed, offset, n, lo as f32, hi as f32);
                Tensor::from_vec(v, shape, device)?.to_dtype(dtype)
            }
        }
    }

    /// Normal(mean, std) values from the Philox4x32-10 stream of `seed` at word `offset`
    /// (Box–Muller; the CPU evaluates it in f64, a GPU in f32: the same numbers to a few
    /// f32 ulps).
    pub fn rand_normal(
        shape: &[usize],
        (mean, std): (f64, f64),
        seed: u64,
        offset: u64,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        rocm_backend::random::check_normal(mean, std).map_err(|e| Error::op("rand_normal", e.to_string()))?;
        match device.rocm_context() {
            Some(ctx) => Ok(Tensor {
                s: Storage::Rocm(RocmTensor::rand_normal(&ctx.device, shape, dtype, (mean, std), seed, offset)?),
                device: device.clone(),
            }),
            None => {
                let n = shape.iter().product();
                let v = rocm_backend::random::reference_normal(seed, offset, n, mean, std);
                Tensor::from_vec(v, shape, device)?.to_dtype(dtype)
            }
        }
    }
}
