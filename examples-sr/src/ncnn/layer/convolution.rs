//! ncnn `Convolution` (src/layer/convolution.cpp).

use super::super::{BlobShape, NcnnError};
use super::params::Params;
use super::window::Window;
use super::{Activation, LayerBin, Pad, conv_output_shape};

/// ncnn `Convolution`. Output size per axis: `(in + pad_a + pad_b - dilation*(k-1) - 1) /
/// stride + 1`, then the fused activation.
#[derive(Debug, Clone, PartialEq)]
pub struct Convolution {
    pub num_output: usize,
    /// Derived: `weight_data_size / (num_output * kernel_h * kernel_w)`.
    pub num_input: usize,
    pub kernel_w: usize,
    pub kernel_h: usize,
    pub dilation_w: usize,
    pub dilation_h: usize,
    pub stride_w: usize,
    pub stride_h: usize,
    pub pad: Pad,
    /// Value of the padded border (ncnn id 18, default 0).
    pub pad_value: f32,
    /// `bias_term` of the file; `bias` is `Some` exactly when it is set.
    pub bias_term: bool,
    pub weight_data_size: usize,
    pub activation: Activation,
    /// OIHW, `[num_output][num_input][kernel_h][kernel_w]`: ncnn's own layout, unchanged,
    /// the same as PyTorch `Conv2d.weight`.
    pub weight: Vec<f32>,
    pub bias: Option<Vec<f32>>,
}

impl Convolution {
    pub(super) fn load(p: &Params<'_>, bin: &mut LayerBin<'_, '_>) -> Result<Self, NcnnError> {
        p.expect_blobs(1, Some(1))?;
        p.only(&[0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19])?;
        p.require_int(8, 0, 0, "int8_scale_term")?;
        p.require_int(19, 0, 0, "dynamic_weight")?;
        let num_output = p.positive(0, 0, "num_output")?;
        let window = Window::load(p)?;
        let pad_value = p.float(18, 0.0)?;
        let bias_term = p.bool01(5, "bias_term")?;
        let weight_data_size = p.positive(6, 0, "weight_data_size")?;
        let activation = Activation::load(p)?;
        let num_input = p.num_input(weight_data_size, num_output, window.taps())?;
        let weight = bin.weights(weight_data_size)?;
        let bias = bin.bias(bias_term, num_output)?;
        let Window {
            kernel: [kernel_w, kernel_h],
            dilation: [dilation_w, dilation_h],
            stride: [stride_w, stride_h],
            pad,
        } = window;
        Ok(Convolution {
            num_output,
            num_input,
            kernel_w,
            kernel_h,
            dilation_w,
            dilation_h,
            stride_w,
            stride_h,
            pad,
            pad_value,
            bias_term,
            weight_data_size,
            activation,
            weight,
            bias,
        })
    }

    pub(super) fn output_shape(&self, inputs: &[BlobShape]) -> Result<BlobShape, String> {
        conv_output_shape("Convolution", self.num_input, self.num_output, inputs)
    }
}
