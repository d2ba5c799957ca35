//! The ROCm toolchain tier for the NHWC implicit-GEMM module: hiprtc (the backend's own JIT
//! path, `jit::compile`) compiles igemm_mma.hip for one target of each matrix-core family
//! -- gfx1100 (RDNA3 WMMA), gfx1201 (RDNA4 WMMA), gfx942 (CDNA3 MFMA) -- and every entry
//! point is in each code object. Runs inside the ROCm chroot; outside it (no ROCm) it says
//! why it skips, and `ROCM_VISION_REQUIRE_ROCM=1` makes that a failure. On the GPU tier the
//! runtime is the HIP-on-CUDA library, whose hiprtc compiles NVIDIA targets only: skipped.

use rocm_backend::{RocmDevice, jit, runtime};

/// Says on the process's own stderr that the calling test is skipped, and why, as
/// `SKIPPED <test>: <reason>`. Written directly, not with `eprintln!`, which the test
/// harness captures (and drops) for a test that passes: a skip is seen in every
/// `cargo test` run (`cargo test 2>&1 | grep SKIPPED` lists them).
fn skipped(reason: impl std::fmt::Display) {
    use std::io::Write;
    let thread = std::thread::current();
    // One line (a reason's first), written at once so that parallel tests do not split it.
    let reason = reason.to_string();
    let first = reason.lines().next().unwrap_or_default().trim_end_matches(" Tried:");
    let line = format!("SKIPPED {}: {first}\n", thread.name().unwrap_or("a test"));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[test]
fn hiprtc_compiles_the_nhwc_igemm_module_for_each_matrix_core_family() {
    if let Err(e) = runtime() {
        assert!(
            !std::env::var("ROCM_VISION_REQUIRE_ROCM").is_ok_and(|v| v == "1"),
            "ROCM_VISION_REQUIRE_ROCM=1 but: {e}"
        );
        skipped(format!("needs the ROCm toolchain chroot: {e}"));
        return;
    }
    if let Ok(d) = RocmDevice::open(0)
        && d.info().arch.starts_with("sm_")
    {
        skipped(format!(
            "the runtime is the HIP-on-CUDA test library ({}), which compiles NVIDIA targets only",
            d.info().arch
        ));
        return;
    }
    let module = kernels::modules().iter().find(|m| m.name == "igemm_mma").expect("igemm_mma is registered");
    for arch in ["gfx1100", "gfx1201", "gfx942"] {
        let t = std::time::Instant::now();
        let code = jit::compile(module, arch).unwrap_or_else(|e| panic!("{e}"));
        for entry in module.entry_points() {
            assert!(code.windows(entry.len()).any(|w| w == entry.as_bytes()), "igemm_mma for {arch}: {entry} missing");
        }
        println!(
            "{arch} igemm_mma {:>9} bytes, {} entry points, {:.1} s",
            code.len(),
            module.entry_points().len(),
            t.elapsed().as_secs_f64()
        );
    }
}
