//! From the network's output to the image's samples: each tile's kept block quantised on
//! the device (8-bit output on a GPU, read back once at the end) or on the host, and the
//! 8-bit output buffer reused from one image to the next.

use std::ops::Range;

use rayon::prelude::*;
use rocm_vision::Tensor;

use super::Upscaler;
use super::padded::Padded;
use crate::Error;
use crate::image_io::{Image, Pixels};

impl Upscaler {
    /// Gives an upscaled image's memory back for the next image's output (8-bit ones; the
    /// CLI does after saving). Its pages are then already mapped: a fresh 25 MB output at
    /// 4K took its page faults while the tiles were copied in, 2-4 ms of a 75 ms 1080p
    /// upscale on the H100's host (2026-12-05).
    pub fn recycle(&self, img: Image) {
        if let Pixels::U8(v) = img.pixels {
            *self.spare_output.lock().unwrap_or_else(|e| e.into_inner()) = Some(v);
        }
    }

    /// An 8-bit output buffer of `n` samples: a [`Self::recycle`]d one when it is large
    /// enough, left as it is, since the tiles' kept blocks (and the alpha plane) write every
    /// sample (`tests/tiling.rs` checks a poisoned recycled buffer), else a fresh one.
    pub(super) fn output_u8(&self, n: usize) -> Vec<u8> {
        match self.spare_output.lock().unwrap_or_else(|e| e.into_inner()).take() {
            Some(mut v) if v.capacity() >= n => {
                v.resize(n, 0);
                v
            }
            _ => vec![0u8; n],
        }
    }

    /// Where a tile's kept output block goes, `[y0, x0, rows, cols]` in output pixels: its
    /// own `rows·s x cols·s` block, clipped to the image (checked against `y`'s shape).
    fn kept_block(
        &self,
        y: &Tensor,
        rows: &Range<usize>,
        cols: &Range<usize>,
        img: &Image,
    ) -> Result<[usize; 4], Error> {
        let s = self.scale();
        let dims = y.dims();
        let (th, tw) = (rows.len() * s, cols.len() * s);
        if dims.len() != 4 || dims[1] != 3 || dims[2] < th || dims[3] < tw {
            return Err(Error::Internal(format!(
                "a {}x{} tile gave an output of shape {dims:?}",
                cols.len(),
                rows.len()
            )));
        }
        let (y0, x0) = (rows.start * s, cols.start * s);
        Ok([y0, x0, th.min((img.height * s).saturating_sub(y0)), tw.min((img.width * s).saturating_sub(x0))])
    }

    /// A tile's kept block quantised on its device, pixel-interleaved as an 8-bit image
    /// stores it (`[rows, cols, 3]` u8); the work is queued, nothing is read back.
    pub(super) fn quantized_block(
        &self,
        y: &Tensor,
        rows: &Range<usize>,
        cols: &Range<usize>,
        img: &Image,
    ) -> Result<Tensor, Error> {
        let [_, _, keep_h, keep_w] = self.kept_block(y, rows, cols, img)?;
        quantize_on_device(&y.narrow(2, 0, keep_h)?.narrow(3, 0, keep_w)?, img.max_value())
    }

    /// Reads a [`Self::quantized_block`] back into the image's samples.
    pub(super) fn place_quantized<S: Sample>(
        &self,
        q: &Tensor,
        rows: &Range<usize>,
        cols: &Range<usize>,
        img: &Image,
        out: &mut [S],
    ) -> Result<(), Error> {
        let (s, ch) = (self.scale(), img.channels);
        let ow = img.width * s;
        let (y0, x0) = (rows.start * s, cols.start * s);
        let &[keep_h, keep_w, 3] = q.dims() else {
            return Err(Error::Internal(format!("a quantised block of shape {:?}", q.dims())));
        };
        let mut download = self.download.lock().unwrap_or_else(|e| e.into_inner());
        let n = q.elem_count();
        let buffer = match download.take() {
            Some(b) if b.len() >= n => b,
            // Sized for the whole image: every tile's block fits, whatever order they come in.
            _ => self.net.device().host_buffer(n.max(3 * ow * img.height * s))?,
        };
        let buffer = download.insert(buffer);
        q.to_slice(&mut buffer[..n])?;
        let q = &buffer[..n];
        out[y0 * ow * ch..(y0 + keep_h) * ow * ch].par_chunks_mut(ow * ch).enumerate().for_each(|(i, out_row)| {
            let row = &q[i * keep_w * 3..(i + 1) * keep_w * 3];
            let dst = &mut out_row[x0 * ch..(x0 + keep_w) * ch];
            if ch == 3 {
                dst.iter_mut().zip(row).for_each(|(d, &v)| *d = S::from_level(v as u16));
            } else {
                for (px, rgb) in dst.chunks_exact_mut(ch).zip(row.chunks_exact(3)) {
                    (0..3).for_each(|c| px[c] = S::from_level(rgb[c] as u16));
                }
            }
        });
        Ok(())
    }

    /// Post-processes a tile's output into the image: its own `rows·s x cols·s` block,
    /// clipped to the image.
    pub(super) fn write_tile<S: Sample>(
        &self,
        y: &Tensor,
        rows: &Range<usize>,
        cols: &Range<usize>,
        padded: &Padded,
        img: &Image,
        out: &mut [S],
    ) -> Result<(), Error> {
        let (s, p) = (self.scale(), self.prepadding);
        let (w, ch) = (img.width, img.channels);
        let ow = w * s;
        let [y0, x0, keep_h, keep_w] = self.kept_block(y, rows, cols, img)?;
        let (yh, yw) = (y.dims()[2], y.dims()[3]);
        let maxv = img.max_value();
        let host = match (s, padded.host()) {
            (4, None) => return Err(Error::Internal("4x's residual needs the padded input on the host".into())),
            (_, host) => host,
        };
        let v = y.to_vec::<f32>()?;
        // Output rows in parallel (each owns its samples of every channel).
        out[y0 * ow * ch..(y0 + keep_h) * ow * ch].par_chunks_mut(ow * ch).enumerate().for_each(|(i, out_row)| {
            let gy = y0 + i;
            for c in 0..3 {
                let row = &v[c * yh * yw + i * yw..c * yh * yw + i * yw + keep_w];
                let dst = &mut out_row[x0 * ch..];
                for (j, &val) in row.iter().enumerate() {
                    let mut x = val * maxv + 0.5;
                    if let (4, Some(host)) = (s, &host) {
                        x += host.sample(c, p + gy / 4, p + (x0 + j) / 4) * maxv;
                    }
                    dst[j * ch + c] = S::from_level(quantize(x, maxv));
                }
            }
        });
        Ok(())
    }
}

/// [`quantize`] of `y · max + 0.5` on the device as 8-bit samples, to be read back: a
/// quarter of the bytes of the f32 read-back, which (with the page faults of a fresh
/// 100 MB vector) was 0.1 s of a 0.22 s 1080p upscale on the H200. `max · y + 0.5` is one
/// fused multiply-add there (exact for f16 outputs, at most one level apart from the
/// host's two roundings for f32 ones); max/min before the truncating cast are the host's
/// clamp. The samples are pixel-interleaved (`[rows, cols, 3]` of a `[1, 3, rows, cols]`
/// map), as the image stores them, so the host copies rows instead of gathering channels.
/// [`Upscaler::place_quantized`] reads them into a page-locked buffer kept between calls: a fresh
/// 25 MB one for each 4K output took its page faults inside the download (17 ms against
/// 2 ms, H200 host timeline of 2026-12-04).
fn quantize_on_device(y: &Tensor, max: f32) -> Result<Tensor, Error> {
    let d = y.device();
    let lo = Tensor::full(0.0, &[1], candle_core::DType::F32, d)?;
    let hi = Tensor::full(max as f64, &[1], candle_core::DType::F32, d)?;
    let x = y.to_dtype(candle_core::DType::F32)?.affine(max as f64, 0.5)?;
    let q = x.maximum(&lo)?.minimum(&hi)?.to_dtype(candle_core::DType::U8)?.permute(&[0, 2, 3, 1])?.contiguous()?;
    let &[_, rows, cols, c] = q.dims() else { return Err(Error::Internal(format!("quantising a {:?} map", y.dims()))) };
    Ok(q.reshape(&[rows, cols, c])?)
}

/// An output sample, the input image's own type: an 8-bit image is written as u8 from
/// the start, with no u16 buffer and conversion pass (75 MB of fresh memory at 4K).
pub(crate) trait Sample: Copy + Send + Sync {
    /// The sample of a quantised level (at most the image's maximum).
    fn from_level(v: u16) -> Self;
    fn into_pixels(out: Vec<Self>) -> Pixels;
}

impl Sample for u8 {
    fn from_level(v: u16) -> u8 {
        v as u8
    }
    fn into_pixels(out: Vec<u8>) -> Pixels {
        Pixels::U8(out)
    }
}

impl Sample for u16 {
    fn from_level(v: u16) -> u16 {
        v
    }
    fn into_pixels(out: Vec<u16>) -> Pixels {
        Pixels::U16(out)
    }
}

/// ncnn's `SATURATE_CAST_UCHAR` generalised: truncation toward zero, then 0..max.
#[inline]
pub(super) fn quantize(x: f32, max: f32) -> u16 {
    x.trunc().clamp(0.0, max) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantize_truncates_then_clamps() {
        assert_eq!(quantize(254.99, 255.0), 254);
        assert_eq!(quantize(-0.7, 255.0), 0);
        assert_eq!(quantize(300.0, 255.0), 255);
        assert_eq!(quantize(f32::NAN, 255.0), 0);
        assert_eq!(quantize(70000.0, 65535.0), 65535);
    }
}
