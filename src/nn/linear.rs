use crate::error::{Error, Result};
use crate::tensor::Tensor;
use crate::weights::Weights;

/// `y = x · Wᵀ + b` over the last dimension: `weight` `[out, in]`, optional `bias` `[out]`.
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
