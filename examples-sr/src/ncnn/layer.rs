//! Typed ncnn layers: exactly the layer types and parameter values the Real-CUGAN
//! `.param` files use, each read with ncnn's own parameter ids and defaults (the
//! `load_param` / `load_model` of `src/layer/<type>.cpp` in Tencent/ncnn).
//!
//! Every parameter id ncnn defines for a type is read or checked; an id ncnn does not
//! define for that type is an error (ncnn would ignore it, but in these files it can only
//! mean a corrupt or foreign file). Values that would change the computation in a way this
//! project does not implement (int8, dynamic weights, SAME padding, other activations,
//! max pooling, other binary ops, ...) are errors naming the parameter.

use std::fmt;

use super::NcnnError;
use super::bin::{BinReader, ReadCtx};
use super::param::{ParamValue, RawLayer};

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

/// Zero padding of a convolution input, or the border cut from a deconvolution output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pad {
    pub left: usize,
    pub right: usize,
    pub top: usize,
    pub bottom: usize,
}

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

/// ncnn `Pooling`: Real-CUGAN only uses global average pooling (`0=1 4=1`), which turns a
/// `[C, H, W]` blob into a 1-D blob of `C` means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pooling {
    GlobalAverage,
}

/// ncnn `BinaryOp` between two blobs (`with_scalar = 0`).
///
/// Broadcasting as ncnn does it for these files: two `[C, H, W]` blobs of the same shape
/// elementwise, or `[C, H, W]` (first input) times a 1-D blob of length `C` (second input,
/// the SE block's per-channel scale), each channel multiplied by its scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `op_type = 0`.
    Add,
    /// `op_type = 2`.
    Mul,
}

/// ncnn `Crop` in its numpy-slice form (`-23309` starts, `-23310` ends, `-23311` axes),
/// the only form Real-CUGAN uses. Use [`Crop::resolve_chw`] to apply it to a shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crop {
    /// One entry per sliced axis, in file order.
    pub slices: Vec<CropSlice>,
}

/// One axis of a [`Crop`]: ncnn semantics, resolved against the axis size `n` as
/// `offset = start >= 0 ? start : n + start`, `end' = min(n, end > 0 ? end : n + end)`,
/// length `end' - offset`; `start = -233` means 0 and `end = -233` means `n`. Note the
/// ncnn quirk that `end = 0` also means `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CropSlice {
    pub axis: CropAxis,
    pub start: i32,
    pub end: i32,
}

/// Axis of a 3-D `[C, H, W]` blob. ncnn numbers them 0, 1, 2 and lets negative axes count
/// from the end (-3, -2, -1); the Real-CUGAN files use both spellings (`-2,-1` in se/pro,
/// `1,2` in nose) for H and W.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CropAxis {
    C,
    H,
    W,
}

/// The region a [`Crop`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CropRoi {
    pub c_offset: usize,
    pub channels: usize,
    pub h_offset: usize,
    pub height: usize,
    pub w_offset: usize,
    pub width: usize,
}

/// A crop that does not fit the blob it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("crop of axis {axis:?} with start {start} and end {end} is empty or outside an axis of size {size}")]
pub struct CropRangeError {
    pub axis: CropAxis,
    pub start: i32,
    pub end: i32,
    pub size: usize,
}

impl Crop {
    /// The kept region of a `[channels, height, width]` blob.
    pub fn resolve_chw(&self, channels: usize, height: usize, width: usize) -> Result<CropRoi, CropRangeError> {
        let mut roi = CropRoi { c_offset: 0, channels, h_offset: 0, height, w_offset: 0, width };
        for s in &self.slices {
            let size = match s.axis {
                CropAxis::C => channels,
                CropAxis::H => height,
                CropAxis::W => width,
            };
            let err = CropRangeError { axis: s.axis, start: s.start, end: s.end, size };
            let n = i64::try_from(size).map_err(|_| err.clone())?;
            let start = if s.start == -233 { 0 } else { i64::from(s.start) };
            let end = if s.end == -233 { n } else { i64::from(s.end) };
            let offset = if start >= 0 { start } else { n + start };
            let stop = n.min(if end > 0 { end } else { n + end });
            if offset < 0 || offset >= n || stop <= offset {
                return Err(err);
            }
            // Both fit in usize: 0 <= offset < stop <= n = size.
            let (offset, len) = ((offset) as usize, (stop - offset) as usize);
            match s.axis {
                CropAxis::C => (roi.c_offset, roi.channels) = (offset, len),
                CropAxis::H => (roi.h_offset, roi.height) = (offset, len),
                CropAxis::W => (roi.w_offset, roi.width) = (offset, len),
            }
        }
        Ok(roi)
    }
}

/// ncnn `PixelShuffle` with `mode = 0` (PyTorch `pixel_shuffle`): `[C*r*r, H, W]` ->
/// `[C, H*r, W*r]`, `out[c][y*r + i][x*r + j] = in[c*r*r + i*r + j][y][x]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixelShuffle {
    pub upscale_factor: usize,
}

/// ncnn `Input`: declared shape, 0 where the file leaves it open (Real-CUGAN leaves all open).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Input {
    pub w: usize,
    pub h: usize,
    pub c: usize,
}

/// The type-specific part of a layer, with its weights.
#[derive(Debug, Clone, PartialEq)]
pub enum LayerKind {
    Input(Input),
    Convolution(Convolution),
    Deconvolution(Deconvolution),
    /// Copies its one input to every output.
    Split,
    Pooling(Pooling),
    InnerProduct(InnerProduct),
    BinaryOp(BinaryOp),
    Crop(Crop),
    PixelShuffle(PixelShuffle),
}

/// The ncnn layer type names this loader accepts.
pub const SUPPORTED_TYPES: [&str; 9] =
    ["Input", "Convolution", "Deconvolution", "Split", "Pooling", "InnerProduct", "BinaryOp", "Crop", "PixelShuffle"];

impl LayerKind {
    /// The ncnn type name, as written in `.param` files.
    pub fn type_name(&self) -> &'static str {
        match self {
            LayerKind::Input(_) => "Input",
            LayerKind::Convolution(_) => "Convolution",
            LayerKind::Deconvolution(_) => "Deconvolution",
            LayerKind::Split => "Split",
            LayerKind::Pooling(_) => "Pooling",
            LayerKind::InnerProduct(_) => "InnerProduct",
            LayerKind::BinaryOp(_) => "BinaryOp",
            LayerKind::Crop(_) => "Crop",
            LayerKind::PixelShuffle(_) => "PixelShuffle",
        }
    }
}

impl fmt::Display for LayerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_name())
    }
}

/// Typed access to one raw layer's parameters, with ncnn's defaults and errors that name
/// the layer and its line.
struct Params<'a> {
    raw: &'a RawLayer,
}

impl<'a> Params<'a> {
    fn err(&self, msg: impl Into<String>) -> NcnnError {
        NcnnError::InvalidParam {
            line: self.raw.line,
            layer: self.raw.name.clone(),
            ty: self.raw.ty.clone(),
            msg: msg.into(),
        }
    }

    /// Every id the file sets must be one ncnn defines for this type.
    fn only(&self, known: &[u32]) -> Result<(), NcnnError> {
        match self.raw.params.ids().find(|id| !known.contains(id)) {
            None => Ok(()),
            Some(id) => Err(self.err(format!("parameter {id} is not a {} parameter", self.raw.ty))),
        }
    }

    fn int(&self, id: u32, default: i32) -> Result<i32, NcnnError> {
        match self.raw.params.get(id) {
            None => Ok(default),
            Some(ParamValue::Int(v)) => Ok(*v),
            Some(v) => Err(self.err(format!("parameter {id} must be an int, found a {}", v.kind()))),
        }
    }

    fn float(&self, id: u32, default: f32) -> Result<f32, NcnnError> {
        match self.raw.params.get(id) {
            None => Ok(default),
            Some(ParamValue::Float(v)) => Ok(*v),
            Some(v) => Err(self.err(format!("parameter {id} must be a float, found a {}", v.kind()))),
        }
    }

    fn int_array(&self, id: u32) -> Result<&'a [i32], NcnnError> {
        match self.raw.params.get(id) {
            None => Ok(&[]),
            Some(ParamValue::IntArray(v)) => Ok(v),
            Some(v) => Err(self.err(format!("parameter {id} must be an int array, found a {}", v.kind()))),
        }
    }

    fn float_array(&self, id: u32) -> Result<&'a [f32], NcnnError> {
        match self.raw.params.get(id) {
            None => Ok(&[]),
            Some(ParamValue::FloatArray(v)) => Ok(v),
            // ncnn's writer prints `-23310=0` for an empty array: no element, no float.
            Some(ParamValue::IntArray(v)) if v.is_empty() => Ok(&[]),
            Some(v) => Err(self.err(format!("parameter {id} must be a float array, found a {}", v.kind()))),
        }
    }

    /// A strictly positive int (sizes, strides, counts).
    fn positive(&self, id: u32, default: i32, what: &str) -> Result<usize, NcnnError> {
        let v = self.int(id, default)?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| self.err(format!("{what} (parameter {id}) must be positive, found {v}")))
    }

    /// A non-negative padding; ncnn's -233 / -234 (SAME_UPPER / SAME_LOWER) are not supported.
    fn pad(&self, id: u32, default: i32, what: &str) -> Result<usize, NcnnError> {
        let v = self.int(id, default)?;
        usize::try_from(v).map_err(|_| {
            self.err(match v {
                -233 | -234 => {
                    format!("{what} (parameter {id}) = {v} (SAME padding) is not supported")
                }
                _ => format!("{what} (parameter {id}) must be >= 0, found {v}"),
            })
        })
    }

    /// Must equal `expected` (a feature this loader does not implement otherwise).
    fn require_int(&self, id: u32, default: i32, expected: i32, what: &str) -> Result<(), NcnnError> {
        let v = self.int(id, default)?;
        if v == expected {
            Ok(())
        } else {
            Err(self.err(format!("{what} (parameter {id}) = {v} is not supported (only {expected})")))
        }
    }

    fn bool01(&self, id: u32, what: &str) -> Result<bool, NcnnError> {
        match self.int(id, 0)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.err(format!("{what} (parameter {id}) must be 0 or 1, found {v}"))),
        }
    }

    /// ids 9 (activation_type) and 10 (activation_params).
    fn activation(&self) -> Result<Activation, NcnnError> {
        let params = self.float_array(10)?;
        let ty = self.int(9, 0)?;
        let act = match ty {
            0 => Activation::None,
            1 => Activation::Relu,
            2 => {
                // ncnn reads activation_params[0]; an absent slope would be out of bounds there.
                let slope = *params
                    .first()
                    .ok_or_else(|| self.err("leaky ReLU (9=2) needs its slope in parameter 10 (-23310=1,slope)"))?;
                Activation::LeakyRelu { slope }
            }
            4 => Activation::Sigmoid,
            3 | 5 | 6 => {
                return Err(self.err(format!(
                    "activation_type {ty} ({}) is not supported",
                    ["", "", "", "clip", "", "mish", "hardswish"][ty as usize]
                )));
            }
            _ => return Err(self.err(format!("activation_type {ty} is not an ncnn activation"))),
        };
        let expected_len = match act {
            Activation::LeakyRelu { .. } => 1,
            _ => 0,
        };
        if params.len() != expected_len {
            return Err(self.err(format!(
                "activation_type {ty} takes {expected_len} activation parameters, found {}",
                params.len()
            )));
        }
        Ok(act)
    }

    /// `weight_data_size / (num_output * per_output)`, which must divide exactly.
    /// `per_output` is the kernel size (None when it overflowed).
    fn num_input(
        &self,
        weight_data_size: usize,
        num_output: usize,
        per_output: Option<usize>,
    ) -> Result<usize, NcnnError> {
        let unit = per_output.and_then(|k| num_output.checked_mul(k)).filter(|&u| u > 0);
        match unit {
            Some(unit) if weight_data_size % unit == 0 => Ok(weight_data_size / unit),
            _ => Err(self.err(format!(
                "weight_data_size {weight_data_size} is not a multiple of num_output {num_output} x kernel size {}: \
                 inconsistent with the layer's other parameters",
                per_output.map_or_else(|| "(overflow)".to_string(), |k| k.to_string())
            ))),
        }
    }

    fn expect_blobs(&self, bottoms: usize, tops: Option<usize>) -> Result<(), NcnnError> {
        let (b, t) = (self.raw.bottoms.len(), self.raw.tops.len());
        let tops_ok = match tops {
            Some(n) => t == n,
            None => t >= 1,
        };
        if b == bottoms && tops_ok {
            Ok(())
        } else {
            let want_tops = tops.map_or_else(|| "at least 1".to_string(), |n| n.to_string());
            Err(self.err(format!("takes {bottoms} input and {want_tops} output blobs, the file gives {b} and {t}")))
        }
    }
}

/// Read one layer's typed parameters from its `.param` line and its weights (if any) from
/// the `.bin` reader, in ncnn's order: weights (tagged), then bias (untagged f32).
pub(crate) fn build(raw: &RawLayer, bin: &mut BinReader<'_>) -> Result<LayerKind, NcnnError> {
    let p = Params { raw };
    let ctx = ReadCtx { layer: &raw.name, ty: &raw.ty, what: "weights" };
    match raw.ty.as_str() {
        "Input" => {
            p.expect_blobs(0, Some(1))?;
            p.only(&[0, 1, 2, 11])?;
            p.require_int(11, 0, 0, "depth")?;
            let dim = |id, what| {
                let v = p.int(id, 0)?;
                usize::try_from(v).map_err(|_| p.err(format!("{what} (parameter {id}) must be >= 0, found {v}")))
            };
            Ok(LayerKind::Input(Input { w: dim(0, "w")?, h: dim(1, "h")?, c: dim(2, "c")? }))
        }
        "Convolution" => {
            p.expect_blobs(1, Some(1))?;
            p.only(&[0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19])?;
            p.require_int(8, 0, 0, "int8_scale_term")?;
            p.require_int(19, 0, 0, "dynamic_weight")?;
            let num_output = p.positive(0, 0, "num_output")?;
            let kernel_w = p.positive(1, 0, "kernel_w")?;
            let kernel_h = p.positive(11, kernel_w as i32, "kernel_h")?;
            let dilation_w = p.positive(2, 1, "dilation_w")?;
            let dilation_h = p.positive(12, dilation_w as i32, "dilation_h")?;
            let stride_w = p.positive(3, 1, "stride_w")?;
            let stride_h = p.positive(13, stride_w as i32, "stride_h")?;
            let left = p.pad(4, 0, "pad_left")?;
            let right = p.pad(15, left as i32, "pad_right")?;
            let top = p.pad(14, left as i32, "pad_top")?;
            let bottom = p.pad(16, top as i32, "pad_bottom")?;
            let pad_value = p.float(18, 0.0)?;
            let bias_term = p.bool01(5, "bias_term")?;
            let weight_data_size = p.positive(6, 0, "weight_data_size")?;
            let activation = p.activation()?;
            let num_input = p.num_input(weight_data_size, num_output, kernel_w.checked_mul(kernel_h))?;
            let weight = bin.read_weights(weight_data_size, ctx)?;
            let bias = read_bias(bias_term, num_output, bin, ctx)?;
            Ok(LayerKind::Convolution(Convolution {
                num_output,
                num_input,
                kernel_w,
                kernel_h,
                dilation_w,
                dilation_h,
                stride_w,
                stride_h,
                pad: Pad { left, right, top, bottom },
                pad_value,
                bias_term,
                weight_data_size,
                activation,
                weight,
                bias,
            }))
        }
        "Deconvolution" => {
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
            let kernel_w = p.positive(1, 0, "kernel_w")?;
            let kernel_h = p.positive(11, kernel_w as i32, "kernel_h")?;
            let dilation_w = p.positive(2, 1, "dilation_w")?;
            let dilation_h = p.positive(12, dilation_w as i32, "dilation_h")?;
            let stride_w = p.positive(3, 1, "stride_w")?;
            let stride_h = p.positive(13, stride_w as i32, "stride_h")?;
            let left = p.pad(4, 0, "pad_left")?;
            let right = p.pad(15, left as i32, "pad_right")?;
            let top = p.pad(14, left as i32, "pad_top")?;
            let bottom = p.pad(16, top as i32, "pad_bottom")?;
            let bias_term = p.bool01(5, "bias_term")?;
            let weight_data_size = p.positive(6, 0, "weight_data_size")?;
            let activation = p.activation()?;
            let maxk = kernel_w.checked_mul(kernel_h);
            let num_input = p.num_input(weight_data_size, num_output, maxk)?;
            // num_input succeeded, so num_output * maxk divides weight_data_size: no overflow.
            let maxk = kernel_w * kernel_h;
            let ncnn_weight = bin.read_weights(weight_data_size, ctx)?;
            let bias = read_bias(bias_term, num_output, bin, ctx)?;
            // [out][in][k] -> [in][out][k]
            let mut weight = vec![0.0f32; ncnn_weight.len()];
            for (o, per_out) in ncnn_weight.chunks_exact(num_input * maxk).enumerate() {
                for (i, kernel) in per_out.chunks_exact(maxk).enumerate() {
                    let dst = (i * num_output + o) * maxk;
                    weight[dst..dst + maxk].copy_from_slice(kernel);
                }
            }
            Ok(LayerKind::Deconvolution(Deconvolution {
                num_output,
                num_input,
                kernel_w,
                kernel_h,
                dilation_w,
                dilation_h,
                stride_w,
                stride_h,
                pad: Pad { left, right, top, bottom },
                bias_term,
                weight_data_size,
                activation,
                weight,
                bias,
            }))
        }
        "Split" => {
            p.expect_blobs(1, None)?;
            p.only(&[])?;
            Ok(LayerKind::Split)
        }
        "Pooling" => {
            p.expect_blobs(1, Some(1))?;
            // ncnn reads 0..8, 11..15, 18; with global pooling only 0 and 4 matter.
            p.only(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 14, 15, 18])?;
            p.require_int(0, 0, 1, "pooling_type (1 = average)")?;
            p.require_int(4, 0, 1, "global_pooling")?;
            Ok(LayerKind::Pooling(Pooling::GlobalAverage))
        }
        "InnerProduct" => {
            p.expect_blobs(1, Some(1))?;
            p.only(&[0, 1, 2, 8, 9, 10])?;
            p.require_int(8, 0, 0, "int8_scale_term")?;
            let num_output = p.positive(0, 0, "num_output")?;
            let bias_term = p.bool01(1, "bias_term")?;
            let weight_data_size = p.positive(2, 0, "weight_data_size")?;
            let activation = p.activation()?;
            let num_input = p.num_input(weight_data_size, num_output, Some(1))?;
            let weight = bin.read_weights(weight_data_size, ctx)?;
            let bias = read_bias(bias_term, num_output, bin, ctx)?;
            Ok(LayerKind::InnerProduct(InnerProduct {
                num_output,
                num_input,
                bias_term,
                weight_data_size,
                activation,
                weight,
                bias,
            }))
        }
        "BinaryOp" => {
            p.expect_blobs(2, Some(1))?;
            p.only(&[0, 1, 2])?;
            p.require_int(1, 0, 0, "with_scalar")?;
            // `b` (id 2) is only read with a scalar operand; it must at least be a float.
            p.float(2, 0.0)?;
            match p.int(0, 0)? {
                0 => Ok(LayerKind::BinaryOp(BinaryOp::Add)),
                2 => Ok(LayerKind::BinaryOp(BinaryOp::Mul)),
                op => Err(p.err(format!("op_type {op} is not supported (only 0 = add, 2 = mul)"))),
            }
        }
        "Crop" => {
            p.expect_blobs(1, Some(1))?;
            p.only(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15])?;
            for (id, what) in [
                (0, "woffset"),
                (1, "hoffset"),
                (2, "coffset"),
                (3, "outw"),
                (4, "outh"),
                (5, "outc"),
                (6, "woffset2"),
                (7, "hoffset2"),
                (8, "coffset2"),
                (13, "doffset"),
                (14, "outd"),
                (15, "doffset2"),
            ] {
                p.require_int(id, 0, 0, &format!("{what} (offset-style crop)"))?;
            }
            let starts = p.int_array(9)?;
            let ends = p.int_array(10)?;
            let axes = p.int_array(11)?;
            if starts.is_empty() || starts.len() != ends.len() {
                return Err(p.err(format!(
                    "numpy-style crop needs as many starts (-23309) as ends (-23310), at least one; found {} and {}",
                    starts.len(),
                    ends.len()
                )));
            }
            // ncnn: without axes, starts[i] / ends[i] apply to axis i of all the blob's axes.
            let axes: Vec<i32> = if axes.is_empty() {
                if starts.len() != 3 {
                    return Err(p.err(format!(
                        "crop without axes (-23311) must give 3 starts/ends (c, h, w), found {}",
                        starts.len()
                    )));
                }
                vec![0, 1, 2]
            } else if axes.len() == starts.len() {
                axes.to_vec()
            } else {
                return Err(p.err(format!("crop gives {} axes for {} starts/ends", axes.len(), starts.len())));
            };
            let mut slices: Vec<CropSlice> = Vec::new();
            for ((&axis, &start), &end) in axes.iter().zip(starts).zip(ends) {
                let axis = match axis {
                    0 | -3 => CropAxis::C,
                    1 | -2 => CropAxis::H,
                    2 | -1 => CropAxis::W,
                    _ => {
                        return Err(p.err(format!("crop axis {axis} is not an axis of a [C, H, W] blob")));
                    }
                };
                if slices.iter().any(|s| s.axis == axis) {
                    return Err(p.err(format!("crop axis {axis:?} is given twice")));
                }
                slices.push(CropSlice { axis, start, end });
            }
            Ok(LayerKind::Crop(Crop { slices }))
        }
        "PixelShuffle" => {
            p.expect_blobs(1, Some(1))?;
            p.only(&[0, 1])?;
            p.require_int(1, 0, 0, "mode")?;
            Ok(LayerKind::PixelShuffle(PixelShuffle { upscale_factor: p.positive(0, 1, "upscale_factor")? }))
        }
        _ => Err(NcnnError::UnknownLayerType { line: raw.line, layer: raw.name.clone(), ty: raw.ty.clone() }),
    }
}

fn read_bias(
    bias_term: bool,
    num_output: usize,
    bin: &mut BinReader<'_>,
    ctx: ReadCtx<'_>,
) -> Result<Option<Vec<f32>>, NcnnError> {
    if bias_term { bin.read_f32(num_output, ReadCtx { what: "bias", ..ctx }).map(Some) } else { Ok(None) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crop(slices: &[(CropAxis, i32, i32)]) -> Crop {
        Crop { slices: slices.iter().map(|&(axis, start, end)| CropSlice { axis, start, end }).collect() }
    }

    #[test]
    fn crop_resolves_like_ncnn() {
        let c = crop(&[(CropAxis::H, 4, -4), (CropAxis::W, 4, -4)]);
        assert_eq!(
            c.resolve_chw(64, 20, 30).unwrap(),
            CropRoi { c_offset: 0, channels: 64, h_offset: 4, height: 12, w_offset: 4, width: 22 }
        );
        // -233 = open; end 0 = n (ncnn quirk); positive end past n clamps; negative start.
        let c = crop(&[(CropAxis::C, -233, 2), (CropAxis::H, 1, 0), (CropAxis::W, -5, 100)]);
        assert_eq!(
            c.resolve_chw(3, 10, 12).unwrap(),
            CropRoi { c_offset: 0, channels: 2, h_offset: 1, height: 9, w_offset: 7, width: 5 }
        );
        let c = crop(&[(CropAxis::W, 1, -233)]);
        assert_eq!(c.resolve_chw(1, 1, 3).unwrap().width, 2);
    }

    #[test]
    fn crop_out_of_range_is_an_error() {
        let c = crop(&[(CropAxis::H, 4, -4)]);
        assert_eq!(c.resolve_chw(3, 8, 8), Err(CropRangeError { axis: CropAxis::H, start: 4, end: -4, size: 8 }));
        assert!(crop(&[(CropAxis::W, 9, 12)]).resolve_chw(3, 8, 8).is_err());
        assert!(crop(&[(CropAxis::W, -9, 2)]).resolve_chw(3, 8, 8).is_err());
        assert!(crop(&[(CropAxis::C, 0, 1)]).resolve_chw(0, 8, 8).is_err());
    }
}
