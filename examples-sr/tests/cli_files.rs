//! `realcugan` and the user's files, with real files and real processes: name clashes and
//! inputs are never overwritten (with or without --force), output folders are checked
//! before any work, SIGINT/SIGTERM leave no partial file, and partial files of killed runs
//! are cleaned up by the next run.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use examples_sr::image_io::{self, Format};

fn bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_realcugan"));
    cmd.args(["--device", "cpu"]);
    cmd
}

/// Runs with `models` (a folder that need not exist: the refusals come before the models).
fn realcugan(args: &[&str], models: &Path) -> Output {
    bin().args(args).arg("-m").arg(models).output().expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("realcugan-files-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn partials(dir: &Path) -> Vec<String> {
    names(dir).into_iter().filter(|n| n.contains(".partial-")).collect()
}

/// `dir/<name>` for each name: small distinct images in the format of their extension.
fn images(dir: &Path, names: &[&str], side: usize) {
    std::fs::create_dir_all(dir).expect("dir");
    for (i, n) in names.iter().enumerate() {
        let p = dir.join(n);
        let f = Format::from_path(&p).expect("an image name");
        image_io::save(&common::synthetic(side, side, 3, i as u32 + 1), &p, f).expect("save");
    }
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn two_inputs_with_one_output_name_are_refused_before_any_work() {
    let dir = scratch("clash");
    let (inp, out) = (dir.join("in"), dir.join("out"));
    images(&inp, &["a.png", "x.jpg", "x.png"], 16);
    for force in [false, true] {
        let mut args = vec!["-i", s(&inp), "-o", s(&out)];
        if force {
            args.push("--force");
        }
        let o = realcugan(&args, &dir.join("no-models"));
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{e}");
        // One line naming both inputs and the output they share.
        let line = e.lines().find(|l| l.contains("x.jpg")).unwrap_or_else(|| panic!("{e}"));
        assert!(line.contains("x.png would both be written to") && line.contains("out/x.png"), "{e}");
        assert!(e.contains("nothing was done"), "{e}");
        // Nothing was done: not even a.png, whose name is free (and no model was needed).
        assert!(names(&out).is_empty(), "{:?}", names(&out));
        assert!(!e.contains("model"), "{e}");
    }
}

#[test]
fn no_output_replaces_an_input_even_with_force() {
    let dir = scratch("inplace");
    images(&dir, &["b.jpg", "b.png"], 16);
    let before = (bytes(&dir.join("b.jpg")), bytes(&dir.join("b.png")));
    let o = realcugan(&["-i", s(&dir), "-o", s(&dir), "--force"], &dir.join("no-models"));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("b.jpg -> ") && e.contains("would replace the input") && e.contains("b.png"), "{e}");
    assert_eq!((bytes(&dir.join("b.jpg")), bytes(&dir.join("b.png"))), before);
    assert_eq!(names(&dir), ["b.jpg", "b.png"]);

    // No clash of names, but the output is the input itself (-f jpg): refused too.
    let only = dir.join("only");
    images(&only, &["c.jpg"], 16);
    let before = bytes(&only.join("c.jpg"));
    let o = realcugan(&["-i", s(&only), "-o", s(&only), "-f", "jpg", "--force"], &dir.join("no-models"));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("would replace its own input"), "{}", stderr(&o));
    assert_eq!(bytes(&only.join("c.jpg")), before);
    // A single file onto itself.
    let c = only.join("c.jpg");
    let o = realcugan(&["-i", s(&c), "-o", s(&c), "--force"], &dir.join("no-models"));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(bytes(&c), before);
}

#[test]
fn output_folders_are_checked_before_the_first_image() {
    let dir = scratch("outdir");
    images(&dir, &["a.png"], 16);
    let a = dir.join("a.png");
    let no_models = dir.join("no-models");
    // A missing folder for a single output: said at once, before the models are looked for.
    let started = Instant::now();
    let o = realcugan(&["-i", s(&a), "-o", s(&dir.join("missing/a2.png"))], &no_models);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("output folder") && e.contains("missing") && e.contains("does not exist"), "{e}");
    assert!(!e.contains("fetch-models"), "checked before the models: {e}");
    assert!(started.elapsed() < Duration::from_secs(20));
    // A file where a folder should be, for a single output and for a folder of outputs.
    let o = realcugan(&["-i", s(&a), "-o", s(&a.join("x.png"))], &no_models);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("not a folder"), "{}", stderr(&o));
    let o = realcugan(&["-i", s(&dir), "-o", s(&a.join("sub"))], &no_models);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot create the output folder"), "{}", stderr(&o));
    assert_eq!(names(&dir), ["a.png"]);
}

#[test]
fn nothing_to_do_says_why() {
    let dir = scratch("nothing");
    let (inp, out) = (dir.join("in"), dir.join("out"));
    images(&inp, &["a.png", "b.png"], 16);
    std::fs::create_dir_all(out.join("b.png")).expect("a folder in b.png's place");
    std::fs::write(out.join("a.png"), b"keep").expect("write");
    let o = realcugan(&["-i", s(&inp), "-o", s(&out)], &dir.join("no-models"));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("a.png exists; use --force") && e.contains("b.png is a folder"), "{e}");
    assert!(e.contains("nothing to do: all 2 outputs were refused") && !e.contains("all 2 outputs exist"), "{e}");
    assert_eq!(bytes(&out.join("a.png")), b"keep");
}

#[test]
fn partial_files_of_dead_processes_are_removed_live_ones_named() {
    let dir = scratch("stale");
    images(&dir.join("in"), &["a.png"], 16);
    let out = dir.join("out");
    std::fs::create_dir_all(&out).expect("dir");
    std::fs::write(out.join("a.png"), b"keep").expect("write");
    let mut gone = Command::new("true").spawn().expect("spawn");
    let dead = gone.id();
    gone.wait().expect("wait");
    let stale = out.join(format!(".a.png.partial-{dead}"));
    let live = out.join(format!(".b.png.partial-{}", std::process::id()));
    std::fs::write(&stale, b"half an image").expect("write");
    std::fs::write(&live, b"being written").expect("write");
    // Even a run that does nothing else (a.png exists) cleans up.
    let o = realcugan(&["-i", s(&dir.join("in")), "-o", s(&out)], &dir.join("no-models"));
    let e = stderr(&o);
    assert!(e.contains(&format!("removed {}", stale.display())) && e.contains("no longer running"), "{e}");
    assert!(e.contains(&format!("process {}, which is still running", std::process::id())), "{e}");
    assert!(!stale.exists() && live.exists());
}

/// Spawns realcugan on `n` images of `side` pixels into a fresh folder; returns the child
/// and the folders.
fn spawn_batch(name: &str, n: usize, side: usize, models: &Path) -> (std::process::Child, PathBuf, PathBuf) {
    let dir = scratch(name);
    let (inp, out) = (dir.join("in"), dir.join("out"));
    let names: Vec<String> = (0..n).map(|i| format!("img{i}.png")).collect();
    images(&inp, &names.iter().map(String::as_str).collect::<Vec<_>>(), side);
    let child = bin()
        .args(["-i", s(&inp), "-o", s(&out), "-n", "0", "-q", "-m", s(models)])
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    (child, inp, out)
}

fn signal(pid: u32, sig: &str) {
    let st = Command::new("kill").args([sig, &pid.to_string()]).status().expect("kill runs");
    assert!(st.success());
}

/// Every output in `out` is complete: it decodes at the upscaled size.
fn outputs_complete(out: &Path, side: usize) -> usize {
    let done: Vec<String> = names(out).into_iter().filter(|n| !n.starts_with('.')).collect();
    for n in &done {
        let img = image_io::load(&out.join(n)).unwrap_or_else(|e| panic!("{n} is not a complete image: {e}"));
        assert_eq!((img.width, img.height), (2 * side, 2 * side), "{n}");
    }
    done.len()
}

#[test]
fn sigterm_while_upscaling_removes_nothing_complete_and_says_what_was_done() {
    let Some(models) = common::models_or_skip("sigterm_while_upscaling") else { return };
    let side = 48;
    let (mut child, inp, out) = spawn_batch("sigterm", 6, side, &models);
    // Wait for the first output, then interrupt (the next image is being upscaled).
    let deadline = Instant::now() + Duration::from_secs(120);
    while names(&out).iter().all(|n| n.starts_with('.')) {
        assert!(Instant::now() < deadline, "no output after 120 s");
        assert!(child.try_wait().expect("wait").is_none(), "finished before any output was seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    signal(child.id(), "-TERM");
    let o = child.wait_with_output().expect("wait");
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(143), "{e}");
    let done = outputs_complete(&out, side);
    assert!(e.contains(&format!("interrupted by SIGTERM: {done} of 6 output(s) written completely")), "{e}");
    assert!(done < 6, "{e}");
    assert!(partials(&out).is_empty(), "{:?}", partials(&out));

    // A rerun without --force names each output that exists and does the rest.
    let existing: Vec<String> = names(&out);
    let o = bin().args(["-i", s(&inp), "-o", s(&out), "-n", "0", "-q", "-m", s(&models)]).output().expect("runs");
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    for n in &existing {
        assert!(e.contains(&format!("{n} exists; use --force")), "{n}: {e}");
    }
    assert!(e.contains(&format!("{done} of 6 images failed or were refused")), "{e}");
    assert_eq!(outputs_complete(&out, side), 6);
}

#[test]
fn sigint_during_the_final_write_leaves_no_partial_file() {
    let Some(models) = common::models_or_skip("sigint_during_the_final_write") else { return };
    // Large enough outputs that the write (PNG encoding and fsync) takes milliseconds.
    let side = 160;
    for attempt in 0..3 {
        let (mut child, _inp, out) = spawn_batch(&format!("sigint{attempt}"), 3, side, &models);
        // Poll until a partial file exists: the process is inside its write.
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut caught = false;
        while Instant::now() < deadline && child.try_wait().expect("wait").is_none() {
            if !partials(&out).is_empty() {
                caught = true;
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        if !caught {
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("attempt {attempt}: no partial file seen; trying again");
            continue;
        }
        signal(child.id(), "-INT");
        let o = child.wait_with_output().expect("wait");
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(130), "{e}");
        assert!(e.contains("interrupted by SIGINT"), "{e}");
        assert!(partials(&out).is_empty(), "left behind: {:?}\n{e}", partials(&out));
        let done = outputs_complete(&out, side);
        assert!(e.contains(&format!("{done} of 3 output(s) written completely")), "{e}");
        return;
    }
    panic!("in 3 runs the partial file of an output was never seen");
}
