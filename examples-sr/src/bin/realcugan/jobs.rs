//! The files of a run, and every refusal about them, decided before any image is read:
//!
//! - two inputs that would write the same output (`x.jpg` and `x.png` -> `x.png`): the
//!   whole run is refused, `--force` or not, naming both inputs;
//! - an output that would replace an input of the same run (`-i dir -o dir`): the whole run
//!   is refused, `--force` or not;
//! - an output folder that is missing (a single output's; a folder output is created) or
//!   not writable: the whole run is refused;
//! - an existing output without `--force`, or a folder in the output's place: that image is
//!   refused, the others go on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use examples_sr::image_io::{self, Format};

use crate::Failure;

pub struct Job {
    pub input: PathBuf,
    pub output: PathBuf,
    pub format: Format,
}

/// What a run will do.
pub struct Planned {
    /// The jobs to run.
    pub todo: Vec<Job>,
    /// One message per refused image.
    pub refused: Vec<String>,
    /// How many of the refused images were refused because their output exists.
    pub exist: usize,
    /// Inputs found.
    pub total: usize,
    /// Every output folder (of refused images too), each once.
    pub folders: Vec<PathBuf>,
}

fn failed(msg: String) -> Failure {
    Failure { msg, code: cli_support::exit::FAILED }
}

/// `p`'s folder: its parent, `.` for a bare name.
pub fn folder_of(p: &Path) -> PathBuf {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// A path that names the same file as any other spelling of it: the folder resolved
/// (symbolic links, `.`/`..`), then the file name (the file itself may not exist yet).
fn identity(p: &Path) -> PathBuf {
    let folder = folder_of(p);
    let folder = folder.canonicalize().unwrap_or(folder);
    match p.file_name() {
        Some(n) => folder.join(n),
        None => p.to_path_buf(),
    }
}

/// The jobs of `-i input -o output` (`dir_format`: the output format of folder mode), with
/// every check of the module's list done.
pub fn plan(input: &Path, output: &Path, dir_format: Format, force: bool) -> Result<Planned, Failure> {
    if !input.exists() {
        return Err(failed(format!("{}: no such file or directory", input.display())));
    }
    let jobs =
        if input.is_dir() { folder_jobs(input, output, dir_format)? } else { file_job(input, output, dir_format)? };

    // Whole-run refusals: clashes and inputs replaced.
    let mut by_output: BTreeMap<PathBuf, Vec<&Path>> = BTreeMap::new();
    for j in &jobs {
        by_output.entry(identity(&j.output)).or_default().push(&j.input);
    }
    let mut clashes = Vec::new();
    for j in &jobs {
        let same = &by_output[&identity(&j.output)];
        if same.len() > 1 && same[0] == j.input.as_path() {
            let names: Vec<String> = same.iter().map(|p| p.display().to_string()).collect();
            let (all, but) = if names.len() == 2 { ("both", "one") } else { ("all", "all but one") };
            clashes.push(format!(
                "{} would {all} be written to {}: rename {but} of them, or upscale them into different folders",
                names.join(" and "),
                j.output.display()
            ));
        }
    }
    let inputs: BTreeMap<PathBuf, &Path> = jobs.iter().map(|j| (identity(&j.input), j.input.as_path())).collect();
    for j in &jobs {
        if let Some(replaced) = inputs.get(&identity(&j.output)) {
            let whose = if *replaced == j.input.as_path() {
                "its own input".to_string()
            } else {
                format!("the input {}", replaced.display())
            };
            clashes.push(format!(
                "{} -> {} would replace {whose}; choose another output folder or name (--force never replaces an \
                 input)",
                j.input.display(),
                j.output.display()
            ));
        }
    }
    if !clashes.is_empty() {
        let n = clashes.len();
        clashes.push(format!("nothing was done: {n} output name(s) clash (see above)"));
        return Err(failed(clashes.join("\nerror: ")));
    }

    // Every output folder, before the first image.
    let mut folders: Vec<PathBuf> = jobs.iter().map(|j| folder_of(&j.output)).collect();
    folders.sort();
    folders.dedup();
    for f in &folders {
        cli_support::check_writable_dir(f)
            .map_err(|why| failed(format!("output folder {}: {why}; nothing was done", f.display())))?;
    }

    // Per-image refusals.
    let total = jobs.len();
    let (mut todo, mut refused, mut exist) = (Vec::new(), Vec::new(), 0);
    for job in jobs {
        if job.output.is_dir() {
            refused.push(format!("{} is a folder; it cannot be replaced by an image", job.output.display()));
        } else if job.output.exists() && !force {
            refused.push(format!("{} exists; use --force to overwrite it", job.output.display()));
            exist += 1;
        } else {
            todo.push(job);
        }
    }
    Ok(Planned { todo, refused, exist, total, folders })
}

fn folder_jobs(input: &Path, output: &Path, dir_format: Format) -> Result<Vec<Job>, Failure> {
    if output.exists() && !output.is_dir() {
        return Err(Failure {
            msg: format!(
                "the input {} is a folder, so the output must be one too; {} is a file",
                input.display(),
                output.display()
            ),
            code: cli_support::exit::USAGE,
        });
    }
    let entries = std::fs::read_dir(input).map_err(|e| failed(format!("{}: {e}", input.display())))?;
    let mut inputs: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && image_io::is_supported_input(p))
        .collect();
    inputs.sort();
    if inputs.is_empty() {
        return Err(failed(format!("{}: no .png, .jpg, .jpeg or .webp files", input.display())));
    }
    if !output.exists() {
        // Checked first: a folder that cannot be created says why in terms of its parent.
        let parent = folder_of(output);
        if let Err(why) = cli_support::check_writable_dir(&parent) {
            return Err(failed(format!(
                "cannot create the output folder {}: {} {why}; nothing was done",
                output.display(),
                parent.display()
            )));
        }
        std::fs::create_dir_all(output)
            .map_err(|e| failed(format!("cannot create the output folder {}: {e}", output.display())))?;
    }
    Ok(inputs
        .into_iter()
        .map(|input| {
            let stem = input.file_stem().unwrap_or_default().to_os_string();
            let output = output.join(stem).with_extension(dir_format.extension());
            Job { input, output, format: dir_format }
        })
        .collect())
}

fn file_job(input: &Path, output: &Path, dir_format: Format) -> Result<Vec<Job>, Failure> {
    let (output, format) = if output.is_dir() {
        let stem = input.file_stem().unwrap_or_default().to_os_string();
        (output.join(stem).with_extension(dir_format.extension()), dir_format)
    } else {
        let f = Format::from_path(output).ok_or_else(|| Failure {
            msg: format!("{}: unknown output format (use a .png, .jpg, .jpeg or .webp name)", output.display()),
            code: cli_support::exit::USAGE,
        })?;
        (output.to_path_buf(), f)
    };
    Ok(vec![Job { input: input.to_path_buf(), output, format }])
}
