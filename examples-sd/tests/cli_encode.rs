//! The `sd-vae-encode` binary end to end, real files and processes: a PNG encoded to
//! diffusers' pipeline latents (its own image loading and preprocessing), both output
//! formats, the latents read back by `sd-vae-decode`, seeds, `--plan`, and each error
//! (exit status 1 for a failed run, 2 for a command line that cannot work).

mod common;

use common::*;
use examples_sd::Encoder;
use rocm_vision::{DType, Device, Tensor};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

fn cli() -> Command {
    Command::new(env!("CARGO_BIN_EXE_sd-vae-encode"))
}

fn run(args: &[String]) -> Output {
    cli().args(args).output().expect("run sd-vae-encode")
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `--vae`, `--config`, `--image`, `--out`, `--device cpu` for `model`'s fixture encoder.
fn args(model: &str, image: &Path, out: &Path) -> Vec<String> {
    [
        "--vae",
        &s(&fixture(&format!("{model}_encoder_diffusers.safetensors"))),
        "--config",
        &s(&fixture(&format!("{model}_config.json"))),
        "--image",
        &s(image),
        "--out",
        &s(out),
        "--device",
        "cpu",
    ]
    .map(String::from)
    .to_vec()
}

fn with(mut a: Vec<String>, extra: &[&str]) -> Vec<String> {
    a.extend(extra.iter().map(|x| x.to_string()));
    a
}

fn read_latents(p: &Path) -> Tensor {
    examples_sd::io::load_latents(p, None, &Device::cpu()).expect("latents written")
}

fn exit_with(o: &Output, code: i32, needles: &[&str]) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {e}");
    for n in needles {
        assert!(e.contains(n), "{n:?} missing from stderr: {e}");
    }
    assert!(!e.contains("panicked"), "{e}");
}

/// The PNG through diffusers' `load_image` + `VaeImageProcessor.preprocess` + encode
/// (fixtures): the scaled mean and the scaled sample with the fixture's noise, in both
/// output formats, to 1e-5 of their scale; the .safetensors output decodes.
#[test]
fn encodes_a_png_to_diffusers_latents() {
    let dir = scratch_dir("cli-encode");
    for model in ["sd", "flux"] {
        let case = format!("{model}_encode_png_80x48");
        let t = tensors(&format!("{case}.safetensors"));
        let png = fixture(&format!("{case}.png"));
        let out = dir.join(format!("{model}_mean.safetensors"));
        let o = run(&with(args(model, &png, &out), &["--mean"]));
        assert!(o.status.success(), "{}", stderr(&o));
        let e = stderr(&o);
        for stage in ["down_blocks.0 done", "mid_block done"] {
            assert!(e.contains(stage), "{stage:?} missing: {e}");
        }
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert!(stdout.contains("encode") && stdout.contains("peak RSS"), "{stdout}");
        let err = rel_max_err(&read_latents(&out), &t["latents_mean"]);
        println!("{model} PNG --mean vs diffusers: max|d| / max|expected| = {err:.3e}");
        assert!(err <= 1e-5, "{model} mean: {err}");

        // The sample with diffusers' noise (the fixture file holds several tensors: the
        // one named `noise` is taken), as .npy.
        let npy = dir.join(format!("{model}_sample.npy"));
        let noise = fixture(&format!("{case}.safetensors"));
        let o = run(&with(args(model, &png, &npy), &["--noise", &s(&noise)]));
        assert!(o.status.success(), "{}", stderr(&o));
        let err = rel_max_err(&read_latents(&npy), &t["latents"]);
        println!("{model} PNG --noise vs diffusers: max|d| / max|expected| = {err:.3e}");
        assert!(err <= 1e-5, "{model} sample: {err}");

        // sd-vae-decode reads the latents as written (its decoder from the decoder fixture).
        let img = dir.join(format!("{model}_back.png"));
        let o = Command::new(env!("CARGO_BIN_EXE_sd-vae-decode"))
            .args(["--vae", &s(&fixture(&format!("{model}_vae_diffusers.safetensors")))])
            .args(["--config", &s(&fixture(&format!("{model}_config.json")))])
            .args(["--latents", &s(&out), "--out", &s(&img), "--device", "cpu"])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(image::open(&img).unwrap().to_rgb8().dimensions(), (80, 48));
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// `--seed`: the same seed gives the same latents (the library's encode with the
/// Philox noise of that seed); another seed other latents. `--dtype f16` is close.
#[test]
fn seeds_are_reproducible_and_f16_is_close() {
    let dir = scratch_dir("cli-encode-seed");
    let png = fixture("sd_encode_png_80x48.png");
    let run_seed = |name: &str, extra: &[&str]| {
        let out = dir.join(name);
        let o = run(&with(args("sd", &png, &out), extra));
        assert!(o.status.success(), "{}", stderr(&o));
        read_latents(&out).to_vec::<f32>().unwrap()
    };
    let a = run_seed("a.safetensors", &["--seed", "7"]);
    let b = run_seed("b.safetensors", &["--seed", "7"]);
    let c = run_seed("c.safetensors", &["--seed", "8"]);
    assert_eq!(a, b);
    assert_ne!(a, c);
    let enc = load_encoder("sd", &fixture("sd_encoder_diffusers.safetensors"), DType::F32);
    let t = tensors("sd_encode_png_80x48.safetensors");
    let dist = enc.encode(&t["image"], &mut |_, _| {}).unwrap();
    let noise = Tensor::rand_normal(&[1, 4, 6, 10], (0.0, 1.0), 7, 0, DType::F32, &Device::cpu()).unwrap();
    let ours = enc.latents(&dist, Some(&noise)).unwrap();
    let shape = ours.dims().to_vec();
    assert!(rel_max_err(&Tensor::from_vec(a.clone(), &shape, &Device::cpu()).unwrap(), &ours) <= 1e-5);
    // Without --seed or --noise the seed is drawn and printed.
    let out = dir.join("drawn.safetensors");
    let o = run(&args("sd", &png, &out));
    assert!(o.status.success() && stderr(&o).contains("sampling with --seed "), "{}", stderr(&o));
    let h = run_seed("h.safetensors", &["--mean", "--dtype", "f16"]);
    let err = rel_max_err(&Tensor::from_vec(h, &shape, &Device::cpu()).unwrap(), &t["latents_mean"]);
    println!("sd PNG --mean f16 vs diffusers f32: {err:.3e}");
    assert!(err <= 5e-3, "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_inputs_and_command_lines_say_what_is_wrong() {
    let dir = scratch_dir("cli-encode-errors");
    let png = fixture("sd_encode_png_80x48.png");
    let out = dir.join("o.safetensors");
    // An image that is not a multiple of 8: exit 1, the size and what to do.
    let odd = dir.join("odd.png");
    image::RgbImage::new(50, 40).save(&odd).unwrap();
    let o = run(&args("sd", &odd, &out));
    exit_with(&o, 1, &["odd.png", "50x40 pixels", "multiples of 8", "e.g. to 48x40"]);
    assert!(!out.exists());
    // Not an image.
    let o = run(&args("sd", &fixture("sd_config.json"), &out));
    exit_with(&o, 1, &["sd_config.json", "not a recognised image format"]);
    // A wrong output extension, conflicting options, a budget too small: exit 2.
    exit_with(&run(&args("sd", &png, &dir.join("o.png"))), 2, &[".safetensors or .npy"]);
    exit_with(&run(&with(args("sd", &png, &out), &["--seed", "1", "--mean"])), 2, &["--mean"]);
    exit_with(&run(&with(args("sd", &png, &out), &["--vram-budget", "1MiB"])), 2, &["raise --vram-budget"]);
    // Noise of the wrong shape: exit 1, both shapes.
    let noise = fixture("sd_encode_64x64.safetensors");
    let o = run(&with(args("sd", &png, &out), &["--noise", &s(&noise)]));
    exit_with(&o, 1, &["[1, 4, 8, 8]", "[1, 4, 6, 10]"]);
    // FLUX weights with the SD configuration: named as such.
    let mut a = args("sd", &png, &out);
    a[1] = s(&fixture("flux_encoder_diffusers.safetensors"));
    exit_with(&run(&a), 1, &["16 latent channels", "--model"]);
    // A decoder-only file has no encoder.
    a[1] = s(&fixture("sd_vae_diffusers.safetensors"));
    exit_with(&run(&a), 1, &["encoder.conv_in.weight"]);
    // An existing output needs --force; an output that is an input is refused even then.
    std::fs::write(&out, b"old").unwrap();
    exit_with(&run(&args("sd", &png, &out)), 1, &["exists", "--force"]);
    assert_eq!(std::fs::read(&out).unwrap(), b"old");
    let o = run(&with(args("sd", &png, &out), &["--force", "--mean"]));
    assert!(o.status.success(), "{}", stderr(&o));
    let copy = dir.join("noise.npy");
    std::fs::write(&copy, examples_sd::npy::write_f32(&[1, 4, 6, 10], &[0.0; 240])).unwrap();
    let o = run(&with(args("sd", &png, &copy), &["--noise", &s(&copy), "--force"]));
    exit_with(&o, 1, &["would replace the input"]);
    let _ = std::fs::remove_dir_all(dir);
}

/// `--plan`: `Encoder::plan`'s line on stdout, from `--size` or the image; nothing read
/// or written.
#[test]
fn plan_prints_the_libraries_plan() {
    let cfg = s(&fixture("sd_config.json"));
    let o = run(&with(vec![], &["--plan", "--size", "256x128", "--config", &cfg, "--device", "cpu", "--dtype", "f16"]));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", stderr(&o));
    let expected = Encoder::plan(&config("sd"), &Device::cpu(), (256, 128), DType::F16, None).unwrap();
    assert_eq!(stdout.trim(), expected.to_string());
    let png = s(&fixture("sd_encode_png_80x48.png"));
    let o = run(&with(vec![], &["--plan", "--image", &png, "--config", &cfg, "--device", "cpu", "--budget", "1MiB"]));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.starts_with("encode 80x48 F32 on cpu") && stdout.contains("does not fit"), "{stdout}");
    exit_with(&run(&with(vec![], &["--plan", "--size", "250x256", "--config", &cfg])), 2, &["multiple of 8"]);
}

#[test]
fn sigterm_during_the_encode_leaves_no_file_and_says_so() {
    let dir = scratch_dir("cli-encode-sigterm");
    let out = dir.join("o.npy");
    let a = with(args("sd", &fixture("sd_encode_png_80x48.png"), &out), &["--mean", "--repeat", "1000000"]);
    let child = cli().args(&a).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().expect("spawn");
    std::thread::sleep(Duration::from_millis(1500));
    let st = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(st.success());
    let o = child.wait_with_output().expect("wait");
    exit_with(&o, 143, &["sd-vae-encode: interrupted by SIGTERM: 0 of 1 output(s) written completely"]);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "files left in {}", dir.display());
    let _ = std::fs::remove_dir_all(dir);
}
