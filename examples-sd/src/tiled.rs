//! Tiled decode for latents too large to decode at once: overlapping latent tiles are
//! decoded separately and blended with linear ramps across the overlaps.
//!
//! **Approximate.** The decoder is not local: every GroupNorm takes its statistics over
//! the whole map and the mid-block attention mixes all positions, so a tile sees other
//! statistics than the full image would. The result differs from the exact decode
//! (typically slight colour/contrast shifts between tiles, softened by the blending); it
//! equals it only when one tile covers the whole latent.

use crate::decoder::Decoder;
use crate::error::{Result, SdError};
use rocm_vision::{DType, Tensor};

/// Tile geometry in latent pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileSpec {
    /// Side of a (square) tile; tiles at the border are clipped to the latent.
    pub tile: usize,
    /// Minimum overlap of neighbouring tiles.
    pub overlap: usize,
}

impl TileSpec {
    /// diffusers' defaults for SD: 64-latent (512-pixel) tiles, a quarter overlapping.
    pub const DEFAULT: TileSpec = TileSpec { tile: 64, overlap: 16 };

    pub fn validate(&self) -> Result<()> {
        if self.tile == 0 || self.overlap >= self.tile {
            return Err(SdError::Config(format!(
                "tile size {} and overlap {}: the tile must be at least 1 and larger than the overlap",
                self.tile, self.overlap
            )));
        }
        Ok(())
    }
}

/// Start offsets of tiles of `tile` along an axis of `n`, overlapping by at least
/// `overlap`, spread evenly, the first at 0 and the last ending at `n`.
pub fn tile_starts(n: usize, tile: usize, overlap: usize) -> Vec<usize> {
    if n <= tile {
        return vec![0];
    }
    let stride = tile - overlap;
    let count = (n - overlap).div_ceil(stride);
    let span = n - tile;
    (0..count).map(|i| (i * span + (count - 1) / 2) / (count - 1)).collect()
}

/// Blend weights along one axis of a decoded tile of `len` output pixels: linear ramps of
/// `ramp` pixels on the sides that border another tile, 1 elsewhere.
fn axis_weights(len: usize, ramp: usize, ramp_start: bool, ramp_end: bool) -> Vec<f32> {
    (0..len)
        .map(|i| {
            let mut wgt = 1f32;
            if ramp > 0 {
                if ramp_start {
                    wgt = wgt.min((i as f32 + 0.5) / ramp as f32);
                }
                if ramp_end {
                    wgt = wgt.min((len as f32 - i as f32 - 0.5) / ramp as f32);
                }
            }
            wgt
        })
        .collect()
}

/// Decodes `z` (`[1, C, h, w]`) tile by tile with `decode_tile`, which maps a latent tile
/// to an image tile `scale` times larger, and blends the tiles into an f32
/// `[1, out_c, scale·h, scale·w]` image. `on_tile(i, count)` is called before each tile.
pub fn blend_tiles(
    z: &Tensor,
    scale: usize,
    spec: TileSpec,
    mut decode_tile: impl FnMut(Tensor) -> Result<Tensor>,
    mut on_tile: impl FnMut(usize, usize),
) -> Result<Tensor> {
    spec.validate()?;
    let (h, w) = match z.dims() {
        &[1, _, h, w] => (h, w),
        d => return Err(SdError::Latents(format!("tiled decode takes one latent [1, C, h, w], got {d:?}"))),
    };
    let (ys, xs) = (tile_starts(h, spec.tile, spec.overlap), tile_starts(w, spec.tile, spec.overlap));
    let (th, tw) = (spec.tile.min(h), spec.tile.min(w));
    let (oh, ow) = (h * scale, w * scale);
    let ramp = spec.overlap * scale;
    let mut acc: Vec<f32> = Vec::new();
    let mut wsum = vec![0f32; oh * ow];
    let mut out_c = 0;
    let count = ys.len() * xs.len();
    for (yi, &y0) in ys.iter().enumerate() {
        for (xi, &x0) in xs.iter().enumerate() {
            on_tile(yi * xs.len() + xi, count);
            let tile = z.narrow(2, y0, th)?.narrow(3, x0, tw)?.contiguous()?;
            let img = decode_tile(tile)?;
            let d = img.dims().to_vec();
            if d.len() != 4 || d[0] != 1 || d[2] != th * scale || d[3] != tw * scale {
                return Err(SdError::Output(format!(
                    "a {th}x{tw} latent tile decoded to {d:?}, expected [1, C, {}, {}]",
                    th * scale,
                    tw * scale
                )));
            }
            if acc.is_empty() {
                out_c = d[1];
                acc = vec![0f32; out_c * oh * ow];
            }
            let px = img.to_dtype(DType::F32)?.to_vec::<f32>()?;
            let (ph, pw) = (th * scale, tw * scale);
            let wy = axis_weights(ph, ramp, y0 > 0, y0 + th < h);
            let wx = axis_weights(pw, ramp, x0 > 0, x0 + tw < w);
            let (oy, ox) = (y0 * scale, x0 * scale);
            for (r, &wr) in wy.iter().enumerate() {
                let row = (oy + r) * ow + ox;
                for (q, &wq) in wx.iter().enumerate() {
                    wsum[row + q] += wr * wq;
                }
                for c in 0..out_c {
                    let src = &px[(c * ph + r) * pw..(c * ph + r + 1) * pw];
                    let dst = &mut acc[c * oh * ow + row..c * oh * ow + row + pw];
                    for ((d, &s), &wq) in dst.iter_mut().zip(src).zip(&wx) {
                        *d += s * wr * wq;
                    }
                }
            }
        }
    }
    for c in 0..out_c {
        for (a, &s) in acc[c * oh * ow..(c + 1) * oh * ow].iter_mut().zip(&wsum) {
            *a /= s;
        }
    }
    Ok(Tensor::from_vec(acc, &[1, out_c, oh, ow], z.device())?)
}

/// Tiled decode of latents (as a diffusion model emits them), one batch item at a time:
/// an f32 `[N, out_c, 8h, 8w]` image. See the module docs: approximate unless one tile
/// covers the latent.
pub fn decode_tiled(
    decoder: &Decoder,
    latents: &Tensor,
    spec: TileSpec,
    observe: &mut dyn FnMut(&str, &Tensor),
    on_tile: &mut dyn FnMut(usize, usize),
) -> Result<Tensor> {
    decoder.reset_precision_stats();
    let z = decoder.unscale(latents)?;
    let scale = decoder.config().upscale();
    let mut images = Vec::new();
    for i in 0..z.dim(0)? {
        let zi = z.narrow(0, i, 1)?;
        images.push(blend_tiles(&zi, scale, spec, |t| decoder.decode_z(t, &mut *observe), &mut *on_tile)?);
    }
    let refs: Vec<&Tensor> = images.iter().collect();
    Ok(Tensor::cat(&refs, 0)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocm_vision::Device;

    #[test]
    fn tiles_cover_the_axis_with_the_overlap() {
        assert_eq!(tile_starts(10, 16, 4), vec![0]);
        assert_eq!(tile_starts(16, 16, 4), vec![0]);
        for (n, t, o) in [(17, 16, 4), (100, 16, 4), (64, 32, 8), (33, 8, 0), (129, 64, 16)] {
            let s = tile_starts(n, t, o);
            assert_eq!(s[0], 0);
            assert_eq!(s.last().unwrap() + t, n, "{n} {t} {o}: {s:?}");
            for p in s.windows(2) {
                assert!(p[1] > p[0] && p[0] + t >= p[1] + o, "{n} {t} {o}: {s:?}");
            }
        }
    }

    /// With a local "decoder" (nearest 2x upsampling) blending must reproduce the direct
    /// result exactly: the weights are a partition of unity.
    #[test]
    fn blending_a_local_operator_is_exact() {
        let dev = Device::cpu();
        let (c, h, w) = (2, 11, 14);
        let v: Vec<f32> = (0..c * h * w).map(|i| (i as f32 * 0.37).sin()).collect();
        let z = Tensor::from_vec(v, &[1, c, h, w], &dev).unwrap();
        let up = |t: Tensor| -> Result<Tensor> {
            let (th, tw) = (t.dims()[2], t.dims()[3]);
            Ok(t.upsample_nearest2d(2 * th, 2 * tw)?)
        };
        let direct = up(z.clone()).unwrap().to_vec::<f32>().unwrap();
        for spec in
            [TileSpec { tile: 4, overlap: 2 }, TileSpec { tile: 6, overlap: 1 }, TileSpec { tile: 5, overlap: 0 }]
        {
            let mut tiles = 0;
            let y = blend_tiles(&z, 2, spec, up, |_, n| tiles = n).unwrap();
            assert_eq!(y.dims(), &[1, c, 2 * h, 2 * w]);
            assert!(tiles > 4, "{spec:?}: {tiles} tiles");
            let d = y.to_vec::<f32>().unwrap().iter().zip(&direct).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(d < 1e-6, "{spec:?}: {d}");
        }
        assert!(blend_tiles(&z, 2, TileSpec { tile: 4, overlap: 4 }, up, |_, _| {}).is_err());
    }
}
