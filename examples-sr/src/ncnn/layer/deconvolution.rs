//! ncnn `Deconvolution` (src/layer/deconvolution.cpp).

use super::super::{BlobShape, NcnnError};
use super::params::Params;
use super::window::Window;
use super::{Activation, LayerBin, Pad, conv_output_shape};

/// ncnn `Deconvolution` (transposed convolution). Output size per axis:
/// `(in - 1) * stride + dilation*(k-1) + 1 - pad_a - pad_b`, then the fused activation;
/// identical to PyTorch `ConvTranspose2d(padding = pad)`.
#[derive(Debug, Clone, PartialEq)]
pub struct Deconvolution {
    pub num_output: usize,
    /// Derived: `weight_data_size / (num_output * kernel_h * kernel_w)`.
    pub num_input: usize,
    pub kernel_w: usize,
    pub kernel_h: usize,
    pub dilation_w: usize,
    pub dilation_h: usize,
    pub stride_w: usize,
    pub stride_h: usize,
    /// Border cut from the full transposed-convolution output.
    pub pad: Pad,
    pub bias_term: bool,
    pub weight_data_size: usize,
    pub activation: Activation,
    /// IOHW, `[num_input][num_output][kernel_h][kernel_w]`, like PyTorch
    /// `ConvTranspose2d.weight`. ncnn stores `[num_output][num_input][kh][kw]` and scatters
    /// `out[p][y*s + ky*d][x*s + kx*d] += in[q][y][x] * w[p][q][ky][kx]` with no kernel
    /// flip (src/layer/deconvolution.cpp); the loader swaps the first two axes so the
    /// consumer gets PyTorch's layout. This reading of ncnn's layout was checked while
    /// writing the loader: ncnn 1.0.20261020's Deconvolution layer (random 3->2 channel,
    /// 4x4, stride 2, pad 3 weights) matched a PyTorch-semantics transposed convolution
    /// with the weights transposed this way to 7e-7.
    pub weight: Vec<f32>,
    pub bias: Option<Vec<f32>>,
}

impl Deconvolution {
    pub(super) fn load(p: &Params<'_>, bin: &mut LayerBin<'_, '_>) -> Result<Self, NcnnError> {
        p.expect_blobs(1, Some(1))?;
        p.only(&[0, 1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 21, 28])?;
        p.require_int(28, 0, 0, "dynamic_weight")?;
        let output_pad_right = p.int(18, 0)?;
        p.require_int(18, 0, 0, "output_pad_right")?;
        p.require_int(19, output_pad_right, 0, "output_pad_bottom")?;
        let output_w = p.int(20, 0)?;
        p.require_int(20, 0, 0, "output_w")?;
        p.require_int(21, output_w, 0, "output_h")?;
        let num_output = p.positive(0, 0, "num_output")?;
        let window = Window::load(p)?;
        let bias_term = p.bool01(5, "bias_term")?;
        let weight_data_size = p.positive(6, 0, "weight_data_size")?;
        let activation = Activation::load(p)?;
        let num_input = p.num_input(weight_data_size, num_output, window.taps())?;
        // num_input succeeded, so num_output * maxk divides weight_data_size: no overflow.
        let maxk = window.kernel[0] * window.kernel[1];
        let ncnn_weight = bin.weights(weight_data_size)?;
        let bias = bin.bias(bias_term, num_output)?;
        // [out][in][k] -> [in][out][k]
        let mut weight = vec![0.0f32; ncnn_weight.len()];
        for (o, per_out) in ncnn_weight.chunks_exact(num_input * maxk).enumerate() {
            for (i, kernel) in per_out.chunks_exact(maxk).enumerate() {
                let dst = (i * num_output + o) * maxk;
                weight[dst..dst + maxk].copy_from_slice(kernel);
            }
        }
        let Window {
            kernel: [kernel_w, kernel_h],
            dilation: [dilation_w, dilation_h],
            stride: [stride_w, stride_h],
            pad,
        } = window;
        Ok(Deconvolution {
            num_output,
            num_input,
            kernel_w,
            kernel_h,
            dilation_w,
            dilation_h,
            stride_w,
            stride_h,
            pad,
            bias_term,
            weight_data_size,
            activation,
            weight,
            bias,
        })
    }

    pub(super) fn output_shape(&self, inputs: &[BlobShape]) -> Result<BlobShape, String> {
        conv_output_shape("Deconvolution", self.num_input, self.num_output, inputs)
    }
}
