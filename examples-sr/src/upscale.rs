//! realcugan-ncnn-vulkan's processing around the network, and lossless tiling.
//!
//! Pre/post-processing (RealCUGAN::process_cpu, non-TTA, as the fixtures' script
//! `fixtures/make_fixtures.py` re-implements and checks it): samples · (1/max) in f32;
//! the size rounded up to a multiple of 2 (2x, 4x) or 4 (3x) with the extra rows/columns at
//! the bottom/right; reflect padding (mirror without repeating the edge) of 18 / 14 / 19
//! pixels (2x / 3x / 4x) plus that extra; the net; `out[:, :h·s, :w·s]`; `v·max + 0.5`, for
//! 4x plus the nearest-neighbour residual `in_padded[pad + i/4][pad + j/4]·max`; truncation
//! toward zero, then clamping to 0..max. `max` is 255 for 8-bit images and 65535 for
//! 16-bit ones (realcugan-ncnn-vulkan only reads 8-bit; 16-bit keeps the same arithmetic
//! at 16-bit precision). Alpha: bicubic ([`crate::bicubic`]) of the unpadded plane at
//! 0..max, truncated and clamped without the +0.5.
//!
//! Tiling. A tile is a rectangle of the rounded image whose origin (and, but for the last
//! tile in its row or column, size) is a multiple of [`Upscaler::tile_align`] (the
//! rounding multiple, which the model's downsampling factor divides, and on the CPU what
//! keeps each Winograd layer's transform grid where the untiled run has it), fed to the
//! net with its `pad` context pixels on every side taken from the padded whole image,
//! exactly the window of the untiled net input; a tile that is not the last in its row
//! (column) also gets [`Upscaler::far_extension`] more columns (rows) before its far
//! context, so that what Winograd's cut transform tiles change at the far edge stays in
//! the part the tile does not keep (see `net/margins.rs`).
//!
//! Every layer is a valid (unpadded) convolution, a strided or transposed one, a crop, or
//! elementwise, so each feature map of the tile is the corresponding window of the untiled feature map: a map of relative size `r`
//! (a [`Ratio`]) starts at untiled position `origin·r`. Its first `tile_size·r` rows and
//! columns equal the untiled ones; only a margin at the far (bottom/right) edge can
//! differ (a transposed convolution's last outputs miss taps that lie beyond the tile,
//! Winograd's last transform tiles are cut), and that margin stays in the context: the
//! net's crops and the tile's far extension keep it out of what the tile keeps.
//!
//! SE blocks average a feature map over the whole image. The tiles are run in passes: pass
//! `k` advances every tile to the `k`-th pooling layer and adds the tile's *own* part of
//! the map (its first `tile_size·r` rows and columns; the last tile in a row or column
//! owns the rest) to a per-channel [`ExactSum`]. The owned parts partition the untiled map
//! (checked against its shape), and the exact sum makes the total independent of the
//! partition, so the means are bit-identical to the untiled ones; the last pass runs the
//! tiles to the output. A tile's state between passes is kept when the memory budget
//! allows it (the official `forward_mean` cache), and recomputed from the input otherwise
//! (the same values: the means of the earlier passes are already known). Passes alternate
//! direction, so the tile a pass ends with starts the next one and is never parked.

use std::ops::Range;

use rocm_vision::{ChannelSums, Tensor};

use crate::Error;
use crate::auto_tile;
use crate::bicubic;
use crate::exact_sum::ExactSum;
use crate::image_io::{Image, Pixels};
use crate::net::{Means, Network, PoolInfo, Ratio, Run, Shape, Stop};

mod output;
mod padded;
mod tta;

use output::{Sample, quantize};
use padded::Padded;

/// How to cut the image into tiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TileSize {
    /// The largest square tile whose working memory fits the budget.
    Auto,
    /// One tile: the whole image.
    Whole,
    /// Tiles of at most this many input pixels per side (rounded down to the model's
    /// alignment).
    Fixed(usize),
}

/// Receives each tile's network output with the tile's rows and columns (input pixels of
/// the rounded image).
type TileSink<'a> = dyn FnMut(&Tensor, &Range<usize>, &Range<usize>) -> Result<(), Error> + 'a;

/// Options of one upscale.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub tile: TileSize,
    /// Memory one tile's run may use: its live feature maps and temporaries (what
    /// `TileSize::Auto` sizes the tile by). The decoded image, its padded copy and the
    /// output image are not counted.
    pub budget_bytes: usize,
    /// Memory for the tile states kept between SE passes; a state that does not fit is
    /// dropped and recomputed from the input in the next pass (same result, more time).
    pub cache_bytes: usize,
}

impl Options {
    /// One tile and no memory limits: the untiled reference.
    pub fn whole() -> Options {
        Options { tile: TileSize::Whole, budget_bytes: usize::MAX, cache_bytes: usize::MAX }
    }
}

/// The tiles of one image.
#[derive(Clone, Debug, PartialEq)]
pub struct TilePlan {
    pub width: usize,
    pub height: usize,
    /// Row and column ranges of the rounded image, in input pixels.
    pub rows: Vec<Range<usize>>,
    pub cols: Vec<Range<usize>>,
    /// Peak working memory of the largest tile (estimated from the graph; see
    /// [`Network::peak_bytes`]).
    pub tile_bytes: usize,
    /// Memory for tile states kept between SE passes ([`Options::cache_bytes`]).
    pub cache_bytes: usize,
    /// Parked states are shed ([`Network::shed`]): more of them fit, for the FLOPs of
    /// rebuilding their shed maps (chosen by [`auto_tile::prefer_shed`]).
    pub shed: bool,
}

impl TilePlan {
    pub fn tiles(&self) -> usize {
        self.rows.len() * self.cols.len()
    }

    /// The largest tile, `(width, height)` in input pixels.
    pub fn tile_size(&self) -> (usize, usize) {
        (self.cols.iter().map(|r| r.len()).max().unwrap_or(0), self.rows.iter().map(|r| r.len()).max().unwrap_or(0))
    }
}

/// Progress of [`Upscaler::upscale`]: tile runs done out of `total` (tiles × passes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    pub pass: usize,
    pub passes: usize,
    pub done: usize,
    pub total: usize,
}

/// What an upscale did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub tiles: usize,
    pub passes: usize,
    /// Tile runs restarted from the input because their state did not fit the budget.
    pub recomputed: usize,
    /// Maps dropped from parked states and rebuilt later ([`TilePlan::shed`]).
    pub shed_maps: usize,
    /// Largest total of tile states kept between passes.
    pub cached_bytes: usize,
    /// Where the time went: the padded input planes, the network runs (each pass up to
    /// its pooling layer included, device work waited for at each), and the output
    /// (download and quantisation into the image).
    pub input_time: std::time::Duration,
    pub network_time: std::time::Duration,
    pub output_time: std::time::Duration,
}

/// A Real-CUGAN network with realcugan-ncnn-vulkan's processing around it.
pub struct Upscaler {
    net: Network,
    prepadding: usize,
    multiple: usize,
    /// Period of the Winograd transform grids the device's engine may use (1: none).
    grid: usize,
    /// Tile origins and (but for the last) tile sizes are multiples of this.
    tile_align: usize,
    /// The 8-bit output samples read back from the device, kept from one tile and image to
    /// the next (page-locked on a GPU; see [`Upscaler::place_quantized`]).
    download: std::sync::Mutex<Option<rocm_vision::HostBuffer>>,
    /// The last image's padded input planes, whose memory the next image reuses.
    planes: std::sync::Mutex<Option<padded::Planes>>,
    /// An output image's samples given back by [`Upscaler::recycle`].
    spare_output: std::sync::Mutex<Option<Vec<u8>>>,
}

/// `(prepadding, size multiple)` of realcugan-ncnn-vulkan for a scale (src/main.cpp and
/// src/realcugan.cpp), the same for se, pro and nose.
pub fn realcugan_padding(scale: usize) -> Option<(usize, usize)> {
    match scale {
        2 => Some((18, 2)),
        3 => Some((14, 4)),
        4 => Some((19, 2)),
        _ => None,
    }
}

/// Per-channel exact sums of a `[1, C, H, W]` map, over its first `region = (rows, cols)`
/// (all of it when `None`).
pub fn channel_sums(blob: &Tensor, region: Option<(usize, usize)>) -> Result<Vec<ExactSum>, Error> {
    let dims = blob.dims();
    let [_, _, h, w] = <[usize; 4]>::try_from(dims)
        .map_err(|_| Error::Internal(format!("pooling a {}-D tensor {dims:?}", dims.len())))?;
    let (rh, rw) = region.unwrap_or((h, w));
    Ok(blob.channel_exact_sums(rh, rw)?)
}

/// The per-channel means from whole-image sums.
pub fn sums_to_means(sums: &[ExactSum], pool: &PoolInfo) -> Result<Vec<f32>, Error> {
    if sums.len() != pool.channels {
        return Err(Error::Internal(format!("{} channel sums for pooling layer '{}'", sums.len(), pool.layer)));
    }
    sums.iter()
        .map(|s| {
            if s.saw_non_finite() {
                return Err(Error::Input(format!(
                    "non-finite activations reached pooling layer '{}' (an f16/bf16 overflow? try --dtype f32)",
                    pool.layer
                )));
            }
            s.mean()
                .map(|m| m as f32)
                .ok_or_else(|| Error::Internal(format!("nothing was pooled in layer '{}'", pool.layer)))
        })
        .collect()
}

/// `len` split into `ceil(len / max)` ranges of whole `unit`s, as equal as possible (the
/// first ones one unit longer); the last one ends at `len`, which need not be a multiple
/// of `unit` (it is one unit shorter than a whole number of them at most).
fn split(len: usize, max: usize, unit: usize) -> Vec<Range<usize>> {
    let units = len.div_ceil(unit);
    let count = len.div_ceil(max.max(unit)).max(1);
    let (base, rem) = (units / count, units % count);
    let mut start = 0;
    (0..count)
        .map(|i| {
            let n = (base + usize::from(i < rem)) * unit;
            let r = start..(start + n).min(len);
            start += n;
            r
        })
        .collect()
}

/// The order pass `k` runs `n` tiles in: forward in even passes, backward in odd ones, so
/// that the tile a pass ends with starts the next one. Its state at the pooling layer is
/// then never parked: once the pass's means are known it runs on (see
/// `auto_tile::pass_flops`), and the cache needs room for the other tiles' states only.
fn pass_order(k: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |j| if k % 2 == 0 { j } else { n - 1 - j })
}

impl Upscaler {
    /// Wraps a network whose scale realcugan-ncnn-vulkan knows (2, 3, 4).
    pub fn new(net: Network) -> Result<Upscaler, Error> {
        let (prepadding, multiple) = realcugan_padding(net.scale())
            .ok_or_else(|| Error::Model(format!("scale {} has no realcugan padding (2, 3 or 4)", net.scale())))?;
        if multiple % net.align() != 0 {
            return Err(Error::Model(format!(
                "the network downsamples by {}, which does not divide realcugan's size multiple {multiple} for {}x",
                net.align(),
                net.scale()
            )));
        }
        // The CPU engine may run the 3x3 layers with Winograd, whose rounding depends on a
        // pixel's place on the transform grid (see the module doc); no GPU algorithm does.
        let grid = if net.device().is_cpu() { conv_cpu::WINOGRAD_GRID } else { 1 };
        let ga = net.grid_align(grid);
        let tile_align = (1..=multiple).map(|k| k * ga).find(|v| v % multiple == 0).unwrap_or(ga * multiple);
        Ok(Upscaler {
            net,
            prepadding,
            multiple,
            grid,
            tile_align,
            download: Default::default(),
            planes: Default::default(),
            spare_output: Default::default(),
        })
    }

    /// Tile origins are multiples of this (input pixels), and so are the sizes of all tiles
    /// but the last in each row and column: the rounding multiple, and what keeps every
    /// Winograd layer's transform grid where the untiled run has it.
    pub fn tile_align(&self) -> usize {
        self.tile_align
    }

    /// Extra input rows and columns beyond a tile's own part (and before its far context)
    /// that keep the tile's own part of every pooled map and of the output bit-identical to
    /// the untiled run, for a tile of `w x h` input pixels that is not the last in its
    /// column (rows) or row (columns): the smallest multiples of [`Self::tile_align`] whose
    /// far-edge differences ([`Network::far_edge_clean`]) stay in the context.
    pub fn far_extension(&self, w: usize, h: usize) -> Result<(usize, usize), Error> {
        let (a, p) = (self.tile_align, self.prepadding);
        let (mut ext_h, mut ext_w) = (None, None);
        for x in (0..=64 * a).step_by(a) {
            let (ok_h, ok_w) = self.net.far_edge_clean(h + x + 2 * p, w + x + 2 * p, h, w, self.grid)?;
            if ok_h && ext_h.is_none() {
                ext_h = Some(x);
            }
            if ok_w && ext_w.is_none() {
                ext_w = Some(x);
            }
            if let (Some(eh), Some(ew)) = (ext_h, ext_w) {
                return Ok((eh, ew));
            }
        }
        Err(Error::Model(format!(
            "no extra context up to {} pixels keeps a {w}x{h} tile's own part equal to the untiled run's",
            64 * a
        )))
    }

    pub fn network(&self) -> &Network {
        &self.net
    }

    pub fn scale(&self) -> usize {
        self.net.scale()
    }

    /// Context pixels on each side of the net input.
    pub fn prepadding(&self) -> usize {
        self.prepadding
    }

    /// Image sizes are rounded up to a multiple of this (tile origins: [`Self::tile_align`]).
    pub fn multiple(&self) -> usize {
        self.multiple
    }

    /// Peak working memory of a `w x h` tile (input pixels, before padding), with the
    /// [`Self::far_extension`] a tile that is not the last one runs with.
    pub fn tile_bytes(&self, w: usize, h: usize) -> Result<usize, Error> {
        let (eh, ew) = self.far_extension(w, h)?;
        self.net.peak_bytes(h + eh + 2 * self.prepadding, w + ew + 2 * self.prepadding)
    }

    /// The tiles for a `width x height` image.
    pub fn plan(&self, width: usize, height: usize, opts: &Options) -> Result<TilePlan, Error> {
        if width == 0 || height == 0 {
            return Err(Error::Input(format!("empty image ({width}x{height})")));
        }
        let (m, a) = (self.multiple, self.tile_align);
        let (hr, wr) = (height.div_ceil(m) * m, width.div_ceil(m) * m);
        let longest = hr.max(wr);
        // A GPU holds the 8-bit padded input while tiles run (`Padded::make_resident`), and
        // the 8-bit output of the tiles done until the last (`upscale_into`).
        let resident = if self.net.device().is_rocm() {
            Padded::resident_bytes(hr + 2 * self.prepadding, wr + 2 * self.prepadding)
                + 3 * width * height * self.scale() * self.scale()
        } else {
            0
        };
        let opts = &Options { budget_bytes: opts.budget_bytes.saturating_sub(resident), ..*opts };
        let side = match opts.tile {
            TileSize::Whole => longest,
            TileSize::Fixed(n) if n < a => {
                return Err(Error::Usage(format!("tile size {n} is below this model's minimum of {a} pixels")));
            }
            TileSize::Fixed(n) => n / a * a,
            TileSize::Auto => {
                let fits = |units: usize| -> Result<bool, Error> {
                    let t = units * a;
                    Ok(self.tile_bytes(t.min(wr), t.min(hr))? <= opts.budget_bytes)
                };
                if !fits(1)? {
                    return Err(Error::Usage(format!(
                        "a memory budget of {} is too small: the smallest tile ({a}x{a} pixels) needs {}",
                        conv_engine::format_bytes(opts.budget_bytes),
                        conv_engine::format_bytes(self.tile_bytes(a.min(wr), a.min(hr))?)
                    )));
                }
                // Largest fitting side: binary search over whole units (memory grows with
                // the side); then the cheapest side up to it (crate::auto_tile).
                let (mut lo, mut hi) = (1, longest.div_ceil(a));
                while lo < hi {
                    let mid = (lo + hi).div_ceil(2);
                    if fits(mid)? {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                let sides = auto_tile::candidate_sides(longest, lo * a, a);
                let run_overhead = if self.net.device().is_rocm() {
                    auto_tile::gpu_run_overhead_flops(self.net.dtype() != rocm_vision::DType::F32)
                } else {
                    0
                };
                auto_tile::cheapest(&sides, run_overhead, |side| {
                    let (rows, cols) = (split(hr, side, a), split(wr, side, a));
                    let (eh, ew) = self.far_extension(cols[0].len(), rows[0].len())?;
                    let (eh, ew) = (if rows.len() > 1 { eh } else { 0 }, if cols.len() > 1 { ew } else { 0 });
                    let (th, tw) = (rows[0].len() + eh + 2 * self.prepadding, cols[0].len() + ew + 2 * self.prepadding);
                    let tile_bytes = self.net.peak_bytes(th, tw)?;
                    Ok((self.candidate(&rows, &cols, th, tw)?, self.state_cache_bytes(opts, tile_bytes)))
                })?
            }
        };
        let rows = split(hr, side, a);
        let cols = split(wr, side, a);
        let tile_bytes = self.tile_bytes(cols[0].len(), rows[0].len())?;
        let cache_bytes = self.state_cache_bytes(opts, tile_bytes);
        let shed = if rows.len() * cols.len() > 1 && !self.net.pools().is_empty() {
            let (eh, ew) = self.far_extension(cols[0].len(), rows[0].len())?;
            let (eh, ew) = (if rows.len() > 1 { eh } else { 0 }, if cols.len() > 1 { ew } else { 0 });
            let (th, tw) = (rows[0].len() + eh + 2 * self.prepadding, cols[0].len() + ew + 2 * self.prepadding);
            auto_tile::prefer_shed(&self.candidate(&rows, &cols, th, tw)?, cache_bytes)
        } else {
            false
        };
        Ok(TilePlan { width, height, rows, cols, tile_bytes, cache_bytes, shed })
    }

    /// What the passes over `rows x cols` tiles of `th x tw` net input pixels do, for
    /// [`auto_tile`]'s pricing.
    fn candidate(
        &self,
        rows: &[Range<usize>],
        cols: &[Range<usize>],
        th: usize,
        tw: usize,
    ) -> Result<auto_tile::Candidate, Error> {
        Ok(auto_tile::Candidate {
            tiles: rows.len() * cols.len(),
            flops: self.net.flops(th, tw)?,
            pools: self.net.pool_points(th, tw)?,
            replay_flops: self.net.replay_flops(th, tw)?,
        })
    }

    /// Bytes for the tile states kept between SE passes. On a GPU they stay in device
    /// memory beside the next tile's run, so they share its budget (a state that does not
    /// fit is recomputed).
    fn state_cache_bytes(&self, opts: &Options, tile_bytes: usize) -> usize {
        if self.net.device().is_cpu() {
            opts.cache_bytes
        } else {
            opts.cache_bytes.min(opts.budget_bytes.saturating_sub(tile_bytes))
        }
    }

    /// Upscales `img` tile by tile as `plan` says.
    pub fn upscale(&self, img: &Image, plan: &TilePlan, progress: &mut dyn FnMut(Progress)) -> Result<Image, Error> {
        self.upscale_with_stats(img, plan, progress).map(|(img, _)| img)
    }

    /// [`Self::upscale`], also returning what the tiling did.
    pub fn upscale_with_stats(
        &self,
        img: &Image,
        plan: &TilePlan,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Image, Stats), Error> {
        let (w, h, s) = (img.width, img.height, self.scale());
        if (plan.width, plan.height) != (w, h) {
            return Err(Error::Internal(format!("a plan for {}x{} used on a {w}x{h} image", plan.width, plan.height)));
        }
        let started = std::time::Instant::now();
        // 4x adds the input to the output on the host, so its planes stay there.
        let padded = self.padded_input(img, s != 4)?;
        let input_time = started.elapsed();
        let n = w * s * h * s * img.channels;
        let done = match img.pixels {
            Pixels::U8(_) => self.upscale_into(self.output_u8(n), img, plan, &padded, input_time, progress),
            Pixels::U16(_) => self.upscale_into(vec![0u16; n], img, plan, &padded, input_time, progress),
        };
        if padded.host().is_some() {
            *self.planes.lock().unwrap_or_else(|e| e.into_inner()) = Some(padded.into_planes());
        }
        done
    }

    /// The tiles of `plan` through the network into `out` (the image's own sample type),
    /// then [`Self::finish`].
    fn upscale_into<S: Sample>(
        &self,
        mut out: Vec<S>,
        img: &Image,
        plan: &TilePlan,
        padded: &Padded,
        input_time: std::time::Duration,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Image, Stats), Error> {
        let mut stats = Stats::default();
        // 8-bit output on a GPU: each tile is quantised there as it finishes and read back
        // after the last one, so the final pass queues tile after tile without waiting.
        let deferred = self.scale() != 4 && self.net.device().is_rocm() && matches!(img.pixels, Pixels::U8(_));
        let mut pending: Vec<(Tensor, Range<usize>, Range<usize>)> = Vec::new();
        self.run_tiles(
            padded,
            &plan.rows,
            &plan.cols,
            plan.cache_bytes,
            plan.shed,
            progress,
            &mut stats,
            &mut |y, rows, cols| {
                if deferred {
                    pending.push((self.quantized_block(y, rows, cols, img)?, rows.clone(), cols.clone()));
                    Ok(())
                } else {
                    self.write_tile(y, rows, cols, padded, img, &mut out)
                }
            },
            !deferred,
        )?;
        if !pending.is_empty() {
            let waited = std::time::Instant::now();
            self.net.device().synchronize()?;
            stats.network_time += waited.elapsed();
            let written = std::time::Instant::now();
            for (q, rows, cols) in pending.drain(..) {
                self.place_quantized(&q, &rows, &cols, img, &mut out)?;
            }
            stats.output_time += written.elapsed();
        }
        self.finish(img, out, img.max_value(), input_time, stats)
    }

    /// Runs every tile of `padded` (the rows and columns of its rounded image) through
    /// the network in passes: one per SE pooling layer (whole-image means), then the last
    /// one, whose output of each tile goes to `sink` (after the device is synchronised when
    /// `host_sink`: the sink reads the tile on the host, and the wait is network time).
    #[allow(clippy::too_many_arguments)]
    fn run_tiles(
        &self,
        padded: &Padded,
        plan_rows: &[Range<usize>],
        plan_cols: &[Range<usize>],
        cache_bytes: usize,
        shed: bool,
        progress: &mut dyn FnMut(Progress),
        stats: &mut Stats,
        sink: &mut TileSink<'_>,
        host_sink: bool,
    ) -> Result<(), Error> {
        let p = self.prepadding;
        let (hp, wp) = (padded.h, padded.w);
        let tiles: Vec<(Range<usize>, Range<usize>)> =
            plan_rows.iter().flat_map(|r| plan_cols.iter().map(move |c| (r.clone(), c.clone()))).collect();
        if plan_rows.last().map(|r| r.end + 2 * p) != Some(hp) || plan_cols.last().map(|c| c.end + 2 * p) != Some(wp) {
            return Err(Error::Internal("the tiles do not cover the rounded image".into()));
        }
        let pools = self.net.pools();
        let passes = pools.len() + 1;
        let total = tiles.len() * passes;
        stats.tiles = tiles.len();
        stats.passes = passes;
        let mut states: Vec<Option<(Run, usize)>> = (0..tiles.len()).map(|_| None).collect();
        let mut cached = 0usize;
        let mut means: Means = vec![None; pools.len()];
        let last_row = plan_rows.len() - 1;
        let last_col = plan_cols.len() - 1;
        // Every tile but the last in its column (row) reads this many more rows (columns)
        // past its own part, up to the rounded image's end (see `far_extension`).
        let (hr, wr) = (hp - 2 * p, wp - 2 * p);
        let (ext_h, ext_w) = match (plan_rows.first(), plan_cols.first()) {
            (Some(r), Some(c)) => self.far_extension(c.len(), r.len())?,
            _ => (0, 0),
        };
        let windows: Vec<(Range<usize>, Range<usize>)> = tiles
            .iter()
            .map(|(rows, cols)| (rows.start..(rows.end + ext_h).min(hr), cols.start..(cols.end + ext_w).min(wr)))
            .collect();
        let start_or_resume =
            |i: usize, states: &mut Vec<Option<(Run, usize)>>, cached: &mut usize| match states[i].take() {
                Some((run, bytes)) => {
                    *cached -= bytes;
                    Ok::<_, Error>((run, false))
                }
                None => {
                    let (rows, cols) = &windows[i];
                    Ok((self.net.start(padded.window(rows, cols, p, self.net.device())?)?, true))
                }
            };
        let network_started = std::time::Instant::now();
        let output_before = stats.output_time;
        let device = self.net.device();
        if tiles.len() > 1 {
            padded.make_resident(device)?;
        }
        // On a GPU the allocator says what the kept states really hold (the sum of
        // `Run::live_bytes` is a model of it); a state is kept only if both fit.
        let live_before = device.live_memory();

        for (k, pool) in pools.iter().enumerate() {
            // Summed where the maps are and read once per pass: the host queues every
            // tile of the pass without waiting for the device in between.
            let mut sums = ChannelSums::new(pool.channels, device)?;
            for (n, i) in pass_order(k, tiles.len()).enumerate() {
                let (rows, cols) = &tiles[i];
                let (mut run, fresh) = start_or_resume(i, &mut states, &mut cached)?;
                if fresh && k > 0 {
                    stats.recomputed += 1;
                }
                let blob = match self.net.advance(&mut run, &means)? {
                    Stop::Pool { pool: at, blob } if at == k => blob,
                    Stop::Pool { pool: at, .. } => {
                        return Err(Error::Internal(format!("pass {k} stopped at pooling layer {at}")));
                    }
                    Stop::Done(_) => return Err(Error::Internal(format!("pass {k} ran past its pooling layer"))),
                };
                let dims = blob.dims().to_vec();
                let own = |n: usize, full: usize, last: bool| -> Result<usize, Error> {
                    if last {
                        return Ok(full);
                    }
                    own_extent(pool.ratio, n, full, &pool.layer)
                };
                let region = (
                    own(rows.len(), dims[2], i / plan_cols.len() == last_row)?,
                    own(cols.len(), dims[3], i % plan_cols.len() == last_col)?,
                );
                sums.add(&blob, region.0, region.1)?;
                drop(blob);
                // The pass's last tile is the next pass's first (the order turns): its state
                // goes on as its own run's working memory, never into the cache.
                let last = n + 1 == tiles.len();
                if shed && !last {
                    stats.shed_maps += self.net.shed(&mut run)?;
                }
                let bytes = run.live_bytes();
                let held = device.live_memory().zip(live_before).map(|(now, before)| now.saturating_sub(before));
                if last || (cached + bytes <= cache_bytes && held.is_none_or(|h| h <= cache_bytes)) {
                    cached += bytes;
                    states[i] = Some((run, bytes));
                }
                stats.cached_bytes = stats.cached_bytes.max(cached);
                progress(Progress { pass: k + 1, passes, done: k * tiles.len() + n + 1, total });
            }
            let sums = sums.finish()?;
            self.check_coverage(pool, &sums, hp, wp)?;
            means[k] = Some(sums_to_means(&sums, pool)?);
        }

        for (n, i) in pass_order(pools.len(), tiles.len()).enumerate() {
            let (rows, cols) = &tiles[i];
            let (mut run, fresh) = start_or_resume(i, &mut states, &mut cached)?;
            if fresh && !pools.is_empty() {
                stats.recomputed += 1;
            }
            let y = match self.net.advance(&mut run, &means)? {
                Stop::Done(t) => t,
                Stop::Pool { .. } => return Err(Error::Internal("the last pass stopped at a pooling layer".into())),
            };
            drop(run);
            if host_sink {
                self.net.device().synchronize()?;
            }
            let written = std::time::Instant::now();
            sink(&y, rows, cols)?;
            stats.output_time += written.elapsed();
            progress(Progress { pass: passes, passes, done: (passes - 1) * tiles.len() + n + 1, total });
        }
        stats.network_time += network_started.elapsed().saturating_sub(stats.output_time.saturating_sub(output_before));
        Ok(())
    }

    /// The output image from its RGB samples `out` (interleaved, `img.channels` per pixel):
    /// the alpha plane upscaled bicubically, 8-bit samples for an 8-bit input.
    fn finish<S: Sample>(
        &self,
        img: &Image,
        mut out: Vec<S>,
        maxv: f32,
        input_time: std::time::Duration,
        mut stats: Stats,
    ) -> Result<(Image, Stats), Error> {
        let (w, h, s) = (img.width, img.height, self.scale());
        let (ow, oh) = (w * s, h * s);
        let out_channels = img.channels;
        if img.has_alpha() {
            let alpha: Vec<f32> = (0..w * h).map(|i| img.sample(i * 4 + 3)).collect();
            let up = bicubic::upscale_plane(&alpha, w, h, s);
            for (i, v) in up.into_iter().enumerate() {
                out[i * 4 + 3] = S::from_level(quantize(v, maxv));
            }
        }
        let pixels = S::into_pixels(out);
        stats.input_time = input_time;
        Ok((Image { width: ow, height: oh, channels: out_channels, pixels, grey: img.grey }, stats))
    }

    /// The pooled counts must be the untiled map's pixel count: the tiles' own parts
    /// partition it.
    fn check_coverage(&self, pool: &PoolInfo, sums: &[ExactSum], hp: usize, wp: usize) -> Result<(), Error> {
        let want = match self.net.blob_shape(pool.blob, hp, wp)? {
            Shape::Image { h, w, .. } => (h * w) as u64,
            Shape::Vector(_) => return Err(Error::Internal(format!("pooling layer '{}' reads a vector", pool.layer))),
        };
        match sums.iter().find(|s| s.count() != want) {
            None => Ok(()),
            Some(s) => Err(Error::Internal(format!(
                "the tiles pooled {} pixels per channel in layer '{}', the whole image has {want}",
                s.count(),
                pool.layer
            ))),
        }
    }

    /// The padded input planes (8-bit levels on a GPU, normalised there after the upload:
    /// a quarter of the bytes to copy); with `on_device`, made on the GPU when there is one
    /// and the image is 8-bit ([`Padded::on_device`]).
    fn padded_input(&self, img: &Image, on_device: bool) -> Result<Padded, Error> {
        let device = self.net.device();
        if on_device
            && device.is_rocm()
            && let Some(padded) = Padded::on_device(img, self.prepadding, self.multiple, device)?
        {
            return Ok(padded);
        }
        let reuse = self.planes.lock().unwrap_or_else(|e| e.into_inner()).take();
        Ok(Padded::of(img, self.prepadding, self.multiple, device.is_rocm(), reuse))
    }
}

/// The first `n·ratio` pixels (along one axis) of a tile's `full`-pixel feature map are
/// the tile's own.
fn own_extent(ratio: Ratio, n: usize, full: usize, layer: &str) -> Result<usize, Error> {
    ratio.of(n).filter(|&k| k > 0 && k <= full).ok_or_else(|| {
        Error::Internal(format!(
            "a tile of {n} pixels does not own a whole part of the {full}-pixel map pooled by '{layer}' \
             (size ratio {}/{})",
            ratio.num, ratio.den
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_even_and_aligned() {
        assert_eq!(split(100, 40, 2), vec![0..34, 34..68, 68..100]);
        assert_eq!(split(8, 100, 4), vec![0..8]);
        assert_eq!(split(12, 4, 4), vec![0..4, 4..8, 8..12]);
        let r = split(1080, 256, 4);
        assert_eq!(r.len(), 5);
        assert!(r.iter().all(|r| r.start % 4 == 0 && r.len() <= 256 && r.len() % 4 == 0));
        assert_eq!(r.last().unwrap().end, 1080);
    }
}
