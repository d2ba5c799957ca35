//! The registry: every kernel module with its families, one file per `.hip` source. Each
//! family's `args` must match the parameter list of its export macro in the source: the
//! tests compare them.

mod binary;
mod cast;
mod conv;
mod copy;
mod elementwise;
mod igemm;
mod igemm_mma;
mod indexing;
mod nhwc_pack;
mod norm;
mod pointwise;
mod random;
mod reduce;
mod resample;

pub use indexing::INDEX_TYPES;

/// Every family by name, for launches (`kernels::family::BINARY`).
pub mod family {
    pub use super::binary::BINARY;
    pub use super::cast::{CAST, FILL};
    pub use super::conv::{COL2IM, CONV_EPILOGUE, CONV_TRANSPOSE2D_DIRECT, CONV2D_DIRECT, IM2COL};
    pub use super::copy::{COPY_STRIDED, COPY2D, PAD2D, POOL2D, TRANSPOSE2D, UPSAMPLE_NEAREST2D};
    pub use super::elementwise::{AFFINE, UNARY};
    pub use super::igemm::{IGEMM_FWD, IGEMM_TCONV};
    pub use super::igemm_mma::{
        IGEMM_EMU11, IGEMM_EMU12, IGEMM_MMA, IGEMM_MMA_NV, IGEMM_SIMT, IGEMM_SPLITK, MMA_TILE_EMU11, MMA_TILE_EMU12,
        MMA_TILE_NATIVE,
    };
    pub use super::indexing::{GATHER, INDEX_ADD, INDEX_SELECT, SCATTER_ADD, SCATTER_SET};
    pub use super::nhwc_pack::{IGEMM_PACK_INPUT, IGEMM_PACK_WEIGHT};
    pub use super::norm::{GROUP_NORM_APPLY, GROUP_NORM_STATS, ROW_NORM};
    pub use super::pointwise::{CMP, UNARY_PARAM, WHERE};
    pub use super::random::{RAND_BITS, RAND_NORMAL, RAND_UNIFORM};
    pub use super::reduce::{
        ARGREDUCE_LASTDIM, ARGREDUCE_STRIDED, EXACT_SUMS, REDUCE_LASTDIM, REDUCE_STRIDED, SOFTMAX,
    };
    pub use super::resample::{UPSAMPLE_BILINEAR2D, UPSAMPLE_NEAREST1D};
}

use crate::abi::arg;
use crate::{Arg, ArgType, Family, MMA, MMA_NAME, Module, PRELUDE, PRELUDE_NAME};

const NUMEL: Arg = arg("numel", ArgType::I64, "number of output elements");
const GEOM: Arg = arg("g", ArgType::Conv2d, "convolution geometry (Conv2dAbi)");

/// The headers of every module but one: the prelude alone.
const PRELUDE_ONLY: &[(&str, &str)] = &[(PRELUDE_NAME, PRELUDE)];
/// The headers of `igemm_mma.hip`, in its include order: the MMA layer builds on the prelude.
const PRELUDE_AND_MMA: &[(&str, &str)] = &[(PRELUDE_NAME, PRELUDE), (MMA_NAME, MMA)];

/// Every kernel module.
pub static MODULES: [Module; 14] = [
    Module {
        name: "elementwise",
        file: "elementwise.hip",
        source: include_str!("../elementwise.hip"),
        headers: PRELUDE_ONLY,
        families: elementwise::FAMILIES,
    },
    Module {
        name: "binary",
        file: "binary.hip",
        source: include_str!("../binary.hip"),
        headers: PRELUDE_ONLY,
        families: binary::FAMILIES,
    },
    Module {
        name: "cast",
        file: "cast.hip",
        source: include_str!("../cast.hip"),
        headers: PRELUDE_ONLY,
        families: cast::FAMILIES,
    },
    Module {
        name: "copy",
        file: "copy.hip",
        source: include_str!("../copy.hip"),
        headers: PRELUDE_ONLY,
        families: copy::FAMILIES,
    },
    Module {
        name: "reduce",
        file: "reduce.hip",
        source: include_str!("../reduce.hip"),
        headers: PRELUDE_ONLY,
        families: reduce::FAMILIES,
    },
    Module {
        name: "norm",
        file: "norm.hip",
        source: include_str!("../norm.hip"),
        headers: PRELUDE_ONLY,
        families: norm::FAMILIES,
    },
    Module {
        name: "conv",
        file: "conv.hip",
        source: include_str!("../conv.hip"),
        headers: PRELUDE_ONLY,
        families: conv::FAMILIES,
    },
    Module {
        name: "igemm",
        file: "igemm.hip",
        source: include_str!("../igemm.hip"),
        headers: PRELUDE_ONLY,
        families: igemm::FAMILIES,
    },
    Module {
        name: "igemm_mma",
        file: "igemm_mma.hip",
        source: include_str!("../igemm_mma.hip"),
        headers: PRELUDE_AND_MMA,
        families: igemm_mma::FAMILIES,
    },
    Module {
        name: "nhwc_pack",
        file: "nhwc_pack.hip",
        source: include_str!("../nhwc_pack.hip"),
        headers: PRELUDE_ONLY,
        families: nhwc_pack::FAMILIES,
    },
    Module {
        name: "pointwise",
        file: "pointwise.hip",
        source: include_str!("../pointwise.hip"),
        headers: PRELUDE_ONLY,
        families: pointwise::FAMILIES,
    },
    Module {
        name: "indexing",
        file: "indexing.hip",
        source: include_str!("../indexing.hip"),
        headers: PRELUDE_ONLY,
        families: indexing::FAMILIES,
    },
    Module {
        name: "resample",
        file: "resample.hip",
        source: include_str!("../resample.hip"),
        headers: PRELUDE_ONLY,
        families: resample::FAMILIES,
    },
    Module {
        name: "random",
        file: "random.hip",
        source: include_str!("../random.hip"),
        headers: PRELUDE_ONLY,
        families: random::FAMILIES,
    },
];

/// Every kernel module.
pub fn modules() -> &'static [Module] {
    &MODULES
}

/// The module that defines `entry`.
pub fn module_of(entry: &str) -> Option<&'static Module> {
    MODULES.iter().find(|m| m.defines(entry))
}

/// The family (and module) of `entry`.
pub fn family_of(entry: &str) -> Option<(&'static Module, &'static Family)> {
    MODULES.iter().find_map(|m| m.family_of(entry).map(|f| (m, f)))
}
