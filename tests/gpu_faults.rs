//! Issue 13, item 4 (GPU tier): the ROCm allocator's fault hook. A run of ops (conv,
//! norm, elementwise, matmul) with its N-th device allocation failing, for every N: each a
//! clean `Error::Rocm(RocmError::InjectedFault)`, the allocator's live bytes back to where
//! they were, and the next run gives the same values. Skips, saying why, without a GPU.
//! The CPU tier (the conv engine's hook, a VAE decode and a Real-CUGAN tile) is in
//! examples-sd/tests/faults.rs and examples-sr/tests/faults.rs.

use rocm_vision::{Conv2dParams, Device, Error, RocmError, Tensor};

mod common;

fn run(device: &Device) -> Result<Vec<f32>, Error> {
    let x = Tensor::from_vec((0..2 * 8 * 20 * 20).map(|i| (i % 17) as f32 / 17.0).collect(), &[2, 8, 20, 20], device)?;
    let w = Tensor::from_vec((0..16 * 8 * 9).map(|i| (i % 5) as f32 / 5.0 - 0.4).collect(), &[16, 8, 3, 3], device)?;
    let y = x.conv2d(&w, None, &Conv2dParams::default().with_padding(1))?;
    let y = y.group_norm_silu(4, None, None, 1e-5)?;
    let z = y.affine(2.0, 1.0)?.mul(&y)?;
    let m = z.reshape(&[2 * 16 * 20, 20])?.matmul(&z.reshape(&[2 * 16 * 20, 20])?.reshape(&[20, 2 * 16 * 20])?)?;
    let mut v = z.to_vec::<f32>()?;
    v.extend(m.to_vec::<f32>()?);
    Ok(v)
}

#[test]
fn gpu_run_fails_cleanly_at_every_allocation() {
    // Without a device, the CPU tier covers the conv engine's hook (examples-*/tests/faults.rs).
    let Some(device) = common::gpu() else { return };
    let alloc = device.rocm_device().unwrap().allocator();
    let reference = run(&device).unwrap();
    let before = alloc.stats().allocations;
    assert_eq!(run(&device).unwrap(), reference);
    let per_run = alloc.stats().allocations - before;
    assert!(per_run > 3, "{per_run} device allocations per run");
    for n in 1..=per_run {
        device.synchronize().unwrap();
        let live = alloc.stats().live;
        alloc.fail_nth_allocation(Some(n));
        match run(&device) {
            Err(Error::Rocm(RocmError::InjectedFault { index, .. })) => assert!(index > 0),
            other => {
                panic!("allocation {n} of {per_run}: expected the injected fault, got {:?}", other.map(|v| v.len()))
            }
        }
        device.synchronize().unwrap();
        assert_eq!(alloc.stats().live, live, "allocation {n}: device bytes still live after the error");
    }
    alloc.fail_nth_allocation(None);
    assert_eq!(run(&device).unwrap(), reference, "the device runs as before");
    println!("{per_run} device allocations per run, each failed once: clean errors, live bytes restored");
}
