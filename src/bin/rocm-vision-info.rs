//! `rocm-vision-info`: which device rocm-vision would use, and what it is.
//!
//! `--device auto` picks the first ROCm GPU and falls back to the CPU with a one-line
//! notice saying why; `--device rocm` (or `rocm:N`) fails with the reason when there is
//! no usable GPU. Nothing links against ROCm: the same binary runs with or without it.

use clap::Parser;
use rocm_vision::Device;
use std::process::ExitCode;

#[derive(Parser)]
#[command(version, about = "Show the device rocm-vision runs on: auto, cpu, rocm or rocm:N")]
struct Args {
    /// auto (first ROCm GPU, else the CPU), cpu, rocm (GPU 0) or rocm:N.
    #[arg(long, default_value = "auto")]
    device: String,
    /// Compile every GPU kernel the library has (the two tools use a subset) into the
    /// on-disk cache now, in parallel, so that no later run waits for the compiler. One
    /// code object per module serves every dtype.
    #[arg(long)]
    warm_cache: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let device = if args.device.trim().eq_ignore_ascii_case("auto") {
        let (d, why) = Device::auto();
        if let Some(why) = why {
            eprintln!("rocm-vision: no usable ROCm GPU, {why}");
        }
        d
    } else {
        match Device::parse(&args.device) {
            Ok(d) => d,
            Err(e) => {
                eprintln!("rocm-vision: {e}");
                return ExitCode::FAILURE;
            }
        }
    };
    println!("device: {device}");
    if let Some(dev) = device.rocm_device() {
        let i = dev.info();
        println!(
            "name: {}\narch: {} ({:?})\ncompute units: {}\nwarp size: {}\nLDS per block: {} bytes\nmemory: {} bytes",
            i.name, i.arch_full, i.family, i.compute_units, i.warp_size, i.lds_per_block, i.total_memory
        );
        if let Ok(rt) = rocm_backend::runtime() {
            println!(
                "HIP runtime: {} ({})\nhiprtc: {}.{}",
                rt.runtime_version, rt.library, rt.hiprtc_version.0, rt.hiprtc_version.1
            );
        }
    } else {
        println!("threads: {}", rayon::current_num_threads());
    }
    if args.warm_cache {
        if !device.is_rocm() {
            eprintln!("rocm-vision: --warm-cache: the CPU has no kernels to compile");
            return ExitCode::FAILURE;
        }
        let started = std::time::Instant::now();
        if let Err(e) = device.warm_kernels_verbose() {
            eprintln!("rocm-vision: {e}");
            return ExitCode::FAILURE;
        }
        println!("kernel cache: ready ({:.1} s)", started.elapsed().as_secs_f64());
    }
    ExitCode::SUCCESS
}
