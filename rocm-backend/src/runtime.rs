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
    "hipFuncSetAttribute",
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

/// A HIP runtime version as `hipRuntimeGetVersion` reports it: major·10⁷ + minor·10⁵ +
/// patch (60443484 is 6.4.43484, 70253211 is 7.2.53211).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HipVersion {
    pub major: i32,
    pub minor: i32,
    pub patch: i32,
}

impl HipVersion {
    pub fn from_raw(raw: i32) -> Self {
        HipVersion { major: raw / 10_000_000, minor: raw / 100_000 % 100, patch: raw % 100_000 }
    }

    pub fn raw(self) -> i32 {
        self.major * 10_000_000 + self.minor * 100_000 + self.patch
    }
}

impl std::fmt::Display for HipVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// The HIP runtime generations this build runs on, and what differs between them for it.
///
/// The binary is built once, against one set of HIP bindings (cubecl-hip-sys picks them
/// from `hipconfig --version` at build time), and loads whichever libamdhip64 the machine
/// has. For every symbol the backend calls, HIP 6.4's and 7.2's headers agree on the
/// signature, on the values of the enums and error codes it passes or tests, and on the
/// `hipDeviceProp_tR0600` layout (scripts/rocm-abi-check.sh compares them in both toolchain
/// chroots). What does differ is handled here: see each method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HipAbi {
    /// HIP 6.x (ROCm 6), with rocBLAS 4 (rocblas-sys picks the rocBLAS and MIOpen that go
    /// with the loaded runtime, and refuses one built for the other).
    Hip6,
    /// HIP 7.x (ROCm 7), with rocBLAS 5; `hipGetLastError` as CUDA's.
    Hip7,
}

/// The HIP minor versions the toolchain tier has run the backend against, per major.
pub const VERIFIED_HIP: &[(i32, i32)] = &[(6, 4), (7, 2)];

impl HipAbi {
    /// The generation of a runtime version, or why this build cannot use it: a clear
    /// error naming the version, never a guess at an unknown ABI (a HIP 5 runtime has
    /// only the R0000 `hipDeviceProp_t`, whose `gcnArchName` sits at byte 396, not 1160; a
    /// HIP 8 may change anything).
    pub fn for_version(version: HipVersion, library: &str) -> std::result::Result<HipAbi, String> {
        match version.major {
            6 => Ok(HipAbi::Hip6),
            7 => Ok(HipAbi::Hip7),
            _ => Err(format!(
                "the HIP runtime {library} reports version {version} (hipRuntimeGetVersion {}), which this \
                 build does not support: it runs on HIP 6.x and 7.x (verified: 6.4 and 7.2). Install \
                 ROCm 6.4 or 7.2, or set ROCM_PATH to such an installation.",
                version.raw()
            )),
        }
    }

    /// The device-properties entry point and its struct: `hipGetDevicePropertiesR0600`
    /// (HIP 6.0 added it and kept the unsuffixed `hipGetDeviceProperties` for the R0000
    /// layout of HIP 5 binaries). Both generations read the R0600 struct, with
    /// `gcnArchName` at byte [`HipAbi::GCN_ARCH_NAME_OFFSET`].
    pub fn device_properties_symbol(self) -> &'static str {
        "hipGetDevicePropertiesR0600"
    }

    /// Where `gcnArchName` lies in `hipDeviceProp_tR0600` (396 in the old R0000 layout).
    pub const GCN_ARCH_NAME_OFFSET: usize = 1160;

    /// Whether a failed call's error stays stored for the thread until `hipGetLastError`
    /// reads it, even past later successful calls (HIP 7, as CUDA). Under HIP 6 the
    /// stored value is the last call's. The backend checks every call's return code and
    /// never asks `hipGetLastError` who failed; but rocBLAS and MIOpen do after their own
    /// launches, so an error the backend has handled (a missing device, an allocation
    /// refused) must not stay stored for them to find: [`check`] clears it.
    pub fn last_error_persists(self) -> bool {
        matches!(self, HipAbi::Hip7)
    }
}

/// The loaded HIP runtime.
#[derive(Debug)]
pub struct HipRuntime {
    /// `hipRuntimeGetVersion`, e.g. 60443484.
    pub runtime_version: i32,
    /// The same, split.
    pub version: HipVersion,
    /// Its generation: what this build does differently for it.
    pub abi: HipAbi,
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
    // cubecl-hip-sys opens only these names. A runtime-only install has just the versioned
    // file (libamdhip64.so.6 / .so.7, no development link): say so rather than "not found".
    let versioned: Vec<String> = ["6", "7"]
        .iter()
        .map(|major| format!("lib{name}.so.{major}"))
        // SAFETY: as above.
        .filter(|n| unsafe { libloading::Library::new(n) }.is_ok())
        .collect();
    let hint = if versioned.is_empty() {
        String::new()
    } else {
        format!(
            " The system has {} but not lib{name}.so, the name the HIP bindings open: install the HIP \
             development package (libamdhip64-dev, or AMD's hip-runtime-amd), or make a directory with a \
             lib{name}.so link to it and set ROCM_PATH to it.",
            versioned.join(" and ")
        )
    };
    Err(format!(
        "could not load lib{name}.so. Install ROCm 6.4 or 7.2, or set ROCM_PATH to its installation directory.{hint} Tried:\n  {}",
        tried.join("\n  ")
    ))
}

static RUNTIME: OnceLock<std::result::Result<HipRuntime, String>> = OnceLock::new();

/// The HIP runtime, loaded and initialised once per process.
pub fn runtime() -> Result<&'static HipRuntime> {
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
    // SAFETY: both libraries and these symbols were verified above; these two calls take
    // plain ints in every HIP there is, so they are safe to make before the version is known.
    let rc = unsafe { hip::hipRuntimeGetVersion(&mut runtime_version) };
    if rc != hip::hipError_t_hipSuccess {
        return Err(format!("hipRuntimeGetVersion of {library} failed with code {rc}"));
    }
    unsafe { hip::hiprtcVersion(&mut major, &mut minor) };
    let version = HipVersion::from_raw(runtime_version);
    // Nothing else is called before the version is known to be one this build supports.
    let abi = HipAbi::for_version(version, &library)?;
    if !VERIFIED_HIP.contains(&(version.major, version.minor)) {
        tracing::warn!(target: "rocm_backend", %version, %library, "HIP runtime of a supported major version, but not one the toolchain tier has run (6.4, 7.2)");
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
    if no_device_reason.is_some() && abi.last_error_persists() {
        // Handled here (it becomes NoDevice): not left stored for rocBLAS/MIOpen to find.
        unsafe { hip::hipGetLastError() };
    }
    Ok(HipRuntime {
        runtime_version,
        version,
        abi,
        hiprtc_version: (major, minor),
        library,
        device_count,
        no_device_reason,
    })
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

/// `Ok` for hipSuccess, else the error naming the call. Under HIP 7 the failure is also
/// cleared from the thread's stored last error: it is returned here, and rocBLAS or MIOpen,
/// which read `hipGetLastError` after their own launches, must not take it for theirs
/// ([`HipAbi::last_error_persists`]).
pub(crate) fn check(call: &'static str, rc: hip::hipError_t) -> Result<()> {
    if rc == hip::hipError_t_hipSuccess {
        return Ok(());
    }
    let err = RocmError::Hip { call, code: code(rc) };
    if RUNTIME.get().and_then(|r| r.as_ref().ok()).is_some_and(|r| r.abi.last_error_persists()) {
        // SAFETY: the runtime is loaded; the call only reads and resets a thread-local.
        unsafe { hip::hipGetLastError() };
    }
    Err(err)
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
    fn runtime_versions_split_and_join() {
        for (raw, text) in
            [(60443484, "6.4.43484"), (70253211, "7.2.53211"), (71400000, "7.14.0"), (50731921, "5.7.31921")]
        {
            let v = HipVersion::from_raw(raw);
            assert_eq!(v.to_string(), text);
            assert_eq!(v.raw(), raw);
        }
    }

    #[test]
    fn hip_6_and_7_are_known_and_anything_else_is_an_error_naming_the_version() {
        let lib = "/opt/rocm/lib/libamdhip64.so";
        assert_eq!(HipAbi::for_version(HipVersion::from_raw(60443484), lib), Ok(HipAbi::Hip6));
        assert_eq!(HipAbi::for_version(HipVersion::from_raw(70253211), lib), Ok(HipAbi::Hip7));
        // A later 7.x keeps 7's ABI (AMD breaks it only at a major version).
        assert_eq!(HipAbi::for_version(HipVersion::from_raw(71400000), lib), Ok(HipAbi::Hip7));
        for (raw, text) in [(50731921, "5.7.31921"), (80000000, "8.0.0"), (100012345, "10.0.12345"), (0, "0.0.0")] {
            let msg = HipAbi::for_version(HipVersion::from_raw(raw), lib).unwrap_err();
            assert!(msg.contains(&format!("reports version {text} (hipRuntimeGetVersion {raw})")), "{msg}");
            assert!(msg.contains(lib) && msg.contains("does not support") && msg.contains("6.4 or 7.2"), "{msg}");
        }
    }

    #[test]
    fn the_r0600_layout_of_the_bindings_is_the_one_both_generations_read() {
        // The bindings' struct must put gcnArchName where HIP 6 and 7 write it.
        assert_eq!(std::mem::offset_of!(hip::hipDeviceProp_tR0600, gcnArchName), HipAbi::GCN_ARCH_NAME_OFFSET);
        for abi in [HipAbi::Hip6, HipAbi::Hip7] {
            assert!(HIP_SYMBOLS.contains(&abi.device_properties_symbol()));
        }
        assert!(!HipAbi::Hip6.last_error_persists() && HipAbi::Hip7.last_error_persists());
    }

    #[test]
    fn feature_suffixes_are_stripped() {
        assert_eq!(strip_features("gfx90a:sramecc+:xnack-"), "gfx90a");
        assert_eq!(strip_features("gfx1100"), "gfx1100");
        assert_eq!(strip_features("sm_90"), "sm_90");
    }
}
