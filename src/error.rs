//! The library's error type: every failure names what was wrong.

use conv_engine::ConvError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Conv(#[from] ConvError),

    #[error("{0}")]
    Candle(#[from] candle_core::Error),

    #[error("{op}: {msg}")]
    Op { op: &'static str, msg: String },

    #[error("{path}: {msg}")]
    Weights { path: String, msg: String },

    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },

    #[error("unknown device {input:?}: expected auto, cpu, rocm or rocm:N")]
    DeviceParse { input: String },

    #[error("{0}")]
    Device(String),
}

impl Error {
    pub(crate) fn op(op: &'static str, msg: impl Into<String>) -> Self {
        Error::Op { op, msg: msg.into() }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
