//! Layers built from [`Weights`](crate::Weights): convolutions, normalisation, linear and
//! a single-head spatial self-attention block.

mod attention;
mod attention_cpu;
mod conv;
mod linear;
mod norm;

pub use attention::SpatialAttention;
pub use conv::{Conv2d, ConvTranspose2d};
pub use linear::Linear;
pub use norm::GroupNorm;
