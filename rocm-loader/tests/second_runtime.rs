//! Issue 27: a library built for another ROCm (one that would bring a second HIP runtime
//! into the process) is refused, naming both runtimes, and the next candidate is tried; with
//! a HIP runtime loaded, the file name that goes with its major is tried first.
//!
//! Stand-ins built here with the system C compiler: two "HIP runtimes" (sonames
//! libamdhip64.so.6 and libamdhip64.so.7) and two "rocBLAS" builds exporting the same symbol,
//! one linked against each runtime. Its own test binary, since it maps a HIP runtime into the
//! process for good.

use rocm_loader::{AttemptOutcome, LibrarySpec, LoadError, SearchPaths, mapped_hip_runtimes, open};
use std::path::Path;
use std::process::Command;

fn cc(args: &[&str], dir: &Path) -> bool {
    match Command::new("cc").args(args).current_dir(dir).output() {
        Ok(o) if o.status.success() => true,
        Ok(o) => panic!("cc {args:?}: {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => {
            use std::io::Write;
            let line = format!(
                "SKIPPED a_library_built_for_another_rocm_is_refused_naming_both_runtimes: no C compiler (cc): {e}\n"
            );
            let _ = std::io::stderr().lock().write_all(line.as_bytes());
            false
        }
    }
}

#[test]
fn a_library_built_for_another_rocm_is_refused_naming_both_runtimes() {
    let dir = std::env::temp_dir().join(format!("rocm-loader-second-runtime-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (hip6, hip7, blas) = (dir.join("hip6"), dir.join("hip7"), dir.join("blas"));
    for d in [&hip6, &hip7, &blas] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(dir.join("hip.c"), "int hipRuntimeGetVersion(int *v) { *v = 0; return 0; }\n").unwrap();
    std::fs::write(dir.join("blas.c"), "int rocblas_create_handle(void *h) { (void)h; return 0; }\n").unwrap();
    // The runtimes, each under its versioned file name with the link the linker reads.
    for (d, major) in [(&hip6, 6), (&hip7, 7)] {
        let file = d.join(format!("libamdhip64.so.{major}.9.1"));
        let soname = format!("-Wl,-soname,libamdhip64.so.{major}");
        if !cc(&["-shared", "-fPIC", &soname, "-o", file.to_str().unwrap(), "hip.c"], &dir) {
            return;
        }
        std::os::unix::fs::symlink(&file, d.join(format!("libamdhip64.so.{major}"))).unwrap();
        std::os::unix::fs::symlink(&file, d.join("libamdhip64.so")).unwrap();
    }
    // rocBLAS 4 against HIP 6 and rocBLAS 5 against HIP 7, each finding its runtime by RUNPATH
    // (--no-as-needed: the stand-in calls nothing of HIP, the linker would drop the dependency).
    for (name, d) in [("librocblas.so.4", &hip6), ("librocblas.so.5", &hip7)] {
        let out = blas.join(name);
        let rpath = format!("-Wl,-rpath,{}", d.display());
        let link = format!("-L{}", d.display());
        if !cc(
            &[
                "-shared",
                "-fPIC",
                "-o",
                out.to_str().unwrap(),
                "blas.c",
                &link,
                "-Wl,--no-as-needed",
                "-lamdhip64",
                &rpath,
            ],
            &dir,
        ) {
            return;
        }
    }
    // The process's HIP runtime: 6.
    // SAFETY: the stand-in has no initialisers.
    let _hip = unsafe { libloading::Library::new(hip6.join("libamdhip64.so.6")) }.unwrap();
    let runtimes = mapped_hip_runtimes();
    assert_eq!(runtimes, [std::fs::canonicalize(hip6.join("libamdhip64.so.6.9.1")).unwrap()]);

    // rocBLAS 5 listed first: refused (it maps HIP 7 beside 6), and rocBLAS 4 loads.
    let spec = LibrarySpec {
        display: "rocBLAS",
        file_names: &["librocblas.so.5", "librocblas.so.4"],
        symbols: &["rocblas_create_handle"],
        hint: "hint",
        by_hip_major: &[],
    };
    let search = SearchPaths::only_dirs([blas.clone()]);
    let (lib, path) = open(&spec, &search).unwrap();
    assert_eq!(path, blas.join("librocblas.so.4"));
    drop(lib);
    // With rocBLAS 5 alone: the error names it, the second runtime and the one in use.
    let only5 = LibrarySpec { file_names: &["librocblas.so.5"], ..spec };
    let err = open(&only5, &search).unwrap_err();
    let LoadError::NotFound { tried, .. } = &err else { panic!("expected NotFound, got {err:?}") };
    let AttemptOutcome::OpenFailed(reason) = &tried[0].outcome else { panic!("{tried:?}") };
    assert!(reason.contains("built for another ROCm: it loads a second HIP runtime"), "{reason}");
    assert!(reason.contains("libamdhip64.so.7.9.1") && reason.contains("libamdhip64.so.6.9.1"), "{reason}");
    println!("{err}");
    // The name that goes with the loaded runtime's major comes first: rocBLAS 4, no refusal.
    let by_major = LibrarySpec { by_hip_major: &[(6, "librocblas.so.4"), (7, "librocblas.so.5")], ..spec };
    let (_lib, path) = open(&by_major, &search).unwrap();
    assert_eq!(path, blas.join("librocblas.so.4"));
    let _ = std::fs::remove_dir_all(&dir);
}
