//! The ROCm device: properties, its stream, and the handles that hang off it.

use crate::alloc::Allocator;
use crate::error::{Result, RocmError};
use crate::jit::Jit;
use crate::runtime::{check, runtime, strip_features};
use crate::stream::Stream;
use cubecl_hip_sys as hip;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// GPU architecture families; the kernels' tile configurations are chosen per family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArchFamily {
    /// gfx103x, wave32, no matrix cores.
    Rdna2,
    /// gfx110x / gfx115x, WMMA (wave32).
    Rdna3,
    /// gfx120x, WMMA with a different fragment layout.
    Rdna4,
    /// gfx90a / gfx94x / gfx95x, MFMA, wave64.
    Cdna,
    /// An NVIDIA GPU behind the HIP-on-CUDA test library (GPU tier only).
    NvidiaTestTier,
    /// Any other target: the generic FMA kernels.
    Other,
}

impl ArchFamily {
    pub fn from_arch(arch: &str) -> Self {
        let a = strip_features(arch);
        if a.starts_with("sm_") {
            ArchFamily::NvidiaTestTier
        } else if a.starts_with("gfx103") {
            ArchFamily::Rdna2
        } else if a.starts_with("gfx110") || a.starts_with("gfx115") {
            ArchFamily::Rdna3
        } else if a.starts_with("gfx120") {
            ArchFamily::Rdna4
        } else if a.starts_with("gfx90a") || a.starts_with("gfx94") || a.starts_with("gfx95") {
            ArchFamily::Cdna
        } else {
            ArchFamily::Other
        }
    }
}

/// What the device reports about itself.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub ordinal: usize,
    pub name: String,
    /// `gcnArchName` as reported, feature flags included (`gfx90a:sramecc+:xnack-`).
    pub arch_full: String,
    /// The processor name alone (`gfx90a`): what hiprtc and the kernel cache use.
    pub arch: String,
    pub family: ArchFamily,
    pub compute_units: usize,
    pub lds_per_block: usize,
    pub warp_size: usize,
    pub total_memory: usize,
}

/// One GPU: its stream, allocator and kernel JIT. Shared (`Arc`) by every buffer on it.
pub struct RocmDevice {
    info: DeviceInfo,
    stream: Stream,
    allocator: Allocator,
    jit: Jit,
    blas: OnceLock<std::result::Result<crate::blas::Blas, String>>,
    #[cfg(feature = "miopen")]
    miopen: OnceLock<std::result::Result<crate::miopen::Miopen, String>>,
}

// SAFETY: the raw HIP handles inside (stream, modules) may be used from any thread; every
// call first makes this device current on the calling thread (`activate`).
unsafe impl Send for RocmDevice {}
unsafe impl Sync for RocmDevice {}

impl std::fmt::Debug for RocmDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RocmDevice({} {} {})", self.info.ordinal, self.info.arch, self.info.name)
    }
}

fn c_string(buf: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = buf.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

impl RocmDevice {
    /// The device with this ordinal, opened once per process and shared.
    pub fn open(ordinal: usize) -> Result<Arc<RocmDevice>> {
        static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<RocmDevice>>>> = OnceLock::new();
        let rt = runtime()?;
        if ordinal >= rt.device_count {
            let reason = match &rt.no_device_reason {
                Some(r) => r.clone(),
                None => format!("only {} device(s) present", rt.device_count),
            };
            return Err(RocmError::NoDevice { ordinal: Some(ordinal), reason });
        }
        let mut map = DEVICES.get_or_init(Default::default).lock().expect("device table poisoned");
        if let Some(d) = map.get(&ordinal) {
            return Ok(d.clone());
        }
        let d = Arc::new(Self::create(ordinal)?);
        map.insert(ordinal, d.clone());
        Ok(d)
    }

    /// Number of ROCm devices (0 when the runtime is present but no GPU is).
    pub fn count() -> Result<usize> {
        Ok(runtime()?.device_count)
    }

    fn create(ordinal: usize) -> Result<RocmDevice> {
        let dev = ordinal as i32;
        // SAFETY: the runtime is loaded and the ordinal valid.
        unsafe { check("hipSetDevice", hip::hipSetDevice(dev))? };
        // The struct is read through a larger, zeroed buffer so that a runtime whose
        // R0600 layout grew at the end cannot write past our allocation.
        let mut raw = vec![0u8; std::mem::size_of::<hip::hipDeviceProp_tR0600>() + 4096];
        let props = raw.as_mut_ptr() as *mut hip::hipDeviceProp_tR0600;
        // HIP 6 and 7 both fill the R0600 layout through this symbol (runtime::HipAbi); the
        // unsuffixed hipGetDeviceProperties would be R0000 on HIP 6, gcnArchName 764 bytes earlier.
        let symbol = runtime()?.abi.device_properties_symbol();
        unsafe { check(symbol, hip::hipGetDevicePropertiesR0600(props, dev))? };
        let props = unsafe { &*props };
        let attr = |a: hip::hipDeviceAttribute_t, call: &'static str| -> Result<usize> {
            let mut v = 0;
            unsafe { check(call, hip::hipDeviceGetAttribute(&mut v, a, dev))? };
            Ok(v as usize)
        };
        let arch_full = c_string(&props.gcnArchName);
        let arch = strip_features(&arch_full).to_string();
        let info = DeviceInfo {
            ordinal,
            name: c_string(&props.name),
            family: ArchFamily::from_arch(&arch),
            arch_full,
            arch: arch.clone(),
            compute_units: attr(
                hip::hipDeviceAttribute_t_hipDeviceAttributeMultiprocessorCount,
                "hipDeviceGetAttribute(multiprocessors)",
            )?,
            lds_per_block: attr(
                hip::hipDeviceAttribute_t_hipDeviceAttributeMaxSharedMemoryPerBlock,
                "hipDeviceGetAttribute(shared memory)",
            )?,
            warp_size: attr(hip::hipDeviceAttribute_t_hipDeviceAttributeWarpSize, "hipDeviceGetAttribute(warp size)")?,
            total_memory: props.totalGlobalMem,
        };
        let stream = Stream::new()?;
        let allocator = Allocator::new(ordinal);
        let jit = Jit::new(&arch)?;
        tracing::info!(target: "rocm_backend", ordinal, name = %info.name, arch = %info.arch_full, family = ?info.family, compute_units = info.compute_units, warp_size = info.warp_size, total_memory = info.total_memory, "opened ROCm device");
        Ok(RocmDevice {
            info,
            stream,
            allocator,
            jit,
            blas: OnceLock::new(),
            #[cfg(feature = "miopen")]
            miopen: OnceLock::new(),
        })
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    pub fn ordinal(&self) -> usize {
        self.info.ordinal
    }

    /// Makes this device current on the calling thread (HIP's current device is
    /// per thread). Every buffer operation and launch calls this, so it asks first:
    /// `hipGetDevice` is a thread-local read, while `hipSetDevice` may go to the driver
    /// (through the HIP-on-CUDA test library it checked the CUDA context each time:
    /// 551 calls and 0.12 s of host time in two 1080p Real-CUGAN images on the H200).
    pub fn activate(&self) -> Result<()> {
        let want = self.info.ordinal as i32;
        let mut current = -1;
        // SAFETY: hipGetDevice writes one int.
        if unsafe { hip::hipGetDevice(&mut current) } == hip::hipError_t_hipSuccess && current == want {
            return Ok(());
        }
        unsafe { check("hipSetDevice", hip::hipSetDevice(want)) }
    }

    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    pub fn allocator(&self) -> &Allocator {
        &self.allocator
    }

    pub fn jit(&self) -> &Jit {
        &self.jit
    }

    /// The device's rocBLAS handle (bound to its stream), created on first use.
    pub fn blas(&self) -> Result<&crate::blas::Blas> {
        self.blas
            .get_or_init(|| crate::blas::Blas::new(self).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| RocmError::Rocblas(e.clone()))
    }

    /// The device's MIOpen handle (bound to its stream), created on first use.
    #[cfg(feature = "miopen")]
    pub fn miopen(&self) -> Result<&crate::miopen::Miopen> {
        self.miopen
            .get_or_init(|| crate::miopen::Miopen::new(self).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| RocmError::op("miopen", e.clone()))
    }

    /// (free, total) device memory in bytes.
    pub fn memory_info(&self) -> Result<(usize, usize)> {
        self.activate()?;
        let (mut free, mut total) = (0usize, 0usize);
        unsafe { check("hipMemGetInfo", hip::hipMemGetInfo(&mut free, &mut total))? };
        Ok((free, total))
    }

    /// Waits for all work queued on the device's stream.
    pub fn synchronize(&self) -> Result<()> {
        self.activate()?;
        self.stream.synchronize()
    }
}
