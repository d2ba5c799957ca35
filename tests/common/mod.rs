//! What the root crate's integration tests share: the GPU-tier device or a visible skip.
#![allow(dead_code)] // each test binary uses its own subset

use rocm_vision::Device;

/// Says on the process's own stderr that the calling test is skipped, and why, as
/// `SKIPPED <test>: <reason>`. Written directly, not with `eprintln!`, which the test
/// harness captures (and drops) for a test that passes: a skip is seen in every
/// `cargo test` run (`cargo test 2>&1 | grep SKIPPED` lists them).
pub fn skipped(reason: impl std::fmt::Display) {
    use std::io::Write;
    let thread = std::thread::current();
    // One line (a reason's first), written at once so that parallel tests do not split it.
    let reason = reason.to_string();
    let first = reason.lines().next().unwrap_or_default().trim_end_matches(" Tried:");
    let line = format!("SKIPPED {}: {first}\n", thread.name().unwrap_or("a test"));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

pub fn gpu() -> Option<Device> {
    match Device::rocm(0) {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(
                !std::env::var("ROCM_VISION_REQUIRE_GPU").is_ok_and(|v| v == "1"),
                "ROCM_VISION_REQUIRE_GPU=1 but {e}"
            );
            skipped(format!("no ROCm device: {e}"));
            None
        }
    }
}
