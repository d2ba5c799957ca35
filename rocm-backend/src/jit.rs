//! The kernel JIT: the `kernels` crate's modules compiled by hiprtc for the device's
//! architecture, with an on-disk cache of code objects.
//!
//! The cache key is (source hash including the headers, compile options, hiprtc version,
//! HIP runtime version, architecture) — never a name alone, so a changed kernel or
//! toolchain can never load a stale code object. Entries are written atomically (temp
//! file + rename) and carry a checksum; a corrupt entry is detected, reported and rebuilt.

use crate::error::{Result, RocmError};
use crate::runtime::{check, runtime};
use cubecl_hip_sys as hip;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

const MAGIC: &[u8; 8] = b"RVKOBJ2\n";

/// The options every module is compiled with.
pub fn compile_options(arch: &str) -> Vec<String> {
    vec![format!("--offload-arch={arch}"), "-O3".to_string()]
}

/// Compiles `module` with hiprtc for `arch`; needs the runtime but no GPU. A compile
/// failure returns hiprtc's log.
pub fn compile(module: &kernels::Module, arch: &str) -> Result<Vec<u8>> {
    runtime()?;
    let src = CString::new(module.source).map_err(|_| RocmError::op("compile", "kernel source contains NUL"))?;
    let name = CString::new(module.file).expect("file names have no NUL");
    // The module's headers as in-memory files: hiprtc reads no include path.
    let header_texts = module
        .headers
        .iter()
        .map(|(_, text)| CString::new(*text))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|_| RocmError::op("compile", "a kernel header contains NUL"))?;
    let header_name_texts: Vec<CString> =
        module.headers.iter().map(|(name, _)| CString::new(*name).expect("header names have no NUL")).collect();
    let mut headers: Vec<*const std::os::raw::c_char> = header_texts.iter().map(|h| h.as_ptr()).collect();
    let mut header_names: Vec<*const std::os::raw::c_char> = header_name_texts.iter().map(|n| n.as_ptr()).collect();
    let mut prog: hip::hiprtcProgram = std::ptr::null_mut();
    let rtc = |what: &str, rc: hip::hiprtcResult| -> Result<()> {
        if rc == hip::hiprtcResult_HIPRTC_SUCCESS {
            return Ok(());
        }
        let msg = unsafe { CStr::from_ptr(hip::hiprtcGetErrorString(rc)) }.to_string_lossy().into_owned();
        Err(RocmError::Compile {
            module: module.name.into(),
            arch: arch.into(),
            status: format!("{what}: {msg}"),
            log: String::new(),
        })
    };
    unsafe {
        rtc(
            "hiprtcCreateProgram",
            hip::hiprtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                name.as_ptr(),
                headers.len() as i32,
                headers.as_mut_ptr(),
                header_names.as_mut_ptr(),
            ),
        )?
    };
    let opts: Vec<CString> = compile_options(arch).into_iter().map(|o| CString::new(o).expect("no NUL")).collect();
    let mut opt_ptrs: Vec<*const std::os::raw::c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let rc = unsafe { hip::hiprtcCompileProgram(prog, opt_ptrs.len() as i32, opt_ptrs.as_mut_ptr()) };
    let result = if rc != hip::hiprtcResult_HIPRTC_SUCCESS {
        let mut size = 0usize;
        let mut log = String::new();
        unsafe {
            if hip::hiprtcGetProgramLogSize(prog, &mut size) == hip::hiprtcResult_HIPRTC_SUCCESS && size > 0 {
                let mut buf = vec![0u8; size];
                hip::hiprtcGetProgramLog(prog, buf.as_mut_ptr() as *mut _);
                log = String::from_utf8_lossy(&buf).trim_end_matches('\0').to_string();
            }
        }
        let status = unsafe { CStr::from_ptr(hip::hiprtcGetErrorString(rc)) }.to_string_lossy().into_owned();
        Err(RocmError::Compile { module: module.name.into(), arch: arch.into(), status, log })
    } else {
        let mut size = 0usize;
        unsafe { rtc("hiprtcGetCodeSize", hip::hiprtcGetCodeSize(prog, &mut size))? };
        let mut code = vec![0u8; size];
        unsafe { rtc("hiprtcGetCode", hip::hiprtcGetCode(prog, code.as_mut_ptr() as *mut _))? };
        if code.is_empty() {
            Err(RocmError::Compile {
                module: module.name.into(),
                arch: arch.into(),
                status: "empty code object".into(),
                log: String::new(),
            })
        } else {
            Ok(code)
        }
    };
    unsafe { hip::hiprtcDestroyProgram(&mut prog) };
    result
}

/// The cache key of `module` compiled for `arch` with this runtime.
pub fn cache_key(module: &kernels::Module, arch: &str) -> Result<String> {
    let rt = runtime()?;
    let mut h = Sha256::new();
    for (name, text) in module.headers {
        h.update(name.as_bytes());
        h.update([0]);
        h.update(text.as_bytes());
        h.update([0]);
    }
    h.update(module.source.as_bytes());
    h.update([0]);
    for o in compile_options(arch) {
        h.update(o.as_bytes());
        h.update([0]);
    }
    h.update(
        format!("hiprtc {}.{}\0hip {}\0{arch}", rt.hiprtc_version.0, rt.hiprtc_version.1, rt.runtime_version)
            .as_bytes(),
    );
    let digest = h.finalize();
    Ok(digest.iter().take(16).map(|b| format!("{b:02x}")).collect())
}

/// Where code objects are cached: `$ROCM_VISION_KERNEL_CACHE`, else
/// `$XDG_CACHE_HOME/rocm-vision/kernels`, else `~/.cache/rocm-vision/kernels`.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("ROCM_VISION_KERNEL_CACHE") {
        return Some(PathBuf::from(d));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("rocm-vision").join("kernels"))
}

/// An entry: [`MAGIC`], the SHA-256 of the code, the entry's own name (its file name:
/// module, arch and cache key) as a u16 length and bytes, then the code.
///
/// Reads a cache entry; `Ok(None)` when absent, `Err` naming the problem when corrupt,
/// truncated, of another format version, or foreign (written under another name: another
/// module, arch or compiler, copied or renamed into place).
fn read_entry(path: &Path) -> std::result::Result<Option<Vec<u8>>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let fixed = MAGIC.len() + 32 + 2;
    if bytes.len() < fixed || &bytes[..MAGIC.len()] != MAGIC {
        return Err(format!("not a code-object cache entry of this version ({} bytes, bad header)", bytes.len()));
    }
    let sum = &bytes[MAGIC.len()..MAGIC.len() + 32];
    let name_len = u16::from_le_bytes([bytes[fixed - 2], bytes[fixed - 1]]) as usize;
    if bytes.len() < fixed + name_len {
        return Err(format!("truncated: the header names {name_len} bytes, the file has {}", bytes.len()));
    }
    let (name, code) = bytes[fixed..].split_at(name_len);
    let expected = path.file_name().unwrap_or_default().to_string_lossy();
    if name != expected.as_bytes() {
        return Err(format!("foreign entry: written as {:?}, found as {expected:?}", String::from_utf8_lossy(name)));
    }
    if Sha256::digest(code).as_slice() != sum {
        return Err("checksum mismatch (truncated or corrupted)".into());
    }
    Ok(Some(code.to_vec()))
}

/// Writes a cache entry through a temporary file (unique to this process and call) and
/// a rename, so a reader, another thread or another process never sees a partial entry.
fn write_entry(path: &Path, code: &[u8]) -> std::io::Result<()> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let unique = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{unique}.tmp", std::process::id()));
    let name_len = u16::try_from(name.len()).map_err(|_| std::io::Error::other("cache entry name too long"))?;
    let mut data = Vec::with_capacity(MAGIC.len() + 34 + name.len() + code.len());
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&Sha256::digest(code));
    data.extend_from_slice(&name_len.to_le_bytes());
    data.extend_from_slice(name.as_bytes());
    data.extend_from_slice(code);
    std::fs::write(&tmp, &data)?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The code object for `module` on `arch`: from the disk cache when valid, else compiled
/// (and cached). Returns the code and whether it came from the cache.
pub fn cached_code(module: &kernels::Module, arch: &str, dir: Option<&Path>) -> Result<(Vec<u8>, bool)> {
    let path = match dir {
        Some(d) => Some(d.join(format!("{}-{arch}-{}.co", module.name, cache_key(module, arch)?))),
        None => None,
    };
    if let Some(p) = &path {
        match read_entry(p) {
            Ok(Some(code)) => return Ok((code, true)),
            Ok(None) => {}
            Err(why) => {
                tracing::warn!(target: "rocm_backend::jit", path = %p.display(), %why, "corrupt kernel cache entry; rebuilding")
            }
        }
    }
    let t = std::time::Instant::now();
    let code = compile(module, arch)?;
    tracing::info!(target: "rocm_backend::jit", module = module.name, arch, bytes = code.len(), seconds = t.elapsed().as_secs_f64(), "compiled kernel module");
    if let Some(p) = &path
        && let Err(e) = write_entry(p, &code)
    {
        tracing::warn!(target: "rocm_backend::jit", path = %p.display(), error = %e, "could not write the kernel cache");
    }
    Ok((code, false))
}

/// A kernel entry point, ready to launch.
/// What [`Jit::warm`] reports.
#[derive(Clone, Copy, Debug)]
pub enum WarmEvent<'a> {
    /// These modules are about to be compiled (empty: all were cached).
    Compiling { modules: &'a [&'static str], arch: &'a str },
    /// One of them is done.
    Compiled { module: &'static str, seconds: f64 },
}

#[derive(Clone, Copy, Debug)]
pub struct Function(pub(crate) hip::hipFunction_t);

// SAFETY: HIP function handles are immutable and valid on any thread while the module is
// loaded (modules stay loaded for the device's lifetime).
unsafe impl Send for Function {}
unsafe impl Sync for Function {}

struct LoadedModule {
    handle: hip::hipModule_t,
    functions: Mutex<HashMap<String, Function>>,
}

// SAFETY: see `Function`.
unsafe impl Send for LoadedModule {}
unsafe impl Sync for LoadedModule {}

/// Per-device JIT: loads each module once and hands out functions.
pub struct Jit {
    arch: String,
    cache_dir: Option<PathBuf>,
    modules: Mutex<HashMap<&'static str, Arc<LoadedModule>>>,
    /// Every entry point resolved so far: a launch looks its kernel up here first.
    resolved: Mutex<HashMap<String, Function>>,
    /// The dynamic shared-memory limit raised for an entry point (above the default 48 KiB).
    shared_limits: Mutex<HashMap<String, u32>>,
}

/// Dynamic shared memory a function may take without raising its limit (CUDA's default;
/// AMD's LDS limit of 64 KiB needs no attribute, and no AMD launch asks for more than this).
pub const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

impl Jit {
    pub(crate) fn new(arch: &str) -> Result<Jit> {
        Ok(Jit {
            arch: arch.to_string(),
            cache_dir: default_cache_dir(),
            modules: Mutex::new(HashMap::new()),
            resolved: Mutex::new(HashMap::new()),
            shared_limits: Mutex::new(HashMap::new()),
        })
    }

    /// [`Jit::function`], with the function's dynamic shared-memory limit raised to
    /// `shared_bytes` if that is above [`DEFAULT_SHARED_LIMIT`]
    /// (`hipFuncSetAttribute(hipFuncAttributeMaxDynamicSharedMemorySize)`, once per entry
    /// point and size). A device that cannot give that much answers with an error naming
    /// the kernel and the bytes.
    pub fn function_with_shared(&self, entry: &str, shared_bytes: u32) -> Result<Function> {
        let f = self.function(entry)?;
        if shared_bytes <= DEFAULT_SHARED_LIMIT {
            return Ok(f);
        }
        let mut limits = self.shared_limits.lock().expect("jit poisoned");
        if limits.get(entry).is_some_and(|&l| l >= shared_bytes) {
            return Ok(f);
        }
        // SAFETY: `f` is a live function of a loaded module; the attribute takes an int.
        let rc = unsafe {
            hip::hipFuncSetAttribute(
                f.0 as *const std::ffi::c_void,
                hip::hipFuncAttribute_hipFuncAttributeMaxDynamicSharedMemorySize,
                shared_bytes as i32,
            )
        };
        if rc != hip::hipError_t_hipSuccess {
            return Err(RocmError::op(
                "launch",
                format!(
                    "{entry}: the device refused {shared_bytes} bytes of dynamic shared memory per block (HIP error {rc})"
                ),
            ));
        }
        limits.insert(entry.to_string(), shared_bytes);
        Ok(f)
    }

    pub fn arch(&self) -> &str {
        &self.arch
    }

    /// The entry point `entry` of the module that defines it. The device must be current.
    pub fn function(&self, entry: &str) -> Result<Function> {
        if let Some(f) = self.resolved.lock().expect("jit poisoned").get(entry) {
            return Ok(*f);
        }
        let module = kernels::MODULES
            .iter()
            .find(|m| m.defines(entry))
            .ok_or_else(|| RocmError::MissingKernel { module: "(any)".into(), entry: entry.into() })?;
        let loaded = self.load(module)?;
        let mut fns = loaded.functions.lock().expect("jit poisoned");
        if let Some(f) = fns.get(entry) {
            return Ok(*f);
        }
        let name = CString::new(entry).map_err(|_| RocmError::op("function", "entry name contains NUL"))?;
        let mut f = std::ptr::null_mut();
        let rc = unsafe { hip::hipModuleGetFunction(&mut f, loaded.handle, name.as_ptr()) };
        if rc != hip::hipError_t_hipSuccess {
            return Err(RocmError::MissingKernel { module: module.name.into(), entry: entry.into() });
        }
        fns.insert(entry.to_string(), Function(f));
        self.resolved.lock().expect("jit poisoned").insert(entry.to_string(), Function(f));
        Ok(Function(f))
    }

    /// Compiles (in parallel, one thread per module) every module of `modules` that is
    /// neither loaded nor in the disk cache, then loads them all: the first run's kernel
    /// compilation as one wait of the slowest module instead of one per module on first
    /// use. `progress` hears the modules about to be compiled (none: nothing to compile)
    /// and then each one as it finishes, with its seconds.
    pub fn warm(&self, modules: &[&'static kernels::Module], progress: &(dyn Fn(WarmEvent<'_>) + Sync)) -> Result<()> {
        let cold: Vec<&'static kernels::Module> = {
            let loaded = self.modules.lock().expect("jit poisoned");
            let mut cold = Vec::new();
            for m in modules.iter().filter(|m| !loaded.contains_key(m.name)) {
                let cached = match &self.cache_dir {
                    Some(d) => matches!(
                        read_entry(&d.join(format!("{}-{}-{}.co", m.name, self.arch, cache_key(m, &self.arch)?))),
                        Ok(Some(_))
                    ),
                    None => false,
                };
                if !cached {
                    cold.push(*m);
                }
            }
            cold
        };
        progress(WarmEvent::Compiling { modules: &cold.iter().map(|m| m.name).collect::<Vec<_>>(), arch: &self.arch });
        if !cold.is_empty() {
            let results: Vec<Result<()>> = std::thread::scope(|s| {
                let handles: Vec<_> = cold
                    .iter()
                    .map(|m| {
                        s.spawn(move || -> Result<()> {
                            let t = std::time::Instant::now();
                            let (_, _) = cached_code(m, &self.arch, self.cache_dir.as_deref())?;
                            progress(WarmEvent::Compiled { module: m.name, seconds: t.elapsed().as_secs_f64() });
                            Ok(())
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(RocmError::op("jit", "a compile thread panicked"))))
                    .collect()
            });
            results.into_iter().collect::<Result<Vec<()>>>()?;
        }
        // Loading makes the module current on this thread's device context: serially.
        for m in modules {
            self.load(m)?;
        }
        Ok(())
    }

    /// [`Jit::warm`] for every module of the registry.
    pub fn warm_all(&self, progress: &(dyn Fn(WarmEvent<'_>) + Sync)) -> Result<()> {
        let modules: Vec<&'static kernels::Module> = kernels::modules().iter().collect();
        self.warm(&modules, progress)
    }

    fn load(&self, module: &'static kernels::Module) -> Result<Arc<LoadedModule>> {
        let mut mods = self.modules.lock().expect("jit poisoned");
        if let Some(m) = mods.get(module.name) {
            return Ok(m.clone());
        }
        let (code, from_cache) = cached_code(module, &self.arch, self.cache_dir.as_deref())?;
        let mut handle = std::ptr::null_mut();
        let mut rc = unsafe { hip::hipModuleLoadData(&mut handle, code.as_ptr() as *const _) };
        if rc != hip::hipError_t_hipSuccess && from_cache {
            // A cached object that passes its checksum but does not load (a driver change
            // the key did not capture): rebuild once.
            tracing::warn!(target: "rocm_backend::jit", module = module.name, "cached code object failed to load; recompiling");
            let (code, _) = cached_code(module, &self.arch, None)?;
            if let Some(d) = &self.cache_dir {
                let _ = write_entry(
                    &d.join(format!("{}-{}-{}.co", module.name, self.arch, cache_key(module, &self.arch)?)),
                    &code,
                );
            }
            rc = unsafe { hip::hipModuleLoadData(&mut handle, code.as_ptr() as *const _) };
        }
        check("hipModuleLoadData", rc)?;
        let m = Arc::new(LoadedModule { handle, functions: Mutex::new(HashMap::new()) });
        mods.insert(module.name, m.clone());
        Ok(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_entries_detect_corruption() {
        let dir = std::env::temp_dir().join(format!("rv-jit-cache-{}", std::process::id()));
        let p = dir.join("m-gfx1100-0123.co");
        let code = b"\x7fELF fake code object".to_vec();
        write_entry(&p, &code).unwrap();
        assert_eq!(read_entry(&p).unwrap(), Some(code.clone()));
        // Flip one byte of the code: the checksum catches it.
        let mut bytes = std::fs::read(&p).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&p, &bytes).unwrap();
        assert!(read_entry(&p).unwrap_err().contains("checksum"));
        // Every truncation is caught.
        bytes[last] ^= 1;
        for n in 0..bytes.len() {
            std::fs::write(&p, &bytes[..n]).unwrap();
            let e = read_entry(&p).unwrap_err();
            assert!(
                e.contains("bad header") || e.contains("truncated") || e.contains("checksum") || e.contains("foreign"),
                "{n}: {e}"
            );
        }
        // A valid entry of another module/arch/key renamed into place: foreign.
        let other = dir.join("m-gfx90a-4567.co");
        write_entry(&other, &code).unwrap();
        std::fs::rename(&other, &p).unwrap();
        let e = read_entry(&p).unwrap_err();
        assert!(e.contains("foreign") && e.contains("gfx90a"), "{e}");
        // An entry of the previous format version.
        let mut v1 = b"RVKOBJ1\n".to_vec();
        v1.extend_from_slice(&Sha256::digest(&code));
        v1.extend_from_slice(&code);
        std::fs::write(&p, &v1).unwrap();
        assert!(read_entry(&p).unwrap_err().contains("bad header"));
        assert_eq!(read_entry(&dir.join("absent.co")).unwrap(), None);
        // Many writers of one entry at once (threads here; processes use the same
        // unique temporary names): the entry is whole afterwards, no temporary left.
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..20 {
                        write_entry(&p, &code).unwrap();
                        let got = read_entry(&p).unwrap();
                        assert_eq!(got.as_deref(), Some(&code[..]));
                    }
                });
            }
        });
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
