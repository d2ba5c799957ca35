//! The plan of a banded exact decode ([`crate::banded`]) within a budget: the band size,
//! which whole maps stay on the device and which live in host memory, and the device and
//! host bytes that gives, before anything runs ([`Decoder::plan_banded`]).
//!
//! The walk follows [`crate::banded::BandedRun`] map by map: the latent-sized part (conv_in,
//! the mid block) as the unbanded plan walks it, then each up block's maps as they are made
//! and freed. A map stays on the device when it fits beside what is live there, the
//! weights and one band's working tensors; else it lives in host memory. So the device
//! holds at most the budget whatever the image size, and host memory takes the rest.

use crate::banded::{Banding, Home, MapSpec, band_row_bytes, band_rows, banded_maps};
use crate::config::VaeConfig;
use crate::decoder::{Decoder, ScratchCaps};
use crate::error::{Result, SdError};
use crate::plan::{walk_latent_part, weight_bytes};
use rocm_vision::{DType, Device, format_bytes};
use std::fmt;

/// The band working set when the budget leaves room for it: bands of this size run the
/// convolutions at full speed on any device (a 4096-wide f16 map of 128 channels: ~120
/// rows a band).
pub const DEFAULT_BAND_BYTES: usize = 1 << 30;
/// The smallest band working set a plan uses.
pub const MIN_BAND_BYTES: usize = 64 << 20;

/// What a banded decode will use, from [`Decoder::plan_banded`].
#[derive(Clone, Debug, PartialEq)]
pub struct BandedPlan {
    pub width: usize,
    pub height: usize,
    pub dtype: DType,
    pub budget: Option<usize>,
    /// What the run is given ([`Decoder::set_banding`]).
    pub banding: Banding,
    /// Output rows per band at the full-size layers.
    pub top_band_rows: usize,
    /// Bytes of the weights on the device.
    pub weights: usize,
    /// The device's peak: the weights, the latent-sized part or the banded part's
    /// device-resident maps and one band, whichever is higher.
    pub device_peak: usize,
    /// The most host memory the maps kept there take at once.
    pub host_peak: usize,
    /// Whether `device_peak` fits the budget (always with no budget).
    pub fits: bool,
}

impl fmt::Display for BandedPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on_host = self.banding.homes.iter().filter(|h| **h == Home::Host).count();
        write!(
            f,
            "banded exact decode {}x{} {:?}: device peak {} (weights {}), host {} ({} of {} maps in host memory); \
             bands of {} rows at full size",
            self.width,
            self.height,
            self.dtype,
            format_bytes(self.device_peak),
            format_bytes(self.weights),
            format_bytes(self.host_peak),
            on_host,
            self.banding.homes.len(),
            self.top_band_rows,
        )?;
        match self.budget {
            Some(b) if self.fits => write!(f, "; fits the budget of {}", format_bytes(b)),
            Some(b) => write!(f, "; does not fit the budget of {}: raise the budget", format_bytes(b)),
            None => Ok(()),
        }
    }
}

impl Decoder {
    /// The plan of a banded exact decode of one `width × height` image with `config` in
    /// `dtype` on `device` within `budget` (`None`: every map on the device, bands of
    /// [`DEFAULT_BAND_BYTES`]). Nothing is allocated; the weights need not be loaded.
    pub fn plan_banded(
        config: &VaeConfig,
        device: &Device,
        (width, height): (usize, usize),
        dtype: DType,
        budget: Option<usize>,
    ) -> Result<BandedPlan> {
        config.validate()?;
        let up = config.upscale();
        if width == 0 || height == 0 || width % up != 0 || height % up != 0 {
            return Err(SdError::Latents(format!(
                "{width}x{height}: the image size must be a positive multiple of {up} (one latent pixel is {up}x{up})"
            )));
        }
        let (h, w) = (height / up, width / up);
        let weights = weight_bytes(config, dtype, device);
        let latent = walk_latent_part(config, device, dtype, (h, w), ScratchCaps::default())?;
        let maps = banded_maps(config, (h, w));
        let bytes = |m: &MapSpec| device.allocation_bytes(m.channels * m.h * m.w * dtype.size_in_bytes());
        // The mid block's output is the first map: the latent part's live bytes hold it.
        let base = latent.live_after.saturating_sub(bytes(&maps[0]));
        let band_bytes = match budget {
            None => DEFAULT_BAND_BYTES,
            Some(b) => (b.saturating_sub(weights + base) / 4).clamp(MIN_BAND_BYTES, DEFAULT_BAND_BYTES),
        };
        // Room for maps on the device beside the weights, the latents and one band. A CPU
        // has one memory: every map is "on the device".
        let room = match budget {
            Some(b) if !device.is_cpu() => b.saturating_sub(weights + base + band_bytes),
            _ => usize::MAX,
        };
        let walk = place(config, &maps, &bytes, room);
        // The largest band any layer runs (its rows within the map, with the halo).
        let band_set = maps
            .windows(2)
            .map(|p| {
                let (c, m) = (p[0].channels.max(p[1].channels), &p[1]);
                (band_rows(band_bytes, c, c, m.w, dtype).min(m.h) + 2) * band_row_bytes(c, c, m.w, dtype)
            })
            .max()
            .unwrap_or(0);
        let banded_peak = weights + base + walk.device_peak + band_set;
        let device_peak = banded_peak.max(weights + latent.peak);
        let c0 = config.block_out_channels[0];
        let top = maps.last().expect("a decode makes maps");
        Ok(BandedPlan {
            width,
            height,
            dtype,
            budget,
            banding: Banding { band_bytes, homes: walk.homes },
            top_band_rows: band_rows(band_bytes, c0, c0, top.w, dtype).min(top.h),
            weights,
            device_peak,
            host_peak: walk.host_peak,
            fits: budget.is_none_or(|b| device_peak <= b),
        })
    }
}

struct Placement {
    homes: Vec<Home>,
    device_peak: usize,
    host_peak: usize,
}

/// Places each map as it is made (the order of [`banded_maps`], the lifetimes of
/// `BandedRun`): on the device while the live device maps and it fit in `room`.
fn place(config: &VaeConfig, maps: &[MapSpec], bytes: &dyn Fn(&MapSpec) -> usize, room: usize) -> Placement {
    #[derive(Default)]
    struct Live {
        device: usize,
        host: usize,
        device_peak: usize,
        host_peak: usize,
    }
    let mut live = Live::default();
    let mut homes = Vec::with_capacity(maps.len());
    let make = |live: &mut Live, homes: &mut Vec<Home>, i: usize| -> (Home, usize) {
        let n = bytes(&maps[i]);
        let home = if live.device + n <= room { Home::Device } else { Home::Host };
        match home {
            Home::Device => live.device += n,
            Home::Host => live.host += n,
        }
        live.device_peak = live.device_peak.max(live.device);
        live.host_peak = live.host_peak.max(live.host);
        homes.push(home);
        (home, n)
    };
    let free = |live: &mut Live, (home, n): (Home, usize)| match home {
        Home::Device => live.device -= n,
        Home::Host => live.host -= n,
    };
    let mut next = 0;
    let mut x = make(&mut live, &mut homes, next);
    next += 1;
    let n = config.num_up_blocks();
    for (i, (cin, cout)) in config.up_block_channels().into_iter().enumerate() {
        for j in 0..=config.layers_per_block {
            let c = if j == 0 { cin } else { cout };
            let h1 = make(&mut live, &mut homes, next);
            next += 1;
            if c != cout {
                let out = make(&mut live, &mut homes, next);
                next += 1;
                free(&mut live, h1);
                free(&mut live, x);
                x = out;
            } else {
                // The output is written over the input.
                free(&mut live, h1);
            }
        }
        if i + 1 < n {
            let out = make(&mut live, &mut homes, next);
            next += 1;
            free(&mut live, x);
            x = out;
        }
    }
    make(&mut live, &mut homes, next);
    debug_assert_eq!(homes.len(), maps.len());
    Placement { homes, device_peak: live.device_peak, host_peak: live.host_peak }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Model;

    #[test]
    fn maps_stay_on_the_device_while_they_fit_and_never_past_the_room() {
        let config = Model::Sd.config();
        let maps = banded_maps(&config, (512, 512));
        let bytes = |m: &MapSpec| m.channels * m.h * m.w * 2;
        let all = place(&config, &maps, &bytes, usize::MAX);
        assert!(all.homes.iter().all(|h| *h == Home::Device));
        assert_eq!(all.host_peak, 0);
        let none = place(&config, &maps, &bytes, 0);
        assert!(none.homes.iter().all(|h| *h == Home::Host));
        assert_eq!(none.device_peak, 0);
        assert_eq!(none.host_peak, all.device_peak, "the same maps, all on one side");
        let largest = maps.iter().map(bytes).max().unwrap();
        for room in [largest / 2, largest, 2 * largest, 3 * largest] {
            let p = place(&config, &maps, &bytes, room);
            assert!(p.device_peak <= room, "room {room}: device peak {}", p.device_peak);
            assert_eq!(p.homes.len(), maps.len());
            // Everything that left the device went to the host, nothing more.
            assert!(p.host_peak <= all.device_peak);
        }
        // The 4096² decode's largest map (the last upsampler's, 256 channels at full size,
        // 8 GiB in f16) cannot stay beside the next resnet's two 4 GiB maps in 14 GiB.
        let p = place(&config, &maps, &bytes, 14 << 30);
        let i = maps.iter().position(|m| m.name == "decoder.up_blocks.2.upsamplers.0").unwrap();
        assert_eq!(maps[i].channels * maps[i].h * maps[i].w * 2, 8 << 30);
        assert!(p.homes.contains(&Home::Host) && p.device_peak <= 14 << 30);
    }

    #[test]
    fn the_cpu_plan_keeps_every_map_in_its_one_memory_and_checks_the_size() {
        let config = Model::Sd.config();
        let p = Decoder::plan_banded(&config, &Device::cpu(), (512, 256), DType::F32, Some(8 << 30)).unwrap();
        assert!(p.banding.homes.iter().all(|h| *h == Home::Device) && p.host_peak == 0);
        assert_eq!(p.banding.homes.len(), banded_maps(&config, (32, 64)).len());
        assert!(p.fits && p.device_peak > p.weights, "{p}");
        let e = Decoder::plan_banded(&config, &Device::cpu(), (500, 256), DType::F32, None).unwrap_err();
        assert!(e.to_string().contains("multiple of 8"), "{e}");
    }
}
