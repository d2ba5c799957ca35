//! Which model file a (model, scale, noise) choice means, where it lives, and loading it.
//!
//! Layout (realcugan-ncnn-vulkan's, as `scripts/fetch-models.sh` writes it):
//! `<model dir>/models-{se,pro,nose}/up{2,3,4}x-{conservative,no-denoise,denoise{1,2,3}x}.{param,bin}`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use rocm_vision::{DType, Device};

use crate::Error;
use crate::ncnn::NcnnModel;
use crate::net::Network;
use crate::upscale::Upscaler;

/// The three Real-CUGAN model families.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// The original release (SE blocks).
    Se,
    /// "Pro" retrained models (SE blocks).
    Pro,
    /// Without SE blocks (2x no-denoise only).
    Nose,
}

impl ModelKind {
    pub fn dir_name(self) -> &'static str {
        match self {
            ModelKind::Se => "models-se",
            ModelKind::Pro => "models-pro",
            ModelKind::Nose => "models-nose",
        }
    }

    /// The (scale, noise) pairs that have a model file.
    pub fn variants(self) -> &'static [(u32, i32)] {
        match self {
            ModelKind::Se => {
                &[(2, -1), (2, 0), (2, 1), (2, 2), (2, 3), (3, -1), (3, 0), (3, 3), (4, -1), (4, 0), (4, 3)]
            }
            ModelKind::Pro => &[(2, -1), (2, 0), (2, 3), (3, -1), (3, 0), (3, 3)],
            ModelKind::Nose => &[(2, 0)],
        }
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ModelKind::Se => "se",
            ModelKind::Pro => "pro",
            ModelKind::Nose => "nose",
        })
    }
}

impl FromStr for ModelKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().trim_start_matches("models-") {
            "se" => Ok(ModelKind::Se),
            "pro" => Ok(ModelKind::Pro),
            "nose" => Ok(ModelKind::Nose),
            _ => Err(format!("unknown model {s:?}: expected se, pro or nose")),
        }
    }
}

fn noise_name(noise: i32) -> String {
    match noise {
        -1 => "conservative".into(),
        0 => "no-denoise".into(),
        n => format!("denoise{n}x"),
    }
}

/// One model file: family, scale and denoise level (-1 conservative, 0 none, 1..3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Variant {
    pub kind: ModelKind,
    pub scale: u32,
    pub noise: i32,
}

impl Variant {
    /// The variant, or an error listing what this family offers.
    pub fn new(kind: ModelKind, scale: u32, noise: i32) -> Result<Variant, Error> {
        if scale == 1 {
            return Err(Error::Usage(
                "scale 1 is not supported: there is no 1x Real-CUGAN model (the se, pro and nose model sets have \
                 up2x, up3x and up4x files only; realcugan-ncnn-vulkan accepts -s 1 but finds no up1x model either)"
                    .into(),
            ));
        }
        if !(2..=4).contains(&scale) {
            return Err(Error::Usage(format!("scale {scale} is not supported: Real-CUGAN upscales by 2, 3 or 4")));
        }
        if !(-1..=3).contains(&noise) {
            return Err(Error::Usage(format!(
                "noise level {noise} is not supported: use -1 (conservative), 0 (no denoise) or 1, 2, 3 (denoise)"
            )));
        }
        if kind.variants().contains(&(scale, noise)) {
            return Ok(Variant { kind, scale, noise });
        }
        let offered: Vec<String> =
            kind.variants().iter().map(|&(s, n)| format!("-s {s} -n {n} ({})", noise_name(n))).collect();
        Err(Error::Usage(format!(
            "there is no {kind} model for scale {scale} with noise level {noise} ({}); the {kind} models are: {}",
            noise_name(noise),
            offered.join(", ")
        )))
    }

    /// `up2x-no-denoise` etc.
    pub fn stem(&self) -> String {
        format!("up{}x-{}", self.scale, noise_name(self.noise))
    }

    /// `.param` and `.bin` paths under `model_dir`.
    pub fn paths(&self, model_dir: &Path) -> (PathBuf, PathBuf) {
        self.paths_in(&model_dir.join(self.kind.dir_name()))
    }

    /// `.param` and `.bin` paths in the family folder `family_dir` (e.g. `models/models-se`).
    pub fn paths_in(&self, family_dir: &Path) -> (PathBuf, PathBuf) {
        let base = family_dir.join(self.stem());
        (base.with_extension("param"), base.with_extension("bin"))
    }

    /// Loads the model files and prepares the network. Missing files give a message that
    /// says how to fetch them.
    pub fn load(&self, model_dir: &Path, dtype: DType, device: &Device) -> Result<Upscaler, Error> {
        self.load_from(&ModelLocation::Parent(model_dir.to_path_buf()), dtype, device)
    }

    /// [`Self::load`] from a parent or family folder.
    pub fn load_from(&self, at: &ModelLocation, dtype: DType, device: &Device) -> Result<Upscaler, Error> {
        let (param, bin) = self.paths_in(&at.family_dir(self.kind));
        let dir = match at {
            ModelLocation::Parent(p) | ModelLocation::Family { dir: p, .. } => p.clone(),
        };
        for p in [&param, &bin] {
            if !p.is_file() {
                return Err(Error::ModelsMissing { path: p.clone(), dir: dir.clone() });
            }
        }
        let model = NcnnModel::load(&param, &bin)
            .map_err(|e| Error::Model(format!("{} / {}: {e}", param.display(), bin.display())))?;
        let net = Network::new(&model, dtype, device).map_err(|e| Error::Model(format!("{}: {e}", param.display())))?;
        if net.scale() != self.scale as usize {
            return Err(Error::Model(format!(
                "{} upscales by {}, not by {} as its name says",
                param.display(),
                net.scale(),
                self.scale
            )));
        }
        Upscaler::new(net)
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind.dir_name(), self.stem())
    }
}

/// Where `-m PATH` points: realcugan-ncnn-vulkan's `-m` names a model family's own folder
/// (`models-se`, `models-pro`, `models-nose`); this tool's `--model-dir` names their parent.
/// A folder named `models-{se,pro,nose}`, or one holding `up*x-*.param` files itself, is a
/// family folder; anything else is a parent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelLocation {
    /// Holds `models-se/`, `models-pro/`, `models-nose/`.
    Parent(PathBuf),
    /// Holds the `up*x-*.param` / `.bin` files of one family (named by the folder, if it says).
    Family { dir: PathBuf, kind: Option<ModelKind> },
}

impl ModelLocation {
    pub fn of(path: &Path) -> ModelLocation {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let kind = if name.to_ascii_lowercase().starts_with("models-") { name.parse::<ModelKind>().ok() } else { None };
        let holds_params = || {
            std::fs::read_dir(path).is_ok_and(|entries| {
                entries.flatten().any(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.starts_with("up") && n.ends_with(".param")
                })
            })
        };
        if kind.is_some() || holds_params() {
            ModelLocation::Family { dir: path.to_path_buf(), kind }
        } else {
            ModelLocation::Parent(path.to_path_buf())
        }
    }

    /// The folder of `kind`'s files.
    pub fn family_dir(&self, kind: ModelKind) -> PathBuf {
        match self {
            ModelLocation::Parent(p) => p.join(kind.dir_name()),
            ModelLocation::Family { dir, .. } => dir.clone(),
        }
    }
}

/// The model directory: `explicit` if given, else `$REALCUGAN_MODELS`, else `models` in
/// the current directory.
pub fn model_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    match std::env::var_os("REALCUGAN_MODELS") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from("models"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_and_errors() {
        let v = Variant::new(ModelKind::Se, 2, -1).unwrap();
        assert_eq!(v.stem(), "up2x-conservative");
        assert_eq!(v.to_string(), "models-se/up2x-conservative");
        let (p, b) = Variant::new(ModelKind::Pro, 3, 3).unwrap().paths(Path::new("m"));
        assert_eq!(p, Path::new("m/models-pro/up3x-denoise3x.param"));
        assert_eq!(b, Path::new("m/models-pro/up3x-denoise3x.bin"));
        let e = Variant::new(ModelKind::Pro, 2, 1).unwrap_err().to_string();
        assert!(e.contains("no pro model") && e.contains("-s 2 -n 3"), "{e}");
        let e = Variant::new(ModelKind::Nose, 4, 0).unwrap_err().to_string();
        assert!(e.contains("-s 2 -n 0"), "{e}");
        assert!(Variant::new(ModelKind::Se, 5, 0).unwrap_err().to_string().contains("2, 3 or 4"));
        assert!(Variant::new(ModelKind::Se, 2, 4).unwrap_err().to_string().contains("-1 (conservative)"));
        assert_eq!("models-pro".parse::<ModelKind>(), Ok(ModelKind::Pro));
        assert!("x".parse::<ModelKind>().is_err());
    }
}
