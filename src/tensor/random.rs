//! Random tensors from the counter-based Philox4x32-10 stream: the same numbers on every
//! device and every run.

use super::{Storage, Tensor};
use crate::device::Device;
use crate::error::Result;
use crate::rocm::RocmTensor;
use candle_core::DType;

impl Tensor {
    /// Uniform values in `[lo, hi)` from the counter-based Philox4x32-10 stream of `seed`,
    /// starting at word `offset`: the same numbers on every device and every run (computed
    /// in f32, then cast to `dtype`).
    pub fn rand_uniform(
        shape: &[usize],
        (lo, hi): (f64, f64),
        seed: u64,
        offset: u64,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        rocm_backend::random::check_uniform(lo, hi)?;
        match device.rocm_context() {
            Some(ctx) => Ok(Tensor {
                s: Storage::Rocm(RocmTensor::rand_uniform(&ctx.device, shape, dtype, (lo, hi), seed, offset)?),
                device: device.clone(),
            }),
            None => {
                let n = shape.iter().product();
                let v = rocm_backend::random::reference_uniform_f32(seed, offset, n, lo as f32, hi as f32);
                Tensor::from_vec(v, shape, device)?.to_dtype(dtype)
            }
        }
    }

    /// Normal(mean, std) values from the Philox4x32-10 stream of `seed` at word `offset`
    /// (Box–Muller; the CPU evaluates it in f64, a GPU in f32: the same numbers to a few
    /// f32 ulps).
    pub fn rand_normal(
        shape: &[usize],
        (mean, std): (f64, f64),
        seed: u64,
        offset: u64,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        rocm_backend::random::check_normal(mean, std)?;
        match device.rocm_context() {
            Some(ctx) => Ok(Tensor {
                s: Storage::Rocm(RocmTensor::rand_normal(&ctx.device, shape, dtype, (mean, std), seed, offset)?),
                device: device.clone(),
            }),
            None => {
                let n = shape.iter().product();
                let v = rocm_backend::random::reference_normal(seed, offset, n, mean, std);
                Tensor::from_vec(v, shape, device)?.to_dtype(dtype)
            }
        }
    }
}
