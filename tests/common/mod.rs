//! What the root crate's integration tests share: the GPU-tier device or a visible skip.
#![allow(dead_code)] // each test binary uses its own subset

use rocm_vision::Device;

/// `SKIPPED <test>: <reason>` on stderr, past the harness's capture.
#[allow(unused_imports)] // each test binary uses its own subset
pub use test_support::skipped;

pub fn gpu() -> Option<Device> {
    test_support::device_or_skip(Device::rocm(0))
}
