//! Normalisations: group normalisation (with its fused SiLU), layer and RMS normalisation
//! over the last dimension.

use super::{Storage, Tensor};
use crate::GroupStats;
use crate::cpu;
use crate::error::{Error, Result};

impl Tensor {
    /// Group normalisation of an `[N, C, ...]` tensor over `groups` channel groups, with
    /// optional per-channel scale and shift; statistics in f64 (CPU) / f32 (GPU).
    pub fn group_norm(
        &self,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        self.group_norm_impl(groups, weight, bias, eps, false)
    }

    /// `silu(group_norm(x))`, the pair every VAE resnet block starts with, in one pass
    /// and one output buffer (no intermediate tensors).
    pub fn group_norm_silu(
        &self,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
    ) -> Result<Tensor> {
        self.group_norm_impl(groups, weight, bias, eps, true)
    }

    /// Group normalisation of a `[1, C, ...]` tensor with `stats` instead of its own
    /// statistics: a band of a map normalised by the whole map's [`GroupStats`], as
    /// [`GroupStats::of`] and [`GroupStatsAccumulator`](crate::GroupStatsAccumulator) give
    /// them. Elementwise given the statistics, so the bands of a map give the rows of the
    /// whole map's result bit for bit.
    pub fn group_norm_with_stats(
        &self,
        stats: &GroupStats,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        silu: bool,
    ) -> Result<Tensor> {
        let dims = self.dims();
        if dims.len() < 2 || dims[0] != 1 || dims[1] != stats.channels() {
            return Err(Error::op(
                "group_norm",
                format!("input must be [1, {}, ...] for these statistics, got {dims:?}", stats.channels()),
            ));
        }
        self.group_norm_checked(stats.groups(), weight, bias, eps, silu, Some(stats))
    }

    fn group_norm_impl(
        &self,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        silu: bool,
    ) -> Result<Tensor> {
        self.group_norm_checked(groups, weight, bias, eps, silu, None)
    }

    fn group_norm_checked(
        &self,
        groups: usize,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        eps: f64,
        silu: bool,
        stats: Option<&GroupStats>,
    ) -> Result<Tensor> {
        let dims = self.dims().to_vec();
        if dims.len() < 2 {
            return Err(Error::op("group_norm", format!("input must be [N, C, ...], got {dims:?}")));
        }
        let c = dims[1];
        if groups == 0 || c % groups != 0 {
            return Err(Error::op("group_norm", format!("groups = {groups} does not divide {c} channels")));
        }
        check_affine("group_norm", c, weight, bias)?;
        match &self.s {
            Storage::Rocm(r) => {
                let (w, b) = (self.rocm_of(weight, "group_norm")?, self.rocm_of(bias, "group_norm")?);
                self.wrap_rocm(match stats {
                    Some(s) => r.group_norm_with_stats(s, w, b, eps, silu)?,
                    None => r.group_norm(groups, w, b, eps, silu)?,
                })
            }
            Storage::Cpu(t) => {
                // The affine parameters as f32, read from whichever device holds them.
                let affine =
                    |t: Option<&Tensor>| -> Result<Option<Vec<f32>>> { t.map(|t| t.to_vec::<f32>()).transpose() };
                let (w, b) = (affine(weight)?, affine(bias)?);
                self.wrap_cpu(cpu::group_norm(t, groups, w.as_deref(), b.as_deref(), eps, silu, stats)?)
            }
        }
    }

    /// Layer normalisation over the last dimension; statistics in f32.
    pub fn layer_norm(&self, weight: Option<&Tensor>, bias: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        let d =
            self.rank().checked_sub(1).ok_or_else(|| Error::op("layer_norm", "a 0-D tensor has no last dimension"))?;
        let c = self.dims()[d];
        check_affine("layer_norm", c, weight, bias)?;
        match &self.s {
            Storage::Rocm(r) => {
                let (w, b) = (self.rocm_of(weight, "layer_norm")?, self.rocm_of(bias, "layer_norm")?);
                self.wrap_rocm(r.layer_norm(w, b, eps)?)
            }
            Storage::Cpu(t) => {
                let (w, b) = (self.cpu_of(weight, "layer_norm")?, self.cpu_of(bias, "layer_norm")?);
                self.wrap_cpu(cpu::layer_norm(t, d, w, b, eps)?)
            }
        }
    }

    /// `x / sqrt(mean(x²) + eps) · weight` over the last dimension, computed in f32.
    pub fn rms_norm(&self, weight: Option<&Tensor>, eps: f64) -> Result<Tensor> {
        let d =
            self.rank().checked_sub(1).ok_or_else(|| Error::op("rms_norm", "a 0-D tensor has no last dimension"))?;
        let c = self.dims()[d];
        check_affine("rms_norm", c, weight, None)?;
        match &self.s {
            Storage::Rocm(r) => self.wrap_rocm(r.rms_norm(self.rocm_of(weight, "rms_norm")?, eps)?),
            Storage::Cpu(t) => self.wrap_cpu(cpu::rms_norm(t, d, self.cpu_of(weight, "rms_norm")?, eps)?),
        }
    }
}

/// The per-channel affine parameters, where given, are `[channels]`.
fn check_affine(op: &'static str, channels: usize, weight: Option<&Tensor>, bias: Option<&Tensor>) -> Result<()> {
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t
            && t.dims() != [channels]
        {
            return Err(Error::op(op, format!("{what} has shape {:?}, expected [{channels}]", t.dims())));
        }
    }
    Ok(())
}
