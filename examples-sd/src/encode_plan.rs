//! The exact memory plan of an encode, before running it: [`Encoder::plan`], the walk of
//! [`crate::plan`] over the encoder's blocks (every tensor the run allocates and frees,
//! and the workspace of the dispatcher's plan for each convolution with what is live).

use crate::config::VaeConfig;
use crate::decoder::ScratchCaps;
use crate::encoder::{Encoder, downsample_params};
use crate::error::{Result, SdError};
use crate::memory::MIN_SCRATCH;
use crate::plan::{StageMemory, Walk, Walked, attention, resnet};
use rocm_vision::{Budget, Conv2dParams, DType, Device, DeviceKind, format_bytes};
use std::fmt;

/// What an encode will use, from [`Encoder::plan`] (the fields as [`crate::DecodePlan`]'s).
#[derive(Clone, Debug, PartialEq)]
pub struct EncodePlan {
    pub width: usize,
    pub height: usize,
    pub dtype: DType,
    pub device: String,
    pub budget: Option<usize>,
    /// Bytes of the encoder's weights (quant_conv included) on the device.
    pub weights: usize,
    /// Peak bytes the encode adds on top of the weights and the f32 input image.
    pub encode_peak: usize,
    /// CPU only: the gemm crate's per-thread packing buffers ([`crate::DecodePlan::engine_scratch`]).
    pub engine_scratch: usize,
    /// `weights + engine_scratch + encode_peak`.
    pub peak: usize,
    pub peak_at: String,
    /// Whether the encode fits the budget (always with no budget).
    pub fits: bool,
    pub stages: Vec<StageMemory>,
    /// Scratch caps (the attention's) and conv workspace cap the run will use.
    pub caps: ScratchCaps,
    pub conv_workspace: Option<usize>,
}

impl fmt::Display for EncodePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = crate::plan::PlanHead {
            run: "encode",
            width: self.width,
            height: self.height,
            dtype: self.dtype,
            device: &self.device,
            peak: self.peak,
            weights: self.weights,
            run_peak: self.encode_peak,
            peak_at: &self.peak_at,
            engine_scratch: self.engine_scratch,
        };
        write!(f, "{head}")?;
        match (self.budget, self.fits) {
            (None, _) => write!(f, "no budget given"),
            (Some(b), true) => write!(f, "fits the budget of {}", format_bytes(b)),
            (Some(b), false) => write!(f, "does not fit the budget of {}: raise the budget", format_bytes(b)),
        }
    }
}

/// How an encode splits a budget, as [`crate::MemoryPlan::new`] does for a decode: weights +
/// activations (the walk without conv workspace) + [`MIN_SCRATCH`] must fit; of what is
/// left, half is the conv workspace cap and an eighth (at most 256 MiB) the attention's
/// score chunk. `Err(SdError::Budget)` when it does not fit.
pub fn encode_budget(
    config: &VaeConfig,
    dtype: DType,
    (width, height): (usize, usize),
    budget: usize,
) -> Result<(ScratchCaps, usize)> {
    let cpu = Device::cpu();
    let weights = encoder_weight_bytes(config, dtype, &cpu);
    let min_caps = ScratchCaps { attention_scores: 4 * width * height, upsample_band: 0 };
    let act = walk_encode(config, Walk::new(&cpu, dtype).without_workspace(), (height, width), min_caps, false)?.peak;
    let need = weights + act + MIN_SCRATCH;
    if need > budget {
        return Err(SdError::Budget(format!(
            "encoding a {width}x{height} image needs about {} (weights {} + activations {} + scratch {}) \
             but the budget is {}: raise --vram-budget",
            format_bytes(need),
            format_bytes(weights),
            format_bytes(act),
            format_bytes(MIN_SCRATCH),
            format_bytes(budget)
        )));
    }
    let scratch = budget - weights - act;
    let caps = ScratchCaps { attention_scores: (scratch / 8).min(256 << 20), upsample_band: 0 };
    Ok((caps, scratch / 2))
}

impl Encoder {
    /// The memory plan of encoding one `width × height` image (pixels; a multiple of the
    /// model's downscale) with `config` in `dtype` on `device`, within `budget` bytes
    /// (`None`: library defaults): the peak bytes the run will use and whether it fits.
    /// Nothing is allocated; the weights need not be loaded. The walk is the decoder's
    /// ([`crate::Decoder::plan`]), over the encoder's blocks.
    pub fn plan(
        config: &VaeConfig,
        device: &Device,
        (width, height): (usize, usize),
        dtype: DType,
        budget: Option<usize>,
    ) -> Result<EncodePlan> {
        config.validate()?;
        let down = config.upscale();
        if width == 0 || height == 0 || width % down != 0 || height % down != 0 {
            return Err(SdError::ImageShape(format!(
                "{width}x{height}: the image size must be a positive multiple of {down} (one latent pixel is {down}x{down})"
            )));
        }
        let split = budget.map(|b| encode_budget(config, dtype, (width, height), b));
        let (caps, conv_workspace, fits_estimate) = match split {
            None => (ScratchCaps::default(), None, true),
            Some(Ok((caps, ws))) => (caps, Some(ws), true),
            Some(Err(SdError::Budget(_))) => (ScratchCaps::default(), Some(MIN_SCRATCH), false),
            Some(Err(e)) => return Err(e),
        };
        let run_device = match (device.kind(), conv_workspace) {
            (DeviceKind::Cpu, Some(ws)) => Device::cpu_with_budget(Budget::bytes(ws)),
            _ => device.clone(),
        };
        let weights = encoder_weight_bytes(config, dtype, &run_device);
        let guard = dtype == DType::F16;
        let Walked { peak: encode_peak, peak_at, stages, retained: engine_scratch } =
            walk_encode(config, Walk::new(&run_device, dtype), (height, width), caps, guard)?;
        let peak = weights + engine_scratch + encode_peak;
        Ok(EncodePlan {
            width,
            height,
            dtype,
            device: device.to_string(),
            budget,
            weights,
            encode_peak,
            engine_scratch,
            peak,
            peak_at,
            fits: budget.is_none_or(|b| fits_estimate && peak <= b),
            stages,
            caps,
            conv_workspace,
        })
    }
}

/// The encoder's weights on `device`: each tensor as the allocator sizes it.
pub fn encoder_weight_bytes(config: &VaeConfig, dtype: DType, device: &Device) -> usize {
    config
        .encoder_tensor_shapes()
        .iter()
        .map(|(_, s)| device.allocation_bytes(s.iter().product::<usize>() * dtype.size_in_bytes()))
        .sum()
}

/// The peak of an encode's latent-sized part (the mid block and the output layers, which a
/// banded encode runs whole; its input, the last down block's output, included), without
/// the weights.
pub(crate) fn encoder_latent_part(
    config: &VaeConfig,
    device: &Device,
    dtype: DType,
    (h, w): (usize, usize),
) -> Result<usize> {
    let guard = dtype == DType::F16;
    let walked = walk_encode(config, Walk::new(device, dtype), (h, w), ScratchCaps::default(), guard)?;
    let start = walked
        .stages
        .iter()
        .position(|s| s.name == "encoder.mid_block.resnets.0")
        .ok_or_else(|| SdError::Internal("the encode walk has no mid block".into()))?;
    Ok(walked.stages[start..].iter().map(|s| s.peak).max().unwrap_or(0) + walked.retained)
}

/// The walk of one `Encoder::encode` of an `h × w` image (the f32 image given).
fn walk_encode(
    config: &VaeConfig,
    mut s: Walk,
    (h, w): (usize, usize),
    caps: ScratchCaps,
    guard: bool,
) -> Result<Walked> {
    let dtype = s.dtype();
    let conv3 = Conv2dParams::default().with_padding(1);
    let (c0, top, moments) = (config.block_out_channels[0], config.top_channels(), 2 * config.latent_channels);
    // The item in the encoder's dtype (the f32 image itself when that is f32); the f16
    // guard keeps it for a rerun until the item is done.
    s.enter("image");
    let input = if dtype == DType::F32 { 0 } else { s.alloc(s.map(config.in_channels, h, w)) };
    s.enter("encoder.conv_in");
    let mut x = s.conv((config.in_channels, h, w), c0, 3, conv3)?;
    if !guard {
        s.free(input);
    }
    let n = config.block_out_channels.len();
    let (mut h, mut w) = (h, w);
    for (i, (cin, cout)) in config.down_block_channels().into_iter().enumerate() {
        for j in 0..config.layers_per_block {
            let c = if j == 0 { cin } else { cout };
            x = resnet(&mut s, format!("encoder.down_blocks.{i}.resnets.{j}"), x, c, cout, h, w)?;
        }
        if i + 1 < n {
            s.enter(format!("encoder.down_blocks.{i}.downsamplers.0"));
            let y = s.conv((cout, h, w), cout, 3, downsample_params())?;
            s.free(x);
            x = y;
            h = h.div_ceil(2);
            w = w.div_ceil(2);
        }
    }
    x = resnet(&mut s, "encoder.mid_block.resnets.0".into(), x, top, top, h, w)?;
    if config.mid_block_add_attention {
        s.enter("encoder.mid_block.attentions.0");
        x = attention(&mut s, x, top, h * w, caps.attention_scores)?;
    }
    x = resnet(&mut s, "encoder.mid_block.resnets.1".into(), x, top, top, h, w)?;
    s.enter("encoder.conv_out");
    let normed = s.alloc(s.map(top, h, w));
    let y = s.conv((top, h, w), moments, 3, conv3)?;
    s.free(normed);
    s.free(x);
    x = y;
    if config.use_quant_conv {
        s.enter("quant_conv");
        let y = s.conv((moments, h, w), moments, 1, Conv2dParams::default())?;
        s.free(x);
        x = y;
    }
    s.check_output(moments, guard);
    if guard {
        s.free(input);
    }
    // `encode`: the moments in f32, their concatenation (a copy), the mean (a copy) and the
    // clamped log-variance (two ops).
    s.enter("encode (latent distribution)");
    let m32 = s.bytes(moments * h * w, DType::F32);
    if dtype != DType::F32 {
        s.alloc(m32);
        s.free(x);
    }
    s.alloc(m32);
    let half = s.bytes(moments / 2 * h * w, DType::F32);
    s.alloc(half);
    s.transient(half);
    s.alloc(half);
    Ok(s.finish())
}
