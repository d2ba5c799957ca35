//! Errors of the VAE decoders and the CLI's input handling: each names the file, tensor,
//! shape or setting that was wrong.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum SdError {
    #[error(transparent)]
    Lib(#[from] rocm_vision::Error),

    #[error("{0}")]
    Candle(#[from] candle_core::Error),

    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },

    /// A diffusers `config.json` (or a preset name) that this decoder cannot build.
    #[error("VAE config: {0}")]
    Config(String),

    /// The weight file matches neither the diffusers nor the original key layout.
    #[error("{path}: unknown VAE weight layout: looked for {expected}; the file has {count} tensors, e.g. {found:?}")]
    UnknownLayout { path: PathBuf, expected: String, count: usize, found: Vec<String> },

    /// The weights do not fit the configuration (another model, a wrong --model).
    #[error("{path}: {msg}")]
    WeightsMismatch { path: PathBuf, msg: String },

    /// Latents of the wrong rank, dtype or channel count.
    #[error("latents: {0}")]
    Latents(String),

    /// An image the encoder cannot take: its rank, channel count or size (a multiple of
    /// 8 for the published VAEs).
    #[error("image: {0}")]
    ImageShape(String),

    #[error("{path} exists; pass --force to overwrite it")]
    OutputExists { path: PathBuf },

    #[error("{0}")]
    Output(String),

    /// Exact decode does not fit the memory budget.
    #[error("{0}")]
    Budget(String),

    #[error("{path}: {msg}")]
    Image { path: PathBuf, msg: String },

    /// A broken invariant of the decoder itself (a bug to report, not bad input).
    #[error("internal error: {0}")]
    Internal(String),
}

pub type Result<T> = std::result::Result<T, SdError>;
