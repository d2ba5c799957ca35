//! `sd-vae-encode`: an image in, latents out (.safetensors or .npy), with the SD 1.x/2.x,
//! SDXL, SD3 or FLUX VAE encoder: the start of img2img and inpainting.

use anyhow::{Context, Result, bail};
use clap::Parser;
use examples_sd::cli::{self, Progress, check_not_inputs, parse_dtype, usage};
use examples_sd::encode_plan::encode_budget;
use examples_sd::io::{check_latents_output, load_image, load_latents, write_latents};
use examples_sd::{Encoder, SdError, VaeConfig};
use rocm_vision::{Budget, ConvRounding, DType, Device, DeviceKind, Tensor, Weights, format_bytes};
use std::path::PathBuf;
use std::time::Instant;

/// Encode an image to diffusion latents with a Stable Diffusion / FLUX VAE, on a ROCm GPU
/// or the CPU.
///
/// The latents are written as a diffusion model takes them (img2img, inpainting): a sample
/// of the encoder's distribution, `mean + std · noise`, shifted and scaled by the model's
/// factors (`(z − shift) · scaling`), as diffusers' pipelines do. `sd-vae-decode` reads
/// them back. The image's width and height must be multiples of 8.
///
/// Exit status: 0 done; 1 the run failed (a file, a device, the encode); 2 the command line
/// cannot work; 130 / 143 interrupted by SIGINT / SIGTERM (partial files removed).
#[derive(Parser, Debug)]
#[command(name = "sd-vae-encode", version)]
struct Args {
    /// VAE weights (.safetensors) holding the encoder: diffusers or original (CompVis/ldm,
    /// BFL) key layout, optionally under a `first_stage_model.` or `vae.` prefix (a full
    /// SD checkpoint works).
    #[arg(long, required_unless_present = "plan")]
    vae: Option<PathBuf>,
    /// The image: PNG, JPEG or WebP (8- or 16-bit; grey becomes RGB, alpha is dropped).
    /// Width and height must be multiples of 8.
    #[arg(long, required_unless_present = "plan")]
    image: Option<PathBuf>,
    /// Output latents, [1, C, H/8, W/8] f32: .safetensors (one tensor, `latents`) or .npy.
    #[arg(long, required_unless_present = "plan")]
    out: Option<PathBuf>,
    /// Print the memory plan and exit without encoding (nor reading the weights): the peak
    /// bytes the encode will use on the device and whether it fits --vram-budget. The
    /// image size comes from --size, else from --image.
    #[arg(long)]
    plan: bool,
    /// Image size WIDTHxHEIGHT in pixels for --plan (e.g. 1024x1024).
    #[arg(long, requires = "plan", value_name = "WxH")]
    size: Option<String>,
    #[command(flatten)]
    setup: cli::VaeArgs,
    /// Memory budget for the encode (weights, activations and scratch): 12GiB, 800MiB,
    /// 80% (of free memory). On the CPU this is host memory. Without it, no fit check
    /// and default scratch sizes.
    #[arg(long, alias = "budget")]
    vram_budget: Option<String>,
    /// Encode exactly in bands of rows even where the whole encode fits (chosen by itself
    /// when it does not fit --vram-budget): the same latents, with each layer's working
    /// tensors a band at a time and the whole feature maps on the device or, past the
    /// budget, in host memory. --plan prints its plan.
    #[arg(long)]
    banded: bool,
    /// Round every convolution independently of its size and normalise with exact
    /// statistics: a banded encode then gives the unbanded encode's latents bit for bit.
    #[arg(long)]
    size_independent_rounding: bool,
    /// Overwrite an existing output file.
    #[arg(long)]
    force: bool,
    /// Seed of the sample's noise (rocm-vision's Philox generator, the same numbers on
    /// every device; not torch's: for diffusers' exact noise pass --noise). Default: a
    /// seed from the clock, printed.
    #[arg(long, conflicts_with_all = ["noise", "mean"])]
    seed: Option<u64>,
    /// The sample's noise: .safetensors or .npy of the latents' shape ([1, C, H/8, W/8] or
    /// [C, H/8, W/8]), e.g. torch.randn with diffusers' generator.
    #[arg(long, conflicts_with = "mean")]
    noise: Option<PathBuf>,
    /// Tensor name in a --noise .safetensors file (default: the only tensor, or `noise`).
    #[arg(long, requires = "noise")]
    noise_key: Option<String>,
    /// Write the distribution's mean (scaled) instead of a sample: deterministic, as
    /// diffusers' `retrieve_latents(..., sample_mode="argmax")`.
    #[arg(long)]
    mean: bool,
    /// Encode the image N times in this process (for benchmarks). Every encode ends with a
    /// device synchronize; the reported encode time is the median of encodes 2..N (the
    /// first one also loads kernels and makes the first allocations). The latents are
    /// written once, from the last encode.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    repeat: u32,
}

fn main() {
    cli::main(Args::parse(), run);
}

/// `--plan`: the memory plan of the encode, on stdout, without encoding.
fn run_plan(args: &Args, config: &VaeConfig, dtype: DType, device: &Device, budget: Option<usize>) -> Result<()> {
    let (width, height) = match (&args.size, &args.image) {
        (Some(s), _) => cli::parse_size(s)?,
        (None, Some(path)) => {
            let (img, _) = load_image(path, &Device::cpu())?;
            (img.dims()[3], img.dims()[2])
        }
        (None, None) => return Err(usage("--plan needs the image size: --size WIDTHxHEIGHT or --image")),
    };
    let device = match (device.kind(), budget) {
        (DeviceKind::Rocm(i), Some(b)) => Device::rocm_with_budget(i, Budget::bytes(b))?,
        _ => device.clone(),
    };
    let plan = Encoder::plan(config, &device, (width, height), dtype, budget).map_err(|e| match e {
        SdError::ImageShape(m) => usage(m),
        e => e.into(),
    })?;
    println!("{plan}");
    if !plan.fits || args.banded {
        println!(
            "{}",
            Encoder::plan_banded(config, &device, (width, height), dtype, budget)?
                .with_disk_dir(args.setup.scratch_dir()?)
        );
    }
    Ok(())
}

/// The sample's noise `[1, C, h, w]`: the --noise file, or drawn from the seed.
fn noise(args: &Args, channels: usize, (h, w): (usize, usize), device: &Device) -> Result<Tensor> {
    let shape = [1, channels, h, w];
    let Some(path) = &args.noise else {
        let seed = args.seed.unwrap_or_else(|| {
            let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
            let seed = t.as_nanos() as u64 ^ u64::from(std::process::id());
            eprintln!("note: sampling with --seed {seed}");
            seed
        });
        return Ok(Tensor::rand_normal(&shape, (0.0, 1.0), seed, 0, DType::F32, device)?);
    };
    let key = match (&args.noise_key, path.extension().and_then(|e| e.to_str())) {
        (Some(k), _) => Some(k.clone()),
        // A file holding several tensors: `noise`, when there is one.
        (None, Some(ext)) if ext.eq_ignore_ascii_case("safetensors") => {
            let w = Weights::open(path, &Device::cpu())?;
            (w.keys().count() > 1 && w.contains("noise")).then(|| "noise".to_string())
        }
        _ => None,
    };
    let n = load_latents(path, key.as_deref(), device).map_err(|e| match e {
        SdError::Latents(m) => anyhow::anyhow!("--noise {}", m.replace("latents", "noise")),
        e => e.into(),
    })?;
    let n = if n.rank() == 3 { n.reshape(&[&[1], n.dims()].concat())? } else { n };
    if n.dims() != shape {
        bail!(
            "{}: the noise has shape {:?}, but this image's latents are {shape:?} (its width and height / 8)",
            path.display(),
            n.dims()
        );
    }
    let bad = n.to_vec::<f32>()?.iter().filter(|v| !v.is_finite()).count();
    if bad > 0 {
        bail!("{}: {bad} of {} noise values are NaN or infinite", path.display(), n.elem_count());
    }
    Ok(n)
}

fn run(args: Args) -> Result<()> {
    let t0 = Instant::now();
    // Before anything is written: Ctrl-C / SIGTERM remove partial files and say what was done.
    cli_support::partial::install_signal_handler("sd-vae-encode")?;
    let dtype = parse_dtype(&args.setup.dtype)?;
    let config = cli::vae_config(args.setup.config.as_deref(), args.setup.model.as_deref())?;
    // Fail on a device we do not have before reading anything large.
    let probe = cli::probe_device(&args.setup.device)?;
    let budget = cli::parse_budget(args.vram_budget.as_deref())?;
    if args.plan {
        return run_plan(&args, &config, dtype, &probe, budget);
    }
    let (vae, image_path, out) = (
        args.vae.clone().expect("clap requires --vae without --plan"),
        args.image.clone().expect("clap requires --image without --plan"),
        args.out.clone().expect("clap requires --out without --plan"),
    );
    let ext = out.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    if !matches!(ext.as_deref(), Some("safetensors" | "npy")) {
        return Err(usage(format!("{}: the output must be a .safetensors or .npy file", out.display())));
    }

    let (image, alpha) = load_image(&image_path, &probe)?;
    let image = examples_sd::encoder::check_image_shape(&image, config.in_channels, config.upscale())
        .with_context(|| image_path.display().to_string())?;
    if alpha {
        eprintln!("note: {}: the alpha channel is dropped (the VAE encodes RGB)", image_path.display());
    }
    let (height, width) = (image.dims()[2], image.dims()[3]);
    let (h, w) = (height / config.upscale(), width / config.upscale());
    let noise = if args.mean { None } else { Some(noise(&args, config.latent_channels, (h, w), &probe)?) };
    let mut inputs = vec![vae.as_path(), image_path.as_path()];
    inputs.extend(args.setup.config.as_deref());
    inputs.extend(args.noise.as_deref());
    check_not_inputs(std::slice::from_ref(&out), &inputs)?;
    check_latents_output(&out, args.force)?;
    for found in cli_support::stale::sweep([examples_sd::io::parent_dir(&out).as_path()]) {
        eprintln!("note: {}", found.message());
    }
    cli_support::partial::set_total(1);

    // The whole encode when it fits; else (or with --banded) in bands, when they fit; a
    // budget that holds neither is a usage error (as in sd-vae-decode), naming both needs.
    let banded_plan = |whole: String| -> Result<examples_sd::BandedPlan> {
        let planning = match (probe.kind(), budget) {
            (DeviceKind::Rocm(i), Some(b)) => Device::rocm_with_budget(i, Budget::bytes(b))?,
            _ => probe.clone(),
        };
        let b = Encoder::plan_banded(&config, &planning, (width, height), dtype, budget)?
            .with_disk_dir(args.setup.scratch_dir()?);
        if !b.fits {
            return Err(usage(format!("{whole}in bands: {b}")));
        }
        Ok(b)
    };
    let (split, banded) = match budget.map(|b| encode_budget(&config, dtype, (width, height), b)).transpose() {
        Ok(split) if !args.banded => (split, None),
        Ok(_) => (None, Some(banded_plan(String::new())?)),
        Err(SdError::Budget(m)) => (None, Some(banded_plan(format!("{m}; "))?)),
        Err(e) => return Err(e.into()),
    };
    // On the CPU the budget caps the conv engine's workspace (what is left after weights
    // and activations, or a band's share); on ROCm the device allocator enforces it all.
    let cpu_workspace = match &banded {
        Some(b) => budget.map(|_| b.banding.band_bytes),
        None => split.map(|(_, ws)| ws),
    };
    let device = match (probe.kind(), cpu_workspace, budget) {
        (DeviceKind::Cpu, Some(ws), _) => Device::cpu_with_budget(Budget::bytes(ws)),
        (DeviceKind::Rocm(i), _, Some(b)) => Device::rocm_with_budget(i, Budget::bytes(b))?,
        _ => probe,
    };
    let device =
        if args.size_independent_rounding { device.with_conv_rounding(ConvRounding::SizeIndependent) } else { device };
    // The first run on a machine compiles the GPU kernels (in parallel; said on stderr).
    device.warm_kernels_verbose()?;
    let mut tuning = cli::start_tuning(&device, args.setup.tune)?;
    let weights = Weights::open(&vae, &device)?;
    let mut encoder = Encoder::load(&weights, &config, dtype)?;
    // The encoder holds its own copies: unmapping the file keeps its pages out of the
    // resident set while encoding.
    drop(weights);
    if let Some((caps, _)) = split {
        encoder.set_scratch_caps(caps);
    }
    if let Some(b) = &banded {
        eprintln!("{b}");
        encoder.set_banding(Some(b.banding.clone()));
    }
    let image = image.to_device(&device)?;
    eprintln!(
        "{}: {} on {device}, {dtype:?}; image {width}x{height} → latents [1, {}, {h}, {w}] ({}); budget {}",
        vae.display(),
        encoder.layout(),
        config.latent_channels,
        if args.mean { "the mean" } else { "a sample" },
        budget.map_or("none (library defaults)".to_string(), format_bytes),
    );
    let load_s = t0.elapsed().as_secs_f64();

    let milestones = encoder.milestones();
    let repeat = args.repeat as usize;
    let mut progress = Progress::new((repeat * milestones.len()) as u64);
    let mut encode_times = Vec::with_capacity(repeat);
    let mut latents = None;
    for run in 0..repeat {
        let prefix = if repeat > 1 { format!("run {}/{repeat}: ", run + 1) } else { String::new() };
        // The previous encode's latents are dropped first: they are not part of this one.
        drop(latents.take());
        let t1 = Instant::now();
        let dist = encoder.encode(&image, &mut |name, _| {
            if milestones.iter().any(|m| m == name) {
                progress.step(&format!("{prefix}{}", name.trim_start_matches("encoder.")));
            }
        })?;
        latents = Some(encoder.latents(&dist, noise.as_ref())?);
        // Device work is queued asynchronously: the encode is done when the device is idle.
        device.synchronize()?;
        encode_times.push(t1.elapsed().as_secs_f64());
        // The first encode timed the candidates; later ones run the winners.
        if std::mem::take(&mut tuning) {
            cli::finish_tuning(&device)?;
        }
    }
    progress.finish();
    let latents = latents.expect("at least one encode");
    let encode_s = if repeat > 1 {
        let mut warm = encode_times[1..].to_vec();
        warm.sort_by(f64::total_cmp);
        let median = warm[warm.len() / 2];
        eprintln!(
            "encode times: {} ms; median of encodes 2..{repeat}: {:.1} ms",
            encode_times.iter().map(|t| format!("{:.1}", t * 1e3)).collect::<Vec<_>>().join(", "),
            median * 1e3
        );
        median
    } else {
        encode_times[0]
    };
    if let Some(line) = encoder.precision_stats().summary() {
        eprintln!("note: {line}");
    }
    write_latents(&latents, &out, args.force)?;
    println!(
        "wrote {} in {:.2} s (load {load_s:.2} s, encode {encode_s:.3} s{}); {}",
        out.display(),
        t0.elapsed().as_secs_f64(),
        if repeat > 1 { format!(", median of encodes 2..{repeat}") } else { String::new() },
        match banded {
            // A banded encode keeps maps in host memory: the process's peak says how much.
            // (On the CPU the peak line is the peak RSS already.)
            Some(_) if !device.is_cpu() => format!(
                "{}; peak RSS {}",
                cli::peak_line(&device),
                examples_sd::peak_rss_bytes().map_or("unknown".to_string(), format_bytes)
            ),
            _ => cli::peak_line(&device),
        }
    );
    Ok(())
}
