//! The plan of a banded exact decode ([`crate::banded`]) within a budget: the band size,
//! which whole maps stay on the device and which live in host memory, and the device and
//! host bytes that gives, before anything runs ([`Decoder::plan_banded`]).
//!
//! The walk follows [`crate::banded::BandedRun`] map by map: the latent-sized part (conv_in,
//! the mid block) as the unbanded plan walks it, then each up block's maps as they are made
//! and freed. A map stays on the device when it fits beside what is live there, the
//! weights and one band's working tensors; else it lives in host memory. So the device
//! holds at most the budget whatever the image size, and host memory takes the rest.

use crate::banded::{
    Banding, Home, MapEvent, MapSchedule, MapSpec, band_fixed_bytes, band_row_bytes, band_rows, decoder_schedule,
    encoder_schedule,
};
use crate::config::VaeConfig;
use crate::decoder::{Decoder, ScratchCaps};
use crate::encode_plan::{encoder_latent_part, encoder_weight_bytes};
use crate::encoder::Encoder;
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
    /// `"decode"` or `"encode"`.
    pub run: &'static str,
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
    /// The most disk the maps kept there take at once (a CPU run under a budget its maps
    /// do not fit).
    pub disk_peak: usize,
    /// Whether `device_peak` fits the budget (always with no budget).
    pub fits: bool,
}

impl BandedPlan {
    /// The plan with its maps on disk (if any) in `dir` instead of the temporary
    /// directory.
    pub fn with_disk_dir(mut self, dir: std::path::PathBuf) -> BandedPlan {
        self.banding.disk_dir = dir;
        self
    }
}

impl fmt::Display for BandedPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |home| self.banding.homes.iter().filter(|h| **h == home).count();
        let maps = self.banding.homes.len();
        write!(
            f,
            "banded exact {} {}x{} {:?}: device peak {} (weights {}), ",
            self.run,
            self.width,
            self.height,
            self.dtype,
            format_bytes(self.device_peak),
            format_bytes(self.weights),
        )?;
        match count(Home::Disk) {
            0 => write!(
                f,
                "host {} ({} of {maps} maps in host memory)",
                format_bytes(self.host_peak),
                count(Home::Host)
            )?,
            n => write!(
                f,
                "disk {} ({n} of {maps} maps in files in {})",
                format_bytes(self.disk_peak),
                self.banding.disk_dir.display()
            )?,
        }
        write!(f, "; bands of {} rows at full size", self.top_band_rows)?;
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
        let (h, w) = latent_size(config, (width, height))?;
        let latent = walk_latent_part(config, device, dtype, (h, w), ScratchCaps::default())?;
        let schedule = decoder_schedule(config, (h, w));
        // The mid block's output is the first map: the latent part's live bytes hold it.
        let first = map_bytes(device, dtype, &schedule.maps[0]);
        let parts = Parts {
            weights: weight_bytes(config, dtype, device),
            base: latent.live_after.saturating_sub(first),
            whole_peak: latent.peak,
        };
        Ok(plan(&schedule, parts, device, dtype, budget, ("decode", width, height), config.block_out_channels[0]))
    }
}

impl Encoder {
    /// The plan of a banded exact encode of one `width × height` image (see
    /// [`Decoder::plan_banded`]): conv_in and the down blocks in bands, the mid block and
    /// the output layers whole at the latent size.
    pub fn plan_banded(
        config: &VaeConfig,
        device: &Device,
        (width, height): (usize, usize),
        dtype: DType,
        budget: Option<usize>,
    ) -> Result<BandedPlan> {
        latent_size(config, (width, height))?;
        let schedule = encoder_schedule(config, (height, width));
        let parts = Parts {
            weights: encoder_weight_bytes(config, dtype, device),
            // The image in the encoder's dtype, alive for the f16 guard's rerun.
            base: device.allocation_bytes(config.in_channels * width * height * dtype.size_in_bytes()),
            whole_peak: encoder_latent_part(config, device, dtype, (height, width))?,
        };
        Ok(plan(&schedule, parts, device, dtype, budget, ("encode", width, height), config.block_out_channels[0]))
    }
}

/// The latent size of a `width × height` image, or the error that says why there is none.
fn latent_size(config: &VaeConfig, (width, height): (usize, usize)) -> Result<(usize, usize)> {
    config.validate()?;
    let up = config.upscale();
    if width == 0 || height == 0 || width % up != 0 || height % up != 0 {
        return Err(SdError::Latents(format!(
            "{width}x{height}: the image size must be a positive multiple of {up} (one latent pixel is {up}x{up})"
        )));
    }
    Ok((height / up, width / up))
}

fn map_bytes(device: &Device, dtype: DType, m: &MapSpec) -> usize {
    device.allocation_bytes(m.channels * m.h * m.w * dtype.size_in_bytes())
}

/// What the device holds besides the banded maps.
struct Parts {
    weights: usize,
    /// Live through the banded part (the latents, or the input image).
    base: usize,
    /// The peak of the part that runs whole (at the latent size), without the weights.
    whole_peak: usize,
}

fn plan(
    schedule: &MapSchedule,
    parts: Parts,
    device: &Device,
    dtype: DType,
    budget: Option<usize>,
    (run, width, height): (&'static str, usize, usize),
    full_channels: usize,
) -> BandedPlan {
    let Parts { weights, base, whole_peak } = parts;
    let band_bytes = match budget {
        None => DEFAULT_BAND_BYTES,
        Some(b) => (b.saturating_sub(weights + base) / 4).clamp(MIN_BAND_BYTES, DEFAULT_BAND_BYTES),
    };
    // Room for maps on the device beside the weights, the base and one band; the rest go
    // to host memory, or on a CPU (one memory: "the device") to disk.
    let room = match budget {
        Some(b) => b.saturating_sub(weights + base + band_bytes),
        None => usize::MAX,
    };
    let overflow = if device.is_cpu() { Home::Disk } else { Home::Host };
    let walk = place(schedule, &|m| map_bytes(device, dtype, m), room, overflow);
    // The largest band any layer runs (its rows within the map, with the halo).
    let band_set = schedule
        .maps
        .windows(2)
        .map(|p| {
            let (c, m) = (p[0].channels.max(p[1].channels), &p[1]);
            (band_rows(band_bytes, c, c, m.w, dtype).min(m.h) + 2) * band_row_bytes(c, c, m.w, dtype)
                + band_fixed_bytes(c, c, dtype)
        })
        .max()
        .unwrap_or(0);
    let device_peak = (weights + base + walk.device_peak + band_set).max(weights + whole_peak);
    let full = schedule.maps.iter().max_by_key(|m| m.h * m.w).expect("a banded run makes maps");
    BandedPlan {
        run,
        width,
        height,
        dtype,
        budget,
        banding: Banding { band_bytes, homes: walk.homes, disk_dir: std::env::temp_dir() },
        top_band_rows: band_rows(band_bytes, full_channels, full_channels, full.w, dtype).min(full.h),
        weights,
        device_peak,
        host_peak: if overflow == Home::Host { walk.overflow_peak } else { 0 },
        disk_peak: if overflow == Home::Disk { walk.overflow_peak } else { 0 },
        fits: budget.is_none_or(|b| device_peak <= b),
    }
}

struct Placement {
    homes: Vec<Home>,
    device_peak: usize,
    /// The peak of the maps placed at the overflow home.
    overflow_peak: usize,
}

/// Places each map as the schedule makes it: on the device while the live device maps and
/// it fit in `room`, else at `overflow` (host memory or disk). A map on disk is read back
/// whole when the run ends with it, so the maps the schedule never frees (the run's
/// output) stay on the device when the overflow is disk.
fn place(schedule: &MapSchedule, bytes: &dyn Fn(&MapSpec) -> usize, room: usize, overflow: Home) -> Placement {
    let freed: Vec<bool> = (0..schedule.maps.len()).map(|i| schedule.events.contains(&MapEvent::Free(i))).collect();
    let mut homes: Vec<Home> = Vec::with_capacity(schedule.maps.len());
    let (mut device, mut spilled, mut device_peak, mut overflow_peak) = (0usize, 0usize, 0usize, 0usize);
    for event in &schedule.events {
        match *event {
            MapEvent::Make(i) => {
                let n = bytes(&schedule.maps[i]);
                let stays = device + n <= room || (overflow == Home::Disk && !freed[i]);
                if stays {
                    device += n;
                    homes.push(Home::Device);
                } else {
                    spilled += n;
                    homes.push(overflow);
                }
                device_peak = device_peak.max(device);
                overflow_peak = overflow_peak.max(spilled);
            }
            MapEvent::Free(i) => {
                let n = bytes(&schedule.maps[i]);
                match homes[i] {
                    Home::Device => device -= n,
                    _ => spilled -= n,
                }
            }
        }
    }
    Placement { homes, device_peak, overflow_peak }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Model;

    #[test]
    fn maps_stay_on_the_device_while_they_fit_and_never_past_the_room() {
        let config = Model::Sd.config();
        let schedule = decoder_schedule(&config, (512, 512));
        let maps = &schedule.maps;
        let bytes = |m: &MapSpec| m.channels * m.h * m.w * 2;
        let all = place(&schedule, &bytes, usize::MAX, Home::Host);
        assert!(all.homes.iter().all(|h| *h == Home::Device));
        assert_eq!(all.overflow_peak, 0);
        let none = place(&schedule, &bytes, 0, Home::Host);
        assert!(none.homes.iter().all(|h| *h == Home::Host));
        assert_eq!(none.device_peak, 0);
        assert_eq!(none.overflow_peak, all.device_peak, "the same maps, all on one side");
        let largest = maps.iter().map(bytes).max().unwrap();
        for room in [largest / 2, largest, 2 * largest, 3 * largest] {
            let p = place(&schedule, &bytes, room, Home::Host);
            assert!(p.device_peak <= room, "room {room}: device peak {}", p.device_peak);
            assert_eq!(p.homes.len(), maps.len());
            // Everything that left the device went to the host, nothing more.
            assert!(p.overflow_peak <= all.device_peak);
        }
        // The 4096² decode's largest map (the last upsampler's, 256 channels at full size,
        // 8 GiB in f16) cannot stay beside the next resnet's two 4 GiB maps in 14 GiB.
        let p = place(&schedule, &bytes, 14 << 30, Home::Host);
        let i = maps.iter().position(|m| m.name == "decoder.up_blocks.2.upsamplers.0").unwrap();
        assert_eq!(maps[i].channels * maps[i].h * maps[i].w * 2, 8 << 30);
        assert!(p.homes.contains(&Home::Host) && p.device_peak <= 14 << 30);
    }

    #[test]
    fn the_cpu_plan_keeps_maps_in_memory_while_they_fit_then_on_disk_and_checks_the_size() {
        let config = Model::Sd.config();
        let p = Decoder::plan_banded(&config, &Device::cpu(), (512, 256), DType::F32, Some(8 << 30)).unwrap();
        assert!(p.banding.homes.iter().all(|h| *h == Home::Device) && p.host_peak == 0 && p.disk_peak == 0);
        // 4096² f32: one full-size map of 128 channels is 8 GiB, so 8 GB of RAM needs disk.
        let big = Decoder::plan_banded(&config, &Device::cpu(), (4096, 4096), DType::F32, Some(8_000_000_000)).unwrap();
        assert!(big.fits && big.device_peak <= 8_000_000_000, "{big}");
        assert!(big.banding.homes.contains(&Home::Disk) && !big.banding.homes.contains(&Home::Host), "{big}");
        assert_eq!(big.banding.homes.last(), Some(&Home::Device), "the image is read back whole: kept in memory");
        assert!(big.disk_peak >= 2 * (8 << 30) && big.host_peak == 0, "{big}");
        assert!(big.to_string().contains("maps in files in"), "{big}");
        assert_eq!(p.banding.homes.len(), decoder_schedule(&config, (32, 64)).maps.len());
        assert!(p.fits && p.device_peak > p.weights, "{p}");
        let e = Decoder::plan_banded(&config, &Device::cpu(), (500, 256), DType::F32, None).unwrap_err();
        assert!(e.to_string().contains("multiple of 8"), "{e}");
    }
}
