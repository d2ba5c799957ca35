//! Errors of the ROCm backend. Each names the call, the code and what was involved.

use std::fmt;

/// A HIP runtime error code with its name and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HipCode {
    pub code: u32,
    pub name: String,
    pub message: String,
}

impl fmt::Display for HipCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.name, self.code, self.message)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RocmError {
    /// libamdhip64 / libhiprtc could not be loaded, or lack a symbol the backend calls.
    #[error("ROCm runtime not found: {0}")]
    RuntimeNotFound(String),

    /// The runtime loaded but there is no (such) GPU.
    #[error("no ROCm device{}: {reason}", ordinal.map(|o| format!(" {o}")).unwrap_or_default())]
    NoDevice { ordinal: Option<usize>, reason: String },

    #[error("{call} failed: {code}")]
    Hip { call: &'static str, code: HipCode },

    #[error("hiprtc could not compile kernel module {module:?} for {arch}: {status}\n{log}")]
    Compile { module: String, arch: String, status: String, log: String },

    #[error("kernel {entry:?} is not in module {module:?}")]
    MissingKernel { module: String, entry: String },

    #[error(
        "allocating {requested} bytes on ROCm device {ordinal} would exceed its budget: {live} bytes live, budget {budget} bytes (cached blocks were released first)"
    )]
    OverBudget { ordinal: usize, requested: usize, live: usize, budget: usize },

    #[error("ROCm device {ordinal} is out of memory allocating {requested} bytes ({live} bytes live): {code}")]
    OutOfMemory { ordinal: usize, requested: usize, live: usize, code: HipCode },

    #[error("rocBLAS: {0}")]
    Rocblas(String),

    #[error("{op}: {msg}")]
    Op { op: &'static str, msg: String },

    #[error("kernel cache {path}: {msg}")]
    Cache { path: String, msg: String },

    /// The convolution engine's error (planning: `BudgetExceeded`, `NoAlgorithm`, a bad
    /// problem), kept whole so that a caller matches it as on the CPU.
    #[error(transparent)]
    Conv(#[from] conv_engine::ConvError),

    /// An allocation failed on purpose: the fault-injection hook of the allocator
    /// ([`crate::alloc::Allocator::fail_nth_allocation`]) was armed for this one.
    #[error("injected allocation failure: allocation {index} on ROCm device {ordinal} ({requested} bytes)")]
    InjectedFault { ordinal: usize, index: u64, requested: usize },
}

impl RocmError {
    /// Whether this says that there is no usable GPU (the runtime is missing, or it has no
    /// such device): what `--device cpu` gets around.
    pub fn is_no_device(&self) -> bool {
        matches!(self, RocmError::RuntimeNotFound(_) | RocmError::NoDevice { .. })
    }

    pub(crate) fn op(op: &'static str, msg: impl Into<String>) -> Self {
        RocmError::Op { op, msg: msg.into() }
    }
}

pub type Result<T> = std::result::Result<T, RocmError>;
