//! Shared by the GPU-tier tests: find a device or say clearly why the test skips.

use candle_core::DType;
use rocm_backend::{DeviceArray, RocmDevice};
use std::sync::Arc;

/// `SKIPPED <test>: <reason>` on stderr, past the harness's capture.
#[allow(unused_imports)] // each test binary uses its own subset
pub use conv_engine::testing::skipped;

/// The first ROCm device, or `None` after printing why the test is skipped. With
/// `ROCM_VISION_REQUIRE_GPU=1` (the GPU tier) a missing device fails the test instead.
pub fn device() -> Option<Arc<RocmDevice>> {
    match RocmDevice::open(0) {
        Ok(d) => Some(d),
        Err(e) => {
            if std::env::var("ROCM_VISION_REQUIRE_GPU").is_ok_and(|v| v == "1") {
                panic!("ROCM_VISION_REQUIRE_GPU=1 but no ROCm device: {e}");
            }
            skipped(format!("no ROCm device: {e}"));
            None
        }
    }
}

/// Uploads `v` as `dt` (f32, f16 or bf16); returns the array and the values it really holds
/// after rounding to `dt`, which is what a reference must be computed from.
#[allow(dead_code)] // not every test binary uses every helper
pub fn upload(dev: &Arc<RocmDevice>, v: &[f64], dt: DType) -> (DeviceArray, Vec<f64>) {
    match dt {
        DType::F32 => {
            let x: Vec<f32> = v.iter().map(|&a| a as f32).collect();
            (DeviceArray::from_slice(dev, &x).unwrap(), x.iter().map(|&a| a as f64).collect())
        }
        DType::F16 => {
            let x: Vec<half::f16> = v.iter().map(|&a| half::f16::from_f64(a)).collect();
            (DeviceArray::from_slice(dev, &x).unwrap(), x.iter().map(|a| a.to_f64()).collect())
        }
        DType::BF16 => {
            let x: Vec<half::bf16> = v.iter().map(|&a| half::bf16::from_f64(a)).collect();
            (DeviceArray::from_slice(dev, &x).unwrap(), x.iter().map(|a| a.to_f64()).collect())
        }
        other => panic!("no upload for {other:?}"),
    }
}

/// The array's values as f64 (f32, f16 or bf16 arrays).
#[allow(dead_code)]
pub fn download(a: &DeviceArray) -> Vec<f64> {
    match a.dtype {
        DType::F32 => a.to_vec::<f32>().unwrap().iter().map(|&v| v as f64).collect(),
        DType::F16 => a.to_vec::<half::f16>().unwrap().iter().map(|v| v.to_f64()).collect(),
        DType::BF16 => a.to_vec::<half::bf16>().unwrap().iter().map(|v| v.to_f64()).collect(),
        other => panic!("no download for {other:?}"),
    }
}

/// An output array full of NaN, so that an element the kernel never writes fails the check.
#[allow(dead_code)]
pub fn poisoned(dev: &Arc<RocmDevice>, dt: DType, len: usize) -> DeviceArray {
    upload(dev, &vec![f64::NAN; len], dt).0
}
