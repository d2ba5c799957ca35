//! Option values, including realcugan-ncnn-vulkan's short options (`-t`, `-g`, `-j`, `-c`)
//! and what each maps to here.

use examples_sr::upscale::TileSize;
use rocm_vision::DType;

use crate::Failure;

pub fn usage(msg: impl Into<String>) -> Failure {
    Failure { msg: msg.into(), code: cli_support::exit::USAGE }
}

/// `-t/--tile`: `auto` or `0` (realcugan-ncnn-vulkan's "auto"), `whole`, or pixels.
pub fn parse_tile(s: &str) -> Result<TileSize, Failure> {
    if s.contains(',') {
        return Err(usage(format!(
            "-t {s:?}: one tile size per GPU is for several GPUs, which this tool does not use"
        )));
    }
    match s.trim().to_ascii_lowercase().as_str() {
        "auto" | "0" => Ok(TileSize::Auto),
        "whole" | "none" => Ok(TileSize::Whole),
        n => n
            .parse::<usize>()
            .map(TileSize::Fixed)
            .map_err(|_| usage(format!("--tile {s:?}: expected auto (or 0), whole or a number of pixels"))),
    }
}

pub fn parse_dtype(s: &str) -> Result<DType, Failure> {
    match s.trim().to_ascii_lowercase().as_str() {
        "f32" | "fp32" | "float32" => Ok(DType::F32),
        "f16" | "fp16" | "float16" => Ok(DType::F16),
        "bf16" | "bfloat16" => Ok(DType::BF16),
        _ => Err(usage(format!("--dtype {s:?}: expected f32, f16 or bf16"))),
    }
}

/// The device name from `--device` and `-g` (realcugan-ncnn-vulkan's GPU id: -1 = the CPU,
/// N = GPU N). Both may be given only if they agree.
pub fn device_name(device: Option<&str>, gpu_id: Option<&str>) -> Result<String, Failure> {
    let from_g = match gpu_id.map(str::trim) {
        None => None,
        Some(g) if g.contains(',') => {
            return Err(usage(format!("-g {g}: several GPUs at once are not supported; give one GPU id")));
        }
        Some("-1") => Some("cpu".to_string()),
        Some(g) => match g.parse::<usize>() {
            Ok(n) => Some(format!("rocm:{n}")),
            Err(_) => return Err(usage(format!("-g {g:?}: expected a GPU index (0, 1, ...) or -1 for the CPU"))),
        },
    };
    match (device, from_g) {
        (Some(d), Some(g)) => {
            let d_norm = match d.trim().to_ascii_lowercase().as_str() {
                "rocm" | "gpu" => "rocm:0".to_string(),
                other => other.to_string(),
            };
            if d_norm == g {
                Ok(g)
            } else {
                Err(usage(format!("--device {d} and -g {} disagree; give one of them", gpu_id.unwrap_or_default())))
            }
        }
        (Some(d), None) => Ok(d.to_string()),
        (None, Some(g)) => Ok(g),
        (None, None) => Ok("auto".to_string()),
    }
}

/// `-j load:proc:save` (realcugan-ncnn-vulkan's thread counts). Returns the proc count:
/// the CPU threads of the upscale. load and save are accepted and checked (at least 1) but
/// change nothing: images are read and written one at a time.
pub fn parse_threads(s: &str) -> Result<usize, Failure> {
    let bad = || usage(format!("-j {s:?}: expected load:proc:save thread counts, e.g. 1:2:2 (each at least 1)"));
    let parts: Vec<&str> = s.split(':').collect();
    let [load, proc, save] = parts[..] else { return Err(bad()) };
    if proc.contains(',') {
        return Err(usage(format!("-j {s}: per-GPU thread counts are for several GPUs, which this tool does not use")));
    }
    let n = |t: &str| t.trim().parse::<usize>().ok().filter(|&v| v >= 1);
    match (n(load), n(proc), n(save)) {
        (Some(_), Some(p), Some(_)) => Ok(p),
        _ => Err(bad()),
    }
}

/// `-c` syncgap mode: 0..3 accepted. realcugan-ncnn-vulkan's modes trade exactness of the SE
/// blocks' means for speed when it tiles (0: each tile its own means; 1: exact means over
/// the whole image; 2, 3: means from a rough / downscaled first pass). This tool always
/// computes them exactly over the whole image (mode 1), so tiled output equals untiled
/// output whatever `-c` and `-t` say.
pub fn check_syncgap(mode: i32) -> Result<&'static str, Failure> {
    match mode {
        1 => Ok("-c 1: SE means synchronised exactly over the whole image"),
        0 | 2 | 3 => Ok("-c accepted: the SE means are always synchronised exactly over the whole image (mode 1)"),
        _ => Err(usage(format!("-c {mode}: syncgap mode must be 0, 1, 2 or 3"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ncnn_options_map() {
        assert_eq!(parse_tile("0").ok(), Some(TileSize::Auto));
        assert_eq!(parse_tile("whole").ok(), Some(TileSize::Whole));
        assert_eq!(parse_tile("64").ok(), Some(TileSize::Fixed(64)));
        assert!(parse_tile("0,0").is_err());
        assert_eq!(device_name(None, Some("-1")).ok().as_deref(), Some("cpu"));
        assert_eq!(device_name(None, Some("1")).ok().as_deref(), Some("rocm:1"));
        assert_eq!(device_name(Some("rocm"), Some("0")).ok().as_deref(), Some("rocm:0"));
        assert_eq!(device_name(None, None).ok().as_deref(), Some("auto"));
        assert!(device_name(Some("cpu"), Some("0")).is_err());
        assert!(device_name(None, Some("0,1")).is_err());
        assert_eq!(parse_threads("1:2:2").ok(), Some(2));
        assert!(parse_threads("1:0:2").is_err() && parse_threads("4").is_err() && parse_threads("1:2,2:2").is_err());
        assert!(check_syncgap(3).is_ok() && check_syncgap(4).is_err());
    }
}
