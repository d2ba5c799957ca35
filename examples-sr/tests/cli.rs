//! The `realcugan` binary: options, refusals and error messages (no panics, non-zero exit
//! codes), and real runs on small images when the models are present.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use examples_sr::image_io::{self, Format};
use examples_sr::upscale::Options;

fn realcugan(args: &[&str], models: Option<&Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_realcugan"));
    cmd.args(args).args(["--device", "cpu", "-q"]);
    match models {
        Some(m) => cmd.arg("--model-dir").arg(m),
        None => cmd.env_remove("REALCUGAN_MODELS"),
    };
    cmd.output().expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("realcugan-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn fixture_input(name: &str) -> PathBuf {
    common::fixtures_dir().join("inputs").join(name)
}

fn no_panic(o: &Output) {
    let e = stderr(o);
    assert!(!e.contains("panicked"), "the binary panicked: {e}");
}

#[test]
fn help_explains_every_option_and_default() {
    let o = Command::new(env!("CARGO_BIN_EXE_realcugan")).arg("--help").output().expect("runs");
    assert!(o.status.success());
    let help = String::from_utf8_lossy(&o.stdout);
    for needle in [
        "--input",
        "--output",
        "--scale",
        "--noise",
        "--model ",
        "--model-dir",
        "--device",
        "--tile",
        "--vram-budget",
        "--cache-budget",
        "--dtype",
        "--format",
        "--force",
        "[default: 2]",
        "[default: -1]",
        "[default: se]",
        "[default: auto]",
        "[default: 2GiB]",
        "[default: 50%]",
        "[default: f32]",
        "REALCUGAN_MODELS",
        "scripts/fetch-models.sh",
    ] {
        assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
    }
}

#[test]
fn combinations_without_a_model_are_refused() {
    let dir = scratch("combos");
    let out = dir.join("o.png");
    let input = fixture_input("rgb32.png");
    let input = input.to_str().expect("utf-8 path");
    let cases: [(&[&str], &str); 4] = [
        (&["--model", "pro", "-s", "2", "-n", "1"], "no pro model for scale 2 with noise level 1"),
        (&["--model", "nose", "-s", "3", "-n", "0"], "no nose model for scale 3"),
        (&["-s", "5"], "scale 5 is not supported"),
        (&["-n", "7"], "noise level 7 is not supported"),
    ];
    for (args, want) in cases {
        let mut all = vec!["-i", input, "-o", out.to_str().expect("utf-8")];
        all.extend_from_slice(args);
        let o = realcugan(&all, Some(Path::new("/nonexistent")));
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        no_panic(&o);
    }
    assert!(!out.exists());
}

#[test]
fn missing_models_say_what_to_run() {
    let dir = scratch("missing");
    let out = dir.join("o.png");
    let o = realcugan(
        &["-i", fixture_input("rgb32.png").to_str().expect("utf-8"), "-o", out.to_str().expect("utf-8")],
        Some(&dir.join("no-models-here")),
    );
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(e.contains("scripts/fetch-models.sh") && e.contains("up2x-conservative.param"), "{e}");
    no_panic(&o);
    assert!(!out.exists());
}

#[test]
fn existing_output_is_not_replaced_without_force() {
    let dir = scratch("refuse");
    let out = dir.join("o.png");
    std::fs::write(&out, b"keep me").expect("write");
    // The refusal comes before the model is needed: no models required.
    let o = realcugan(
        &["-i", fixture_input("rgb32.png").to_str().expect("utf-8"), "-o", out.to_str().expect("utf-8")],
        Some(&dir),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("exists; use --force"), "{}", stderr(&o));
    assert_eq!(std::fs::read(&out).expect("read"), b"keep me");
    no_panic(&o);
}

#[test]
fn bad_arguments_are_messages() {
    let dir = scratch("args");
    let input = fixture_input("rgb32.png");
    let input = input.to_str().expect("utf-8");
    let out = dir.join("o.png");
    let out = out.to_str().expect("utf-8");
    let txt = dir.join("o.txt");
    let cases: [(&[&str], &str); 5] = [
        (&["-i", input, "-o", out, "--tile", "big"], "--tile \"big\""),
        (&["-i", input, "-o", out, "--dtype", "f64"], "--dtype \"f64\""),
        (&["-i", input, "-o", out, "--vram-budget", "lots"], "invalid memory budget"),
        (&["-i", input, "-o", txt.to_str().expect("utf-8")], "unknown output format"),
        (&["-i", "/nonexistent.png", "-o", out], "no such file"),
    ];
    for (args, want) in cases {
        let o = realcugan(args, Some(&dir));
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
        no_panic(&o);
    }
}

#[test]
fn malformed_model_and_image_are_messages() {
    let dir = scratch("malformed");
    let models = dir.join("models");
    std::fs::create_dir_all(models.join("models-se")).expect("dir");
    std::fs::write(models.join("models-se/up2x-conservative.param"), "not an ncnn file\n").expect("write");
    std::fs::write(models.join("models-se/up2x-conservative.bin"), b"").expect("write");
    let out = dir.join("o.png");
    let o = realcugan(
        &["-i", fixture_input("rgb32.png").to_str().expect("utf-8"), "-o", out.to_str().expect("utf-8")],
        Some(&models),
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("bad magic"), "{}", stderr(&o));
    no_panic(&o);

    let Some(real) = common::models_or_skip("malformed_model_and_image_are_messages (bad image part)") else { return };
    let bad = dir.join("bad.png");
    std::fs::write(&bad, b"\x89PNG but not really").expect("write");
    let o = realcugan(&["-i", bad.to_str().expect("utf-8"), "-o", out.to_str().expect("utf-8")], Some(&real));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("cannot decode"), "{}", stderr(&o));
    no_panic(&o);
    assert!(!out.exists());
}

#[test]
fn force_replaces_and_matches_the_library() {
    let Some(models) = common::models_or_skip("force_replaces_and_matches_the_library") else { return };
    let dir = scratch("force");
    let out = dir.join("o.png");
    std::fs::write(&out, b"old").expect("write");
    let input = fixture_input("rgb32.png");
    let o = realcugan(
        &[
            "-i",
            input.to_str().expect("utf-8"),
            "-o",
            out.to_str().expect("utf-8"),
            "-n",
            "0",
            "--force",
            "--tile",
            "16",
        ],
        Some(&models),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let got = image_io::load(&out).expect("a valid PNG was written");
    let up = common::load(&models, "models-se/up2x-no-denoise");
    let img = image_io::load(&input).expect("input");
    let plan = up.plan(32, 32, &Options::whole()).expect("plan");
    let want = up.upscale(&img, &plan, &mut |_| {}).expect("upscale");
    assert_eq!(common::max_diff(&got, &want), (0, 0));
    // No temporary file is left behind.
    let leftovers: Vec<_> =
        std::fs::read_dir(&dir).expect("dir").flatten().filter(|e| e.file_name() != "o.png").collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn directory_in_directory_out() {
    let Some(models) = common::models_or_skip("directory_in_directory_out") else { return };
    let dir = scratch("dirs");
    let (inp, out) = (dir.join("in"), dir.join("out"));
    std::fs::create_dir_all(&inp).expect("dir");
    std::fs::copy(fixture_input("rgb32.png"), inp.join("a.png")).expect("copy");
    image_io::save(&common::synthetic(20, 14, 4, 3), &inp.join("b.png"), Format::Png).expect("save");
    image_io::save(&common::synthetic(18, 12, 3, 4), &inp.join("c.jpg"), Format::Jpeg).expect("save");
    image_io::save(&common::synthetic(16, 10, 4, 5), &inp.join("d.webp"), Format::Webp).expect("save");
    std::fs::write(inp.join("notes.txt"), "not an image").expect("write");
    let o = realcugan(
        &["-i", inp.to_str().expect("utf-8"), "-o", out.to_str().expect("utf-8"), "-s", "2", "-n", "0"],
        Some(&models),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let mut names: Vec<String> = std::fs::read_dir(&out)
        .expect("out dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["a.png", "b.png", "c.png", "d.png"]);
    for (name, w, h, ch) in [("a.png", 64, 64, 3), ("b.png", 40, 28, 4), ("c.png", 36, 24, 3), ("d.png", 32, 20, 4)] {
        let img = image_io::load(&out.join(name)).expect("output decodes");
        assert_eq!((img.width, img.height, img.channels), (w, h, ch), "{name}");
    }
    // A second run refuses every existing output and says so.
    let o =
        realcugan(&["-i", inp.to_str().expect("utf-8"), "-o", out.to_str().expect("utf-8"), "-n", "0"], Some(&models));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("all 4 outputs exist"), "{}", stderr(&o));
}
