//! [`HostTensor`]: a tensor kept in host memory for a device, whose slices along one
//! dimension are copied to and from the device: for feature maps too large for the device,
//! kept on the host and streamed band by band (the banded VAE decode's host maps).
//!
//! On ROCm the memory is page-locked and every copy is queued on the device's stream
//! without the host waiting: one copy per contiguous run of the slice (a band of an NCHW
//! map is one run per channel), at the bus's rate and with no staging copy on the host.
//! The pageable path it replaces (`narrow` + `contiguous` on a CPU tensor, then an upload
//! through the driver's staging buffer, and the reverse for every band written) cost two
//! host copies and fresh page faults per band. On the CPU it is plain memory and the same
//! slicing, so that the arithmetic is tested where CI runs.

use super::{Storage, Tensor};
use crate::device::Device;
use crate::error::{Error, Result};
use crate::rocm::RocmTensor;
use candle_core::DType;
use rocm_backend::{DeviceArray, PinnedHostBuffer, RocmDevice};
use std::sync::{Arc, Mutex};

/// A contiguous (row-major) tensor in host memory, tied to the device its slices go to.
/// Clones share the memory.
#[derive(Clone)]
pub struct HostTensor {
    memory: Arc<Mutex<Memory>>,
    dims: Vec<usize>,
    dtype: DType,
    device: Device,
}

impl std::fmt::Debug for HostTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostTensor({:?} {:?} for {:?})", self.dims, self.dtype, self.device)
    }
}

enum Memory {
    Pinned(Pinned),
    Heap(Vec<u8>),
}

/// Page-locked memory and the device whose stream copies to and from it. The host never
/// makes a slice of it while copies may be queued: [`HostTensor::to_tensor`] waits for the
/// stream first, and dropping it waits too (a queued copy must not outlive its pages).
struct Pinned {
    buffer: PinnedHostBuffer,
    device: Arc<RocmDevice>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        // A failure here is the device's, and the next call on it reports it.
        let _ = self.device.synchronize();
    }
}

/// Where a slice along `dim` lies: `outer` runs of `run` bytes, run `o` at byte
/// `o * stride + first` of the tensor.
struct Runs {
    outer: usize,
    run: usize,
    stride: usize,
    first: usize,
}

impl HostTensor {
    /// Zeros of `shape` in `dtype` (f32, f16 or bf16), for `device`: page-locked on a GPU.
    pub fn zeros(shape: &[usize], dtype: DType, device: &Device) -> Result<HostTensor> {
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(Error::op("host_tensor", format!("dtype {dtype:?}: f32, f16 or bf16 only")));
        }
        let bytes = shape
            .iter()
            .try_fold(dtype.size_in_bytes(), |n, &d| n.checked_mul(d))
            .ok_or_else(|| Error::op("host_tensor", format!("shape {shape:?} overflows the address space")))?;
        let memory = match device.rocm_device() {
            Some(d) => Memory::Pinned(Pinned { buffer: PinnedHostBuffer::new(d, bytes)?, device: d.clone() }),
            None => Memory::Heap(vec![0; bytes]),
        };
        Ok(HostTensor { memory: Arc::new(Mutex::new(memory)), dims: shape.to_vec(), dtype, device: device.clone() })
    }

    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The device its slices are copied to.
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn runs(&self, op: &'static str, dim: usize, start: usize, len: usize) -> Result<Runs> {
        let Some(&size) = self.dims.get(dim) else {
            return Err(Error::op(op, format!("dimension {dim} of a {}-dimensional tensor", self.dims.len())));
        };
        if start.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::op(
                op,
                format!("{start}..{} of dimension {dim} (size {size}) of {:?}", start + len, self.dims),
            ));
        }
        let inner = self.dims[dim + 1..].iter().product::<usize>() * self.dtype.size_in_bytes();
        Ok(Runs {
            outer: self.dims[..dim].iter().product(),
            run: len * inner,
            stride: size * inner,
            first: start * inner,
        })
    }

    fn shape_with(&self, dim: usize, len: usize) -> Vec<usize> {
        let mut shape = self.dims.clone();
        shape[dim] = len;
        shape
    }

    fn memory(&self) -> Result<std::sync::MutexGuard<'_, Memory>> {
        self.memory.lock().map_err(|_| Error::op("host_tensor", "a thread panicked while copying this tensor"))
    }

    /// `narrow(dim, start, len)` of it, contiguous, on [`HostTensor::device`]. On a GPU the
    /// copies are queued; the tensor's later use on the device is ordered after them.
    pub fn narrow_to_device(&self, dim: usize, start: usize, len: usize) -> Result<Tensor> {
        let runs = self.runs("narrow_to_device", dim, start, len)?;
        let shape = self.shape_with(dim, len);
        let n = shape.iter().product::<usize>();
        let s = match &*self.memory()? {
            Memory::Pinned(p) => {
                let array = DeviceArray::alloc(&p.device, self.dtype, n)?;
                for o in 0..runs.outer {
                    // SAFETY: the host never writes these pages (only queued downloads do,
                    // ordered on the same stream), and `Pinned` waits for the stream before
                    // they are freed.
                    unsafe {
                        p.buffer.upload_async(o * runs.stride + runs.first, &array.buffer, o * runs.run, runs.run)?;
                    }
                }
                Storage::Rocm(RocmTensor::contiguous_new(array, &shape))
            }
            Memory::Heap(bytes) => {
                let mut band = Vec::with_capacity(runs.outer * runs.run);
                for o in 0..runs.outer {
                    let at = o * runs.stride + runs.first;
                    band.extend_from_slice(&bytes[at..at + runs.run]);
                }
                let t = candle_core::Tensor::from_raw_buffer(&band, self.dtype, &shape, &candle_core::Device::Cpu)?;
                Storage::Cpu(t)
            }
        };
        Ok(Tensor { s, device: self.device.clone() })
    }

    /// Writes `src` (on [`HostTensor::device`], of this dtype and of this shape but `len`
    /// along `dim`) into `start..start + len` of dimension `dim`. On a GPU the copies are
    /// queued and the host does not wait.
    pub fn write_narrow(&self, dim: usize, start: usize, src: &Tensor) -> Result<()> {
        let len = src.dims().get(dim).copied().unwrap_or(0);
        let runs = self.runs("write_narrow", dim, start, len)?;
        if src.dims() != self.shape_with(dim, len).as_slice() || src.dtype() != self.dtype {
            return Err(Error::op(
                "write_narrow",
                format!(
                    "a {:?} {:?} tensor into {start}.. of dimension {dim} of a {:?} {:?} one",
                    src.dims(),
                    src.dtype(),
                    self.dims,
                    self.dtype
                ),
            ));
        }
        if src.device() != &self.device {
            return Err(Error::device_mismatch("write_narrow", &self.device, src.device()));
        }
        match (&mut *self.memory()?, &src.s) {
            (Memory::Pinned(p), Storage::Rocm(r)) => {
                let c = r.contiguous()?;
                for o in 0..runs.outer {
                    // SAFETY: no slice of the pages exists while copies may be queued
                    // (`to_tensor` waits for the stream before making one).
                    unsafe {
                        p.buffer.download_async(
                            o * runs.stride + runs.first,
                            &c.array.buffer,
                            o * runs.run,
                            runs.run,
                        )?;
                    }
                }
            }
            (Memory::Heap(bytes), Storage::Cpu(t)) => {
                let band = cpu_bytes(t)?;
                for o in 0..runs.outer {
                    let at = o * runs.stride + runs.first;
                    bytes[at..at + runs.run].copy_from_slice(&band[o * runs.run..(o + 1) * runs.run]);
                }
            }
            _ => return Err(Error::op("write_narrow", "host memory and tensor of different kinds of device")),
        }
        Ok(())
    }

    /// The whole tensor on `device` (after every queued copy into it).
    pub fn to_tensor(&self, device: &Device) -> Result<Tensor> {
        let t = match &*self.memory()? {
            Memory::Pinned(p) => {
                p.device.synchronize()?;
                let bytes = p.buffer.as_slice();
                candle_core::Tensor::from_raw_buffer(bytes, self.dtype, &self.dims, &candle_core::Device::Cpu)?
            }
            Memory::Heap(bytes) => {
                candle_core::Tensor::from_raw_buffer(bytes, self.dtype, &self.dims, &candle_core::Device::Cpu)?
            }
        };
        Tensor::from_candle(t, device)
    }
}

/// The bytes of a CPU tensor, row-major.
fn cpu_bytes(t: &candle_core::Tensor) -> Result<Vec<u8>> {
    let flat = t.flatten_all()?;
    Ok(match t.dtype() {
        DType::F32 => bytemuck::cast_slice(&flat.to_vec1::<f32>()?).to_vec(),
        DType::F16 => bytemuck::cast_slice(&flat.to_vec1::<half::f16>()?).to_vec(),
        DType::BF16 => bytemuck::cast_slice(&flat.to_vec1::<half::bf16>()?).to_vec(),
        other => return Err(Error::op("host_tensor", format!("dtype {other:?}: f32, f16 or bf16 only"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(shape: &[usize], dtype: DType) -> Tensor {
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n).map(|i| (i % 251) as f32 - 125.0).collect();
        Tensor::from_vec(v, shape, &Device::cpu()).unwrap().to_dtype(dtype).unwrap()
    }

    #[test]
    fn bands_written_and_read_back_are_the_tensors_own_rows() {
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let full = ramp(&[1, 3, 10, 7], dtype);
            let host = HostTensor::zeros(&[1, 3, 10, 7], dtype, &Device::cpu()).unwrap();
            // Bands of uneven heights, written out of order.
            for (r0, r1) in [(4, 9), (0, 4), (9, 10)] {
                host.write_narrow(2, r0, &full.narrow(2, r0, r1 - r0).unwrap()).unwrap();
            }
            let whole = host.to_tensor(&Device::cpu()).unwrap();
            assert_eq!(whole.to_vec::<f32>().unwrap(), full.to_vec::<f32>().unwrap(), "{dtype:?}");
            for (r0, len) in [(0, 10), (3, 4), (9, 1), (5, 0)] {
                let band = host.narrow_to_device(2, r0, len).unwrap();
                assert_eq!(band.dims(), &[1, 3, len, 7]);
                let want = full.narrow(2, r0, len).unwrap().contiguous().unwrap();
                assert_eq!(band.to_vec::<f32>().unwrap(), want.to_vec::<f32>().unwrap(), "{dtype:?} rows {r0}+{len}");
            }
            // Along the channels too: one run for the whole slice.
            let c = host.narrow_to_device(1, 1, 2).unwrap();
            assert_eq!(c.to_vec::<f32>().unwrap(), full.narrow(1, 1, 2).unwrap().to_vec::<f32>().unwrap());
        }
    }

    #[test]
    fn bad_slices_and_tensors_are_errors() {
        let host = HostTensor::zeros(&[1, 2, 4, 4], DType::F32, &Device::cpu()).unwrap();
        let msg = |r: Result<Tensor>| r.unwrap_err().to_string();
        assert!(msg(host.narrow_to_device(2, 3, 2)).contains("3..5 of dimension 2"));
        assert!(msg(host.narrow_to_device(4, 0, 1)).contains("dimension 4"));
        let wrong_width = ramp(&[1, 2, 1, 3], DType::F32);
        let e = host.write_narrow(2, 0, &wrong_width).unwrap_err().to_string();
        assert!(e.contains("[1, 2, 1, 3]"), "{e}");
        let wrong_dtype = ramp(&[1, 2, 1, 4], DType::F16);
        assert!(host.write_narrow(2, 0, &wrong_dtype).unwrap_err().to_string().contains("F16"));
        let past_end = ramp(&[1, 2, 2, 4], DType::F32);
        assert!(host.write_narrow(2, 3, &past_end).unwrap_err().to_string().contains("3..5"));
        assert!(HostTensor::zeros(&[2], DType::U8, &Device::cpu()).is_err());
    }
}
