//! The interpreter: runs the lowered nodes in order on tensors, resumable at pooling
//! layers, with an optional per-operation time profile.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use rocm_vision::{Activation as EpilogueActivation, Conv2dParams, ConvEpilogue, Tensor};

use super::graph::{ConvNode, Node, NodeKind};
use super::{Network, err};
use crate::Error;
use crate::ncnn::{Activation, Crop};

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
pub(super) enum Value {
    Image(Tensor),
    Vector(Vec<f32>),
}

/// A run of the network on one input (a tile), resumable at pooling layers.
pub struct Run {
    pub(super) next: usize,
    pub(super) values: Vec<Option<Value>>,
    /// Maps dropped by [`Network::shed`], rebuilt before their next reader: (pooling layer,
    /// index into its replays).
    pub(super) shed: Vec<(usize, usize)>,
}

impl Run {
    /// Bytes of the feature maps this run keeps alive ([`Tensor::storage_footprint`]: on a
    /// GPU a crop view keeps its whole buffer, rounded to the allocator's size class;
    /// storage shared between blobs, as after a `Split`, counted once). Counting a crop at
    /// its own size, and buffers without their rounding, let the SE passes' kept states
    /// take a 1080p f16 run in tiles of 320 to 2.43 GB live under a 2 GiB budget (H200,
    /// 2026-12-04).
    pub fn live_bytes(&self) -> usize {
        let mut seen = HashSet::new();
        self.values
            .iter()
            .flatten()
            .map(|v| match v {
                Value::Image(t) => {
                    let (key, bytes) = t.storage_footprint();
                    if seen.insert(key) { bytes } else { 0 }
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
    /// On ROCm: each layer's name and the allocator's peak of live bytes while it ran (the
    /// allocator's peaks are reset after each layer), for checking the memory walk.
    pub peak_live_by_layer: Vec<(String, usize)>,
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

impl Network {
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

    pub(super) fn profiling(&self) -> bool {
        self.profile.lock().map(|p| p.is_some()).unwrap_or(false)
    }

    /// A run on `input` (`[1, C, H, W]`, the network's dtype).
    pub fn start(&self, input: Tensor) -> Result<Run, Error> {
        if input.rank() != 4 || input.dims()[0] != 1 {
            return Err(err(format!("the network input must be [1, C, H, W], got {:?}", input.dims())));
        }
        let input = if input.dtype() == self.dtype { input } else { input.to_dtype(self.dtype)? };
        let mut values = vec![None; self.graph.blobs.len()];
        values[self.graph.input] = Some(Value::Image(input));
        Ok(Run { next: 0, values, shed: Vec::new() })
    }

    /// Runs layers until the output is ready or a pooling layer `p` with `means[p] ==
    /// None` is reached (the run then stays before that layer; call again once the mean is
    /// known). `means[p]` holds the per-channel means of pooling layer `p`.
    pub fn advance(&self, run: &mut Run, means: &[Option<Vec<f32>>]) -> Result<Stop, Error> {
        let graph = &self.graph;
        while run.next < graph.nodes.len() {
            let node = &graph.nodes[run.next];
            if let NodeKind::Pool(p) = node.kind {
                let mean = means.get(p).and_then(|m| m.as_ref());
                match mean {
                    None => {
                        let blob = self.image(run, node, 0)?.clone();
                        return Ok(Stop::Pool { pool: p, blob });
                    }
                    Some(m) if m.len() != graph.pools[p].channels => {
                        return Err(err(format!(
                            "{} means given for pooling layer '{}' of {} channels",
                            m.len(),
                            node.name,
                            graph.pools[p].channels
                        )));
                    }
                    Some(_) => {}
                }
            }
            if !run.shed.is_empty() {
                self.rebuild(run, run.next)
                    .map_err(|e| err(format!("rebuilding the input of layer '{}': {e}", node.name)))?;
            }
            self.execute(run, node, means).map_err(|e| err(format!("layer '{}': {e}", node.name)))?;
            if let Some(dev) = self.device.rocm_device().filter(|_| self.profiling()) {
                let alloc = dev.allocator();
                let peak = alloc.stats().peak_live;
                alloc.reset_peaks();
                self.record(|p| p.peak_live_by_layer.push((node.name.clone(), peak)));
            }
            for &b in &node.frees {
                run.values[b] = None;
            }
            run.next += 1;
        }
        match run.values[graph.output].take() {
            Some(Value::Image(t)) => Ok(Stop::Done(t)),
            _ => Err(err(format!("the output blob '{}' was not produced", graph.blobs[graph.output].name))),
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
        let mut means: Means = vec![None; self.graph.pools.len()];
        loop {
            match self.advance(&mut run, &means)? {
                Stop::Done(t) => return Ok((t, means)),
                Stop::Pool { pool, blob } => {
                    let clock = Instant::now();
                    let sums = crate::upscale::channel_sums(&blob, None)?;
                    means[pool] = Some(crate::upscale::sums_to_means(&sums, &self.graph.pools[pool])?);
                    self.record(|p| p.se += clock.elapsed());
                }
            }
        }
    }

    fn image<'a>(&self, run: &'a Run, node: &Node, i: usize) -> Result<&'a Tensor, Error> {
        let name = &self.graph.blobs[node.bottoms[i]].name;
        match run.values[node.bottoms[i]].as_ref() {
            Some(Value::Image(t)) => Ok(t),
            Some(Value::Vector(_)) => Err(err(format!("input '{name}' is a vector"))),
            None => Err(err(format!("input '{name}' is not available"))),
        }
    }

    fn vector<'a>(&self, run: &'a Run, node: &Node, i: usize) -> Result<&'a [f32], Error> {
        match run.values[node.bottoms[i]].as_ref() {
            Some(Value::Vector(v)) => Ok(v),
            _ => Err(err(format!("input '{}' is not an available vector", self.graph.blobs[node.bottoms[i]].name))),
        }
    }

    fn execute(&self, run: &mut Run, node: &Node, means: &[Option<Vec<f32>>]) -> Result<(), Error> {
        let clock = self.profiling().then(Instant::now);
        let elapsed = || clock.map(|c| c.elapsed()).unwrap_or_default();
        let out = match &node.kind {
            NodeKind::Input => {
                return match run.values[self.graph.input] {
                    Some(Value::Image(_)) => Ok(()),
                    _ => Err(err("the run has no input image")),
                };
            }
            NodeKind::Conv(c) => Value::Image(self.conv(c, self.image(run, node, 0)?, node, clock)?),
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
                if x.len() != ip.num_input {
                    return Err(err(format!("input has {} values, the weights expect {}", x.len(), ip.num_input)));
                }
                let y = ip.forward(x);
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
                // In place into the fresh deconv output where it can be (both devices); an
                // unshuffled deconv output is shuffled as it is added.
                let sum = match node.shuffle_operand {
                    Some(r) => dst.pixel_shuffle_add(r, other)?,
                    None => {
                        check_same(&dst, other)?;
                        dst.add_assign(other)?
                    }
                };
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
                let y = self.crop(self.image(run, node, 0)?, crop)?;
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

    /// A crop: a view of `x`.
    pub(super) fn crop(&self, x: &Tensor, crop: &Crop) -> Result<Tensor, Error> {
        let [_, c, h, w] = dims4(x)?;
        let roi = crop.resolve_chw(c, h, w).map_err(|e| err(e.to_string()))?;
        Ok(x.narrow(1, roi.c_offset, roi.channels)?.narrow(2, roi.h_offset, roi.height)?.narrow(
            3,
            roi.w_offset,
            roi.width,
        )?)
    }

    /// A convolution or deconvolution node on `x` with its fused activation; `clock` (when
    /// profiling) started when the node did.
    pub(super) fn conv(&self, c: &ConvNode, x: &Tensor, node: &Node, clock: Option<Instant>) -> Result<Tensor, Error> {
        let elapsed = || clock.map(|c| c.elapsed()).unwrap_or_default();
        let transposed = c.is_transposed();
        let flops = if clock.is_some() { c.flops(x.dims(), self.dtype) } else { 0 };
        // The conv applies its activation as it writes its output (elementwise, so before
        // the shuffle of the 1x1 form too); a sigmoid, which the epilogue does not have,
        // runs after.
        let (fused, after) = match c.activation {
            Activation::None => (EpilogueActivation::Identity, None),
            Activation::Relu => (EpilogueActivation::Relu, None),
            Activation::LeakyRelu { slope } => (EpilogueActivation::LeakyRelu(slope), None),
            Activation::Sigmoid => (EpilogueActivation::Identity, Some(Activation::Sigmoid)),
        };
        let ep = ConvEpilogue::default().with_activation(fused);
        let y = match (&c.as_1x1, transposed) {
            (Some(s), true) => x.conv2d_fused(&s.weight, s.bias.as_ref(), &Conv2dParams::default(), &ep)?,
            (None, true) => x.conv_transpose2d_fused(&c.weight, c.bias.as_ref(), &c.params, &ep)?,
            (_, false) => x.conv2d_fused(&c.weight, c.bias.as_ref(), &c.params, &ep)?,
        };
        let t_conv = elapsed();
        let y = match after {
            Some(act) => activate(y, act)?,
            None => y,
        };
        let t_act = elapsed() - t_conv;
        let y = match (&c.as_1x1, transposed) {
            (Some(s), true) if !node.defer_shuffle => crate::ops::pixel_shuffle(&y, s.k)?,
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
                c.params.stride[0],
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
        Ok(y)
    }
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

/// An activation the conv epilogue does not have, as a separate pass (and the ncnn
/// activations of other layers). Leaky ReLU with a slope in [0, 1] is `max(x, slope·x)`:
/// two passes instead of the four of `Tensor::leaky_relu`, and the same values.
fn activate(y: Tensor, act: Activation) -> Result<Tensor, Error> {
    Ok(match act {
        Activation::None => y,
        Activation::LeakyRelu { slope } if (0.0..=1.0).contains(&slope) => y.maximum(&y.affine(slope as f64, 0.0)?)?,
        Activation::LeakyRelu { slope } => y.leaky_relu(slope as f64)?,
        Activation::Relu => y.relu()?,
        Activation::Sigmoid => y.sigmoid()?,
    })
}
