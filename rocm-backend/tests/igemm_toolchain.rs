//! The ROCm toolchain tier for the NHWC implicit-GEMM module: hiprtc (the backend's own JIT
//! path, `jit::compile`) compiles igemm_mma.hip for one target of each matrix-core family
//! -- gfx1100 (RDNA3 WMMA), gfx1201 (RDNA4 WMMA), gfx942 (CDNA3 MFMA) -- and every entry
//! point is in each code object. Runs inside the ROCm chroot; outside it (no ROCm) it says
//! why it skips, and `ROCM_VISION_REQUIRE_ROCM=1` makes that a failure. On the GPU tier the
//! runtime is the HIP-on-CUDA library, whose hiprtc compiles NVIDIA targets only: skipped.

use rocm_backend::{RocmDevice, jit, runtime};

// The one skip rule of the README (`SKIPPED <test>: <reason>` on the process's stderr).
use conv_engine::testing::skipped;

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
