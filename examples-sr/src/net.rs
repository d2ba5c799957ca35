//! Runs a loaded ncnn Real-CUGAN graph on rocm-vision tensors.
//!
//! The graph is interpreted as the `.param` file lists it (file order is a valid execution
//! order): one [`Node`] per ncnn layer, a value slot per blob, and each blob dropped right
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

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use conv_engine::ConvProblem;
use rocm_vision::{Conv2dParams, DType, Device, Padding2d, Tensor};

use crate::Error;
use crate::ncnn::{Activation, BinaryOp, Crop, LayerKind, NcnnModel, Pad};

/// A blob's spatial size relative to the net input: `num / den` (reduced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub num: usize,
    pub den: usize,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}

impl Ratio {
    pub const ONE: Ratio = Ratio { num: 1, den: 1 };

    fn new(num: usize, den: usize) -> Ratio {
        let g = gcd(num, den).max(1);
        Ratio { num: num / g, den: den / g }
    }

    fn times(self, k: usize) -> Ratio {
        Ratio::new(self.num * k, self.den)
    }

    fn over(self, k: usize) -> Ratio {
        Ratio::new(self.num, self.den * k)
    }

    /// `n · num / den` when that is a whole number.
    pub fn of(self, n: usize) -> Option<usize> {
        (n * self.num % self.den == 0).then_some(n * self.num / self.den)
    }
}

/// Shape of a blob for one input size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `[1, c, h, w]`.
    Image { c: usize, h: usize, w: usize },
    /// A vector of per-channel values (pooling and fully-connected outputs).
    Vector(usize),
}

/// A convolution or deconvolution layer, ready for the engine.
struct ConvNode {
    weight: Tensor,
    bias: Option<Tensor>,
    params: Conv2dParams,
    activation: Activation,
    in_c: usize,
    out_c: usize,
    kernel: [usize; 2],
    stride: [usize; 2],
    dilation: [usize; 2],
    pad: Pad,
    /// For a deconvolution whose kernel equals its stride (no overlap, no padding): the
    /// same layer as a 1x1 convolution to `out_c·k·k` channels followed by a pixel shuffle
    /// (weights `[out_c·k·k, in_c, 1, 1]`, bias repeated `k·k` times). Every output pixel
    /// is one product sum over the input channels either way, but as a plain GEMM with
    /// `k·k` times more rows it runs several times faster in the engine than as a
    /// transposed convolution split into `k·k` one-tap phases.
    as_1x1: Option<Shuffled1x1>,
}

/// See `ConvNode::as_1x1`.
struct Shuffled1x1 {
    weight: Tensor,
    bias: Option<Tensor>,
    k: usize,
}

struct InnerProductNode {
    /// `[out][in]`.
    weight: Vec<f32>,
    bias: Option<Vec<f32>>,
    activation: Activation,
    n_in: usize,
    n_out: usize,
}

enum NodeKind {
    Input,
    Conv(ConvNode),
    Deconv(ConvNode),
    Split,
    /// Index into [`Network::pools`].
    Pool(usize),
    InnerProduct(InnerProductNode),
    Add,
    Mul,
    Crop(Crop),
    PixelShuffle(usize),
}

struct Node {
    name: String,
    kind: NodeKind,
    bottoms: Vec<usize>,
    tops: Vec<usize>,
    /// Blobs whose last reader is this node: dropped once it has run.
    frees: Vec<usize>,
    /// For an `Add`: an operand (0 or 1) that may be overwritten with the sum, because
    /// this node is its only reader and it owns its allocation (made by a conv, deconv,
    /// add, multiply or pixel shuffle; not a split's or a crop's, which share theirs).
    inplace: Option<usize>,
}

struct BlobMeta {
    name: String,
    /// `None` for vectors.
    ratio: Option<Ratio>,
}

/// One global-average-pooling layer (an SE block's squeeze).
#[derive(Clone, Debug)]
pub struct PoolInfo {
    /// The ncnn layer name (`mean_64`, ...).
    pub layer: String,
    /// Channels averaged.
    pub channels: usize,
    /// Size of the pooled feature map relative to the net input.
    pub ratio: Ratio,
    /// The blob averaged (index into the blob table; for [`Network::blob_shape`]).
    pub blob: usize,
}

/// Per-channel means of the pooling layers, in [`Network::pools`] order (`None`: not known
/// yet).
pub type Means = Vec<Option<Vec<f32>>>;

/// Where a run stopped.
pub enum Stop {
    /// At a pooling layer whose mean is not known yet: `blob` is its input feature map,
    /// `[1, C, h, w]`.
    Pool { pool: usize, blob: Tensor },
    /// The output blob, `[1, C, H, W]`.
    Done(Tensor),
}

#[derive(Clone)]
enum Value {
    Image(Tensor),
    Vector(Vec<f32>),
}

/// A run of the network on one input (a tile), resumable at pooling layers.
pub struct Run {
    next: usize,
    values: Vec<Option<Value>>,
}

impl Run {
    /// Bytes of the feature maps this run holds (storage shared between blobs, as after a
    /// `Split`, counted once; a crop view counted at its own size).
    pub fn live_bytes(&self) -> usize {
        let mut seen = HashSet::new();
        self.values
            .iter()
            .flatten()
            .map(|v| match v {
                Value::Image(t) => {
                    let first = t.as_candle().is_none_or(|c| seen.insert(c.id()));
                    if first { t.elem_count() * t.dtype().size_in_bytes() } else { 0 }
                }
                Value::Vector(v) => v.len() * 4,
            })
            .sum()
    }
}

/// Time spent per kind of operation, for the benchmark's breakdown.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub conv: Duration,
    pub conv_flops: u64,
    pub deconv: Duration,
    pub deconv_flops: u64,
    /// Fused activations (leaky ReLU after conv/deconv).
    pub activation: Duration,
    /// BinaryOp add and the SE multiply.
    pub binary: Duration,
    /// Crop views and PixelShuffle copies.
    pub reshape: Duration,
    /// Pooling means and the SE fully-connected layers.
    pub se: Duration,
    /// Each conv / deconv layer: name, shape summary, time (summed over runs), FLOPs.
    pub layers: Vec<LayerTime>,
}

/// Time of one convolution layer in a [`Profile`].
#[derive(Clone, Debug)]
pub struct LayerTime {
    pub name: String,
    /// E.g. `conv 3x3 s1 64->64 on 1x64x270x270`.
    pub what: String,
    pub time: Duration,
    pub flops: u64,
}

impl Profile {
    pub fn total(&self) -> Duration {
        self.conv + self.deconv + self.activation + self.binary + self.reshape + self.se
    }
}

/// A Real-CUGAN network (any ncnn graph made of the supported layers) ready to run.
pub struct Network {
    nodes: Vec<Node>,
    blobs: Vec<BlobMeta>,
    input: usize,
    output: usize,
    pools: Vec<PoolInfo>,
    scale: usize,
    align: usize,
    dtype: DType,
    device: Device,
    profile: Mutex<Option<Profile>>,
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
        let inputs: Vec<usize> = model.inputs().map(|b| model.blob_index(&b.name).unwrap_or(0)).collect();
        let outputs: Vec<usize> = model.outputs().map(|b| model.blob_index(&b.name).unwrap_or(0)).collect();
        let (&[input], &[output]) = (inputs.as_slice(), outputs.as_slice()) else {
            return Err(err(format!(
                "the graph has {} inputs and {} outputs; a Real-CUGAN model has one of each (in0, out0)",
                inputs.len(),
                outputs.len()
            )));
        };

        let mut blobs: Vec<BlobMeta> =
            model.blobs.iter().map(|b| BlobMeta { name: b.name.clone(), ratio: None }).collect();
        let mut nodes = Vec::with_capacity(model.layers.len());
        let mut pools = Vec::new();
        let tensor = |data: &[f32], shape: &[usize]| -> Result<Tensor, Error> {
            Ok(Tensor::from_vec(data.to_vec(), shape, device)?.to_dtype(dtype)?)
        };

        for layer in &model.layers {
            let at = |msg: String| err(format!("layer '{}' ({}): {msg}", layer.name, layer.kind));
            let in_ratio = |i: usize| -> Result<Option<Ratio>, Error> {
                let b = *layer.bottoms.get(i).ok_or_else(|| at(format!("has no input {i}")))?;
                Ok(blobs[b].ratio)
            };
            let image_ratio = |i: usize| -> Result<Ratio, Error> {
                in_ratio(i)?.ok_or_else(|| at(format!("input {i} is a vector, an image was expected")))
            };
            let (kind, ratio) = match &layer.kind {
                LayerKind::Input(_) => (NodeKind::Input, Some(Ratio::ONE)),
                LayerKind::Convolution(c) => {
                    let r = image_ratio(0)?;
                    if c.stride_h != c.stride_w {
                        return Err(at(format!("stride {}x{} differs per axis", c.stride_h, c.stride_w)));
                    }
                    let padded = c.pad.left + c.pad.right + c.pad.top + c.pad.bottom > 0;
                    if padded && c.pad_value != 0.0 {
                        return Err(at(format!("border value {} (only zero padding is supported)", c.pad_value)));
                    }
                    let params = Conv2dParams {
                        stride: [c.stride_h, c.stride_w],
                        padding: Padding2d { begin: [c.pad.top, c.pad.left], end: [c.pad.bottom, c.pad.right] },
                        dilation: [c.dilation_h, c.dilation_w],
                        ..Conv2dParams::default()
                    };
                    let node = ConvNode {
                        weight: tensor(&c.weight, &[c.num_output, c.num_input, c.kernel_h, c.kernel_w])?,
                        bias: c.bias.as_deref().map(|b| tensor(b, &[c.num_output])).transpose()?,
                        params,
                        activation: c.activation,
                        in_c: c.num_input,
                        out_c: c.num_output,
                        kernel: [c.kernel_h, c.kernel_w],
                        stride: [c.stride_h, c.stride_w],
                        dilation: [c.dilation_h, c.dilation_w],
                        pad: c.pad,
                        as_1x1: None,
                    };
                    (NodeKind::Conv(node), Some(r.over(c.stride_h)))
                }
                LayerKind::Deconvolution(d) => {
                    let r = image_ratio(0)?;
                    if d.stride_h != d.stride_w {
                        return Err(at(format!("stride {}x{} differs per axis", d.stride_h, d.stride_w)));
                    }
                    let params = Conv2dParams {
                        stride: [d.stride_h, d.stride_w],
                        padding: Padding2d { begin: [d.pad.top, d.pad.left], end: [d.pad.bottom, d.pad.right] },
                        dilation: [d.dilation_h, d.dilation_w],
                        ..Conv2dParams::default()
                    };
                    let node = ConvNode {
                        weight: tensor(&d.weight, &[d.num_input, d.num_output, d.kernel_h, d.kernel_w])?,
                        bias: d.bias.as_deref().map(|b| tensor(b, &[d.num_output])).transpose()?,
                        params,
                        activation: d.activation,
                        in_c: d.num_input,
                        out_c: d.num_output,
                        kernel: [d.kernel_h, d.kernel_w],
                        stride: [d.stride_h, d.stride_w],
                        dilation: [d.dilation_h, d.dilation_w],
                        pad: d.pad,
                        as_1x1: deconv_as_1x1(d, dtype, device)?,
                    };
                    (NodeKind::Deconv(node), Some(r.times(d.stride_h)))
                }
                LayerKind::Split => (NodeKind::Split, in_ratio(0)?),
                LayerKind::Pooling(_) => {
                    let r = image_ratio(0)?;
                    let channels = match model.blobs[layer.bottoms[0]].shape {
                        crate::ncnn::BlobShape::Image { channels: Some(c) } => c,
                        _ => return Err(at("the pooled blob's channel count is not known".into())),
                    };
                    pools.push(PoolInfo { layer: layer.name.clone(), channels, ratio: r, blob: layer.bottoms[0] });
                    (NodeKind::Pool(pools.len() - 1), None)
                }
                LayerKind::InnerProduct(ip) => {
                    if in_ratio(0)?.is_some() {
                        return Err(at("takes an image; only vectors (after pooling) are supported".into()));
                    }
                    let node = InnerProductNode {
                        weight: ip.weight.clone(),
                        bias: ip.bias.clone(),
                        activation: ip.activation,
                        n_in: ip.num_input,
                        n_out: ip.num_output,
                    };
                    (NodeKind::InnerProduct(node), None)
                }
                LayerKind::BinaryOp(op) => {
                    let (a, b) = (in_ratio(0)?, in_ratio(1)?);
                    let ratio = match (op, a, b) {
                        (_, Some(a), Some(b)) if a == b => Some(a),
                        (_, Some(a), Some(b)) => {
                            return Err(at(format!(
                                "operands have different sizes relative to the input ({}/{} and {}/{})",
                                a.num, a.den, b.num, b.den
                            )));
                        }
                        (BinaryOp::Mul, Some(a), None) => Some(a),
                        (_, None, None) => None,
                        _ => return Err(at("this operand combination is not supported".into())),
                    };
                    (if *op == BinaryOp::Add { NodeKind::Add } else { NodeKind::Mul }, ratio)
                }
                LayerKind::Crop(c) => {
                    let r = image_ratio(0)?;
                    (NodeKind::Crop(c.clone()), Some(r))
                }
                LayerKind::PixelShuffle(ps) => {
                    let r = image_ratio(0)?;
                    (NodeKind::PixelShuffle(ps.upscale_factor), Some(r.times(ps.upscale_factor)))
                }
            };
            for &t in &layer.tops {
                blobs[t].ratio = ratio;
            }
            nodes.push(Node {
                name: layer.name.clone(),
                kind,
                bottoms: layer.bottoms.clone(),
                tops: layer.tops.clone(),
                frees: Vec::new(),
                inplace: None,
            });
        }

        for (b, blob) in model.blobs.iter().enumerate() {
            if let Some(&last) = blob.consumers.iter().max() {
                nodes[last].frees.push(b);
            }
        }
        for i in 0..nodes.len() {
            if !matches!(nodes[i].kind, NodeKind::Add) {
                continue;
            }
            let owned = |b: usize| {
                let blob = &model.blobs[b];
                blob.consumers == [i]
                    && matches!(
                        nodes[blob.producer].kind,
                        NodeKind::Conv(_)
                            | NodeKind::Deconv(_)
                            | NodeKind::Add
                            | NodeKind::Mul
                            | NodeKind::PixelShuffle(_)
                    )
                    && model.blobs.iter().filter(|o| o.producer == blob.producer).count() == 1
            };
            let (a, b) = (nodes[i].bottoms[0], nodes[i].bottoms[1]);
            nodes[i].inplace = if a != b && owned(a) {
                Some(0)
            } else if a != b && owned(b) {
                Some(1)
            } else {
                None
            };
        }
        let out_ratio = blobs[output].ratio.ok_or_else(|| err("the output blob is a vector, not an image"))?;
        if out_ratio.den != 1 || out_ratio.num == 0 {
            return Err(err(format!(
                "the output is {}/{} the input size; a super-resolution net needs a whole factor",
                out_ratio.num, out_ratio.den
            )));
        }
        let align = blobs.iter().filter_map(|b| b.ratio).fold(1, |a, r| lcm(a, r.den));
        Ok(Network {
            nodes,
            blobs,
            input,
            output,
            pools,
            scale: out_ratio.num,
            align,
            dtype,
            device: device.clone(),
            profile: Mutex::new(None),
        })
    }

    /// Output size / input size.
    pub fn scale(&self) -> usize {
        self.scale
    }

    /// Tile origins must be multiples of this (in input pixels) for every feature map of a
    /// tile to start on a whole pixel of the untiled map: the least common multiple of the
    /// downsampling factors.
    pub fn align(&self) -> usize {
        self.align
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The global-average-pooling layers in execution order.
    pub fn pools(&self) -> &[PoolInfo] {
        &self.pools
    }

    /// Input channels (3 for Real-CUGAN), from the first convolution.
    pub fn input_channels(&self) -> Option<usize> {
        self.nodes.iter().find_map(|n| match &n.kind {
            NodeKind::Conv(c) if n.bottoms == [self.input] => Some(c.in_c),
            _ => None,
        })
    }

    /// Starts collecting a [`Profile`] (replacing any earlier one).
    pub fn enable_profiling(&self) {
        *self.profile.lock().unwrap_or_else(|e| e.into_inner()) = Some(Profile::default());
    }

    /// The profile collected since [`Self::enable_profiling`].
    pub fn take_profile(&self) -> Option<Profile> {
        self.profile.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn record(&self, f: impl FnOnce(&mut Profile)) {
        if let Some(p) = self.profile.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            f(p);
        }
    }

    fn profiling(&self) -> bool {
        self.profile.lock().map(|p| p.is_some()).unwrap_or(false)
    }

    /// A run on `input` (`[1, C, H, W]`, the network's dtype).
    pub fn start(&self, input: Tensor) -> Result<Run, Error> {
        if input.rank() != 4 || input.dims()[0] != 1 {
            return Err(err(format!("the network input must be [1, C, H, W], got {:?}", input.dims())));
        }
        let input = if input.dtype() == self.dtype { input } else { input.to_dtype(self.dtype)? };
        let mut values = vec![None; self.blobs.len()];
        values[self.input] = Some(Value::Image(input));
        Ok(Run { next: 0, values })
    }

    /// Runs layers until the output is ready or a pooling layer `p` with `means[p] ==
    /// None` is reached (the run then stays before that layer; call again once the mean is
    /// known). `means[p]` holds the per-channel means of pooling layer `p`.
    pub fn advance(&self, run: &mut Run, means: &[Option<Vec<f32>>]) -> Result<Stop, Error> {
        while run.next < self.nodes.len() {
            let node = &self.nodes[run.next];
            if let NodeKind::Pool(p) = node.kind {
                let mean = means.get(p).and_then(|m| m.as_ref());
                match mean {
                    None => {
                        let blob = self.image(run, node, 0)?.clone();
                        return Ok(Stop::Pool { pool: p, blob });
                    }
                    Some(m) if m.len() != self.pools[p].channels => {
                        return Err(err(format!(
                            "{} means given for pooling layer '{}' of {} channels",
                            m.len(),
                            node.name,
                            self.pools[p].channels
                        )));
                    }
                    Some(_) => {}
                }
            }
            self.execute(run, node, means).map_err(|e| err(format!("layer '{}': {e}", node.name)))?;
            for &b in &node.frees {
                run.values[b] = None;
            }
            run.next += 1;
        }
        match run.values[self.output].take() {
            Some(Value::Image(t)) => Ok(Stop::Done(t)),
            _ => Err(err(format!("the output blob '{}' was not produced", self.blobs[self.output].name))),
        }
    }

    /// Runs the whole network on `input` with the pooling means taken from the input
    /// itself (no tiling): the plain forward pass.
    pub fn forward(&self, input: Tensor) -> Result<Tensor, Error> {
        self.forward_with_means(input).map(|(t, _)| t)
    }

    /// [`Self::forward`], also returning the pooling layers' means (in [`Self::pools`]
    /// order), which a run on a window of the same input can be given to reproduce the
    /// same values.
    pub fn forward_with_means(&self, input: Tensor) -> Result<(Tensor, Means), Error> {
        let mut run = self.start(input)?;
        let mut means: Means = vec![None; self.pools.len()];
        loop {
            match self.advance(&mut run, &means)? {
                Stop::Done(t) => return Ok((t, means)),
                Stop::Pool { pool, blob } => {
                    let clock = Instant::now();
                    let sums = crate::upscale::channel_sums(&blob, None)?;
                    means[pool] = Some(crate::upscale::sums_to_means(&sums, &self.pools[pool])?);
                    self.record(|p| p.se += clock.elapsed());
                }
            }
        }
    }

    fn image<'a>(&self, run: &'a Run, node: &Node, i: usize) -> Result<&'a Tensor, Error> {
        match run.values[node.bottoms[i]].as_ref() {
            Some(Value::Image(t)) => Ok(t),
            Some(Value::Vector(_)) => Err(err(format!("input '{}' is a vector", self.blobs[node.bottoms[i]].name))),
            None => Err(err(format!("input '{}' is not available", self.blobs[node.bottoms[i]].name))),
        }
    }

    fn vector<'a>(&self, run: &'a Run, node: &Node, i: usize) -> Result<&'a [f32], Error> {
        match run.values[node.bottoms[i]].as_ref() {
            Some(Value::Vector(v)) => Ok(v),
            _ => Err(err(format!("input '{}' is not an available vector", self.blobs[node.bottoms[i]].name))),
        }
    }

    fn execute(&self, run: &mut Run, node: &Node, means: &[Option<Vec<f32>>]) -> Result<(), Error> {
        let clock = self.profiling().then(Instant::now);
        let elapsed = || clock.map(|c| c.elapsed()).unwrap_or_default();
        let out = match &node.kind {
            NodeKind::Input => {
                return match run.values[self.input] {
                    Some(Value::Image(_)) => Ok(()),
                    _ => Err(err("the run has no input image")),
                };
            }
            NodeKind::Conv(c) | NodeKind::Deconv(c) => {
                let x = self.image(run, node, 0)?;
                let transposed = matches!(node.kind, NodeKind::Deconv(_));
                let flops = if clock.is_some() { conv_flops(c, x.dims(), transposed, self.dtype) } else { 0 };
                let y = match (&c.as_1x1, transposed) {
                    (Some(s), true) => x.conv2d(&s.weight, s.bias.as_ref(), &Conv2dParams::default())?,
                    (None, true) => x.conv_transpose2d(&c.weight, c.bias.as_ref(), &c.params)?,
                    (_, false) => x.conv2d(&c.weight, c.bias.as_ref(), &c.params)?,
                };
                let t_conv = elapsed();
                // Elementwise, so it can come before the shuffle of the 1x1 form.
                let y = match c.activation {
                    // The conv output is new and referenced nowhere else: update it in place.
                    Activation::LeakyRelu { slope } if crate::ops::leaky_relu_inplace(&y, slope)? => y,
                    act => activate(y, act)?,
                };
                let t_act = elapsed() - t_conv;
                let y = match (&c.as_1x1, transposed) {
                    (Some(s), true) => crate::ops::pixel_shuffle(&y, s.k)?,
                    _ => y,
                };
                // The shuffle is part of the deconvolution.
                let t_conv = elapsed() - t_act;
                let what = if clock.is_some() {
                    format!(
                        "{} {}x{} s{} {}->{} on {:?}",
                        if transposed { "deconv" } else { "conv" },
                        c.kernel[0],
                        c.kernel[1],
                        c.stride[0],
                        c.in_c,
                        c.out_c,
                        x.dims()
                    )
                } else {
                    String::new()
                };
                self.record(|p| {
                    match p.layers.iter_mut().find(|l| l.name == node.name) {
                        Some(l) => {
                            l.time += t_conv;
                            l.flops += flops;
                        }
                        None => p.layers.push(LayerTime { name: node.name.clone(), what, time: t_conv, flops }),
                    }
                    if transposed {
                        p.deconv += t_conv;
                        p.deconv_flops += flops;
                    } else {
                        p.conv += t_conv;
                        p.conv_flops += flops;
                    }
                    p.activation += t_act;
                });
                Value::Image(y)
            }
            NodeKind::Split => {
                let v = run.values[node.bottoms[0]].clone().ok_or_else(|| err("the split input is not available"))?;
                for &t in &node.tops {
                    run.values[t] = Some(v.clone());
                }
                return Ok(());
            }
            NodeKind::Pool(p) => {
                let m = means.get(*p).and_then(|m| m.clone()).ok_or_else(|| err("the pooling mean is not known"))?;
                Value::Vector(m)
            }
            NodeKind::InnerProduct(ip) => {
                let x = self.vector(run, node, 0)?;
                if x.len() != ip.n_in {
                    return Err(err(format!("input has {} values, the weights expect {}", x.len(), ip.n_in)));
                }
                let y = (0..ip.n_out)
                    .map(|o| {
                        let row = &ip.weight[o * ip.n_in..(o + 1) * ip.n_in];
                        let dot: f64 = row.iter().zip(x).map(|(&w, &v)| w as f64 * v as f64).sum();
                        let v = (dot + ip.bias.as_ref().map_or(0.0, |b| b[o] as f64)) as f32;
                        activate_scalar(v, ip.activation)
                    })
                    .collect();
                self.record(|p| p.se += elapsed());
                Value::Vector(y)
            }
            NodeKind::Add if node.inplace.is_some() => {
                let i = node.inplace.unwrap_or(0);
                let (d, o) = (node.bottoms[i], node.bottoms[1 - i]);
                // Taken out of the run: this node is its only reader.
                let dst = match run.values[d].take() {
                    Some(Value::Image(t)) => t,
                    _ => return Err(err("the in-place operand is not an available image")),
                };
                let other = match run.values[o].as_ref() {
                    Some(Value::Image(t)) => t,
                    _ => return Err(err("the other operand is not an available image")),
                };
                check_same(&dst, other)?;
                let sum =
                    if dst.is_contiguous() && crate::ops::add_inplace(&dst, other)? { dst } else { dst.add(other)? };
                self.record(|p| p.binary += elapsed());
                Value::Image(sum)
            }
            NodeKind::Add | NodeKind::Mul => {
                let a = run.values[node.bottoms[0]].as_ref();
                let b = run.values[node.bottoms[1]].as_ref();
                let v = match (a, b, &node.kind) {
                    (Some(Value::Image(a)), Some(Value::Image(b)), NodeKind::Add) => {
                        check_same(a, b)?;
                        Value::Image(a.add(b)?)
                    }
                    (Some(Value::Image(a)), Some(Value::Image(b)), _) => {
                        check_same(a, b)?;
                        Value::Image(a.mul(b)?)
                    }
                    (Some(Value::Image(a)), Some(Value::Vector(s)), NodeKind::Mul) => {
                        let c = a.dims()[1];
                        if s.len() != c {
                            return Err(err(format!("{} scales for {c} channels", s.len())));
                        }
                        let s = Tensor::from_vec(s.clone(), &[1, c, 1, 1], &self.device)?.to_dtype(self.dtype)?;
                        Value::Image(a.mul(&s)?)
                    }
                    (Some(Value::Vector(a)), Some(Value::Vector(b)), kind) if a.len() == b.len() => {
                        let add = matches!(kind, NodeKind::Add);
                        Value::Vector(a.iter().zip(b).map(|(x, y)| if add { x + y } else { x * y }).collect())
                    }
                    _ => return Err(err("operands of unsupported or mismatched kinds".to_string())),
                };
                self.record(|p| p.binary += elapsed());
                v
            }
            NodeKind::Crop(crop) => {
                let x = self.image(run, node, 0)?;
                let [_, c, h, w] = dims4(x)?;
                let roi = crop.resolve_chw(c, h, w).map_err(|e| err(e.to_string()))?;
                let y = x.narrow(1, roi.c_offset, roi.channels)?.narrow(2, roi.h_offset, roi.height)?.narrow(
                    3,
                    roi.w_offset,
                    roi.width,
                )?;
                self.record(|p| p.reshape += elapsed());
                Value::Image(y)
            }
            NodeKind::PixelShuffle(r) => {
                let y = crate::ops::pixel_shuffle(self.image(run, node, 0)?, *r)?;
                self.record(|p| p.reshape += elapsed());
                Value::Image(y)
            }
        };
        let top = *node.tops.first().ok_or_else(|| err("the layer has no output"))?;
        run.values[top] = Some(out);
        Ok(())
    }

    /// Every blob's shape for a `[1, C, h, w]` input, or why that input does not fit the
    /// graph (a crop larger than its blob, operands of different sizes, ...).
    pub fn shapes(&self, h: usize, w: usize) -> Result<Vec<Option<Shape>>, Error> {
        let c = self.input_channels().unwrap_or(3);
        let mut shapes: Vec<Option<Shape>> = vec![None; self.blobs.len()];
        shapes[self.input] = Some(Shape::Image { c, h, w });
        for node in &self.nodes {
            let at = |msg: String| err(format!("layer '{}' on a {w}x{h} input: {msg}", node.name));
            let input = |i: usize| shapes[node.bottoms[i]].ok_or_else(|| at(format!("input {i} has no shape")));
            let image = |i: usize| match input(i)? {
                Shape::Image { c, h, w } => Ok((c, h, w)),
                Shape::Vector(_) => Err(at(format!("input {i} is a vector"))),
            };
            let out = match &node.kind {
                NodeKind::Input => continue,
                NodeKind::Conv(cv) => {
                    let (c, h, w) = image(0)?;
                    if c != cv.in_c {
                        return Err(at(format!("{c} channels in, the weights expect {}", cv.in_c)));
                    }
                    let size = |n: usize, pad: usize, k: usize, d: usize, s: usize| {
                        let span = d * (k - 1) + 1;
                        (n + pad >= span).then(|| (n + pad - span) / s + 1)
                    };
                    let oh = size(h, cv.pad.top + cv.pad.bottom, cv.kernel[0], cv.dilation[0], cv.stride[0]);
                    let ow = size(w, cv.pad.left + cv.pad.right, cv.kernel[1], cv.dilation[1], cv.stride[1]);
                    match (oh, ow) {
                        (Some(h), Some(w)) => Shape::Image { c: cv.out_c, h, w },
                        _ => return Err(at(format!("a {w}x{h} input is smaller than the kernel"))),
                    }
                }
                NodeKind::Deconv(cv) => {
                    let (c, h, w) = image(0)?;
                    if c != cv.in_c {
                        return Err(at(format!("{c} channels in, the weights expect {}", cv.in_c)));
                    }
                    let size = |n: usize, pad: usize, k: usize, d: usize, s: usize| {
                        ((n - 1) * s + d * (k - 1) + 1).checked_sub(pad).filter(|&o| o > 0)
                    };
                    let oh = size(h, cv.pad.top + cv.pad.bottom, cv.kernel[0], cv.dilation[0], cv.stride[0]);
                    let ow = size(w, cv.pad.left + cv.pad.right, cv.kernel[1], cv.dilation[1], cv.stride[1]);
                    match (oh, ow) {
                        (Some(h), Some(w)) => Shape::Image { c: cv.out_c, h, w },
                        _ => return Err(at("the output would be empty".into())),
                    }
                }
                NodeKind::Split => {
                    let s = input(0)?;
                    for &t in &node.tops {
                        shapes[t] = Some(s);
                    }
                    continue;
                }
                NodeKind::Pool(_) => Shape::Vector(image(0)?.0),
                NodeKind::InnerProduct(ip) => match input(0)? {
                    Shape::Vector(n) if n == ip.n_in => Shape::Vector(ip.n_out),
                    other => return Err(at(format!("input {other:?}, expected a vector of {}", ip.n_in))),
                },
                NodeKind::Add | NodeKind::Mul => match (input(0)?, input(1)?) {
                    (a, b) if a == b => a,
                    (a @ Shape::Image { c, .. }, Shape::Vector(n)) if c == n && matches!(node.kind, NodeKind::Mul) => a,
                    (a, b) => return Err(at(format!("operands {a:?} and {b:?} do not fit"))),
                },
                NodeKind::Crop(crop) => {
                    let (c, h, w) = image(0)?;
                    let roi = crop.resolve_chw(c, h, w).map_err(|e| at(e.to_string()))?;
                    Shape::Image { c: roi.channels, h: roi.height, w: roi.width }
                }
                NodeKind::PixelShuffle(r) => {
                    let (c, h, w) = image(0)?;
                    if c % (r * r) != 0 {
                        return Err(at(format!("{c} channels are not a multiple of {r}x{r}")));
                    }
                    Shape::Image { c: c / (r * r), h: h * r, w: w * r }
                }
            };
            shapes[node.tops[0]] = Some(out);
        }
        Ok(shapes)
    }

    /// Shape of blob `blob` for an `h x w` input.
    pub fn blob_shape(&self, blob: usize, h: usize, w: usize) -> Result<Shape, Error> {
        self.shapes(h, w)?.get(blob).copied().flatten().ok_or_else(|| err(format!("blob {blob} has no shape")))
    }

    /// Output shape `[C, H, W]` for an `h x w` input.
    pub fn output_shape(&self, h: usize, w: usize) -> Result<(usize, usize, usize), Error> {
        match self.blob_shape(self.output, h, w)? {
            Shape::Image { c, h, w } => Ok((c, h, w)),
            Shape::Vector(_) => Err(err("the output is a vector")),
        }
    }

    /// FLOPs (2 per multiply-add) of the convolutions and deconvolutions for an `h x w`
    /// input, counted as the conv engine counts them.
    pub fn flops(&self, h: usize, w: usize) -> Result<u64, Error> {
        let shapes = self.shapes(h, w)?;
        let mut total = 0;
        for node in &self.nodes {
            if let NodeKind::Conv(c) | NodeKind::Deconv(c) = &node.kind
                && let Some(Shape::Image { c: ic, h, w }) = shapes[node.bottoms[0]]
            {
                total += conv_flops(c, &[1, ic, h, w], matches!(node.kind, NodeKind::Deconv(_)), self.dtype);
            }
        }
        Ok(total)
    }

    /// Peak bytes a run on an `h x w` input holds at once: the live feature maps (each
    /// dropped after its last reader, views and splits sharing storage), plus each layer's
    /// output and temporaries (the engine's workspace, a contiguous copy of a view, the
    /// second buffer of a shuffled deconvolution, activations that are not in place) and
    /// the pooled map's f32 copy. This walks the same graph as the executor, with shapes
    /// instead of tensors; allocator overhead and the weights are not included.
    pub fn peak_bytes(&self, h: usize, w: usize) -> Result<usize, Error> {
        let shapes = self.shapes(h, w)?;
        let elem = self.dtype.size_in_bytes();
        let bytes = |s: Option<Shape>| match s {
            Some(Shape::Image { c, h, w }) => c * h * w * elem,
            Some(Shape::Vector(n)) => n * 4,
            None => 0,
        };
        // storage[b]: the allocation blob b lives in (splits and crops share their input's; a
        // crop view keeps its parent's whole allocation alive).
        let mut storage: Vec<usize> = (0..self.blobs.len()).collect();
        let mut live_blobs: HashSet<usize> = HashSet::from([self.input]);
        let storage_bytes: Vec<usize> = shapes.iter().map(|s| bytes(*s)).collect();
        let live = |live_blobs: &HashSet<usize>, storage: &[usize], storage_bytes: &[usize]| -> usize {
            let ids: HashSet<usize> = live_blobs.iter().map(|&b| storage[b]).collect();
            ids.iter().map(|&s| storage_bytes[s]).sum()
        };
        let mut peak = 0;
        for node in &self.nodes {
            let before = live(&live_blobs, &storage, &storage_bytes);
            let out = node.tops.first().map_or(0, |&t| bytes(shapes[t]));
            let extra = match &node.kind {
                NodeKind::Input => 0,
                NodeKind::Conv(c) | NodeKind::Deconv(c) => {
                    let x = match shapes[node.bottoms[0]] {
                        Some(Shape::Image { c, h, w }) => [1, c, h, w],
                        _ => [1, 0, 0, 0],
                    };
                    let problem = self.problem(c, &x, matches!(node.kind, NodeKind::Deconv(_)))?;
                    let workspace = self.device.cpu_conv().plan(&problem).map(|p| p.workspace_bytes).unwrap_or(0);
                    // A view (crop) is copied to a contiguous input first.
                    let copy =
                        if storage[node.bottoms[0]] != node.bottoms[0] { bytes(shapes[node.bottoms[0]]) } else { 0 };
                    // Leaky ReLU runs in place on the CPU; the others allocate.
                    let act = match c.activation {
                        Activation::None => 0,
                        Activation::LeakyRelu { .. } if self.device.is_cpu() => 0,
                        Activation::LeakyRelu { .. } => 2 * out,
                        _ => 3 * out,
                    };
                    // The 1x1 form of a deconvolution shuffles into a second buffer.
                    let shuffle = if c.as_1x1.is_some() { out } else { 0 };
                    workspace + copy + act + shuffle
                }
                NodeKind::PixelShuffle(_) => 0,
                NodeKind::Pool(_) => match shapes[node.bottoms[0]] {
                    Some(Shape::Image { c, h, w }) => c * h * w * 4,
                    _ => 0,
                },
                _ => 0,
            };
            let new = match node.kind {
                NodeKind::Split | NodeKind::Crop(_) => 0,
                // The sum overwrites an operand on the CPU.
                NodeKind::Add if node.inplace.is_some() && self.device.is_cpu() => 0,
                _ => out,
            };
            peak = peak.max(before + new + extra);
            for &t in &node.tops {
                if matches!(node.kind, NodeKind::Split | NodeKind::Crop(_)) {
                    storage[t] = storage[node.bottoms[0]];
                }
                live_blobs.insert(t);
            }
            for b in &node.frees {
                live_blobs.remove(b);
            }
        }
        // The output read back as f32.
        peak = peak.max(live(&live_blobs, &storage, &storage_bytes) + bytes(shapes[self.output]) / elem * 4);
        Ok(peak)
    }

    fn problem(&self, c: &ConvNode, x: &[usize; 4], transposed: bool) -> Result<ConvProblem, Error> {
        let w = c.weight.dims();
        let p = if transposed {
            ConvProblem::conv_transpose2d(x, w, self.dtype, self.dtype, &c.params)
        } else {
            ConvProblem::conv2d(x, w, self.dtype, self.dtype, &c.params)
        };
        p.map_err(|e| err(e.to_string()))
    }
}

fn conv_flops(c: &ConvNode, x: &[usize], transposed: bool, dtype: DType) -> u64 {
    let w = c.weight.dims();
    let p = if transposed {
        ConvProblem::conv_transpose2d(x, w, dtype, dtype, &c.params)
    } else {
        ConvProblem::conv2d(x, w, dtype, dtype, &c.params)
    };
    p.map(|p| p.geometry.flops()).unwrap_or(0)
}

fn dims4(t: &Tensor) -> Result<[usize; 4], Error> {
    <[usize; 4]>::try_from(t.dims()).map_err(|_| err(format!("expected a 4-D tensor, got {:?}", t.dims())))
}

fn check_same(a: &Tensor, b: &Tensor) -> Result<(), Error> {
    if a.dims() == b.dims() {
        Ok(())
    } else {
        Err(err(format!("operands of shapes {:?} and {:?}", a.dims(), b.dims())))
    }
}

/// The fused activation of a conv/deconv. Leaky ReLU with a slope in [0, 1] is
/// `max(x, slope·x)`: two passes instead of the four of `Tensor::leaky_relu`, and the
/// same values (`x` for x ≥ 0, the f32 product `slope·x` below).
fn activate(y: Tensor, act: Activation) -> Result<Tensor, Error> {
    Ok(match act {
        Activation::None => y,
        Activation::LeakyRelu { slope } if (0.0..=1.0).contains(&slope) => y.maximum(&y.affine(slope as f64, 0.0)?)?,
        Activation::LeakyRelu { slope } => y.leaky_relu(slope as f64)?,
        Activation::Relu => y.relu()?,
        Activation::Sigmoid => y.sigmoid()?,
    })
}

fn activate_scalar(v: f32, act: Activation) -> f32 {
    match act {
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

/// The 1x1-convolution form of a deconvolution with kernel = stride, no padding, no
/// dilation (see `ConvNode::as_1x1`); `None` for any other deconvolution.
fn deconv_as_1x1(d: &crate::ncnn::Deconvolution, dtype: DType, device: &Device) -> Result<Option<Shuffled1x1>, Error> {
    let k = d.kernel_h;
    let unpadded = d.pad == Pad { left: 0, right: 0, top: 0, bottom: 0 };
    if !(d.kernel_w == k && d.stride_h == k && d.stride_w == k && d.dilation_h == 1 && d.dilation_w == 1 && unpadded) {
        return Ok(None);
    }
    let (cin, cout, kk) = (d.num_input, d.num_output, k * k);
    // d.weight is [in][out][ky][kx]; row (o, ky, kx) of the 1x1 weight holds that tap for
    // every input channel.
    let mut w = vec![0.0f32; cout * kk * cin];
    for c in 0..cin {
        for o in 0..cout {
            for t in 0..kk {
                w[(o * kk + t) * cin + c] = d.weight[(c * cout + o) * kk + t];
            }
        }
    }
    let b: Option<Vec<f32>> = d.bias.as_ref().map(|b| b.iter().flat_map(|&v| std::iter::repeat_n(v, kk)).collect());
    let tensor = |v: Vec<f32>, shape: &[usize]| -> Result<Tensor, Error> {
        Ok(Tensor::from_vec(v, shape, device)?.to_dtype(dtype)?)
    };
    Ok(Some(Shuffled1x1 {
        weight: tensor(w, &[cout * kk, cin, 1, 1])?,
        bias: b.map(|b| tensor(b, &[cout * kk])).transpose()?,
        k,
    }))
}
