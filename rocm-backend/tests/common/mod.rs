//! Shared by the GPU-tier tests: find a device or say clearly why the test skips.

use rocm_backend::RocmDevice;
use std::sync::Arc;

/// The first ROCm device, or `None` after printing why the test is skipped. With
/// `ROCM_VISION_REQUIRE_GPU=1` (the GPU tier) a missing device fails the test instead.
pub fn device() -> Option<Arc<RocmDevice>> {
    match RocmDevice::open(0) {
        Ok(d) => Some(d),
        Err(e) => {
            if std::env::var("ROCM_VISION_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("ROCM_VISION_REQUIRE_GPU=1 but no ROCm device: {e}");
            }
            eprintln!("SKIPPED (no ROCm device): {e}");
            None
        }
    }
}
