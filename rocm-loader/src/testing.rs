//! Test helpers shared by the `-sys` crates (feature `testing`, enabled from their
//! dev-dependencies): a scratch directory, a real shared object without the ROCm symbols
//! to stand in for a wrong library, and the skip-or-require rule of the tests that run
//! against the real libraries in the toolchain chroot.

use std::ffi::c_void;
use std::path::{Path, PathBuf};

use crate::LoadError;

/// A fresh, empty directory under the system temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        // The process id keeps test binaries of different crates apart; the counter, the
        // tests of one binary.
        let dir = std::env::temp_dir().join(format!("{}-{}-{}-{}", env!("CARGO_PKG_NAME"), tag, std::process::id(), n));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The C library this test process has mapped: a real shared object that has none of
/// the ROCm symbols.
pub fn loaded_libc() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| path.rsplit('/').next().is_some_and(|file| file.starts_with("libc.so")))
        .map(PathBuf::from)
        .expect("this test process maps a libc.so")
}

/// The rule of the tests against a real library (`library`, e.g. `rocBLAS`): where it is
/// not installed (the CPU tier) the test prints `SKIPPED: <test>: <reason>` and gets
/// `None`; with `ROCM_VISION_REQUIRE_ROCM=1` (the toolchain tier) a missing library
/// panics. A library that is found but unusable always panics.
pub fn loaded_or_skip<T>(library: &str, test: &str, loaded: Result<T, LoadError>) -> Option<T> {
    match loaded {
        Ok(loaded) => Some(loaded),
        Err(err @ LoadError::NotFound { .. }) => {
            if std::env::var_os("ROCM_VISION_REQUIRE_ROCM").is_some_and(|v| v == "1") {
                panic!("ROCM_VISION_REQUIRE_ROCM=1 but {library} cannot be loaded: {err}");
            }
            // Directly on stderr: the test harness drops a passing test's captured output.
            use std::io::Write;
            let line = format!(
                "SKIPPED {test}: {library} is not installed here (set ROCM_VISION_REQUIRE_ROCM=1 to fail instead)\n"
            );
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            None
        }
        Err(err) => panic!("{library} was found but cannot be used: {err}"),
    }
}

/// Resolves each `(name, address)` of `bound` again in the library at `path`, independently
/// of the generated bindings, and checks that the bound pointer is the library's; `bound`
/// must name every symbol of `symbols` once.
pub fn assert_bound_pointers_are_the_library_s(path: &Path, bound: &[(&str, usize)], symbols: &[&str]) {
    // SAFETY: reopening a library that is already loaded; its initialisers have run.
    let library =
        unsafe { libloading::Library::new(path) }.unwrap_or_else(|e| panic!("reopen {}: {e}", path.display()));
    assert_eq!(bound.len(), symbols.len());
    for &(name, address) in bound {
        assert!(symbols.contains(&name), "{name}");
        // SAFETY: only the address is read.
        let symbol = unsafe { library.get::<*const c_void>(name.as_bytes()) }.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(*symbol as usize, address, "{name}");
    }
}
