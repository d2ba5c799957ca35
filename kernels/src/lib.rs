//! GPU kernel sources of rocm-vision and a registry of their entry points, and [`ops`]: the
//! op vocabulary (unary, binary, comparison, reduction, pooling, padding) that every device
//! shares, named as the registry names them.
//!
//! Every kernel is written once, in the C++ dialect that HIP (hipcc, hiprtc) and CUDA
//! (nvcc, NVRTC) share. [`PRELUDE`] (`prelude.h`) maps the few names that differ between the
//! two toolkits onto names of our own (`rv_*`, `RV_*`) and never redefines a toolkit name.
//! The sources use the `.hip` extension: hipcc then needs no `-x hip`, and the run-time
//! compilers (hiprtc, NVRTC) take a string and do not look at the extension at all.
//!
//! # Compiling a module at run time
//! Each [`Module`] is one translation unit. It starts with `#include "prelude.h"`; the one
//! module on matrix cores (`igemm_mma.hip`) then includes [`MMA_NAME`] (`mma.h`, the MMA
//! layer), which no other module needs. [`Module::headers`] lists what a module includes, by
//! name and text, the prelude first: give hiprtc/NVRTC each of them as an in-memory header
//! (the `headers` and `includeNames` arguments of `hiprtcCreateProgram`/
//! `nvrtcCreateProgram`), or compile [`Module::source_with_headers`], which has them pasted
//! in. No other file is included; the fp16/bf16 headers come from the toolkit (built into
//! hiprtc; found through `-I<cuda>/include` with NVRTC). Options used by the checks: hiprtc
//! `--offload-arch=<gcnArchName without features> -O3`; NVRTC `--gpu-architecture=sm_XX
//! -I<cuda include dir>` (NVRTC rejects `-O3`).
//!
//! # Calling conventions
//! Every entry point is `extern "C"` and named after its family's pattern ([`Family`]),
//! e.g. `unary_silu_f16`, `cast_f32_bf16`, `copy_strided_b16`,
//! `igemm_fwd_64x64x16_4x4_bf16`. [`Family::args`] lists the arguments in order with their
//! C types; pointers are device pointers, `rv_strided` and `rv_conv2d` are passed by value
//! and mirrored here by [`StridedLayout`] and [`Conv2dAbi`]. Scalars (`double`) are f64
//! whatever the tensor dtype. [`Family::launch`] gives the launch geometry. All kernels are
//! compiled with `__launch_bounds__(256)`: never launch more than [`MAX_THREADS`] threads
//! per block. Kernels that reduce across a block need blockDim.x to be a multiple of the
//! warp size (32 or 64; 256 suits both). Dtype suffixes: f32 f16 bf16 f64 u8 u32 i64; data
//! movement kernels are per element size instead: b8 b16 b32 b64 ([`DType::bits_suffix`]).

mod abi;
mod igemm_configs;
pub mod ops;
mod registry;

pub use abi::{
    Arg, ArgType, Conv2dAbi, DType, Elem, EpilogueAbi, Family, Launch, LayoutError, MAX_DIMS, MAX_THREADS, Module,
    StridedLayout, Types,
};
pub use igemm_configs::{
    IGEMM_CONFIGS, IGEMM_EMU_CONFIGS, IGEMM_MMA_CONFIGS, IGEMM_SIMT_CONFIGS, IgemmConfig, IgemmMath, IgemmNhwcConfig,
    MmaVariant, igemm_entry_point, igemm_nhwc_entry_point,
};
pub use registry::{INDEX_TYPES, MODULES, family, family_of, module_of, modules};

/// The prelude header, included by every module.
pub const PRELUDE: &str = include_str!("prelude.h");
/// The name under which the sources include the prelude (`#include "prelude.h"`).
pub const PRELUDE_NAME: &str = "prelude.h";
/// The MMA layer (matrix-core fragments and their policies), included after the prelude by
/// `igemm_mma.hip` only, so that the other modules do not compile it.
pub const MMA: &str = include_str!("mma.h");
/// The name under which `igemm_mma.hip` includes the MMA layer (`#include "mma.h"`).
pub const MMA_NAME: &str = "mma.h";

#[cfg(test)]
mod tests;
