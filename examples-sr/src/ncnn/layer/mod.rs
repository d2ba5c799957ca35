//! Typed ncnn layers: exactly the layer types and parameter values the Real-CUGAN
//! `.param` files use, each read with ncnn's own parameter ids and defaults (the
//! `load_param` / `load_model` of `src/layer/<type>.cpp` in Tencent/ncnn).
//!
//! As in ncnn, each type has its own file: its parameters and weights, how it reads them
//! and the shape of its output blob (plus, for the SE blocks' 1-D layers, its forward pass).
//! [`build`] dispatches on the type name.
//!
//! Every parameter id ncnn defines for a type is read or checked; an id ncnn does not
//! define for that type is an error (ncnn would ignore it, but in these files it can only
//! mean a corrupt or foreign file). Values that would change the computation in a way this
//! project does not implement (int8, dynamic weights, SAME padding, other activations,
//! max pooling, other binary ops, ...) are errors naming the parameter.

mod activation;
mod binary_op;
mod convolution;
mod crop;
mod deconvolution;
mod inner_product;
mod input;
mod params;
mod pixel_shuffle;
mod pooling;
mod split;
mod window;

use std::fmt;

pub use activation::Activation;
pub use binary_op::BinaryOp;
pub use convolution::Convolution;
pub use crop::{Crop, CropAxis, CropRangeError, CropRoi, CropSlice};
pub use deconvolution::Deconvolution;
pub use inner_product::InnerProduct;
pub use input::Input;
pub use pixel_shuffle::PixelShuffle;
pub use pooling::Pooling;
pub use window::Pad;

use super::bin::{BinReader, ReadCtx};
use super::param::RawLayer;
use super::{BlobShape, NcnnError};
use params::Params;

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

    /// The shape of the layer's outputs from its inputs' shapes, or why they do not fit it.
    /// The loader checked the input count; `inputs` has that many entries.
    pub(crate) fn output_shape(&self, inputs: &[BlobShape]) -> Result<BlobShape, String> {
        match self {
            LayerKind::Input(i) => i.output_shape(inputs),
            LayerKind::Convolution(c) => c.output_shape(inputs),
            LayerKind::Deconvolution(d) => d.output_shape(inputs),
            LayerKind::Split => split::output_shape(inputs),
            LayerKind::Pooling(p) => p.output_shape(inputs),
            LayerKind::InnerProduct(ip) => ip.output_shape(inputs),
            LayerKind::BinaryOp(op) => op.output_shape(inputs),
            LayerKind::Crop(c) => c.output_shape(inputs),
            LayerKind::PixelShuffle(ps) => ps.output_shape(inputs),
        }
    }
}

impl fmt::Display for LayerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_name())
    }
}

/// Read one layer's typed parameters from its `.param` line and its weights (if any) from
/// the `.bin` reader.
pub(crate) fn build(raw: &RawLayer, bin: &mut BinReader<'_>) -> Result<LayerKind, NcnnError> {
    let p = Params::new(raw);
    let mut bin = LayerBin { reader: bin, ctx: ReadCtx { layer: &raw.name, ty: &raw.ty, what: "weights" } };
    Ok(match raw.ty.as_str() {
        "Input" => LayerKind::Input(Input::load(&p)?),
        "Convolution" => LayerKind::Convolution(Convolution::load(&p, &mut bin)?),
        "Deconvolution" => LayerKind::Deconvolution(Deconvolution::load(&p, &mut bin)?),
        "Split" => {
            split::load(&p)?;
            LayerKind::Split
        }
        "Pooling" => LayerKind::Pooling(Pooling::load(&p)?),
        "InnerProduct" => LayerKind::InnerProduct(InnerProduct::load(&p, &mut bin)?),
        "BinaryOp" => LayerKind::BinaryOp(BinaryOp::load(&p)?),
        "Crop" => LayerKind::Crop(Crop::load(&p)?),
        "PixelShuffle" => LayerKind::PixelShuffle(PixelShuffle::load(&p)?),
        _ => return Err(NcnnError::UnknownLayerType { line: raw.line, layer: raw.name.clone(), ty: raw.ty.clone() }),
    })
}

/// One layer's weights in the `.bin` file, read in ncnn's order: weights (tagged), then
/// bias (untagged f32).
struct LayerBin<'r, 'a> {
    reader: &'r mut BinReader<'a>,
    ctx: ReadCtx<'r>,
}

impl LayerBin<'_, '_> {
    fn weights(&mut self, count: usize) -> Result<Vec<f32>, NcnnError> {
        self.reader.read_weights(count, self.ctx)
    }

    fn bias(&mut self, bias_term: bool, num_output: usize) -> Result<Option<Vec<f32>>, NcnnError> {
        if bias_term {
            self.reader.read_f32(num_output, ReadCtx { what: "bias", ..self.ctx }).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// A (de)convolution's output: `num_output` channels from an image of `num_input` (an
/// image of unknown channels passes).
fn conv_output_shape(ty: &str, num_input: usize, num_output: usize, inputs: &[BlobShape]) -> Result<BlobShape, String> {
    match inputs {
        [BlobShape::Image { channels: Some(c) }] if *c != num_input => {
            Err(format!("{}: the input has {c} channels, the weights expect {num_input}", ty.to_lowercase()))
        }
        [BlobShape::Image { .. }] => Ok(BlobShape::Image { channels: Some(num_output) }),
        _ => Err(unexpected_inputs(ty, inputs)),
    }
}

/// Why a layer of type `ty` cannot take `inputs`.
fn unexpected_inputs(ty: &str, inputs: &[BlobShape]) -> String {
    let kinds: Vec<&str> = inputs
        .iter()
        .map(|s| match s {
            BlobShape::Image { .. } => "[C, H, W]",
            BlobShape::Vector { .. } => "1-D",
        })
        .collect();
    format!("{ty} does not take inputs of shape {}", kinds.join(" and "))
}
