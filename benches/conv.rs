//! CPU convolution benchmark: every SD/FLUX VAE-decoder conv shape (and a 3-channel-input
//! layer, Real-CUGAN's first) through the engine's chosen plan, side by side in one
//! process with candle's `Tensor::conv2d` and (when Python with onnxruntime is available)
//! onnxruntime's CPU conv, printing median time, GFLOP/s, the ratio against each anchor,
//! the kernel that ran (algorithm and microkernel), and the peak workspace of each —
//! counted by this binary's global allocator, not estimated. onnxruntime runs each shape
//! in a fresh child process right before ours and candle's, so that a machine whose load
//! drifts affects the three alike.
//!
//! `cargo bench --bench conv -- [--quick] [--sizes 256,512] [--reps N] [--dtype f32|f16|bf16]
//!  [--no-ort] [--no-pool] [--python PATH] [--markdown FILE]`
//!
//! The onnxruntime anchor needs a Python with `onnxruntime` and `onnx` (see
//! benches/anchors/README.md); `--python`, or `ROCM_VISION_PYTHON`, names it.

use candle_core::{DType, Device, Tensor};
use conv_cpu::CpuConv;
use conv_cpu::MicroKernel;
use conv_engine::{Conv2dParams, ConvProblem};
use std::time::Instant;
use test_support::{CountingAlloc, Realloc};

// Growth by copy, as this benchmark has always counted it: the old and the new block both
// count towards the peak workspace it reports. Large blocks come from the reusing pool the
// `realcugan` binary uses (`--no-pool`: the system allocator's fresh pages every time), so
// ours and candle's outputs are timed without first-touch page faults, as onnxruntime's
// arena times its own.
#[global_allocator]
static HEAP: CountingAlloc = CountingAlloc::over_pool(Realloc::Copy);

#[derive(Clone, Copy)]
struct Shape {
    name: &'static str,
    c: usize,
    k: usize,
    r: usize,
}

const SHAPES: [Shape; 9] = [
    Shape { name: "3x3 512->512", c: 512, k: 512, r: 3 },
    Shape { name: "3x3 512->256", c: 512, k: 256, r: 3 },
    Shape { name: "3x3 256->256", c: 256, k: 256, r: 3 },
    Shape { name: "3x3 256->128", c: 256, k: 128, r: 3 },
    Shape { name: "3x3 128->128", c: 128, k: 128, r: 3 },
    Shape { name: "1x1 512->256", c: 512, k: 256, r: 1 },
    Shape { name: "1x1 256->128", c: 256, k: 128, r: 1 },
    Shape { name: "3x3 128->3 (conv_out)", c: 128, k: 3, r: 3 },
    Shape { name: "3x3 3->32 (3-channel input)", c: 3, k: 32, r: 3 },
];

struct Args {
    sizes: Vec<usize>,
    reps: usize,
    dtype: DType,
    ort: bool,
    python: String,
    markdown: Option<String>,
    shapes: Vec<Shape>,
    /// `--algorithm NAME`: only this algorithm (for A/B runs); the dispatcher's choice otherwise.
    algorithm: Option<conv_engine::Algorithm>,
    /// `--kernel NAME`: this microkernel (Debug name) instead of the detected one.
    kernel: Option<MicroKernel>,
    /// `--only TEXT`: only the shapes whose name contains TEXT.
    only: Option<String>,
    /// `--no-candle`: skip candle's conv2d (for profiling ours alone).
    candle: bool,
}

fn parse_args() -> Args {
    // The venv benches/anchors/README.md sets up, if present.
    let python = std::env::var("ROCM_VISION_PYTHON").unwrap_or_else(|_| {
        if std::path::Path::new("/opt/venv-ref/bin/python3").exists() {
            "/opt/venv-ref/bin/python3".into()
        } else {
            "python3".into()
        }
    });
    let mut a = Args {
        sizes: vec![256, 512],
        reps: 3,
        dtype: DType::F32,
        ort: true,
        python,
        markdown: None,
        shapes: SHAPES.to_vec(),
        algorithm: None,
        kernel: None,
        only: None,
        candle: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => {
                a.sizes = vec![128];
                a.reps = 1;
                a.shapes = vec![SHAPES[2], SHAPES[4], SHAPES[6]];
            }
            "--sizes" => {
                a.sizes =
                    it.next().expect("--sizes needs a list").split(',').map(|s| s.parse().expect("size")).collect()
            }
            "--reps" => a.reps = it.next().expect("--reps N").parse().expect("reps"),
            "--dtype" => {
                a.dtype = match it.next().as_deref() {
                    Some("f32") => DType::F32,
                    Some("f16") => DType::F16,
                    Some("bf16") => DType::BF16,
                    other => panic!("--dtype f32|f16|bf16, got {other:?}"),
                }
            }
            "--no-ort" => a.ort = false,
            "--no-candle" => a.candle = false,
            "--no-pool" => HEAP.pool().expect("the benchmark's allocator has a pool").set_caching(false),
            "--python" => a.python = it.next().expect("--python PATH"),
            "--markdown" => a.markdown = Some(it.next().expect("--markdown FILE")),
            "--algorithm" => a.algorithm = Some(it.next().expect("--algorithm NAME").parse().expect("algorithm")),
            "--kernel" => {
                let name = it.next().expect("--kernel NAME");
                a.kernel = Some(
                    MicroKernel::ALL
                        .into_iter()
                        .find(|k| format!("{k:?}") == name)
                        .unwrap_or_else(|| panic!("--kernel: one of {:?}", MicroKernel::ALL)),
                );
            }
            "--only" => a.only = Some(it.next().expect("--only TEXT")),
            "--bench" => {}
            other => eprintln!("ignoring unknown argument {other:?}"),
        }
    }
    a
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs `f` once to warm up and measure peak memory, then `reps` times for the median.
fn time<R>(reps: usize, mut f: impl FnMut() -> R) -> (f64, usize) {
    let (_, peak) = HEAP.peak_during(&mut f);
    let t = (0..reps)
        .map(|_| {
            let s = Instant::now();
            std::hint::black_box(f());
            s.elapsed().as_secs_f64()
        })
        .collect();
    (median(t), peak)
}

/// onnxruntime's figures for `shapes`, from `benches/anchors/onnxruntime_conv.py`.
fn onnxruntime(args: &Args, shapes: &[Shape], size: usize) -> Result<Vec<Option<f64>>, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/anchors/onnxruntime_conv.py");
    let mut cmd = std::process::Command::new(&args.python);
    cmd.arg(script)
        .arg("--threads")
        .arg(rayon::current_num_threads().to_string())
        .arg("--runs")
        .arg(args.reps.max(3).to_string());
    for s in shapes {
        cmd.arg("--shape").arg(format!("{}:{}:{size}:{}:{}", s.c, s.k, s.r, s.r / 2));
    }
    let out = cmd.output().map_err(|e| format!("could not run {}: {e}", args.python))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!("onnxruntime script failed: {}", err.lines().last().unwrap_or("")));
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let times: Vec<Option<f64>> = text
        .lines()
        .filter(|l| l.trim_start().starts_with('{'))
        .map(|l| {
            let key = "\"median_s\":";
            l.find(key).and_then(|i| l[i + key.len()..].trim_start().split([',', '}']).next()?.trim().parse().ok())
        })
        .collect();
    if times.len() != shapes.len() {
        return Err(format!("onnxruntime script printed {} results for {} shapes", times.len(), shapes.len()));
    }
    Ok(times)
}

fn main() {
    let args = parse_args();
    let threads = rayon::current_num_threads();
    let mut catalog = conv_cpu::CpuCatalog::new();
    if let Some(k) = args.kernel {
        catalog = catalog.with_kernel(k);
    }
    let mut engine = CpuConv::with_catalog(catalog, CpuConv::default().budget());
    if let Some(a) = args.algorithm {
        engine = engine.with_allowed(&[a]);
    }
    let mut table = vec![format!(
        "| shape | output | ours: kernel | ours ms | ours GFLOP/s | ours workspace | candle ms | candle GFLOP/s | candle workspace | ours/candle speed | onnxruntime ms | ours/onnxruntime speed |"
    )];
    table.push("|---|---|---|---|---|---|---|---|---|---|---|---|".into());
    println!("CPU conv benchmark: {threads} threads, dtype {:?}, {} reps (median)", args.dtype, args.reps);
    println!("{}", cpu_description());
    println!("microkernel: {} (supported: {:?})", MicroKernel::detect(), MicroKernel::all_supported());
    println!("load average at start: {}", load_average());
    for &size in &args.sizes {
        for s in args.shapes.iter().filter(|s| args.only.as_ref().is_none_or(|o| s.name.contains(o.as_str()))) {
            let ort = if args.ort && args.dtype == DType::F32 {
                onnxruntime(&args, std::slice::from_ref(s), size)
            } else {
                Err("not run (--no-ort or not f32)".into())
            };
            if let Err(e) = &ort {
                println!("onnxruntime anchor skipped for {} at {size}²: {e}", s.name);
            }
            let pad = s.r / 2;
            let x = Tensor::randn(0f32, 1.0, (1, s.c, size, size), &Device::Cpu).unwrap().to_dtype(args.dtype).unwrap();
            let w =
                Tensor::randn(0f32, 0.05, (s.k, s.c, s.r, s.r), &Device::Cpu).unwrap().to_dtype(args.dtype).unwrap();
            let params = Conv2dParams::default().with_padding(pad);
            let problem = ConvProblem::conv2d(x.dims(), w.dims(), args.dtype, args.dtype, &params).unwrap();
            let flops = problem.geometry().flops() as f64;
            let out_bytes = problem.output_bytes();
            let plan = engine.plan(&problem).unwrap();
            let (ours, ours_peak) = time(args.reps, || engine.run_plan(&plan, &x, &w, None).unwrap());
            let candle = if args.dtype == DType::BF16 || !args.candle {
                None // candle's CPU conv2d has no bf16, or --no-candle
            } else {
                Some(time(args.reps, || x.conv2d(&w, pad, 1, 1, 1).unwrap()))
            };
            let ort_t = ort.as_ref().ok().and_then(|v| v[0]);
            let mib = |b: usize| format!("{:.1} MiB", b.saturating_sub(out_bytes) as f64 / (1 << 20) as f64);
            let row = format!(
                "| {} | {size}² | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
                s.name,
                plan.kernel(),
                ours * 1e3,
                flops / ours / 1e9,
                mib(ours_peak),
                candle.map_or("n/a".into(), |(t, _)| format!("{:.1}", t * 1e3)),
                candle.map_or("n/a".into(), |(t, _)| format!("{:.1}", flops / t / 1e9)),
                candle.map_or("n/a".into(), |(_, p)| mib(p)),
                candle.map_or("n/a (bf16 unsupported or --no-candle)".into(), |(t, _)| format!("{:.2}x", t / ours)),
                ort_t.map_or("n/a".into(), |t| format!("{:.1}", t * 1e3)),
                ort_t.map_or("n/a".into(), |t| format!("{:.2}x", t / ours)),
            );
            println!("{row}");
            table.push(row);
        }
    }
    println!("load average at end: {}", load_average());
    let md = table.join("\n");
    println!("\n{md}");
    if let Some(path) = &args.markdown {
        std::fs::write(path, md + "\n").unwrap_or_else(|e| panic!("writing {path}: {e}"));
        println!("table written to {path}");
    }
}

/// The CPU's model name and SIMD flags, from /proc/cpuinfo where there is one.
fn cpu_description() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines().find(|l| l.starts_with(name)).and_then(|l| l.split(':').nth(1)).unwrap_or("").trim().to_string()
    };
    let flags: Vec<String> = field("flags")
        .split_whitespace()
        .filter(|f| f.starts_with("avx") || *f == "fma" || *f == "f16c")
        .map(str::to_string)
        .collect();
    format!(
        "cpu: {} (family {}, model {}), SIMD flags: {}",
        field("model name"),
        field("cpu family"),
        field("model"),
        flags.join(" ")
    )
}

/// The 1, 5 and 15 minute load averages (the machine may be shared).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}
