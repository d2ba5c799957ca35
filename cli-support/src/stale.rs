//! Partial files left behind by a run that was killed (SIGKILL, a crash, a power cut):
//! found in the output directories before a new run starts, removed when the process that
//! wrote them is gone, named when it still runs.

use std::path::{Path, PathBuf};

use crate::partial::parse_partial_name;

/// One partial file found in an output directory.
#[derive(Debug, PartialEq, Eq)]
pub enum Found {
    /// Its process is gone; the file was removed.
    Removed { path: PathBuf, pid: u32 },
    /// Its process still runs (another run writing there now): left alone.
    InUse { path: PathBuf, pid: u32 },
    /// Its process is gone but the file could not be removed.
    NotRemoved { path: PathBuf, pid: u32, why: String },
}

impl Found {
    /// A one-line note for the user.
    pub fn message(&self) -> String {
        match self {
            Found::Removed { path, pid } => {
                format!(
                    "removed {}, a partial output left by process {pid}, which is no longer running",
                    path.display()
                )
            }
            Found::InUse { path, pid } => format!(
                "{} is a partial output being written by process {pid}, which is still running; left alone",
                path.display()
            ),
            Found::NotRemoved { path, pid, why } => format!(
                "{} is a partial output left by process {pid} (no longer running) and could not be removed: {why}",
                path.display()
            ),
        }
    }
}

/// Whether process `pid` exists (signal 0 checks without sending anything).
pub fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks whether the process exists and may be signalled.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Looks for partial files (`.NAME.partial-PID`) in each directory of `dirs` (each once):
/// those of processes that are gone are removed. A directory that cannot be read is
/// skipped (the run's own checks report it).
pub fn sweep<'a>(dirs: impl IntoIterator<Item = &'a Path>) -> Vec<Found> {
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut found = Vec::new();
    let me = std::process::id();
    for dir in dirs {
        let key = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        let mut paths: Vec<(PathBuf, u32)> = entries
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| {
                let name = e.file_name().to_str()?.to_string();
                let (_, pid) = parse_partial_name(&name)?;
                Some((e.path(), pid))
            })
            .collect();
        paths.sort();
        for (path, pid) in paths {
            // This process has written nothing yet: a file with its id is another's, gone.
            if pid != me && process_alive(pid) {
                found.push(Found::InUse { path, pid });
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => found.push(Found::Removed { path, pid }),
                Err(e) => found.push(Found::NotRemoved { path, pid, why: e.to_string() }),
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_process_partials_go_live_ones_stay() {
        let dir = std::env::temp_dir().join(format!("cli-support-stale-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // A child that has exited and been waited for: its id names no process.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let parent = std::os::unix::process::parent_id();
        let stale = dir.join(format!(".a.png.partial-{dead}"));
        let live = dir.join(format!(".b.png.partial-{parent}"));
        let other = dir.join(".notes.txt");
        for p in [&stale, &live, &other] {
            std::fs::write(p, b"x").unwrap();
        }
        let found = sweep([dir.as_path(), dir.as_path()]);
        assert_eq!(
            found,
            vec![Found::Removed { path: stale.clone(), pid: dead }, Found::InUse { path: live.clone(), pid: parent }]
        );
        assert!(!stale.exists() && live.exists() && other.exists());
        assert!(found[0].message().contains("no longer running"), "{}", found[0].message());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
