//! Real-CUGAN super-resolution (se / pro / nose, 2x / 3x / 4x) on rocm-vision.
//!
//! - [`ncnn`]: the `.param` / `.bin` loader (typed layers, checked weights).
//! - [`net`]: runs the loaded graph on rocm-vision tensors, resumable at the SE blocks'
//!   global pooling.
//! - [`upscale`]: realcugan-ncnn-vulkan's pre/post-processing and lossless tiling with
//!   whole-image SE means.
//! - [`models`]: model names, paths and loading; [`image_io`]: image files.
//!
//! ```no_run
//! use examples_sr::{models::{ModelKind, Variant}, upscale::{TileSize, Options}};
//! let device = examples_sr::cpu_device(rocm_vision::Budget::bytes(64 << 20));
//! let up = Variant::new(ModelKind::Se, 2, 0)?.load("models".as_ref(), rocm_vision::DType::F32, &device)?;
//! let img = examples_sr::image_io::load("in.png".as_ref())?;
//! let plan = up.plan(img.width, img.height, &Options { tile: TileSize::Auto, budget_bytes: 2 << 30, cache_bytes: 4 << 30 })?;
//! let out = up.upscale(&img, &plan, &mut |_| {})?;
//! examples_sr::image_io::save(&out, "out.png".as_ref(), examples_sr::image_io::Format::Png)?;
//! # Ok::<(), examples_sr::Error>(())
//! ```

mod auto_tile;
pub mod bicubic;
pub mod decode_limits;
/// The order-independent sum of the SE means (in the root crate, beside the tensor op that
/// computes it on either device).
pub use rocm_vision::exact_sum;
pub mod image_io;
pub mod models;
pub mod ncnn;
pub mod net;
pub mod ops;
pub mod upscale;

use std::path::PathBuf;

use conv_cpu::CpuConv;
use conv_engine::{Budget, ConvRounding};
use rocm_vision::Device;

/// Everything that can go wrong upscaling an image.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A bad choice of options (scale, noise level, tile size, ...).
    #[error("{0}")]
    Usage(String),

    #[error(
        "model file {} not found.\nThe Real-CUGAN models are not part of the repository: run `scripts/fetch-models.sh` \
         from the repository root (it puts them in models/), or point -m/--model-dir or REALCUGAN_MODELS at a \
         directory that holds models-se/, models-pro/ and models-nose/, or at one of those (looked in {})",
        path.display(),
        dir.display()
    )]
    ModelsMissing { path: PathBuf, dir: PathBuf },

    /// A model file that cannot be run (malformed, or a graph this executor does not run).
    #[error("{0}")]
    Model(String),

    /// An input image this tool cannot process.
    #[error("{0}")]
    Input(String),

    #[error("{}: {msg}", path.display())]
    Image { path: PathBuf, msg: String },

    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(transparent)]
    Tensor(#[from] rocm_vision::Error),

    /// A broken invariant of this crate (a bug): reported, never a panic.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The CPU device the upscaler runs on, with `workspace` for convolution scratch and
/// [`ConvRounding::SizeIndependent`] (which [`net::Network`] sets on any device).
///
/// Why: tiled output equals untiled output only if every convolution output pixel is
/// computed the same way in both runs. Under that policy the CPU engine chooses among the
/// implicit GEMM (each pixel sums its reduction in one order whatever the image width,
/// tile or blocking), the vectorised direct convolution (each pixel its own SIMD lane) and
/// Winograd, by the layer's channels and kernel alone, never by its size; the gemm crate
/// (`Gemm1x1`, candle's im2col), which blocks as it likes, is left out. Winograd's
/// rounding also depends on where the pixel falls on its transform grid, which is
/// anchored at output (0, 0): the tiler keeps tile origins on that grid and gives each
/// tile enough extra context that its cut last transform tiles stay outside what it keeps
/// ([`upscale::Upscaler::tile_align`], [`upscale::Upscaler::far_extension`]).
pub fn cpu_device(workspace: Budget) -> Device {
    Device::cpu_with_engine(CpuConv::new(workspace)).with_conv_rounding(ConvRounding::SizeIndependent)
}
