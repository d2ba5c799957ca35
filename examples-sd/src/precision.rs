//! f16 that never goes black: the decoder checks each block's output for values past
//! f16's range (inf, or NaN from them) and recomputes that block in f32 from its input.
//!
//! SDXL's VAE is the known case (activations past 65504 in some up blocks; diffusers,
//! ComfyUI and InvokeAI tell users to decode in f32 or use a re-trained "fp16-fix" VAE).
//! Here an f16 decode checks every block's output with one pass over it
//! ([`all_finite`]); a block whose output is not finite is run again from its (kept) f16
//! input with f32 activations and f32 copies of its weights (made for that block and
//! dropped after). If its f32 output fits f16, the decode goes on in f16; if not, the next
//! blocks run in f32 until an output fits f16 again. Outputs that are finite are never
//! touched, so a decode that does not overflow is bit for bit the plain f16 decode.

use crate::error::Result;
use rocm_vision::nn::{Conv2d, GroupNorm, Linear, SpatialAttention};
use rocm_vision::{DType, Tensor};
use std::sync::{Arc, Mutex};

/// Heap bytes of one channel's exact sum ([`rocm_vision::ExactSum`]'s bucket array).
pub const EXACT_SUM_BYTES: usize = rocm_vision::exact_sum::EXACT_SUM_BUCKETS * 8;

/// Whether every value of `x` (any shape; contiguous or not) is finite: one pass over
/// it, on its device (the GPU reads back 2 KiB per channel), no copy of the tensor.
pub fn all_finite(x: &Tensor) -> Result<bool> {
    if x.elem_count() == 0 {
        return Ok(true);
    }
    let x4 = match *x.dims() {
        [1, _, h, w] => return Ok(!x.channel_exact_sums(h, w)?.iter().any(|s| s.saw_non_finite())),
        [n, c, h, w] => x.contiguous()?.reshape(&[1, n * c, h, w])?,
        _ => x.contiguous()?.reshape(&[1, 1, 1, x.elem_count()])?,
    };
    let (h, w) = (x4.dims()[2], x4.dims()[3]);
    Ok(!x4.channel_exact_sums(h, w)?.iter().any(|s| s.saw_non_finite()))
}

/// What the f16 overflow guard did during a decode ([`crate::Decoder::precision_stats`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrecisionStats {
    /// Blocks whose f16 output was not finite and that were recomputed in f32, in order
    /// (diffusers module names, e.g. `decoder.up_blocks.1.resnets.0`).
    pub recomputed_in_f32: Vec<String>,
    /// Blocks run in f32 because the block before them left values f16 cannot hold.
    pub continued_in_f32: Vec<String>,
    /// Blocks whose output was checked.
    pub checked_blocks: usize,
}

impl PrecisionStats {
    /// One line for a log or stderr, or `None` when nothing was recomputed.
    pub fn summary(&self) -> Option<String> {
        if self.recomputed_in_f32.is_empty() {
            return None;
        }
        let mut s = format!(
            "f16 overflow (inf/NaN) in {} of {} blocks; recomputed in f32: {}",
            self.recomputed_in_f32.len(),
            self.checked_blocks,
            self.recomputed_in_f32.join(", ")
        );
        if !self.continued_in_f32.is_empty() {
            s.push_str(&format!("; then ran in f32 (values past f16's range): {}", self.continued_in_f32.join(", ")));
        }
        Some(s)
    }
}

/// The stats a decoder shares between its clones and its decode calls.
#[derive(Clone, Debug, Default)]
pub(crate) struct SharedStats(Arc<Mutex<PrecisionStats>>);

impl SharedStats {
    pub fn get(&self) -> PrecisionStats {
        self.0.lock().expect("precision stats poisoned").clone()
    }
    pub fn reset(&self) {
        *self.0.lock().expect("precision stats poisoned") = PrecisionStats::default();
    }
    pub fn update(&self, f: impl FnOnce(&mut PrecisionStats)) {
        f(&mut self.0.lock().expect("precision stats poisoned"));
    }
}

fn opt(t: &Option<Tensor>, dtype: DType) -> Result<Option<Tensor>> {
    Ok(t.as_ref().map(|t| t.to_dtype(dtype)).transpose()?)
}

/// `c` with its weight and bias in `dtype`.
pub(crate) fn conv_in(c: &Conv2d, dtype: DType) -> Result<Conv2d> {
    if c.weight.dtype() == dtype {
        return Ok(c.clone());
    }
    Ok(Conv2d::new(c.weight.to_dtype(dtype)?, opt(&c.bias, dtype)?, c.params).with_activation(c.activation))
}

pub(crate) fn norm_in(n: &GroupNorm, dtype: DType) -> Result<GroupNorm> {
    Ok(GroupNorm { groups: n.groups, weight: n.weight.to_dtype(dtype)?, bias: n.bias.to_dtype(dtype)?, eps: n.eps })
}

fn linear_in(l: &Linear, dtype: DType) -> Result<Linear> {
    Ok(Linear::new(l.weight.to_dtype(dtype)?, opt(&l.bias, dtype)?))
}

pub(crate) fn attention_in(a: &SpatialAttention, dtype: DType) -> Result<SpatialAttention> {
    Ok(SpatialAttention {
        norm: norm_in(&a.norm, dtype)?,
        q: linear_in(&a.q, dtype)?,
        k: linear_in(&a.k, dtype)?,
        v: linear_in(&a.v, dtype)?,
        out: linear_in(&a.out, dtype)?,
        max_score_bytes: a.max_score_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocm_vision::Device;

    #[test]
    fn all_finite_finds_one_bad_value_in_any_shape() {
        let d = Device::cpu();
        for shape in [vec![1, 3, 4, 5], vec![2, 3, 4, 5], vec![60], vec![3, 20]] {
            let mut v = vec![1.0f32; shape.iter().product()];
            let x = Tensor::from_vec(v.clone(), &shape, &d).unwrap().to_dtype(DType::F16).unwrap();
            assert!(all_finite(&x).unwrap(), "{shape:?}");
            v[37] = 70000.0; // past f16's 65504: inf once converted
            let x = Tensor::from_vec(v.clone(), &shape, &d).unwrap().to_dtype(DType::F16).unwrap();
            assert!(!all_finite(&x).unwrap(), "{shape:?}");
            v[37] = f32::NAN;
            assert!(!all_finite(&Tensor::from_vec(v, &shape, &d).unwrap()).unwrap(), "{shape:?}");
        }
        // A large finite map whose sum would overflow f16 is still finite.
        let x = Tensor::full(60000.0, &[1, 2, 16, 16], DType::F16, &d).unwrap();
        assert!(all_finite(&x).unwrap());
        // A transposed view.
        let mut v = vec![0.5f32; 24];
        v[5] = f32::INFINITY;
        let x = Tensor::from_vec(v, &[1, 2, 3, 4], &d).unwrap().transpose(2, 3).unwrap();
        assert!(!all_finite(&x).unwrap());
    }

    #[test]
    fn summary_names_the_blocks() {
        assert_eq!(PrecisionStats::default().summary(), None);
        let s = PrecisionStats {
            recomputed_in_f32: vec!["decoder.up_blocks.1.resnets.0".into()],
            continued_in_f32: vec![],
            checked_blocks: 20,
        };
        assert_eq!(
            s.summary().unwrap(),
            "f16 overflow (inf/NaN) in 1 of 20 blocks; recomputed in f32: decoder.up_blocks.1.resnets.0"
        );
    }
}
