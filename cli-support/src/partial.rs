//! Outputs written through registered partial files, removed on a signal.
//!
//! An output `DIR/NAME` is written to `DIR/.NAME.partial-PID` ([`partial_path`]: hidden,
//! same directory so the final rename is atomic, the writer's process id in the name so a
//! later run can tell whether it is stale) and renamed to `DIR/NAME` once it is complete
//! and synced ([`Partial::commit`]). A failed write removes its partial file
//! (`Drop`).
//!
//! Signals: [`install_signal_handler`] starts a thread (signal-hook) that, on SIGINT,
//! SIGTERM or SIGHUP, takes the registry's lock, removes every registered partial file,
//! prints how many outputs were completed and exits with 128 + the signal number. Creating
//! a partial file and renaming it into place both happen under the same lock, so a signal
//! either comes before the file exists or after it is registered (and is then removed),
//! and an output is either renamed completely into place or not at all.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

struct Registry {
    files: Vec<PathBuf>,
    interrupted: bool,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry { files: Vec::new(), interrupted: false });
/// Outputs renamed into place by this process.
static DONE: AtomicUsize = AtomicUsize::new(0);
/// Outputs this run means to write (for the interruption message).
static TOTAL: AtomicUsize = AtomicUsize::new(0);

fn registry() -> MutexGuard<'static, Registry> {
    // A panic while holding the lock cannot leave the list inconsistent (push/retain).
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The infix of partial file names: `.NAME` + `PARTIAL_INFIX` + PID.
pub const PARTIAL_INFIX: &str = ".partial-";

/// The partial file of `dest` for process `pid`: `.NAME.partial-PID` beside it.
pub fn partial_path_for(dest: &Path, pid: u32) -> PathBuf {
    let name = dest.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "output".into());
    dest.with_file_name(format!(".{name}{PARTIAL_INFIX}{pid}"))
}

/// The partial file of `dest` for this process.
pub fn partial_path(dest: &Path) -> PathBuf {
    partial_path_for(dest, std::process::id())
}

/// `(NAME, PID)` of a partial file name `.NAME.partial-PID`.
pub fn parse_partial_name(file_name: &str) -> Option<(&str, u32)> {
    let rest = file_name.strip_prefix('.')?;
    let at = rest.rfind(PARTIAL_INFIX)?;
    let (name, pid) = (&rest[..at], &rest[at + PARTIAL_INFIX.len()..]);
    if name.is_empty() || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((name, pid.parse().ok()?))
}

/// How many outputs this run means to write (said if it is interrupted).
pub fn set_total(n: usize) {
    TOTAL.store(n, Ordering::SeqCst);
}

/// Outputs completed (renamed into place) so far by this process.
pub fn done() -> usize {
    DONE.load(Ordering::SeqCst)
}

/// A partial file being written; renamed to its destination by [`Partial::commit`],
/// removed when dropped uncommitted.
pub struct Partial {
    path: PathBuf,
    file: Option<File>,
}

impl Partial {
    /// Creates (truncating) the partial file of `dest` and registers it.
    pub fn create(dest: &Path) -> io::Result<Partial> {
        let path = partial_path(dest);
        let mut reg = registry();
        if reg.interrupted {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "interrupted"));
        }
        let file = File::create(&path)?;
        reg.files.push(path.clone());
        Ok(Partial { path, file: Some(file) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, to write the output into.
    pub fn file(&mut self) -> &mut File {
        self.file.as_mut().expect("a partial file is open until committed")
    }

    /// Syncs the file and renames it to `dest`. Unless `replace`, an existing `dest` (one
    /// that appeared while this output was computed) is an `AlreadyExists` error and the
    /// partial file is removed.
    pub fn commit(mut self, dest: &Path, replace: bool) -> io::Result<()> {
        let file = self.file.take().expect("committed once");
        file.sync_all()?;
        drop(file);
        let mut reg = registry();
        if !replace && dest.exists() {
            return Err(io::Error::new(io::ErrorKind::AlreadyExists, "exists"));
        }
        std::fs::rename(&self.path, dest)?;
        reg.files.retain(|p| p != &self.path);
        // Renamed: nothing for Drop to remove.
        self.path = PathBuf::new();
        DONE.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        if self.path.as_os_str().is_empty() {
            return;
        }
        drop(self.file.take());
        let mut reg = registry();
        let _ = std::fs::remove_file(&self.path);
        reg.files.retain(|p| p != &self.path);
    }
}

/// Removes every registered partial file and marks the process as interrupted (no new
/// partial file is created after this). Returns how many files were removed. The lock
/// stays held by the returned guard, so nothing is renamed into place before exit.
fn remove_all() -> (usize, MutexGuard<'static, Registry>) {
    let mut reg = registry();
    reg.interrupted = true;
    let mut removed = 0;
    for p in reg.files.drain(..) {
        if std::fs::remove_file(&p).is_ok() {
            removed += 1;
        }
    }
    (removed, reg)
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        signal_hook::consts::SIGINT => "SIGINT",
        signal_hook::consts::SIGTERM => "SIGTERM",
        signal_hook::consts::SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

/// Starts the thread that handles SIGINT, SIGTERM and SIGHUP: it removes the registered
/// partial files, prints `TOOL: interrupted by SIGINT: D of N outputs written, ...` on
/// stderr and exits with 128 + the signal number. Outputs already renamed into place stay
/// (they are complete).
pub fn install_signal_handler(tool: &'static str) -> io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        if let Some(sig) = signals.forever().next() {
            let (removed, _held) = remove_all();
            let (done, total) = (done(), TOTAL.load(Ordering::SeqCst));
            let partials = match removed {
                0 => "no partial file was left".to_string(),
                1 => "its partial file was removed".to_string(),
                n => format!("{n} partial files were removed"),
            };
            // A progress bar may be on the current line.
            eprintln!(
                "\n{tool}: interrupted by {}: {done} of {total} output(s) written completely; {partials}",
                signal_name(sig)
            );
            std::process::exit(crate::exit::signalled(sig));
        }
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let p = partial_path_for(Path::new("dir/x.png"), 1234);
        assert_eq!(p, Path::new("dir/.x.png.partial-1234"));
        assert_eq!(parse_partial_name(".x.png.partial-1234"), Some(("x.png", 1234)));
        assert_eq!(parse_partial_name(".a.partial-b.png.partial-7"), Some(("a.partial-b.png", 7)));
        for bad in ["x.png.partial-1", ".x.png.partial-", ".x.png.partial-12a", "..partial-3", ".x.png"] {
            assert_eq!(parse_partial_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn commit_renames_and_drop_removes() {
        use std::io::Write;
        let dir = std::env::temp_dir().join(format!("cli-support-partial-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let dest = dir.join("a.png");
        let mut p = Partial::create(&dest).unwrap();
        p.file().write_all(b"data").unwrap();
        let tmp = p.path().to_path_buf();
        assert!(tmp.exists());
        p.commit(&dest, false).unwrap();
        assert!(!tmp.exists());
        assert_eq!(std::fs::read(&dest).unwrap(), b"data");
        // No replacement without `replace`; the partial file goes.
        let p = Partial::create(&dest).unwrap();
        let e = p.commit(&dest, false).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&dest).unwrap(), b"data");
        // Dropped uncommitted: removed.
        let p = Partial::create(&dir.join("b.png")).unwrap();
        let tmp = p.path().to_path_buf();
        drop(p);
        assert!(!tmp.exists());
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        assert!(registry().files.is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
