//! `sd-vae-decode` with bad latents, missing files, signals and leftovers of killed runs:
//! real files and real processes.

mod common;

use common::*;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sd-vae-decode"))
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn sd_args(latents: &Path, out: &Path) -> Vec<String> {
    [
        "--vae",
        &s(&fixture("sd_vae_diffusers.safetensors")),
        "--config",
        &s(&fixture("sd_config.json")),
        "--latents",
        &s(latents),
        "--out",
        &s(out),
        "--device",
        "cpu",
    ]
    .map(String::from)
    .to_vec()
}

fn run(args: &[String]) -> Output {
    cli().args(args).output().expect("run sd-vae-decode")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The SD fixture latents with `bad` values at the first positions.
fn latents_with(dir: &Path, name: &str, bad: &[f32]) -> std::path::PathBuf {
    let t = tensors("sd_8x8.safetensors")["latents"].to_candle().unwrap();
    let mut v = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    v[..bad.len()].copy_from_slice(bad);
    let t = candle_core::Tensor::from_vec(v, t.dims(), &candle_core::Device::Cpu).unwrap();
    let p = dir.join(name);
    candle_core::safetensors::save(&[("latents".to_string(), t)].into_iter().collect(), &p).unwrap();
    p
}

#[test]
fn non_finite_latents_are_refused_unless_allowed() {
    let dir = scratch_dir("cli-nonfinite");
    let lat = latents_with(&dir, "bad.safetensors", &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY]);
    let out = dir.join("o.png");
    let o = run(&sd_args(&lat, &out));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("bad.safetensors: 3 of 256 latent values are NaN or infinite"), "{e}");
    assert!(e.contains("--allow-nonfinite"), "{e}");
    assert!(!out.exists());
    let mut args = sd_args(&lat, &out);
    args.push("--allow-nonfinite".into());
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: ") && out.exists(), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn integer_latents_and_missing_files_say_it_once_and_in_terms_of_latents() {
    let dir = scratch_dir("cli-messages");
    let lat = dir.join("ints.safetensors");
    let t = candle_core::Tensor::zeros((1, 4, 8, 8), candle_core::DType::I64, &candle_core::Device::Cpu).unwrap();
    candle_core::safetensors::save(&[("latents".to_string(), t)].into_iter().collect(), &lat).unwrap();
    let out = dir.join("o.png");
    let o = run(&sd_args(&lat, &out));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("dtype I64; latents must be floating point") && !e.contains("model weights"), "{e}");
    // A missing file: the OS's reason once.
    let o = run(&sd_args(&dir.join("missing.safetensors"), &out));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("missing.safetensors"), "{e}");
    assert_eq!(e.matches("No such file or directory").count(), 1, "{e}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn device_rocm_without_rocm_is_a_failed_run_and_a_bad_name_a_usage_error() {
    let dir = scratch_dir("cli-device");
    let out = dir.join("o.png");
    let mut args = sd_args(&fixture("sd_8x8.safetensors"), &out);
    args.pop();
    args.push("potato".into());
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    if rocm_vision::Device::rocm(0).is_ok() {
        skipped("a ROCm device is present, so --device rocm does not fail");
        return;
    }
    args.pop();
    args.push("rocm".into());
    let o = run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("ROCm"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sigterm_during_the_decode_leaves_no_file_and_says_so() {
    let dir = scratch_dir("cli-sigterm");
    let out = dir.join("o.png");
    let mut args = sd_args(&fixture("sd_8x8.safetensors"), &out);
    // Decodes for minutes: the signal comes while it works.
    args.extend(["--repeat".to_string(), "100000".to_string()]);
    let child = cli().args(&args).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().expect("spawn");
    std::thread::sleep(Duration::from_millis(1500));
    let st = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(st.success());
    let o = child.wait_with_output().expect("wait");
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(143), "{e}");
    assert!(e.contains("sd-vae-decode: interrupted by SIGTERM: 0 of 1 output(s) written completely"), "{e}");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files left in {}", dir.display());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn partials_of_dead_runs_are_removed_and_outputs_never_replace_inputs() {
    let dir = scratch_dir("cli-stale");
    let out = dir.join("o.png");
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let stale = dir.join(format!(".o.png.partial-{dead}"));
    std::fs::write(&stale, b"half").unwrap();
    let o = run(&sd_args(&fixture("sd_8x8.safetensors"), &out));
    let e = stderr(&o);
    assert!(o.status.success(), "{e}");
    assert!(e.contains(&format!("removed {}", stale.display())) && e.contains("no longer running"), "{e}");
    assert!(!stale.exists() && out.exists());
    // An output named like an input (here the config) is refused, --force or not.
    let cfg = dir.join("cfg.png");
    std::fs::copy(fixture("sd_config.json"), &cfg).unwrap();
    let mut args = sd_args(&fixture("sd_8x8.safetensors"), &cfg);
    args[3] = s(&cfg);
    args.push("--force".into());
    let o = run(&args);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("would replace the input"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&cfg).unwrap(), std::fs::read(fixture("sd_config.json")).unwrap());
    let _ = std::fs::remove_dir_all(dir);
}
