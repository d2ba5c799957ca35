//! Finding and opening a ROCm library at run time, for the `-sys` crates.
//!
//! Each `-sys` crate (`rocblas-sys`, `miopen-sys`) describes its library with a
//! [`LibrarySpec`] — display name, file names, the symbols its bindings bind, and the
//! advice printed when the library is missing — and gets, through [`load`], its bound
//! functions together with the path they came from, or a [`LoadError`] that names the
//! library, what was tried, the first missing symbol, and how to fix it. Every symbol is
//! checked one by one before the generated bindings run, because bindgen's own
//! `from_library` reports a missing symbol without saying which one.
//!
//! Nothing here links against ROCm: the libraries are opened with libloading when a
//! program asks for them.

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};

/// The ROCm installation prefix that is searched when neither `ROCM_PATH` nor `HIP_PATH`
/// holds the library.
pub const DEFAULT_ROCM_PREFIX: &str = "/opt/rocm";

/// What a crate loads: its display name, the file names to try, the symbols that must
/// resolve, and the advice printed when the library is not found.
#[derive(Debug, Clone, Copy)]
pub struct LibrarySpec {
    /// The name errors use, e.g. `rocBLAS`.
    pub display: &'static str,
    /// Tried in this order in each directory, then through the system loader.
    pub file_names: &'static [&'static str],
    /// Every function the bindings bind (the generated `SYMBOLS`).
    pub symbols: &'static [&'static str],
    /// The last line of the not-found error: how to install the library or point at it.
    pub hint: &'static str,
    /// The file name that goes with each HIP runtime major version (rocBLAS 4 with HIP 6,
    /// rocBLAS 5 with HIP 7): when a HIP runtime is already loaded in the process (the
    /// backend loads it first), its major's name is tried first in every directory.
    pub by_hip_major: &'static [(u32, &'static str)],
}

/// Where to look for a library, in order: each directory (with each file name), then, if
/// `system_loader` is set, each bare file name through the dynamic loader's own search
/// (`LD_LIBRARY_PATH`, `/etc/ld.so.cache`, the default directories).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPaths {
    pub dirs: Vec<PathBuf>,
    pub system_loader: bool,
}

impl SearchPaths {
    /// `$ROCM_PATH/lib`, `$HIP_PATH/lib`, `/opt/rocm/lib`, then the system loader path.
    pub fn from_env() -> Self {
        Self::from_vars(std::env::var_os("ROCM_PATH"), std::env::var_os("HIP_PATH"))
    }

    /// [`SearchPaths::from_env`] with the two variables given explicitly. Unset or empty
    /// variables are skipped; a directory named twice is searched once.
    pub fn from_vars(rocm_path: Option<OsString>, hip_path: Option<OsString>) -> Self {
        let mut dirs: Vec<PathBuf> = Vec::new();
        let prefixes = [rocm_path, hip_path, Some(OsString::from(DEFAULT_ROCM_PREFIX))];
        for prefix in prefixes.into_iter().flatten().filter(|p| !p.is_empty()) {
            let dir = Path::new(&prefix).join("lib");
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
        SearchPaths { dirs, system_loader: true }
    }

    /// Only these directories, without the system loader path.
    pub fn only_dirs(dirs: impl IntoIterator<Item = PathBuf>) -> Self {
        SearchPaths { dirs: dirs.into_iter().collect(), system_loader: false }
    }
}

/// One place a library was looked for, and why it was not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// A full path, or a bare file name handed to the system loader.
    pub candidate: String,
    pub outcome: AttemptOutcome,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// No file at that path.
    NotPresent,
    /// The dynamic loader refused it; its message.
    OpenFailed(String),
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.outcome {
            AttemptOutcome::NotPresent => write!(f, "{}: not present", self.candidate),
            AttemptOutcome::OpenFailed(msg) => write!(f, "{}: {}", self.candidate, msg),
        }
    }
}

/// Why a ROCm library could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// No candidate could be opened.
    #[error("{}", not_found_message(.library, .tried, .hint))]
    NotFound { library: &'static str, tried: Vec<Attempt>, hint: &'static str },
    /// A library was opened but lacks a function the bindings need.
    #[error(
        "the {library} library at {} lacks the required symbol `{symbol}` ({source}); it is not a \
         {library} build these bindings can use (they were generated from the ROCm 6.4 headers)",
        .path.display()
    )]
    MissingSymbol {
        library: &'static str,
        path: PathBuf,
        symbol: &'static str,
        #[source]
        source: libloading::Error,
    },
    /// Every symbol resolved one by one, yet the generated bindings failed to bind them.
    #[error("the {library} library at {} could not be bound: {source}", .path.display())]
    Bind {
        library: &'static str,
        path: PathBuf,
        #[source]
        source: libloading::Error,
    },
}

fn not_found_message(library: &str, tried: &[Attempt], hint: &str) -> String {
    let mut msg = format!("the {library} library was not found; tried:");
    for attempt in tried {
        msg.push_str("\n  ");
        msg.push_str(&attempt.to_string());
    }
    if tried.is_empty() {
        msg.push_str(" nothing (no directories to search)");
    }
    msg.push('\n');
    msg.push_str(hint);
    msg
}

/// The real paths of every HIP runtime (`libamdhip64.so*`) mapped into this process, each
/// once, in the order `/proc/self/maps` lists them.
pub fn mapped_hip_runtimes() -> Vec<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let mut found: Vec<PathBuf> = Vec::new();
    for path in maps.lines().filter_map(|line| line.split_whitespace().nth(5)) {
        let is_hip = Path::new(path).file_name().is_some_and(|f| f.to_string_lossy().starts_with("libamdhip64.so"));
        if is_hip {
            let real = std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path));
            if !found.contains(&real) {
                found.push(real);
            }
        }
    }
    found
}

/// The major version in a HIP runtime's file name: `libamdhip64.so.7.2.53211` is 7; `None`
/// for a name without one (`libamdhip64.so`).
pub fn hip_major_of(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    name.strip_prefix("libamdhip64.so.")?.split('.').next()?.parse().ok()
}

/// The spec's file names in the order they are tried: the name that goes with the major of
/// the HIP runtime already loaded (if any, and if the spec names one) first, then the rest in
/// the spec's order.
pub fn ordered_file_names(spec: &LibrarySpec, hip_major: Option<u32>) -> Vec<&'static str> {
    let preferred = hip_major.and_then(|m| spec.by_hip_major.iter().find(|(major, _)| *major == m)).map(|(_, n)| *n);
    let mut names: Vec<&'static str> = preferred.into_iter().collect();
    names.extend(spec.file_names.iter().copied().filter(|n| Some(*n) != preferred));
    names
}

/// Keeps an accepted library mapped until the process exits. ROCm's libraries are not safe
/// to unload: the HIP runtime under rocBLAS and MIOpen starts threads of its own, and the
/// last handle's dlclose unmapped it under them. The real-rocBLAS tests, whose five tests
/// each open and drop the library in parallel, crashed with SIGSEGV in 3 of 65 runs on a
/// loaded 2-core machine (ROCm 6.4 chroot, 2026-12-07; once in CI), and in 0 of 80 with the
/// library pinned. Adding RTLD_NODELETE to the library already open makes every later dlclose
/// leave it, and what it loaded, in place; a refused candidate (see [`open`]) is closed
/// before this and still unloaded.
#[cfg(unix)]
fn pin(path: &Path) {
    // SAFETY: with RTLD_NOLOAD nothing new is loaded and no initialiser runs: the call
    // returns the library that is already open, now flagged NODELETE. Its handle is dropped
    // at once (the flag stays); if the call fails, the library is as it was.
    let pinned = unsafe {
        libloading::os::unix::Library::open(Some(path), libc::RTLD_LAZY | libc::RTLD_NOLOAD | libc::RTLD_NODELETE)
    };
    drop(pinned);
}
#[cfg(not(unix))]
fn pin(_path: &Path) {}

/// Opens the first candidate of `search` that loads, then checks that every symbol of the
/// spec resolves in it. Returns the library and the path (or bare name) it was opened by.
///
/// When a HIP runtime is already loaded, the name that goes with its major is tried first
/// ([`LibrarySpec::by_hip_major`]), and a candidate that brings a second HIP runtime into
/// the process (a rocBLAS or MIOpen built for another ROCm: two HIP runtimes in one process
/// share no state and crash or corrupt each other) is refused, named in the error, and the
/// next one tried.
pub fn open(spec: &LibrarySpec, search: &SearchPaths) -> Result<(libloading::Library, PathBuf), LoadError> {
    let mut tried = Vec::new();
    let hip_before = mapped_hip_runtimes();
    let hip_major = hip_before.first().and_then(|p| hip_major_of(p));
    let names = ordered_file_names(spec, hip_major);
    let system_names = names.iter().filter(|_| search.system_loader).map(PathBuf::from);
    let candidates = search.dirs.iter().flat_map(|dir| names.iter().map(move |name| dir.join(name)));
    for candidate in candidates.chain(system_names) {
        // A bare name goes to the system loader; a path is tried only when the file is there.
        let is_path = candidate.components().count() > 1;
        if is_path && !candidate.exists() {
            tried.push(Attempt { candidate: candidate.display().to_string(), outcome: AttemptOutcome::NotPresent });
            continue;
        }
        // SAFETY: opening a library runs its initialisers. The candidates are the ROCm
        // library the calling crate binds, by the names and in the places ROCm installs it.
        match unsafe { libloading::Library::new(&candidate) } {
            Ok(library) => {
                if !hip_before.is_empty() {
                    let second: Vec<String> = mapped_hip_runtimes()
                        .into_iter()
                        .filter(|p| !hip_before.contains(p))
                        .map(|p| p.display().to_string())
                        .collect();
                    if !second.is_empty() {
                        let reason = format!(
                            "built for another ROCm: it loads a second HIP runtime ({}) beside the one in use ({})",
                            second.join(", "),
                            hip_before[0].display()
                        );
                        tried.push(Attempt {
                            candidate: candidate.display().to_string(),
                            outcome: AttemptOutcome::OpenFailed(reason),
                        });
                        continue;
                    }
                }
                check_symbols(spec, &library, &candidate)?;
                pin(&candidate);
                return Ok((library, candidate));
            }
            Err(err) => {
                let label = if is_path {
                    candidate.display().to_string()
                } else {
                    format!("{} (system loader path)", candidate.display())
                };
                tried.push(Attempt { candidate: label, outcome: AttemptOutcome::OpenFailed(err.to_string()) });
            }
        }
    }
    Err(LoadError::NotFound { library: spec.display, tried, hint: spec.hint })
}

/// [`open`], then `bind` (the generated bindings' `from_library`) on the library. Returns
/// the bound functions and the path (or bare name) the library was opened by; a `bind`
/// failure is [`LoadError::Bind`], naming the library and path.
pub fn load<F>(
    spec: &LibrarySpec,
    search: &SearchPaths,
    bind: impl FnOnce(libloading::Library) -> Result<F, libloading::Error>,
) -> Result<(F, PathBuf), LoadError> {
    let (library, path) = open(spec, search)?;
    match bind(library) {
        Ok(fns) => Ok((fns, path)),
        Err(source) => Err(LoadError::Bind { library: spec.display, path, source }),
    }
}

/// Every symbol of the spec must resolve; the first that does not is named in the error.
fn check_symbols(spec: &LibrarySpec, library: &libloading::Library, path: &Path) -> Result<(), LoadError> {
    for &symbol in spec.symbols {
        // SAFETY: the symbol is only looked up, never called through this type.
        let found = unsafe { library.get::<unsafe extern "C" fn()>(symbol.as_bytes()) };
        if let Err(source) = found {
            return Err(LoadError::MissingSymbol { library: spec.display, path: path.to_path_buf(), symbol, source });
        }
    }
    Ok(())
}

#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod tests {
    use super::testing::{TempDir, loaded_libc};
    use super::*;

    const SPEC: LibrarySpec = LibrarySpec {
        display: "Example",
        file_names: &["libexample-rocm-vision.so", "libexample-rocm-vision.so.1"],
        symbols: &["example_fn_a", "example_fn_b"],
        hint: "Install Example or set ROCM_PATH.",
        by_hip_major: &[(7, "libexample-rocm-vision.so.1")],
    };

    #[test]
    fn search_order_is_rocm_path_hip_path_then_opt_rocm_then_system() {
        let s = SearchPaths::from_vars(Some("/a/rocm".into()), Some("/b/hip".into()));
        assert_eq!(s.dirs, [PathBuf::from("/a/rocm/lib"), PathBuf::from("/b/hip/lib"), PathBuf::from("/opt/rocm/lib")]);
        assert!(s.system_loader);
    }

    #[test]
    fn unset_empty_and_repeated_prefixes_are_skipped() {
        let s = SearchPaths::from_vars(None, Some("".into()));
        assert_eq!(s.dirs, [PathBuf::from("/opt/rocm/lib")]);
        let s = SearchPaths::from_vars(Some("/opt/rocm".into()), Some("/opt/rocm".into()));
        assert_eq!(s.dirs, [PathBuf::from("/opt/rocm/lib")]);
    }

    #[test]
    fn not_found_lists_every_candidate_and_the_hint() {
        let dir = TempDir::new("empty");
        let err = open(&SPEC, &SearchPaths::only_dirs([dir.0.clone()])).unwrap_err();
        let LoadError::NotFound { tried, .. } = &err else { panic!("expected NotFound, got {err:?}") };
        assert_eq!(tried.len(), 2);
        assert!(tried.iter().all(|a| a.outcome == AttemptOutcome::NotPresent));
        let msg = err.to_string();
        assert!(msg.starts_with("the Example library was not found; tried:"), "{msg}");
        for name in SPEC.file_names {
            assert!(msg.contains(&format!("{}: not present", dir.0.join(name).display())), "{msg}");
        }
        assert!(msg.ends_with("Install Example or set ROCM_PATH."), "{msg}");
    }

    #[test]
    fn system_loader_failures_are_reported_with_the_loader_message() {
        let search = SearchPaths { dirs: Vec::new(), system_loader: true };
        let err = open(&SPEC, &search).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("libexample-rocm-vision.so (system loader path): "), "{msg}");
        assert!(msg.contains("cannot open shared object file"), "{msg}");
    }

    #[test]
    fn a_file_that_is_not_a_library_is_skipped_with_the_reason() {
        let dir = TempDir::new("garbage");
        std::fs::write(dir.0.join(SPEC.file_names[0]), b"not an ELF file").unwrap();
        let err = open(&SPEC, &SearchPaths::only_dirs([dir.0.clone()])).unwrap_err();
        let LoadError::NotFound { tried, .. } = &err else { panic!("expected NotFound, got {err:?}") };
        let AttemptOutcome::OpenFailed(reason) = &tried[0].outcome else { panic!("{tried:?}") };
        assert!(!reason.is_empty());
        assert_eq!(tried[1].outcome, AttemptOutcome::NotPresent);
        assert!(err.to_string().contains(&dir.0.join(SPEC.file_names[0]).display().to_string()));
    }

    #[test]
    fn a_library_without_the_symbols_names_the_first_missing_one() {
        let dir = TempDir::new("libc");
        let fake = dir.0.join(SPEC.file_names[1]);
        std::os::unix::fs::symlink(loaded_libc(), &fake).unwrap();
        let err = open(&SPEC, &SearchPaths::only_dirs([dir.0.clone()])).unwrap_err();
        match &err {
            LoadError::MissingSymbol { symbol, path, .. } => {
                assert_eq!(*symbol, "example_fn_a");
                assert_eq!(path, &fake);
            }
            other => panic!("expected MissingSymbol, got {other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("lacks the required symbol `example_fn_a`"), "{msg}");
    }

    #[test]
    fn a_library_with_the_symbols_is_returned_with_its_path() {
        let dir = TempDir::new("libc-ok");
        let lib = dir.0.join(SPEC.file_names[0]);
        std::os::unix::fs::symlink(loaded_libc(), &lib).unwrap();
        let spec = LibrarySpec { symbols: &["malloc", "free"], ..SPEC };
        let (library, path) = open(&spec, &SearchPaths::only_dirs([dir.0.clone()])).unwrap();
        assert_eq!(path, lib);
        // SAFETY: strlen's signature, called on a NUL-terminated string.
        let strlen = unsafe { library.get::<unsafe extern "C" fn(*const std::ffi::c_char) -> usize>(b"strlen") };
        assert_eq!(unsafe { strlen.unwrap()(c"four".as_ptr()) }, 4);
    }

    #[test]
    fn the_loaded_hip_runtime_s_major_picks_the_first_name() {
        assert_eq!(hip_major_of(Path::new("/usr/lib/x86_64-linux-gnu/libamdhip64.so.7.2.53211")), Some(7));
        assert_eq!(hip_major_of(Path::new("/opt/rocm/lib/libamdhip64.so.6")), Some(6));
        assert_eq!(hip_major_of(Path::new("/opt/rocm/lib/libamdhip64.so")), None);
        assert_eq!(hip_major_of(Path::new("/opt/rocm/lib/librocblas.so.4")), None);
        // No runtime loaded, or one the spec names nothing for: the spec's order.
        assert_eq!(ordered_file_names(&SPEC, None), SPEC.file_names);
        assert_eq!(ordered_file_names(&SPEC, Some(6)), SPEC.file_names);
        assert_eq!(ordered_file_names(&SPEC, Some(7)), ["libexample-rocm-vision.so.1", "libexample-rocm-vision.so"]);
    }

    #[test]
    fn no_hip_runtime_is_mapped_into_a_process_that_never_loaded_one() {
        // This test binary links nothing of ROCm and loads no HIP runtime.
        assert_eq!(mapped_hip_runtimes(), Vec::<PathBuf>::new());
    }

    #[test]
    fn load_binds_the_opened_library_and_names_a_failed_bind() {
        let dir = TempDir::new("bind");
        let lib = dir.0.join(SPEC.file_names[0]);
        std::os::unix::fs::symlink(loaded_libc(), &lib).unwrap();
        let spec = LibrarySpec { symbols: &["malloc"], ..SPEC };
        let search = SearchPaths::only_dirs([dir.0.clone()]);
        let (bound, path) = load(&spec, &search, Ok).unwrap();
        assert_eq!(path, lib);
        // SAFETY: only looked up.
        assert!(unsafe { bound.get::<unsafe extern "C" fn()>(b"malloc") }.is_ok());
        // A bind that fails (here: a symbol the spec did not list) is a Bind error naming the
        // library and the path.
        let err = load(&spec, &search, |library| {
            // SAFETY: only looked up.
            unsafe { library.get::<unsafe extern "C" fn()>(b"example_fn_a") }.map(|_| ())
        })
        .unwrap_err();
        assert!(matches!(&err, LoadError::Bind { library: "Example", path, .. } if *path == lib), "{err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with(&format!("the Example library at {} could not be bound: ", lib.display())), "{msg}");
    }
}
