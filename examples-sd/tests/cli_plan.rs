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

    // No size: a usage error (exit 2) that says what to give.
    let o = run(&["--plan", "--config", cfg]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--size WIDTHxHEIGHT or --latents"));
    let o = run(&["--plan", "--size", "250x256", "--config", cfg]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("multiple of 8"));
}
