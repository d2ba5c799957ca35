//! CPU benchmark: the full-size SD VAE decoder ([128, 256, 512, 512], random seeded
//! weights) decoding a 64x64 latent to 512² in f32, ours against candle-transformers'
//! `AutoEncoderKL::decode` on the same weights and the same latent.
//!
//! The weights are written once, in diffusers layout, to a temporary safetensors file that
//! both implementations load. Each implementation runs in its own child process (this
//! binary re-executed with `--child`) so that its peak RSS (`VmHWM`) is its own; the
//! parent compares the two images and prints time, peak RSS and the ratios.
//!
//! ```sh
//! cargo bench -p examples-sd --bench decode_cpu            # 512² (64x64 latent)
//! cargo bench -p examples-sd --bench decode_cpu -- --size 256
//! # only write the weights and the latent (z.safetensors) into DIR, for sd-vae-decode
//! # (scripts/cpu-any-size.sh):
//! cargo bench -p examples-sd --bench decode_cpu -- --size 4096 --write-inputs DIR
//! ```

use anyhow::{Context, Result, bail};
use candle_core::safetensors::MmapedSafetensors;
use candle_core::{DType as CDType, Device as CDevice, Shape, Tensor as CTensor};
use candle_nn::var_builder::SimpleBackend;
use candle_transformers::models::stable_diffusion::vae::{AutoEncoderKL, AutoEncoderKLConfig};
use examples_sd::memory::peak_rss_bytes;
use examples_sd::{Decoder, MemoryPlan, Model};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rocm_vision::{DType, Device, Tensor, Weights, format_bytes};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

const SEED: u64 = 20261202;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        let get = |k: usize| args.get(i + k).cloned().context("--child IMPL WEIGHTS LATENT OUT");
        return child(&get(1)?, Path::new(&get(2)?), Path::new(&get(3)?), Path::new(&get(4)?));
    }
    let size = match args.iter().position(|a| a == "--size") {
        Some(i) => args.get(i + 1).context("--size N")?.parse::<usize>().context("--size N")?,
        None => 512,
    };
    if size == 0 || size % 8 != 0 {
        bail!("--size must be a positive multiple of 8, got {size}");
    }
    match args.iter().position(|a| a == "--write-inputs") {
        Some(i) => {
            let dir = PathBuf::from(args.get(i + 1).context("--write-inputs DIR")?);
            std::fs::create_dir_all(&dir)?;
            let (weights, latent) = write_inputs(&dir, size)?;
            println!("wrote {} and {}", weights.display(), latent.display());
            Ok(())
        }
        None => parent(size),
    }
}

/// The seeded random weights (diffusers layout) and the decoder input of a `size`² decode
/// in `dir`: `(weights, latent)`.
fn write_inputs(dir: &Path, size: usize) -> Result<(PathBuf, PathBuf)> {
    let config = Model::Sd.config();
    let lat = size / 8;
    let weights = dir.join("sd_vae_random_diffusers.safetensors");
    let latent = dir.join("z.safetensors");
    candle_core::safetensors::save(&random_weights(&config), &weights)?;
    // The decoder input z (already divided by the scaling factor), the same for both.
    let mut rng = StdRng::seed_from_u64(SEED + 1);
    let z: Vec<f32> = (0..4 * lat * lat).map(|_| rng.random_range(-1.7f32..1.7) / 0.18215).collect();
    let z = CTensor::from_vec(z, (1, 4, lat, lat), &CDevice::Cpu)?;
    candle_core::safetensors::save(&[("z".to_string(), z)].into_iter().collect(), &latent)?;
    Ok((weights, latent))
}

/// Seeded random weights with the fixtures' statistics (conv/linear variance 1/fan_in,
/// biases and norm shifts small, norm scales around 1), so activations stay in range.
fn random_weights(config: &examples_sd::VaeConfig) -> HashMap<String, CTensor> {
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut out = HashMap::new();
    for (name, shape) in config.diffusers_tensor_shapes() {
        let n: usize = shape.iter().product();
        let is_norm = name.contains("norm");
        let values: Vec<f32> = if name.ends_with(".bias") {
            (0..n).map(|_| rng.random_range(-0.1f32..0.1)).collect()
        } else if is_norm {
            (0..n).map(|_| rng.random_range(0.6f32..1.4)).collect()
        } else {
            let fan_in: usize = shape[1..].iter().product();
            let a = (3.0 / fan_in as f32).sqrt();
            (0..n).map(|_| rng.random_range(-a..a)).collect()
        };
        out.insert(name, CTensor::from_vec(values, shape, &CDevice::Cpu).expect("shape"));
    }
    out
}

fn parent(size: usize) -> Result<()> {
    let config = Model::Sd.config();
    let lat = size / 8;
    let dir = std::env::temp_dir().join(format!("examples-sd-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let t = Instant::now();
    let (weights, latent) = write_inputs(&dir, size)?;
    println!(
        "SD VAE decoder, random weights ({} parameters, {}), latent 1x4x{lat}x{lat} → {size}x{size}, f32, CPU ({} threads); written in {:.1} s",
        config.decoder_param_count(),
        format_bytes(std::fs::metadata(&weights)?.len() as usize),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        t.elapsed().as_secs_f64()
    );
    let plan = MemoryPlan::new(&config, DType::F32, (lat, lat), None, false, None)?;
    println!(
        "our estimate: weights {} + activations {} (+ conv workspace ≤ 64 MiB)",
        format_bytes(plan.weights),
        format_bytes(plan.activations)
    );

    let exe = std::env::current_exe()?;
    let mut results = Vec::new();
    for imp in ["ours", "candle"] {
        let out = dir.join(format!("{imp}.safetensors"));
        let o = Command::new(&exe)
            .args(["--child", imp])
            .arg(&weights)
            .arg(&latent)
            .arg(&out)
            .output()
            .with_context(|| format!("running the {imp} child"))?;
        let stdout = String::from_utf8_lossy(&o.stdout);
        if !o.status.success() {
            bail!("{imp} child failed ({}):\n{stdout}\n{}", o.status, String::from_utf8_lossy(&o.stderr));
        }
        let line = stdout.lines().find(|l| l.starts_with("RESULT")).context("child printed no RESULT line")?;
        let field = |k: &str| -> Result<f64> {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(&format!("{k}=")))
                .with_context(|| format!("{k} missing in {line:?}"))?
                .parse::<f64>()
                .with_context(|| format!("{k} in {line:?}"))
        };
        results.push((imp, field("load_s")?, field("decode_s")?, field("peak_rss")? as usize, out));
    }
    let img = |p: &PathBuf| -> Result<Vec<f32>> {
        let m = candle_core::safetensors::load(p, &CDevice::Cpu)?;
        Ok(m["image"].flatten_all()?.to_vec1::<f32>()?)
    };
    let (ours, theirs) = (img(&results[0].4)?, img(&results[1].4)?);
    let max_ref = theirs.iter().fold(0f32, |m, x| m.max(x.abs()));
    let max_d = ours.iter().zip(&theirs).fold(0f32, |m, (a, b)| m.max((a - b).abs()));

    println!();
    println!("| implementation | load | decode | peak RSS |");
    println!("| --- | ---: | ---: | ---: |");
    for (imp, load, decode, rss, _) in &results {
        let name = if *imp == "ours" { "examples-sd (rocm-vision)" } else { "candle-transformers 0.11.1" };
        println!("| {name} | {load:.2} s | {decode:.2} s | {} |", format_bytes(*rss));
    }
    let (o, c) = (&results[0], &results[1]);
    println!();
    println!(
        "ours / candle: decode time {:.3}x ({:.2}x faster), peak RSS {:.3}x",
        o.2 / c.2,
        c.2 / o.2,
        o.3 as f64 / c.3 as f64
    );
    println!("agreement: max|ours − candle| / max|candle| = {:.2e}", max_d / max_ref);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Serves candle-transformers' `AutoEncoderKL::new` from the weight file. It builds the
/// encoder and quant_conv too, which the benchmark never runs and the file does not
/// hold: those get a zero broadcast from one element (no memory), so the peak RSS
/// compares decoders only.
struct DecoderOnly(MmapedSafetensors);

impl DecoderOnly {
    fn unused(name: &str) -> bool {
        name.starts_with("encoder.") || name.starts_with("quant_conv.")
    }
}

impl SimpleBackend for DecoderOnly {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: CDType,
        dev: &CDevice,
    ) -> candle_core::Result<CTensor> {
        if Self::unused(name) {
            return CTensor::zeros((), dtype, dev)?.broadcast_as(s);
        }
        let t = self.0.load(name, dev)?.to_dtype(dtype)?;
        if t.shape() != &s {
            candle_core::bail!("{name}: shape {:?}, expected {s:?}", t.shape())
        }
        Ok(t)
    }

    fn get_unchecked(&self, name: &str, dtype: CDType, dev: &CDevice) -> candle_core::Result<CTensor> {
        self.0.load(name, dev)?.to_dtype(dtype)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        Self::unused(name) || self.0.get(name).is_ok()
    }
}

fn child(imp: &str, weights: &Path, latent: &Path, out: &Path) -> Result<()> {
    let t0 = Instant::now();
    let z = candle_core::safetensors::load(latent, &CDevice::Cpu)?.remove("z").context("no z")?;
    let (image, load_s, decode_s) = match imp {
        "ours" => {
            let device = Device::cpu();
            let w = Weights::open(weights, &device)?;
            let dec = Decoder::load(&w, &Model::Sd.config(), DType::F32)?;
            // The decoder holds copies; unmapping the file keeps its pages out of the RSS.
            drop(w);
            let load_s = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let img = dec.decode_z(Tensor::from_candle(z, &device)?, &mut |_, _| {})?;
            (img.to_candle()?, load_s, t1.elapsed().as_secs_f64())
        }
        "candle" => {
            // SAFETY: the file is the benchmark's own temporary file, not modified while mapped.
            let st = unsafe { MmapedSafetensors::new(weights)? };
            let vb = candle_nn::VarBuilder::from_backend(Box::new(DecoderOnly(st)), CDType::F32, CDevice::Cpu);
            let cfg = AutoEncoderKLConfig {
                block_out_channels: vec![128, 256, 512, 512],
                layers_per_block: 2,
                latent_channels: 4,
                norm_num_groups: 32,
                use_quant_conv: true,
                use_post_quant_conv: true,
            };
            let vae = AutoEncoderKL::new(vb, 3, 3, cfg)?;
            let load_s = t0.elapsed().as_secs_f64();
            let t1 = Instant::now();
            let img = vae.decode(&z)?;
            (img, load_s, t1.elapsed().as_secs_f64())
        }
        other => bail!("unknown implementation {other:?}"),
    };
    candle_core::safetensors::save(&[("image".to_string(), image)].into_iter().collect(), out)?;
    let peak = peak_rss_bytes().context("VmHWM unreadable")?;
    println!("RESULT impl={imp} load_s={load_s:.3} decode_s={decode_s:.3} peak_rss={peak}");
    Ok(())
}
