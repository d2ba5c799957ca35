//! Issue 13, item 4, in the ROCm toolchain tier (the Debian chroot: real hiprtc, no GPU):
//! the on-disk kernel cache under real processes and real compiles.
//!
//! - Two processes fill one fresh cache directory with the same modules at the same moment
//!   (each the test binary re-invoked, started together by a go-file): both succeed, their
//!   compiles of one entry overlap in time, no temporary is left, and a third process then
//!   loads every module from the cache without compiling.
//! - A cache entry corrupted (bit flip), truncated (at several lengths), replaced by another
//!   module's or another architecture's entry, or by garbage, is detected and rebuilt by
//!   hiprtc, and the rewritten entry serves the next call.
//!
//! Compiles are counted by `jit::cached_code`'s second value (false: hiprtc ran). Loading a
//! code object needs a GPU, which this tier lacks; `Jit::load` takes its code from
//! `cached_code`, the path tested here. Outside the chroot (no ROCm) the tests say SKIPPED;
//! under `ROCM_VISION_REQUIRE_ROCM=1` a missing ROCm fails them.

use conv_engine::testing::skipped;
use rocm_backend::{jit, runtime};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const ARCH: &str = "gfx1100";
/// In a child process: the cache directory to fill.
const CHILD_CACHE: &str = "RV_KERNEL_CACHE_TEST_DIR";
/// In a child process: the file whose appearance starts the compiles.
const CHILD_GO: &str = "RV_KERNEL_CACHE_TEST_GO";
/// What a child prints per module, for the parent to parse.
const REPORT: &str = "RVCACHE";

/// Three of the smallest modules: enough to race on, quick to compile twice (resample,
/// the first, is rebuilt once per broken entry: about 4 s each on 2 cores).
fn modules() -> Vec<&'static kernels::Module> {
    ["resample", "cast", "binary"]
        .iter()
        .map(|n| kernels::modules().iter().find(|m| m.name == *n).unwrap_or_else(|| panic!("no module {n}")))
        .collect()
}

/// `true` when the toolchain is here; else says SKIPPED (or fails under
/// `ROCM_VISION_REQUIRE_ROCM=1`).
fn have_rocm() -> bool {
    match runtime() {
        Ok(_) => true,
        Err(e) => {
            assert!(
                !std::env::var("ROCM_VISION_REQUIRE_ROCM").is_ok_and(|v| v == "1"),
                "ROCM_VISION_REQUIRE_ROCM=1 but: {e}"
            );
            skipped(format!("needs the ROCm toolchain chroot (hiprtc): {e}"));
            false
        }
    }
}

fn fresh_dir(what: &str) -> PathBuf {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
    let d = std::env::temp_dir().join(format!("rv-{what}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn now_micros() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros()
}

fn sha(code: &[u8]) -> String {
    Sha256::digest(code).iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// A code object hiprtc made for `m`: an ELF of some size naming every entry point.
fn assert_code_of(m: &kernels::Module, code: &[u8]) {
    assert!(code.len() > 1000 && code.starts_with(b"\x7fELF"), "{}: {} bytes, not an ELF", m.name, code.len());
    for entry in m.entry_points() {
        assert!(code.windows(entry.len()).any(|w| w == entry.as_bytes()), "{}: {entry} missing", m.name);
    }
}

fn entry_path(dir: &Path, m: &kernels::Module, arch: &str) -> PathBuf {
    dir.join(format!("{}-{arch}-{}.co", m.name, jit::cache_key(m, arch).unwrap()))
}

fn temporaries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect()
}

/// One module's line from a child: `RVCACHE <module> compiled|cached <bytes> <sha> <start µs> <end µs>`.
#[derive(Debug)]
struct Report {
    module: String,
    compiled: bool,
    sha: String,
    start: u128,
    end: u128,
}

/// The child's work: wait for the go-file, then fetch every module through the cache.
fn child(dir: &Path, go: &Path) {
    let ready = Instant::now();
    while !go.exists() {
        assert!(ready.elapsed() < Duration::from_secs(120), "no go-file after 120 s");
        std::thread::sleep(Duration::from_millis(1));
    }
    for m in modules() {
        let start = now_micros();
        let (code, cached) = jit::cached_code(m, ARCH, Some(dir)).unwrap_or_else(|e| panic!("{}: {e}", m.name));
        let end = now_micros();
        assert_code_of(m, &code);
        let how = if cached { "cached" } else { "compiled" };
        println!("{REPORT} {} {how} {} {} {start} {end}", m.name, code.len(), sha(&code));
    }
}

/// Runs this test binary's `test` in a child process filling `dir`.
fn spawn_child(test: &str, dir: &Path, go: &Path) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_CACHE, dir)
        .env(CHILD_GO, go)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_child(c: std::process::Child, who: &str) -> Vec<Report> {
    let out = c.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{who} failed ({}):\n{stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    let reports: Vec<Report> = stdout
        .lines()
        // The harness may print its `test ... ` prefix on the same line.
        .filter_map(|l| l.find(REPORT).map(|at| &l[at + REPORT.len()..]))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Report {
                module: f[0].into(),
                compiled: f[1] == "compiled",
                sha: f[3].into(),
                start: f[4].parse().unwrap(),
                end: f[5].parse().unwrap(),
            }
        })
        .collect();
    assert_eq!(reports.len(), modules().len(), "{who} reported {reports:?}\n{stdout}");
    reports
}

#[test]
fn two_processes_fill_one_cache_at_once() {
    const TEST: &str = "two_processes_fill_one_cache_at_once";
    if let (Some(dir), Some(go)) = (std::env::var_os(CHILD_CACHE), std::env::var_os(CHILD_GO)) {
        // Only a child has these: it does its share and ends.
        assert!(runtime().is_ok(), "a child needs the ROCm runtime its parent found");
        child(Path::new(&dir), Path::new(&go));
        return;
    }
    if !have_rocm() {
        return;
    }
    let dir = fresh_dir("kernel-cache-procs");
    let go = dir.with_extension("go");
    let t = Instant::now();
    let writers = [spawn_child(TEST, &dir, &go), spawn_child(TEST, &dir, &go)];
    // Both wait on the go-file: created now, they start their first compile together.
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(&go, b"go").unwrap();
    let [a, b] = writers;
    let (ra, rb) = (wait_child(a, "writer 1"), wait_child(b, "writer 2"));
    let fill_s = t.elapsed().as_secs_f64();
    let compiles = ra.iter().chain(&rb).filter(|r| r.compiled).count();
    // The first module is missed by both (the cache is empty when they start), so both
    // compile it and write its entry; their compiles overlap in time.
    let overlapping: Vec<&str> = ra
        .iter()
        .zip(&rb)
        .filter(|(x, y)| x.compiled && y.compiled && x.start < y.end && y.start < x.end)
        .map(|(x, _)| x.module.as_str())
        .collect();
    assert!(!overlapping.is_empty(), "no module compiled by both writers at once: {ra:?} {rb:?}");
    assert!(compiles > modules().len(), "{compiles} compiles");
    let left = temporaries(&dir);
    assert!(left.is_empty(), "temporaries left behind: {left:?}");
    for m in modules() {
        assert!(entry_path(&dir, m, ARCH).is_file(), "{}: no cache entry", m.name);
    }
    // A third process finds everything cached: no compile, and the code one of the
    // writers made.
    let reader = wait_child(spawn_child(TEST, &dir, &go), "reader");
    for r in &reader {
        assert!(!r.compiled, "the reader compiled {}: the cache was not left valid", r.module);
        let written: Vec<&str> =
            ra.iter().chain(&rb).filter(|w| w.module == r.module).map(|w| w.sha.as_str()).collect();
        assert!(written.contains(&r.sha.as_str()), "{}: read {} but the writers made {written:?}", r.module, r.sha);
    }
    println!(
        "2 writers, {} modules for {ARCH}: {compiles} compiles ({} overlapping: {}), {fill_s:.1} s; reader: 0 compiles",
        modules().len(),
        overlapping.len(),
        overlapping.join(", ")
    );
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&go);
}

#[test]
fn broken_cache_entries_are_rebuilt_by_hiprtc() {
    if !have_rocm() {
        return;
    }
    let dir = fresh_dir("kernel-cache-broken");
    let mods = modules();
    let (m, other) = (mods[0], mods[1]);
    let path = entry_path(&dir, m, ARCH);
    let compiles = std::cell::Cell::new(0);
    let fetch = |module: &kernels::Module, arch: &str| {
        let (code, cached) = jit::cached_code(module, arch, Some(&dir)).unwrap_or_else(|e| panic!("{e}"));
        compiles.set(compiles.get() + usize::from(!cached));
        (code, cached)
    };
    let (good, cached) = fetch(m, ARCH);
    assert!(!cached, "a fresh directory cannot hold {}", m.name);
    assert_code_of(m, &good);
    assert_eq!(fetch(m, ARCH), (good.clone(), true), "the entry just written serves the next call");
    let entry = std::fs::read(&path).unwrap();
    // Valid entries of another module and of another architecture, to rename into place.
    fetch(other, ARCH);
    fetch(m, "gfx1201");
    let foreign_module = std::fs::read(entry_path(&dir, other, ARCH)).unwrap();
    let foreign_arch = std::fs::read(entry_path(&dir, m, "gfx1201")).unwrap();
    let flipped = |at: usize| {
        let mut e = entry.clone();
        e[at] ^= 0x10;
        e
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("a bit flipped in the code", flipped(entry.len() / 2)),
        ("a bit flipped in the last byte", flipped(entry.len() - 1)),
        ("a bit flipped in the checksum", flipped(12)),
        ("empty", Vec::new()),
        ("truncated in the header", entry[..20].to_vec()),
        ("truncated in the name", entry[..50].to_vec()),
        ("truncated to half", entry[..entry.len() / 2].to_vec()),
        ("one byte short", entry[..entry.len() - 1].to_vec()),
        ("another module's entry", foreign_module),
        ("another architecture's entry", foreign_arch),
        ("garbage", (0..4096u32).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8).collect()),
    ];
    let before = compiles.get();
    for (what, bytes) in &cases {
        std::fs::write(&path, bytes).unwrap();
        let (code, cached) = fetch(m, ARCH);
        assert!(!cached, "{what}: served from the cache");
        assert_code_of(m, &code);
        let (again, cached) = fetch(m, ARCH);
        assert!(cached && again == code, "{what}: the rebuilt entry does not serve the next call");
        println!("{what}: detected, rebuilt by hiprtc ({} bytes), served from the cache after", code.len());
    }
    assert_eq!(compiles.get() - before, cases.len(), "one compile per broken entry");
    assert!(temporaries(&dir).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 27: the cache key holds the compiler version, so an entry written under one
/// toolchain is never served under another. `.ci/run` runs this test in the ROCm 6.4 chroot
/// and then, with the same `ROCM_VISION_CROSS_CACHE` directory, in the ROCm 7.2 one: each
/// run writes its entries and a manifest naming them, and checks the entries every other
/// toolchain left there: under its own key they are absent (it compiles), and one copied
/// under its own key's name is refused as foreign (it compiles again).
#[test]
fn entries_of_another_toolchain_are_never_served() {
    let Some(dir) = std::env::var_os("ROCM_VISION_CROSS_CACHE").map(PathBuf::from) else {
        skipped("set ROCM_VISION_CROSS_CACHE to a directory shared by two toolchains' runs (.ci/run does)");
        return;
    };
    if !have_rocm() {
        return;
    }
    let rt = runtime().unwrap();
    let me = format!("hip-{}-hiprtc-{}.{}", rt.version, rt.hiprtc_version.0, rt.hiprtc_version.1);
    std::fs::create_dir_all(&dir).unwrap();
    // Other toolchains' manifests: `<module> <file name>` per line.
    let mut others: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(tool) = name.strip_suffix(".manifest")
            && tool != me
        {
            let lines = std::fs::read_to_string(e.path()).unwrap();
            let entries = lines.lines().filter_map(|l| l.split_once(' ')).map(|(m, f)| (m.into(), f.into())).collect();
            others.push((tool.to_string(), entries));
        }
    }
    let mods = &modules()[..2];
    let mut checked = 0;
    let mut manifest = String::new();
    for m in mods {
        let mine = entry_path(&dir, m, ARCH);
        let _ = std::fs::remove_file(&mine);
        for (tool, entries) in &others {
            for (_, file) in entries.iter().filter(|(module, _)| module == m.name) {
                let theirs = dir.join(file);
                assert!(theirs.is_file(), "{tool}'s manifest names {file}, which is not there");
                assert_ne!(theirs, mine, "{}: {tool} and {me} share a cache key", m.name);
                // Only their entry is there: it is not served, hiprtc compiles.
                let _ = std::fs::remove_file(&mine);
                let (code, cached) = jit::cached_code(m, ARCH, Some(&dir)).unwrap();
                assert!(!cached, "{}: served from the cache with only {tool}'s entry present", m.name);
                assert_code_of(m, &code);
                // Their entry under our key's name: refused as foreign, compiled again.
                std::fs::copy(&theirs, &mine).unwrap();
                let (code, cached) = jit::cached_code(m, ARCH, Some(&dir)).unwrap();
                assert!(!cached, "{}: {tool}'s entry renamed to our key was served", m.name);
                assert_code_of(m, &code);
                println!(
                    "{}: {tool}'s entry {file} not served under {me} (absent key, then refused as foreign)",
                    m.name
                );
                checked += 1;
            }
        }
        // Leave our own entry for the next toolchain.
        let (_, _) = jit::cached_code(m, ARCH, Some(&dir)).unwrap();
        assert!(mine.is_file());
        manifest.push_str(&format!("{} {}\n", m.name, mine.file_name().unwrap().to_string_lossy()));
    }
    std::fs::write(dir.join(format!("{me}.manifest")), manifest).unwrap();
    if checked == 0 {
        skipped(format!("no other toolchain's entries in {} yet; {me} wrote its own for the next", dir.display()));
    } else {
        println!("{checked} entries of {} other toolchain(s) checked under {me}", others.len());
    }
}
