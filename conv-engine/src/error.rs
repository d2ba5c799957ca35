//! Errors of the convolution engine; each names the operation, the value and the reason.

use crate::problem::ConvDType;

#[derive(Debug, thiserror::Error)]
pub enum ConvError {
    #[error("{op}: {what} must be {expected}-D, got shape {shape:?}")]
    Rank { op: &'static str, what: &'static str, expected: usize, shape: Vec<usize> },

    #[error("{op}: {what} has dtype {dtype}, only f32, f16 and bf16 are supported")]
    UnsupportedDType { op: &'static str, what: &'static str, dtype: String },

    #[error("{op}: input dtype {input} differs from weight dtype {weight}")]
    DTypeMismatch { op: &'static str, input: ConvDType, weight: ConvDType },

    #[error("{op}: {param} = {value}: {reason}")]
    Parameter { op: &'static str, param: &'static str, value: String, reason: &'static str },

    #[error(
        "{op}: input has {input_channels} channels but weight shape {weight_shape:?} with groups = {groups} expects {}",
        if *op == "conv_transpose2d" || *op == "conv_transpose1d" { weight_shape[0] } else { weight_shape[1] * groups }
    )]
    ChannelMismatch { op: &'static str, input_channels: usize, weight_shape: Vec<usize>, groups: usize },

    #[error("{op}: bias has shape {shape:?}, expected [{channels}]")]
    BiasShape { op: &'static str, shape: Vec<usize>, channels: usize },

    #[error("{op}: bias dtype {bias} differs from the input dtype {input}")]
    BiasDType { op: &'static str, bias: String, input: ConvDType },

    #[error(
        "{problem}: no algorithm fits the budget: the smallest plan ({algorithm}, one {unit} per chunk) needs {needed} bytes of workspace, but {available} bytes are available (budget {budget} bytes, {live} bytes live)"
    )]
    BudgetExceeded {
        problem: String,
        algorithm: String,
        unit: &'static str,
        needed: usize,
        available: usize,
        budget: usize,
        live: usize,
    },

    #[error("{problem}: none of the allowed algorithms ({allowed}) supports this problem")]
    NoAlgorithm { problem: String, allowed: String },

    #[error("{algorithm} is not an algorithm of device {device}")]
    AlgorithmNotOffered { algorithm: &'static str, device: String },

    #[error("{problem}: {algorithm} cannot run it{}; it needs {requires}", chunking.as_deref().unwrap_or(""))]
    AlgorithmUnsupported { problem: String, algorithm: &'static str, chunking: Option<String>, requires: &'static str },

    #[error("{op}: the {what} buffer holds {len} elements, the problem needs {needed}")]
    BufferLength { op: &'static str, what: &'static str, len: usize, needed: usize },

    #[error(
        "could not allocate {bytes} bytes of convolution {what} (allocation {index}){}",
        if *injected { ": injected fault" } else { "" }
    )]
    AllocationFailed { what: &'static str, bytes: usize, index: u64, injected: bool },

    #[error("{0}")]
    Candle(#[from] candle_core::Error),
}
