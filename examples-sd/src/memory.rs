//! How much memory a decode needs, how a budget is split between the decoder's parts, and
//! the process's measured peak.
//!
//! The estimate follows [`Decoder::decode_z`](crate::Decoder::decode_z) tensor by tensor
//! (which tensors are alive at each step), for one batch item; it is a planning figure,
//! not a guarantee: allocator slack, the conv engine's internal buffers and the process
//! itself come on top (the benchmark prints both the estimate and the measured peak).

use crate::config::VaeConfig;
use crate::decoder::ScratchCaps;
use crate::error::{Result, SdError};
use crate::tiled::TileSpec;
use rocm_vision::{DType, format_bytes};

/// The smallest scratch (conv workspace, attention chunk, upsampler band) a decode may
/// run with; below it the convolutions would crawl through tiny chunks.
pub const MIN_SCRATCH: usize = 16 << 20;

/// Peak-of-live-bytes bookkeeping.
#[derive(Default)]
struct Sim {
    live: usize,
    peak: usize,
}

impl Sim {
    fn alloc(&mut self, n: usize) {
        self.live += n;
        self.peak = self.peak.max(self.live);
    }
    fn free(&mut self, n: usize) {
        self.live = self.live.saturating_sub(n);
    }
    /// Something that exists only during one step.
    fn transient(&mut self, n: usize) {
        self.alloc(n);
        self.free(n);
    }
}

/// Estimated peak bytes of activations (and the decoder's own scratch, within `caps`)
/// while decoding one `h × w` latent: weights and the conv engine's workspace excluded.
pub fn estimate_activations(config: &VaeConfig, dtype: DType, h: usize, w: usize, caps: &ScratchCaps) -> usize {
    let e = dtype.size_in_bytes();
    let s = |c: usize, h: usize, w: usize| c * h * w * e;
    let mut sim = Sim::default();
    let (lat, top) = (config.latent_channels, config.top_channels());
    // The f32 latents and z.
    sim.alloc(lat * h * w * 4 + s(lat, h, w));
    if config.use_post_quant_conv {
        sim.transient(s(lat, h, w));
    }
    sim.alloc(s(top, h, w));
    sim.free(lat * h * w * 4 + s(lat, h, w));
    let resnet = |sim: &mut Sim, cin: usize, cout: usize, h: usize, w: usize| {
        let (si, so) = (s(cin, h, w), s(cout, h, w));
        // live: x (si)
        sim.alloc(si); // norm1 + SiLU
        let early = cin != cout && cout <= cin;
        if early {
            sim.alloc(so); // shortcut
            sim.free(si); // x dies
        }
        sim.alloc(so); // conv1
        sim.free(si); // its input
        sim.alloc(so); // norm2 + SiLU
        sim.free(so);
        sim.alloc(so); // conv2
        sim.free(so);
        if cin != cout && !early {
            sim.transient(so); // late shortcut, then x and it die after the add
        }
        if !early {
            sim.free(si);
        } else {
            sim.free(so);
        }
        // live: the sum (so)
    };
    resnet(&mut sim, top, top, h, w);
    if config.mid_block_add_attention {
        // The library's attention keeps the normalised sequence, q, kᵀ, v and the chunk
        // outputs, their concatenation and the projection alive together: ~9 maps.
        let t = h * w;
        let chunk = (caps.attention_scores / (4 * t).max(1)).clamp(1, t);
        let scores = chunk * t * (e + 12);
        sim.transient(9 * s(top, h, w) + scores);
    }
    resnet(&mut sim, top, top, h, w);
    let n = config.num_up_blocks();
    let (mut h, mut w) = (h, w);
    for (i, (cin, cout)) in config.up_block_channels().into_iter().enumerate() {
        for j in 0..=config.layers_per_block {
            resnet(&mut sim, if j == 0 { cin } else { cout }, cout, h, w);
        }
        if i + 1 < n {
            let full_up = s(cout, 2 * h, 2 * w);
            sim.alloc(full_up); // the output
            // One band: the upsampled rows, their contiguous copy and the band's output.
            sim.transient(3 * full_up.min(caps.upsample_band.max(4 * s(cout, 2, 2 * w))));
            sim.free(s(cout, h, w));
            h *= 2;
            w *= 2;
        }
    }
    let c0 = config.block_out_channels[0];
    sim.alloc(s(c0, h, w)); // norm_out + SiLU
    sim.transient(s(config.out_channels, h, w) + config.out_channels * h * w * 4);
    sim.peak
}

/// Bytes of the decoder's weights in `dtype`.
pub fn weight_bytes(config: &VaeConfig, dtype: DType) -> usize {
    config.decoder_param_count() * dtype.size_in_bytes()
}

/// How a decode uses its memory budget.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryPlan {
    /// The budget in bytes (`None`: no budget given; library defaults).
    pub budget: Option<usize>,
    pub weights: usize,
    /// Estimated activation peak of the planned decode (one tile when tiled).
    pub activations: usize,
    /// Conv engine workspace cap (`None`: the device's default).
    pub conv_workspace: Option<usize>,
    pub caps: ScratchCaps,
    /// `Some` for a tiled decode.
    pub tile: Option<TileSpec>,
}

impl MemoryPlan {
    /// Plans the decode of an `h × w` latent.
    ///
    /// Without a budget: exact decode (or `tile`/default tiles when `tiled`), library
    /// default scratch sizes. With one: weights + estimated activations + at least
    /// [`MIN_SCRATCH`] must fit; what is left is split between the conv workspace (1/2),
    /// the attention chunk (1/8, at most 256 MiB) and the upsampler band (1/8, at most
    /// 64 MiB). Tiled decode picks the
    /// largest square tile that fits (the whole latent, i.e. exact, when it fits), unless
    /// `tile` fixes it.
    pub fn new(
        config: &VaeConfig,
        dtype: DType,
        (h, w): (usize, usize),
        budget: Option<usize>,
        tiled: bool,
        tile: Option<TileSpec>,
    ) -> Result<MemoryPlan> {
        config.validate()?;
        if let Some(t) = tile {
            t.validate()?;
        }
        let weights = weight_bytes(config, dtype);
        let min_caps = ScratchCaps { attention_scores: 4 * h * w * 64, upsample_band: 0 };
        let act = |th: usize, tw: usize| estimate_activations(config, dtype, th, tw, &min_caps);
        let Some(budget) = budget else {
            let caps = ScratchCaps::default();
            let tile = if tiled { Some(tile.unwrap_or(TileSpec::DEFAULT)) } else { None };
            let (th, tw) = tile.map_or((h, w), |t| (t.tile.min(h), t.tile.min(w)));
            return Ok(MemoryPlan {
                budget: None,
                weights,
                activations: estimate_activations(config, dtype, th, tw, &caps),
                conv_workspace: None,
                caps,
                tile,
            });
        };
        let fits = |th: usize, tw: usize| weights + act(th, tw) + MIN_SCRATCH <= budget;
        let tile = match (tiled, tile) {
            (false, _) => None,
            (true, Some(t)) => Some(t),
            (true, None) => {
                let whole = h.max(w);
                if fits(h, w) {
                    Some(TileSpec { tile: whole, overlap: 0 })
                } else {
                    let mut t = whole;
                    while t > 8 && !fits(t.min(h), t.min(w)) {
                        t = t.saturating_sub(8).max(8);
                    }
                    Some(TileSpec { tile: t, overlap: (t / 4).max(1).min(t - 1) })
                }
            }
        };
        let (th, tw) = tile.map_or((h, w), |t| (t.tile.min(h), t.tile.min(w)));
        let need = weights + act(th, tw) + MIN_SCRATCH;
        if need > budget {
            let what = match tile {
                None => format!("exact decode of a {h}x{w} latent"),
                Some(t) => format!("decode in {}x{} tiles", t.tile, t.tile),
            };
            let hint = if tile.is_none() {
                "raise --vram-budget or use --tiled (approximate)"
            } else {
                "raise --vram-budget or lower --tile-size"
            };
            return Err(SdError::Budget(format!(
                "{what} needs about {} (weights {} + activations {} + scratch {}) but the budget is {}: {hint}",
                format_bytes(need),
                format_bytes(weights),
                format_bytes(act(th, tw)),
                format_bytes(MIN_SCRATCH),
                format_bytes(budget)
            )));
        }
        let scratch = budget - weights - act(th, tw);
        // Larger chunks and bands than these buy no speed, only memory.
        let caps =
            ScratchCaps { attention_scores: (scratch / 8).min(256 << 20), upsample_band: (scratch / 8).min(64 << 20) };
        Ok(MemoryPlan {
            budget: Some(budget),
            weights,
            activations: estimate_activations(config, dtype, th, tw, &caps),
            conv_workspace: Some(scratch / 2),
            caps,
            tile,
        })
    }
}

/// The process's peak resident set (`VmHWM` of `/proc/self/status`), if readable.
pub fn peak_rss_bytes() -> Option<usize> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Model;

    #[test]
    fn sd_512_estimate_is_dominated_by_the_last_up_block() {
        let c = Model::Sd.config();
        let caps = ScratchCaps::default();
        let a = estimate_activations(&c, DType::F32, 64, 64, &caps);
        // up_blocks.3.resnets.0: x (256 ch at 512²) + its norm (256 ch) + shortcut (128 ch)
        // = 640 MiB; nothing else is larger.
        assert_eq!(a, 640 << 20);
        assert_eq!(estimate_activations(&c, DType::F16, 64, 64, &caps), 320 << 20);
        assert_eq!(weight_bytes(&c, DType::F32), 4 * 49_490_199);
    }

    #[test]
    fn budget_split_and_errors() {
        let c = Model::Sd.config();
        let p = MemoryPlan::new(&c, DType::F32, (64, 64), Some(2 << 30), false, None).unwrap();
        let ws = p.conv_workspace.unwrap();
        assert!(ws > 256 << 20 && p.tile.is_none());
        assert!(p.weights + p.activations + ws < 2 << 30);
        let e = MemoryPlan::new(&c, DType::F32, (64, 64), Some(512 << 20), false, None).unwrap_err().to_string();
        assert!(e.contains("--tiled") && e.contains("512.00 MiB"), "{e}");
        // Tiled: the largest tile that fits.
        let p = MemoryPlan::new(&c, DType::F32, (128, 128), Some(1 << 30), true, None).unwrap();
        let t = p.tile.unwrap();
        assert!(t.tile < 128 && t.tile >= 32 && t.overlap > 0, "{t:?}");
        assert!(p.weights + p.activations + MIN_SCRATCH <= 1 << 30);
        // Tiled with room for the whole latent: one tile, i.e. exact.
        let p = MemoryPlan::new(&c, DType::F32, (16, 24), Some(4 << 30), true, None).unwrap();
        assert_eq!(p.tile, Some(TileSpec { tile: 24, overlap: 0 }));
    }
}
