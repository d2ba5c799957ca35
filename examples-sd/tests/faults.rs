//! Issue 13, item 4 (CPU tier): a VAE decode with the N-th allocation of the convolution
//! engine failing, for every N the decode makes: each run is a clean error naming the
//! injected fault, the engine's workspace and the process heap are back where they were,
//! and the next run on the same device gives the same image as before. The GPU
//! allocator's hook (`rocm_backend::alloc::Allocator::fail_nth_allocation`) is the same
//! idea on the device; its test is rocm-backend's `gpu_alloc` (skipped without a GPU).

mod common;

use common::*;
use conv_engine::{Budget, ConvError};
use examples_sd::SdError;
use rocm_vision::{DType, Device, Error, Tensor, Weights};
use test_support::{CountingAlloc, fail_every_allocation};

#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::new();

#[test]
fn vae_decode_fails_cleanly_at_every_allocation() {
    let device = Device::cpu_with_budget(Budget::bytes(64 << 20));
    let w = Weights::open(fixture("sd_vae_diffusers.safetensors"), &device).expect("fixture weights");
    let dec = examples_sd::Decoder::load(&w, &config("sd"), DType::F32).expect("decoder");
    let t = tensors("sd_8x8.safetensors");
    let l = &t["latents"];
    let latents = Tensor::from_vec(l.to_vec::<f32>().unwrap(), l.dims(), &device).unwrap();
    let meter = device.cpu_conv().meter();

    // Twice: the second run sees the caches (plans, thread-local GEMM buffers) warm.
    let reference = dec.decode(&latents, &mut |_, _| {}).expect("decode").to_vec::<f32>().unwrap();
    let before = meter.allocations();
    let again = dec.decode(&latents, &mut |_, _| {}).expect("decode").to_vec::<f32>().unwrap();
    let per_run = meter.allocations() - before;
    assert_eq!(again, reference);
    assert!(per_run >= 20, "a decode makes {per_run} engine allocations");

    fail_every_allocation(&HEAP, meter, per_run, |n| {
        let r = dec.decode(&latents, &mut |_, _| {});
        match &r {
            Err(SdError::Lib(Error::Conv(ConvError::AllocationFailed { injected: true, bytes, .. }))) => {
                assert!(*bytes > 0, "allocation {n}");
            }
            other => panic!(
                "allocation {n} of {per_run}: expected the injected fault, got {:?}",
                other.as_ref().map(|t| t.dims().to_vec())
            ),
        }
        let msg = r.err().unwrap().to_string();
        assert!(msg.contains("injected fault") && msg.contains("bytes"), "{msg}");
    });
    let after = dec.decode(&latents, &mut |_, _| {}).expect("decode after the faults").to_vec::<f32>().unwrap();
    assert_eq!(after, reference, "the device decodes as before");
}
