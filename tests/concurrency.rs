//! Issue 13, item 6: one `Device` used from several threads at once (convolutions on every
//! CPU algorithm, elementwise ops, norms, matmuls, allocation) gives the results a single
//! thread gets, and its engine's accounting stays consistent (no workspace left held, the
//! fault hook's counter sees every allocation). Bounded in time. The GPU half runs the same
//! on `rocm:0` and skips, saying why, without one.

use conv_cpu::CpuConv;
use conv_engine::ConvError;
use rocm_vision::{Algorithm, Budget, Conv2dParams, Device, Error, Tensor};
use std::time::{Duration, Instant};

mod common;

const THREADS: usize = 4;
const TIME: Duration = Duration::from_secs(2);

/// A deterministic tensor on `device`.
fn tensor(device: &Device, shape: &[usize], seed: u32) -> Tensor {
    let n: usize = shape.iter().product();
    let v: Vec<f32> =
        (0..n as u32).map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2000) as f32 / 1000.0 - 1.0).collect();
    Tensor::from_vec(v, shape, device).unwrap()
}

/// One unit of work: a mix of the ops a model runs, returning its values.
fn work(device: &Device, job: usize) -> Result<Vec<f32>, Error> {
    let shapes = [
        ([1, 8, 20, 18], [12, 8, 3, 3], Conv2dParams::default().with_padding(1)),
        ([2, 16, 9, 9], [16, 16, 1, 1], Conv2dParams::default()),
        ([1, 12, 17, 15], [12, 3, 3, 3], Conv2dParams::default().with_groups(4).with_stride(2)),
        ([1, 8, 12, 12], [8, 8, 5, 5], Conv2dParams::default().with_padding(2).with_dilation(1)),
    ];
    let (xs, ws, p) = &shapes[job % shapes.len()];
    let x = tensor(device, xs, job as u32);
    let w = tensor(device, ws, 77 + job as u32);
    let y = x.conv2d(&w, None, p)?;
    let y = y.group_norm_silu(4, None, None, 1e-5)?;
    let n: usize = y.dims().iter().product();
    let m = y.reshape(&[n / 2, 2])?.matmul(&tensor(device, &[2, 3], 6))?;
    let z = y.affine(0.5, 0.25)?.add(&y)?;
    let mut out = z.to_vec::<f32>()?;
    out.extend(m.to_vec::<f32>()?);
    Ok(out)
}

fn stress(device: &Device) -> (usize, Duration) {
    // What one thread gets, job by job.
    let reference: Vec<Vec<f32>> = (0..8).map(|j| work(device, j).unwrap()).collect();
    let started = Instant::now();
    let runs = std::thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let reference = &reference;
                s.spawn(move || {
                    let mut runs = 0;
                    let mut j = t;
                    while started.elapsed() < TIME {
                        let got = work(device, j % 8).unwrap_or_else(|e| panic!("thread {t}, job {j}: {e}"));
                        assert_eq!(got, reference[j % 8], "thread {t}, job {j}: differs from the single-thread run");
                        runs += 1;
                        j += 1;
                    }
                    runs
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("no thread panics")).sum::<usize>()
    });
    (runs, started.elapsed())
}

#[test]
fn one_cpu_device_from_several_threads() {
    for algs in [
        vec![Algorithm::ImplicitGemm, Algorithm::Direct],
        vec![Algorithm::Im2colGemm, Algorithm::Direct],
        vec![Algorithm::Winograd, Algorithm::Gemm1x1, Algorithm::Direct],
        Algorithm::ALL.to_vec(),
    ] {
        let device = Device::cpu_with_engine(CpuConv::new(Budget::bytes(8 << 20)).with_allowed(&algs));
        let meter = device.cpu_conv().meter();
        let before = meter.allocations();
        let (runs, took) = stress(&device);
        println!(
            "{algs:?}: {runs} runs on {THREADS} threads in {:.1} s, all equal to one thread's",
            took.as_secs_f64()
        );
        assert!(runs >= THREADS, "every thread finished at least one run");
        assert_eq!(meter.current_bytes(), 0, "workspace left held after the threads finished");
        // Every run allocated (an output per conv at least), and the counter saw each.
        assert!(meter.allocations() - before >= runs as u64);
        assert!(meter.peak_bytes() <= THREADS * (8 << 20), "peak workspace {}", meter.peak_bytes());
    }
}

/// The fault hook under concurrency: one armed failure is taken by exactly one thread's
/// allocation; every other run succeeds.
#[test]
fn one_armed_fault_fails_exactly_one_run() {
    let device = Device::cpu_with_budget(Budget::bytes(8 << 20));
    let meter = device.cpu_conv().meter();
    meter.fail_nth_allocation(Some(5));
    let results: Vec<Result<Vec<f32>, Error>> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS * 3)
            .map(|j| {
                s.spawn({
                    let device = &device;
                    move || work(device, j)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let failed: Vec<&Error> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(matches!(failed[0], Error::Conv(ConvError::AllocationFailed { injected: true, .. })), "{:?}", failed[0]);
    assert_eq!(meter.current_bytes(), 0);
}

#[test]
fn one_rocm_device_from_several_threads() {
    let Some(device) = common::gpu() else { return };
    let alloc = device.rocm_device().unwrap().allocator();
    let (runs, took) = stress(&device);
    device.synchronize().unwrap();
    let s = alloc.stats();
    println!("rocm: {runs} runs on {THREADS} threads in {:.1} s; allocator {s:?}", took.as_secs_f64());
    assert!(s.live <= s.peak_live && s.peak_live <= s.peak_reserved);
    assert!(s.live < 64 << 20, "live bytes after the runs: {}", s.live);
}
