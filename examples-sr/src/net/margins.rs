//! Where a tile's feature maps can differ from the untiled ones, worked out without
//! running: the tiler's lossless-tiling conditions for engines whose rounding depends on a
//! pixel's position (Winograd).
//!
//! A tile's feature map of relative size `r` is the window of the untiled map starting at
//! `origin·r`. Its near (top/left) edge is exact when every position-dependent convolution
//! sees its transform grid where the untiled run sees it: tile origins a multiple of
//! [`Network::grid_align`]. Its far (bottom/right) edge is not: there the tile's maps end
//! before the untiled ones do, so
//! - a transposed convolution's last outputs miss the taps that lie beyond the tile, and
//! - a Winograd convolution's last transform tile, cut by the map's end, reads zeros where
//!   the untiled run reads pixels, which changes the rounding of the outputs it shares;
//!   and a transform tile that reads one differing input changes all its outputs, so the
//!   margin grows by up to a tile per Winograd layer.
//!
//! [`Network::far_margins`] propagates, layer by layer, how many trailing rows and columns
//! of each map may differ (a valid direct or implicit-GEMM convolution keeps its input's
//! margin, a Winograd one widens it to whole transform tiles, crops trim it, shuffles
//! scale it); the tiler gives a tile enough extra input beyond its own part that
//! the part it keeps (its SE-pooled region and its output) stays clear of the margin.

use conv_engine::ConvKind;

use super::analysis::{Ratio, Shape, lcm};
use super::graph::NodeKind;
use super::{Network, err};
use crate::Error;

/// Trailing rows and columns of a map that may differ from the untiled map.
pub type Margin = (usize, usize);

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// A forward convolution along one axis: kernel, stride, dilation, leading padding.
#[derive(Clone, Copy)]
struct Taps {
    k: usize,
    s: usize,
    dil: usize,
    pad: usize,
}

/// Along one axis: the trailing outputs of a forward convolution `taps` on `n` inputs
/// whose last `dirty` differ, giving `out` outputs computed on a grid of `grid` outputs
/// anchored at output 0 (1: no grid).
fn conv_margin(n: usize, dirty: usize, out: usize, taps: Taps, grid: usize) -> usize {
    let Taps { k, s, dil, pad } = taps;
    // Output j reads inputs j·s − pad + t·dil, t < k; it differs if the last of them is
    // dirty or beyond the tile (the untiled map has pixels there, or the same padding).
    let clean_below = n - dirty;
    let mut first_dirty = (0..out).find(|&j| j * s + (k - 1) * dil >= clean_below + pad).unwrap_or(out);
    if grid > 1 {
        // (3x3, stride 1.) A transform tile's outputs t0..t0 + grid all mix every input it
        // reads, t0 − pad ..= t0 − pad + grid + 1: one dirty input (or one beyond the map,
        // read as zero) changes all of them. So the margin grows by up to grid − 1 per
        // layer, and a cut last tile is dirty even on a clean input.
        let first_tile = (clean_below + pad).saturating_sub(grid + 1).div_ceil(grid) * grid;
        first_dirty = first_dirty.min(first_tile);
    }
    out - first_dirty.min(out)
}

/// Along one axis: the trailing outputs of a transposed convolution (kernel `k`, stride
/// `s`, output cropped by `pad` at the start) on `n` inputs whose last `dirty` differ.
fn deconv_margin(n: usize, dirty: usize, out: usize, s: usize, pad: usize) -> usize {
    // Output j gathers inputs i ≤ (j + pad) / s; the highest one decides.
    let clean_below = n - dirty;
    let first_dirty = (0..out).find(|&j| (j + pad) / s >= clean_below).unwrap_or(out);
    out - first_dirty
}

impl Network {
    /// The Winograd-eligible convolutions (forward 3x3, stride 1, dilation 1, ungrouped):
    /// the layers whose rounding depends on where a pixel falls on the transform grid.
    fn grid_layers(&self) -> impl Iterator<Item = (usize, &super::graph::ConvNode)> {
        self.graph.nodes.iter().enumerate().filter_map(|(i, n)| match &n.kind {
            NodeKind::Conv(c)
                if c.kind == ConvKind::Forward
                    && c.kernel == [3, 3]
                    && c.params.stride == [1, 1]
                    && c.params.dilation == [1, 1]
                    && c.params.groups == 1 =>
            {
                Some((i, c.as_ref()))
            }
            _ => None,
        })
    }

    /// Tile origins (input pixels) must be multiples of this for every Winograd layer's
    /// map to start on the untiled map's transform grid of period `grid` (output pixels):
    /// the least `a` with `a·r` a multiple of `grid` for each such layer's ratio `r`, and a
    /// multiple of [`Network::align`]. `grid` ≤ 1: [`Network::align`].
    pub fn grid_align(&self, grid: usize) -> usize {
        if grid <= 1 {
            return self.align();
        }
        self.grid_layers().fold(self.align(), |a, (i, _)| {
            let node = &self.graph.nodes[i];
            let r: Ratio = self.graph.blobs[node.tops[0]].ratio.unwrap_or(Ratio::ONE);
            // a·num/den ≡ 0 (mod grid)  ⇔  a ≡ 0 (mod grid·den / gcd(num, grid·den)).
            let period = grid * r.den;
            lcm(a, period / gcd(r.num, period))
        })
    }

    /// For a tile whose `h x w` net input ends before the untiled one (on both axes), the
    /// trailing rows and columns of each blob that may differ from the untiled blob, when
    /// the Winograd layers compute on a grid of period `grid` (1: no position-dependent
    /// layer). `None` for vectors (the SE means are whole-image values).
    pub fn far_margins(&self, h: usize, w: usize, grid: usize) -> Result<Vec<Option<Margin>>, Error> {
        let shapes = self.shapes(h, w)?;
        let grid_nodes: Vec<usize> = self.grid_layers().map(|(i, _)| i).collect();
        let hw = |b: usize| match shapes[b] {
            Some(Shape::Image { h, w, .. }) => Ok((h, w)),
            _ => Err(err(format!("blob {} is not an image", self.graph.blobs[b].name))),
        };
        let mut margins: Vec<Option<Margin>> = vec![None; self.graph.blobs.len()];
        margins[self.graph.input] = Some((0, 0));
        for (index, node) in self.graph.nodes.iter().enumerate() {
            let margin_of = |i: usize| margins[node.bottoms[i]];
            let out = match &node.kind {
                NodeKind::Input => continue,
                NodeKind::Conv(c) => {
                    let ((ih, iw), (oh, ow)) = (hw(node.bottoms[0])?, hw(node.tops[0])?);
                    let (dh, dw) = margin_of(0).unwrap_or((0, 0));
                    let p = &c.params;
                    Some(match c.kind {
                        ConvKind::Forward => {
                            let g = if grid_nodes.contains(&index) { grid } else { 1 };
                            let taps = |a: usize| Taps {
                                k: c.kernel[a],
                                s: p.stride[a],
                                dil: p.dilation[a],
                                pad: p.padding.begin[a],
                            };
                            (conv_margin(ih, dh, oh, taps(0), g), conv_margin(iw, dw, ow, taps(1), g))
                        }
                        ConvKind::Transposed => (
                            deconv_margin(ih, dh, oh, p.stride[0], p.padding.begin[0]),
                            deconv_margin(iw, dw, ow, p.stride[1], p.padding.begin[1]),
                        ),
                    })
                }
                NodeKind::Split => {
                    let m = margin_of(0);
                    for &t in &node.tops {
                        margins[t] = m;
                    }
                    continue;
                }
                NodeKind::Pool(_) | NodeKind::InnerProduct(_) => None,
                NodeKind::Add | NodeKind::Mul => match (margin_of(0), margin_of(1)) {
                    (Some(a), Some(b)) => Some((a.0.max(b.0), a.1.max(b.1))),
                    (a, b) => a.or(b),
                },
                NodeKind::Crop(crop) => {
                    let (ih, iw) = hw(node.bottoms[0])?;
                    let roi = crop.resolve_chw(1, ih, iw).map_err(|e| err(e.to_string()))?;
                    let (dh, dw) = margin_of(0).unwrap_or((0, 0));
                    let cut_h = ih - roi.h_offset - roi.height;
                    let cut_w = iw - roi.w_offset - roi.width;
                    Some((dh.saturating_sub(cut_h).min(roi.height), dw.saturating_sub(cut_w).min(roi.width)))
                }
                NodeKind::PixelShuffle(r) => margin_of(0).map(|(dh, dw)| (dh * r, dw * r)),
            };
            margins[node.tops[0]] = out;
        }
        Ok(margins)
    }

    /// Whether a tile of `own_h x own_w` input pixels, run on a net input of `h x w` that
    /// ends before the untiled one on both axes, computes its own part of every SE-pooled
    /// map and of the output as the untiled run does: per axis, own·r ≤ length − margin.
    /// Returns the (rows, columns) verdicts.
    pub fn far_edge_clean(
        &self,
        h: usize,
        w: usize,
        own_h: usize,
        own_w: usize,
        grid: usize,
    ) -> Result<(bool, bool), Error> {
        let margins = self.far_margins(h, w, grid)?;
        let shapes = self.shapes(h, w)?;
        let mut checks: Vec<(usize, Ratio)> = self.pools().iter().map(|p| (p.blob, p.ratio)).collect();
        checks.push((self.graph.output, Ratio { num: self.scale(), den: 1 }));
        let (mut ok_h, mut ok_w) = (true, true);
        for (blob, ratio) in checks {
            let (Some(Shape::Image { h: bh, w: bw, .. }), Some((dh, dw))) = (shapes[blob], margins[blob]) else {
                return Err(err(format!("blob {} has no image shape", self.graph.blobs[blob].name)));
            };
            let own = |n: usize| ratio.of(n).unwrap_or(usize::MAX);
            ok_h &= own(own_h) <= bh.saturating_sub(dh);
            ok_w &= own(own_w) <= bw.saturating_sub(dw);
        }
        Ok((ok_h, ok_w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conv_margins_follow_the_reads_and_the_grid() {
        // Valid 3x3 on 10 inputs, the last 2 dirty: outputs 6, 7 read input 8 or 9.
        assert_eq!(conv_margin(10, 2, 8, Taps { k: 3, s: 1, dil: 1, pad: 0 }, 1), 2);
        // Clean input, grid 4: 8 outputs are two whole tiles; 7 cut the second one.
        assert_eq!(conv_margin(10, 0, 8, Taps { k: 3, s: 1, dil: 1, pad: 0 }, 4), 0);
        assert_eq!(conv_margin(9, 0, 7, Taps { k: 3, s: 1, dil: 1, pad: 0 }, 4), 3);
        // One dirty input on the grid: the whole last tile (outputs 4..8) reads it.
        assert_eq!(conv_margin(10, 1, 8, Taps { k: 3, s: 1, dil: 1, pad: 0 }, 4), 4);
        assert_eq!(conv_margin(10, 1, 8, Taps { k: 3, s: 1, dil: 1, pad: 0 }, 1), 1);
        // 2x2 stride 2 on 9 inputs (4 outputs), the last dirty: no output reads input 8.
        assert_eq!(conv_margin(9, 1, 4, Taps { k: 2, s: 2, dil: 1, pad: 0 }, 1), 0);
        assert_eq!(conv_margin(8, 1, 4, Taps { k: 2, s: 2, dil: 1, pad: 0 }, 1), 1);
    }

    #[test]
    fn deconv_margins_count_missing_taps() {
        // 4x4 stride 2 pad 3 on 5 clean inputs: 6 outputs; output j gathers inputs up to
        // (j + 3) / 2 ≤ 4, all inside the tile; with the last input dirty, output 5 reads it.
        assert_eq!(deconv_margin(5, 0, 6, 2, 3), 0);
        assert_eq!(deconv_margin(5, 1, 6, 2, 3), 1);
        // 2x2 stride 2: output j reads input j/2 alone.
        assert_eq!(deconv_margin(4, 1, 8, 2, 0), 2);
    }
}
