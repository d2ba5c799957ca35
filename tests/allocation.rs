//! What a CPU tensor's creation allocates, counted by a global allocator: `Tensor::full`
//! (and `zeros`/`ones`) holds the tensor's own bytes and no more, in every float dtype.
//! It once built an f64 tensor and converted it, 3x an f32 map's bytes (5x f16's) for a
//! moment, which the VAE's memory plan did not see.

use rocm_vision::{DType, Device, Tensor};
use test_support::CountingAlloc;

#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::new();

#[test]
fn full_allocates_the_tensor_once() {
    let n = 1 << 20;
    for dtype in [DType::F32, DType::F16, DType::BF16, DType::F64] {
        let bytes = n * dtype.size_in_bytes();
        let (t, peak) = HEAP.peak_during(|| Tensor::full(0.5, &[4, n / 4], dtype, &Device::cpu()).unwrap());
        assert!(peak <= bytes + (64 << 10), "{dtype:?}: peak {peak} bytes for a {bytes}-byte tensor");
        assert_eq!(t.to_vec::<f32>().unwrap()[n - 1], 0.5, "{dtype:?}");
        let (_, peak) = HEAP.peak_during(|| Tensor::zeros(&[n], dtype, &Device::cpu()).unwrap());
        assert!(peak <= bytes + (64 << 10), "{dtype:?} zeros: peak {peak} bytes for a {bytes}-byte tensor");
    }
}
