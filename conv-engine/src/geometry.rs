//! Convolution geometry and its view as a matrix product.
//!
//! A forward convolution of an `N×C×H×W` input with a `K×(C/g)×R×S` filter is, per image
//! and group, the product `Out[K/g, P·Q] = W[K/g, (C/g)·R·S] × Col[(C/g)·R·S, P·Q]`, where
//! `Col` is the im2col matrix. Implicit GEMM never builds `Col`; it reads its elements from
//! the input through the index map described here. A transposed convolution uses the
//! same product with the data-gradient ("dgrad") index map: output pixel `p` gathers input
//! `i = (p + pad − r·dil) / stride` when that division is exact and `i` is in range.

/// Forward convolution, or transposed convolution (the adjoint of a forward one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConvKind {
    Forward,
    Transposed,
}

/// The size and parameters of a 2-D convolution (1-D problems use a height of 1).
///
/// Tensors are NCHW. Forward weights are `[K, C/groups, R, S]` (OIHW); transposed weights
/// are `[C, K/groups, R, S]` (PyTorch's `ConvTranspose2d` layout). `K` is always the number
/// of output channels and `C` the number of input channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvGeometry {
    pub kind: ConvKind,
    pub batch: usize,
    pub in_channels: usize,
    /// `[H, W]` of the input.
    pub in_size: [usize; 2],
    pub out_channels: usize,
    /// `[R, S]` of the filter.
    pub kernel: [usize; 2],
    pub stride: [usize; 2],
    /// Padding before the first row / column (`[top, left]`).
    pub pad_begin: [usize; 2],
    /// Padding after the last row / column (`[bottom, right]`).
    pub pad_end: [usize; 2],
    pub dilation: [usize; 2],
    /// Extra rows / columns added at the end of a transposed convolution's output.
    pub output_padding: [usize; 2],
    pub groups: usize,
}

/// Matrix-product dimensions of one (image, group) of a convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmDims {
    /// Output channels per group.
    pub m: usize,
    /// Output pixels per image (`P·Q`).
    pub n: usize,
    /// Reduction length: input channels per group × filter taps.
    pub k: usize,
}

impl ConvGeometry {
    /// The output `[P, Q]`, or `None` when it would be smaller than one pixel.
    pub fn out_size(&self) -> Option<[usize; 2]> {
        let mut out = [0; 2];
        for (d, o) in out.iter_mut().enumerate() {
            let extent = self.dilation[d] * (self.kernel[d].checked_sub(1)?);
            *o = match self.kind {
                ConvKind::Forward => {
                    let padded = self.in_size[d] + self.pad_begin[d] + self.pad_end[d];
                    (padded.checked_sub(extent + 1)?) / self.stride[d] + 1
                }
                ConvKind::Transposed => {
                    let full = (self.in_size[d].checked_sub(1)?) * self.stride[d] + extent + self.output_padding[d] + 1;
                    full.checked_sub(self.pad_begin[d] + self.pad_end[d])?
                }
            };
            if *o == 0 {
                return None;
            }
        }
        Some(out)
    }

    /// Output size; only call on a geometry whose `out_size` is `Some` (validated).
    pub fn out_hw(&self) -> [usize; 2] {
        self.out_size().expect("ConvGeometry::out_hw on a geometry that was not validated")
    }

    pub fn in_channels_per_group(&self) -> usize {
        self.in_channels / self.groups
    }

    pub fn out_channels_per_group(&self) -> usize {
        self.out_channels / self.groups
    }

    pub fn taps(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }

    pub fn gemm_dims(&self) -> GemmDims {
        let [p, q] = self.out_hw();
        GemmDims { m: self.out_channels_per_group(), n: p * q, k: self.in_channels_per_group() * self.taps() }
    }

    /// Elements of the input tensor.
    pub fn input_len(&self) -> usize {
        self.batch * self.in_channels * self.in_size[0] * self.in_size[1]
    }

    /// Elements of the weight tensor.
    pub fn weight_len(&self) -> usize {
        match self.kind {
            ConvKind::Forward => self.out_channels * self.in_channels_per_group() * self.taps(),
            ConvKind::Transposed => self.in_channels * self.out_channels_per_group() * self.taps(),
        }
    }

    /// Weight tensor dimensions in the layout documented on [`ConvGeometry`].
    pub fn weight_dims(&self) -> [usize; 4] {
        let [r, s] = self.kernel;
        match self.kind {
            ConvKind::Forward => [self.out_channels, self.in_channels_per_group(), r, s],
            ConvKind::Transposed => [self.in_channels, self.out_channels_per_group(), r, s],
        }
    }

    /// Elements of the output tensor.
    pub fn output_len(&self) -> usize {
        let [p, q] = self.out_hw();
        self.batch * self.out_channels * p * q
    }

    /// Panics unless the buffers have this geometry's lengths: the executors' internal
    /// contract (callers validate user input before they get here).
    pub fn assert_buffer_lengths(&self, input: usize, weight: usize, bias: Option<usize>, output: usize) {
        assert_eq!(input, self.input_len(), "input length");
        assert_eq!(weight, self.weight_len(), "weight length");
        assert_eq!(output, self.output_len(), "output length");
        if let Some(b) = bias {
            assert_eq!(b, self.out_channels, "bias length");
        }
    }

    /// Multiply-adds × 2 that contribute to the output (padding taps excluded only for
    /// the transposed case, where they are structurally absent).
    pub fn flops(&self) -> u64 {
        match self.kind {
            ConvKind::Forward => {
                let d = self.gemm_dims();
                2 * (self.batch * self.groups) as u64 * d.m as u64 * d.n as u64 * d.k as u64
            }
            ConvKind::Transposed => {
                // Every input pixel is scattered through every tap once.
                2 * self.batch as u64
                    * self.in_channels as u64
                    * (self.in_size[0] * self.in_size[1]) as u64
                    * self.out_channels_per_group() as u64
                    * self.taps() as u64
            }
        }
    }

    /// The input rows (inclusive start, exclusive end, clipped to the input) that output
    /// rows `rows` of a forward convolution read.
    pub fn input_rows_for(&self, rows: std::ops::Range<usize>) -> std::ops::Range<usize> {
        debug_assert_eq!(self.kind, ConvKind::Forward);
        if rows.is_empty() {
            return 0..0;
        }
        let lo = (rows.start * self.stride[0]) as isize - self.pad_begin[0] as isize;
        let hi = ((rows.end - 1) * self.stride[0] + self.dilation[0] * (self.kernel[0] - 1)) as isize
            - self.pad_begin[0] as isize;
        let h = self.in_size[0] as isize;
        (lo.clamp(0, h) as usize)..((hi + 1).clamp(0, h) as usize)
    }
}

/// One filter tap of a [`Phase`]: filter position `(r, s)` and the input offset it adds to
/// a column's base coordinate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tap {
    pub r: usize,
    pub s: usize,
    pub dh: isize,
    pub dw: isize,
}

/// A set of output pixels that share one list of filter taps, computed as one GEMM.
///
/// The pixels form a grid: grid cell `(i, j)` is output pixel
/// `(row0 + i·row_step, col0 + j·col_step)`. Its base input coordinate is
/// `(i·base_step[0] + base0[0], j·base_step[1] + base0[1])`, and tap `t` reads input
/// `(base_h + taps[t].dh, base_w + taps[t].dw)` (zero when outside the input).
///
/// A forward convolution is one phase with every tap. A transposed convolution with
/// stride `s` splits into `s_h·s_w` phases by output residue, each with only the taps that
/// land on real input pixels — so no multiply is spent on the zeros a zero-stuffed input
/// would hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    pub row0: usize,
    pub row_step: usize,
    pub rows: usize,
    pub col0: usize,
    pub col_step: usize,
    pub cols: usize,
    pub base0: [isize; 2],
    pub base_step: [isize; 2],
    pub taps: Vec<Tap>,
}

impl Phase {
    pub fn pixels(&self) -> usize {
        self.rows * self.cols
    }
}

/// The phases that cover output rows `rows` (all columns) of `geom`.
pub fn phases(geom: &ConvGeometry, rows: std::ops::Range<usize>) -> Vec<Phase> {
    let [_, q] = geom.out_hw();
    let [kr, ks] = geom.kernel;
    let [dil_h, dil_w] = geom.dilation;
    let [pt, pl] = geom.pad_begin;
    match geom.kind {
        ConvKind::Forward => {
            let mut taps = Vec::with_capacity(kr * ks);
            for r in 0..kr {
                for s in 0..ks {
                    taps.push(Tap { r, s, dh: (r * dil_h) as isize, dw: (s * dil_w) as isize });
                }
            }
            vec![Phase {
                row0: rows.start,
                row_step: 1,
                rows: rows.len(),
                col0: 0,
                col_step: 1,
                cols: q,
                base0: [(rows.start * geom.stride[0]) as isize - pt as isize, -(pl as isize)],
                base_step: [geom.stride[0] as isize, geom.stride[1] as isize],
                taps,
            }]
        }
        ConvKind::Transposed => {
            let [sh, sw] = geom.stride;
            let mut out = Vec::with_capacity(sh * sw);
            for ph in 0..sh {
                // First output row >= rows.start with row ≡ ph (mod sh).
                let row0 = rows.start + (ph + sh - rows.start % sh) % sh;
                if row0 >= rows.end {
                    continue;
                }
                let n_rows = (rows.end - row0).div_ceil(sh);
                for pw in 0..sw.min(q) {
                    let col0 = pw;
                    let n_cols = (q - col0).div_ceil(sw);
                    let mut taps = Vec::new();
                    for r in 0..kr {
                        let num_h = (row0 + pt) as isize - (r * dil_h) as isize;
                        if num_h.rem_euclid(sh as isize) != 0 {
                            continue;
                        }
                        for s in 0..ks {
                            let num_w = (col0 + pl) as isize - (s * dil_w) as isize;
                            if num_w.rem_euclid(sw as isize) != 0 {
                                continue;
                            }
                            taps.push(Tap {
                                r,
                                s,
                                dh: num_h.div_euclid(sh as isize),
                                dw: num_w.div_euclid(sw as isize),
                            });
                        }
                    }
                    out.push(Phase {
                        row0,
                        row_step: sh,
                        rows: n_rows,
                        col0,
                        col_step: sw,
                        cols: n_cols,
                        base0: [0, 0],
                        base_step: [1, 1],
                        taps,
                    });
                }
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geom(kind: ConvKind, hw: usize, k: usize, stride: usize, pad: usize) -> ConvGeometry {
        ConvGeometry {
            kind,
            batch: 1,
            in_channels: 2,
            in_size: [hw, hw + 1],
            out_channels: 3,
            kernel: [k, k],
            stride: [stride, stride],
            pad_begin: [pad, pad],
            pad_end: [pad, pad],
            dilation: [1, 1],
            output_padding: [0, 0],
            groups: 1,
        }
    }

    #[test]
    fn forward_output_size_matches_pytorch_formula() {
        // floor((H + 2p - d(k-1) - 1) / s) + 1
        let g = geom(ConvKind::Forward, 10, 3, 2, 1);
        assert_eq!(g.out_size(), Some([5, 6]));
        let g = geom(ConvKind::Forward, 2, 5, 1, 0);
        assert_eq!(g.out_size(), None);
    }

    #[test]
    fn transposed_output_size_matches_pytorch_formula() {
        // (H - 1)s - 2p + d(k-1) + output_padding + 1
        let mut g = geom(ConvKind::Transposed, 7, 4, 2, 3);
        assert_eq!(g.out_size(), Some([(7 - 1) * 2 - 6 + 3 + 1, (8 - 1) * 2 - 6 + 3 + 1]));
        g.output_padding = [1, 0];
        assert_eq!(g.out_size(), Some([11, 12]));
    }

    /// Every (output pixel, tap) pair that reads a real input pixel must appear in exactly
    /// one phase, with the input coordinate the definition gives.
    #[test]
    fn transposed_phases_cover_every_contribution_once() {
        for (stride, k, pad, dil) in [(2, 4, 3, 1), (3, 5, 2, 1), (2, 3, 1, 2), (3, 2, 0, 1)] {
            let mut g = geom(ConvKind::Transposed, 5, k, stride, pad);
            g.dilation = [dil, dil];
            let [p, q] = g.out_hw();
            let mut seen = std::collections::HashMap::new();
            for ph in phases(&g, 0..p) {
                for i in 0..ph.rows {
                    for j in 0..ph.cols {
                        let (op, oq) = (ph.row0 + i * ph.row_step, ph.col0 + j * ph.col_step);
                        for t in &ph.taps {
                            let ih = i as isize * ph.base_step[0] + ph.base0[0] + t.dh;
                            let iw = j as isize * ph.base_step[1] + ph.base0[1] + t.dw;
                            *seen.entry((op, oq, t.r, t.s)).or_insert(0) += 1;
                            let num_h = (op + pad) as isize - (t.r * dil) as isize;
                            let num_w = (oq + pad) as isize - (t.s * dil) as isize;
                            assert_eq!(num_h, ih * stride as isize);
                            assert_eq!(num_w, iw * stride as isize);
                        }
                    }
                }
            }
            // Brute force: all contributing pairs, including those outside the input
            // (the executor masks those), must be present exactly once.
            for op in 0..p {
                for oq in 0..q {
                    for r in 0..k {
                        for s in 0..k {
                            let nh = (op + pad) as isize - (r * dil) as isize;
                            let nw = (oq + pad) as isize - (s * dil) as isize;
                            let divisible = nh.rem_euclid(stride as isize) == 0 && nw.rem_euclid(stride as isize) == 0;
                            let count = seen.get(&(op, oq, r, s)).copied().unwrap_or(0);
                            assert_eq!(count, divisible as usize, "pixel ({op},{oq}) tap ({r},{s})");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn forward_input_rows_cover_the_window() {
        let g = geom(ConvKind::Forward, 16, 3, 2, 1);
        // Output rows 2..4 read rows 2*2-1 = 3 through 3*2-1+2 = 7.
        assert_eq!(g.input_rows_for(2..4), 3..8);
        assert_eq!(g.input_rows_for(0..1), 0..2);
    }
}
