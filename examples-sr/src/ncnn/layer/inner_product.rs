//! ncnn `InnerProduct` (src/layer/innerproduct.cpp), on the 1-D blobs of the SE blocks.

use super::super::{BlobShape, NcnnError};
use super::params::Params;
use super::{Activation, LayerBin, unexpected_inputs};

/// ncnn `InnerProduct` on a 1-D blob: `out[o] = act(bias[o] + sum_i w[o][i] * in[i])`.
#[derive(Debug, Clone, PartialEq)]
pub struct InnerProduct {
    pub num_output: usize,
    /// Derived: `weight_data_size / num_output`.
    pub num_input: usize,
    pub bias_term: bool,
    pub weight_data_size: usize,
    pub activation: Activation,
    /// `[num_output][num_input]`, ncnn's layout (= PyTorch `Linear.weight`).
    pub weight: Vec<f32>,
    pub bias: Option<Vec<f32>>,
}

impl InnerProduct {
    pub(super) fn load(p: &Params<'_>, bin: &mut LayerBin<'_, '_>) -> Result<Self, NcnnError> {
        p.expect_blobs(1, Some(1))?;
        p.only(&[0, 1, 2, 8, 9, 10])?;
        p.require_int(8, 0, 0, "int8_scale_term")?;
        let num_output = p.positive(0, 0, "num_output")?;
        let bias_term = p.bool01(1, "bias_term")?;
        let weight_data_size = p.positive(2, 0, "weight_data_size")?;
        let activation = Activation::load(p)?;
        let num_input = p.num_input(weight_data_size, num_output, Some(1))?;
        let weight = bin.weights(weight_data_size)?;
        let bias = bin.bias(bias_term, num_output)?;
        Ok(InnerProduct { num_output, num_input, bias_term, weight_data_size, activation, weight, bias })
    }

    pub(super) fn output_shape(&self, inputs: &[BlobShape]) -> Result<BlobShape, String> {
        match inputs {
            [BlobShape::Vector { len }] => {
                if let Some(len) = len.filter(|&l| l != self.num_input) {
                    return Err(format!("the input vector has {len} values, the weights expect {}", self.num_input));
                }
                Ok(BlobShape::Vector { len: Some(self.num_output) })
            }
            _ => Err(unexpected_inputs("InnerProduct", inputs)),
        }
    }

    /// The layer on `x`, which must hold `num_input` values (the caller checks); each dot
    /// product is summed in f64.
    pub fn forward(&self, x: &[f32]) -> Vec<f32> {
        debug_assert_eq!(x.len(), self.num_input);
        let n_in = self.num_input;
        (0..self.num_output)
            .map(|o| {
                let row = &self.weight[o * n_in..(o + 1) * n_in];
                let dot: f64 = row.iter().zip(x).map(|(&w, &v)| w as f64 * v as f64).sum();
                let v = (dot + self.bias.as_ref().map_or(0.0, |b| b[o] as f64)) as f32;
                self.activation.apply(v)
            })
            .collect()
    }
}
