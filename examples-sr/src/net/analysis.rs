//! What a network does to an input of a given size, worked out without running it: each
//! blob's shape and its size relative to the input, the convolutions' FLOPs and the peak
//! memory of a run.

use std::collections::HashSet;

use super::graph::{ConvNode, Node, NodeKind};
use super::shed::Replay;
use super::{Network, err};
use crate::Error;
use crate::ncnn::Activation;

/// A blob's spatial size relative to the net input: `num / den` (reduced).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ratio {
    pub num: usize,
    pub den: usize,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

pub(super) fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}

impl Ratio {
    pub const ONE: Ratio = Ratio { num: 1, den: 1 };

    fn new(num: usize, den: usize) -> Ratio {
        let g = gcd(num, den).max(1);
        Ratio { num: num / g, den: den / g }
    }

    pub(super) fn times(self, k: usize) -> Ratio {
        Ratio::new(self.num * k, self.den)
    }

    pub(super) fn over(self, k: usize) -> Ratio {
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

impl Network {
    /// Every blob's shape for a `[1, C, h, w]` input, or why that input does not fit the
    /// graph (a crop larger than its blob, operands of different sizes, ...).
    pub fn shapes(&self, h: usize, w: usize) -> Result<Vec<Option<Shape>>, Error> {
        let c = self.input_channels().unwrap_or(3);
        let mut shapes: Vec<Option<Shape>> = vec![None; self.graph.blobs.len()];
        shapes[self.graph.input] = Some(Shape::Image { c, h, w });
        for node in &self.graph.nodes {
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
                    // With the channels checked, the engine rejects only an input too small for
                    // the (dilated, padded) kernel, or a zero-sized one.
                    match cv.problem(&[1, c, h, w], self.dtype) {
                        Ok(p) => {
                            let [h, w] = p.geometry().out_hw();
                            Shape::Image { c: cv.out_c, h, w }
                        }
                        Err(_) if cv.is_transposed() => return Err(at("the output would be empty".into())),
                        Err(_) => return Err(at(format!("a {w}x{h} input is smaller than the kernel"))),
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
                    Shape::Vector(n) if n == ip.num_input => Shape::Vector(ip.num_output),
                    other => return Err(at(format!("input {other:?}, expected a vector of {}", ip.num_input))),
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
        match self.blob_shape(self.graph.output, h, w)? {
            Shape::Image { c, h, w } => Ok((c, h, w)),
            Shape::Vector(_) => Err(err("the output is a vector")),
        }
    }

    /// FLOPs (2 per multiply-add) of the convolutions and deconvolutions for an `h x w`
    /// input, counted as the conv engine counts them.
    pub fn flops(&self, h: usize, w: usize) -> Result<u64, Error> {
        let shapes = self.shapes(h, w)?;
        let mut total = 0;
        for node in &self.graph.nodes {
            if let NodeKind::Conv(c) = &node.kind
                && let Some(Shape::Image { c: ic, h, w }) = shapes[node.bottoms[0]]
            {
                total += c.flops(&[1, ic, h, w], self.dtype);
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
    /// A run that is shed at its SE stops ([`Self::shed`]) peaks where it rebuilds a map;
    /// the larger of the two peaks.
    pub fn peak_bytes(&self, h: usize, w: usize) -> Result<usize, Error> {
        let peak = self.walk(h, w, None)?.peak_bytes;
        if self.replays.iter().all(|r| r.is_empty()) {
            return Ok(peak);
        }
        Ok(peak.max(self.walk(h, w, Some(&self.replays))?.peak_bytes))
    }

    /// The walk of [`Self::peak_bytes`] layer by layer: each layer's name and the bytes
    /// held while it runs (to hold against `Profile::peak_live_by_layer`).
    pub fn peak_bytes_by_layer(&self, h: usize, w: usize) -> Result<Vec<(String, usize)>, Error> {
        Ok(self.walk(h, w, None)?.by_node)
    }

    /// Each convolution layer on an `h x w` input with the plan the walk prices
    /// (`Device::conv_plan_with_live`, the output live) and the plan the device makes for
    /// the problem as the run asks (`Device::conv_plan`), one line each.
    pub fn conv_plans(&self, h: usize, w: usize) -> Result<Vec<(String, String)>, Error> {
        let shapes = self.shapes(h, w)?;
        let mut out = Vec::new();
        for node in &self.graph.nodes {
            if let NodeKind::Conv(c) = &node.kind
                && let Some(Shape::Image { c: ic, h, w }) = shapes[node.bottoms[0]]
            {
                let problem = c.run_problem(&[1, ic, h, w], self.dtype).map_err(|e| err(e.to_string()))?;
                let live = self.device.allocation_bytes(problem.output_bytes());
                let walk = self.device.conv_plan_with_live(&problem, live)?;
                let run = self.device.conv_plan(&problem)?;
                out.push((
                    node.name.clone(),
                    format!(
                        "walk: {:?} {} chunk(s) {} B; run: {:?} {} chunk(s) {} B",
                        walk.algorithm,
                        walk.chunks,
                        walk.workspace_bytes,
                        run.algorithm,
                        run.chunks,
                        run.workspace_bytes
                    ),
                ));
            }
        }
        Ok(out)
    }

    /// Where a run on an `h x w` input stops for each SE pooling layer: the convolution
    /// FLOPs done before it and the bytes its state holds there (what a tiled run keeps
    /// per tile between passes, or recomputes), whole and shed at every stop. In pooling
    /// order.
    pub fn pool_points(&self, h: usize, w: usize) -> Result<Vec<PoolPoint>, Error> {
        let mut points = self.walk(h, w, None)?.pools;
        let shed = self.walk(h, w, Some(&self.replays))?.pools;
        for (p, s) in points.iter_mut().zip(shed) {
            p.shed_bytes = s.state_bytes;
        }
        Ok(points)
    }

    /// FLOPs a run on an `h x w` input spends rebuilding maps when it is shed at every SE
    /// stop (each shed map is rebuilt once, before its next reader).
    pub fn replay_flops(&self, h: usize, w: usize) -> Result<u64, Error> {
        Ok(self.walk(h, w, Some(&self.replays))?.replay_flops)
    }

    /// The peak memory walk of [`Self::peak_bytes`], noting the pooling layers on the way;
    /// with `replays`, the run is shed at each pooling layer and rebuilds before the readers.
    pub(super) fn walk(&self, h: usize, w: usize, replays: Option<&[Vec<Replay>]>) -> Result<Walk, Error> {
        let shapes = self.shapes(h, w)?;
        let elem = self.dtype.size_in_bytes();
        let bytes = |s: Option<Shape>| match s {
            Some(Shape::Image { c, h, w }) => c * h * w * elem,
            Some(Shape::Vector(n)) => n * 4,
            None => 0,
        };
        // storage[b]: the allocation blob b lives in (splits and crops share their input's; a
        // crop view keeps its parent's whole allocation alive).
        let aliases = self.graph.aliases();
        let storage = &aliases.storage;
        // view[b]: blob b is a crop's strided view (through splits too), which a convolution
        // copies to a contiguous input first.
        let view = &aliases.view;
        let mut live_blobs: HashSet<usize> = HashSet::from([self.graph.input]);
        // What each blob's allocation takes on this device (the ROCm allocator rounds).
        let storage_bytes: Vec<usize> = shapes.iter().map(|s| self.device.allocation_bytes(bytes(*s))).collect();
        let live = |live_blobs: &HashSet<usize>, storage: &[usize], storage_bytes: &[usize]| -> usize {
            let ids: HashSet<usize> = live_blobs.iter().map(|&b| storage[b]).collect();
            ids.iter().map(|&s| storage_bytes[s]).sum()
        };
        let mut peak = 0;
        let mut by_node = Vec::with_capacity(self.graph.nodes.len());
        let (mut flops, mut pools, mut replay_flops) = (0u64, Vec::new(), 0u64);
        // A conv node's FLOPs and what it holds besides the maps and its output.
        let conv_cost = |node: &Node, c: &ConvNode, out: usize| -> Result<(u64, usize), Error> {
            let x = match shapes[node.bottoms[0]] {
                Some(Shape::Image { c, h, w }) => [1, c, h, w],
                _ => [1, 0, 0, 0],
            };
            // The device's own plan of the problem the executor runs (a deconvolution in its
            // 1x1 form runs that 1x1 convolution): on ROCm the NHWC implicit GEMM packs a
            // copy of the input band, which the CPU's executor does not.
            let problem = c.run_problem(&x, self.dtype).map_err(|e| err(e.to_string()))?;
            let workspace = self.device.conv_workspace_bytes(&problem).unwrap_or(0);
            // A view (crop) is copied to a contiguous input first; a split's output is its
            // input itself (measured on the H200: counting a copy there made the estimate
            // 1.10x the allocator's peak at the stride-2 convolutions).
            let copy =
                if view[node.bottoms[0]] { self.device.allocation_bytes(bytes(shapes[node.bottoms[0]])) } else { 0 };
            // ReLU and leaky ReLU are the conv's epilogue; a sigmoid is a second tensor.
            let act = if c.activation == Activation::Sigmoid { out } else { 0 };
            // The 1x1 form of a deconvolution shuffles into a second buffer. (Unless the add
            // after it shuffles as it adds: see Node::defer_shuffle.)
            let shuffle = if c.as_1x1.is_some() && !node.defer_shuffle { out } else { 0 };
            Ok((c.flops(&x, self.dtype), workspace + copy + act + shuffle))
        };
        let mut shed: Vec<&Replay> = Vec::new();
        for node in &self.graph.nodes {
            if let (NodeKind::Pool(p), Some(replays)) = (&node.kind, replays) {
                for r in &replays[*p] {
                    if live_blobs.remove(&r.blob) {
                        shed.push(r);
                    }
                }
            }
            // Rebuild what this node reads: the chain's maps one after another beside the
            // live ones.
            while let Some(k) = shed.iter().position(|r| node.bottoms.contains(&r.blob)) {
                let r = shed.swap_remove(k);
                let held = live(&live_blobs, storage, &storage_bytes);
                let mut previous = 0;
                for &n in &r.nodes {
                    let step = &self.graph.nodes[n];
                    if let NodeKind::Conv(c) = &step.kind {
                        let out = self.device.allocation_bytes(bytes(shapes[step.tops[0]]));
                        let (f, extra) = conv_cost(step, c, out)?;
                        replay_flops += f;
                        peak = peak.max(held + previous + out + extra);
                        previous = out;
                    }
                }
                live_blobs.insert(r.blob);
            }
            let before = live(&live_blobs, storage, &storage_bytes);
            if let NodeKind::Pool(_) = node.kind {
                pools.push(PoolPoint { flops_before: flops, state_bytes: before, shed_bytes: before });
            }
            let out = node.tops.first().map_or(0, |&t| self.device.allocation_bytes(bytes(shapes[t])));
            let extra = match &node.kind {
                NodeKind::Input => 0,
                NodeKind::Conv(c) => {
                    let (f, extra) = conv_cost(node, c, out)?;
                    flops += f;
                    extra
                }
                NodeKind::PixelShuffle(_) => 0,
                // The exact channel sums: read in place on the CPU, 2 KiB of buckets per
                // channel on the GPU.
                NodeKind::Pool(_) => match shapes[node.bottoms[0]] {
                    Some(Shape::Image { c, .. }) if !self.device.is_cpu() => self.device.allocation_bytes(c * 2048),
                    _ => 0,
                },
                _ => 0,
            };
            let new = match node.kind {
                NodeKind::Split | NodeKind::Crop(_) => 0,
                // The sum overwrites its fresh operand (Tensor::add_assign, both devices).
                // An add that shuffles its operand as it adds writes a new tensor.
                NodeKind::Add if node.inplace.is_some() && node.shuffle_operand.is_none() => 0,
                _ => out,
            };
            peak = peak.max(before + new + extra);
            by_node.push((node.name.clone(), before + new + extra));
            for &t in &node.tops {
                live_blobs.insert(t);
            }
            for b in &node.frees {
                live_blobs.remove(b);
            }
        }
        // The output read back as f32.
        peak = peak.max(live(&live_blobs, storage, &storage_bytes) + bytes(shapes[self.graph.output]) / elem * 4);
        Ok(Walk { peak_bytes: peak, pools, by_node, replay_flops })
    }
}

/// A run's stop at one pooling layer (see [`Network::pool_points`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolPoint {
    /// Convolution FLOPs before the stop.
    pub flops_before: u64,
    /// Live bytes at the stop, the pooled map included.
    pub state_bytes: usize,
    /// The same when the run was shed at this stop and the ones before ([`Network::shed`]).
    pub shed_bytes: usize,
}

pub(super) struct Walk {
    peak_bytes: usize,
    pub pools: Vec<PoolPoint>,
    replay_flops: u64,
    /// Each layer's name and the bytes the walk holds while it runs.
    by_node: Vec<(String, usize)>,
}
