//! What `realcugan` and `sd-vae-decode` share about their files and their exit:
//!
//! - [`partial`]: every output is written to a hidden partial file beside it
//!   (`.NAME.partial-PID`) and renamed into place once complete. The partial files are
//!   registered, and [`partial::install_signal_handler`] removes them on SIGINT, SIGTERM or
//!   SIGHUP before the process exits, saying how many outputs were completed.
//! - [`stale`]: partial files that an earlier, killed run left behind (its process is gone)
//!   are found before a run starts and removed, or named when their process still runs.
//! - [`exit`]: the exit-code rule of both tools.

pub mod partial;
pub mod stale;

/// The exit codes of both tools (documented in the README).
pub mod exit {
    /// The run failed: an input missing or malformed, an output that exists (without
    /// `--force`) or cannot be written, no usable device, an error while computing.
    pub const FAILED: u8 = 1;
    /// The command line cannot work as given: an unknown or malformed option, a value out
    /// of range, a combination that has no model, a memory budget too small for the input.
    /// (clap's own errors also exit with 2.)
    pub const USAGE: u8 = 2;

    /// Killed by signal `sig` (after cleaning up): 128 + the signal number, as a shell
    /// reports it (130 for SIGINT, 143 for SIGTERM).
    pub fn signalled(sig: i32) -> i32 {
        128 + sig
    }
}

/// Whether files can be created in `dir`: it exists, is a directory, and this process may
/// write there (`access(W_OK | X_OK)`, which also reports a read-only file system). The
/// error is a reason to put after the folder's name.
pub fn check_writable_dir(dir: &std::path::Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err("the folder does not exist".into()),
        Err(e) => return Err(e.to_string()),
        Ok(m) if !m.is_dir() => return Err("not a folder".into()),
        Ok(_) => {}
    }
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return Err("the path has a NUL byte".into());
    };
    // SAFETY: a valid NUL-terminated path; access() only reads it.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        // "Permission denied (os error 13)" -> "permission denied".
        let text = e.to_string();
        let text = text.split(" (os error").next().unwrap_or(&text).to_string();
        Err(format!("cannot write there: {}", text.to_lowercase()))
    }
}
