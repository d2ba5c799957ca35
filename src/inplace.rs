//! In-place updates for memory-lean model code: a residual add into a tensor's own
//! buffer, and writing a slice into a larger tensor, on either device.

use crate::error::{Error, Result};
use crate::rocm::RocmTensor;
use crate::tensor::Tensor;
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, InplaceOp2, Layout};
use half::{bf16, f16};
use std::sync::Arc;

/// Elements per parallel work item of the CPU paths: large enough to amortise scheduling.
const CHUNK: usize = 1 << 15;

/// `dst += src` on the CPU: `dst` contiguous, `src` any strided view of the same shape (a
/// crop, say), in parallel over `H x W` planes (or chunks when both are contiguous).
struct AddAssignCpu;

fn add_strided<T: Copy + Send + Sync>(
    dst: &mut [T],
    src: &[T],
    src_l: &Layout,
    add: impl Fn(T, T) -> T + Sync,
) -> candle_core::Result<()> {
    use rayon::prelude::*;
    if let Some((s0, s1)) = src_l.contiguous_offsets() {
        let src = &src[s0..s1];
        dst.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| {
            d.iter_mut().zip(s).for_each(|(d, &s)| *d = add(*d, s));
        });
        return Ok(());
    }
    let dims = src_l.dims();
    let stride = src_l.stride();
    let (Some(&w), Some(&h)) = (dims.last(), dims.iter().rev().nth(1)) else {
        candle_core::bail!("add-assign: a strided source of rank {}", dims.len())
    };
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
    dst.par_chunks_mut((h * w).max(1)).zip(planes.par_iter()).for_each(|(plane, &off)| {
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

impl InplaceOp2 for AddAssignCpu {
    fn name(&self) -> &'static str {
        "add-assign"
    }

    fn cpu_fwd(&self, dst: &mut CpuStorage, dl: &Layout, src: &CpuStorage, sl: &Layout) -> candle_core::Result<()> {
        let Some((d0, d1)) = dl.contiguous_offsets() else {
            candle_core::bail!("add-assign needs a contiguous destination")
        };
        if dl.dims() != sl.dims() {
            candle_core::bail!("add-assign: shapes {:?} and {:?}", dl.dims(), sl.dims())
        }
        match (dst, src) {
            (CpuStorage::F32(d), CpuStorage::F32(s)) => add_strided(&mut d[d0..d1], s, sl, |a, b| a + b),
            (CpuStorage::F16(d), CpuStorage::F16(s)) => add_strided(&mut d[d0..d1], s, sl, |a: f16, b| a + b),
            (CpuStorage::BF16(d), CpuStorage::BF16(s)) => add_strided(&mut d[d0..d1], s, sl, |a: bf16, b| a + b),
            (CpuStorage::F64(d), CpuStorage::F64(s)) => add_strided(&mut d[d0..d1], s, sl, |a, b| a + b),
            (d, s) => candle_core::bail!("add-assign: dtypes {:?} and {:?}", d.dtype(), s.dtype()),
        }
    }
}

impl Tensor {
    /// `self + src`, written into `self`'s buffer when that is safe (same shape and
    /// dtype, `self` contiguous -- `src` may be any view, a crop say -- and on ROCm no other
    /// tensor sharing the buffer); on the CPU in parallel; otherwise
    /// an allocating add. Takes `self` by value: the caller gives up the handle, and must
    /// not keep another CPU tensor sharing its storage (a residual add into a fresh conv
    /// output is the intended use).
    pub fn add_assign(self, src: &Tensor) -> Result<Tensor> {
        let fits = self.device() == src.device()
            && self.dims() == src.dims()
            && self.dtype() == src.dtype()
            && self.is_contiguous();
        if fits {
            if let (Some(d), Some(s)) = (self.as_candle(), src.as_candle()) {
                d.inplace_op2(s, &AddAssignCpu)?;
                return Ok(self);
            }
            if let (Some(d), Some(s)) = (self.as_rocm(), src.as_rocm())
                && Arc::strong_count(&d.array.buffer) == 1
                && d.layout.start_offset() == 0
            {
                rocm_backend::ops::binary_into(
                    kernels::ops::BinaryOp::Add,
                    &d.array,
                    &d.layout,
                    &s.array,
                    &s.layout,
                    &d.array,
                )?;
                return Ok(self);
            }
        }
        self.add(src)
    }

    /// Writes `src` into `self` at `offset` along `dim`; every other dimension must match.
    /// `self` must be contiguous. Like candle's `slice_set`, this writes into the storage
    /// itself: every tensor sharing it sees the change.
    pub fn slice_set(&self, src: &Tensor, dim: usize, offset: usize) -> Result<()> {
        let (dd, sd) = (self.dims(), src.dims());
        if dd.len() != sd.len()
            || dim >= dd.len()
            || dd.iter().zip(sd).enumerate().any(|(i, (a, b))| i != dim && a != b)
            || offset + sd[dim] > dd[dim]
        {
            return Err(Error::op(
                "slice_set",
                format!("cannot write {sd:?} into {dd:?} at {offset} along dimension {dim}"),
            ));
        }
        if self.dtype() != src.dtype() || !self.is_contiguous() {
            return Err(Error::op("slice_set", "destination must be contiguous and of the source's dtype"));
        }
        if self.device() != src.device() {
            return Err(Error::device_mismatch("slice_set", self.device(), src.device()));
        }
        if let (Some(d), Some(s)) = (self.as_candle(), src.as_candle()) {
            return Ok(d.slice_set(&s.contiguous()?, dim, offset)?);
        }
        if let (Some(d), Some(s)) = (self.as_rocm(), src.as_rocm()) {
            let s = s.contiguous()?;
            let outer: usize = dd[..dim].iter().product();
            let inner: usize = dd[dim + 1..].iter().product();
            let cols = sd[dim] * inner;
            return rocm_backend::ops::copy2d(
                &s.array,
                0,
                cols,
                &d.array,
                d.layout.start_offset() + offset * inner,
                dd[dim] * inner,
                outer,
                cols,
            )
            .map_err(Error::from);
        }
        Err(Error::device_mismatch("slice_set", self.device(), src.device()))
    }

    pub(crate) fn as_rocm(&self) -> Option<&RocmTensor> {
        self.rocm_storage()
    }
}
