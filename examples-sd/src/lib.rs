//! SD 1.x/2.x, SDXL, SD3 and FLUX VAE decoders and encoders (diffusers' `AutoencoderKL`)
//! on rocm-vision: weights in the diffusers or the original key layout, exact decode and
//! encode within a memory budget, optional tiled decode, PNG output, images in
//! ([`Encoder`]).
//!
//! ```no_run
//! # fn main() -> examples_sd::Result<()> {
//! use examples_sd::{Decoder, Model};
//! use rocm_vision::{DType, Device, Weights};
//! let device = Device::cpu();
//! let weights = Weights::open("vae.safetensors", &device)?;
//! let decoder = Decoder::load(&weights, &Model::Sd.config(), DType::F32)?;
//! let latents = examples_sd::io::load_latents("latents.npy".as_ref(), None, &device)?;
//! let image = decoder.decode(&latents, &mut |_, _| {})?;
//! examples_sd::io::write_png(&image.narrow(0, 0, 1)?, "out.png".as_ref(), false)?;
//! # Ok(()) }
//! ```

pub mod banded;
pub mod banded_plan;
mod blocks;
#[doc(hidden)]
pub mod cli;
pub mod config;
pub mod decoder;
pub mod encode_plan;
pub mod encoder;
pub mod error;
pub mod io;
pub mod layout;
mod map_file;
pub mod memory;
pub mod npy;
pub mod ops;
pub mod plan;
pub mod precision;
pub mod tiled;

pub use banded::{Banding, Home};
pub use banded_plan::BandedPlan;
pub use config::{Model, NORM_EPS, VaeConfig};
pub use decoder::{Decoder, ScratchCaps};
pub use encode_plan::EncodePlan;
pub use encoder::{Encoder, LatentDist};
pub use error::{Result, SdError};
pub use layout::{KeyLayout, KeyStyle};
pub use memory::{MemoryPlan, peak_rss_bytes};
pub use plan::{DecodePlan, StageMemory};
pub use precision::PrecisionStats;
pub use tiled::{TileSpec, decode_tiled};
