//! In-place elementwise ops on CPU tensors, as candle custom ops run in parallel.
//!
//! The network applies a leaky ReLU to almost every convolution output and adds skip
//! connections to deconvolution outputs. Through the Tensor API each is one to four new
//! full-size tensors and single-threaded passes (a quarter of the run time at 256x256);
//! here the freshly computed tensor, which nothing else references yet, is updated in
//! place in one parallel pass. The arithmetic is ncnn's: `x < 0 ? x·slope : x`, and a
//! plain f32 add.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, InplaceOp1, InplaceOp2, Layout, bail};
use half::{bf16, f16};
use rayon::prelude::*;
use rocm_vision::Tensor;

/// Elements per parallel work item: large enough to amortise the scheduling.
const CHUNK: usize = 1 << 15;

struct LeakyRelu {
    slope: f32,
}

fn map_inplace<T: Copy + Send + Sync>(v: &mut [T], f: impl Fn(T) -> T + Sync) {
    v.par_chunks_mut(CHUNK).for_each(|c| c.iter_mut().for_each(|x| *x = f(*x)));
}

impl InplaceOp1 for LeakyRelu {
    fn name(&self) -> &'static str {
        "leaky-relu-inplace"
    }

    fn cpu_fwd(&self, storage: &mut CpuStorage, layout: &Layout) -> candle_core::Result<()> {
        let Some((start, end)) = layout.contiguous_offsets() else {
            bail!("in-place leaky ReLU needs a contiguous tensor, got strides {:?}", layout.stride())
        };
        let s = self.slope;
        match storage {
            CpuStorage::F32(v) => map_inplace(&mut v[start..end], |x| if x < 0.0 { x * s } else { x }),
            CpuStorage::F16(v) => {
                map_inplace(&mut v[start..end], |x| if x.to_f32() < 0.0 { f16::from_f32(x.to_f32() * s) } else { x })
            }
            CpuStorage::BF16(v) => {
                map_inplace(&mut v[start..end], |x| if x.to_f32() < 0.0 { bf16::from_f32(x.to_f32() * s) } else { x })
            }
            other => bail!("in-place leaky ReLU: unsupported dtype {:?}", other.dtype()),
        }
        Ok(())
    }
}

/// `x = x < 0 ? x·slope : x` in place, on a contiguous CPU tensor that nothing else
/// shares. Returns `false` (and does nothing) for a tensor that is not on the CPU.
pub fn leaky_relu_inplace(t: &Tensor, slope: f32) -> Result<bool, crate::Error> {
    let Some(c) = t.as_candle() else { return Ok(false) };
    c.inplace_op1(&LeakyRelu { slope }).map_err(|e| crate::Error::Internal(e.to_string()))?;
    Ok(true)
}

struct AddAssign;

/// `dst[i] += src[i]` over `[C, H, W]` (batch 1) where `dst` is contiguous and `src` any
/// strided view of the same shape (a crop).
fn add_strided<T: Copy + Send + Sync>(
    dst: &mut [T],
    src: &[T],
    src_l: &Layout,
    add: impl Fn(T, T) -> T + Sync,
) -> candle_core::Result<()> {
    let dims = src_l.dims();
    let stride = src_l.stride();
    let (Some(&w), Some(&h)) = (dims.last(), dims.iter().rev().nth(1)) else { bail!("add: rank {}", dims.len()) };
    let (sw, sh) = (stride[dims.len() - 1], stride[dims.len() - 2]);
    // Offset in src of every H x W plane (all leading dims flattened).
    let lead = &dims[..dims.len() - 2];
    let lead_stride = &stride[..dims.len() - 2];
    let planes: Vec<usize> = (0..lead.iter().product::<usize>())
        .map(|mut i| {
            let mut off = src_l.start_offset();
            for (d, s) in lead.iter().zip(lead_stride).rev() {
                off += (i % d) * s;
                i /= d;
            }
            off
        })
        .collect();
    dst.par_chunks_mut(h * w).zip(planes.par_iter()).for_each(|(plane, &off)| {
        for y in 0..h {
            let row = &mut plane[y * w..(y + 1) * w];
            let base = off + y * sh;
            if sw == 1 {
                row.iter_mut().zip(&src[base..base + w]).for_each(|(d, &s)| *d = add(*d, s));
            } else {
                row.iter_mut().enumerate().for_each(|(x, d)| *d = add(*d, src[base + x * sw]));
            }
        }
    });
    Ok(())
}

impl InplaceOp2 for AddAssign {
    fn name(&self) -> &'static str {
        "add-assign"
    }

    fn cpu_fwd(
        &self,
        dst: &mut CpuStorage,
        dst_l: &Layout,
        src: &CpuStorage,
        src_l: &Layout,
    ) -> candle_core::Result<()> {
        let Some((start, end)) = dst_l.contiguous_offsets() else { bail!("add-assign needs a contiguous destination") };
        if dst_l.dims() != src_l.dims() {
            bail!("add-assign: shapes {:?} and {:?}", dst_l.dims(), src_l.dims())
        }
        match (dst, src) {
            (CpuStorage::F32(d), CpuStorage::F32(s)) => add_strided(&mut d[start..end], s, src_l, |a, b| a + b),
            (CpuStorage::F16(d), CpuStorage::F16(s)) => add_strided(&mut d[start..end], s, src_l, |a, b| a + b),
            (CpuStorage::BF16(d), CpuStorage::BF16(s)) => add_strided(&mut d[start..end], s, src_l, |a, b| a + b),
            (d, s) => bail!("add-assign: dtypes {:?} and {:?}", d.dtype(), s.dtype()),
        }
    }
}

/// `dst += src` in place: `dst` a contiguous CPU tensor nothing else shares, `src` a
/// tensor (or view) of the same shape. Returns `false` (and does nothing) off the CPU.
pub fn add_inplace(dst: &Tensor, src: &Tensor) -> Result<bool, crate::Error> {
    let (Some(d), Some(s)) = (dst.as_candle(), src.as_candle()) else { return Ok(false) };
    d.inplace_op2(s, &AddAssign).map_err(|e| crate::Error::Internal(e.to_string()))?;
    Ok(true)
}

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

    #[test]
    fn inplace_ops_match_the_tensor_ops() {
        let dev = Device::cpu();
        let data: Vec<f32> = (0..2 * 4 * 5).map(|i| i as f32 - 17.5).collect();
        let a = Tensor::from_vec(data.clone(), &[1, 2, 4, 5], &dev).unwrap();
        let want = a.maximum(&a.affine(0.1f32 as f64, 0.0).unwrap()).unwrap().to_vec::<f32>().unwrap();
        assert!(leaky_relu_inplace(&a, 0.1).unwrap());
        assert_eq!(a.to_vec::<f32>().unwrap(), want);
        let big = Tensor::from_vec((0..2 * 6 * 7).map(|i| i as f32).collect(), &[1, 2, 6, 7], &dev).unwrap();
        let view = big.narrow(2, 1, 4).unwrap().narrow(3, 2, 5).unwrap();
        let d = Tensor::from_vec(data, &[1, 2, 4, 5], &dev).unwrap();
        let want = d.add(&view).unwrap().to_vec::<f32>().unwrap();
        assert!(add_inplace(&d, &view).unwrap());
        assert_eq!(d.to_vec::<f32>().unwrap(), want);
    }
}
