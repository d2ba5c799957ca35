//! The `sd-vae-decode` binary end to end: a decode that matches diffusers' PNG, batches,
//! tiling, and each input error (exit status 1 and a message naming the problem).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sd-vae-decode")).args(args).output().expect("run sd-vae-decode")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

fn fx(name: &str) -> String {
    fixture(name).display().to_string()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// Decodes `latents` with the SD fixture model into `out`.
fn decode_sd(latents: &str, out: &Path, extra: &[&str]) -> Output {
    let (vae, cfg, out) = (fx("sd_vae_diffusers.safetensors"), fx("sd_config.json"), s(out));
    let mut args = vec!["--vae", &vae, "--config", &cfg, "--latents", latents, "--out", &out];
    args.extend_from_slice(extra);
    cli(&args)
}

fn fails_with(o: &Output, needles: &[&str]) {
    let (out, err) = text(o);
    assert_eq!(o.status.code(), Some(1), "stdout: {out}\nstderr: {err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} missing from stderr: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

/// A command line that cannot work: exit status 2 and a message with each of `needles`.
fn fails_usage(o: &Output, needles: &[&str]) {
    let (out, err) = text(o);
    assert_eq!(o.status.code(), Some(2), "stdout: {out}\nstderr: {err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} missing from stderr: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn decodes_to_diffusers_png_and_reports_time_and_peak() {
    let dir = scratch_dir("cli-decode");
    let out = dir.join("sd.png");
    let o = decode_sd(&fx("sd_8x8.safetensors"), &out, &[]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    // Progress per stage (plain lines: stderr is not a terminal here), then the summary.
    for stage in ["mid_block done", "up_blocks.0 done", "up_blocks.3 done", "conv_out done"] {
        assert!(stderr.contains(stage), "{stage:?} missing: {stderr}");
    }
    assert!(stderr.contains("diffusers layout"), "{stderr}");
    assert!(stdout.contains("decode") && stdout.contains("peak RSS"), "{stdout}");
    // The fixture PNG is diffusers' own conversion of `expected`; pixels at a rounding
    // boundary may differ by one level.
    let ours = image::open(&out).unwrap().to_rgb8();
    let reference = image::open(fixture("sd_8x8.png")).unwrap().to_rgb8();
    assert_eq!(ours.dimensions(), (64, 64));
    let diffs: Vec<i32> =
        ours.as_raw().iter().zip(reference.as_raw()).map(|(&a, &b)| (a as i32 - b as i32).abs()).collect();
    let max = diffs.iter().copied().max().unwrap();
    let off = diffs.iter().filter(|&&d| d != 0).count();
    println!("PNG vs diffusers: max diff {max} levels, {off} of {} values differ", diffs.len());
    assert!(max <= 1 && off * 100 < diffs.len(), "max {max}, {off} differ");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn existing_output_needs_force() {
    let dir = scratch_dir("cli-force");
    let out = dir.join("taken.png");
    std::fs::write(&out, b"not yours").unwrap();
    fails_with(&decode_sd(&fx("sd_8x8.safetensors"), &out, &[]), &["taken.png exists", "--force"]);
    assert_eq!(std::fs::read(&out).unwrap(), b"not yours");
    let o = decode_sd(&fx("sd_8x8.safetensors"), &out, &["--force"]);
    assert!(o.status.success(), "{}", text(&o).1);
    assert_eq!(image::open(&out).unwrap().to_rgb8().dimensions(), (64, 64));
    // No temporary file is left behind.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn wrong_latent_rank_and_channel_count() {
    let dir = scratch_dir("cli-latents");
    let npy = dir.join("flat.npy");
    candle_core::Tensor::zeros((4, 8), candle_core::DType::F32, &candle_core::Device::Cpu)
        .unwrap()
        .write_npy(&npy)
        .unwrap();
    let out = dir.join("x.png");
    fails_with(&decode_sd(&s(&npy), &out, &[]), &["flat.npy", "expected shape [N, 4, h, w]", "[4, 8]"]);
    // FLUX latents (16 channels) into the SD VAE (4).
    fails_with(&decode_sd(&fx("flux_8x8.safetensors"), &out, &[]), &["4 latent channels", "have 16"]);
    // A latent key that is not there.
    fails_with(&decode_sd(&fx("sd_8x8.safetensors"), &out, &["--latent-key", "nope"]), &["\"nope\"", "latents"]);
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unknown_layout_and_model_mismatch() {
    let dir = scratch_dir("cli-layout");
    let odd = dir.join("odd.safetensors");
    rewrite_weights(&fixture("sd_vae_diffusers.safetensors"), &odd, |k| format!("model.{k}"));
    let out = s(&dir.join("x.png"));
    let (cfg, lat) = (fx("sd_config.json"), fx("sd_8x8.safetensors"));
    let o = cli(&["--vae", &s(&odd), "--config", &cfg, "--latents", &lat, "--out", &out]);
    fails_with(&o, &["unknown VAE weight layout", "decoder.conv_in.weight", "model.decoder"]);
    // FLUX weights and latents with the SD configuration.
    let (vae, lat) = (fx("flux_vae_original.safetensors"), fx("flux_8x8.safetensors"));
    let o = cli(&["--vae", &vae, "--model", "flux", "--latents", &lat, "--out", &out]);
    fails_with(&o, &["decoder.conv_in.weight", "16 into 512"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_options() {
    let dir = scratch_dir("cli-options");
    let out = dir.join("x.png");
    let lat = fx("sd_8x8.safetensors");
    fails_usage(&decode_sd(&lat, &out, &["--dtype", "f8"]), &["--dtype", "f8"]);
    fails_usage(&decode_sd(&lat, &out, &["--vram-budget", "lots"]), &["\"lots\""]);
    fails_usage(&decode_sd(&lat, &out, &["--vram-budget", "1MiB"]), &["budget", "--tiled"]);
    fails_usage(&decode_sd(&lat, &dir.join("x.jpg"), &[]), &[".png"]);
    let vae = fx("sd_vae_diffusers.safetensors");
    let o = cli(&["--vae", &vae, "--latents", &lat, "--out", &s(&out)]);
    fails_usage(&o, &["--model", "--config"]);
    let o = cli(&["--vae", &vae, "--model", "sd5", "--latents", &lat, "--out", &s(&out)]);
    fails_usage(&o, &["sd5", "sdxl"]);
    assert!(!out.exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn batch_writes_numbered_images() {
    let dir = scratch_dir("cli-batch");
    let lat = dir.join("two.safetensors");
    let one = tensors("sd_8x8.safetensors")["latents"].to_candle().unwrap();
    let two = candle_core::Tensor::cat(&[&one, &one.affine(0.5, 0.0).unwrap()], 0).unwrap();
    candle_core::safetensors::save(&[("x".to_string(), two)].into_iter().collect(), &lat).unwrap();
    let out = dir.join("img.png");
    let o = decode_sd(&s(&lat), &out, &[]);
    assert!(o.status.success(), "{}", text(&o).1);
    let paths: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("img_{i}.png"))).collect();
    assert!(!out.exists() && paths.iter().all(|p| p.exists()));
    assert_ne!(std::fs::read(&paths[0]).unwrap(), std::fs::read(&paths[1]).unwrap());
    // Any existing output stops the whole batch before decoding.
    fails_with(&decode_sd(&s(&lat), &out, &[]), &["img_0.png exists"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn tiled_half_precision_and_budget() {
    let dir = scratch_dir("cli-tiled");
    let out = dir.join("t.png");
    let (vae, cfg, lat) = (fx("flux_vae_original.safetensors"), fx("flux_config.json"), fx("flux_6x10.safetensors"));
    let o = cli(&[
        "--vae",
        &vae,
        "--config",
        &cfg,
        "--latents",
        &lat,
        "--out",
        &s(&out),
        "--dtype",
        "f16",
        "--tiled",
        "--tile-size",
        "4",
        "--tile-overlap",
        "1",
    ]);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("tiled 4x4 overlap 1 (approximate)") && stderr.contains("tile 6/6: conv_out done"),
        "{stderr}"
    );
    assert!(stdout.contains("peak RSS"), "{stdout}");
    assert_eq!(image::open(&out).unwrap().to_rgb8().dimensions(), (80, 48));
    // With a budget that holds everything, --tiled decodes one tile (exactly).
    let o = cli(&[
        "--vae",
        &vae,
        "--config",
        &cfg,
        "--latents",
        &lat,
        "--out",
        &s(&out),
        "--force",
        "--tiled",
        "--vram-budget",
        "256MiB",
    ]);
    let stderr = text(&o).1;
    assert!(
        o.status.success() && stderr.contains("tiled 10x10 overlap 0") && stderr.contains("budget 256.00 MiB"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(dir);
}
