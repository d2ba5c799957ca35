//! ncnn layers lowered to the interpreter's nodes: weights become tensors in the inference
//! dtype, each blob gets its size relative to the net input and its last reader, and each
//! skip-connection add learns whether it may overwrite an operand.

use conv_engine::ConvKind;
use conv_engine::{ConvError, ConvProblem};
use rocm_vision::{Conv2dParams, DType, Device, Padding2d, Tensor};

use super::analysis::{PoolInfo, Ratio, lcm};
use super::err;
use crate::Error;
use crate::ncnn::{Activation, BinaryOp, BlobShape, Crop, Deconvolution, InnerProduct, LayerKind, NcnnModel, Pad};

/// A convolution or deconvolution layer, ready for the engine.
pub(super) struct ConvNode {
    pub kind: ConvKind,
    /// OIHW for a convolution, IOHW for a deconvolution (the engine's layouts).
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub params: Conv2dParams,
    pub activation: Activation,
    pub in_c: usize,
    pub out_c: usize,
    pub kernel: [usize; 2],
    /// On ROCm, for a deconvolution whose kernel equals its stride (no overlap, no
    /// padding): the same layer as a 1x1 convolution to `out_c·k·k` channels followed by a
    /// pixel shuffle (weights `[out_c·k·k, in_c, 1, 1]`, bias repeated `k·k` times). Every
    /// output pixel is one product sum over the input channels either way, but as a plain
    /// GEMM with `k·k` times more rows it runs several times faster on the GPU than as a
    /// transposed convolution split into `k·k` one-tap phases, and the shuffle is fused
    /// into the skip add that follows. The CPU engine runs such a deconvolution itself as
    /// that GEMM with the shuffle in its write-out (`Gemm1x1`), which saves the
    /// `out_c·k·k`-channel map and the shuffle's pass over it: `None` there.
    pub as_1x1: Option<Shuffled1x1>,
}

/// See `ConvNode::as_1x1`.
pub(super) struct Shuffled1x1 {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
    pub k: usize,
}

impl ConvNode {
    pub fn is_transposed(&self) -> bool {
        self.kind == ConvKind::Transposed
    }

    /// The engine's problem for an input of dims `x`, as `Tensor::conv2d` /
    /// `Tensor::conv_transpose2d` build it: the one place the layer's output size, FLOPs
    /// and workspace come from.
    pub fn problem(&self, x: &[usize], dtype: DType) -> Result<ConvProblem, ConvError> {
        let w = self.weight.dims();
        match self.kind {
            ConvKind::Forward => ConvProblem::conv2d(x, w, dtype, dtype, &self.params),
            ConvKind::Transposed => ConvProblem::conv_transpose2d(x, w, dtype, dtype, &self.params),
        }
    }

    /// The problem the executor runs on an input of dims `x`: [`Self::problem`], or for a
    /// deconvolution in its 1x1 form (`as_1x1`) that 1x1 convolution (its workspace is
    /// the one the run takes).
    pub fn run_problem(&self, x: &[usize], dtype: DType) -> Result<ConvProblem, ConvError> {
        match (&self.as_1x1, self.kind) {
            (Some(s), ConvKind::Transposed) => {
                ConvProblem::conv2d(x, s.weight.dims(), dtype, dtype, &Conv2dParams::default())
            }
            _ => self.problem(x, dtype),
        }
    }

    /// FLOPs on an input of dims `x`, counted as the conv engine counts them (0 for an
    /// input the layer cannot take).
    pub fn flops(&self, x: &[usize], dtype: DType) -> u64 {
        self.problem(x, dtype).map(|p| p.geometry().flops()).unwrap_or(0)
    }
}

pub(super) enum NodeKind {
    Input,
    /// Boxed: its weight tensors make it many times larger than the other kinds.
    Conv(Box<ConvNode>),
    Split,
    /// Index into [`Graph::pools`].
    Pool(usize),
    InnerProduct(InnerProduct),
    Add,
    Mul,
    Crop(Crop),
    PixelShuffle(usize),
}

pub(super) struct Node {
    pub name: String,
    pub kind: NodeKind,
    pub bottoms: Vec<usize>,
    pub tops: Vec<usize>,
    /// Blobs whose last reader is this node: dropped once it has run.
    pub frees: Vec<usize>,
    /// For an `Add`: an operand (0 or 1) that may be overwritten with the sum, because
    /// this node is its only reader and it owns its allocation (made by a conv, deconv,
    /// add, multiply or pixel shuffle; not a split's or a crop's, which share theirs).
    pub inplace: Option<usize>,
    /// For an in-place `Add` whose operand is the output of a deconvolution in its 1x1
    /// form (`ConvNode::as_1x1`): that shuffle's factor. The deconvolution leaves its output
    /// unshuffled and the add shuffles as it adds (`Tensor::pixel_shuffle_add`): one pass
    /// over memory instead of a shuffled copy and an add.
    pub shuffle_operand: Option<usize>,
    /// For such a deconvolution: its output goes unshuffled to that add.
    pub defer_shuffle: bool,
}

pub(super) struct BlobMeta {
    pub name: String,
    /// `None` for vectors.
    pub ratio: Option<Ratio>,
}

/// The lowered graph: nodes in execution order and what is known about the blobs.
pub(super) struct Graph {
    pub nodes: Vec<Node>,
    pub blobs: Vec<BlobMeta>,
    pub input: usize,
    pub output: usize,
    pub pools: Vec<PoolInfo>,
    /// Output size / input size.
    pub scale: usize,
    /// Least common multiple of the downsampling factors (see `Network::align`).
    pub align: usize,
}

impl Graph {
    /// Lowers `model` for inference in `dtype` on `device`; anything the interpreter cannot
    /// run (several inputs or outputs, anisotropic strides, a non-zero border value) is an
    /// error.
    pub fn lower(model: &NcnnModel, dtype: DType, device: &Device) -> Result<Graph, Error> {
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
            let square_stride = |h: usize, w: usize| {
                if h == w { Ok(()) } else { Err(at(format!("stride {h}x{w} differs per axis"))) }
            };
            let (kind, ratio) = match &layer.kind {
                LayerKind::Input(_) => (NodeKind::Input, Some(Ratio::ONE)),
                LayerKind::Convolution(c) => {
                    let r = image_ratio(0)?;
                    square_stride(c.stride_h, c.stride_w)?;
                    let padded = c.pad.left + c.pad.right + c.pad.top + c.pad.bottom > 0;
                    if padded && c.pad_value != 0.0 {
                        return Err(at(format!("border value {} (only zero padding is supported)", c.pad_value)));
                    }
                    let node = ConvNode {
                        kind: ConvKind::Forward,
                        weight: tensor(&c.weight, &[c.num_output, c.num_input, c.kernel_h, c.kernel_w])?,
                        bias: c.bias.as_deref().map(|b| tensor(b, &[c.num_output])).transpose()?,
                        params: conv_params([c.stride_h, c.stride_w], c.pad, [c.dilation_h, c.dilation_w]),
                        activation: c.activation,
                        in_c: c.num_input,
                        out_c: c.num_output,
                        kernel: [c.kernel_h, c.kernel_w],
                        as_1x1: None,
                    };
                    (NodeKind::Conv(Box::new(node)), Some(r.over(c.stride_h)))
                }
                LayerKind::Deconvolution(d) => {
                    let r = image_ratio(0)?;
                    square_stride(d.stride_h, d.stride_w)?;
                    let node = ConvNode {
                        kind: ConvKind::Transposed,
                        weight: tensor(&d.weight, &[d.num_input, d.num_output, d.kernel_h, d.kernel_w])?,
                        bias: d.bias.as_deref().map(|b| tensor(b, &[d.num_output])).transpose()?,
                        params: conv_params([d.stride_h, d.stride_w], d.pad, [d.dilation_h, d.dilation_w]),
                        activation: d.activation,
                        in_c: d.num_input,
                        out_c: d.num_output,
                        kernel: [d.kernel_h, d.kernel_w],
                        as_1x1: deconv_as_1x1(d, dtype, device)?,
                    };
                    (NodeKind::Conv(Box::new(node)), Some(r.times(d.stride_h)))
                }
                LayerKind::Split => (NodeKind::Split, in_ratio(0)?),
                LayerKind::Pooling(_) => {
                    let r = image_ratio(0)?;
                    let channels = match model.blobs[layer.bottoms[0]].shape {
                        BlobShape::Image { channels: Some(c) } => c,
                        _ => return Err(at("the pooled blob's channel count is not known".into())),
                    };
                    pools.push(PoolInfo { layer: layer.name.clone(), channels, ratio: r, blob: layer.bottoms[0] });
                    (NodeKind::Pool(pools.len() - 1), None)
                }
                LayerKind::InnerProduct(ip) => {
                    if in_ratio(0)?.is_some() {
                        return Err(at("takes an image; only vectors (after pooling) are supported".into()));
                    }
                    (NodeKind::InnerProduct(ip.clone()), None)
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
                shuffle_operand: None,
                defer_shuffle: false,
            });
        }

        for (b, blob) in model.blobs.iter().enumerate() {
            if let Some(&last) = blob.consumers.iter().max() {
                nodes[last].frees.push(b);
            }
        }
        mark_inplace_adds(model, &mut nodes, device.is_rocm());

        let out_ratio = blobs[output].ratio.ok_or_else(|| err("the output blob is a vector, not an image"))?;
        if out_ratio.den != 1 || out_ratio.num == 0 {
            return Err(err(format!(
                "the output is {}/{} the input size; a super-resolution net needs a whole factor",
                out_ratio.num, out_ratio.den
            )));
        }
        let align = blobs.iter().filter_map(|b| b.ratio).fold(1, |a, r| lcm(a, r.den));
        Ok(Graph { nodes, blobs, input, output, pools, scale: out_ratio.num, align })
    }
}

/// Sets `Node::inplace` on each `Add` that has an operand it may overwrite, and on ROCm
/// (`fuse_shuffles`) `Node::shuffle_operand` / `Node::defer_shuffle`. The CPU keeps the
/// shuffle (one fast pass) and the add in place, which allocates less.
fn mark_inplace_adds(model: &NcnnModel, nodes: &mut [Node], fuse_shuffles: bool) {
    for i in 0..nodes.len() {
        if !matches!(nodes[i].kind, NodeKind::Add) {
            continue;
        }
        let owned = |b: usize| {
            let blob = &model.blobs[b];
            blob.consumers == [i]
                && matches!(
                    nodes[blob.producer].kind,
                    NodeKind::Conv(_) | NodeKind::Add | NodeKind::Mul | NodeKind::PixelShuffle(_)
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
        if let Some(k) = nodes[i].inplace.filter(|_| fuse_shuffles) {
            let producer = model.blobs[nodes[i].bottoms[k]].producer;
            if let NodeKind::Conv(c) = &nodes[producer].kind
                && c.is_transposed()
                && let Some(s) = &c.as_1x1
            {
                nodes[i].shuffle_operand = Some(s.k);
                nodes[producer].defer_shuffle = true;
            }
        }
    }
}

fn conv_params(stride: [usize; 2], pad: Pad, dilation: [usize; 2]) -> Conv2dParams {
    Conv2dParams {
        stride,
        padding: Padding2d { begin: [pad.top, pad.left], end: [pad.bottom, pad.right] },
        dilation,
        ..Conv2dParams::default()
    }
}

/// The 1x1-convolution form of a deconvolution with kernel = stride, no padding, no
/// dilation on ROCm (see `ConvNode::as_1x1`); `None` for any other deconvolution, and on
/// the CPU.
fn deconv_as_1x1(d: &Deconvolution, dtype: DType, device: &Device) -> Result<Option<Shuffled1x1>, Error> {
    if !device.is_rocm() {
        return Ok(None);
    }
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
