//! What the root crate's integration tests share: the GPU-tier device or a visible skip.
#![allow(dead_code)] // each test binary uses its own subset

use rocm_vision::Device;

/// `SKIPPED <test>: <reason>` on stderr, past the harness's capture.
#[allow(unused_imports)] // each test binary uses its own subset
pub use conv_engine::testing::skipped;

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
