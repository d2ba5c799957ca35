use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::weights::Weights;

/// `y = x · Wᵀ + b` over the last dimension: `weight` `[out, in]`, optional `bias` `[out]`.
///
/// ```
/// use rocm_vision::prelude::*;
/// let device = Device::cpu();
/// let w = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3], &device)?;
/// let lin = Linear::new(w, Some(Tensor::from_vec(vec![0.5f32, -0.5], &[2], &device)?));
/// let y = lin.forward(&Tensor::from_vec(vec![1f32, 1.0, 1.0], &[1, 3], &device)?)?;
/// assert_eq!(y.to_vec::<f32>()?, vec![6.5, 14.5]);
/// # Ok::<(), rocm_vision::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}

impl Linear {
    pub fn new(weight: Tensor, bias: Option<Tensor>) -> Self {
        Linear { weight, bias }
    }

    pub fn load(w: &Weights, in_features: usize, out_features: usize) -> Result<Self> {
        let weight = w.get("weight", &[out_features, in_features])?;
        let bias = if w.contains("bias") { Some(w.get("bias", &[out_features])?) } else { None };
        Ok(Linear { weight, bias })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let in_f = self.weight.dim(1)?;
        if x.dims().last() != Some(&in_f) {
            return Err(Error::op("linear", format!("input {:?} does not end in {in_f} features", x.dims())));
        }
        let y = x.matmul(&self.weight.transpose(0, 1)?)?;
        match &self.bias {
            Some(b) => y.add(b),
            None => Ok(y),
        }
    }
}
