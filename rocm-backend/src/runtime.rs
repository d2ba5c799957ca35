//! Loading the HIP runtime and hiprtc at run time.
//!
//! `cubecl-hip-sys` resolves HIP symbols lazily and panics when a library or symbol is
//! missing, so nothing calls into it before [`runtime`] has confirmed that both
//! libraries load and export every symbol this backend uses (FFI.md). A machine without
//! ROCm gets a clear error instead of a panic.

use crate::error::{HipCode, Result, RocmError};
use cubecl_hip_sys as hip;
use std::ffi::CStr;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Every HIP runtime symbol the backend calls (rocm-backend/FFI.md).
pub const HIP_SYMBOLS: &[&str] = &[
    "hipInit",
    "hipGetDeviceCount",
    "hipSetDevice",
    "hipGetDevice",
    "hipGetDevicePropertiesR0600",
    "hipDeviceGetAttribute",
    "hipMemGetInfo",
    "hipRuntimeGetVersion",
    "hipDriverGetVersion",
    "hipMalloc",
    "hipFree",
    "hipHostMalloc",
    "hipHostFree",
    "hipMemcpyAsync",
    "hipMemsetD8Async",
    "hipStreamCreateWithFlags",
    "hipStreamDestroy",
    "hipStreamSynchronize",
    "hipEventCreateWithFlags",
    "hipEventRecord",
    "hipEventQuery",
    "hipEventSynchronize",
    "hipEventElapsedTime",
    "hipEventDestroy",
    "hipModuleLoadData",
    "hipModuleUnload",
    "hipModuleGetFunction",
    "hipModuleLaunchKernel",
    "hipGetErrorName",
    "hipGetErrorString",
    "hipGetLastError",
];

/// Every hiprtc symbol the backend calls.
pub const HIPRTC_SYMBOLS: &[&str] = &[
    "hiprtcVersion",
    "hiprtcCreateProgram",
    "hiprtcCompileProgram",
    "hiprtcGetProgramLogSize",
    "hiprtcGetProgramLog",
    "hiprtcGetCodeSize",
    "hiprtcGetCode",
    "hiprtcDestroyProgram",
    "hiprtcGetErrorString",
];

/// The loaded HIP runtime.
#[derive(Debug)]
pub struct HipRuntime {
    /// `hipRuntimeGetVersion`, e.g. 60443484.
    pub runtime_version: i32,
    /// `hiprtcVersion` as (major, minor).
    pub hiprtc_version: (i32, i32),
    /// Where libamdhip64 was found.
    pub library: String,
    /// Devices `hipGetDeviceCount` reports (0 when it returns hipErrorNoDevice).
    pub device_count: usize,
    /// Why there are no devices, when there are none.
    pub no_device_reason: Option<String>,
}

/// Directories searched before the system loader path, in cubecl-hip-sys's order.
fn search_dirs() -> Vec<PathBuf> {
    ["ROCM_PATH", "HIP_PATH"]
        .into_iter()
        .filter_map(std::env::var_os)
        .flat_map(|p| {
            let p = PathBuf::from(p);
            [p.join("lib"), p]
        })
        .collect()
}

/// Opens the library cubecl-hip-sys will open (same names, same order) and checks that
/// it exports `symbols`. Returns the path or name that loaded.
fn probe(name: &str, symbols: &[&str]) -> std::result::Result<String, String> {
    let names = [format!("lib{name}.so"), format!("lib{name}.so.1"), format!("lib{name}.so.0")];
    let mut candidates: Vec<String> = Vec::new();
    for dir in search_dirs() {
        for n in &names {
            candidates.push(dir.join(n).display().to_string());
        }
    }
    candidates.extend(names.iter().cloned());
    let mut tried = Vec::new();
    for c in &candidates {
        // SAFETY: loading a shared library runs its initialisers; these are the ROCm
        // libraries the backend is about to use anyway.
        match unsafe { libloading::Library::new(c) } {
            Ok(lib) => {
                for s in symbols {
                    // SAFETY: only the symbol's presence is checked; it is not called.
                    if unsafe { lib.get::<*const ()>(s.as_bytes()) }.is_err() {
                        return Err(format!("{c} does not export {s} (a ROCm older than 6.0?)"));
                    }
                }
                return Ok(c.clone());
            }
            Err(e) => tried.push(format!("{c}: {e}")),
        }
    }
    Err(format!(
        "could not load lib{name}.so. Install ROCm 6.x, or set ROCM_PATH to its installation directory. Tried:\n  {}",
        tried.join("\n  ")
    ))
}

/// The HIP runtime, loaded and initialised once per process.
pub fn runtime() -> Result<&'static HipRuntime> {
    static RUNTIME: OnceLock<std::result::Result<HipRuntime, String>> = OnceLock::new();
    RUNTIME.get_or_init(load).as_ref().map_err(|e| RocmError::RuntimeNotFound(e.clone()))
}

fn load() -> std::result::Result<HipRuntime, String> {
    let library = probe("amdhip64", HIP_SYMBOLS)?;
    probe("hiprtc", HIPRTC_SYMBOLS)?;
    if !hip::is_available() {
        return Err("cubecl-hip-sys could not load libamdhip64/libhiprtc although they were found".into());
    }
    let mut runtime_version = 0;
    let mut major = 0;
    let mut minor = 0;
    // SAFETY: both libraries and these symbols were verified above.
    unsafe {
        hip::hipRuntimeGetVersion(&mut runtime_version);
        hip::hiprtcVersion(&mut major, &mut minor);
    }
    let init = unsafe { hip::hipInit(0) };
    let mut count = 0;
    let (device_count, no_device_reason) = if init != hip::hipError_t_hipSuccess {
        (0, Some(format!("hipInit: {}", code(init))))
    } else {
        let rc = unsafe { hip::hipGetDeviceCount(&mut count) };
        if rc != hip::hipError_t_hipSuccess {
            (0, Some(format!("hipGetDeviceCount: {}", code(rc))))
        } else if count == 0 {
            (0, Some("hipGetDeviceCount reports 0 devices".into()))
        } else {
            (count as usize, None)
        }
    };
    Ok(HipRuntime { runtime_version, hiprtc_version: (major, minor), library, device_count, no_device_reason })
}

/// Name and message of a HIP error code. Only call once the runtime is loaded.
pub(crate) fn code(rc: hip::hipError_t) -> HipCode {
    // SAFETY: the runtime is loaded (callers hold a `HipRuntime`); the strings are static.
    let (name, message) = unsafe {
        let n = hip::hipGetErrorName(rc);
        let m = hip::hipGetErrorString(rc);
        let s = |p: *const std::os::raw::c_char| {
            if p.is_null() { String::new() } else { CStr::from_ptr(p).to_string_lossy().into_owned() }
        };
        (s(n), s(m))
    };
    HipCode { code: rc, name, message }
}

/// `Ok` for hipSuccess, else the error naming the call.
pub(crate) fn check(call: &'static str, rc: hip::hipError_t) -> Result<()> {
    if rc == hip::hipError_t_hipSuccess { Ok(()) } else { Err(RocmError::Hip { call, code: code(rc) }) }
}

/// `gfx1100:sramecc+:xnack-` → `gfx1100`: hiprtc's `--offload-arch` and our cache keys
/// take the processor name without feature flags.
pub fn strip_features(arch: &str) -> &str {
    arch.split(':').next().unwrap_or(arch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_suffixes_are_stripped() {
        assert_eq!(strip_features("gfx90a:sramecc+:xnack-"), "gfx90a");
        assert_eq!(strip_features("gfx1100"), "gfx1100");
        assert_eq!(strip_features("sm_90"), "sm_90");
    }
}
