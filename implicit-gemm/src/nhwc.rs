//! The NHWC implicit-GEMM layout of one chunk of a convolution: which input rows are
//! packed into the channels-last band, how many channel slots a group gets, and each
//! phase of the chunk as a forward convolution over that band (the GPU kernels of
//! `igemm_mma.hip` run one launch per phase). Device-independent, so that the CPU tests
//! check it index for index against the f64 reference.

use conv_engine::geometry::{ConvGeometry, ConvKind, Phase, phases};
use kernels::Conv2dAbi;
use std::ops::Range;

/// Channel slots per group of the packed input and weights: channels per group rounded up
/// to one 16-byte vector (8 f16/bf16, 4 f32).
pub fn padded_channels(cg: usize, elem_bytes: usize) -> usize {
    cg.next_multiple_of(16 / elem_bytes)
}

/// Whether the NHWC kernels can run `g` at all (the padding masks have 32 bits per
/// dimension; indices are 32-bit inside a launch).
pub fn nhwc_supported(g: &ConvGeometry) -> bool {
    let [pp, qq] = g.out_hw();
    g.kernel[0] <= 32
        && g.kernel[1] <= 32
        && (g.batch * pp * qq) < (1 << 31)
        && g.batch <= 65535
        && g.out_channels < (1 << 30)
        && g.in_channels < (1 << 30)
}

/// Filter taps of a phase as two arithmetic progressions (the taps of [`phases`] are
/// always a product of filter rows and columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TapGrid {
    pub r0: usize,
    pub rstep: usize,
    pub nr: usize,
    pub dh0: isize,
    pub ddh: isize,
    pub s0: usize,
    pub sstep: usize,
    pub ns: usize,
    pub dw0: isize,
    pub ddw: isize,
}

impl TapGrid {
    pub fn taps(&self) -> usize {
        self.nr * self.ns
    }
}

/// The taps of `ph` as a grid, or `None` if they are not one (never for [`phases`]).
pub fn tap_grid(ph: &Phase) -> Option<TapGrid> {
    let mut rows: Vec<(usize, isize)> = Vec::new();
    let mut cols: Vec<(usize, isize)> = Vec::new();
    for t in &ph.taps {
        if !rows.iter().any(|&(r, _)| r == t.r) {
            rows.push((t.r, t.dh));
        }
        if !cols.iter().any(|&(s, _)| s == t.s) {
            cols.push((t.s, t.dw));
        }
    }
    let prog = |v: &[(usize, isize)]| -> Option<(usize, usize, isize, isize)> {
        let Some(&(a0, d0)) = v.first() else { return Some((0, 1, 0, 0)) };
        let (step, dstep) = if v.len() > 1 { (v[1].0.checked_sub(a0)?, v[1].1 - d0) } else { (1, 0) };
        for (i, &(a, d)) in v.iter().enumerate() {
            if a != a0 + i * step || d != d0 + i as isize * dstep {
                return None;
            }
        }
        Some((a0, step.max(1), d0, dstep))
    };
    let (r0, rstep, dh0, ddh) = prog(&rows)?;
    let (s0, sstep, dw0, ddw) = prog(&cols)?;
    if rows.len() * cols.len() != ph.taps.len() {
        return None;
    }
    Some(TapGrid { r0, rstep, nr: rows.len(), dh0, ddh, s0, sstep, ns: cols.len(), dw0, ddw })
}

/// One kernel launch of a chunk: a phase as a forward convolution over the packed band.
#[derive(Clone, Copy, Debug)]
pub struct PhaseLaunch {
    /// The forward convolution over the band that computes the phase's grid.
    pub params: Conv2dAbi,
    pub taps: TapGrid,
    /// Output element offset of grid cell (0, 0) of image 0 of the chunk.
    pub out_offset: usize,
    /// Output strides of the phase grid in elements: image, channel, grid row, grid column.
    pub view: [i64; 4],
    /// Output pixels of the phase over the chunk's images (GEMM M).
    pub m: usize,
}

/// How one chunk (images × output rows) runs on the NHWC kernels.
#[derive(Clone, Debug)]
pub struct ChunkLayout {
    /// Input rows packed into the NHWC band.
    pub band: Range<usize>,
    /// Channel slots per group ([`padded_channels`]).
    pub cgp: usize,
    pub phases: Vec<PhaseLaunch>,
}

/// Why a chunk has no NHWC layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutError;

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a phase's filter taps are not a grid of rows and columns")
    }
}

impl std::error::Error for LayoutError {}

/// The layout of `images` images × output `rows` of `g` with elements of `elem_bytes`.
pub fn chunk_layout(
    g: &ConvGeometry,
    images: usize,
    rows: Range<usize>,
    elem_bytes: usize,
) -> Result<ChunkLayout, LayoutError> {
    let [pp, qq] = g.out_hw();
    let [h, _] = g.in_size;
    let cgp = padded_channels(g.in_channels_per_group(), elem_bytes);
    let phases = phases(g, rows);
    // The input rows any tap of any phase reads, clipped to the input.
    let (mut lo, mut hi) = (isize::MAX, isize::MIN);
    let mut grids = Vec::with_capacity(phases.len());
    for ph in &phases {
        let t = tap_grid(ph).ok_or(LayoutError)?;
        if t.nr > 0 && t.ns > 0 && ph.rows > 0 {
            let dmin = t.dh0.min(t.dh0 + (t.nr as isize - 1) * t.ddh);
            let dmax = t.dh0.max(t.dh0 + (t.nr as isize - 1) * t.ddh);
            lo = lo.min(ph.base0[0] + dmin);
            hi = hi.max(ph.base0[0] + (ph.rows as isize - 1) * ph.base_step[0] + dmax);
        }
        grids.push(t);
    }
    let band = if lo > hi {
        0..0
    } else {
        let a = lo.clamp(0, h as isize) as usize;
        let b = (hi + 1).clamp(0, h as isize) as usize;
        a..b.max(a)
    };
    let mut out = Vec::with_capacity(phases.len());
    for (ph, t) in phases.iter().zip(grids) {
        if ph.rows == 0 || ph.cols == 0 {
            continue;
        }
        // A phase without taps still writes its pixels (bias only): one empty tap row.
        let (nr, ns) = if t.nr == 0 || t.ns == 0 { (0, 1) } else { (t.nr, t.ns) };
        let params = Conv2dAbi {
            n: images as i32,
            c: g.in_channels as i32,
            h: band.len() as i32,
            w: g.in_size[1] as i32,
            k: g.out_channels as i32,
            r: nr as i32,
            s: ns as i32,
            p: ph.rows as i32,
            q: ph.cols as i32,
            stride_h: ph.base_step[0] as i32,
            stride_w: ph.base_step[1] as i32,
            pad_h: -(ph.base0[0] + t.dh0 - band.start as isize) as i32,
            pad_w: -(ph.base0[1] + t.dw0) as i32,
            dil_h: t.ddh as i32,
            dil_w: t.ddw as i32,
            groups: g.groups as i32,
        };
        out.push(PhaseLaunch {
            params,
            taps: TapGrid { nr, ns, ..t },
            out_offset: ph.row0 * qq + ph.col0,
            view: [(g.out_channels * pp * qq) as i64, (pp * qq) as i64, (ph.row_step * qq) as i64, ph.col_step as i64],
            m: images * ph.rows * ph.cols,
        });
    }
    Ok(ChunkLayout { band, cgp, phases: out })
}

/// Workspace elements of a chunk on the NHWC kernels with `splits`-way split-K.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NhwcWorkspace {
    /// The packed input band (elements of the conv's dtype; at least one).
    pub band: usize,
    /// The packed weights of every phase (elements of the conv's dtype; at least one).
    pub weights: usize,
    /// Split-K partial sums (f32; zero without split-K).
    pub partials: usize,
}

impl NhwcWorkspace {
    /// The band and weights are never empty allocations (one element at least), so the
    /// count is what the executor allocates.
    pub fn of(g: &ConvGeometry, layout: &ChunkLayout, images: usize, splits: u32) -> Self {
        let ct = g.groups * layout.cgp;
        let band = (images * layout.band.len() * g.in_size[1] * ct).max(1);
        let taps: usize = layout.phases.iter().map(|ph| ph.taps.taps()).sum();
        let weights = (g.out_channels * taps * layout.cgp).max(1);
        let partials = if splits > 1 {
            layout.phases.iter().map(|ph| splits as usize * g.out_channels * ph.m).max().unwrap_or(0)
        } else {
            0
        };
        NhwcWorkspace { band, weights, partials }
    }

    pub fn bytes(&self, elem_bytes: usize) -> usize {
        (self.band + self.weights) * elem_bytes + self.partials * 4
    }
}

/// Whether transposed convolutions split into phases here (their filter taps differ per
/// output residue); forward ones are one phase.
pub fn phase_count(g: &ConvGeometry) -> usize {
    if g.kind == ConvKind::Transposed { g.stride[0] * g.stride[1] } else { 1 }
}

#[cfg(test)]
mod tests {
    //! A model that follows the pack kernels and the implicit-GEMM kernel index for index
    //! (band rows, channel slots, phase taps, padding masks, output view) must reproduce
    //! the f64 reference for every chunking a dispatcher can choose, forward and
    //! transposed.
    use super::*;
    use conv_engine::reference::conv_geometry_f64 as reference;
    use rand::{Rng, SeedableRng, rngs::StdRng};
    use test_support::random_geometry;

    /// What the kernels compute for `images` images and output `rows`, written into `out`.
    #[allow(clippy::too_many_arguments)]
    fn model_chunk(
        g: &ConvGeometry,
        elem_bytes: usize,
        images: Range<usize>,
        rows: Range<usize>,
        x: &[f64],
        w: &[f64],
        bias: &[f64],
        out: &mut [f64],
    ) {
        let layout = chunk_layout(g, images.len(), rows, elem_bytes).unwrap();
        let (cg, kg) = (g.in_channels_per_group(), g.out_channels_per_group());
        let [h, wd] = g.in_size;
        let [pp, qq] = g.out_hw();
        let cgp = layout.cgp;
        assert_eq!(cgp % (16 / elem_bytes), 0);
        let ct = g.groups * cgp;
        let nb = images.len();
        let hb = layout.band.len();
        // igemm_pack_input
        let mut band = vec![0.0; nb * hb * wd * ct];
        for img in 0..nb {
            for y in 0..hb {
                for xx in 0..wd {
                    for slot in 0..ct {
                        let (grp, ci) = (slot / cgp, slot % cgp);
                        if ci < cg {
                            band[((img * hb + y) * wd + xx) * ct + slot] =
                                x[(((images.start + img) * g.in_channels + grp * cg + ci) * h + layout.band.start + y)
                                    * wd
                                    + xx];
                        }
                    }
                }
            }
        }
        for ph in &layout.phases {
            let t = ph.taps;
            let k = &ph.params;
            // igemm_pack_weight
            let packed = |ch: usize, tr: usize, ts: usize, ci: usize| -> f64 {
                if ci >= cg {
                    return 0.0;
                }
                let (grp, j) = (ch / kg, ch % kg);
                let (r, s) = (t.r0 + tr * t.rstep, t.s0 + ts * t.sstep);
                let [rr, ss] = g.kernel;
                match g.kind {
                    ConvKind::Forward => w[((ch * cg + ci) * rr + r) * ss + s],
                    ConvKind::Transposed => w[(((grp * cg + ci) * kg + j) * rr + r) * ss + s],
                }
            };
            // the kernel: GEMM rows m over the phase grid, every output channel
            let (gp, gq) = (k.p as usize, k.q as usize);
            for m in 0..nb * gp * gq {
                let (img, yy, xx) = (m / (gp * gq), (m % (gp * gq)) / gq, m % gq);
                let y0 = yy as i64 * k.stride_h as i64 - k.pad_h as i64;
                let x0 = xx as i64 * k.stride_w as i64 - k.pad_w as i64;
                for (ch, &bias_ch) in bias.iter().enumerate().take(g.out_channels) {
                    let grp = ch / kg;
                    let mut acc = 0.0;
                    for tr in 0..k.r as usize {
                        for ts in 0..k.s as usize {
                            let iy = y0 + tr as i64 * k.dil_h as i64;
                            let ix = x0 + ts as i64 * k.dil_w as i64;
                            if iy < 0 || iy >= k.h as i64 || ix < 0 || ix >= k.w as i64 {
                                continue;
                            }
                            for ci in 0..cgp {
                                acc += band[((img * hb + iy as usize) * wd + ix as usize) * ct + grp * cgp + ci]
                                    * packed(ch, tr, ts, ci);
                            }
                        }
                    }
                    let [os_n, os_c, os_y, os_x] = ph.view;
                    let off = (images.start * g.out_channels * pp * qq + ph.out_offset) as i64
                        + img as i64 * os_n
                        + ch as i64 * os_c
                        + yy as i64 * os_y
                        + xx as i64 * os_x;
                    assert!(out[off as usize].is_nan(), "{g:?}: output {off} written twice");
                    out[off as usize] = acc + bias_ch;
                }
            }
        }
    }

    #[test]
    fn the_nhwc_layout_reproduces_the_reference_for_every_chunking() {
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let mut checked = 0;
        for i in 0..120 {
            let mut g = random_geometry(&mut rng);
            if g.kind == ConvKind::Transposed {
                // Output padding too, below max(stride, dilation) as PyTorch requires.
                for d in 0..2 {
                    g.output_padding[d] = rng.random_range(0..g.stride[d].max(g.dilation[d]));
                }
            }
            let elem_bytes = [2, 4][i % 2];
            let x: Vec<f64> = (0..g.input_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
            let w: Vec<f64> = (0..g.weight_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
            let b: Vec<f64> = (0..g.out_channels).map(|_| rng.random_range(-1.0..1.0)).collect();
            let want = reference(&g, &x, &w, Some(&b));
            let rows = g.out_hw()[0];
            for (bpc, rpc) in [(g.batch, rows), (1, rows), (1, rows.div_ceil(2)), (1, 1), (1, 3)] {
                let mut out = vec![f64::NAN; g.output_len()];
                for b0 in (0..g.batch).step_by(bpc) {
                    for r0 in (0..rows).step_by(rpc) {
                        let images = b0..(b0 + bpc).min(g.batch);
                        let chunk_rows = r0..(r0 + rpc).min(rows);
                        model_chunk(&g, elem_bytes, images.clone(), chunk_rows.clone(), &x, &w, &b, &mut out);
                        // The workspace holds what the chunk packs.
                        let layout = chunk_layout(&g, images.len(), chunk_rows, elem_bytes).unwrap();
                        let ws = NhwcWorkspace::of(&g, &layout, images.len(), 1);
                        assert!(ws.band >= images.len() * layout.band.len() * g.in_size[1] * g.groups * layout.cgp);
                        let taps: usize = layout.phases.iter().map(|ph| ph.taps.taps()).sum();
                        assert!(ws.weights >= g.out_channels * layout.cgp * taps);
                    }
                }
                for (j, (o, r)) in out.iter().zip(&want).enumerate() {
                    assert!(
                        (o - r).abs() <= 1e-9 * r.abs().max(1.0),
                        "{g:?}, chunks of {bpc} images x {rpc} rows: element {j}: {o} vs {r}"
                    );
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 600);
    }
}
