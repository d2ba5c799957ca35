//! `realcugan`: Real-CUGAN super-resolution of images or directories of images.

mod jobs;
mod opts;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use conv_engine::{Budget, format_bytes};
use examples_sr::Error;
use examples_sr::image_io::{self, Format};
use examples_sr::models::{self, ModelKind, ModelLocation, Variant};
use examples_sr::upscale::{Options, TilePlan, TileSize, Upscaler};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use rocm_vision::Device;

use jobs::Job;
use opts::usage;

/// Large freed blocks are reused instead of returned (no first-touch page faults for a
/// map of a size seen before; see `rocm_vision::host_alloc`).
#[global_allocator]
static ALLOC: rocm_vision::host_alloc::ReusingAllocator = rocm_vision::host_alloc::ReusingAllocator::new();

const AFTER_HELP: &str = "\
Models: the ncnn Real-CUGAN models are not in the repository; `scripts/fetch-models.sh` (run from
the repository root) downloads them into models/. Looked up in --model-dir, else $REALCUGAN_MODELS,
else ./models. Available: se: 2x (-n -1, 0, 1, 2, 3), 3x and 4x (-n -1, 0, 3); pro: 2x and 3x
(-n -1, 0, 3); nose: 2x (-n 0).

Tiling is lossless: tiles carry their context pixels and the SE blocks' means are computed over the
whole image (in passes over the tiles), so the output is bit-identical to an untiled run. Between
passes each tile's state is kept within --cache-budget, or recomputed from the input.

Output: PNG keeps 16-bit input at 16 bits and the alpha channel (alpha is upscaled bicubically, as
realcugan-ncnn-vulkan does); a grey input gives a grey output; JPEG output is 8-bit without alpha;
WebP output is 8-bit lossless. An existing output is never replaced without --force, an input never
(two inputs that would write the same output, or an output that would replace an input, stop the
run before any work), and an output is replaced only once the new file is completely written. On
Ctrl-C / SIGTERM the partial file is removed and the tool says how many outputs were completed.

realcugan-ncnn-vulkan's options work as there: -i -o -s -n -t (0 = auto) -m (a models-se/-pro/-nose
folder, or their parent) -g (-1 = CPU) -j load:proc:save (proc = CPU threads) -x (TTA) -c (accepted;
the SE means are always exact) -f -v.

Exit status: 0 done; 1 the run failed (a file, a device, an image); 2 the command line cannot work;
130 / 143 interrupted by SIGINT / SIGTERM.

Example:  realcugan -i photo.png -o photo-2x.png -s 2 -n 0";

/// Real-CUGAN super-resolution (se / pro / nose models) on a ROCm GPU or the CPU.
#[derive(Parser, Debug)]
#[command(name = "realcugan", version, after_help = AFTER_HELP)]
struct Cli {
    /// Input image (PNG 8/16-bit, JPEG, WebP; RGB, RGBA or grey), or a folder: every
    /// .png/.jpg/.jpeg/.webp file in it is upscaled.
    #[arg(short = 'i', long = "input", value_name = "PATH")]
    input: PathBuf,

    /// Output image (format from its extension: png, jpg/jpeg, webp), or a folder when the
    /// input is one (created if missing; files named after the inputs, see --format).
    #[arg(short = 'o', long = "output", value_name = "PATH")]
    output: PathBuf,

    /// Upscaling factor: 2, 3 or 4.
    #[arg(short = 's', long = "scale", default_value_t = 2, value_name = "N")]
    scale: u32,

    /// Denoise level: -1 conservative, 0 no denoising, 1 / 2 / 3 denoise 1x / 2x / 3x (not
    /// every model has every level; see below).
    #[arg(short = 'n', long = "noise", default_value_t = -1, allow_negative_numbers = true, value_name = "N")]
    noise: i32,

    /// Model family: se, pro or nose (a models-* folder given to -m names it) [default: se]
    #[arg(long = "model", value_name = "NAME")]
    model: Option<ModelKind>,

    /// Folder holding models-se/, models-pro/ and models-nose/, or one of those folders
    /// itself (as realcugan-ncnn-vulkan's -m) [default: $REALCUGAN_MODELS, else ./models]
    #[arg(short = 'm', long = "model-dir", value_name = "DIR")]
    model_dir: Option<PathBuf>,

    /// Where to run: auto (a ROCm GPU if one is usable, else the CPU), cpu, rocm or rocm:N
    /// [default: auto]
    #[arg(long = "device", value_name = "DEVICE")]
    device: Option<String>,

    /// GPU index as realcugan-ncnn-vulkan's -g: N = rocm:N, -1 = the CPU.
    #[arg(short = 'g', long = "gpu-id", allow_negative_numbers = true, value_name = "ID")]
    gpu_id: Option<String>,

    /// Tile size in input pixels per side: auto (or 0: the fastest that fits --vram-budget),
    /// whole (no tiling) or a number (rounded down to the model's tile alignment: on the CPU
    /// 8, or 16 for 3x, which keeps Winograd's transform grid; on a GPU 2, or 4 for 3x; then
    /// the image is split into equal tiles of at most that size).
    #[arg(short = 't', long = "tile", default_value = "auto", value_name = "auto|0|whole|N")]
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

    /// Output format for a folder of inputs: png, jpg or webp.
    #[arg(short = 'f', long = "format", default_value = "png", value_name = "FORMAT")]
    format: String,

    /// Thread counts load:proc:save as realcugan-ncnn-vulkan's -j: proc sets the CPU threads
    /// of the upscale; load and save are accepted (images are read and written one at a
    /// time) [default: all cores for proc]
    #[arg(short = 'j', long = "threads", value_name = "L:P:S")]
    threads: Option<String>,

    /// TTA mode: upscale the 8 flips/rotations of the image and average them, as
    /// realcugan-ncnn-vulkan's -x (8 times the work).
    #[arg(short = 'x', long = "tta")]
    tta: bool,

    /// realcugan-ncnn-vulkan's syncgap mode 0-3, accepted for compatibility: the SE blocks'
    /// means are always synchronised exactly over the whole image (its mode 1), so the
    /// output does not depend on the tiling.
    #[arg(short = 'c', long = "syncgap", value_name = "MODE", allow_negative_numbers = true)]
    syncgap: Option<i32>,

    /// Replace existing output files (never an input of the same run).
    #[arg(long = "force")]
    force: bool,

    /// Say more: model file, device, threads, how the tile size was chosen.
    #[arg(short = 'v', long = "verbose", conflicts_with = "quiet")]
    verbose: bool,

    /// Print, after each image, where the network's time went per kind of operation and
    /// its five slowest convolution layers. The times are the host's: on the CPU the work
    /// itself, on a GPU the time spent issuing it (the kernels run behind), which shows
    /// whether the host keeps the GPU waiting.
    #[arg(long = "profile")]
    profile: bool,

    /// No progress bars or per-image lines (errors are still printed).
    #[arg(short = 'q', long = "quiet")]
    quiet: bool,

    /// Time the candidate kernels of the network's convolutions on this GPU, at most
    /// SECONDS in all (what is left untuned keeps the cost model's choice), while the
    /// first image is upscaled, and keep the winners in the tuning store
    /// ($ROCM_VISION_TUNING, else ~/.cache/rocm-vision/tuning.tsv) for every later run on
    /// this GPU and library version. Only kernels that round alike are compared, so the
    /// output does not change. Without it nothing is timed; stored winners are used.
    #[arg(long = "tune", value_name = "SECONDS")]
    tune: Option<f64>,
}

/// A failure with the exit code it should give.
pub struct Failure {
    msg: String,
    code: u8,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        let code = if matches!(e, Error::Usage(_)) { cli_support::exit::USAGE } else { cli_support::exit::FAILED };
        // One line of what to do after the message, where the library knows it (issue 13.2).
        let msg = match &e {
            Error::Tensor(lib) => match lib.hint() {
                Some(hint) => format!("{e}\n  hint: {hint}"),
                None => e.to_string(),
            },
            _ => e.to_string(),
        };
        Failure { msg, code }
    }
}

fn failed(msg: impl Into<String>) -> Failure {
    Failure { msg: msg.into(), code: cli_support::exit::FAILED }
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

/// The device and the budget in bytes. An unknown device name is a usage error; a device
/// that is named right but cannot be opened (no ROCm) is a failed run.
fn open_device(name: &str, budget: Budget) -> Result<(Device, usize, Option<String>), Failure> {
    let bytes = budget.resolve(conv_engine::budget::host_free_bytes);
    let cpu = || examples_sr::cpu_device(Budget::bytes(conv_engine::budget::DEFAULT_CPU_WORKSPACE));
    let t = name.trim().to_ascii_lowercase();
    let dev_err = |e: rocm_vision::Error| match e {
        rocm_vision::Error::DeviceParse { .. } => usage(format!("{e} (expected auto, cpu, rocm or rocm:N)")),
        e => failed(e.to_string()),
    };
    let ordinal = match t.as_str() {
        "cpu" => return Ok((cpu(), bytes, None)),
        "auto" => match Device::auto() {
            (d, None) if d.is_rocm() => 0,
            (_, note) => return Ok((cpu(), bytes, note)),
        },
        "rocm" | "gpu" => 0,
        other => match other.strip_prefix("rocm:").map(str::parse::<usize>) {
            Some(Ok(n)) => n,
            _ => return Err(dev_err(rocm_vision::Error::DeviceParse { input: name.to_string() })),
        },
    };
    Ok((Device::rocm_with_budget(ordinal, budget).map_err(dev_err)?, bytes, None))
}

/// How the tile size was arrived at, for the summary line.
fn tile_note(requested: TileSize, plan: &TilePlan, multiple: usize, align: usize, budget: usize) -> String {
    let (tw, th) = plan.tile_size();
    let grid = format!("{}x{} tile(s)", plan.cols.len(), plan.rows.len());
    let (wr, hr) = (plan.cols.last().map_or(0, |c| c.end), plan.rows.last().map_or(0, |r| r.end));
    match requested {
        TileSize::Whole => format!("whole image: 1 tile of {tw}x{th}"),
        TileSize::Fixed(n) if plan.tiles() == 1 => format!("tile {n}: 1 tile of {tw}x{th} (the image fits in one)"),
        TileSize::Fixed(n) if (tw, th) == (n, n) => format!("tile {n}: {grid} of {tw}x{th}"),
        TileSize::Fixed(n) => format!(
            "tile {n} -> {grid} of at most {tw}x{th}: the image, rounded up to {wr}x{hr} (a multiple of {multiple}), \
             split into equal tiles no larger than {} (origins and sizes on multiples of {align})",
            n / align * align
        ),
        TileSize::Auto if plan.tiles() == 1 => {
            format!("tile auto -> 1 tile of {tw}x{th}: the whole image fits --vram-budget {}", format_bytes(budget))
        }
        TileSize::Auto => format!(
            "tile auto -> {grid} of {tw}x{th}: the fastest split whose tile fits --vram-budget {}",
            format_bytes(budget)
        ),
    }
}

fn run(cli: &Cli) -> Result<(), Failure> {
    // Before anything is written: Ctrl-C / SIGTERM remove partial files and say what was done.
    cli_support::partial::install_signal_handler("realcugan")
        .map_err(|e| failed(format!("cannot install the signal handler: {e}")))?;
    let syncgap = cli.syncgap.map(opts::check_syncgap).transpose()?;
    let location = ModelLocation::of(&models::model_dir(cli.model_dir.as_deref()));
    let kind = match (&location, cli.model) {
        (ModelLocation::Family { kind: Some(k), dir }, Some(m)) if *k != m => {
            return Err(usage(format!(
                "--model {m} and the model folder {} disagree; give one of them",
                dir.display()
            )));
        }
        (ModelLocation::Family { kind: Some(k), .. }, _) => *k,
        (_, m) => m.unwrap_or(ModelKind::Se),
    };
    let variant = Variant::new(kind, cli.scale, cli.noise)?;
    let tile = opts::parse_tile(&cli.tile)?;
    let dtype = opts::parse_dtype(&cli.dtype)?;
    let parse_budget = |s: &str| -> Result<Budget, Failure> {
        s.parse().map_err(|e: conv_engine::budget::BudgetParseError| usage(e.to_string()))
    };
    let budget = parse_budget(&cli.vram_budget)?;
    let cache_bytes = parse_budget(&cli.cache_budget)?.resolve(conv_engine::budget::host_free_bytes);
    let device_name = opts::device_name(cli.device.as_deref(), cli.gpu_id.as_deref())?;
    let threads = cli.threads.as_deref().map(opts::parse_threads).transpose()?;
    let dir_format = Format::from_name(&cli.format)
        .ok_or_else(|| usage(format!("--format {:?}: expected png, jpg or webp", cli.format)))?;
    if let Some(n) = threads {
        // Before the first parallel loop; the conv engine's CPU work runs on this pool.
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .map_err(|e| failed(format!("-j: cannot start {n} threads: {e}")))?;
    }

    // Every refusal about files before any work, so a batch does not stop half-way.
    let planned = jobs::plan(&cli.input, &cli.output, dir_format, cli.force)?;
    // Partial files of earlier runs that were killed: removed, or named if still being written.
    for found in cli_support::stale::sweep(planned.folders.iter().map(PathBuf::as_path)) {
        eprintln!("note: {}", found.message());
    }
    let total = planned.total;
    let mut failures = planned.refused.len();
    for msg in &planned.refused {
        if total > 1 {
            eprintln!("error: {msg}");
        }
    }
    let todo = planned.todo;
    if todo.is_empty() {
        return Err(failed(match (total, planned.exist) {
            (1, _) => planned.refused.into_iter().next().unwrap_or_default(),
            (n, e) if e == n => format!("nothing to do: all {n} outputs exist (use --force to replace them)"),
            (n, _) => format!("nothing to do: all {n} outputs were refused (see above)"),
        }));
    }
    cli_support::partial::set_total(todo.len());

    let (device, budget_bytes, note) = open_device(&device_name, budget)?;
    if let (Some(note), false) = (note, cli.quiet) {
        // The first line says why (e.g. no ROCm runtime); the rest lists the paths tried.
        eprintln!("note: {}", note.lines().next().unwrap_or_default());
    }
    // The first run on a machine compiles the GPU kernels (in parallel; said on stderr).
    if cli.quiet { device.warm_kernels(&|_| ()) } else { device.warm_kernels_verbose() }
        .map_err(|e| failed(e.to_string()))?;
    if let Some(seconds) = cli.tune {
        if !(seconds.is_finite() && seconds > 0.0) {
            return Err(usage(format!("--tune {seconds}: the time limit must be a positive number of seconds")));
        }
        device.start_tuning(std::time::Duration::from_secs_f64(seconds)).map_err(|e| usage(format!("--tune: {e}")))?;
        if !cli.quiet {
            eprintln!("tuning: timing each convolution's candidate kernels, at most {seconds:.0} s in all");
        }
    }
    let mut tuning = cli.tune.is_some();
    let upscaler = variant.load_from(&location, dtype, &device)?;
    if cli.verbose {
        eprintln!(
            "model {} on {device} ({dtype:?}), {} CPU thread(s){}{}",
            variant.paths_in(&location.family_dir(variant.kind)).0.display(),
            rayon::current_num_threads(),
            if cli.tta { ", TTA (8 flips/rotations averaged)" } else { "" },
            syncgap.map_or(String::new(), |s| format!("; {s}")),
        );
    }
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
        // The first image timed the candidates; the rest run the winners.
        if std::mem::take(&mut tuning) {
            match device.finish_tuning() {
                Ok(Some(report)) if !cli.quiet => say(&bars, format!("tuning:\n{report}")),
                Ok(_) => {}
                Err(e) => say(&bars, format!("error: --tune: {e}")),
            }
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
        _ if total == 1 => Err(failed("1 image failed")),
        _ => Err(failed(format!("{failures} of {total} images failed or were refused"))),
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
    let bar = bars.add(ProgressBar::new(0));
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} tile runs, {msg} ({elapsed}, eta {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar.set_prefix(job.input.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
    let upscale_started = Instant::now();
    let mut progress = |p: examples_sr::upscale::Progress| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
        bar.set_message(format!("pass {}/{}", p.pass, p.passes));
    };
    if cli.profile {
        up.network().enable_profiling();
    }
    let (out, stats) = if cli.tta {
        up.upscale_tta_with_stats(&img, &plan, &mut progress)?
    } else {
        up.upscale_with_stats(&img, &plan, &mut progress)?
    };
    let upscale_s = upscale_started.elapsed().as_secs_f64();
    if let Some(p) = up.network().take_profile() {
        say(bars, profile_line(&p, stats.network_time));
    }
    bar.finish_and_clear();
    bars.remove(&bar);
    image_io::save_as(&out, &job.output, job.format, cli.force)?;
    if !cli.quiet {
        let dropped =
            if img.has_alpha() && job.format == Format::Jpeg { " (alpha dropped: JPEG has none)" } else { "" };
        let kind = match (img.grey, img.has_alpha()) {
            (false, false) => "RGB",
            (false, true) => "RGBA",
            (true, false) => "grey",
            (true, true) => "grey+alpha",
        };
        // The bar's "pass k/N" counts every pass over the tiles: one per SE block, then the
        // last one to the output.
        let passes = match stats.passes {
            1 => "1 pass (no SE blocks)".to_string(),
            n => format!("{n} passes ({} for the SE means)", n - 1),
        };
        say(
            bars,
            format!(
                "{} ({}x{}, {}-bit {kind}) -> {} ({}x{}){dropped}: {variant}{}, {} (~{} each), {passes}{}, \
                 {:.2} s (upscale {:.3} s: input {:.3}, network {:.3}, output {:.3}){}",
                job.input.display(),
                img.width,
                img.height,
                img.bit_depth(),
                job.output.display(),
                out.width,
                out.height,
                if cli.tta { " with TTA (x8)" } else { "" },
                tile_note(opts.tile, &plan, up.multiple(), up.tile_align(), opts.budget_bytes),
                format_bytes(plan.tile_bytes),
                match (stats.recomputed, stats.shed_maps) {
                    (0, 0) => String::new(),
                    (0, s) => format!(" ({s} maps shed from parked states and rebuilt)"),
                    (r, 0) => format!(" ({r} tile runs recomputed: raise --cache-budget to keep them)"),
                    (r, s) => format!(
                        " ({r} tile runs recomputed: raise --cache-budget to keep them; {s} maps shed and rebuilt)"
                    ),
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
    // Its memory becomes the next image's output.
    up.recycle(out);
    Ok(())
}

/// `--profile`'s summary of one image.
fn profile_line(p: &examples_sr::net::Profile, network: std::time::Duration) -> String {
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let mut layers = p.layers.clone();
    layers.sort_by(|a, b| b.time.cmp(&a.time));
    let top: Vec<String> =
        layers.iter().take(5).map(|l| format!("{} {} {:.2} ms", l.name, l.what, ms(l.time))).collect();
    format!(
        "profile (host time; on a GPU the time spent issuing the work): network {:.2} ms, of it conv {:.2}, \
         deconv {:.2}, activation {:.2}, binary {:.2}, reshape {:.2}, SE {:.2} (sum {:.2}); slowest layers: {}",
        ms(network),
        ms(p.conv),
        ms(p.deconv),
        ms(p.activation),
        ms(p.binary),
        ms(p.reshape),
        ms(p.se),
        ms(p.total()),
        top.join("; ")
    )
}

/// A line above the progress bars, or on stderr when there are none (not a terminal, -q).
fn say(bars: &MultiProgress, line: String) {
    if bars.is_hidden() {
        eprintln!("{line}");
    } else {
        let _ = bars.println(line);
    }
}
