//! `sd-vae-decode`: latents in, PNG out, with the SD 1.x/2.x, SDXL, SD3 or FLUX VAE.

use anyhow::{Context, Result, bail};
use clap::Parser;
use examples_sd::cli::{self, Progress, check_not_inputs, parse_dtype, usage};
use examples_sd::io::{check_outputs, load_latents, output_paths, write_png};
use examples_sd::{Decoder, MemoryPlan, TileSpec, VaeConfig, decode_tiled};
use rocm_vision::{Budget, ConvRounding, DType, Device, DeviceKind, Weights, format_bytes};
use std::cell::RefCell;
use std::path::PathBuf;
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
    #[command(flatten)]
    setup: cli::VaeArgs,
    /// Memory budget for the decode (weights, activations and scratch): 12GiB, 800MiB,
    /// 80% (of free memory). On the CPU this is host memory. Without it, no fit check
    /// and default scratch sizes.
    #[arg(long, alias = "budget")]
    vram_budget: Option<String>,
    /// Decode exactly in bands of output rows even where the whole decode fits (it is
    /// chosen by itself when the exact decode does not fit --vram-budget): the same image,
    /// with each layer's working tensors a band at a time and the whole feature maps on
    /// the device or, past the budget, in host memory. --plan prints its plan.
    #[arg(long, conflicts_with = "tiled")]
    banded: bool,
    /// Round every convolution independently of its size (ConvRounding::SizeIndependent)
    /// and normalise with exact statistics: a banded decode then gives the unbanded
    /// decode's image bit for bit. Without it each convolution takes the fastest algorithm
    /// for its size, and bands may differ from the whole decode by the dtype's rounding.
    #[arg(long)]
    size_independent_rounding: bool,
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
    cli::main(Args::parse(), run);
}

/// `--plan`: the memory plan of the decode, on stdout, without decoding.
fn run_plan(args: &Args, config: &VaeConfig, dtype: DType, device: &Device, budget: Option<usize>) -> Result<()> {
    let up = config.upscale();
    let (width, height) = match (&args.size, &args.latents) {
        (Some(s), _) => cli::parse_size(s)?,
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
    if !plan.fits || args.banded {
        println!(
            "{}",
            Decoder::plan_banded(config, &device, (width, height), dtype, budget)?
                .with_disk_dir(args.setup.scratch_dir()?)
        );
    }
    Ok(())
}

/// The device a decode runs on: on the CPU the budget caps the conv engine's workspace
/// (what is left after weights and activations); on ROCm the device allocator enforces
/// the whole budget.
fn run_device(probe: Device, conv_workspace: Option<usize>, budget: Option<usize>) -> Result<Device> {
    Ok(match (probe.kind(), conv_workspace, budget) {
        (DeviceKind::Cpu, Some(ws), _) => Device::cpu_with_budget(Budget::bytes(ws)),
        (DeviceKind::Rocm(i), _, Some(b)) => Device::rocm_with_budget(i, Budget::bytes(b))?,
        _ => probe,
    })
}

fn run(args: Args) -> Result<()> {
    let t0 = Instant::now();
    // Before anything is written: Ctrl-C / SIGTERM remove partial files and say what was done.
    cli_support::partial::install_signal_handler("sd-vae-decode")?;
    let dtype = parse_dtype(&args.setup.dtype)?;
    let config = cli::vae_config(args.setup.config.as_deref(), args.setup.model.as_deref())?;
    // Fail on a device we do not have before reading anything large.
    let probe = cli::probe_device(&args.setup.device)?;
    let budget = cli::parse_budget(args.vram_budget.as_deref())?;
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
    inputs.extend(args.setup.config.as_deref());
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
    // The exact decode whole when it fits; else (or with --banded) in bands, when they
    // fit; a budget that cannot hold either is a usage error, like an impossible tile.
    let up = config.upscale();
    let banded_plan = |whole: String| -> Result<(MemoryPlan, Option<examples_sd::BandedPlan>)> {
        let planning = run_device(probe.clone(), None, budget)?;
        let b = Decoder::plan_banded(&config, &planning, (w * up, h * up), dtype, budget)?
            .with_disk_dir(args.setup.scratch_dir()?);
        if !b.fits {
            return Err(usage(format!("{whole}in bands: {b}")));
        }
        Ok((MemoryPlan::new(&config, dtype, (h, w), None, false, None)?, Some(b)))
    };
    let (mut plan, banded) = match MemoryPlan::new(&config, dtype, (h, w), budget, args.tiled, tile) {
        Ok(plan) if !args.banded => (plan, None),
        // --banded conflicts with --tiled, so a banded plan is never a tiled one (and
        // without --tiled this plan was the whole exact decode's).
        Ok(_) if !args.tiled => banded_plan(String::new())?,
        Err(examples_sd::SdError::Budget(m)) if !args.tiled => banded_plan(format!("{m}; "))?,
        Ok(plan) => (plan, None),
        Err(examples_sd::SdError::Budget(m)) => return Err(usage(m)),
        Err(e) => return Err(e.into()),
    };
    if let (Some(o), Some(t)) = (args.tile_overlap, plan.tile.as_mut()) {
        t.overlap = o;
        t.validate().map_err(usage)?;
    }
    let device = match &banded {
        // The band's share of the budget caps the CPU's conv workspace.
        Some(b) => run_device(probe, budget.map(|_| b.banding.band_bytes), budget)?,
        None => run_device(probe, plan.conv_workspace, plan.budget)?,
    };
    let device =
        if args.size_independent_rounding { device.with_conv_rounding(ConvRounding::SizeIndependent) } else { device };
    // The first run on a machine compiles the GPU kernels (in parallel; said on stderr).
    device.warm_kernels_verbose()?;
    let mut tuning = cli::start_tuning(&device, args.setup.tune)?;
    let weights = Weights::open(&vae, &device)?;
    let mut decoder = Decoder::load(&weights, &config, dtype)?;
    // The decoder holds its own copies: unmapping the file keeps its pages (the weights'
    // size again) out of the resident set while decoding.
    drop(weights);
    decoder.set_scratch_caps(plan.caps);
    if let Some(b) = &banded {
        eprintln!("{b}");
        decoder.set_banding(Some(b.banding.clone()));
    }
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
        budget.map_or("none (library defaults)".to_string(), format_bytes),
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
        // The first decode timed the candidates; later ones run the winners.
        if std::mem::take(&mut tuning) {
            cli::finish_tuning(&device)?;
        }
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
    let mut peak = cli::peak_line(&device);
    if banded.is_some() && !device.is_cpu() {
        // A banded decode keeps maps in host memory: the process's peak says how much.
        // (On the CPU the peak line is the peak RSS already.)
        let rss = examples_sd::peak_rss_bytes().map_or("unknown".to_string(), format_bytes);
        peak = format!("{peak}; peak RSS {rss}");
    }
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
