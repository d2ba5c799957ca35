//! The `AutoencoderKL` encoder: conv_in, down blocks (resnets, then a stride-2 3x3 conv
//! on the input padded by one zero row below and one zero column on the right, as
//! diffusers' `Downsample2D` with `padding=0`), mid block (resnet, attention, resnet),
//! GroupNorm + SiLU, conv_out to `2 · latent_channels` moments, and quant_conv where the
//! model has one (SD 1.x/2.x, SDXL). The moments are the mean and log-variance of
//! diffusers' `DiagonalGaussianDistribution` ([`LatentDist`]).
//!
//! Memory discipline as in the decoder ([`crate::decoder`]): blocks take their input by
//! value and drop it once dead, bindings are reassigned, residual adds are fused into the
//! second conv of a resnet (or written in place), the attention runs in query chunks
//! within a byte cap, and a batch is encoded item by item. The asymmetric padding of the
//! downsampler is the convolution's own (`Padding2d::tblr(0, 1, 0, 1)`): no padded copy.

use crate::banded::{BandedRun, Banding};
use crate::blocks::{Block, Guard, Resnet, load_attention};
use crate::config::{NORM_EPS, VaeConfig};
use crate::decoder::ScratchCaps;
use crate::error::{Result, SdError};
use crate::layout::KeyLayout;
use crate::precision::{PrecisionStats, SharedStats};
use rocm_vision::nn::{Conv2d, GroupNorm, SpatialAttention};
use rocm_vision::{Conv2dParams, ConvRounding, DType, Device, Padding2d, Tensor, Weights};

/// diffusers' `DiagonalGaussianDistribution.logvar` clamp.
pub const LOGVAR_RANGE: (f64, f64) = (-30.0, 20.0);

/// The stride-2 downsampler conv: diffusers pads `(0, 1, 0, 1)` (right and bottom) and
/// then convolves without padding.
pub fn downsample_params() -> Conv2dParams {
    Conv2dParams { padding: Padding2d::tblr(0, 1, 0, 1), ..Conv2dParams::default().with_stride(2) }
}

/// The encoder's output: diffusers' `latent_dist` (`DiagonalGaussianDistribution`), in f32,
/// `[N, latent_channels, h, w]` each.
#[derive(Clone, Debug)]
pub struct LatentDist {
    pub mean: Tensor,
    /// Clamped to [`LOGVAR_RANGE`], as diffusers does.
    pub logvar: Tensor,
}

impl LatentDist {
    /// Splits the encoder's moments `[N, 2C, h, w]` (any float dtype) into the mean and
    /// the clamped log-variance, in f32.
    pub fn from_moments(moments: &Tensor) -> Result<LatentDist> {
        let d = moments.dims();
        if d.len() != 4 || d[1] % 2 != 0 {
            return Err(SdError::Latents(format!("moments must be [N, 2C, h, w], got {d:?}")));
        }
        let c = d[1] / 2;
        let m = moments.to_dtype(DType::F32)?;
        let mean = m.narrow(1, 0, c)?.contiguous()?;
        let scalar = |v: f64| Tensor::full(v, &[1, 1, 1, 1], DType::F32, m.device());
        let logvar =
            m.narrow(1, c, c)?.maximum(&scalar(LOGVAR_RANGE.0)?)?.minimum(&scalar(LOGVAR_RANGE.1)?)?.contiguous()?;
        Ok(LatentDist { mean, logvar })
    }

    /// `exp(logvar / 2)`.
    pub fn std(&self) -> Result<Tensor> {
        Ok(self.logvar.affine(0.5, 0.0)?.exp()?)
    }

    /// `mean + std · noise` (diffusers' `sample` with the noise its generator would draw);
    /// `noise` has the mean's shape (or `[C, h, w]` for one item) and any float dtype.
    pub fn sample(&self, noise: &Tensor) -> Result<Tensor> {
        let noise = match noise.rank() {
            3 => noise.reshape(&[&[1], noise.dims()].concat())?,
            _ => noise.clone(),
        };
        if noise.dims() != self.mean.dims() {
            return Err(SdError::Latents(format!(
                "the noise has shape {:?} but the latents are {:?}",
                noise.dims(),
                self.mean.dims()
            )));
        }
        let noise = noise.to_dtype(DType::F32)?.to_device(self.mean.device())?;
        Ok(self.mean.add(&self.std()?.mul(&noise)?)?)
    }
}

#[derive(Clone, Debug)]
pub(crate) struct DownBlock {
    pub resnets: Vec<Resnet>,
    pub downsampler: Option<Conv2d>,
}

/// A loaded encoder, ready to encode images of its configuration.
///
/// ```
/// # fn main() -> examples_sd::Result<()> {
/// use examples_sd::{Encoder, VaeConfig};
/// use rocm_vision::{DType, Device, Tensor, Weights};
/// let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures");
/// let device = Device::cpu();
/// // The reduced SD fixture VAE (a real one: `Model::Sd.config()` and its file).
/// let config = VaeConfig::from_diffusers_json(format!("{fixtures}/sd_config.json").as_ref())?;
/// let weights = Weights::open(format!("{fixtures}/sd_encoder_diffusers.safetensors"), &device)?;
/// let encoder = Encoder::load(&weights, &config, DType::F32)?;
/// // An image in [-1, 1] (examples_sd::io::load_image reads one from a file).
/// let image = Tensor::rand_uniform(&[1, 3, 64, 48], (-1.0, 1.0), 1, 0, DType::F32, &device)?;
/// let dist = encoder.encode(&image, &mut |_, _| {})?;
/// let noise = Tensor::rand_normal(&[1, 4, 8, 6], (0.0, 1.0), 2, 0, DType::F32, &device)?;
/// let latents = encoder.latents(&dist, Some(&noise))?; // 0.18215 · (mean + std · noise)
/// assert_eq!(latents.dims(), &[1, 4, 8, 6]);
/// // Sizes that are not multiples of 8 are an error that says so.
/// let odd = Tensor::zeros(&[1, 3, 60, 48], DType::F32, &device)?;
/// assert!(encoder.encode(&odd, &mut |_, _| {}).unwrap_err().to_string().contains("multiples of 8"));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Encoder {
    config: VaeConfig,
    layout: KeyLayout,
    dtype: DType,
    device: Device,
    conv_in: Conv2d,
    down_blocks: Vec<DownBlock>,
    mid_resnets: [Resnet; 2],
    attention: Option<SpatialAttention>,
    norm_out: GroupNorm,
    conv_out: Conv2d,
    quant_conv: Option<Conv2d>,
    /// f16 only: check each block's output and recompute it in f32 when not finite.
    overflow_guard: bool,
    stats: SharedStats,
    /// Run conv_in and the down blocks in bands ([`crate::banded`]); `None`: whole maps.
    banding: Option<Banding>,
}

impl Encoder {
    /// Loads the encoder from `weights` (diffusers or original key layout, detected; a
    /// whole-VAE file or checkpoint), converting every tensor to `dtype`. The weights must
    /// match `config` (checked first on conv_in and conv_out, then on every tensor's
    /// shape). The encoder holds its own copies: `weights` can be dropped afterwards.
    pub fn load(weights: &Weights, config: &VaeConfig, dtype: DType) -> Result<Encoder> {
        config.validate()?;
        let n = config.block_out_channels.len();
        let layout = KeyLayout::detect_encoder(weights, n)?;
        check_matches_config(weights, &layout, config)?;
        let w = weights.clone().with_dtype(dtype);
        let groups = config.norm_num_groups;
        let (c0, top, moments) = (config.block_out_channels[0], config.top_channels(), 2 * config.latent_channels);
        let conv3 = Conv2dParams::default().with_padding(1);
        let conv_in = Conv2d::load(&w.pp(layout.encoder_conv_in()), config.in_channels, c0, 3, conv3)?;
        let mut down_blocks = Vec::with_capacity(n);
        for (i, (cin, cout)) in config.down_block_channels().into_iter().enumerate() {
            let resnets = (0..config.layers_per_block)
                .map(|j| {
                    let c = if j == 0 { cin } else { cout };
                    Resnet::load(&w, &layout, &layout.down_resnet(i, j), c, cout, groups)
                })
                .collect::<Result<Vec<_>>>()?;
            let downsampler = if i + 1 < n {
                Some(Conv2d::load(&w.pp(layout.downsampler_conv(i)), cout, cout, 3, downsample_params())?)
            } else {
                None
            };
            down_blocks.push(DownBlock { resnets, downsampler });
        }
        let mid = |i| Resnet::load(&w, &layout, &layout.mid_resnet_of("encoder", i), top, top, groups);
        let mid_resnets = [mid(0)?, mid(1)?];
        let attention = if config.mid_block_add_attention {
            Some(load_attention(&w, &layout, &layout.attention_of("encoder"), top, groups)?)
        } else {
            None
        };
        let norm_out = GroupNorm::load(&w.pp(layout.norm_out_of("encoder")), groups, top, NORM_EPS)?;
        let conv_out = Conv2d::load(&w.pp(layout.encoder_conv_out()), top, moments, 3, conv3)?;
        let quant_conv = if config.use_quant_conv {
            Some(Conv2d::load(&w.pp(layout.quant_conv()), moments, moments, 1, Conv2dParams::default())?)
        } else {
            None
        };
        let device = conv_in.weight.device().clone();
        // Size-independent rounding: the down blocks normalise with exact statistics, so
        // that a banded encode gives the same bits.
        let exact_norms = device.conv_rounding() == ConvRounding::SizeIndependent;
        for r in down_blocks.iter_mut().flat_map(|b| b.resnets.iter_mut()) {
            r.exact_norms = exact_norms;
        }
        let mut e = Encoder {
            config: config.clone(),
            layout,
            dtype,
            device,
            conv_in,
            down_blocks,
            mid_resnets,
            attention,
            norm_out,
            conv_out,
            quant_conv,
            overflow_guard: true,
            stats: SharedStats::default(),
            banding: None,
        };
        e.set_scratch_caps(ScratchCaps::default());
        Ok(e)
    }

    /// Runs conv_in and the down blocks in bands, with the whole maps where `banding`
    /// places them (from [`Encoder::plan_banded`]); `None`: whole maps, the default. The
    /// result is the unbanded encode's (bit for bit under size-independent rounding).
    pub fn set_banding(&mut self, banding: Option<Banding>) {
        self.banding = banding;
    }

    pub(crate) fn conv_in(&self) -> &Conv2d {
        &self.conv_in
    }

    pub(crate) fn down_blocks(&self) -> &[DownBlock] {
        &self.down_blocks
    }

    /// The attention's score chunk cap (`upsample_band` does not apply to the encoder).
    pub fn set_scratch_caps(&mut self, caps: ScratchCaps) {
        if let Some(a) = &mut self.attention {
            a.max_score_bytes = caps.attention_scores.max(1);
        }
    }

    /// In an f16 encode (on by default), checks each block's output for values past f16's
    /// range and recomputes that block in f32, as the decoder does ([`crate::precision`]).
    pub fn set_overflow_guard(&mut self, on: bool) {
        self.overflow_guard = on;
    }

    /// Whether this encode checks its blocks for f16 overflow (f16 and the guard on).
    pub fn overflow_guard(&self) -> bool {
        self.overflow_guard && self.dtype == DType::F16
    }

    /// What the f16 overflow guard did since the last [`Encoder::encode`] started.
    pub fn precision_stats(&self) -> PrecisionStats {
        self.stats.get()
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

    /// Image size / latent size (8 for the published VAEs).
    pub fn downscale(&self) -> usize {
        self.config.upscale()
    }

    /// Names of the stages [`Encoder::encode_x`] reports that mark progress: each down
    /// block, the mid block, and the last layer (quant_conv or conv_out).
    pub fn milestones(&self) -> Vec<String> {
        let mut m: Vec<String> = (0..self.down_blocks.len()).map(|i| format!("encoder.down_blocks.{i}")).collect();
        m.push("encoder.mid_block".into());
        m.push(if self.quant_conv.is_some() { "quant_conv" } else { "encoder.conv_out" }.into());
        m
    }

    /// Checks that `image` is `[N, C, H, W]` or `[C, H, W]` with this model's `C` and
    /// sides that are positive multiples of [`Encoder::downscale`]; returns `[N, C, H, W]`.
    pub fn check_image(&self, image: &Tensor) -> Result<Tensor> {
        check_image_shape(image, self.config.in_channels, self.downscale())
    }

    /// Latents of the encoder's distribution → what a diffusion model takes (the inverse
    /// of [`crate::Decoder::unscale`]), in f32: `(z − shift) · scaling`, or with
    /// per-channel statistics `(z − mean) · scaling / std`.
    pub fn scale(&self, z: &Tensor) -> Result<Tensor> {
        let x = z.to_dtype(DType::F32)?;
        let c = &self.config;
        Ok(match (&c.latents_mean, &c.latents_std) {
            (Some(mean), Some(std)) => {
                let ch = |v: &[f64]| {
                    Tensor::from_vec(v.iter().map(|&x| x as f32).collect(), &[1, v.len(), 1, 1], z.device())
                };
                x.sub(&ch(mean)?)?.affine(c.scaling_factor, 0.0)?.div(&ch(std)?)?
            }
            _ => x.affine(c.scaling_factor, -c.shift_factor.unwrap_or(0.0) * c.scaling_factor)?,
        })
    }

    /// The latents an img2img / inpainting pipeline starts from: the scaled sample
    /// `scale(mean + std · noise)`, or the scaled mean without `noise` (diffusers'
    /// `retrieve_latents(..., sample_mode="argmax")`).
    pub fn latents(&self, dist: &LatentDist, noise: Option<&Tensor>) -> Result<Tensor> {
        match noise {
            Some(n) => self.scale(&dist.sample(n)?),
            None => self.scale(&dist.mean),
        }
    }

    /// Encodes images (`[N, C, H, W]` or `[C, H, W]`, values in [-1, 1] as diffusers'
    /// image processor makes them) one batch item at a time (so the peak memory is one
    /// item's) into the latent distribution, in f32.
    pub fn encode(&self, image: &Tensor, observe: &mut dyn FnMut(&str, &Tensor)) -> Result<LatentDist> {
        self.stats.reset();
        let x = self.check_image(image)?;
        let n = x.dim(0)?;
        let mut moments = Vec::with_capacity(n);
        for i in 0..n {
            let item = x.narrow(0, i, 1)?.to_dtype(self.dtype)?.contiguous()?;
            moments.push(self.encode_x(item, observe)?.to_dtype(DType::F32)?);
        }
        let refs: Vec<&Tensor> = moments.iter().collect();
        LatentDist::from_moments(&Tensor::cat(&refs, 0)?)
    }

    /// Runs the network on `x` (`[N, C, H, W]` in the encoder's dtype) and returns the
    /// moments `[N, 2 · latent_channels, H/8, W/8]`. `observe` sees each stage's output
    /// under its diffusers module name (`encoder.conv_in`, `encoder.down_blocks.{i}`,
    /// `encoder.mid_block.resnets.0`, `encoder.mid_block.attentions.0`,
    /// `encoder.mid_block`, `encoder.conv_out`, `quant_conv`); after an f16 overflow the
    /// encode reruns, and `observe` sees the stages again.
    pub fn encode_x(&self, x: Tensor, observe: &mut dyn FnMut(&str, &Tensor)) -> Result<Tensor> {
        // On the encoder's device: its convolutions round as that device says (a CPU move
        // only re-labels the tensor).
        let x = self.check_image(&x)?.to_device(&self.device)?;
        let guard = Guard { dtype: self.dtype, stats: &self.stats };
        guard.run(x, self.overflow_guard(), |x, in_f32| self.pass(&guard, x, in_f32, observe))
    }

    /// One pass over the network (see [`Guard::run`]).
    fn pass(
        &self,
        guard: &Guard<'_>,
        x: Tensor,
        in_f32: Option<&[String]>,
        observe: &mut dyn FnMut(&str, &Tensor),
    ) -> Result<std::result::Result<Tensor, String>> {
        let mut state = self.dtype;
        let mut x = x;
        macro_rules! run {
            ($name:expr, $block:expr) => {{
                let name: String = $name.into();
                match guard.block(&name, $block, x, in_f32, &mut state)? {
                    Some(y) => y,
                    None => return Ok(Err(name)),
                }
            }};
        }
        if let Some(banding) = &self.banding {
            if in_f32.is_some() {
                return Err(crate::banded::no_f32_rerun("encode"));
            }
            let run = BandedRun::new(&self.device, self.dtype, self.config.norm_num_groups, banding);
            x = run.encode(self, x, observe)?;
        } else {
            x = run!("encoder.conv_in", Block::Conv(&self.conv_in));
            observe("encoder.conv_in", &x);
            for (i, block) in self.down_blocks.iter().enumerate() {
                for (j, r) in block.resnets.iter().enumerate() {
                    x = run!(format!("encoder.down_blocks.{i}.resnets.{j}"), Block::Resnet(r));
                }
                if let Some(down) = &block.downsampler {
                    x = run!(format!("encoder.down_blocks.{i}.downsamplers.0"), Block::Conv(down));
                }
                observe(&format!("encoder.down_blocks.{i}"), &x);
            }
        }
        x = run!("encoder.mid_block.resnets.0", Block::Resnet(&self.mid_resnets[0]));
        observe("encoder.mid_block.resnets.0", &x);
        if let Some(a) = &self.attention {
            x = run!("encoder.mid_block.attentions.0", Block::Attention(a));
            observe("encoder.mid_block.attentions.0", &x);
        }
        x = run!("encoder.mid_block.resnets.1", Block::Resnet(&self.mid_resnets[1]));
        observe("encoder.mid_block", &x);
        x = run!("encoder.conv_out", Block::NormConv(&self.norm_out, &self.conv_out, false));
        observe("encoder.conv_out", &x);
        if let Some(q) = &self.quant_conv {
            x = run!("quant_conv", Block::Conv(q));
            observe("quant_conv", &x);
        }
        Ok(Ok(x))
    }
}

/// `[N, C, H, W]` or `[C, H, W]` (→ `[1, C, H, W]`) with `channels` channels and sides
/// that are positive multiples of `multiple`.
pub fn check_image_shape(image: &Tensor, channels: usize, multiple: usize) -> Result<Tensor> {
    let x = match image.rank() {
        4 => image.clone(),
        3 => image.reshape(&[&[1], image.dims()].concat())?,
        _ => {
            return Err(SdError::ImageShape(format!(
                "expected shape [N, {channels}, H, W] or [{channels}, H, W], got {:?} (rank {})",
                image.dims(),
                image.rank()
            )));
        }
    };
    let d = x.dims();
    if d[1] != channels {
        return Err(SdError::ImageShape(format!(
            "the VAE encodes {channels}-channel images, but this one has {} (shape {:?})",
            d[1],
            image.dims()
        )));
    }
    let (h, w) = (d[2], d[3]);
    if d[0] == 0 || h == 0 || w == 0 || h % multiple != 0 || w % multiple != 0 {
        let round = |v: usize| (v / multiple).max(1) * multiple;
        return Err(SdError::ImageShape(format!(
            "{w}x{h} pixels: the width and height must be positive multiples of {multiple} \
             (one latent pixel is {multiple}x{multiple}); crop or resize it, e.g. to {}x{}",
            round(w),
            round(h)
        )));
    }
    if !image.dtype().is_float() {
        return Err(SdError::ImageShape(format!("dtype {:?}: the image must be floating point", image.dtype())));
    }
    Ok(x)
}

/// Checks the weights' encoder conv_in and conv_out against the config before loading
/// everything, so a wrong `--model` is reported as such rather than as one odd shape.
fn check_matches_config(w: &Weights, layout: &KeyLayout, config: &VaeConfig) -> Result<()> {
    let path = w.path().to_path_buf();
    let mismatch = |msg: String| Err(SdError::WeightsMismatch { path: path.clone(), msg });
    let moments = 2 * config.latent_channels;
    let key = format!("{}.weight", layout.encoder_conv_out());
    match w.info(&key) {
        Some((shape, _)) if shape.len() == 4 && shape[0] == moments => {}
        Some((shape, _)) if shape.len() == 4 => {
            return mismatch(format!(
                "{key} has shape {shape:?}: this VAE encodes to {} latent channels (mean and log-variance), \
                 but the configuration expects {} (wrong --model or --config?)",
                shape[0] / 2,
                config.latent_channels
            ));
        }
        Some((shape, _)) => return mismatch(format!("{key} has shape {shape:?}, expected 4-D")),
        None => return mismatch(format!("missing tensor {key:?}")),
    }
    let q = format!("{}.weight", layout.quant_conv());
    match (config.use_quant_conv, w.contains(&q)) {
        (true, false) => mismatch(format!(
            "the configuration has a quant_conv (SD 1.x/2.x/SDXL) but the file has no {q:?} \
             (an SD3/FLUX VAE? check --model)"
        )),
        (false, true) => mismatch(format!(
            "the file has {q:?} but the configuration has no quant_conv (SD3/FLUX); \
             an SD 1.x/2.x/SDXL VAE? check --model"
        )),
        _ => Ok(()),
    }
}
