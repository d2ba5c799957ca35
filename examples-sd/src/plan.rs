//! The exact memory plan of a decode, before running it: [`Decoder::plan`] (the encoder's:
//! [`crate::encode_plan`], on the same walk).
//!
//! The plan walks the decode the way [`Decoder::decode`] runs it — every tensor the run
//! allocates, when it is freed, and for every convolution the workspace of the plan the
//! device's dispatcher makes for it with what is live at that moment (the same decision
//! the run makes) — and records the peak. Sizes are the device allocator's (its size
//! classes on ROCm; the heap's bytes on the CPU). The walk covers one batch item (a batch
//! decodes item by item) and the f16 overflow guard's check of the image, not the rare
//! rerun with per-block checks after an overflow.

use crate::config::VaeConfig;
use crate::decoder::{Decoder, ScratchCaps};
use crate::error::{Result, SdError};
use crate::memory::MemoryPlan;
use crate::tiled::TileSpec;
use rocm_vision::conv_engine::ConvProblem;
use rocm_vision::{Budget, Conv2dParams, DType, Device, DeviceKind, format_bytes};
use std::fmt;

/// What a decode will use, from [`Decoder::plan`].
#[derive(Clone, Debug, PartialEq)]
pub struct DecodePlan {
    /// Image size in pixels.
    pub width: usize,
    pub height: usize,
    pub dtype: DType,
    /// The device planned for (`cpu`, `rocm:0 (gfx1100)`).
    pub device: String,
    /// The budget given (`None`: library defaults, no fit check).
    pub budget: Option<usize>,
    /// Bytes of the decoder's weights on the device.
    pub weights: usize,
    /// Peak bytes the decode adds on top of the weights and the latents: activations, the
    /// decoder's scratch and the convolutions' workspace.
    pub decode_peak: usize,
    /// CPU only: the largest of the gemm crate's own buffers a convolution or the
    /// attention's matrix products use (its per-thread packing slabs, allocated on the
    /// first decode and kept; its operand packing; `CpuConv::gemm_crate_bytes` and
    /// `CpuConv::matmul_gemm_crate_bytes`, upper bounds), so not part of
    /// `decode_peak`. 0 on ROCm, where every workspace is allocated per convolution and is
    /// in `decode_peak`.
    pub engine_scratch: usize,
    /// `weights + engine_scratch + decode_peak`: the peak of the whole run.
    pub peak: usize,
    /// The block during which the peak is reached (diffusers module name).
    pub peak_at: String,
    /// Whether the exact decode fits the budget (always with no budget).
    pub fits: bool,
    /// When it does not fit: the tile a `--tiled` decode would use (approximate decode),
    /// or `None` when not even tiles fit.
    pub tiled: Option<TileSpec>,
    /// Per block, in order: its peak and what is live after it (decode bytes, as
    /// `decode_peak`): where the memory goes.
    pub stages: Vec<StageMemory>,
    /// Scratch caps and conv workspace cap the run will use (from [`MemoryPlan`]).
    pub caps: ScratchCaps,
    pub conv_workspace: Option<usize>,
}

/// The first part of a decode's or an encode's plan line: the run, its peak and where
/// the bytes go, e.g. `512x512 F32 on cpu: peak 1.2 GiB (weights 190 MiB + decode 1.0 GiB,
/// at decoder.up_blocks.3.resnets.0); `.
pub(crate) struct PlanHead<'a> {
    /// `"decode"` or `"encode"`.
    pub run: &'a str,
    pub width: usize,
    pub height: usize,
    pub dtype: DType,
    pub device: &'a str,
    pub peak: usize,
    pub weights: usize,
    pub run_peak: usize,
    pub peak_at: &'a str,
    pub engine_scratch: usize,
}

impl fmt::Display for PlanHead<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // An encode says so first; a decode line starts with its size (as it always has).
        if self.run != "decode" {
            write!(f, "{} ", self.run)?;
        }
        write!(
            f,
            "{}x{} {:?} on {}: peak {} (weights {} + {} {}, at {}",
            self.width,
            self.height,
            self.dtype,
            self.device,
            format_bytes(self.peak),
            format_bytes(self.weights),
            self.run,
            format_bytes(self.run_peak),
            self.peak_at
        )?;
        if self.engine_scratch > 0 {
            write!(f, "; + gemm packing kept per thread {}", format_bytes(self.engine_scratch))?;
        }
        write!(f, "); ")
    }
}

impl fmt::Display for DecodePlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = PlanHead {
            run: "decode",
            width: self.width,
            height: self.height,
            dtype: self.dtype,
            device: &self.device,
            peak: self.peak,
            weights: self.weights,
            run_peak: self.decode_peak,
            peak_at: &self.peak_at,
            engine_scratch: self.engine_scratch,
        };
        write!(f, "{head}")?;
        match (self.budget, self.fits, self.tiled) {
            (None, _, _) => write!(f, "no budget given"),
            (Some(b), true, _) => write!(f, "fits the budget of {} exactly (no tiling)", format_bytes(b)),
            (Some(b), false, Some(t)) => write!(
                f,
                "does not fit the budget of {}: needs --tiled ({}x{} latent tiles, overlap {}; approximate)",
                format_bytes(b),
                t.tile,
                t.tile,
                t.overlap
            ),
            (Some(b), false, None) => {
                write!(f, "does not fit the budget of {}, not even tiled: raise the budget", format_bytes(b))
            }
        }
    }
}

/// One block of the walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageMemory {
    pub name: String,
    /// The highest the decode's bytes reach during the block.
    pub peak: usize,
    /// The decode's bytes live when the block is done.
    pub live_after: usize,
}

/// Live and peak bytes along the walk, and where the peak was.
pub(crate) struct Walk<'a> {
    device: &'a Device,
    dtype: DType,
    live: usize,
    peak: usize,
    peak_at: String,
    stage: String,
    stages: Vec<StageMemory>,
    /// The CPU gemm crate's own buffers (see [`DecodePlan::engine_scratch`]).
    retained: usize,
    /// Whether convolution workspace is counted (off: activations only, for the budget
    /// split of [`crate::Encoder::plan`]).
    count_workspace: bool,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(device: &'a Device, dtype: DType) -> Walk<'a> {
        Walk {
            device,
            dtype,
            live: 0,
            peak: 0,
            peak_at: String::new(),
            stage: String::new(),
            stages: vec![],
            retained: 0,
            count_workspace: true,
        }
    }

    pub(crate) fn without_workspace(mut self) -> Self {
        self.count_workspace = false;
        self
    }

    pub(crate) fn bytes(&self, elems: usize, dtype: DType) -> usize {
        self.device.allocation_bytes(elems * dtype.size_in_bytes())
    }
    /// A map of `c × h × w` in the decode's dtype.
    pub(crate) fn map(&self, c: usize, h: usize, w: usize) -> usize {
        self.bytes(c * h * w, self.dtype)
    }
    pub(crate) fn alloc(&mut self, n: usize) -> usize {
        self.live += n;
        if self.live > self.peak {
            self.peak = self.live;
            self.peak_at = self.stage.clone();
        }
        if let Some(st) = self.stages.last_mut() {
            st.peak = st.peak.max(self.live);
        }
        n
    }
    /// Starts the next block.
    pub(crate) fn enter(&mut self, name: impl Into<String>) {
        self.close();
        self.stage = name.into();
        self.stages.push(StageMemory { name: self.stage.clone(), peak: self.live, live_after: self.live });
    }
    pub(crate) fn close(&mut self) {
        if let Some(st) = self.stages.last_mut() {
            st.live_after = self.live;
        }
    }
    pub(crate) fn free(&mut self, n: usize) {
        self.live -= n.min(self.live);
    }
    pub(crate) fn transient(&mut self, n: usize) {
        self.alloc(n);
        self.free(n);
    }
    /// A convolution of a `c × h × w` input by `k` `r × r` filters: its output (returned,
    /// live) and, while it runs, the workspace of the dispatcher's plan for it now.
    pub(crate) fn conv(
        &mut self,
        (c, h, w): (usize, usize, usize),
        k: usize,
        r: usize,
        params: Conv2dParams,
    ) -> Result<usize> {
        let p = ConvProblem::conv2d(&[1, c, h, w], &[k, c, r, r], self.dtype, self.dtype, &params)
            .map_err(rocm_vision::Error::from)?;
        let [oh, ow] = p.geometry().out_hw();
        let out = self.alloc(self.map(k, oh, ow));
        self.workspace(&p)?;
        Ok(out)
    }
    /// The workspace of the dispatcher's plan for `p` with what is live now, while it runs.
    pub(crate) fn workspace(&mut self, p: &ConvProblem) -> Result<()> {
        if !self.count_workspace {
            return Ok(());
        }
        let plan = self.device.conv_plan_with_live(p, self.live)?;
        let ws = if plan.workspace_bytes > 0 { self.device.allocation_bytes(plan.workspace_bytes) } else { 0 };
        // On the CPU the gemm crate's own buffers (its per-thread slabs, grown once and
        // kept; its operand packing) are held apart: `DecodePlan::engine_scratch`.
        let kept = if self.device.is_cpu() {
            let engine = self.device.cpu_conv();
            engine.gemm_crate_bytes(&engine.plan(p).map_err(rocm_vision::Error::from)?).min(ws)
        } else {
            0
        };
        self.retained = self.retained.max(kept);
        self.transient(ws - kept);
        Ok(())
    }
    /// The f16 guard's check of the image: one exact sum (2 KiB) per channel. (Blocks are
    /// checked one by one only after that check fails, on the rare rerun the plan leaves
    /// out.)
    pub(crate) fn check_output(&mut self, c: usize, guard: bool) {
        if guard {
            self.transient(c * (crate::precision::EXACT_SUM_BYTES + 8));
        }
    }
}

impl Decoder {
    /// The memory plan of decoding one `width × height` image (pixels; a multiple of the
    /// model's upscale) with `config` in `dtype` on `device`, within `budget` bytes (the
    /// `--vram-budget`; `None`: library defaults): the peak bytes the run will use and
    /// whether the exact decode fits or needs tiling. Nothing is allocated or decoded;
    /// the weights need not be loaded. On the CPU the budget caps the conv workspace
    /// exactly as `sd-vae-decode` does; on ROCm pass the device the run will use (its
    /// allocator's budget decides its dispatcher's plans). Measured (tests/memory_plan.rs,
    /// 2026-12-04): 0.999-1.000x the heap's peak on the CPU at 128²-2048², and 1.000-1.012x
    /// the allocator's peak on the H200 at 512²-2048², f32 and f16.
    pub fn plan(
        config: &VaeConfig,
        device: &Device,
        (width, height): (usize, usize),
        dtype: DType,
        budget: Option<usize>,
    ) -> Result<DecodePlan> {
        config.validate()?;
        let up = config.upscale();
        if width == 0 || height == 0 || width % up != 0 || height % up != 0 {
            return Err(SdError::Latents(format!(
                "{width}x{height}: the image size must be a positive multiple of {up} (one latent pixel is {up}x{up})"
            )));
        }
        let (h, w) = (height / up, width / up);
        let memory = MemoryPlan::new(config, dtype, (h, w), budget, false, None);
        let (caps, conv_workspace, fits_estimate) = match memory {
            Ok(m) => (m.caps, m.conv_workspace, true),
            Err(SdError::Budget(_)) => (
                MemoryPlan::new(config, dtype, (h, w), None, false, None)?.caps,
                Some(crate::memory::MIN_SCRATCH),
                false,
            ),
            Err(e) => return Err(e),
        };
        // The device the run uses: on the CPU the budget becomes the conv workspace cap.
        let run_device = match (device.kind(), conv_workspace) {
            (DeviceKind::Cpu, Some(ws)) if budget.is_some() => Device::cpu_with_budget(Budget::bytes(ws)),
            _ => device.clone(),
        };
        let weights = weight_bytes(config, dtype, &run_device);
        let guard = dtype == DType::F16;
        let Walked { peak: decode_peak, peak_at, stages, retained: engine_scratch } =
            walk(config, &run_device, dtype, (h, w), caps, guard)?;
        let peak = weights + engine_scratch + decode_peak;
        let fits = budget.is_none_or(|b| fits_estimate && peak <= b);
        let tiled = if fits {
            None
        } else {
            MemoryPlan::new(config, dtype, (h, w), budget, true, None).ok().and_then(|m| m.tile)
        };
        Ok(DecodePlan {
            width,
            height,
            dtype,
            device: device.to_string(),
            budget,
            weights,
            decode_peak,
            engine_scratch,
            peak,
            peak_at,
            stages,
            fits,
            tiled,
            caps,
            conv_workspace,
        })
    }
}

/// The decoder's weights on `device`: each tensor as the allocator sizes it.
pub fn weight_bytes(config: &VaeConfig, dtype: DType, device: &Device) -> usize {
    config
        .diffusers_tensor_shapes()
        .iter()
        .map(|(_, s)| device.allocation_bytes(s.iter().product::<usize>() * dtype.size_in_bytes()))
        .sum()
}

pub(crate) struct Walked {
    pub peak: usize,
    pub peak_at: String,
    pub stages: Vec<StageMemory>,
    pub retained: usize,
}

impl Walk<'_> {
    /// The walk's result.
    pub(crate) fn finish(mut self) -> Walked {
        self.close();
        Walked { peak: self.peak, peak_at: self.peak_at, stages: self.stages, retained: self.retained }
    }

    pub(crate) fn dtype(&self) -> DType {
        self.dtype
    }
}

/// The latent-sized part of a decode (up to the mid block's output): its peak and what
/// is live after it, for the banded plan ([`crate::banded_plan`]).
pub(crate) struct LatentPart {
    pub peak: usize,
    pub live_after: usize,
}

/// [`LatentPart`] of the decode of an `h × w` latent (the unbanded walk's stages until the
/// mid block's last resnet).
pub(crate) fn walk_latent_part(
    config: &VaeConfig,
    device: &Device,
    dtype: DType,
    (h, w): (usize, usize),
    caps: ScratchCaps,
) -> Result<LatentPart> {
    let walked = walk(config, device, dtype, (h, w), caps, false)?;
    let end = walked
        .stages
        .iter()
        .position(|s| s.name == "decoder.mid_block.resnets.1")
        .ok_or_else(|| SdError::Internal("the decode walk has no mid block".into()))?;
    let part = &walked.stages[..=end];
    Ok(LatentPart {
        peak: part.iter().map(|s| s.peak).max().unwrap_or(0) + walked.retained,
        live_after: part[end].live_after,
    })
}

/// The walk of one decode of an `h × w` latent (f32 latents given): its peak and where.
fn walk(
    config: &VaeConfig,
    device: &Device,
    dtype: DType,
    (h, w): (usize, usize),
    caps: ScratchCaps,
    guard: bool,
) -> Result<Walked> {
    let mut s = Walk::new(device, dtype);
    s.enter("unscale");
    let (lat, top) = (config.latent_channels, config.top_channels());
    let conv3 = Conv2dParams::default().with_padding(1);
    let conv1 = Conv2dParams::default();
    // unscale: the f32 arithmetic, then z in the decoder's dtype (kept by `decode` until
    // the item is done).
    let l32 = s.bytes(lat * h * w, DType::F32);
    s.alloc(l32);
    if config.latents_mean.is_some() && config.latents_std.is_some() {
        s.transient(2 * l32);
    }
    let z = if dtype == DType::F32 {
        l32
    } else {
        let z = s.alloc(s.map(lat, h, w));
        s.free(l32);
        z
    };
    let mut x = z;
    let mut x_is_z = true;
    if config.use_post_quant_conv {
        s.enter("post_quant_conv");
        x = s.conv((lat, h, w), lat, 1, conv1)?;
        x_is_z = false;
    }
    s.enter("decoder.conv_in");
    let y = s.conv((lat, h, w), top, 3, conv3)?;
    if !x_is_z {
        s.free(x);
    }
    x = y;
    x = resnet(&mut s, "decoder.mid_block.resnets.0".into(), x, top, top, h, w)?;
    if config.mid_block_add_attention {
        s.enter("decoder.mid_block.attentions.0");
        x = attention(&mut s, x, top, h * w, caps.attention_scores)?;
    }
    x = resnet(&mut s, "decoder.mid_block.resnets.1".into(), x, top, top, h, w)?;
    let n = config.num_up_blocks();
    let (mut h, mut w) = (h, w);
    for (i, (cin, cout)) in config.up_block_channels().into_iter().enumerate() {
        for j in 0..=config.layers_per_block {
            let c = if j == 0 { cin } else { cout };
            x = resnet(&mut s, format!("decoder.up_blocks.{i}.resnets.{j}"), x, c, cout, h, w)?;
        }
        if i + 1 < n {
            s.enter(format!("decoder.up_blocks.{i}.upsamplers.0"));
            let y = upsample_conv(&mut s, (cout, h, w), caps.upsample_band)?;
            s.free(x);
            x = y;
            h *= 2;
            w *= 2;
        }
    }
    s.enter("decoder.conv_out");
    let c0 = config.block_out_channels[0];
    let normed = s.alloc(s.map(c0, h, w));
    let out = s.conv((c0, h, w), config.out_channels, 3, conv3)?;
    s.free(normed);
    s.check_output(config.out_channels, guard);
    s.free(x);
    // `decode`: the image in f32, then the batch concatenated (one item: a copy).
    s.enter("decode (f32 image)");
    let img = s.bytes(config.out_channels * h * w, DType::F32);
    if dtype != DType::F32 {
        s.alloc(img);
        s.free(out);
    }
    s.transient(img);
    s.close();
    Ok(Walked { peak: s.peak, peak_at: s.peak_at, stages: s.stages, retained: s.retained })
}

/// `Resnet::forward` (crate::blocks) of a `cin × h × w` input `x` (live, freed here) to
/// `cout` channels: which tensors it holds.
pub(crate) fn resnet(
    s: &mut Walk,
    name: String,
    x: usize,
    cin: usize,
    cout: usize,
    h: usize,
    w: usize,
) -> Result<usize> {
    let conv3 = Conv2dParams::default().with_padding(1);
    let conv1 = Conv2dParams::default();
    s.enter(name);
    let n1 = s.alloc(s.map(cin, h, w)); // norm1 + SiLU
    let mut x_live = true;
    let mut skip = 0;
    let shortcut_first = cin != cout && cout <= cin;
    if shortcut_first {
        skip = s.conv((cin, h, w), cout, 1, conv1)?;
        s.free(x); // the input dies once the narrowing shortcut has read it
        x_live = false;
    }
    let c1 = s.conv((cin, h, w), cout, 3, conv3)?;
    s.free(n1);
    let n2 = s.alloc(s.map(cout, h, w)); // norm2 + SiLU
    s.free(c1);
    let out = if cin != cout && !shortcut_first {
        // Widening: conv2, then the shortcut, added in place.
        let c2 = s.conv((cout, h, w), cout, 3, conv3)?;
        s.free(n2);
        let sc = s.conv((cin, h, w), cout, 1, conv1)?;
        s.free(sc);
        c2
    } else {
        // conv2 with the residual (input or shortcut) fused.
        let c2 = s.conv((cout, h, w), cout, 3, conv3)?;
        s.free(n2);
        c2
    };
    if skip > 0 {
        s.free(skip);
    }
    if x_live {
        s.free(x);
    }
    Ok(out)
}

/// `SpatialAttention::forward` over `t` pixels of `c` channels: which tensors it holds.
pub(crate) fn attention(s: &mut Walk, x: usize, c: usize, t: usize, max_score_bytes: usize) -> Result<usize> {
    let m = s.map(c, 1, t);
    // The normalised map and its [t, c] copy.
    s.alloc(m);
    let seq = s.alloc(m);
    s.free(m);
    // q, k, v: the matmul, then the bias add (a new tensor); kᵀ made contiguous.
    let lin = |s: &mut Walk| {
        let y = s.alloc(m);
        let b = s.alloc(m);
        s.free(y);
        b
    };
    if s.device.is_cpu() {
        // The products run in the gemm crate, whose per-thread slabs outlive them.
        s.retained = s.retained.max(s.device.cpu_conv().matmul_gemm_crate_bytes());
    }
    let q = lin(s);
    if s.device.is_cpu() && s.dtype == DType::F32 {
        // `SpatialAttention::attend_cpu_f32`: k as it is, the whole output, and one score
        // chunk reused by every chunk (with the padded last row block).
        let k = lin(s);
        let v = lin(s);
        let attended = s.alloc(m);
        s.transient(rocm_vision::nn::SpatialAttention::cpu_f32_scratch_bytes(t, c, max_score_bytes));
        s.free(q);
        s.free(k);
        s.free(v);
        s.free(seq);
        return Ok(project_out(s, x, attended, m));
    }
    let k = lin(s);
    let kt = s.alloc(m);
    s.free(k);
    let v = lin(s);
    let chunk = (max_score_bytes / (4 * t).max(1)).clamp(1, t);
    let mut outs = 0;
    for start in (0..t).step_by(chunk) {
        let len = chunk.min(t - start);
        let sc = s.bytes(len * t, s.dtype);
        if s.device.is_rocm() {
            // ROCm: the chunk of q made contiguous for rocBLAS (a view at an offset), the
            // scores and their scale, then one softmax kernel (f32 inside, output in the
            // dtype) and the chunk's output.
            let qc = s.alloc(s.bytes(len * c, s.dtype));
            let raw = s.alloc(sc);
            s.free(qc);
            let scaled = s.alloc(sc);
            s.free(raw);
            let p = s.alloc(sc);
            outs += s.alloc(s.bytes(len * c, s.dtype));
            s.free(p);
            s.free(scaled);
            continue;
        }
        let sc32 = s.bytes(len * t, DType::F32);
        let row32 = s.bytes(len, DType::F32);
        // The scores and their scale (both alive until the statement ends).
        s.alloc(sc);
        s.alloc(sc);
        s.free(sc);
        // Softmax in f32 (`cpu::softmax_last_dim`): the f32 copy (f32 scores are shared),
        // then x - max (with the row maxima), its exp, the row sums and the division, and
        // the result back in f16/bf16 while all of them are alive.
        let half = s.dtype != DType::F32;
        let x32 = if half { s.alloc(sc32) } else { 0 };
        s.alloc(row32);
        let sub = s.alloc(sc32);
        let e = s.alloc(sc32);
        s.free(sub);
        s.free(row32);
        s.alloc(row32);
        let div = s.alloc(sc32);
        let p = if half {
            let p = s.alloc(sc);
            s.free(div);
            p
        } else {
            div
        };
        s.free(e);
        s.free(x32);
        s.free(row32);
        // The chunk's output, while the probabilities are alive.
        outs += s.alloc(s.bytes(len * c, s.dtype));
        s.free(p);
        s.free(sc);
    }
    let attended = s.alloc(m);
    s.free(outs);
    s.free(q);
    s.free(kt);
    s.free(v);
    s.free(seq);
    Ok(project_out(s, x, attended, m))
}

/// The attention's output projection of `attended` (`m` bytes, freed), back to [c, h, w]
/// (a copy of the transposed view), then x + y: the new map (x freed).
fn project_out(s: &mut Walk, x: usize, attended: usize, m: usize) -> usize {
    let lin_out = s.alloc(m);
    let y = s.alloc(m);
    s.free(lin_out);
    s.free(attended);
    let yc = s.alloc(m);
    s.free(y);
    let out = s.alloc(m);
    s.free(yc);
    s.free(x);
    out
}

/// `ops::upsample2x_conv3x3` of a `c × h × w` map (output `c × 2h × 2w`), whole or in bands.
fn upsample_conv(s: &mut Walk, (c, h, w): (usize, usize, usize), band_bytes: usize) -> Result<usize> {
    let conv3 = Conv2dParams::default().with_padding(1);
    let row_bytes = c * 2 * w * s.dtype.size_in_bytes();
    let rows_fit = band_bytes / row_bytes.max(1);
    let (oh, ow) = (2 * h, 2 * w);
    if rows_fit >= 2 * h + 2 {
        let up = s.alloc(s.map(c, oh, ow));
        let out = s.conv((c, oh, ow), c, 3, conv3)?;
        s.free(up);
        return Ok(out);
    }
    let align = crate::banded::BAND_ALIGN;
    let band = (rows_fit.saturating_sub(2) / align * align).max(align);
    let out = s.alloc(s.map(c, oh, ow));
    let mut r0 = 0;
    while r0 < oh {
        let r1 = (r0 + band).min(oh);
        let (u0, u1) = (r0.saturating_sub(1), (r1 + 1).min(oh));
        let (s0, s1) = (u0 / 2, (u1 - 1) / 2 + 1);
        // The upsampled source rows, the conv's contiguous copy of the band's rows, the
        // band's output (copied into `out`).
        let up = s.alloc(s.map(c, 2 * (s1 - s0), ow));
        let band_in = s.alloc(s.map(c, u1 - u0, ow));
        let params = Conv2dParams {
            padding: rocm_vision::Padding2d::tblr(usize::from(r0 == 0), usize::from(r1 == oh), 1, 1),
            ..conv3
        };
        let p = ConvProblem::conv2d(&[1, c, u1 - u0, ow], &[c, c, 3, 3], s.dtype, s.dtype, &params)
            .map_err(rocm_vision::Error::from)?;
        let y = s.alloc(s.map(c, r1 - r0, ow));
        s.workspace(&p)?;
        s.free(up);
        s.free(band_in);
        s.free(y);
        r0 = r1;
    }
    Ok(out)
}
