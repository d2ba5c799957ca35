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
mod norm;
mod pointwise;
mod random;
mod reduce;
mod resample;

pub use indexing::INDEX_TYPES;

use crate::abi::arg;
use crate::{Arg, ArgType, Family, MMA, MMA_NAME, Module, PRELUDE, PRELUDE_NAME};

const NUMEL: Arg = arg("numel", ArgType::I64, "number of output elements");
const GEOM: Arg = arg("g", ArgType::Conv2d, "convolution geometry (Conv2dParams)");

/// The headers of every module but one: the prelude alone.
const PRELUDE_ONLY: &[(&str, &str)] = &[(PRELUDE_NAME, PRELUDE)];
/// The headers of `igemm_mma.hip`, in its include order: the MMA layer builds on the prelude.
const PRELUDE_AND_MMA: &[(&str, &str)] = &[(PRELUDE_NAME, PRELUDE), (MMA_NAME, MMA)];

/// Every kernel module.
pub static MODULES: [Module; 13] = [
    Module {
        name: "elementwise",
        file: "elementwise.hip",
        source: include_str!("../elementwise.hip"),
        headers: PRELUDE_ONLY,
        families: elementwise::ELEMENTWISE,
    },
    Module {
        name: "binary",
        file: "binary.hip",
        source: include_str!("../binary.hip"),
        headers: PRELUDE_ONLY,
        families: binary::BINARY,
    },
    Module {
        name: "cast",
        file: "cast.hip",
        source: include_str!("../cast.hip"),
        headers: PRELUDE_ONLY,
        families: cast::CAST,
    },
    Module {
        name: "copy",
        file: "copy.hip",
        source: include_str!("../copy.hip"),
        headers: PRELUDE_ONLY,
        families: copy::COPY,
    },
    Module {
        name: "reduce",
        file: "reduce.hip",
        source: include_str!("../reduce.hip"),
        headers: PRELUDE_ONLY,
        families: reduce::REDUCE,
    },
    Module {
        name: "norm",
        file: "norm.hip",
        source: include_str!("../norm.hip"),
        headers: PRELUDE_ONLY,
        families: norm::NORM,
    },
    Module {
        name: "conv",
        file: "conv.hip",
        source: include_str!("../conv.hip"),
        headers: PRELUDE_ONLY,
        families: conv::CONV,
    },
    Module {
        name: "igemm",
        file: "igemm.hip",
        source: include_str!("../igemm.hip"),
        headers: PRELUDE_ONLY,
        families: igemm::IGEMM,
    },
    Module {
        name: "igemm_mma",
        file: "igemm_mma.hip",
        source: include_str!("../igemm_mma.hip"),
        headers: PRELUDE_AND_MMA,
        families: igemm_mma::IGEMM_MMA,
    },
    Module {
        name: "pointwise",
        file: "pointwise.hip",
        source: include_str!("../pointwise.hip"),
        headers: PRELUDE_ONLY,
        families: pointwise::POINTWISE,
    },
    Module {
        name: "indexing",
        file: "indexing.hip",
        source: include_str!("../indexing.hip"),
        headers: PRELUDE_ONLY,
        families: indexing::INDEXING,
    },
    Module {
        name: "resample",
        file: "resample.hip",
        source: include_str!("../resample.hip"),
        headers: PRELUDE_ONLY,
        families: resample::RESAMPLE,
    },
    Module {
        name: "random",
        file: "random.hip",
        source: include_str!("../random.hip"),
        headers: PRELUDE_ONLY,
        families: random::RANDOM,
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
