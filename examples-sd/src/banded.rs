//! The banded exact decode: the up blocks and the output layers run in horizontal bands of
//! output rows, so that the device never holds more than a band of any layer's working
//! tensors, and the whole feature maps between layers live on the device or in host
//! memory as the plan says ([`Banding::homes`]).
//!
//! It is the same function as the unbanded decode, not an approximation of it:
//! - a band's convolution reads its input rows with the halo its kernel needs (one row
//!   above and below for a 3x3), and pads with zeros only at the image's own edges;
//! - every GroupNorm normalises a band with the statistics of the whole map, gathered
//!   exactly while the map's bands were written ([`GroupStatsAccumulator`]): the sums do
//!   not depend on the band height;
//! - the latent-sized part (conv_in and the mid block with its attention, chunked over
//!   queries) runs whole on the device, as in the unbanded decode.
//!
//! With size-independent rounding (`ConvRounding::SizeIndependent`, which also makes the
//! unbanded decode normalise with exact statistics) a banded decode equals the unbanded one
//! bit for bit, whatever the bands (tests/banded.rs).

use crate::blocks::Resnet;
use crate::decoder::Decoder;
use crate::encoder::Encoder;
use crate::error::{Result, SdError};
use crate::map_file::FileMap;
use crate::ops;
use rocm_vision::nn::{Conv2d, GroupNorm};
use rocm_vision::{
    Conv2dParams, ConvEpilogue, DType, Device, GroupStats, GroupStatsAccumulator, HostTensor, Padding2d, Tensor,
};
use std::path::PathBuf;

/// Where a banded decode keeps a whole feature map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Home {
    Device,
    /// Host memory ([`HostTensor`]: page-locked on a GPU); each band is copied to the
    /// device to be read, and back when written, on the device's stream without the host
    /// waiting. On the CPU plain memory, like `Device`.
    Host,
    /// An unnamed file in [`Banding::disk_dir`] ([`crate::map_file`]); each band is read
    /// from it and written to it. For a CPU run whose maps do not fit its memory budget.
    Disk,
}

/// How a banded run goes: the plan's choices ([`crate::BandedPlan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Banding {
    /// The most bytes one band's working tensors may take (its input rows with their halo,
    /// their normalised copy, its output rows and their statistics): sets each layer's
    /// band height ([`band_rows`]).
    pub band_bytes: usize,
    /// Where each whole map lives, in the order the run makes them ([`MapSchedule`]).
    pub homes: Vec<Home>,
    /// Where maps at [`Home::Disk`] are kept.
    pub disk_dir: PathBuf,
}

/// Bands start and end on multiples of this many rows (but the map's last): the CPU's
/// Winograd convolutions round by a pixel's place on a grid of this period in output
/// coordinates ([`rocm_vision::conv_cpu::WINOGRAD_GRID`]), so a band cut elsewhere would
/// round its edge rows differently from the whole map.
pub const BAND_ALIGN: usize = rocm_vision::conv_cpu::WINOGRAD_GRID;

/// Output rows per band of a layer from `cin` to `cout` channels, `w` pixels wide, in
/// `dtype`, within `band_bytes`: a multiple of [`BAND_ALIGN`], at least one.
pub fn band_rows(band_bytes: usize, cin: usize, cout: usize, w: usize, dtype: DType) -> usize {
    let rows = (band_bytes.saturating_sub(band_fixed_bytes(cin, cout, dtype))
        / band_row_bytes(cin, cout, w, dtype).max(1))
    .saturating_sub(2);
    (rows / BAND_ALIGN * BAND_ALIGN).max(BAND_ALIGN)
}

/// A band's working bytes per output row: its input rows and their normalised copy, the
/// convolution's packed copy of them (the implicit GEMM's NHWC band: without room for it
/// the dispatcher falls back to direct convolution, ~20x slower on the H100), the output
/// rows and a residual's, and the output's f32 copy and squares for the statistics.
pub fn band_row_bytes(cin: usize, cout: usize, w: usize, dtype: DType) -> usize {
    let e = dtype.size_in_bytes();
    w * (3 * cin * e + 2 * cout * e + 2 * cout * 4)
}

/// The convolution's workspace a band needs besides its rows: the implicit GEMM's packed
/// weights of a 3x3 layer from `cin` to `cout` channels.
pub fn band_fixed_bytes(cin: usize, cout: usize, dtype: DType) -> usize {
    9 * cin * cout * dtype.size_in_bytes()
}

/// The bands `[r0, r1)` of `h` output rows, `rows` at a time.
pub fn bands(h: usize, rows: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..h).step_by(rows.max(1)).map(move |r0| (r0, (r0 + rows.max(1)).min(h)))
}

/// One whole map a banded run makes: its name (the layer that writes it), channels and
/// size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapSpec {
    pub name: String,
    pub channels: usize,
    pub h: usize,
    pub w: usize,
}

/// A whole map and, once it is complete, its group statistics.
struct Map {
    data: MapData,
    stats: Option<GroupStats>,
}

/// Where a map's values are. Clones share them (a resnet's output written over its input).
#[derive(Clone)]
enum MapData {
    Memory(Tensor),
    Host(HostTensor),
    Disk(FileMap),
}

impl Map {
    fn dims(&self) -> Result<[usize; 4]> {
        match &self.data {
            MapData::Memory(t) => dims4(t),
            MapData::Host(t) => Ok(t.dims().try_into().expect("host maps are made [1, C, H, W]")),
            MapData::Disk(f) => Ok(f.dims()),
        }
    }

    /// What `observe` sees of the map: the map, or for one in host memory or on disk
    /// (which is never read whole) an empty `[1, C, 0, W]` tensor.
    fn observed(&self, dtype: DType) -> Result<Tensor> {
        match &self.data {
            MapData::Memory(t) => Ok(t.clone()),
            MapData::Host(_) | MapData::Disk(_) => {
                let [n, c, _, w] = self.dims()?;
                Ok(Tensor::zeros(&[n, c, 0, w], dtype, &Device::cpu())?)
            }
        }
    }
}

/// The f16 overflow guard's rerun (after the output overflowed) checks each block and runs
/// the ones that overflow in f32; bands do not do that yet: the error that says so.
pub(crate) fn no_f32_rerun(what: &str) -> SdError {
    SdError::Output(format!(
        "the f16 {what} overflowed (inf/NaN) and a banded {what} cannot recompute its blocks in f32: \
         {what} with --dtype bf16 or f32"
    ))
}

/// The banded part of one decode or encode.
pub(crate) struct BandedRun<'a> {
    device: Device,
    dtype: DType,
    banding: &'a Banding,
    host: Device,
    /// Maps made so far (the index of the next one's home).
    made: usize,
    groups: usize,
}

impl<'a> BandedRun<'a> {
    /// A run on `device` (the network's: its rounding applies) in `dtype`.
    pub fn new(device: &Device, dtype: DType, groups: usize, banding: &'a Banding) -> BandedRun<'a> {
        BandedRun { device: device.clone(), dtype, banding, host: Device::cpu(), made: 0, groups }
    }

    fn device(&self) -> &Device {
        &self.device
    }

    fn next_home(&mut self) -> Home {
        let home = self.banding.homes.get(self.made).copied().unwrap_or(Home::Device);
        self.made += 1;
        home
    }

    fn new_map(&mut self, c: usize, h: usize, w: usize) -> Result<Map> {
        let data = match self.next_home() {
            Home::Host => MapData::Host(HostTensor::zeros(&[1, c, h, w], self.dtype, self.device())?),
            Home::Device => MapData::Memory(Tensor::zeros(&[1, c, h, w], self.dtype, self.device())?),
            Home::Disk => MapData::Disk(FileMap::create(&self.banding.disk_dir, [c, h, w], self.dtype)?),
        };
        Ok(Map { data, stats: None })
    }

    /// Rows `[r0, r1)` of `m` on the device, contiguous. (On the CPU the move to the
    /// network's device only re-labels the tensor: its convolutions then round as that
    /// device says.)
    fn rows(&self, m: &Map, r0: usize, r1: usize) -> Result<Tensor> {
        match &m.data {
            MapData::Memory(t) => Ok(t.narrow(2, r0, r1 - r0)?.contiguous()?.to_device(self.device())?),
            MapData::Host(t) => Ok(t.narrow_to_device(2, r0, r1 - r0)?),
            MapData::Disk(f) => f.read_rows(r0, r1, self.device()),
        }
    }

    /// Writes `band` (on the device) into rows `r0..` of `m`.
    fn write(&self, m: &Map, r0: usize, band: &Tensor) -> Result<()> {
        match &m.data {
            MapData::Memory(t) => Ok(t.slice_set(&band.to_device(t.device())?, 2, r0)?),
            MapData::Host(t) => Ok(t.write_narrow(2, r0, band)?),
            MapData::Disk(f) => f.write_rows(r0, band),
        }
    }

    /// The whole of `m`: where it is (a host map as a CPU tensor), or read from disk onto
    /// the device.
    fn whole(&self, m: Map) -> Result<Tensor> {
        let [_, _, h, _] = m.dims()?;
        match m.data {
            MapData::Memory(t) => Ok(t),
            MapData::Host(ref t) => Ok(t.to_tensor(&self.host)?),
            MapData::Disk(_) => self.rows(&m, 0, h),
        }
    }

    fn stats_of(m: &Map, what: &str) -> Result<GroupStats> {
        m.stats.clone().ok_or_else(|| SdError::Internal(format!("banded run: {what} read before it was complete")))
    }

    fn band_rows(&self, cin: usize, cout: usize, w: usize) -> usize {
        band_rows(self.banding.band_bytes, cin, cout, w, self.dtype)
    }

    /// Checks that the run made the maps its plan placed.
    fn check_made(&self, what: &str) -> Result<()> {
        if self.made != self.banding.homes.len() {
            return Err(SdError::Internal(format!(
                "banded {what} made {} maps, its plan placed {}",
                self.made,
                self.banding.homes.len()
            )));
        }
        Ok(())
    }

    /// The decoder's up blocks and output layers on `x`, the mid block's output (on the
    /// device): the image in the decoder's dtype, where the plan keeps it. `observe` sees
    /// each up block's output map.
    pub fn decode(mut self, dec: &Decoder, x: Tensor, observe: &mut dyn FnMut(&str, &Tensor)) -> Result<Tensor> {
        let stats = GroupStats::of(&x, self.groups)?;
        let data = match self.next_home() {
            Home::Host => {
                let map = HostTensor::zeros(x.dims(), self.dtype, self.device())?;
                map.write_narrow(2, 0, &x)?;
                MapData::Host(map)
            }
            Home::Disk => {
                let [_, c, h, w] = dims4(&x)?;
                let file = FileMap::create(&self.banding.disk_dir, [c, h, w], self.dtype)?;
                file.write_rows(0, &x)?;
                MapData::Disk(file)
            }
            _ => MapData::Memory(x.to_device(self.device())?),
        };
        drop(x);
        let mut x = Map { data, stats: Some(stats) };
        for (i, block) in dec.up_blocks().iter().enumerate() {
            for r in &block.resnets {
                x = self.resnet(r, x)?;
            }
            if let Some(up) = &block.upsampler {
                x = self.upsample_conv(up, x)?;
            }
            observe(&format!("decoder.up_blocks.{i}"), &x.observed(self.dtype)?);
        }
        let image = self.norm_conv(dec.norm_out(), dec.conv_out(), x)?;
        self.check_made("decode")?;
        observe("decoder.conv_out", &image);
        Ok(image)
    }

    /// The encoder's conv_in and down blocks on `image` (`[1, C, H, W]`, whole): the last
    /// down block's output, whole on the device (the mid block runs on it unbanded).
    /// `observe` sees each down block's output map.
    pub fn encode(mut self, enc: &Encoder, image: Tensor, observe: &mut dyn FnMut(&str, &Tensor)) -> Result<Tensor> {
        let image = Map { data: MapData::Memory(image.to_device(self.device())?), stats: None };
        let mut x = self.conv(enc.conv_in(), None, image)?;
        observe("encoder.conv_in", &x.observed(self.dtype)?);
        for (i, block) in enc.down_blocks().iter().enumerate() {
            for r in &block.resnets {
                x = self.resnet(r, x)?;
            }
            if let Some(down) = &block.downsampler {
                x = self.downsample_conv(down, x)?;
            }
            observe(&format!("encoder.down_blocks.{i}"), &x.observed(self.dtype)?);
        }
        self.check_made("encode")?;
        Ok(self.whole(x)?.to_device(self.device())?)
    }

    /// `conv(silu(norm(x)))` for output rows `[r0, r1)` of a 3x3 padding-1 `conv`, with
    /// `residual` (those rows) fused into its epilogue.
    fn norm_conv_band(
        &self,
        x: &Map,
        norm: Option<&GroupNorm>,
        conv: &Conv2d,
        (r0, r1): (usize, usize),
        residual: Option<&Tensor>,
    ) -> Result<Tensor> {
        let [_, _, h, _] = x.dims()?;
        let input = self.rows(x, r0.saturating_sub(1), (r1 + 1).min(h))?;
        let normed = match norm {
            Some(n) => n.forward_silu_with_stats(&input, &Self::stats_of(x, "a norm's input")?)?,
            None => input,
        };
        let params =
            Conv2dParams { padding: Padding2d::tblr(usize::from(r0 == 0), usize::from(r1 == h), 1, 1), ..conv.params };
        let epilogue = ConvEpilogue { activation: conv.activation, residual, scale: 1.0 };
        Ok(normed.conv2d_fused(&conv.weight, conv.bias.as_ref(), &params, &epilogue)?)
    }

    /// Writes `out`'s `rows`-row bands, each from `band(r0, r1)`, and gathers its
    /// statistics while they go by.
    fn fill(&self, mut out: Map, rows: usize, mut band: impl FnMut((usize, usize)) -> Result<Tensor>) -> Result<Map> {
        let [_, k, h, _] = out.dims()?;
        let mut acc = GroupStatsAccumulator::new(k, self.groups, self.device())?;
        for b in bands(h, rows) {
            let y = band(b)?;
            acc.add(&y)?;
            self.write(&out, b.0, &y)?;
        }
        out.stats = Some(acc.finish()?);
        Ok(out)
    }

    /// `Resnet::forward` band by band: conv1's output is a whole map (conv2 reads it with
    /// a halo); the output is written over the input when the channels stay (a band's
    /// residual is read before its rows are overwritten, and no later band reads them).
    fn resnet(&mut self, r: &Resnet, x: Map) -> Result<Map> {
        let [_, cin, h, w] = x.dims()?;
        let cout = r.conv1.weight.dims()[0];
        let h1 = self.new_map(cout, h, w)?;
        let h1 = self.fill(h1, self.band_rows(cin, cout, w), |band| {
            self.norm_conv_band(&x, Some(&r.norm1), &r.conv1, band, None)
        })?;
        let out =
            if r.shortcut.is_some() { self.new_map(cout, h, w)? } else { Map { data: x.data.clone(), stats: None } };
        self.fill(out, self.band_rows(cout, cout, w), |band| {
            let input = self.rows(&x, band.0, band.1)?;
            match &r.shortcut {
                // A narrowing shortcut (the decoder's) is fused as conv2's residual, as
                // the unbanded block does; a widening one is added after conv2.
                Some(sc) if cout <= cin => {
                    let skip = sc.forward(&input)?;
                    self.norm_conv_band(&h1, Some(&r.norm2), &r.conv2, band, Some(&skip))
                }
                Some(sc) => ops::add_assign(
                    self.norm_conv_band(&h1, Some(&r.norm2), &r.conv2, band, None)?,
                    &sc.forward(&input)?,
                ),
                None => self.norm_conv_band(&h1, Some(&r.norm2), &r.conv2, band, Some(&input)),
            }
        })
    }

    /// `ops::upsample2x_conv3x3` from a whole map into a whole map, band by band.
    fn upsample_conv(&mut self, conv: &Conv2d, x: Map) -> Result<Map> {
        let [_, c, h, w] = x.dims()?;
        let k = conv.weight.dims()[0];
        let (oh, ow) = (2 * h, 2 * w);
        let out = self.new_map(k, oh, ow)?;
        self.fill(out, self.band_rows(c, k, ow), |(r0, r1)| {
            // Upsampled rows [u0, u1) feed output rows [r0, r1); they come from source rows [s0, s1).
            let (u0, u1) = (r0.saturating_sub(1), (r1 + 1).min(oh));
            let (s0, s1) = (u0 / 2, (u1 - 1) / 2 + 1);
            let up = self.rows(&x, s0, s1)?.upsample_nearest2d(2 * (s1 - s0), ow)?.narrow(2, u0 - 2 * s0, u1 - u0)?;
            let params = Conv2dParams {
                padding: Padding2d::tblr(usize::from(r0 == 0), usize::from(r1 == oh), 1, 1),
                ..conv.params
            };
            Ok(up.conv2d(&conv.weight, conv.bias.as_ref(), &params)?.contiguous()?)
        })
    }

    /// `conv(silu(norm(x)))` (`conv(x)` without a norm) into a new map, band by band,
    /// gathering its statistics: the encoder's conv_in.
    fn conv(&mut self, conv: &Conv2d, norm: Option<&GroupNorm>, x: Map) -> Result<Map> {
        let [_, c, h, w] = x.dims()?;
        let k = conv.weight.dims()[0];
        let out = self.new_map(k, h, w)?;
        self.fill(out, self.band_rows(c, k, w), |band| self.norm_conv_band(&x, norm, conv, band, None))
    }

    /// The encoder's stride-2 downsampler (padded one row below and one column right,
    /// `encoder::downsample_params`) from a whole map into a whole map, band by band:
    /// output rows `[r0, r1)` read input rows `[2 r0, 2 r1 + 1)`, the last band the
    /// padding row.
    fn downsample_conv(&mut self, conv: &Conv2d, x: Map) -> Result<Map> {
        let [_, c, h, w] = x.dims()?;
        let k = conv.weight.dims()[0];
        let (oh, ow) = (h / 2, w / 2);
        let out = self.new_map(k, oh, ow)?;
        self.fill(out, self.band_rows(c, k, ow), |(r0, r1)| {
            let (i0, i1) = (2 * r0, (2 * r1 + 1).min(h));
            let params = Conv2dParams { padding: Padding2d::tblr(0, 2 * r1 + 1 - i1, 0, 1), ..conv.params };
            Ok(self.rows(&x, i0, i1)?.conv2d(&conv.weight, conv.bias.as_ref(), &params)?.contiguous()?)
        })
    }

    /// The output layers (norm_out + SiLU + conv_out) into the image map.
    fn norm_conv(&mut self, norm: &GroupNorm, conv: &Conv2d, x: Map) -> Result<Tensor> {
        let [_, c, h, w] = x.dims()?;
        let k = conv.weight.dims()[0];
        let image = self.new_map(k, h, w)?;
        let rows = self.band_rows(c, k, w);
        for band in bands(h, rows) {
            let y = self.norm_conv_band(&x, Some(norm), conv, band, None)?;
            self.write(&image, band.0, &y)?;
        }
        self.whole(image)
    }
}

/// What a banded run does with its whole maps, in order: makes map `i` (its home is
/// [`Banding::homes`]`[i]`) or frees it. The banded plan walks these to place the maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MapEvent {
    Make(usize),
    Free(usize),
}

/// The maps a banded run makes ([`MapSpec`], in order) and when it frees them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MapSchedule {
    pub maps: Vec<MapSpec>,
    pub events: Vec<MapEvent>,
}

impl MapSchedule {
    fn make(&mut self, name: String, channels: usize, h: usize, w: usize) -> usize {
        self.maps.push(MapSpec { name, channels, h, w });
        self.events.push(MapEvent::Make(self.maps.len() - 1));
        self.maps.len() - 1
    }

    fn free(&mut self, i: usize) {
        self.events.push(MapEvent::Free(i));
    }

    /// `BandedRun::resnet` on map `x`: conv1's map, the output written over the input
    /// unless the channels change.
    fn resnet(&mut self, name: String, x: usize, cin: usize, cout: usize) -> usize {
        let (h, w) = (self.maps[x].h, self.maps[x].w);
        let h1 = self.make(format!("{name}.conv1"), cout, h, w);
        if cin == cout {
            self.free(h1);
            return x;
        }
        let out = self.make(name, cout, h, w);
        self.free(h1);
        self.free(x);
        out
    }

    /// A layer from map `x` into a new `c × h × w` map (x freed).
    fn layer(&mut self, name: String, x: usize, c: usize, h: usize, w: usize) -> usize {
        let out = self.make(name, c, h, w);
        self.free(x);
        out
    }
}

/// The schedule of a banded decode of an `h × w` latent: the mid block's output (made
/// whole; its home says whether it moves to the host), the up blocks' maps, the image.
pub fn decoder_schedule(config: &crate::VaeConfig, (h, w): (usize, usize)) -> MapSchedule {
    let mut s = MapSchedule::default();
    let mut x = s.make("decoder.mid_block".into(), config.top_channels(), h, w);
    let n = config.num_up_blocks();
    for (i, (cin, cout)) in config.up_block_channels().into_iter().enumerate() {
        for j in 0..=config.layers_per_block {
            x = s.resnet(format!("decoder.up_blocks.{i}.resnets.{j}"), x, if j == 0 { cin } else { cout }, cout);
        }
        if i + 1 < n {
            let (h, w) = (2 * s.maps[x].h, 2 * s.maps[x].w);
            x = s.layer(format!("decoder.up_blocks.{i}.upsamplers.0"), x, cout, h, w);
        }
    }
    let (h, w) = (s.maps[x].h, s.maps[x].w);
    s.make("decoder.conv_out".into(), config.out_channels, h, w);
    s.free(x);
    s
}

/// The schedule of a banded encode of an `h × w` image: conv_in's map, the down blocks'
/// maps (the last one goes on, whole, to the mid block).
pub fn encoder_schedule(config: &crate::VaeConfig, (h, w): (usize, usize)) -> MapSchedule {
    let mut s = MapSchedule::default();
    let mut x = s.make("encoder.conv_in".into(), config.block_out_channels[0], h, w);
    let n = config.block_out_channels.len();
    for (i, (cin, cout)) in config.down_block_channels().into_iter().enumerate() {
        for j in 0..config.layers_per_block {
            x = s.resnet(format!("encoder.down_blocks.{i}.resnets.{j}"), x, if j == 0 { cin } else { cout }, cout);
        }
        if i + 1 < n {
            let (h, w) = (s.maps[x].h / 2, s.maps[x].w / 2);
            x = s.layer(format!("encoder.down_blocks.{i}.downsamplers.0"), x, cout, h, w);
        }
    }
    s
}

fn dims4(t: &Tensor) -> Result<[usize; 4]> {
    match *t.dims() {
        [n, c, h, w] => Ok([n, c, h, w]),
        ref d => Err(SdError::Internal(format!("banded decode: a map of shape {d:?}"))),
    }
}
