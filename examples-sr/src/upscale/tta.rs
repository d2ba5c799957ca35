//! TTA mode (realcugan-ncnn-vulkan's `-x`): the padded input in its 8 orientations (the
//! identity, the three flips, the transpose and its three flips), each upscaled, turned
//! back and summed in that order, then `sum / 8 · max + 0.5` (plus the 4x residual) and
//! truncated as without TTA. The orientations and the order of the sum are those of
//! realcugan-ncnn-vulkan's `process_cpu`; it transforms the padded tile including the
//! extra rows and columns of the size rounding, and so does this (the rounding's extra
//! ends up at the top or left of a flipped frame, and the output is taken back from the
//! far end). Each orientation is tiled losslessly, its SE means computed over its whole
//! image, as without TTA.

use std::ops::Range;

use rocm_vision::Tensor;

use super::{Progress, Stats, TilePlan, Upscaler, quantize};
use crate::Error;
use crate::image_io::{Image, Pixels};

/// Where orientation `k` moves position `(i, j)` of an `h x w` plane, and the plane's new
/// `(h, w)`.
fn forward(k: usize, i: usize, j: usize, h: usize, w: usize) -> (usize, usize) {
    match k {
        0 => (i, j),
        1 => (h - 1 - i, j),
        2 => (i, w - 1 - j),
        3 => (h - 1 - i, w - 1 - j),
        4 => (j, i),
        5 => (w - 1 - j, i),
        6 => (j, h - 1 - i),
        _ => (w - 1 - j, h - 1 - i),
    }
}

/// Position `(a, b)` of orientation `k`'s frame back in the original `h x w` frame.
fn back(k: usize, a: usize, b: usize, h: usize, w: usize) -> (usize, usize) {
    match k {
        0 => (a, b),
        1 => (h - 1 - a, b),
        2 => (a, w - 1 - b),
        3 => (h - 1 - a, w - 1 - b),
        4 => (b, a),
        5 => (b, w - 1 - a),
        6 => (h - 1 - b, a),
        _ => (h - 1 - b, w - 1 - a),
    }
}

impl Upscaler {
    /// [`Upscaler::upscale_with_stats`] in TTA mode (8 orientations averaged). `plan` is the
    /// image's; the transposed orientations use it transposed. Progress counts the tile
    /// runs of all 8.
    pub fn upscale_tta_with_stats(
        &self,
        img: &Image,
        plan: &TilePlan,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<(Image, Stats), Error> {
        let (w, h, s, p) = (img.width, img.height, self.scale(), self.prepadding);
        if (plan.width, plan.height) != (w, h) {
            return Err(Error::Internal(format!("a plan for {}x{} used on a {w}x{h} image", plan.width, plan.height)));
        }
        let started = std::time::Instant::now();
        // The 8 orientations are turned on the host.
        let padded = self.padded_input(img, false)?;
        let input_time = started.elapsed();
        let (hr, wr) = (padded.h - 2 * p, padded.w - 2 * p);
        // The rounded output frame (what the network's output covers) and the image in it.
        let (fh, fw) = (hr * s, wr * s);
        let (oh, ow) = (h * s, w * s);
        let mut sum = vec![0.0f32; 3 * oh * ow];
        let mut stats = Stats::default();
        for k in 0..8 {
            let frame = padded.oriented(k, forward)?;
            let (rows, cols): (&[Range<usize>], &[Range<usize>]) =
                if k >= 4 { (&plan.cols, &plan.rows) } else { (&plan.rows, &plan.cols) };
            let mut add = |y: &Tensor, rows: &Range<usize>, cols: &Range<usize>| -> Result<(), Error> {
                let dims = y.dims().to_vec();
                let (th, tw) = (rows.len() * s, cols.len() * s);
                if dims.len() != 4 || dims[1] != 3 || dims[2] < th || dims[3] < tw {
                    return Err(Error::Internal(format!("a TTA tile gave an output of shape {dims:?}")));
                }
                let (yh, yw) = (dims[2], dims[3]);
                let v = y.to_dtype(candle_core::DType::F32)?.to_vec::<f32>()?;
                let (a0, b0) = (rows.start * s, cols.start * s);
                for c in 0..3 {
                    for a in 0..th {
                        for b in 0..tw {
                            let (i, j) = back(k, a0 + a, b0 + b, fh, fw);
                            if i < oh && j < ow {
                                sum[(c * oh + i) * ow + j] += v[(c * yh + a) * yw + b];
                            }
                        }
                    }
                }
                Ok(())
            };
            let mut inner = |q: Progress| {
                let per = q.total;
                progress(Progress { done: k * per + q.done, total: 8 * per, ..q })
            };
            let mut one = Stats::default();
            self.run_tiles(&frame, rows, cols, plan.cache_bytes, plan.shed, &mut inner, &mut one, &mut add, true)?;
            stats.tiles = one.tiles;
            stats.passes = one.passes;
            stats.recomputed += one.recomputed;
            stats.shed_maps += one.shed_maps;
            stats.cached_bytes = stats.cached_bytes.max(one.cached_bytes);
            stats.network_time += one.network_time;
            stats.output_time += one.output_time;
        }
        // Post-processing as without TTA, on the mean.
        let written = std::time::Instant::now();
        let maxv = img.max_value();
        let ch = img.channels;
        let mut out = vec![0u16; ow * oh * ch];
        let host = padded.host().ok_or_else(|| Error::Internal("TTA's padded planes are not on the host".into()))?;
        for c in 0..3 {
            for i in 0..oh {
                for j in 0..ow {
                    let mut x = sum[(c * oh + i) * ow + j] / 8.0 * maxv + 0.5;
                    if s == 4 {
                        x += host.sample(c, p + i / 4, p + j / 4) * maxv;
                    }
                    out[(i * ow + j) * ch + c] = quantize(x, maxv);
                }
            }
        }
        stats.output_time += written.elapsed();
        match img.pixels {
            Pixels::U8(_) => self.finish(img, out.into_iter().map(|v| v as u8).collect(), maxv, input_time, stats),
            Pixels::U16(_) => self.finish(img, out, maxv, input_time, stats),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn back_inverts_forward() {
        let (h, w) = (3, 5);
        for k in 0..8 {
            let (nh, nw) = if k >= 4 { (w, h) } else { (h, w) };
            let mut seen = vec![false; h * w];
            for i in 0..h {
                for j in 0..w {
                    let (a, b) = forward(k, i, j, h, w);
                    assert!(a < nh && b < nw, "k {k}");
                    assert_eq!(back(k, a, b, h, w), (i, j), "k {k}");
                    seen[a * nw + b] = true;
                }
            }
            assert!(seen.iter().all(|&x| x), "orientation {k} is a permutation");
        }
    }
}
