//! Elementwise kernels against the device's own copy (GPU tier): every contiguous case of
//! issue 12 (unary, affine, binary on equal shapes, the per-channel and scalar broadcasts
//! the models use, cast, copy, and the in-place forms) and two strided views, on 256 MiB
//! tensors, timed with device events (median of `--reps` after a warm-up). Each line says
//! the bytes moved per second and its ratio to a device-to-device `hipMemcpyAsync` of the
//! same tensor measured in the same run; the contiguous cases must reach 0.70.
//!
//! One JSON line per (case, dtype) on stdout, then a Markdown table on stderr.
//! `cargo bench -p rocm-backend --bench gpu_elementwise -- [--reps N] [--mib M]`

use candle_core::{DType, Layout};
use kernels::ops::{BinaryOp, UnaryOp};
use rocm_backend::{DeviceArray, RocmDevice, ops};
use std::sync::Arc;

/// The ratio to the copy that a contiguous case must reach (issue 12).
const TARGET: f64 = 0.70;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| -> usize {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let reps = arg("--reps", 20);
    let mib = arg("--mib", 256);
    let dev = match RocmDevice::open(0) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("gpu_elementwise: no ROCm device, nothing to measure: {e}");
            return;
        }
    };
    eprintln!("gpu_elementwise on {:?}, {mib} MiB tensors, median of {reps}", dev.info().name);
    let mut table = vec![
        "| case | dtype | GB/s | ratio to copy | contiguous | meets 0.70 |".to_string(),
        "| --- | --- | ---: | ---: | --- | --- |".to_string(),
    ];
    let mut misses = 0;
    for dt in [DType::F32, DType::F16] {
        let es = dt.size_in_bytes();
        let n = mib * (1 << 20) / es;
        // NCHW with 64 channels: the per-channel broadcast of a conv bias.
        let (c, hw) = (64, n / 64);
        let shape = [1, c, hw];
        let x = DeviceArray::zeros(&dev, dt, n).expect("alloc");
        let y = DeviceArray::zeros(&dev, dt, n).expect("alloc");
        let bias = DeviceArray::zeros(&dev, dt, c).expect("alloc");
        let scalar = DeviceArray::zeros(&dev, dt, 1).expect("alloc");
        let full = Layout::contiguous(shape.as_slice());
        let per_channel = Layout::contiguous([1, c, 1].as_slice()).broadcast_as(shape.as_slice()).expect("layout");
        let per_scalar = Layout::contiguous([1, 1, 1].as_slice()).broadcast_as(shape.as_slice()).expect("layout");
        // A transposed view of the same elements: [1, hw, c] read as [1, c, hw].
        let transposed = Layout::contiguous([1, hw, c].as_slice()).transpose(1, 2).expect("layout");
        let out = DeviceArray::alloc(&dev, dt, n).expect("alloc");
        let half_dt = if dt == DType::F32 { DType::F16 } else { DType::F32 };
        let bytes = (n * es) as f64;
        let copy_ms = time(&dev, reps, || out.buffer.copy_from(0, &x.buffer, 0, n * es).expect("copy"));
        let copy_rate = 2.0 * bytes / (copy_ms * 1e-3);
        let cases: Vec<(&str, bool, f64, Box<dyn Fn()>)> = vec![
            (
                "unary silu",
                true,
                2.0 * bytes,
                Box::new(|| drop(ops::unary(UnaryOp::Silu, &x, &full, 0.0).expect("unary"))),
            ),
            (
                "unary leaky_relu",
                true,
                2.0 * bytes,
                Box::new(|| drop(ops::unary(UnaryOp::LeakyRelu, &x, &full, 0.1).expect("unary"))),
            ),
            ("affine", true, 2.0 * bytes, Box::new(|| drop(ops::affine(&x, &full, 0.5, 1.0).expect("affine")))),
            (
                "binary add",
                true,
                3.0 * bytes,
                Box::new(|| drop(ops::binary(BinaryOp::Add, &x, &full, &y, &full).expect("binary"))),
            ),
            (
                "binary add, per-channel bias",
                true,
                2.0 * bytes,
                Box::new(|| drop(ops::binary(BinaryOp::Add, &x, &full, &bias, &per_channel).expect("binary"))),
            ),
            (
                "binary mul, scalar",
                true,
                2.0 * bytes,
                Box::new(|| drop(ops::binary(BinaryOp::Mul, &x, &full, &scalar, &per_scalar).expect("binary"))),
            ),
            (
                "add in place",
                true,
                3.0 * bytes,
                Box::new(|| ops::binary_into(BinaryOp::Add, &x, &full, &y, &full, &x).expect("binary_into")),
            ),
            (
                "cast",
                true,
                bytes + (n * half_dt.size_in_bytes()) as f64,
                Box::new(|| drop(ops::cast(&x, &full, half_dt).expect("cast"))),
            ),
            (
                "copy, strided view",
                false,
                2.0 * bytes,
                Box::new(|| drop(ops::contiguous(&x, &transposed).expect("contiguous"))),
            ),
            (
                "unary silu, strided view",
                false,
                2.0 * bytes,
                Box::new(|| drop(ops::unary(UnaryOp::Silu, &x, &transposed, 0.0).expect("unary"))),
            ),
        ];
        let line = |case: &str, contiguous: bool, moved: f64, ms: f64| {
            let rate = moved / (ms * 1e-3);
            let ratio = rate / copy_rate;
            println!(
                "{{\"case\": \"{case}\", \"dtype\": \"{dt:?}\", \"mib\": {mib}, \"ms\": {ms:.4}, \"gb_per_s\": {:.1}, \"copy_gb_per_s\": {:.1}, \"ratio\": {ratio:.3}, \"contiguous\": {contiguous}}}",
                rate / 1e9,
                copy_rate / 1e9
            );
            let meets = if contiguous { if ratio >= TARGET { "yes" } else { "**no**" } } else { "-" };
            (format!("| {case} | {dt:?} | {:.0} | {ratio:.2} | {contiguous} | {meets} |", rate / 1e9), ratio)
        };
        table.push(line("device copy (hipMemcpyAsync)", true, 2.0 * bytes, copy_ms).0);
        for (case, contiguous, moved, run) in &cases {
            let ms = time(&dev, reps, run);
            let (row, ratio) = line(case, *contiguous, *moved, ms);
            if *contiguous && ratio < TARGET {
                misses += 1;
            }
            table.push(row);
        }
        drop(cases);
        drop((x, y, bias, scalar, out));
        dev.allocator().trim(dev.stream()).expect("trim");
    }
    eprintln!("{}", table.join("\n"));
    eprintln!("contiguous cases below {TARGET} of the copy: {misses}");
}

/// Median milliseconds of `reps` runs of `f` (after one warm-up), by device events.
fn time(dev: &Arc<RocmDevice>, reps: usize, f: impl Fn()) -> f64 {
    f();
    dev.synchronize().expect("sync");
    let mut times: Vec<f64> = (0..reps.max(1))
        .map(|_| {
            let start = dev.stream().record().expect("event");
            f();
            let end = dev.stream().record().expect("event");
            end.synchronize().expect("sync");
            end.elapsed_ms_since(&start).expect("elapsed") as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
