//! The `AutoencoderKL` decoder: post_quant_conv, conv_in, mid block (resnet, attention,
//! resnet), up blocks (resnets, nearest-2x upsampler + conv), GroupNorm + SiLU, conv_out.
//!
//! Memory discipline: every block takes its input by value and drops it as soon as it is
//! dead; a binding is reassigned (not shadowed) so the previous tensor is freed when the
//! next one exists; residual adds write into the fresh conv output; a channel-reducing
//! shortcut runs before conv1 so the wide input dies early; the upsampler's conv runs in
//! row bands; attention scores are computed in query chunks within a byte cap.

use crate::banded::{BandedRun, Banding};
use crate::blocks::{Block, Guard, Resnet, load_attention};
use crate::config::{NORM_EPS, VaeConfig};
use crate::error::{Result, SdError};
use crate::layout::KeyLayout;
use crate::precision::{PrecisionStats, SharedStats};
use rocm_vision::nn::{Conv2d, GroupNorm, SpatialAttention};
use rocm_vision::{Conv2dParams, ConvRounding, DType, Device, Tensor, Weights};

/// Byte caps of the decoder's own scratch buffers (the conv engine's workspace cap lives
/// in the [`Device`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScratchCaps {
    /// Attention: the f32 score matrix of one query chunk.
    pub attention_scores: usize,
    /// Upsampler: the upsampled input rows of one band (a band also needs a copy of them
    /// and its output, ~3x this). 16 MiB keeps bands of thousands of output pixels, enough
    /// for full-speed GEMMs, while staying far below the layer's tensors.
    pub upsample_band: usize,
}

impl Default for ScratchCaps {
    fn default() -> Self {
        ScratchCaps { attention_scores: SpatialAttention::DEFAULT_MAX_SCORE_BYTES, upsample_band: 16 << 20 }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct UpBlock {
    pub resnets: Vec<Resnet>,
    pub upsampler: Option<Conv2d>,
}

/// A loaded decoder, ready to decode latents of its configuration.
#[derive(Clone, Debug)]
pub struct Decoder {
    config: VaeConfig,
    layout: KeyLayout,
    dtype: DType,
    device: Device,
    caps: ScratchCaps,
    post_quant_conv: Option<Conv2d>,
    conv_in: Conv2d,
    mid_resnets: [Resnet; 2],
    attention: Option<SpatialAttention>,
    up_blocks: Vec<UpBlock>,
    norm_out: GroupNorm,
    conv_out: Conv2d,
    /// f16 only: check each block's output and recompute it in f32 when not finite.
    overflow_guard: bool,
    stats: SharedStats,
    /// Normalise the up blocks and the output layers with exact statistics (the device
    /// rounds size-independently: a banded decode gives the same bits).
    exact_norms: bool,
    /// Run the up blocks in bands ([`crate::banded`]); `None`: whole maps.
    banding: Option<Banding>,
}

impl Decoder {
    /// Loads the decoder from `weights` (diffusers or original key layout, detected),
    /// converting every tensor to `dtype`. The weights must match `config`: the latent
    /// and top channel counts are checked first, then every tensor's shape. The decoder
    /// holds its own copies: `weights` (a memory map) can be dropped afterwards.
    pub fn load(weights: &Weights, config: &VaeConfig, dtype: DType) -> Result<Decoder> {
        config.validate()?;
        let layout = KeyLayout::detect(weights, config.num_up_blocks())?;
        check_matches_config(weights, &layout, config)?;
        let w = weights.clone().with_dtype(dtype);
        let groups = config.norm_num_groups;
        let (lat, top) = (config.latent_channels, config.top_channels());
        let conv3 = Conv2dParams::default().with_padding(1);
        let post_quant_conv = if config.use_post_quant_conv {
            Some(Conv2d::load(&w.pp(layout.post_quant_conv()), lat, lat, 1, Conv2dParams::default())?)
        } else {
            None
        };
        let conv_in = Conv2d::load(&w.pp(layout.conv_in()), lat, top, 3, conv3)?;
        let mid_resnets = [
            Resnet::load(&w, &layout, &layout.mid_resnet(0), top, top, groups)?,
            Resnet::load(&w, &layout, &layout.mid_resnet(1), top, top, groups)?,
        ];
        let attention = if config.mid_block_add_attention {
            Some(load_attention(&w, &layout, &layout.attention(), top, groups)?)
        } else {
            None
        };
        let n = config.num_up_blocks();
        let mut up_blocks = Vec::with_capacity(n);
        for (i, (cin, cout)) in config.up_block_channels().into_iter().enumerate() {
            let resnets = (0..=config.layers_per_block)
                .map(|j| {
                    Resnet::load(&w, &layout, &layout.up_resnet(i, j), if j == 0 { cin } else { cout }, cout, groups)
                })
                .collect::<Result<Vec<_>>>()?;
            let upsampler = if i + 1 < n {
                Some(Conv2d::load(&w.pp(layout.upsampler_conv(i)), cout, cout, 3, conv3)?)
            } else {
                None
            };
            up_blocks.push(UpBlock { resnets, upsampler });
        }
        let c0 = config.block_out_channels[0];
        let norm_out = GroupNorm::load(&w.pp(layout.norm_out()), groups, c0, NORM_EPS)?;
        let conv_out = Conv2d::load(&w.pp(layout.conv_out()), c0, config.out_channels, 3, conv3)?;
        let device = conv_in.weight.device().clone();
        let exact_norms = device.conv_rounding() == ConvRounding::SizeIndependent;
        for r in up_blocks.iter_mut().flat_map(|b| b.resnets.iter_mut()) {
            r.exact_norms = exact_norms;
        }
        let mut d = Decoder {
            config: config.clone(),
            layout,
            dtype,
            device,
            caps: ScratchCaps::default(),
            post_quant_conv,
            conv_in,
            mid_resnets,
            attention,
            up_blocks,
            norm_out,
            conv_out,
            overflow_guard: true,
            stats: SharedStats::default(),
            exact_norms,
            banding: None,
        };
        d.set_scratch_caps(ScratchCaps::default());
        Ok(d)
    }

    pub fn set_scratch_caps(&mut self, caps: ScratchCaps) {
        self.caps = caps;
        if let Some(a) = &mut self.attention {
            a.max_score_bytes = caps.attention_scores.max(1);
        }
    }

    /// Runs the up blocks and the output layers in bands, with the whole maps where
    /// `banding` places them (from [`Decoder::plan`]'s banded plan); `None`: whole maps,
    /// the default. The result is the unbanded decode's (bit for bit under
    /// size-independent rounding; see [`crate::banded`]).
    pub fn set_banding(&mut self, banding: Option<Banding>) {
        self.banding = banding;
    }

    pub fn banding(&self) -> Option<&Banding> {
        self.banding.as_ref()
    }

    pub(crate) fn up_blocks(&self) -> &[UpBlock] {
        &self.up_blocks
    }

    pub(crate) fn norm_out(&self) -> &GroupNorm {
        &self.norm_out
    }

    pub(crate) fn conv_out(&self) -> &Conv2d {
        &self.conv_out
    }

    /// In an f16 decode (on by default), checks each block's output for values past f16's
    /// range and recomputes that block in f32 ([`crate::precision`]). Off: the plain f16
    /// decode, which turns black (NaN) where activations overflow. No effect in f32/bf16.
    pub fn set_overflow_guard(&mut self, on: bool) {
        self.overflow_guard = on;
    }

    /// Whether this decode checks its blocks for f16 overflow (f16 and the guard on).
    pub fn overflow_guard(&self) -> bool {
        self.overflow_guard && self.dtype == DType::F16
    }

    /// What the f16 overflow guard did since the last [`Decoder::decode`] started (or the
    /// last [`Decoder::reset_precision_stats`]): which blocks were recomputed in f32.
    pub fn precision_stats(&self) -> PrecisionStats {
        self.stats.get()
    }

    pub fn reset_precision_stats(&self) {
        self.stats.reset();
    }

    pub fn config(&self) -> &VaeConfig {
        &self.config
    }

    pub fn layout(&self) -> &KeyLayout {
        &self.layout
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Names of the stages [`Decoder::decode_z`] reports that mark progress: the mid
    /// block, each up block, and conv_out (the end).
    pub fn milestones(&self) -> Vec<String> {
        let mut m = vec!["decoder.mid_block".to_string()];
        m.extend((0..self.up_blocks.len()).map(|i| format!("decoder.up_blocks.{i}")));
        m.push("decoder.conv_out".into());
        m
    }

    /// Checks that `latents` is `[N, C, h, w]` or `[C, h, w]` with this model's `C`, and
    /// returns it as `[N, C, h, w]`.
    pub fn check_latents(&self, latents: &Tensor) -> Result<Tensor> {
        check_latent_shape(latents, self.config.latent_channels)
    }

    /// Latents as a diffusion model emits them → the decoder input `z` (computed in f32,
    /// then converted to the decoder's dtype): `latents / scaling + shift`, or with
    /// per-channel statistics `latents · std / scaling + mean`.
    pub fn unscale(&self, latents: &Tensor) -> Result<Tensor> {
        let x = self.check_latents(latents)?.to_dtype(DType::F32)?;
        let c = &self.config;
        let z = match (&c.latents_mean, &c.latents_std) {
            (Some(mean), Some(std)) => {
                let ch = |v: &[f64]| {
                    Tensor::from_vec(v.iter().map(|&x| x as f32).collect(), &[1, v.len(), 1, 1], latents.device())
                };
                x.mul(&ch(std)?)?.affine(1.0 / c.scaling_factor, 0.0)?.add(&ch(mean)?)?
            }
            _ => x.affine(1.0 / c.scaling_factor, c.shift_factor.unwrap_or(0.0))?,
        };
        Ok(z.to_dtype(self.dtype)?)
    }

    /// Decodes latents (as a diffusion model emits them; `[N, C, h, w]` or `[C, h, w]`)
    /// to images `[N, out_channels, 8h, 8w]` in f32, one batch item at a time (so the
    /// peak memory is one item's). Values are in about [-1, 1], unclamped.
    ///
    /// In f16, a block whose output overflows is recomputed in f32 (see
    /// [`Decoder::set_overflow_guard`]; [`Decoder::precision_stats`] says which).
    pub fn decode(&self, latents: &Tensor, observe: &mut dyn FnMut(&str, &Tensor)) -> Result<Tensor> {
        self.stats.reset();
        let z = self.unscale(latents)?;
        let n = z.dim(0)?;
        let mut images = Vec::with_capacity(n);
        for i in 0..n {
            images.push(self.decode_z(z.narrow(0, i, 1)?.contiguous()?, observe)?.to_dtype(DType::F32)?);
        }
        let refs: Vec<&Tensor> = images.iter().collect();
        Ok(Tensor::cat(&refs, 0)?)
    }

    /// Runs the network on `z` (already un-scaled, in the decoder's dtype). `observe` sees
    /// each stage's output under its diffusers module name (`post_quant_conv`,
    /// `decoder.conv_in`, `decoder.mid_block.resnets.0`, `decoder.mid_block.attentions.0`,
    /// `decoder.mid_block`, `decoder.up_blocks.{i}`, `decoder.conv_out`); after an f16
    /// overflow the decode reruns, and `observe` sees the stages again.
    pub fn decode_z(&self, z: Tensor, observe: &mut dyn FnMut(&str, &Tensor)) -> Result<Tensor> {
        if z.rank() != 4 || z.dims()[1] != self.config.latent_channels {
            return Err(SdError::Latents(format!(
                "decoder input must be [N, {}, h, w], got {:?}",
                self.config.latent_channels,
                z.dims()
            )));
        }
        // On the decoder's device: its convolutions round as that device says (a CPU move
        // only re-labels the tensor).
        let z = z.to_device(&self.device)?;
        // The f16 overflow guard (crate::blocks::Guard::run): the plain f16 decode and one
        // check of its (3-channel) image; only after an overflow a rerun checking each block.
        self.guard().run(z, self.overflow_guard(), |z, in_f32| self.pass(z, in_f32, observe))
    }

    fn guard(&self) -> Guard<'_> {
        Guard { dtype: self.dtype, stats: &self.stats }
    }

    /// One pass over the network: without checks (`in_f32` is `None`), or checking every
    /// block's output with the blocks named in `in_f32` run in f32; `Ok(Err(block))` names
    /// the first block whose f16 output was not finite.
    fn pass(
        &self,
        z: Tensor,
        in_f32: Option<&[String]>,
        observe: &mut dyn FnMut(&str, &Tensor),
    ) -> Result<std::result::Result<Tensor, String>> {
        // The dtype the activations are in: the decoder's, or f32 after an f16 overflow
        // that outlived its block.
        let mut state = self.dtype;
        let guard = self.guard();
        let mut x = z;
        macro_rules! run {
            ($name:expr, $block:expr) => {{
                let name: String = $name.into();
                match guard.block(&name, $block, x, in_f32, &mut state)? {
                    Some(y) => y,
                    None => return Ok(Err(name)),
                }
            }};
        }
        if let Some(c) = &self.post_quant_conv {
            x = run!("post_quant_conv", Block::Conv(c));
            observe("post_quant_conv", &x);
        }
        x = run!("decoder.conv_in", Block::Conv(&self.conv_in));
        observe("decoder.conv_in", &x);
        x = run!("decoder.mid_block.resnets.0", Block::Resnet(&self.mid_resnets[0]));
        observe("decoder.mid_block.resnets.0", &x);
        if let Some(a) = &self.attention {
            x = run!("decoder.mid_block.attentions.0", Block::Attention(a));
            observe("decoder.mid_block.attentions.0", &x);
        }
        x = run!("decoder.mid_block.resnets.1", Block::Resnet(&self.mid_resnets[1]));
        observe("decoder.mid_block", &x);
        if let Some(banding) = &self.banding {
            if in_f32.is_some() {
                return Err(crate::banded::no_f32_rerun("decode"));
            }
            let run = BandedRun::new(&self.device, self.dtype, self.config.norm_num_groups, banding);
            return Ok(Ok(run.decode(self, x, observe)?));
        }
        for (i, block) in self.up_blocks.iter().enumerate() {
            for (j, r) in block.resnets.iter().enumerate() {
                x = run!(format!("decoder.up_blocks.{i}.resnets.{j}"), Block::Resnet(r));
            }
            if let Some(up) = &block.upsampler {
                x = run!(format!("decoder.up_blocks.{i}.upsamplers.0"), Block::Upsample(up, self.caps.upsample_band));
            }
            observe(&format!("decoder.up_blocks.{i}"), &x);
        }
        x = run!("decoder.conv_out", Block::NormConv(&self.norm_out, &self.conv_out, self.exact_norms));
        observe("decoder.conv_out", &x);
        Ok(Ok(x))
    }
}

/// `[N, C, h, w]` or `[C, h, w]` (→ `[1, C, h, w]`) with `channels` channels.
pub fn check_latent_shape(latents: &Tensor, channels: usize) -> Result<Tensor> {
    let x = match latents.rank() {
        4 => latents.clone(),
        3 => latents.reshape(&[&[1], latents.dims()].concat())?,
        _ => {
            return Err(SdError::Latents(format!(
                "expected shape [N, {channels}, h, w] or [{channels}, h, w], got {:?} (rank {})",
                latents.dims(),
                latents.rank()
            )));
        }
    };
    let d = x.dims();
    if d[1] != channels {
        return Err(SdError::Latents(format!(
            "the VAE takes {channels} latent channels, but the latents have {} (shape {:?})",
            d[1],
            latents.dims()
        )));
    }
    if d[0] == 0 || d[2] == 0 || d[3] == 0 {
        return Err(SdError::Latents(format!("empty latents of shape {:?}", latents.dims())));
    }
    if !latents.dtype().is_float() {
        return Err(SdError::Latents(format!("dtype {:?}: latents must be floating point", latents.dtype())));
    }
    Ok(x)
}

/// Checks the weights' conv_in against the config before loading everything, so a wrong
/// `--model` is reported as such rather than as one odd tensor shape.
fn check_matches_config(w: &Weights, layout: &KeyLayout, config: &VaeConfig) -> Result<()> {
    let path = w.path().to_path_buf();
    let key = format!("{}.weight", layout.conv_in());
    let (lat, top) = (config.latent_channels, config.top_channels());
    match w.info(&key) {
        Some((shape, _)) if shape.len() == 4 && shape[1] == lat && shape[0] == top => {}
        Some((shape, _)) if shape.len() == 4 => {
            return Err(SdError::WeightsMismatch {
                path,
                msg: format!(
                    "{key} has shape {shape:?}: this VAE takes {} latent channels into {} channels, \
                     but the configuration expects {lat} into {top} (wrong --model or --config?)",
                    shape[1], shape[0]
                ),
            });
        }
        Some((shape, _)) => {
            return Err(SdError::WeightsMismatch { path, msg: format!("{key} has shape {shape:?}, expected 4-D") });
        }
        None => return Err(SdError::WeightsMismatch { path, msg: format!("missing tensor {key:?}") }),
    }
    let pq = format!("{}.weight", layout.post_quant_conv());
    match (config.use_post_quant_conv, w.contains(&pq)) {
        (true, false) => Err(SdError::WeightsMismatch {
            path,
            msg: format!(
                "the configuration has a post_quant_conv (SD 1.x/2.x/SDXL) but the file has no {pq:?} \
                 (an SD3/FLUX VAE? check --model)"
            ),
        }),
        (false, true) => Err(SdError::WeightsMismatch {
            path,
            msg: format!(
                "the file has {pq:?} but the configuration has no post_quant_conv (SD3/FLUX); \
                 an SD 1.x/2.x/SDXL VAE? check --model"
            ),
        }),
        _ => Ok(()),
    }
}
