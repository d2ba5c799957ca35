//! The library's error type: every failure names what was wrong, and keeps its cause as a
//! value a caller can match on both devices.
//!
//! A convolution's error is [`Error::Conv`] whichever device ran it (the ROCm backend's
//! `RocmError::Conv` is unwrapped into it), so `Error::Conv(ConvError::BudgetExceeded {
//! needed, available, .. })` matches on the CPU and on ROCm alike; every other ROCm
//! failure is [`Error::Rocm`] with the backend's error whole (`NoDevice`, `OverBudget`,
//! `OutOfMemory`, ...). [`Error::budget_shortfall`], [`Error::is_no_device`] and
//! [`Error::hint`] answer the questions a tool asks of any of them.

use conv_engine::ConvError;
use rocm_backend::RocmError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Conv(#[from] ConvError),

    /// A ROCm backend error other than a convolution's (those are [`Error::Conv`]).
    #[error(transparent)]
    Rocm(RocmError),

    #[error("{0}")]
    Candle(#[from] candle_core::Error),

    #[error("{op}: {msg}")]
    Op { op: &'static str, msg: String },

    #[error("{path}: {msg}")]
    Weights { path: String, msg: String },

    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },

    /// An op was given tensors of two unequal [`Device`](crate::Device) handles (another
    /// device, or another CPU engine with its own budget); `left` and `right` describe
    /// them ([`Device::describe`](crate::Device::describe)).
    #[error(
        "{op}: operands on different devices or engines: {left} and {right}; move one with Tensor::to_device (free between CPU engines)"
    )]
    DeviceMismatch { op: &'static str, left: String, right: String },

    #[error("unknown device {input:?}: expected auto, cpu, rocm or rocm:N")]
    DeviceParse { input: String },

    #[error("{0}")]
    Device(String),
}

impl From<RocmError> for Error {
    fn from(e: RocmError) -> Self {
        match e {
            RocmError::Conv(c) => Error::Conv(c),
            other => Error::Rocm(other),
        }
    }
}

/// Bytes an operation needed and the bytes its budget had left, from whichever error said
/// so (a convolution's plan on either device, or a ROCm allocation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetShortfall {
    pub needed: usize,
    pub available: usize,
}

impl Error {
    pub(crate) fn op(op: &'static str, msg: impl Into<String>) -> Self {
        Error::Op { op, msg: msg.into() }
    }

    pub(crate) fn device_mismatch(op: &'static str, left: &crate::Device, right: &crate::Device) -> Self {
        Error::DeviceMismatch { op, left: left.describe(), right: right.describe() }
    }

    /// `Some` when the error is a budget or memory limit: a convolution whose smallest plan
    /// does not fit (`ConvError::BudgetExceeded`, CPU or ROCm), an allocation past the
    /// ROCm budget (`RocmError::OverBudget`) or past the GPU's memory
    /// (`RocmError::OutOfMemory`, `available` then the budget's room as the allocator saw it).
    pub fn budget_shortfall(&self) -> Option<BudgetShortfall> {
        match self {
            Error::Conv(ConvError::BudgetExceeded { needed, available, .. })
            | Error::Rocm(RocmError::Conv(ConvError::BudgetExceeded { needed, available, .. })) => {
                Some(BudgetShortfall { needed: *needed, available: *available })
            }
            Error::Rocm(RocmError::OverBudget { requested, live, budget, .. }) => {
                Some(BudgetShortfall { needed: *requested, available: budget.saturating_sub(*live) })
            }
            Error::Rocm(RocmError::OutOfMemory { requested, .. }) => {
                Some(BudgetShortfall { needed: *requested, available: 0 })
            }
            _ => None,
        }
    }

    /// Whether the error says there is no usable GPU (no ROCm runtime, or no such device).
    pub fn is_no_device(&self) -> bool {
        matches!(self, Error::Rocm(e) if e.is_no_device())
    }

    /// What a user of the command-line tools can do about the error, in one line, or
    /// `None` when there is nothing to suggest beyond the message.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Error::Conv(ConvError::BudgetExceeded { .. }) => Some(
                "use a smaller --tile, give the run more memory (a larger --vram-budget on ROCm), or run with --device cpu",
            ),
            Error::Rocm(RocmError::OverBudget { .. }) => {
                Some("use a smaller --tile or a larger --vram-budget, or run with --device cpu")
            }
            Error::Rocm(RocmError::OutOfMemory { .. }) => Some(
                "the GPU itself is full: close what else uses it, use a smaller --tile or --vram-budget, or run with --device cpu",
            ),
            Error::Rocm(e) if e.is_no_device() => {
                Some("run with --device cpu, or install ROCm / check HIP_VISIBLE_DEVICES for the GPU")
            }
            Error::Rocm(RocmError::Compile { .. } | RocmError::Cache { .. }) => Some(
                "delete the kernel cache directory (ROCM_VISION_KERNEL_CACHE) to rebuild it, or run with --device cpu",
            ),
            Error::Conv(ConvError::AllocationFailed { .. }) => {
                Some("the host is out of memory: use a smaller --tile, or free memory")
            }
            _ => None,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
