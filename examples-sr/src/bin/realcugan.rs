//! `realcugan`: Real-CUGAN super-resolution of images or directories of images.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use conv_engine::{Budget, format_bytes};
use examples_sr::Error;
use examples_sr::image_io::{self, Format};
use examples_sr::models::{self, ModelKind, Variant};
use examples_sr::upscale::{Options, TileSize, Upscaler};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rocm_vision::{DType, Device};

const AFTER_HELP: &str = "\
Models: the ncnn Real-CUGAN models are not in the repository; `scripts/fetch-models.sh` (run from
the repository root) downloads them into models/. Looked up in --model-dir, else $REALCUGAN_MODELS,
else ./models. Available: se: 2x (-n -1, 0, 1, 2, 3), 3x and 4x (-n -1, 0, 3); pro: 2x and 3x
(-n -1, 0, 3); nose: 2x (-n 0).

Tiling is lossless: tiles carry their context pixels and the SE blocks' means are computed over the
whole image (in passes over the tiles), so the output is bit-identical to an untiled run. Between
passes each tile's state is kept within --cache-budget, or recomputed from the input.

Output: PNG keeps 16-bit input at 16 bits and the alpha channel (alpha is upscaled bicubically, as
realcugan-ncnn-vulkan does); JPEG output is 8-bit without alpha; WebP output is 8-bit lossless.
An existing output is never replaced without --force, and is replaced only once the new file is
completely written.

Example:  realcugan -i photo.png -o photo-2x.png -s 2 -n 0";

/// Real-CUGAN super-resolution (se / pro / nose models) on the CPU.
#[derive(Parser, Debug)]
#[command(name = "realcugan", version, after_help = AFTER_HELP)]
struct Cli {
    /// Input image (PNG 8/16-bit, JPEG, WebP; RGB, RGBA or grey), or a directory: every
    /// .png/.jpg/.jpeg/.webp file in it is upscaled.
    #[arg(short = 'i', long = "input", value_name = "PATH")]
    input: PathBuf,

    /// Output image (format from its extension: png, jpg/jpeg, webp), or a directory when
    /// the input is one (created if missing; files named after the inputs, see --format).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    output: PathBuf,

    /// Upscaling factor: 2, 3 or 4.
    #[arg(short = 's', long = "scale", default_value_t = 2, value_name = "N")]
    scale: u32,

    /// Denoise level: -1 conservative, 0 no denoising, 1 / 2 / 3 denoise 1x / 2x / 3x (not
    /// every model has every level; see below).
    #[arg(short = 'n', long = "noise", default_value_t = -1, allow_negative_numbers = true, value_name = "N")]
    noise: i32,

    /// Model family: se, pro or nose.
    #[arg(long = "model", default_value = "se", value_name = "NAME")]
    model: ModelKind,

    /// Directory holding models-se/, models-pro/ and models-nose/ [default: $REALCUGAN_MODELS,
    /// else ./models]
    #[arg(long = "model-dir", value_name = "DIR")]
    model_dir: Option<PathBuf>,

    /// Where to run: auto (a ROCm GPU if one is usable, else the CPU), cpu, rocm or rocm:N.
    #[arg(long = "device", default_value = "auto", value_name = "DEVICE")]
    device: String,

    /// Tile size in input pixels per side: auto (the largest that fits --vram-budget), whole
    /// (no tiling) or a number (rounded down to a multiple of 2, or 4 for 3x).
    #[arg(long = "tile", default_value = "auto", value_name = "auto|whole|N")]
    tile: String,

    /// Memory one tile's run may use (its feature maps and temporaries; --tile auto picks
    /// the largest tile within it), e.g. 2GiB, 512MiB, 80% (of free memory).
    #[arg(long = "vram-budget", default_value = "2GiB", value_name = "BYTES")]
    vram_budget: String,

    /// Host memory for tile states kept between the SE passes; states that do not fit are
    /// recomputed (same output, more time). Bytes or a percentage of free memory.
    #[arg(long = "cache-budget", default_value = "50%", value_name = "BYTES")]
    cache_budget: String,

    /// Inference precision: f32, f16 or bf16 (f32 matches ncnn's CPU results).
    #[arg(long = "dtype", default_value = "f32", value_name = "TYPE")]
    dtype: String,

    /// Output format for a directory of inputs: png, jpg or webp.
    #[arg(short = 'f', long = "format", default_value = "png", value_name = "FORMAT")]
    format: String,

    /// Replace existing output files.
    #[arg(long = "force")]
    force: bool,

    /// No progress bars or per-image lines (errors are still printed).
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,
}

/// A failure with the exit code it should give.
struct Failure {
    msg: String,
    code: u8,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let code = if matches!(e, Error::Usage(_)) { 2 } else { 1 };
        Failure { msg: e.to_string(), code }
    }
}

fn usage(msg: impl Into<String>) -> Failure {
    Failure { msg: msg.into(), code: 2 }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.msg);
            ExitCode::from(f.code)
        }
    }
}

struct Job {
    input: PathBuf,
    output: PathBuf,
    format: Format,
}

fn parse_tile(s: &str) -> Result<TileSize, Failure> {
    match s.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(TileSize::Auto),
        "whole" | "none" | "0" => Ok(TileSize::Whole),
        n => n
            .parse::<usize>()
            .map(TileSize::Fixed)
            .map_err(|_| usage(format!("--tile {s:?}: expected auto, whole or a number of pixels"))),
    }
}

fn parse_dtype(s: &str) -> Result<DType, Failure> {
    match s.trim().to_ascii_lowercase().as_str() {
        "f32" | "fp32" | "float32" => Ok(DType::F32),
        "f16" | "fp16" | "float16" => Ok(DType::F16),
        "bf16" | "bfloat16" => Ok(DType::BF16),
        _ => Err(usage(format!("--dtype {s:?}: expected f32, f16 or bf16"))),
    }
}

/// The device and the budget in bytes.
fn open_device(name: &str, budget: Budget) -> Result<(Device, usize, Option<String>), Failure> {
    let bytes = budget.resolve(conv_engine::budget::host_free_bytes);
    let cpu = || examples_sr::cpu_device(Budget::bytes(conv_engine::budget::DEFAULT_CPU_WORKSPACE));
    let t = name.trim().to_ascii_lowercase();
    let dev_err = |e: rocm_vision::Error| Failure { msg: e.to_string(), code: 1 };
    match t.as_str() {
        "cpu" => Ok((cpu(), bytes, None)),
        "auto" => match Device::auto() {
            (d, None) if d.is_rocm() => Ok((Device::rocm_with_budget(0, budget).map_err(dev_err)?, bytes, None)),
            (_, note) => Ok((cpu(), bytes, note)),
        },
        _ => {
            let d = Device::parse(&t).map_err(|e| usage(e.to_string()))?;
            match d.kind() {
                rocm_vision::DeviceKind::Rocm(n) => {
                    Ok((Device::rocm_with_budget(n, budget).map_err(dev_err)?, bytes, None))
                }
                _ => Ok((cpu(), bytes, None)),
            }
        }
    }
}

fn jobs(cli: &Cli) -> Result<Vec<Job>, Failure> {
    let dir_format = Format::from_name(&cli.format)
        .ok_or_else(|| usage(format!("--format {:?}: expected png, jpg or webp", cli.format)))?;
    if !cli.input.exists() {
        return Err(Failure { msg: format!("{}: no such file or directory", cli.input.display()), code: 1 });
    }
    if cli.input.is_dir() {
        if cli.output.exists() && !cli.output.is_dir() {
            return Err(usage(format!(
                "the input {} is a directory, so the output must be one too; {} is a file",
                cli.input.display(),
                cli.output.display()
            )));
        }
        let entries = std::fs::read_dir(&cli.input)
            .map_err(|e| Failure { msg: format!("{}: {e}", cli.input.display()), code: 1 })?;
        let mut inputs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && image_io::is_supported_input(p))
            .collect();
        inputs.sort();
        if inputs.is_empty() {
            return Err(Failure {
                msg: format!("{}: no .png, .jpg, .jpeg or .webp files", cli.input.display()),
                code: 1,
            });
        }
        std::fs::create_dir_all(&cli.output)
            .map_err(|e| Failure { msg: format!("{}: {e}", cli.output.display()), code: 1 })?;
        Ok(inputs
            .into_iter()
            .map(|input| {
                let stem = input.file_stem().unwrap_or_default().to_os_string();
                let output = cli.output.join(stem).with_extension(dir_format.extension());
                Job { input, output, format: dir_format }
            })
            .collect())
    } else {
        let (output, format) = if cli.output.is_dir() {
            let stem = cli.input.file_stem().unwrap_or_default().to_os_string();
            (cli.output.join(stem).with_extension(dir_format.extension()), dir_format)
        } else {
            let f = Format::from_path(&cli.output).ok_or_else(|| {
                usage(format!(
                    "{}: unknown output format (use a .png, .jpg, .jpeg or .webp name)",
                    cli.output.display()
                ))
            })?;
            (cli.output.clone(), f)
        };
        Ok(vec![Job { input: cli.input.clone(), output, format }])
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

fn run(cli: &Cli) -> Result<(), Failure> {
    let variant = Variant::new(cli.model, cli.scale, cli.noise)?;
    let tile = parse_tile(&cli.tile)?;
    let dtype = parse_dtype(&cli.dtype)?;
    let parse_budget = |s: &str| -> Result<Budget, Failure> {
        s.parse().map_err(|e: conv_engine::budget::BudgetParseError| usage(e.to_string()))
    };
    let budget = parse_budget(&cli.vram_budget)?;
    let cache_bytes = parse_budget(&cli.cache_budget)?.resolve(conv_engine::budget::host_free_bytes);
    let jobs = jobs(cli)?;

    // Refuse overwrites before any work, so a batch does not stop half-way for it.
    let total = jobs.len();
    let mut failures = 0usize;
    let mut todo = Vec::new();
    for job in jobs {
        let refusal = if same_file(&job.input, &job.output) {
            Some(format!("{}: the output would replace its own input; choose another name", job.output.display()))
        } else if job.output.exists() && !cli.force {
            Some(format!("{} exists; use --force to overwrite it", job.output.display()))
        } else {
            None
        };
        match refusal {
            Some(msg) if total == 1 => return Err(Failure { msg, code: 1 }),
            Some(msg) => {
                eprintln!("error: {msg}");
                failures += 1;
            }
            None => todo.push(job),
        }
    }
    if todo.is_empty() {
        return Err(Failure { msg: format!("nothing to do: all {failures} outputs exist"), code: 1 });
    }

    let (device, budget_bytes, note) = open_device(&cli.device, budget)?;
    if let (Some(note), false) = (note, cli.quiet) {
        // The first line says why (e.g. no ROCm runtime); the rest lists the paths tried.
        eprintln!("note: {}", note.lines().next().unwrap_or_default());
    }
    // The first run on a machine compiles the GPU kernels (in parallel; said on stderr).
    if cli.quiet { device.warm_kernels(&|_| ()) } else { device.warm_kernels_verbose() }
        .map_err(|e| Failure { msg: e.to_string(), code: 1 })?;
    let model_dir = models::model_dir(cli.model_dir.as_deref());
    let upscaler = variant.load(&model_dir, dtype, &device)?;
    let opts = Options { tile, budget_bytes, cache_bytes };

    let bars = MultiProgress::with_draw_target(if cli.quiet {
        ProgressDrawTarget::hidden()
    } else {
        ProgressDrawTarget::stderr()
    });
    let overall = (todo.len() > 1).then(|| {
        let b = bars.add(ProgressBar::new(todo.len() as u64));
        b.set_style(
            ProgressStyle::with_template("images [{bar:30}] {pos}/{len} ({elapsed}, eta {eta})")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    });
    for job in &todo {
        if let Err(e) = process(job, &upscaler, &opts, &variant, &bars, cli, &device) {
            // Errors about the file itself already name it.
            let msg = e.to_string();
            let shown = job.input.display().to_string();
            say(
                &bars,
                if msg.starts_with(&shown) { format!("error: {msg}") } else { format!("error: {shown}: {msg}") },
            );
            failures += 1;
        }
        if let Some(b) = &overall {
            b.inc(1);
        }
    }
    if let Some(b) = overall {
        b.finish();
    }
    match failures {
        0 => Ok(()),
        // The one error was printed already.
        _ if total == 1 => Err(Failure { msg: "1 image failed".into(), code: 1 }),
        _ => Err(Failure { msg: format!("{failures} of {total} images failed"), code: 1 }),
    }
}

fn process(
    job: &Job,
    up: &Upscaler,
    opts: &Options,
    variant: &Variant,
    bars: &MultiProgress,
    cli: &Cli,
    device: &Device,
) -> Result<(), Error> {
    let started = Instant::now();
    let img = image_io::load(&job.input)?;
    let plan = up.plan(img.width, img.height, opts)?;
    let (tw, th) = plan.tile_size();
    let bar = bars.add(ProgressBar::new(0));
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} tile runs, {msg} ({elapsed}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(job.input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    let upscale_started = Instant::now();
    let (out, stats) = up.upscale_with_stats(&img, &plan, &mut |p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(format!("pass {}/{}", p.pass, p.passes));
    })?;
    let upscale_s = upscale_started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    bars.remove(&bar);
    image_io::save(&out, &job.output, job.format)?;
    if !cli.quiet {
        let dropped =
            if img.has_alpha() && job.format == Format::Jpeg { " (alpha dropped: JPEG has none)" } else { "" };
        say(
            bars,
            format!(
                "{} ({}x{}, {}-bit{}) -> {} ({}x{}){dropped}: {variant}, {} tile(s) of {}x{} (~{} each), {} SE pass(es){}, \
             {:.2} s (upscale {:.3} s: input {:.3}, network {:.3}, output {:.3}){}",
                job.input.display(),
                img.width,
                img.height,
                img.bit_depth(),
                if img.has_alpha() { " RGBA" } else { "" },
                job.output.display(),
                out.width,
                out.height,
                stats.tiles,
                tw,
                th,
                format_bytes(plan.tile_bytes),
                stats.passes - 1,
                if stats.recomputed > 0 {
                    format!(" ({} tile runs recomputed: raise --cache-budget to keep them)", stats.recomputed)
                } else {
                    String::new()
                },
                started.elapsed().as_secs_f64(),
                upscale_s,
                stats.input_time.as_secs_f64(),
                stats.network_time.as_secs_f64(),
                stats.output_time.as_secs_f64(),
                // On ROCm: the allocator's peak since the device was opened (all images so far).
                // Held from HIP (the allocator's cache included), then what was live at once.
                device.peak_memory().zip(device.peak_live_memory()).map_or(String::new(), |(held, live)| {
                    format!(", peak device memory {} ({} live)", format_bytes(held), format_bytes(live))
                })
            ),
        );
    }
    Ok(())
}

/// A line above the progress bars, or on stderr when there are none (not a terminal, -q).
fn say(bars: &MultiProgress, line: String) {
    if bars.is_hidden() {
        eprintln!("{line}");
    } else {
        let _ = bars.println(line);
    }
}
