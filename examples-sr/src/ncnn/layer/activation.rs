//! The activation fused into Convolution, Deconvolution and InnerProduct
//! (src/layer/fused_activation.h).

use super::super::NcnnError;
use super::params::Params;

/// Fused activation (ncnn's `activation_type` / `activation_params`, ids 9 and 10,
/// src/layer/fused_activation.h). Only the kinds Real-CUGAN uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Activation {
    /// `activation_type = 0`.
    None,
    /// `activation_type = 1`: `max(x, 0)`.
    Relu,
    /// `activation_type = 2`: `x > 0 ? x : x * slope`, slope = `activation_params[0]`.
    LeakyRelu { slope: f32 },
    /// `activation_type = 4`: `1 / (1 + exp(-x))`.
    Sigmoid,
}

impl Activation {
    /// Reads ids 9 (activation_type) and 10 (activation_params).
    pub(super) fn load(p: &Params<'_>) -> Result<Activation, NcnnError> {
        let params = p.float_array(10)?;
        let ty = p.int(9, 0)?;
        let act = match ty {
            0 => Activation::None,
            1 => Activation::Relu,
            2 => {
                // ncnn reads activation_params[0]; an absent slope would be out of bounds there.
                let slope = *params
                    .first()
                    .ok_or_else(|| p.err("leaky ReLU (9=2) needs its slope in parameter 10 (-23310=1,slope)"))?;
                Activation::LeakyRelu { slope }
            }
            4 => Activation::Sigmoid,
            3 | 5 | 6 => {
                return Err(p.err(format!(
                    "activation_type {ty} ({}) is not supported",
                    ["", "", "", "clip", "", "mish", "hardswish"][ty as usize]
                )));
            }
            _ => return Err(p.err(format!("activation_type {ty} is not an ncnn activation"))),
        };
        let expected_len = match act {
            Activation::LeakyRelu { .. } => 1,
            _ => 0,
        };
        if params.len() != expected_len {
            return Err(p.err(format!(
                "activation_type {ty} takes {expected_len} activation parameters, found {}",
                params.len()
            )));
        }
        Ok(act)
    }

    /// The activation of one value.
    pub fn apply(self, v: f32) -> f32 {
        match self {
            Activation::None => v,
            Activation::LeakyRelu { slope } => {
                if v > 0.0 {
                    v
                } else {
                    v * slope
                }
            }
            Activation::Relu => v.max(0.0),
            Activation::Sigmoid => 1.0 / (1.0 + (-v).exp()),
        }
    }
}
