//! Device memory buffers, returned to the device's cache when dropped.

use crate::alloc::Block;
use crate::device::RocmDevice;
use crate::error::{Result, RocmError};
use crate::runtime::check;
use candle_core::DType;
use cubecl_hip_sys as hip;
use std::sync::Arc;

/// `hipMemcpyKind` values (the same in every HIP version).
pub(crate) const HOST_TO_DEVICE: hip::hipMemcpyKind = 1;
pub(crate) const DEVICE_TO_HOST: hip::hipMemcpyKind = 2;
const DEVICE_TO_DEVICE: hip::hipMemcpyKind = 3;

/// Raw device memory of `bytes` bytes.
pub struct DeviceBuffer {
    block: Option<Block>,
    bytes: usize,
    device: Arc<RocmDevice>,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({} bytes on {:?})", self.bytes, self.device)
    }
}

impl DeviceBuffer {
    /// Uninitialised memory from the device's caching allocator.
    pub fn alloc(device: &Arc<RocmDevice>, bytes: usize) -> Result<DeviceBuffer> {
        device.activate()?;
        let block = device.allocator().alloc(bytes, device.stream())?;
        Ok(DeviceBuffer { block: Some(block), bytes, device: device.clone() })
    }

    /// Zero-filled memory.
    pub fn zeroed(device: &Arc<RocmDevice>, bytes: usize) -> Result<DeviceBuffer> {
        let b = Self::alloc(device, bytes)?;
        if bytes > 0 {
            unsafe {
                check(
                    "hipMemsetD8Async",
                    hip::hipMemsetD8Async(b.ptr() as hip::hipDeviceptr_t, 0, bytes, device.stream().raw()),
                )?
            };
        }
        Ok(b)
    }

    /// A buffer holding `data`.
    pub fn from_host(device: &Arc<RocmDevice>, data: &[u8]) -> Result<DeviceBuffer> {
        let b = Self::alloc(device, data.len())?;
        b.write(0, data)?;
        Ok(b)
    }

    pub fn device(&self) -> &Arc<RocmDevice> {
        &self.device
    }

    /// Device address of the first byte.
    pub fn ptr(&self) -> usize {
        self.block.as_ref().map_or(0, |b| b.ptr)
    }

    pub fn len_bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn range_check(&self, op: &'static str, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.bytes) {
            return Err(RocmError::op(
                op,
                format!("bytes {offset}..{} outside a {}-byte buffer", offset + len, self.bytes),
            ));
        }
        Ok(())
    }

    /// Copies `data` to byte `offset`; returns when the copy is done (the host slice is
    /// free to change afterwards).
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.range_check("write", offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        self.device.activate()?;
        let s = self.device.stream();
        unsafe {
            check(
                "hipMemcpyAsync(HostToDevice)",
                hip::hipMemcpyAsync(
                    (self.ptr() + offset) as *mut _,
                    data.as_ptr() as *const _,
                    data.len(),
                    HOST_TO_DEVICE,
                    s.raw(),
                ),
            )?
        };
        s.synchronize()
    }

    /// Copies `out.len()` bytes from byte `offset` into `out`, after all queued work.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.range_check("read", offset, out.len())?;
        if out.is_empty() {
            return Ok(());
        }
        self.device.activate()?;
        let s = self.device.stream();
        unsafe {
            check(
                "hipMemcpyAsync(DeviceToHost)",
                hip::hipMemcpyAsync(
                    out.as_mut_ptr() as *mut _,
                    (self.ptr() + offset) as *const _,
                    out.len(),
                    DEVICE_TO_HOST,
                    s.raw(),
                ),
            )?
        };
        s.synchronize()
    }

    /// Queues a copy of `len` bytes from `src` at `src_offset` to `self` at `offset`.
    pub fn copy_from(&self, offset: usize, src: &DeviceBuffer, src_offset: usize, len: usize) -> Result<()> {
        self.range_check("copy_from (destination)", offset, len)?;
        src.range_check("copy_from (source)", src_offset, len)?;
        if !Arc::ptr_eq(&self.device, &src.device) {
            return Err(RocmError::op(
                "copy_from",
                "device-to-device copies between different GPUs go through the host",
            ));
        }
        if len == 0 {
            return Ok(());
        }
        self.device.activate()?;
        unsafe {
            check(
                "hipMemcpyAsync(DeviceToDevice)",
                hip::hipMemcpyAsync(
                    (self.ptr() + offset) as *mut _,
                    (src.ptr() + src_offset) as *const _,
                    len,
                    DEVICE_TO_DEVICE,
                    self.device.stream().raw(),
                ),
            )
        }
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Some(b) = self.block.take() {
            self.device.allocator().free(b);
        }
    }
}

/// The element types device buffers hold.
pub fn dtype_size(dtype: DType) -> usize {
    dtype.size_in_bytes()
}

/// A typed device array: `len` elements of `dtype` in a shared buffer.
#[derive(Clone, Debug)]
pub struct DeviceArray {
    pub buffer: Arc<DeviceBuffer>,
    pub dtype: DType,
    pub len: usize,
}

impl DeviceArray {
    pub fn alloc(device: &Arc<RocmDevice>, dtype: DType, len: usize) -> Result<DeviceArray> {
        check_dtype(dtype)?;
        Ok(DeviceArray { buffer: Arc::new(DeviceBuffer::alloc(device, len * dtype.size_in_bytes())?), dtype, len })
    }

    pub fn zeros(device: &Arc<RocmDevice>, dtype: DType, len: usize) -> Result<DeviceArray> {
        check_dtype(dtype)?;
        Ok(DeviceArray { buffer: Arc::new(DeviceBuffer::zeroed(device, len * dtype.size_in_bytes())?), dtype, len })
    }

    /// Uploads `data`.
    pub fn from_slice<T: candle_core::WithDType>(device: &Arc<RocmDevice>, data: &[T]) -> Result<DeviceArray> {
        check_dtype(T::DTYPE)?;
        // SAFETY: plain-old-data element types; reinterpreting as bytes is sound.
        let bytes = unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) };
        Ok(DeviceArray { buffer: Arc::new(DeviceBuffer::from_host(device, bytes)?), dtype: T::DTYPE, len: data.len() })
    }

    /// Downloads every element.
    pub fn to_vec<T: candle_core::WithDType>(&self) -> Result<Vec<T>> {
        if T::DTYPE != self.dtype {
            return Err(RocmError::op("to_vec", format!("array holds {:?}, asked for {:?}", self.dtype, T::DTYPE)));
        }
        let mut out: Vec<T> = Vec::with_capacity(self.len);
        // SAFETY: the read fills all len elements before set_len; T is plain old data.
        unsafe {
            let bytes =
                std::slice::from_raw_parts_mut(out.as_mut_ptr() as *mut u8, self.len * self.dtype.size_in_bytes());
            self.buffer.read(0, bytes)?;
            out.set_len(self.len);
        }
        Ok(out)
    }

    /// Downloads every element into `dst` (exactly `len` long): no fresh host allocation,
    /// whose page faults can cost more than the copy.
    pub fn read_into<T: candle_core::WithDType>(&self, dst: &mut [T]) -> Result<()> {
        if T::DTYPE != self.dtype || dst.len() != self.len {
            return Err(RocmError::op(
                "read_into",
                format!("{} {:?} elements into a buffer of {} {:?}", self.len, self.dtype, dst.len(), T::DTYPE),
            ));
        }
        // SAFETY: plain-old-data element types; the bytes of dst are overwritten whole.
        let bytes = unsafe { std::slice::from_raw_parts_mut(dst.as_mut_ptr() as *mut u8, std::mem::size_of_val(dst)) };
        self.buffer.read(0, bytes)
    }

    pub fn device(&self) -> &Arc<RocmDevice> {
        self.buffer.device()
    }

    /// Device address of element `i`.
    pub fn ptr_at(&self, i: usize) -> usize {
        self.buffer.ptr() + i * self.dtype.size_in_bytes()
    }
}

/// The dtypes device arrays support: f32, f16, bf16, f64, u8, u32, i64.
pub fn check_dtype(dtype: DType) -> Result<()> {
    match dtype {
        DType::F32 | DType::F16 | DType::BF16 | DType::F64 | DType::U8 | DType::U32 | DType::I64 => Ok(()),
        other => Err(RocmError::op("alloc", format!("dtype {other:?} is not supported on ROCm"))),
    }
}
