//! Indexing with candle's semantics (ids are u32 or i64): `index_select`, `gather`,
//! `scatter` / `scatter_add` and `index_add`.

use super::{Storage, Tensor};
use crate::error::Result;

impl Tensor {
    /// The slices `ids[i]` of dimension `dim`, in order (`ids` is 1-D).
    pub fn index_select(&self, ids: &Tensor, dim: usize) -> Result<Tensor> {
        self.same_device(ids, "index_select")?;
        match &self.s {
            Storage::Cpu(t) => self.wrap_cpu(t.index_select(self.cpu_operand(ids, "index_select")?, dim)?),
            Storage::Rocm(r) => self.wrap_rocm(r.index_select(self.rocm_operand(ids, "index_select")?, dim)?),
        }
    }

    /// `out[.., i, ..] = self[.., ids[.., i, ..], ..]` along `dim` (`ids` has the shape of the
    /// output).
    pub fn gather(&self, ids: &Tensor, dim: usize) -> Result<Tensor> {
        self.same_device(ids, "gather")?;
        match &self.s {
            Storage::Cpu(t) => self.wrap_cpu(t.gather(self.cpu_operand(ids, "gather")?, dim)?),
            Storage::Rocm(r) => self.wrap_rocm(r.gather(self.rocm_operand(ids, "gather")?, dim)?),
        }
    }

    /// A copy of `self` with `self[.., ids[.., i, ..], ..] = src[.., i, ..]` along `dim`
    /// (`add`: `+=`, duplicates accumulate; else the last duplicate wins).
    pub fn scatter(&self, ids: &Tensor, src: &Tensor, dim: usize, add: bool) -> Result<Tensor> {
        self.same_device(ids, "scatter")?;
        self.same_device(src, "scatter")?;
        match &self.s {
            Storage::Cpu(t) => {
                let (i, s) = (self.cpu_operand(ids, "scatter")?, self.cpu_operand(src, "scatter")?);
                self.wrap_cpu(if add { t.scatter_add(i, s, dim)? } else { t.scatter(i, s, dim)? })
            }
            Storage::Rocm(r) => self.wrap_rocm(r.scatter(
                self.rocm_operand(ids, "scatter")?,
                self.rocm_operand(src, "scatter")?,
                dim,
                add,
            )?),
        }
    }

    /// A copy of `self` with `self[.., ids[i], ..] += src[.., i, ..]` along `dim` (`ids` 1-D).
    pub fn index_add(&self, ids: &Tensor, src: &Tensor, dim: usize) -> Result<Tensor> {
        self.same_device(ids, "index_add")?;
        self.same_device(src, "index_add")?;
        match &self.s {
            Storage::Cpu(t) => self.wrap_cpu(t.index_add(
                self.cpu_operand(ids, "index_add")?,
                self.cpu_operand(src, "index_add")?,
                dim,
            )?),
            Storage::Rocm(r) => self.wrap_rocm(r.index_add(
                self.rocm_operand(ids, "index_add")?,
                self.rocm_operand(src, "index_add")?,
                dim,
            )?),
        }
    }
}
