//! What the two command-line tools (`sd-vae-decode`, `sd-vae-encode`) share: the usage
//! error (exit status 2), the one-line error report, option parsing, the device and
//! budget, the check that no output replaces an input, and the progress display. Not part
//! of the library's API.

use anyhow::{Result, bail};
use cli_support::exit;
use indicatif::{ProgressBar, ProgressStyle};
use rocm_vision::{Budget, DType, Device};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A command line that cannot work (exit status 2; see `cli_support::exit`).
#[derive(Debug)]
pub struct Usage(pub String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

pub fn usage(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::Error::new(Usage(e.to_string()))
}

/// The tools' `main`: logging to stderr, then `run`; an error is printed on one line
/// (with the library's hint where it has one) and ends the process with exit status 2
/// for a [`Usage`] error, else 1.
pub fn main<A>(args: A, run: impl FnOnce(A) -> Result<()>) {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(args) {
        eprintln!("error: {}", one_line(&e));
        // What to do, where the library knows it (issue 13.2).
        let lib = e.downcast_ref::<rocm_vision::Error>().or_else(|| match e.downcast_ref::<crate::SdError>() {
            Some(crate::SdError::Lib(lib)) => Some(lib),
            _ => None,
        });
        if let Some(hint) = lib.and_then(rocm_vision::Error::hint) {
            eprintln!("  hint: {hint}");
        }
        let code = if e.downcast_ref::<Usage>().is_some() { exit::USAGE } else { exit::FAILED };
        std::process::exit(code.into());
    }
}

/// The error and its causes on one line, each cause once: an error that already shows its
/// source (e.g. `path: No such file or directory`) is not followed by the source again.
pub fn one_line(e: &anyhow::Error) -> String {
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

/// The options both tools take to build the VAE and choose where and how it runs.
#[derive(clap::Args, Debug)]
pub struct VaeArgs {
    /// Model preset (architecture and latent scaling): sd (1.x/2.x), sdxl, sd3, flux.
    /// Required unless --config is given.
    #[arg(long)]
    pub model: Option<String>,
    /// A diffusers AutoencoderKL config.json; overrides the preset.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// auto, cpu or rocm[:N].
    #[arg(long, default_value = "auto")]
    pub device: String,
    /// Compute dtype: f32, f16 or bf16.
    #[arg(long, default_value = "f32")]
    pub dtype: String,
    /// Time the candidate kernels of every convolution this model runs on this GPU, at
    /// most SECONDS in all (what is left untuned keeps the cost model's choice), during
    /// the first run, and keep the winners in the tuning store ($ROCM_VISION_TUNING, else
    /// ~/.cache/rocm-vision/tuning.tsv) for every later run on this GPU and library
    /// version. Without it nothing is timed; stored winners are used either way.
    #[arg(long, value_name = "SECONDS")]
    pub tune: Option<f64>,
    /// Where a banded run on the CPU keeps the feature maps that do not fit --vram-budget
    /// (a 4096² f32 decode in 8 GB: ~35 GB at most, in unnamed files the system removes
    /// when the run ends, however it ends). Default: the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub scratch_dir: Option<PathBuf>,
}

impl VaeArgs {
    /// `--scratch-dir`, else the temporary directory; a usage error unless it is a
    /// directory.
    pub fn scratch_dir(&self) -> Result<PathBuf> {
        let dir = self.scratch_dir.clone().unwrap_or_else(std::env::temp_dir);
        if !dir.is_dir() {
            return Err(usage(format!("--scratch-dir {}: not a directory", dir.display())));
        }
        Ok(dir)
    }
}

/// `--tune SECONDS`: starts the tuning run on `device` (a usage error for a bad limit or
/// the CPU). Returns whether one started.
pub fn start_tuning(device: &Device, tune: Option<f64>) -> Result<bool> {
    let Some(seconds) = tune else { return Ok(false) };
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(usage(format!("--tune {seconds}: the time limit must be a positive number of seconds")));
    }
    device.start_tuning(std::time::Duration::from_secs_f64(seconds)).map_err(|e| usage(format!("--tune: {e}")))?;
    eprintln!("tuning: timing each convolution's candidate kernels, at most {seconds:.0} s in all");
    Ok(true)
}

/// Ends a tuning run started by [`start_tuning`]: saves the store, prints the report.
pub fn finish_tuning(device: &Device) -> Result<()> {
    if let Some(report) = device.finish_tuning()? {
        eprintln!("tuning:\n{report}");
    }
    Ok(())
}

pub fn parse_dtype(s: &str) -> Result<DType> {
    Ok(match s.trim().to_ascii_lowercase().as_str() {
        "f32" | "float32" => DType::F32,
        "f16" | "float16" | "fp16" => DType::F16,
        "bf16" | "bfloat16" => DType::BF16,
        _ => return Err(usage(format!("unknown --dtype {s:?}: expected f32, f16 or bf16"))),
    })
}

/// `--model` / `--config` → the configuration.
pub fn vae_config(config: Option<&Path>, model: Option<&str>) -> Result<crate::VaeConfig> {
    Ok(match (config, model) {
        (Some(path), _) => crate::VaeConfig::from_diffusers_json(path)?,
        (None, Some(m)) => m.parse::<crate::Model>().map_err(usage)?.config(),
        (None, None) => return Err(usage("give --model (sd, sdxl, sd3, flux) or --config config.json")),
    })
}

/// `--device`: fails on a device we do not have before reading anything large. A name
/// that is not a device is a usage error; a device that cannot be opened (no ROCm) a
/// failed run.
pub fn probe_device(name: &str) -> Result<Device> {
    if name.trim().eq_ignore_ascii_case("auto") {
        let (d, why) = Device::auto();
        if let Some(why) = why {
            eprintln!("note: {why}");
        }
        return Ok(d);
    }
    Device::parse(name).map_err(|e| match e {
        rocm_vision::Error::DeviceParse { .. } => usage(format!("{e} (expected auto, cpu, rocm or rocm:N)")),
        e => e.into(),
    })
}

/// `--vram-budget` in bytes (a percentage of the host's available memory on the CPU).
pub fn parse_budget(s: Option<&str>) -> Result<Option<usize>> {
    match s {
        Some(s) => {
            let b: Budget = s.parse().map_err(usage)?;
            Ok(Some(b.resolve(host_available_bytes)))
        }
        None => Ok(None),
    }
}

/// Fails before any work if an output would replace one of the run's inputs.
pub fn check_not_inputs(outs: &[PathBuf], inputs: &[&Path]) -> Result<()> {
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
pub struct Progress {
    bar: Option<ProgressBar>,
    start: Instant,
    done: u64,
    total: u64,
}

impl Progress {
    pub fn new(total: u64) -> Progress {
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

    pub fn step(&mut self, what: &str) {
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

    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

/// `MemAvailable` of /proc/meminfo, for a `--vram-budget` given as a percentage.
pub fn host_available_bytes() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            let l = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
            l.split_whitespace().nth(1)?.parse::<usize>().ok()
        })
        .map_or(0, |kb| kb * 1024)
}

/// `--size WIDTHxHEIGHT`.
pub fn parse_size(s: &str) -> Result<(usize, usize)> {
    s.trim()
        .split_once(['x', 'X'])
        .and_then(|(w, h)| Some((w.trim().parse::<usize>().ok()?, h.trim().parse::<usize>().ok()?)))
        .ok_or_else(|| usage(format!("--size {s:?}: expected WIDTHxHEIGHT in pixels, e.g. 1024x1024")))
}

/// The peak memory line of a run: the device allocator's, or the process's resident set.
pub fn peak_line(device: &Device) -> String {
    match device.peak_memory() {
        Some(b) => format!(
            // The exact byte count too: a budget in GB is checked against it, not the rounded GiB.
            "peak device memory {} ({b} bytes, {} live)",
            rocm_vision::format_bytes(b),
            rocm_vision::format_bytes(device.peak_live_memory().unwrap_or(b))
        ),
        None => {
            format!("peak RSS {}", crate::peak_rss_bytes().map_or("unknown".to_string(), rocm_vision::format_bytes))
        }
    }
}
