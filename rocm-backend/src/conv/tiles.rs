//! The implicit-GEMM kernel choice: the tile table per architecture family and problem
//! regime (with the measurement that chose each row), and the split-K factor.

use crate::device::ArchFamily;
use conv_engine::{Chunk, ConvDType, ConvProblem};
use implicit_gemm::nhwc::{nhwc_supported, padded_channels, phase_count};
use kernels::{
    IGEMM_CONFIGS, IGEMM_MMA_CONFIGS, IGEMM_SIMT_CONFIGS, IgemmConfig, IgemmMath, IgemmNhwcConfig, MmaVariant,
};
use std::fmt;

/// The igemm tile configuration for a problem: narrow output-channel tiles when a group
/// has few output channels, the large tile when both GEMM sides are large.
pub fn igemm_config(p: &ConvProblem) -> &'static IgemmConfig {
    let g = p.geometry();
    let kg = g.out_channels_per_group();
    let m = g.batch * g.gemm_dims().n;
    if kg <= 16 {
        &IGEMM_CONFIGS[2]
    } else if kg >= 128 && m >= 128 * 256 {
        &IGEMM_CONFIGS[1]
    } else {
        &IGEMM_CONFIGS[0]
    }
}

// ---------------------------------------------------------------------------------------
// The NHWC implicit GEMM (igemm_mma.hip): tile table, choice, workspace, execution.

/// The problem regimes the tile table distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TileRegime {
    /// Enough output tiles of the large configuration to fill the device twice over.
    Large,
    /// Fewer: a smaller tile, with split-K when even that leaves compute units idle.
    Medium,
    /// 17..=32 output channels per group.
    Narrow32,
    /// At most 16 output channels per group (an RGB head: conv_out, K = 3).
    Narrow16,
}

/// One row of the tile table: the configuration a family uses in a regime, and why.
#[derive(Clone, Copy, Debug)]
pub struct TileChoice {
    /// `None`: every family without a row of its own.
    pub family: Option<ArchFamily>,
    /// f16/bf16 (matrix cores) or f32 (FMA).
    pub half: bool,
    pub regime: TileRegime,
    /// An entry of `kernels::IGEMM_MMA_CONFIGS` (half) or `IGEMM_SIMT_CONFIGS` (f32).
    pub config: &'static str,
    /// The measurement that chose it (file under docs/measurements/ and the winning
    /// figure), or why it is a default.
    pub chosen_by: &'static str,
}

const UNMEASURED_AMD: &str =
    "default: no AMD GPU to measure on (the largest tile that fits 2 LDS stages without spills)";
/// The measurement the NVIDIA rows of the tile table come from (relative to the repository root).
pub const IGEMM_SWEEP_FILE: &str = "docs/measurements/2026-12-02-h200-igemm-sweep.md";
const SWEPT_LARGE_HALF: &str = "H200 sweep (docs/measurements/2026-12-02-h200-igemm-sweep.md): lowest total time over \
     the six 3x3 VAE shapes in f16 (57.0 ms vs 57.9 for 128x128_2x4) and bf16 (55.8 vs 57.5); 219 TFLOP/s on 512->512";
const SWEPT_NARROW16_HALF: &str = "H200 sweep (docs/measurements/2026-12-02-h200-igemm-sweep.md): fastest on conv_out 128->3, 1.10 ms f16 / 1.12 bf16";
const SWEPT_LARGE_F32: &str = "H200 sweep (docs/measurements/2026-12-02-h200-igemm-sweep.md): fastest on every 3x3 \
     VAE shape, 367 ms total vs 384 for 128x64_8x4; 30 TFLOP/s on 512->512";
const SWEPT_NARROW16_F32: &str =
    "H200 sweep (docs/measurements/2026-12-02-h200-igemm-sweep.md): fastest on conv_out 128->3, 3.08 ms";
const NOT_SWEPT: &str = "default: the VAE shapes of the sweep never fall in this regime on the H200 (132 CUs)";

const fn tile(
    family: Option<ArchFamily>,
    half: bool,
    regime: TileRegime,
    config: &'static str,
    chosen_by: &'static str,
) -> TileChoice {
    TileChoice { family, half, regime, config, chosen_by }
}

/// Tile configurations per family and regime. The NVIDIA test-tier rows were set by the
/// GPU-tier sweep (`gpu_conv --sweep` prints the winner per VAE shape and dtype; see
/// [`IGEMM_SWEEP_FILE`]); the AMD rows cannot be measured without AMD hardware.
pub const IGEMM_TILE_TABLE: &[TileChoice] = &[
    tile(Some(ArchFamily::NvidiaTestTier), true, TileRegime::Large, "128x128_2x2", SWEPT_LARGE_HALF),
    tile(Some(ArchFamily::NvidiaTestTier), true, TileRegime::Medium, "64x64_2x2", NOT_SWEPT),
    tile(Some(ArchFamily::NvidiaTestTier), true, TileRegime::Narrow32, "128x32_4x1", NOT_SWEPT),
    tile(Some(ArchFamily::NvidiaTestTier), true, TileRegime::Narrow16, "128x16_4x1", SWEPT_NARROW16_HALF),
    tile(Some(ArchFamily::NvidiaTestTier), false, TileRegime::Large, "128x128_8x8", SWEPT_LARGE_F32),
    tile(Some(ArchFamily::NvidiaTestTier), false, TileRegime::Medium, "64x64_4x4", NOT_SWEPT),
    tile(Some(ArchFamily::NvidiaTestTier), false, TileRegime::Narrow32, "128x32_4x4", NOT_SWEPT),
    tile(Some(ArchFamily::NvidiaTestTier), false, TileRegime::Narrow16, "128x16_4x2", SWEPT_NARROW16_F32),
    tile(None, true, TileRegime::Large, "128x128_2x4", UNMEASURED_AMD),
    tile(None, true, TileRegime::Medium, "64x64_2x2", UNMEASURED_AMD),
    tile(None, true, TileRegime::Narrow32, "128x32_4x1", UNMEASURED_AMD),
    tile(None, true, TileRegime::Narrow16, "128x16_4x1", UNMEASURED_AMD),
    tile(None, false, TileRegime::Large, "128x64_8x4", UNMEASURED_AMD),
    tile(None, false, TileRegime::Medium, "64x64_4x4", UNMEASURED_AMD),
    tile(None, false, TileRegime::Narrow32, "128x32_4x4", UNMEASURED_AMD),
    tile(None, false, TileRegime::Narrow16, "128x16_4x2", UNMEASURED_AMD),
];

/// The NHWC configuration named `name` for `math`.
pub fn nhwc_config(math: IgemmMath, name: &str) -> Option<&'static IgemmNhwcConfig> {
    let table: &'static [IgemmNhwcConfig] = match math {
        IgemmMath::Mma => &IGEMM_MMA_CONFIGS,
        IgemmMath::Simt => &IGEMM_SIMT_CONFIGS,
    };
    table.iter().find(|c| c.name == name)
}

fn table_config(family: ArchFamily, half: bool, regime: TileRegime) -> &'static IgemmNhwcConfig {
    let row = IGEMM_TILE_TABLE
        .iter()
        .find(|t| t.family == Some(family) && t.half == half && t.regime == regime)
        .or_else(|| IGEMM_TILE_TABLE.iter().find(|t| t.family.is_none() && t.half == half && t.regime == regime))
        .expect("the tile table has a default row for every regime");
    nhwc_config(if half { IgemmMath::Mma } else { IgemmMath::Simt }, row.config)
        .expect("tile table names an instantiated config")
}

/// Whether a family runs f16/bf16 on matrix cores.
pub fn has_matrix_cores(family: ArchFamily) -> bool {
    matches!(family, ArchFamily::Rdna3 | ArchFamily::Rdna4 | ArchFamily::Cdna | ArchFamily::NvidiaTestTier)
}

/// Which kernel runs an `ImplicitGemm` plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IgemmKernel {
    /// The NHWC kernels of igemm_mma.hip, with workspace.
    Nhwc { variant: MmaVariant, config: &'static IgemmNhwcConfig, splits: u32 },
    /// The NCHW FMA kernels of igemm.hip, no workspace: f16/bf16 where there are no matrix
    /// cores, and filters larger than 32 taps in a dimension.
    Nchw(&'static IgemmConfig),
}

impl fmt::Display for IgemmKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IgemmKernel::Nhwc { variant, config, splits } => {
                let math = match config.math {
                    IgemmMath::Mma => "mma",
                    IgemmMath::Simt => "simt",
                };
                write!(f, "nhwc {math} {}", config.name)?;
                if *variant != MmaVariant::Native {
                    write!(f, " ({variant:?})")?;
                }
                if *splits > 1 {
                    write!(f, " split-K {splits}")?;
                }
                Ok(())
            }
            IgemmKernel::Nchw(c) => write!(f, "nchw fma {}", c.name),
        }
    }
}

/// The default kernel for `p` (chunk `chunk`) on a device of `family` with `cus` compute
/// units: the tile table's configuration for the regime, and, when `split_k` allows it,
/// split-K when the output tiles leave compute units idle and the reduction is long.
/// Without split-K each output's rounding does not depend on the problem's size: every
/// tile configuration sums the reduction in the same order (64-byte k-tiles, ascending).
pub fn igemm_kernel(family: ArchFamily, cus: usize, p: &ConvProblem, chunk: &Chunk, split_k: bool) -> IgemmKernel {
    let half = p.dtype() != ConvDType::F32;
    if !nhwc_supported(p.geometry()) || (half && !has_matrix_cores(family)) {
        return IgemmKernel::Nchw(igemm_config(p));
    }
    let g = p.geometry();
    let kg = g.out_channels_per_group();
    let [_, qq] = g.out_hw();
    let m = chunk.batch.len() * chunk.rows.len() * qq;
    let phases = phase_count(g);
    let m_phase = m.div_ceil(phases).max(1);
    let large = table_config(family, half, TileRegime::Large);
    let tiles = |c: &IgemmNhwcConfig| m_phase.div_ceil(c.bm as usize) * kg.div_ceil(c.bn as usize) * g.groups;
    let regime = if kg <= 16 {
        TileRegime::Narrow16
    } else if kg <= 32 {
        TileRegime::Narrow32
    } else if tiles(large) >= 2 * cus.max(1) {
        TileRegime::Large
    } else {
        TileRegime::Medium
    };
    let config = table_config(family, half, regime);
    let splits = if split_k { split_k_factor(cus, p, chunk, config) } else { 1 };
    IgemmKernel::Nhwc { variant: MmaVariant::Native, config, splits }
}

/// Split-K for `config`: at least 16 k-tiles per split, at most 16 splits, about two
/// tiles per CU; 1 when the output tiles alone fill the device or the reduction is short.
fn split_k_factor(cus: usize, p: &ConvProblem, chunk: &Chunk, config: &IgemmNhwcConfig) -> u32 {
    let g = p.geometry();
    let phases = phase_count(g);
    let m = chunk.batch.len() * chunk.rows.len() * g.out_hw()[1];
    let m_phase = m.div_ceil(phases).max(1);
    let t = m_phase.div_ceil(config.bm as usize) * g.out_channels_per_group().div_ceil(config.bn as usize) * g.groups;
    let cgp = padded_channels(g.in_channels_per_group(), p.dtype().size_in_bytes());
    let taps = g.taps().div_ceil(phases).max(1);
    let ktiles = (taps * cgp).div_ceil(config.k_tile(p.dtype().size_in_bytes() as u32) as usize);
    if t < cus && ktiles >= 32 { (2 * cus).div_ceil(t).min(ktiles / 16).clamp(1, 16) as u32 } else { 1 }
}

/// What `--tune` times for an `ImplicitGemm` plan: the default kernel first, then every
/// other configuration of its math this family runs (the NVIDIA-only cp.async ones on the
/// test tier alone), each without split-K and, when `split_k` allows it, with its own
/// split-K factor. Only the native fragment variant: the emulations are test kernels.
pub fn igemm_candidates(
    family: ArchFamily,
    cus: usize,
    p: &ConvProblem,
    chunk: &Chunk,
    split_k: bool,
) -> Vec<IgemmKernel> {
    let default = igemm_kernel(family, cus, p, chunk, split_k);
    let mut out = vec![default];
    let IgemmKernel::Nhwc { config: chosen, .. } = default else { return out };
    let table: &'static [IgemmNhwcConfig] = match chosen.math {
        IgemmMath::Mma => &IGEMM_MMA_CONFIGS,
        IgemmMath::Simt => &IGEMM_SIMT_CONFIGS,
    };
    for config in table.iter().filter(|c| !c.nvidia_only || family == ArchFamily::NvidiaTestTier) {
        let mut splits = vec![1];
        if split_k {
            splits.push(split_k_factor(cus, p, chunk, config));
        }
        splits.dedup();
        for splits in splits {
            let k = IgemmKernel::Nhwc { variant: MmaVariant::Native, config, splits };
            if !out.contains(&k) {
                out.push(k);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conv::igemm::nhwc_workspace_bytes;
    use conv_engine::Conv2dParams as Params;

    #[test]
    fn split_k_and_tile_choice_follow_the_problem() {
        let dt = candle_core::DType::F16;
        // The VAE's 512-channel 3x3 at 1024^2: large tiles, no split.
        let big =
            ConvProblem::conv2d(&[1, 512, 1024, 1024], &[512, 512, 3, 3], dt, dt, &Params::default().with_padding(1))
                .unwrap();
        let whole = Chunk { batch: 0..1, rows: 0..1024 };
        let IgemmKernel::Nhwc { config, splits, .. } =
            igemm_kernel(ArchFamily::NvidiaTestTier, 132, &big, &whole, true)
        else {
            panic!()
        };
        assert_eq!((config.name, splits), ("128x128_2x2", 1));
        // 512 channels at 16x16: few tiles, a long reduction: split-K.
        let small =
            ConvProblem::conv2d(&[1, 512, 16, 16], &[512, 512, 3, 3], dt, dt, &Params::default().with_padding(1))
                .unwrap();
        let c = Chunk { batch: 0..1, rows: 0..16 };
        let IgemmKernel::Nhwc { config, splits, .. } = igemm_kernel(ArchFamily::NvidiaTestTier, 132, &small, &c, true)
        else {
            panic!()
        };
        assert_eq!(config.name, "64x64_2x2");
        assert!(splits > 1, "{splits}");
        assert!(nhwc_workspace_bytes(&small, &c, splits).unwrap() >= splits as usize * 512 * 256 * 4);
        // Size-independent rounding: the same tile, never split.
        let IgemmKernel::Nhwc { config, splits, .. } = igemm_kernel(ArchFamily::NvidiaTestTier, 132, &small, &c, false)
        else {
            panic!()
        };
        assert_eq!((config.name, splits), ("64x64_2x2", 1));
        // conv_out: 3 output channels -> the 16-wide tile.
        let head = ConvProblem::conv2d(&[1, 128, 64, 64], &[3, 128, 3, 3], dt, dt, &Params::default().with_padding(1))
            .unwrap();
        let IgemmKernel::Nhwc { config, .. } =
            igemm_kernel(ArchFamily::Rdna3, 48, &head, &Chunk { batch: 0..1, rows: 0..64 }, true)
        else {
            panic!()
        };
        assert_eq!(config.name, "128x16_4x1");
        // f32 takes the FMA kernels everywhere; f16 without matrix cores the NCHW kernel.
        let f32p = ConvProblem::conv2d(
            &[1, 64, 64, 64],
            &[64, 64, 3, 3],
            candle_core::DType::F32,
            candle_core::DType::F32,
            &Params::default(),
        )
        .unwrap();
        let IgemmKernel::Nhwc { config, .. } =
            igemm_kernel(ArchFamily::Rdna2, 40, &f32p, &Chunk { batch: 0..1, rows: 0..62 }, true)
        else {
            panic!()
        };
        assert_eq!(config.math, IgemmMath::Simt);
        assert!(matches!(
            igemm_kernel(ArchFamily::Rdna2, 40, &head, &Chunk { batch: 0..1, rows: 0..64 }, true),
            IgemmKernel::Nchw(_)
        ));
        let sweep = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(IGEMM_SWEEP_FILE);
        assert!(sweep.exists(), "{} is missing", sweep.display());
        // Every tile-table row names an instantiated configuration of its kind.
        for t in IGEMM_TILE_TABLE {
            let config = nhwc_config(if t.half { IgemmMath::Mma } else { IgemmMath::Simt }, t.config);
            assert!(config.is_some(), "{t:?}");
            assert!(!t.chosen_by.is_empty());
            if t.chosen_by.contains("docs/measurements/") {
                assert!(t.chosen_by.contains(IGEMM_SWEEP_FILE), "{t:?}");
            }
            // NVIDIA-only configurations trap on AMD: only the NVIDIA rows may name them.
            if config.is_some_and(|c| c.nvidia_only) {
                assert_eq!(t.family, Some(ArchFamily::NvidiaTestTier), "{t:?}");
            }
        }
    }
}

#[cfg(test)]
mod candidate_tests {
    use super::*;
    use conv_engine::Conv2dParams as Params;

    /// The default kernel first, then every configuration of its math once per split
    /// factor, no duplicates; the cp.async configurations only on the NVIDIA test tier;
    /// no split-K where it is not allowed; the NCHW kernel alone where NHWC does not run.
    #[test]
    fn candidates_start_with_the_default_and_hold_each_configuration() {
        let dt = candle_core::DType::F16;
        let small =
            ConvProblem::conv2d(&[1, 512, 16, 16], &[512, 512, 3, 3], dt, dt, &Params::default().with_padding(1))
                .unwrap();
        let c = Chunk { batch: 0..1, rows: 0..16 };
        for (family, split_k) in
            [(ArchFamily::NvidiaTestTier, true), (ArchFamily::NvidiaTestTier, false), (ArchFamily::Rdna3, true)]
        {
            let all = igemm_candidates(family, 132, &small, &c, split_k);
            assert_eq!(all[0], igemm_kernel(family, 132, &small, &c, split_k), "{family:?}");
            for (i, k) in all.iter().enumerate() {
                assert!(!all[..i].contains(k), "{family:?}: {k} twice");
                let IgemmKernel::Nhwc { config, splits, variant } = k else { panic!("{k}") };
                assert_eq!(*variant, MmaVariant::Native);
                assert_eq!(config.math, IgemmMath::Mma);
                assert!(family == ArchFamily::NvidiaTestTier || !config.nvidia_only, "{family:?}: {k}");
                assert!(split_k || *splits == 1, "{k}");
            }
            let configs = IGEMM_MMA_CONFIGS.iter().filter(|c| !c.nvidia_only || family == ArchFamily::NvidiaTestTier);
            for config in configs {
                assert!(
                    all.iter()
                        .any(|k| matches!(k, IgemmKernel::Nhwc { config: c, splits: 1, .. } if c.name == config.name)),
                    "{family:?}: {} missing",
                    config.name
                );
            }
            if split_k {
                assert!(all.iter().any(|k| matches!(k, IgemmKernel::Nhwc { splits, .. } if *splits > 1)));
            }
        }
        // f16 without matrix cores: the NCHW kernel, nothing else to time.
        let nchw = igemm_candidates(ArchFamily::Rdna2, 40, &small, &c, true);
        assert!(matches!(nchw[..], [IgemmKernel::Nchw(_)]), "{nchw:?}");
    }
}
