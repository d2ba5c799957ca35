//! The pixel shuffle of the deconvolutions that run as 1x1 convolutions, as a candle
//! custom op in parallel on the CPU. (The leaky ReLU after the convolutions is their fused
//! epilogue, and the skip adds are `Tensor::add_assign`, on both devices.)

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout, bail};
use rayon::prelude::*;
use rocm_vision::Tensor;

struct PixelShuffle {
    r: usize,
}

/// `out[c][y·r + i][x·r + j] = in[c·r·r + i·r + j][y][x]` for a `[1, C·r·r, H, W]` input of
/// any strides (a crop view), written row by row in parallel.
fn pixel_shuffle_into<T: Copy + Send + Sync + Default>(
    src: &[T],
    l: &Layout,
    r: usize,
) -> candle_core::Result<(Vec<T>, candle_core::Shape)> {
    let dims = l.dims();
    let &[n, c, h, w] = dims else { bail!("pixel shuffle needs a 4-D tensor, got {dims:?}") };
    if n != 1 || c % (r * r) != 0 {
        bail!("pixel shuffle by {r} of shape {dims:?}")
    }
    let st = l.stride();
    let (sc, sh, sw) = (st[1], st[2], st[3]);
    let (oc, oh, ow) = (c / (r * r), h * r, w * r);
    let mut out = vec![T::default(); oc * oh * ow];
    out.par_chunks_mut(ow).enumerate().for_each(|(row, dst)| {
        let (o, yy) = (row / oh, row % oh);
        let (y, i) = (yy / r, yy % r);
        let base = |j: usize| l.start_offset() + (o * r * r + i * r + j) * sc + y * sh;
        if sw == 1 && r == 2 {
            // The common case: interleave two contiguous source rows.
            let (a, b) = (&src[base(0)..base(0) + w], &src[base(1)..base(1) + w]);
            for ((d, &p), &q) in dst.chunks_exact_mut(2).zip(a).zip(b) {
                d[0] = p;
                d[1] = q;
            }
        } else {
            for (x, d) in dst.chunks_exact_mut(r).enumerate() {
                for (j, v) in d.iter_mut().enumerate() {
                    *v = src[base(j) + x * sw];
                }
            }
        }
    });
    Ok((out, candle_core::Shape::from_dims(&[1, oc, oh, ow])))
}

impl candle_core::CustomOp1 for PixelShuffle {
    fn name(&self) -> &'static str {
        "pixel-shuffle"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, candle_core::Shape)> {
        Ok(match s {
            CpuStorage::F32(v) => {
                let (o, shape) = pixel_shuffle_into(v, l, self.r)?;
                (CpuStorage::F32(o), shape)
            }
            CpuStorage::F16(v) => {
                let (o, shape) = pixel_shuffle_into(v, l, self.r)?;
                (CpuStorage::F16(o), shape)
            }
            CpuStorage::BF16(v) => {
                let (o, shape) = pixel_shuffle_into(v, l, self.r)?;
                (CpuStorage::BF16(o), shape)
            }
            other => bail!("pixel shuffle: unsupported dtype {:?}", other.dtype()),
        })
    }
}

/// PyTorch's / ncnn's `pixel_shuffle` of a `[1, C·r·r, H, W]` tensor (any strides):
/// `[1, C, H·r, W·r]` with `out[c][y·r + i][x·r + j] = in[c·r·r + i·r + j][y][x]`. One
/// parallel pass on the CPU; reshape/permute/copy elsewhere.
pub fn pixel_shuffle(t: &Tensor, r: usize) -> Result<Tensor, crate::Error> {
    let &[n, c, h, w] = t.dims() else {
        return Err(crate::Error::Internal(format!("pixel shuffle of shape {:?}", t.dims())));
    };
    if n != 1 || r == 0 || c % (r * r) != 0 {
        return Err(crate::Error::Model(format!("pixel shuffle by {r} of shape {:?}", t.dims())));
    }
    match t.as_candle() {
        Some(ct) => {
            let out = ct.apply_op1_no_bwd(&PixelShuffle { r }).map_err(|e| crate::Error::Internal(e.to_string()))?;
            Ok(Tensor::from_candle(out, t.device())?)
        }
        None => Ok(t
            .contiguous()?
            .reshape(&[1, c / (r * r), r, r, h, w])?
            .permute(&[0, 1, 4, 2, 5, 3])?
            .contiguous()?
            .reshape(&[1, c / (r * r), h * r, w * r])?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocm_vision::Device;

    #[test]
    fn pixel_shuffle_matches_the_definition_on_views() {
        let dev = Device::cpu();
        let (c, h, w, r) = (8, 5, 6, 2);
        let data: Vec<f32> = (0..c * (h + 2) * (w + 3)).map(|i| i as f32).collect();
        let full = Tensor::from_vec(data, &[1, c, h + 2, w + 3], &dev).unwrap();
        let view = full.narrow(2, 1, h).unwrap().narrow(3, 2, w).unwrap();
        let got = pixel_shuffle(&view, r).unwrap();
        assert_eq!(got.dims(), [1, c / 4, h * r, w * r]);
        let src = view.contiguous().unwrap().to_vec::<f32>().unwrap();
        let out = got.to_vec::<f32>().unwrap();
        for o in 0..c / 4 {
            for y in 0..h * r {
                for x in 0..w * r {
                    let ch = o * r * r + (y % r) * r + x % r;
                    assert_eq!(out[(o * h * r + y) * w * r + x], src[(ch * h + y / r) * w + x / r]);
                }
            }
        }
    }
}
