//! Loader for ncnn models (`.param` text + `.bin` weights), restricted to the layer types
//! and parameters the Real-CUGAN models use, returning a typed graph.
//!
//! ```no_run
//! let model = examples_sr::ncnn::NcnnModel::load(
//!     "models/models-se/up2x-no-denoise.param",
//!     "models/models-se/up2x-no-denoise.bin",
//! )?;
//! let out = model.blob_index("out0").expect("Real-CUGAN output blob");
//! # Ok::<(), examples_sr::ncnn::NcnnError>(())
//! ```
//!
//! Layer types found in every Real-CUGAN `.param` file (se, pro: 2x/3x/4x, nose 2x) and
//! accepted here, with everything else rejected: `Input`, `Convolution` (fused leaky ReLU
//! 0.1 or none), `Split`, `Pooling` (global average), `InnerProduct` (ReLU / Sigmoid),
//! `BinaryOp` (add; mul, incl. per-channel broadcast), `Crop` (numpy-style slices with
//! negative ends), `Deconvolution` (2x2 s2, 4x4 s2 p3, 5x5 s3 p2) and `PixelShuffle`
//! (4x models only). See [`layer`] for each type's parameters and weight layout.
//!
//! Errors never panic and always say where: the `.param` line and layer (name and type),
//! or the `.bin` byte offset and the layer whose read failed.

pub mod bin;
pub mod layer;
pub mod param;

use std::path::{Path, PathBuf};

pub use layer::{
    Activation, BinaryOp, Convolution, Crop, CropAxis, CropRangeError, CropRoi, CropSlice, Deconvolution, InnerProduct,
    Input, LayerKind, Pad, PixelShuffle, Pooling, SUPPORTED_TYPES,
};
pub use param::{ParamDict, ParamFile, ParamValue, RawLayer};

use bin::BinReader;

/// Everything that can be wrong with an ncnn model pair.
#[derive(Debug, thiserror::Error)]
pub enum NcnnError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(".param line {line}: bad magic '{found}', expected 7767517 (not an ncnn text .param file)")]
    BadMagic { line: usize, found: String },

    #[error(".param line {line}: {msg}")]
    Syntax { line: usize, msg: String },

    #[error(".param line 2: the header declares {declared} layers, the file has {found}")]
    LayerCountMismatch { declared: usize, found: usize },

    #[error(".param line 2: the header declares {declared} blobs, the layers produce {found}")]
    BlobCountMismatch { declared: usize, found: usize },

    #[error(
        ".param line {line}: layer '{layer}' has type '{ty}', which this loader does not support \
         (supported: Input, Convolution, Deconvolution, Split, Pooling, InnerProduct, BinaryOp, Crop, PixelShuffle)"
    )]
    UnknownLayerType { line: usize, layer: String, ty: String },

    #[error(".param line {line}: layer '{layer}' ({ty}): {msg}")]
    InvalidParam { line: usize, layer: String, ty: String, msg: String },

    #[error(".param line {line}: layer '{layer}' ({ty}) reads blob '{blob}', which no earlier layer produces")]
    BlobNotProduced { line: usize, layer: String, ty: String, blob: String },

    #[error(
        ".param line {line}: layer '{layer}' ({ty}) produces blob '{blob}', already produced by layer '{first_layer}'"
    )]
    DuplicateBlob { line: usize, layer: String, ty: String, blob: String, first_layer: String },

    #[error(".param line {line}: layer '{layer}' ({ty}): {msg}")]
    Inconsistent { line: usize, layer: String, ty: String, msg: String },

    #[error(
        ".bin offset {offset}: truncated in the {what} of layer '{layer}' ({ty}): needs {needed} bytes, \
         {available} left (file is {file_len} bytes)"
    )]
    Truncated {
        layer: String,
        ty: String,
        what: &'static str,
        offset: usize,
        needed: usize,
        available: usize,
        file_len: usize,
    },

    #[error(".bin offset {offset}: unknown weight tag 0x{tag:08X} for the {what} of layer '{layer}' ({ty})")]
    UnknownTag { layer: String, ty: String, what: &'static str, offset: usize, tag: u32 },

    #[error(
        ".bin offset {offset}: weight tag 0x{tag:08X} ({format}) of the {what} of layer '{layer}' ({ty}) is not supported"
    )]
    UnsupportedTag { layer: String, ty: String, what: &'static str, offset: usize, tag: u32, format: &'static str },

    #[error(".bin offset {offset}: non-finite value {value} (element {index}) in the {what} of layer '{layer}' ({ty})")]
    NonFinite { layer: String, ty: String, what: &'static str, offset: usize, index: usize, value: f32 },

    #[error(
        ".bin offset {offset}: {trailing} bytes left after the last weights (of layer '{layer}' ({ty})); \
         file is {file_len} bytes: the .bin does not belong to this .param"
    )]
    Oversized { layer: String, ty: String, offset: usize, trailing: usize, file_len: usize },
}

/// What is known about a blob's shape without an input image: the kind of tensor and its
/// channel count (`None` where the file leaves it open, e.g. the Input blob).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobShape {
    /// `[C, H, W]`.
    Image { channels: Option<usize> },
    /// 1-D, e.g. global pooling means and InnerProduct outputs.
    Vector { len: Option<usize> },
}

/// A named tensor between layers.
#[derive(Debug, Clone, PartialEq)]
pub struct Blob {
    pub name: String,
    /// Index in [`NcnnModel::layers`] of the layer that writes it.
    pub producer: usize,
    /// Indices of the layers that read it, in file order.
    pub consumers: Vec<usize>,
    pub shape: BlobShape,
}

/// One layer of the graph, with its typed parameters and weights.
#[derive(Debug, Clone, PartialEq)]
pub struct Layer {
    pub name: String,
    /// 1-based line of the layer in the `.param` file.
    pub line: usize,
    /// Indices into [`NcnnModel::blobs`].
    pub bottoms: Vec<usize>,
    pub tops: Vec<usize>,
    pub kind: LayerKind,
    /// Byte range of this layer's weights (and bias) in the `.bin` file; empty if none.
    pub bin_range: std::ops::Range<usize>,
}

/// A loaded model: layers in file order (a valid execution order: every blob is produced
/// before it is read) and the blobs between them.
#[derive(Debug, Clone, PartialEq)]
pub struct NcnnModel {
    pub layers: Vec<Layer>,
    pub blobs: Vec<Blob>,
}

impl NcnnModel {
    /// Read and check a `.param` / `.bin` pair from disk.
    pub fn load(param_path: impl AsRef<Path>, bin_path: impl AsRef<Path>) -> Result<Self, NcnnError> {
        let read = |p: &Path| std::fs::read(p).map_err(|source| NcnnError::Io { path: p.to_path_buf(), source });
        let param = read(param_path.as_ref())?;
        let bin = read(bin_path.as_ref())?;
        Self::from_bytes(&param, &bin)
    }

    /// Parse a `.param` file's bytes and its `.bin` file's bytes.
    pub fn from_bytes(param: &[u8], bin: &[u8]) -> Result<Self, NcnnError> {
        let text = std::str::from_utf8(param).map_err(|e| NcnnError::Syntax {
            line: 1 + param[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count(),
            msg: "not valid UTF-8 text (a binary .param is not supported)".into(),
        })?;
        Self::from_param(&param::parse(text)?, bin)
    }

    /// Build the graph from a parsed `.param` file and the `.bin` file's bytes.
    pub fn from_param(file: &ParamFile, bin: &[u8]) -> Result<Self, NcnnError> {
        let mut reader = BinReader::new(bin);
        let mut layers: Vec<Layer> = Vec::new();
        let mut blobs: Vec<Blob> = Vec::new();
        let mut last_weighted: Option<usize> = None;

        for raw in &file.layers {
            let index = layers.len();
            let ty = raw.ty.as_str();
            let mut bottoms = Vec::new();
            for name in &raw.bottoms {
                let b = blobs.iter().position(|b| &b.name == name).ok_or_else(|| NcnnError::BlobNotProduced {
                    line: raw.line,
                    layer: raw.name.clone(),
                    ty: ty.to_string(),
                    blob: name.clone(),
                })?;
                bottoms.push(b);
            }

            let start = reader.offset();
            let kind = layer::build(raw, &mut reader)?;
            let bin_range = start..reader.offset();
            if !bin_range.is_empty() {
                last_weighted = Some(index);
            }

            let inconsistent = |msg: String| NcnnError::Inconsistent {
                line: raw.line,
                layer: raw.name.clone(),
                ty: ty.to_string(),
                msg,
            };
            let in_shapes: Vec<BlobShape> = bottoms.iter().map(|&b| blobs[b].shape).collect();
            let out_shape = kind.output_shape(&in_shapes).map_err(inconsistent)?;

            for &b in &bottoms {
                if !blobs[b].consumers.contains(&index) {
                    blobs[b].consumers.push(index);
                }
            }
            let mut tops = Vec::new();
            for name in &raw.tops {
                if let Some(first) = blobs.iter().find(|b| &b.name == name) {
                    return Err(NcnnError::DuplicateBlob {
                        line: raw.line,
                        layer: raw.name.clone(),
                        ty: ty.to_string(),
                        blob: name.clone(),
                        first_layer: layers.get(first.producer).map_or_else(|| raw.name.clone(), |l| l.name.clone()),
                    });
                }
                tops.push(blobs.len());
                blobs.push(Blob { name: name.clone(), producer: index, consumers: Vec::new(), shape: out_shape });
            }
            layers.push(Layer { name: raw.name.clone(), line: raw.line, bottoms, tops, kind, bin_range });
        }

        reader.finish(last_weighted.map(|i| (layers[i].name.as_str(), layers[i].kind.type_name())))?;
        if blobs.len() != file.blob_count {
            return Err(NcnnError::BlobCountMismatch { declared: file.blob_count, found: blobs.len() });
        }
        Ok(NcnnModel { layers, blobs })
    }

    /// Index of the blob called `name`.
    pub fn blob_index(&self, name: &str) -> Option<usize> {
        self.blobs.iter().position(|b| b.name == name)
    }

    /// The layer called `name`.
    pub fn layer(&self, name: &str) -> Option<&Layer> {
        self.layers.iter().find(|l| l.name == name)
    }

    /// Blobs no layer reads: the model's outputs (`out0` for Real-CUGAN).
    pub fn outputs(&self) -> impl Iterator<Item = &Blob> + '_ {
        self.blobs.iter().filter(|b| b.consumers.is_empty())
    }

    /// Blobs written by `Input` layers (`in0` for Real-CUGAN).
    pub fn inputs(&self) -> impl Iterator<Item = &Blob> + '_ {
        self.blobs.iter().filter(|b| matches!(self.layers[b.producer].kind, LayerKind::Input(_)))
    }
}

#[cfg(test)]
mod tests;
