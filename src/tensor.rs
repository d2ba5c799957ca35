//! The inference tensor.
//!
//! A [`Tensor`] is data plus the [`Device`] handle whose convolution engine runs its
//! convolutions. On the CPU the data is a `candle_core::Tensor` and the ops are in
//! `cpu.rs` (candle's CPU kernels as they are, and the few written here); on ROCm it is a
//! device array with a candle `Layout` and the ops are in `rocm.rs` (the backend's kernels).
//! `Tensor` checks what both devices share (shapes, dtypes, devices) and dispatches; both
//! sides name their ops by one vocabulary, [`kernels::ops`]. Normalisations and softmax
//! compute their statistics in f32 whatever the dtype. The ops are grouped by concept in
//! the submodules: convolution, elementwise (with comparison and selection), indexing,
//! reductions, normalisation, spatial resampling and padding, random tensors.

use crate::cpu;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::rocm::RocmTensor;
use candle_core::{DType, WithDType};

#[derive(Clone)]
enum Storage {
    Cpu(candle_core::Tensor),
    Rocm(RocmTensor),
}

/// An inference tensor on a [`Device`]: NCHW at the API, f32 / f16 / bf16 (and the integer
/// types candle has on the CPU). Cheap to clone (the data is shared).
///
/// ```
/// use rocm_vision::prelude::*;
/// let device = Device::cpu();
/// let x = Tensor::from_vec(vec![1f32, -2.0, 3.0, -4.0], &[1, 1, 2, 2], &device)?;
/// let y = x.relu()?.affine(2.0, 1.0)?; // 2·max(x, 0) + 1
/// assert_eq!(y.to_vec::<f32>()?, vec![3.0, 1.0, 7.0, 1.0]);
/// assert_eq!((y.dims(), y.dtype()), (&[1, 1, 2, 2][..], DType::F32));
/// # Ok::<(), rocm_vision::Error>(())
/// ```
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

mod conv;
mod conv_plan;
mod elementwise;
mod host;
mod indexing;
mod norm;
mod random;
mod reduce;
mod spatial;

pub use conv::ConvEpilogue;
pub use conv_plan::ConvPlanInfo;
pub use host::HostTensor;

impl Tensor {
    /// Wraps a CPU candle tensor; for a ROCm `device` the data is uploaded.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let t = candle_core::Tensor::new(&[[1f32, 2.0], [3.0, 4.0]], &candle_core::Device::Cpu)?;
    /// let x = Tensor::from_candle(t, &Device::cpu())?;
    /// assert_eq!(x.dims(), &[2, 2]);
    /// assert_eq!(x.to_candle()?.to_vec2::<f32>()?, vec![vec![1.0, 2.0], vec![3.0, 4.0]]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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

    /// The memory this tensor keeps alive and a key equal for every tensor sharing it. On
    /// ROCm: the whole device buffer (a view, such as a crop, keeps all of it) as the
    /// allocator hands it out (rounded to its size class), keyed by the buffer. On the CPU:
    /// the tensor's own elements (candle does not say how large its storage is), keyed by
    /// the storage. A holder of several tensors counts each key once.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let x = Tensor::zeros(&[1, 4, 8, 8], DType::F32, &Device::cpu())?;
    /// assert_eq!(x.storage_footprint().1, 4 * 8 * 8 * 4);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn storage_footprint(&self) -> (usize, usize) {
        match &self.s {
            Storage::Cpu(t) => {
                let (storage, _) = t.storage_and_layout();
                (&*storage as *const candle_core::Storage as usize, self.elem_count() * self.dtype().size_in_bytes())
            }
            Storage::Rocm(r) => {
                let buffer = &r.array.buffer;
                (std::sync::Arc::as_ptr(buffer) as usize, rocm_backend::alloc::size_class(buffer.len_bytes()))
            }
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

    /// A tensor of `shape` holding `data` (row-major); an error if the lengths differ.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let x = Tensor::from_vec(vec![0.5f32; 6], &[2, 3], &Device::cpu())?;
    /// assert_eq!(x.elem_count(), 6);
    /// assert!(Tensor::from_vec(vec![0f32; 5], &[2, 3], &Device::cpu()).is_err());
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
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

    /// A tensor of `shape` holding a copy of `data` (row-major); an error if the lengths
    /// differ. On ROCm the slice is uploaded as it is, with no host copy in between: a
    /// large input need not be copied into a fresh `Vec` first (whose page faults cost
    /// milliseconds per 10 MB on some hosts).
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let data = [1f32, 2.0, 3.0, 4.0, 5.0, 6.0];
    /// let x = Tensor::from_slice(&data[..4], &[2, 2], &Device::cpu())?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![1.0, 2.0, 3.0, 4.0]);
    /// assert!(Tensor::from_slice(&data, &[2, 2], &Device::cpu()).is_err());
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn from_slice<T: WithDType>(data: &[T], shape: &[usize], device: &Device) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if data.len() != n {
            return Err(Error::op(
                "from_slice",
                format!("{} elements do not fill shape {shape:?} ({n} elements)", data.len()),
            ));
        }
        match device.rocm_context() {
            None => Tensor::from_candle(candle_core::Tensor::from_slice(data, shape, &device.candle())?, device),
            Some(ctx) => Ok(Tensor {
                s: Storage::Rocm(RocmTensor::from_slice(&ctx.device, data, shape)?),
                device: device.clone(),
            }),
        }
    }

    /// Every element, in row-major order and converted to `T`, written into `dst` (exactly
    /// [`Tensor::elem_count`] long). From ROCm the download lands in `dst` itself: a caller
    /// that reuses one buffer pays no fresh allocation's page faults, which on some hosts
    /// cost more than the copy (Real-CUGAN's 25 MB 4K output: 17 ms against 2 ms on the
    /// H200 host).
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let x = Tensor::from_vec(vec![1f32, 2.0, 3.0], &[3], &Device::cpu())?;
    /// let mut buf = [0f32; 3];
    /// x.to_slice(&mut buf)?;
    /// assert_eq!(buf, [1.0, 2.0, 3.0]);
    /// assert!(x.to_slice(&mut [0f32; 2]).is_err());
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn to_slice<T: WithDType>(&self, dst: &mut [T]) -> Result<()> {
        if dst.len() != self.elem_count() {
            return Err(Error::op(
                "to_slice",
                format!("{} elements into a buffer of {}", self.elem_count(), dst.len()),
            ));
        }
        if let Storage::Rocm(r) = &self.s {
            let c = if r.dtype() == T::DTYPE { r.contiguous()? } else { r.to_dtype(T::DTYPE)? };
            return c.array.read_into(dst).map_err(Error::from);
        }
        dst.copy_from_slice(&self.to_vec::<T>()?);
        Ok(())
    }

    /// `value` everywhere ([`Tensor::zeros`] and [`Tensor::ones`] are the usual cases).
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let x = Tensor::full(0.5, &[2, 2], DType::F16, &Device::cpu())?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![0.5; 4]);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn full(value: f64, shape: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
        match device.rocm_context() {
            // Made in its own dtype: an f64 tensor converted afterwards held 3x an f32
            // map's bytes for a moment (5x f16's), which the VAE's memory plan did not see.
            None => {
                use half::{bf16, f16};
                let dev = device.candle();
                let t = match dtype {
                    DType::F32 => candle_core::Tensor::full(value as f32, shape, &dev)?,
                    DType::F16 => candle_core::Tensor::full(f16::from_f64(value), shape, &dev)?,
                    DType::BF16 => candle_core::Tensor::full(bf16::from_f64(value), shape, &dev)?,
                    DType::F64 => candle_core::Tensor::full(value, shape, &dev)?,
                    // Integer dtypes: through f64, as before (no map of them is large).
                    _ => candle_core::Tensor::full(value, shape, &dev)?.to_dtype(dtype)?,
                };
                Tensor::from_candle(t, device)
            }
            Some(ctx) => {
                let a = rocm_backend::ops::full(&ctx.device, dtype, shape.iter().product(), value)?;
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

    /// `other` is on this tensor's handle (the same device and, on the CPU, the same
    /// engine: see [`Device`]'s identity rule), else [`Error::DeviceMismatch`].
    fn same_device(&self, other: &Tensor, op: &'static str) -> Result<()> {
        if self.device != other.device {
            return Err(Error::device_mismatch(op, &self.device, &other.device));
        }
        Ok(())
    }

    fn rocm_of<'a>(&self, t: Option<&'a Tensor>, op: &'static str) -> Result<Option<&'a RocmTensor>> {
        let Some(t) = t else { return Ok(None) };
        self.same_device(t, op)?;
        match &t.s {
            Storage::Rocm(r) => Ok(Some(r)),
            Storage::Cpu(_) => Err(Error::device_mismatch(op, &self.device, &t.device)),
        }
    }

    fn cpu_of<'a>(&self, t: Option<&'a Tensor>, op: &'static str) -> Result<Option<&'a candle_core::Tensor>> {
        let Some(t) = t else { return Ok(None) };
        self.same_device(t, op)?;
        match &t.s {
            Storage::Cpu(c) => Ok(Some(c)),
            Storage::Rocm(_) => Err(Error::device_mismatch(op, &self.device, &t.device)),
        }
    }

    fn rocm_operand<'a>(&self, t: &'a Tensor, op: &'static str) -> Result<&'a RocmTensor> {
        Ok(self.rocm_of(Some(t), op)?.expect("Some in, Some out"))
    }

    fn cpu_operand<'a>(&self, t: &'a Tensor, op: &'static str) -> Result<&'a candle_core::Tensor> {
        Ok(self.cpu_of(Some(t), op)?.expect("Some in, Some out"))
    }

    fn require_rank(&self, rank: usize, op: &'static str) -> Result<()> {
        if self.rank() != rank {
            return Err(Error::op(op, format!("needs a {rank}-D tensor, got shape {:?}", self.dims())));
        }
        Ok(())
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
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let x = Tensor::from_vec(vec![1.5f32, 2.5], &[2], &Device::cpu())?.to_dtype(DType::BF16)?;
    /// assert_eq!(x.to_vec::<f32>()?, vec![1.5, 2.5]);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn to_vec<T: WithDType>(&self) -> Result<Vec<T>> {
        if let Storage::Rocm(r) = &self.s {
            // Converted and compacted on the device, then read straight into the vector: the
            // host path (download, candle's to_dtype, another copy) made Real-CUGAN's 1080p
            // output a 0.2 s wait.
            let c = if r.dtype() == T::DTYPE { r.contiguous()? } else { r.to_dtype(T::DTYPE)? };
            return c.array.to_vec::<T>().map_err(Error::from);
        }
        Ok(self.to_candle()?.flatten_all()?.to_dtype(T::DTYPE)?.to_vec1::<T>()?)
    }

    /// The same data on `device`: the same storage under `device`'s handle (no copy) when
    /// `device` equals its own handle (as handles that differ only in their convolution
    /// rounding do) or both are CPU handles of different engines, else a copy.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let (device, _) = Device::auto();
    /// let x = Tensor::ones(&[4], DType::F32, &Device::cpu())?.to_device(&device)?;
    /// assert_eq!(x.device(), &device);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn to_device(&self, device: &Device) -> Result<Tensor> {
        if self.device == *device {
            // The same storage under `device`'s handle: its convolution rounding (devices
            // that differ only in it compare equal) governs what is computed from it.
            return Ok(Tensor { s: self.s.clone(), device: device.clone() });
        }
        if let (Storage::Cpu(t), true) = (&self.s, device.is_cpu()) {
            return Ok(Tensor { s: Storage::Cpu(t.clone()), device: device.clone() });
        }
        Tensor::from_candle(self.to_candle()?, device)
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
            (Storage::Cpu(a), Storage::Cpu(b)) => self.wrap_cpu(cpu::matmul(a, b)?),
            (Storage::Rocm(a), Storage::Rocm(b)) => self.wrap_rocm(a.matmul(b)?),
            _ => unreachable!("same_device checked"),
        }
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
