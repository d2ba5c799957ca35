//! `sd-vae-decode`: latents in, PNG out, with the SD 1.x/2.x, SDXL, SD3 or FLUX VAE.

use anyhow::{Context, Result, bail};
use clap::Parser;
use cli_support::exit;
use examples_sd::io::{check_outputs, load_latents, output_paths, write_png};
use examples_sd::{Decoder, MemoryPlan, Model, TileSpec, VaeConfig, decode_tiled, peak_rss_bytes};
use indicatif::{ProgressBar, ProgressStyle};
use rocm_vision::{Budget, DType, Device, DeviceKind, Weights, format_bytes};
use std::cell::RefCell;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Decode diffusion latents to images with a Stable Diffusion / FLUX VAE, on a ROCm GPU or
/// the CPU.
///
/// Latents are taken as the diffusion model emits them; the model's scaling (and shift)
/// is undone here. A batch of N latents writes N images: OUT_0.png … OUT_{N-1}.png.
///
/// Exit status: 0 done; 1 the run failed (a file, a device, the decode); 2 the command line
/// cannot work; 130 / 143 interrupted by SIGINT / SIGTERM (partial files removed).
#[derive(Parser, Debug)]
#[command(name = "sd-vae-decode", version)]
struct Args {
    /// VAE weights (.safetensors): diffusers or original (CompVis/ldm, BFL) key layout,
    /// optionally under a `first_stage_model.` or `vae.` prefix (a full SD checkpoint works).
    #[arg(long, required_unless_present = "plan")]
    vae: Option<PathBuf>,
    /// Latents: .safetensors or .npy, shape [N, C, h, w] or [C, h, w].
    #[arg(long, required_unless_present = "plan")]
    latents: Option<PathBuf>,
    /// Output PNG (for a batch: OUT_0.png, OUT_1.png, …).
    #[arg(long, required_unless_present = "plan")]
    out: Option<PathBuf>,
    /// Print the memory plan and exit without decoding (nor reading the weights): the
    /// peak bytes the decode will use on the device (weights, activations, conv workspace,
    /// from the dispatcher's own decisions) and whether it fits --vram-budget exactly or
    /// needs --tiled. The image size comes from --size, else from --latents.
    #[arg(long)]
    plan: bool,
    /// Image size WIDTHxHEIGHT in pixels for --plan (e.g. 1024x1024).
    #[arg(long, requires = "plan", value_name = "WxH")]
    size: Option<String>,
    /// Model preset (architecture and latent scaling): sd (1.x/2.x), sdxl, sd3, flux.
    /// Required unless --config is given.
    #[arg(long)]
    model: Option<String>,
    /// A diffusers AutoencoderKL config.json; overrides the preset.
    #[arg(long)]
    config: Option<PathBuf>,
    /// auto, cpu or rocm[:N].
    #[arg(long, default_value = "auto")]
    device: String,
    /// Compute dtype: f32, f16 or bf16.
    #[arg(long, default_value = "f32")]
    dtype: String,
    /// Memory budget for the decode (weights, activations and scratch): 12GiB, 800MiB,
    /// 80% (of free memory). On the CPU this is host memory. Without it, no fit check
    /// and default scratch sizes.
    #[arg(long)]
    vram_budget: Option<String>,
    /// Decode in overlapping tiles (APPROXIMATE: GroupNorm statistics and attention become
    /// per tile). Tile size: --tile-size, else the largest that fits --vram-budget (one
    /// tile, i.e. exact, when the whole latent fits), else 64.
    #[arg(long)]
    tiled: bool,
    /// Tile side in latent pixels (with --tiled).
    #[arg(long, requires = "tiled")]
    tile_size: Option<usize>,
    /// Tile overlap in latent pixels (with --tiled; default a quarter of the tile).
    #[arg(long, requires = "tiled")]
    tile_overlap: Option<usize>,
    /// Overwrite existing output files.
    #[arg(long)]
    force: bool,
    /// Decode latents that hold NaN or infinite values (by default refused: they decode to
    /// a black or meaningless image).
    #[arg(long)]
    allow_nonfinite: bool,
    /// Tensor name in a latents .safetensors file (default: the only tensor, or
    /// `latents`, `latent`, `samples`, `z`).
    #[arg(long)]
    latent_key: Option<String>,
    /// Decode the latents N times in this process (for benchmarks). Every decode ends with a
    /// device synchronize; the reported decode time is the median of decodes 2..N (the
    /// first one also loads kernels and makes the first allocations), and each decode's
    /// time is printed. The images are written once, from the last decode.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {}", one_line(&e));
        // What to do, where the library knows it (issue 13.2).
        let lib = e.downcast_ref::<rocm_vision::Error>().or_else(|| match e.downcast_ref::<examples_sd::SdError>() {
            Some(examples_sd::SdError::Lib(lib)) => Some(lib),
            _ => None,
        });
        if let Some(hint) = lib.and_then(rocm_vision::Error::hint) {
            eprintln!("  hint: {hint}");
        }
        let code = if e.downcast_ref::<Usage>().is_some() { exit::USAGE } else { exit::FAILED };
        std::process::exit(code.into());
    }
}

/// A command line that cannot work (exit status 2; see `cli_support::exit`).
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Usage(e.to_string()))
}

/// The error and its causes on one line, each cause once: an error that already shows its
/// source (e.g. `path: No such file or directory`) is not followed by the source again.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn parse_dtype(s: &str) -> Result<DType> {
    Ok(match s.trim().to_ascii_lowercase().as_str() {
        "f32" | "float32" => DType::F32,
        "f16" | "float16" | "fp16" => DType::F16,
        "bf16" | "bfloat16" => DType::BF16,
        _ => return Err(usage(format!("unknown --dtype {s:?}: expected f32, f16 or bf16"))),
    })
}

/// Fails before any decoding if an output would replace one of the run's inputs.
fn check_not_inputs(outs: &[PathBuf], inputs: &[&Path]) -> Result<()> {
    let identity = |p: &Path| -> PathBuf {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        dir.canonicalize().unwrap_or(dir).join(p.file_name().unwrap_or_default())
    };
    for o in outs {
        if let Some(i) = inputs.iter().find(|i| identity(i) == identity(o)) {
            bail!(
                "{} would replace the input {}; choose another --out (--force never replaces an input)",
                o.display(),
                i.display()
            );
        }
    }
    Ok(())
}

/// Progress per stage: a bar on a terminal, plain lines otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    start: Instant,
    done: u64,
    total: u64,
}

impl Progress {
    fn new(total: u64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(total);
            b.set_style(
                ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {pos}/{len} {msg}")
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            b
        });
        Progress { bar, start: Instant::now(), done: 0, total }
    }

    fn step(&mut self, what: &str) {
        self.done += 1;
        match &self.bar {
            Some(b) => {
                b.set_message(what.to_string());
                b.inc(1);
            }
            None => {
                eprintln!("[{:>3}/{}] {what} done ({:.2} s)", self.done, self.total, self.start.elapsed().as_secs_f64())
            }
        }
    }

    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// `--plan`: the memory plan of the decode, on stdout, without decoding.
fn run_plan(args: &Args, config: &VaeConfig, dtype: DType, device: &Device, budget: Option<usize>) -> Result<()> {
    let up = config.upscale();
    let (width, height) = match (&args.size, &args.latents) {
        (Some(s), _) => {
            let (w, h) = s
                .trim()
                .split_once(['x', 'X'])
                .and_then(|(w, h)| Some((w.trim().parse::<usize>().ok()?, h.trim().parse::<usize>().ok()?)))
                .ok_or_else(|| usage(format!("--size {s:?}: expected WIDTHxHEIGHT in pixels, e.g. 1024x1024")))?;
            (w, h)
        }
        (None, Some(path)) => {
            let latents = load_latents(path, args.latent_key.as_deref(), &Device::cpu())?;
            let l = examples_sd::decoder::check_latent_shape(&latents, config.latent_channels)?;
            (l.dims()[3] * up, l.dims()[2] * up)
        }
        (None, None) => return Err(usage("--plan needs the image size: --size WIDTHxHEIGHT or --latents")),
    };
    let device = match (device.kind(), budget) {
        (DeviceKind::Rocm(i), Some(b)) => Device::rocm_with_budget(i, Budget::bytes(b))?,
        _ => device.clone(),
    };
    let plan = Decoder::plan(config, &device, (width, height), dtype, budget).map_err(|e| match e {
        examples_sd::SdError::Latents(m) => usage(m),
        e => e.into(),
    })?;
    println!("{plan}");
    Ok(())
}

fn run(args: Args) -> Result<()> {
    let t0 = Instant::now();
    // Before anything is written: Ctrl-C / SIGTERM remove partial files and say what was done.
    cli_support::partial::install_signal_handler("sd-vae-decode")?;
    let dtype = parse_dtype(&args.dtype)?;
    let config = match (&args.config, &args.model) {
        (Some(path), _) => VaeConfig::from_diffusers_json(path)?,
        (None, Some(m)) => m.parse::<Model>().map_err(usage)?.config(),
        (None, None) => return Err(usage("give --model (sd, sdxl, sd3, flux) or --config config.json")),
    };
    // Fail on a device we do not have before reading anything large. A name that is not a
    // device is a usage error; a device that cannot be opened (no ROCm) a failed run.
    let probe = if args.device.trim().eq_ignore_ascii_case("auto") {
        let (d, why) = Device::auto();
        if let Some(why) = why {
            eprintln!("note: {why}");
        }
        d
    } else {
        Device::parse(&args.device).map_err(|e| match e {
            rocm_vision::Error::DeviceParse { .. } => usage(format!("{e} (expected auto, cpu, rocm or rocm:N)")),
            e => e.into(),
        })?
    };
    let budget = match &args.vram_budget {
        Some(s) => {
            let b: Budget = s.parse().map_err(usage)?;
            Some(b.resolve(host_available_bytes))
        }
        None => None,
    };
    if args.plan {
        return run_plan(&args, &config, dtype, &probe, budget);
    }
    let (vae, latents_path, out) = (
        args.vae.clone().expect("clap requires --vae without --plan"),
        args.latents.clone().expect("clap requires --latents without --plan"),
        args.out.clone().expect("clap requires --out without --plan"),
    );
    if !out.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("png")) {
        return Err(usage(format!("{}: the output must be a .png file", out.display())));
    }

    let latents = load_latents(&latents_path, args.latent_key.as_deref(), &probe)?;
    let latents = examples_sd::decoder::check_latent_shape(&latents, config.latent_channels).with_context(|| {
        format!("{} for --model/--config with {} latent channels", latents_path.display(), config.latent_channels)
    })?;
    let bad = latents.to_vec::<f32>()?.iter().filter(|v| !v.is_finite()).count();
    if bad > 0 {
        let what =
            format!("{}: {bad} of {} latent values are NaN or infinite", latents_path.display(), latents.elem_count());
        if !args.allow_nonfinite {
            bail!("{what}; the decode would be black or meaningless (--allow-nonfinite decodes them anyway)");
        }
        eprintln!("warning: {what}; decoding them anyway (--allow-nonfinite)");
    }
    let (n, h, w) = (latents.dims()[0], latents.dims()[2], latents.dims()[3]);
    let outs = output_paths(&out, n);
    let mut inputs = vec![vae.as_path(), latents_path.as_path()];
    inputs.extend(args.config.as_deref());
    check_not_inputs(&outs, &inputs)?;
    check_outputs(&outs, args.force)?;
    for found in cli_support::stale::sweep(
        outs.iter().map(|p| examples_sd::io::parent_dir(p)).collect::<Vec<_>>().iter().map(PathBuf::as_path),
    ) {
        eprintln!("note: {}", found.message());
    }
    cli_support::partial::set_total(outs.len());

    let tile = if args.tiled && args.tile_size.is_some() {
        let t = args.tile_size.unwrap_or(TileSpec::DEFAULT.tile);
        let spec = TileSpec { tile: t, overlap: args.tile_overlap.unwrap_or(t / 4) };
        spec.validate().map_err(usage)?;
        Some(spec)
    } else {
        None
    };
    // A budget that cannot hold the decode is a usage error, like an impossible tile.
    let mut plan = MemoryPlan::new(&config, dtype, (h, w), budget, args.tiled, tile).map_err(|e| match e {
        examples_sd::SdError::Budget(m) => usage(m),
        e => e.into(),
    })?;
    if let (Some(o), Some(t)) = (args.tile_overlap, plan.tile.as_mut()) {
        t.overlap = o;
        t.validate().map_err(usage)?;
    }

    // On the CPU the budget caps the conv engine's workspace (what is left after weights
    // and activations); on ROCm the device allocator enforces the whole budget.
    let device = match (probe.kind(), plan.conv_workspace, plan.budget) {
        (DeviceKind::Cpu, Some(ws), _) => Device::cpu_with_budget(Budget::bytes(ws)),
        (DeviceKind::Rocm(i), _, Some(b)) => Device::rocm_with_budget(i, Budget::bytes(b))?,
        _ => probe,
    };
    // The first run on a machine compiles the GPU kernels (in parallel; said on stderr).
    device.warm_kernels_verbose()?;
    let weights = Weights::open(&vae, &device)?;
    let mut decoder = Decoder::load(&weights, &config, dtype)?;
    // The decoder holds its own copies: unmapping the file keeps its pages (the weights'
    // size again) out of the resident set while decoding.
    drop(weights);
    decoder.set_scratch_caps(plan.caps);
    let latents = latents.to_device(&device)?;
    eprintln!(
        "{}: {} on {device}, {dtype:?}; latents {:?} → {}x{}{}; budget {}",
        vae.display(),
        decoder.layout(),
        latents.dims(),
        h * config.upscale(),
        w * config.upscale(),
        match plan.tile {
            Some(t) => format!(", tiled {}x{} overlap {} (approximate)", t.tile, t.tile, t.overlap),
            None => String::new(),
        },
        plan.budget.map_or("none (library defaults)".to_string(), format_bytes),
    );
    let load_s = t0.elapsed().as_secs_f64();

    let milestones = decoder.milestones();
    let tiles = plan.tile.map_or(1, |t| {
        examples_sd::tiled::tile_starts(h, t.tile, t.overlap).len()
            * examples_sd::tiled::tile_starts(w, t.tile, t.overlap).len()
    });
    let repeat = args.repeat as usize;
    let mut progress = Progress::new((repeat * n * tiles * milestones.len()) as u64);
    // Set by the tile callback, read by the stage observer (same thread, in turn).
    let label = RefCell::new(String::new());
    let mut decode_times = Vec::with_capacity(repeat);
    let mut images = None;
    for run in 0..repeat {
        let prefix = if repeat > 1 { format!("run {}/{repeat}: ", run + 1) } else { String::new() };
        *label.borrow_mut() = prefix.clone();
        // The previous decode's images are dropped first: they are not part of this one.
        drop(images.take());
        let t1 = Instant::now();
        let decoded = {
            let mut observe = |name: &str, _: &rocm_vision::Tensor| {
                if milestones.iter().any(|m| m == name) {
                    progress.step(&format!("{}{}", label.borrow(), name.trim_start_matches("decoder.")));
                }
            };
            match plan.tile {
                None => decoder.decode(&latents, &mut observe)?,
                Some(spec) => decode_tiled(&decoder, &latents, spec, &mut observe, &mut |i, count| {
                    *label.borrow_mut() = format!("{prefix}tile {}/{count}: ", i + 1);
                })?,
            }
        };
        // Device work is queued asynchronously: the decode is done when the device is idle.
        device.synchronize()?;
        decode_times.push(t1.elapsed().as_secs_f64());
        images = Some(decoded);
    }
    progress.finish();
    // An f16 decode that overflowed says where it recomputed in f32 (the image is right).
    if let Some(line) = decoder.precision_stats().summary() {
        eprintln!("note: {line}");
    }
    let images = images.expect("at least one decode");
    let decode_s = if repeat > 1 {
        let mut warm = decode_times[1..].to_vec();
        warm.sort_by(f64::total_cmp);
        let median = warm[warm.len() / 2];
        eprintln!(
            "decode times: {} ms; median of decodes 2..{repeat}: {:.1} ms",
            decode_times.iter().map(|t| format!("{:.1}", t * 1e3)).collect::<Vec<_>>().join(", "),
            median * 1e3
        );
        median
    } else {
        decode_times[0]
    };
    for (i, path) in outs.iter().enumerate() {
        write_png(&images.narrow(0, i, 1)?, path, args.force)?;
    }
    let peak = match device.peak_memory() {
        Some(b) => format!(
            "peak device memory {} ({} live)",
            format_bytes(b),
            format_bytes(device.peak_live_memory().unwrap_or(b))
        ),
        None => format!("peak RSS {}", peak_rss_bytes().map_or("unknown".to_string(), format_bytes)),
    };
    println!(
        "wrote {} in {:.2} s (load {:.2} s, decode {:.3} s{}); {peak}",
        outs.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "),
        t0.elapsed().as_secs_f64(),
        load_s,
        decode_s,
        if repeat > 1 { format!(", median of decodes 2..{repeat}") } else { String::new() }
    );
    Ok(())
}

/// `MemAvailable` of /proc/meminfo, for a `--vram-budget` given as a percentage.
fn host_available_bytes() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
            l.split_whitespace().nth(1)?.parse::<usize>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}
