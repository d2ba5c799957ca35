//! CPU benchmark: Real-CUGAN 2x se no-denoise on a 256x256 image, our engine against ncnn
//! on the same machine in the same run.
//!
//! `cargo bench -p examples-sr --bench cpu` (options after `--`: `--size N`, `--runs N`,
//! `--model-dir DIR`, `--python PATH`). ncnn runs through `benches/ncnn_cpu.py` with the
//! `ncnn` PyPI package (`$NCNN_PYTHON`, else /opt/sr-venv/bin/python3), float32, 2 threads,
//! the same model files and the same net input size. The two alternate, one network run
//! each per round (ncnn's after its own warm-up, which also transforms its weights), so
//! that load from other jobs on a shared machine falls on both alike; the table gives the
//! best and the median round of each. GFLOP is the conv + deconv work as the conv engine
//! counts it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use examples_sr::image_io::Image;
use examples_sr::models::{ModelKind, Variant};
use examples_sr::upscale::Options;
use rocm_vision::host_alloc::ReusingAllocator;
use rocm_vision::{Budget, DType, Tensor};

/// As in the `realcugan` binary; the "no block reuse" rows turn its caching off.
#[global_allocator]
static ALLOC: ReusingAllocator = ReusingAllocator::new();

struct Args {
    size: usize,
    runs: usize,
    model_dir: PathBuf,
    python: PathBuf,
}

fn args() -> Args {
    let mut a = Args {
        size: 256,
        runs: 5,
        model_dir: std::env::var_os("REALCUGAN_MODELS")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../models")),
        python: std::env::var_os("NCNN_PYTHON")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/opt/sr-venv/bin/python3")),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        match flag.as_str() {
            "--size" => a.size = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.size),
            "--runs" => a.runs = it.next().and_then(|v| v.parse().ok()).unwrap_or(a.runs).max(1),
            "--model-dir" => a.model_dir = it.next().map(PathBuf::from).unwrap_or(a.model_dir),
            "--python" => a.python = it.next().map(PathBuf::from).unwrap_or(a.python),
            _ => {} // cargo bench passes --bench
        }
    }
    a
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// A deterministic test picture: gradients, bars, a disc.
fn picture(n: usize) -> Image {
    let mut data = Vec::with_capacity(n * n * 3);
    for y in 0..n {
        for x in 0..n {
            let disc = (x as i64 - n as i64 / 2).pow(2) + (y as i64 - n as i64 / 3).pow(2) < (n as i64 / 5).pow(2);
            let bars = (x / 6) % 2 == 0;
            data.push(if disc { 230 } else { (x * 255 / n) as u8 });
            data.push(if bars { 40 } else { (y * 255 / n) as u8 });
            data.push(((x + 2 * y) % 256) as u8);
        }
    }
    Image::from_u8(n, n, 3, data).expect("valid image")
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

fn main() {
    let a = args();
    let variant = Variant::new(ModelKind::Se, 2, 0).expect("se 2x no-denoise exists");
    let (param, bin) = variant.paths(&a.model_dir);
    if !param.is_file() {
        println!("SKIPPED: {} not found (run scripts/fetch-models.sh or set REALCUGAN_MODELS)", param.display());
        return;
    }
    let device = examples_sr::cpu_device(Budget::bytes(64 << 20));
    let up = variant.load(&a.model_dir, DType::F32, &device).expect("model loads");
    let net = up.network();
    let img = picture(a.size);
    let side = a.size + 2 * up.prepadding();
    let flops = net.flops(side, side).expect("shapes") as f64;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("conv engine: {}", conv_engine::AlgorithmCatalog::device_key(&conv_cpu::CpuCatalog::new()));
    println!(
        "Real-CUGAN {variant}, {n}x{n} image (net input {side}x{side}), f32, {threads} CPU threads, {} runs after a warm-up",
        a.runs,
        n = a.size
    );
    println!("conv + deconv work: {:.1} GFLOP", flops / 1e9);

    // Ours: the network alone (what ncnn is timed on) and the whole upscale.
    let input: Vec<f32> = (0..3 * side * side).map(|i| (i * 7919 % 1000) as f32 / 1000.0).collect();
    let input = Tensor::from_vec(input, &[1, 3, side, side], &device).expect("input");
    let plan = up.plan(img.width, img.height, &Options::whole()).expect("plan");
    let forward = || {
        let t = Instant::now();
        net.forward(input.clone()).expect("forward");
        secs(t.elapsed())
    };
    let whole = || {
        let t = Instant::now();
        up.upscale(&img, &plan, &mut |_| {}).expect("upscale");
        secs(t.elapsed())
    };
    forward();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/ncnn_cpu.py");
    let ncnn_once = || -> Result<f64, String> {
        let o = Command::new(&a.python)
            .arg(&script)
            .arg(&param)
            .arg(&bin)
            .args(["--size", &side.to_string(), "--threads", "2", "--runs", "1"])
            .output()
            .map_err(|e| format!("cannot run {} ({e}); set NCNN_PYTHON", a.python.display()))?;
        if !o.status.success() {
            return Err(format!("failed: {}", String::from_utf8_lossy(&o.stderr).trim()));
        }
        let text = String::from_utf8_lossy(&o.stdout);
        text.split("\"median_s\":")
            .nth(1)
            .and_then(|r| r.split([',', '}']).next())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .ok_or_else(|| format!("unexpected output {text:?}"))
    };
    // The same network on implicit GEMM alone (examples-sr's CPU device before Winograd):
    // what Winograd gains, in the same rounds.
    let igemm_device = rocm_vision::Device::cpu_with_engine(
        conv_cpu::CpuConv::new(Budget::bytes(64 << 20)).with_allowed(&[conv_engine::Algorithm::ImplicitGemm]),
    );
    let igemm_up = variant.load(&a.model_dir, DType::F32, &igemm_device).expect("model loads");
    // A tensor runs its convolutions on its own device's engine: the input must be made on
    // this device (a CPU tensor moved between CPU devices keeps its engine).
    let igemm_input =
        Tensor::from_vec(input.to_vec::<f32>().expect("input"), &[1, 3, side, side], &igemm_device).expect("input");
    let igemm_forward = || {
        let t = Instant::now();
        igemm_up.network().forward(igemm_input.clone()).expect("forward");
        secs(t.elapsed())
    };
    igemm_forward();
    // The same network with every large block from the system allocator and back (page
    // faults on every fresh map and workspace), in the same rounds.
    let no_reuse_forward = || {
        ALLOC.set_caching(false);
        let t = forward();
        ALLOC.set_caching(true);
        t
    };
    let (mut ours, mut igemm, mut no_reuse, mut theirs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut ncnn_error = None;
    for _ in 0..a.runs {
        ours.push(forward());
        igemm.push(igemm_forward());
        no_reuse.push(no_reuse_forward());
        if ncnn_error.is_none() {
            match ncnn_once() {
                Ok(t) => theirs.push(t),
                Err(e) => ncnn_error = Some(e),
            }
        }
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let ours_net = median(ours.clone());
    let ours_all = median((0..a.runs.min(3)).map(|_| whole()).collect());

    // Where the time goes: one more run with per-layer-type timers.
    net.enable_profiling();
    let t = Instant::now();
    net.forward(input.clone()).expect("forward");
    let profiled = t.elapsed();
    let p = net.take_profile().expect("profile");

    println!();
    println!("{:<34} {:>9} {:>9} {:>10}", "", "best s", "median s", "GFLOP/s");
    let line = |name: &str, v: &[f64]| {
        let m = median(v.to_vec());
        println!("{name:<34} {:>9.3} {m:>9.3} {:>10.1}", best(v), flops / m / 1e9);
    };
    line("ours: network (untiled)", &ours);
    line("ours, implicit GEMM only: network", &igemm);
    line("ours, no block reuse: network", &no_reuse);
    let before = ALLOC.stats();
    forward();
    let after = ALLOC.stats();
    println!(
        "block pool, one network run: of {} large allocations {} reused, {} resized from a block that had to go, {} fresh; {} evicted; live at most {}, live + cached {}",
        after.hits - before.hits + after.recycled - before.recycled + after.misses - before.misses,
        after.hits - before.hits,
        after.recycled - before.recycled,
        after.misses - before.misses,
        after.evictions - before.evictions,
        rocm_vision::format_bytes(after.high_water_bytes),
        rocm_vision::format_bytes(after.peak_footprint_bytes)
    );
    println!("{:<34} {:>9} {ours_all:>9.3} {:>10.1}", "ours: whole upscale (pre/post too)", "", flops / ours_all / 1e9);
    match ncnn_error {
        None => {
            line("ncnn 2 threads fp32: network", &theirs);
            println!(
                "ratio ours/ncnn (network): best {:.2}, median {:.2} ({} alternating rounds)",
                best(&ours) / best(&theirs),
                ours_net / median(theirs.clone()),
                a.runs
            );
            println!(
                "ratio implicit GEMM only/ncnn (network): best {:.2}, median {:.2}",
                best(&igemm) / best(&theirs),
                median(igemm.clone()) / median(theirs.clone())
            );
        }
        Some(e) => println!("ncnn anchor skipped: {e}"),
    }
    println!();
    println!("where our time goes (one profiled network run, {:.3} s):", secs(profiled));
    let row = |name: &str, d: Duration, f: Option<u64>| {
        let rate = f.map(|f| format!("{:>7.1} GFLOP/s", f as f64 / secs(d).max(1e-12) / 1e9)).unwrap_or_default();
        println!("  {name:<32} {:>7.3} s {:>5.1}% {rate}", secs(d), 100.0 * secs(d) / secs(profiled));
    };
    row("convolution", p.conv, Some(p.conv_flops));
    row("deconvolution", p.deconv, Some(p.deconv_flops));
    row("leaky ReLU (after conv/deconv)", p.activation, None);
    row("add / SE multiply", p.binary, None);
    row("crop views / pixel shuffle", p.reshape, None);
    row("SE pooling + fully connected", p.se, None);
    row("other (graph walk, frees)", profiled.saturating_sub(p.total()), None);
    println!();
    println!("convolution layers, slowest first:");
    let mut layers = p.layers.clone();
    layers.sort_by_key(|l| std::cmp::Reverse(l.time));
    for l in &layers {
        println!(
            "  {:<16} {:<44} {:>7.3} s {:>7.1} GFLOP/s",
            l.name,
            l.what,
            secs(l.time),
            l.flops as f64 / secs(l.time).max(1e-12) / 1e9
        );
    }
}
