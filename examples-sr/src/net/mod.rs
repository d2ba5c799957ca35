//! Runs a loaded ncnn Real-CUGAN graph on rocm-vision tensors.
//!
//! The graph is interpreted as the `.param` file lists it (file order is a valid execution
//! order): one node per ncnn layer, a value slot per blob, and each blob dropped right
//! after its last consumer, so a run holds only the feature maps still needed. Convolution
//! and deconvolution go through the conv engine (`Tensor::conv2d` /
//! `Tensor::conv_transpose2d`); crops are views (`narrow`), `PixelShuffle` is a
//! reshape/permute, the SE scale a broadcast multiply, and the tiny SE fully-connected
//! layers run on plain vectors.
//!
//! Global average pooling is where a tiled run has to stop: the mean is over the whole
//! image, not the tile. [`Network::advance`] therefore runs until it reaches a `Pooling`
//! layer whose mean it has not been given and hands the pooled feature map back
//! ([`Stop::Pool`]); the caller (see [`crate::upscale`]) sums it over every tile and
//! resumes each run with the shared means. Every blob also carries its size relative to
//! the net input ([`Ratio`]), which is what lets the caller tell which part of a tile's
//! feature map is that tile's own.
//!
//! - `graph`: ncnn layers lowered to nodes (weights as tensors, blob lifetimes, in-place
//!   adds, relative sizes);
//! - `exec`: the interpreter ([`Run`], [`Stop`], [`Profile`]);
//! - `analysis`: shapes, FLOPs and peak memory for an input size, without running;
//! - `margins`: where a tile's maps may differ from the untiled ones (the tiler's
//!   conditions for position-dependent convolutions such as Winograd);
//! - `shed`: which maps a parked run drops and rebuilds from the maps it keeps.

mod analysis;
mod exec;
mod graph;
mod margins;
mod shed;

use std::sync::Mutex;

use conv_engine::ConvKind;
use rocm_vision::{ConvRounding, DType, Device};

use crate::Error;
use crate::ncnn::NcnnModel;

pub use analysis::{PoolInfo, PoolPoint, Ratio, Shape};
pub use exec::{LayerTime, Means, Profile, Run, Stop};
use graph::{Graph, NodeKind};
pub use margins::Margin;

/// A Real-CUGAN network (any ncnn graph made of the supported layers) ready to run.
pub struct Network {
    graph: Graph,
    dtype: DType,
    device: Device,
    profile: Mutex<Option<Profile>>,
    /// Per pooling layer, the maps [`Network::shed`] drops there.
    replays: Vec<Vec<shed::Replay>>,
}

fn err(msg: impl Into<String>) -> Error {
    Error::Model(msg.into())
}

impl Network {
    /// Prepares `model` for inference in `dtype` on `device`: weights become tensors, each
    /// blob's relative size and last reader are worked out, and anything this executor
    /// cannot run (several inputs or outputs, anisotropic strides, a non-zero border value)
    /// is an error.
    pub fn new(model: &NcnnModel, dtype: DType, device: &Device) -> Result<Network, Error> {
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(err(format!("inference dtype {dtype:?} is not supported (f32, f16 or bf16)")));
        }
        // Tiled == untiled bit for bit needs every conv to round each pixel the same way
        // whatever the tile's size (on ROCm: no library GEMM, no split-K).
        let device = device.clone().with_conv_rounding(ConvRounding::SizeIndependent);
        let graph = Graph::lower(model, dtype, &device)?;
        let mut net = Network { graph, dtype, device, profile: Mutex::new(None), replays: Vec::new() };
        net.replays = net.select_replays()?;
        Ok(net)
    }

    /// Output size / input size.
    pub fn scale(&self) -> usize {
        self.graph.scale
    }

    /// Tile origins must be multiples of this (in input pixels) for every feature map of a
    /// tile to start on a whole pixel of the untiled map: the least common multiple of the
    /// downsampling factors.
    pub fn align(&self) -> usize {
        self.graph.align
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The global-average-pooling layers in execution order.
    pub fn pools(&self) -> &[PoolInfo] {
        &self.graph.pools
    }

    /// Input channels (3 for Real-CUGAN), from the first convolution.
    pub fn input_channels(&self) -> Option<usize> {
        self.graph.nodes.iter().find_map(|n| match &n.kind {
            NodeKind::Conv(c) if c.kind == ConvKind::Forward && n.bottoms == [self.graph.input] => Some(c.in_c),
            _ => None,
        })
    }
}
