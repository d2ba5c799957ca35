//! `sd-vae-decode --plan`: the memory plan on stdout, nothing decoded or written, the same
//! figures as `Decoder::plan`.

mod common;

use common::*;
use examples_sd::Decoder;
use rocm_vision::{DType, Device};
use std::process::Command;

fn run(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_sd-vae-decode")).args(args).output().expect("run sd-vae-decode")
}

#[test]
fn plan_prints_the_libraries_plan_without_weights_or_output() {
    let cfg = fixture("sd_config.json");
    let cfg = cfg.to_str().unwrap();
    let o = run(&["--plan", "--size", "256x128", "--config", cfg, "--device", "cpu", "--dtype", "f16"]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let expected = Decoder::plan(&config("sd"), &Device::cpu(), (256, 128), DType::F16, None).unwrap();
    assert_eq!(stdout.trim(), expected.to_string());
    assert!(stdout.starts_with("256x128 F16 on cpu: peak "), "{stdout}");

    // From the latents' shape, with a budget too small for the exact decode.
    let lat = fixture("sd_8x8.safetensors");
    let o = run(&[
        "--plan",
        "--latents",
        lat.to_str().unwrap(),
        "--config",
        cfg,
        "--device",
        "cpu",
        "--vram-budget",
        "1MiB",
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        stdout.starts_with("64x64 F32 on cpu") && stdout.contains("does not fit the budget of 1.00 MiB"),
        "{stdout}"
    );
    // Then the banded decode's plan (which does not fit 1 MiB either).
    let banded = Decoder::plan_banded(&config("sd"), &Device::cpu(), (64, 64), DType::F32, Some(1 << 20)).unwrap();
    assert_eq!(stdout.lines().nth(1), Some(banded.to_string().as_str()), "{stdout}");
    assert!(!banded.fits && stdout.contains("banded exact decode 64x64"), "{stdout}");

    // No size: a usage error (exit 2) that says what to give.
    let o = run(&["--plan", "--config", cfg]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--size WIDTHxHEIGHT or --latents"));
    let o = run(&["--plan", "--size", "250x256", "--config", cfg]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("multiple of 8"));
}

#[test]
fn a_banded_decode_from_the_cli_writes_the_whole_decodes_png() {
    let dir = scratch_dir("cli-banded");
    let (w, lat, cfg) =
        (fixture("sd_vae_diffusers.safetensors"), fixture("sd_8x8.safetensors"), fixture("sd_config.json"));
    let decode = |out: &str, extra: &[&str]| {
        let out = dir.join(out);
        let mut args =
            vec!["--vae", w.to_str().unwrap(), "--latents", lat.to_str().unwrap(), "--latent-key", "latents"];
        args.extend(["--config", cfg.to_str().unwrap(), "--device", "cpu", "--size-independent-rounding"]);
        args.extend(["--out", out.to_str().unwrap()]);
        args.extend(extra);
        let o = run(&args);
        assert!(o.status.success(), "{extra:?}: {}", String::from_utf8_lossy(&o.stderr));
        (std::fs::read(&out).unwrap(), String::from_utf8_lossy(&o.stderr).to_string())
    };
    let (whole, _) = decode("whole.png", &[]);
    // 100 MB: bands of the plan's size; the stderr line says how it runs.
    let (banded, err) = decode("banded.png", &["--banded", "--vram-budget", "100MB"]);
    assert!(err.contains("banded exact decode 64x64 F32"), "{err}");
    assert!(whole == banded, "the banded decode's PNG differs from the whole decode's");
    // --banded and --tiled contradict each other: a usage error.
    let o = run(&["--banded", "--tiled", "--plan", "--size", "64x64", "--config", cfg.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
}
