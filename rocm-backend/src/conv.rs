//! Convolution on ROCm: the device's algorithm catalog (workspace and cost of each
//! algorithm) and the execution of the dispatcher's plans.
//!
//! - `ImplicitGemm`: the NHWC implicit-GEMM kernels of `igemm_mma.hip` -- matrix cores
//!   (WMMA on RDNA3/RDNA4, MFMA on CDNA, mma.sync on the NVIDIA test tier) for f16/bf16,
//!   FMA for f32 -- with their workspace: the NHWC band of input rows a chunk reads, the
//!   packed weights, and split-K partial sums. Row chunking bounds the band, so the
//!   dispatcher fits the algorithm into any budget that holds one output row's band.
//!   Transposed convolutions run as one forward kernel launch per filter phase. Targets
//!   without matrix cores keep the workspace-free NCHW FMA kernel (`igemm_*`) for f16/bf16.
//! - `Im2colGemm`: the im2col kernel into a column buffer (one image, a band of output
//!   rows per chunk — the buffer is the workspace) and a rocBLAS GEMM; transposed
//!   convolutions as a GEMM into columns and `col2im`.
//! - `Gemm1x1`: rocBLAS straight on the input and output of a 1x1, stride-1 convolution.
//! - `Direct`: one thread per output element; the fallback for anything.
//! - `Miopen` (feature `miopen`): MIOpen's Immediate mode on the device's MIOpen handle
//!   (opened once per device, on first use). Its workspace is the chosen solution's: the
//!   fastest by MIOpen's estimate among those whose workspace fits what the budget leaves,
//!   so a problem MIOpen does not support, or whose solutions all need more, is never
//!   planned on it. Whole problems or batch chunks (each a sub-problem of its own); never
//!   output-row chunks. Without the feature the catalog does not offer it.

use crate::buffer::DeviceArray;
use crate::device::{ArchFamily, RocmDevice};
use crate::error::{Result, RocmError};
use crate::launch::{Arg, grid_for, launch};
use crate::ops::kernel_dtype;
use candle_core::DType;
use conv_engine::{Algorithm, AlgorithmCatalog, BudgetState, Chunk, ConvDType, ConvProblem, Dispatcher, Plan};
use implicit_gemm::ConvKind;
use kernels::{
    Conv2dParams, IGEMM_CONFIGS, IGEMM_MMA_CONFIGS, IGEMM_SIMT_CONFIGS, IgemmConfig, IgemmMath, IgemmNhwcConfig,
    MmaVariant,
};
use std::sync::Arc;

/// Sustained TFLOP/s assumed per algorithm and dtype class, per family. Only the ratios
/// matter. The NVIDIA test-tier figures are the H200 measurements of the GPU tier
/// (docs/measurements/); the AMD ones are unmeasured placeholders ordered as the hardware
/// suggests (matrix cores through rocBLAS for f16/bf16, FMA for the first igemm).
/// `ImplicitGemm` here is the NCHW FMA kernel; the NHWC kernels have [`igemm_tflops`].
fn tflops(family: ArchFamily, alg: Algorithm, dtype: ConvDType) -> f64 {
    let half = dtype != ConvDType::F32;
    match (alg, half, family) {
        (Algorithm::ImplicitGemm, _, ArchFamily::NvidiaTestTier) => 18.0,
        (Algorithm::ImplicitGemm, _, _) => 10.0,
        (Algorithm::Im2colGemm | Algorithm::Gemm1x1, false, ArchFamily::NvidiaTestTier) => 40.0,
        (Algorithm::Im2colGemm | Algorithm::Gemm1x1, true, ArchFamily::NvidiaTestTier) => 300.0,
        (Algorithm::Im2colGemm | Algorithm::Gemm1x1, false, _) => 15.0,
        (Algorithm::Im2colGemm | Algorithm::Gemm1x1, true, _) => 60.0,
        (Algorithm::Direct, _, _) => 1.0,
        (Algorithm::Miopen, _, _) => 20.0,
        // Not offered on ROCm (CPU only); never reached.
        (Algorithm::Winograd, _, _) => 0.0,
    }
}

/// Device memory bandwidth assumed for the im2col copy, bytes/s.
const BANDWIDTH: f64 = 1.0e12;

/// The ROCm device's convolution algorithms.
pub struct RocmCatalog {
    device: Arc<RocmDevice>,
}

impl RocmCatalog {
    pub fn new(device: Arc<RocmDevice>) -> Self {
        RocmCatalog { device }
    }

    /// The kernel an `ImplicitGemm` plan runs `chunk` of `p` with on this device.
    pub fn igemm_kernel(&self, p: &ConvProblem, chunk: &Chunk) -> IgemmKernel {
        let i = self.device.info();
        igemm_kernel(i.family, i.compute_units, p, chunk)
    }
}

fn is_gemm1x1(p: &ConvProblem) -> bool {
    let g = &p.geometry;
    g.kind == ConvKind::Forward
        && g.kernel == [1, 1]
        && g.stride == [1, 1]
        && g.pad_begin == [0, 0]
        && g.pad_end == [0, 0]
}

/// Column-buffer elements of one chunk for `Im2colGemm`.
fn col_elems(p: &ConvProblem, chunk: &Chunk) -> Option<usize> {
    let g = &p.geometry;
    let [_, q] = g.out_hw();
    match g.kind {
        // One image at a time; a band of output rows.
        ConvKind::Forward => Some(g.in_channels * g.taps() * chunk.rows.len() * q),
        // GEMM into columns then col2im over whole images: no row chunks.
        ConvKind::Transposed => {
            (chunk.rows.len() == g.out_hw()[0]).then(|| g.out_channels * g.taps() * g.in_size[0] * g.in_size[1])
        }
    }
}

impl AlgorithmCatalog for RocmCatalog {
    fn device_key(&self) -> String {
        let i = self.device.info();
        let rt = crate::runtime::runtime().map(|r| r.runtime_version).unwrap_or_default();
        format!("rocm/{}/hip {rt}", i.arch)
    }

    fn algorithms(&self) -> Vec<Algorithm> {
        #[allow(unused_mut)]
        let mut algs = vec![Algorithm::ImplicitGemm, Algorithm::Im2colGemm, Algorithm::Gemm1x1, Algorithm::Direct];
        #[cfg(feature = "miopen")]
        algs.push(Algorithm::Miopen);
        algs
    }

    fn workspace_bytes(&self, alg: Algorithm, p: &ConvProblem, chunk: &Chunk, limit: usize) -> Option<usize> {
        match alg {
            Algorithm::ImplicitGemm => match self.igemm_kernel(p, chunk) {
                IgemmKernel::Nchw(_) => Some(0),
                IgemmKernel::Nhwc { splits, .. } => nhwc_workspace_bytes(p, chunk, splits),
            },
            Algorithm::Direct => Some(0),
            Algorithm::Gemm1x1 => is_gemm1x1(p).then_some(0),
            Algorithm::Im2colGemm => col_elems(p, chunk).map(|e| e * p.dtype.size_in_bytes()),
            Algorithm::Miopen => miopen_workspace(&self.device, p, chunk, limit),
            // CPU only: not offered by this catalog.
            Algorithm::Winograd => None,
        }
    }

    fn estimated_seconds(&self, alg: Algorithm, p: &ConvProblem, chunk: &Chunk) -> f64 {
        let g = &p.geometry;
        let share = (chunk.batch.len() * chunk.rows.len()) as f64 / (g.batch * g.out_hw()[0]) as f64;
        let flops = g.flops() as f64 * share;
        let family = self.device.info().family;
        if alg == Algorithm::ImplicitGemm
            && let IgemmKernel::Nhwc { config, .. } = self.igemm_kernel(p, chunk)
        {
            return 10e-6 + nhwc_seconds(family, p, chunk, config, share);
        }
        let compute = flops / (tflops(family, alg, p.dtype) * 1e12);
        let copy = match alg {
            // Writing and reading back the column buffer.
            Algorithm::Im2colGemm => {
                2.0 * col_elems(p, chunk).unwrap_or(0) as f64
                    * chunk.batch.len() as f64
                    * p.dtype.size_in_bytes() as f64
                    / BANDWIDTH
            }
            _ => 0.0,
        };
        10e-6 + compute + copy
    }
}

/// The kernels' geometry of `g` restricted to `batch` images.
fn kernel_params(g: &implicit_gemm::ConvGeometry, batch: usize) -> Conv2dParams {
    let [p, q] = g.out_hw();
    Conv2dParams {
        n: batch as i32,
        c: g.in_channels as i32,
        h: g.in_size[0] as i32,
        w: g.in_size[1] as i32,
        k: g.out_channels as i32,
        r: g.kernel[0] as i32,
        s: g.kernel[1] as i32,
        p: p as i32,
        q: q as i32,
        stride_h: g.stride[0] as i32,
        stride_w: g.stride[1] as i32,
        pad_h: g.pad_begin[0] as i32,
        pad_w: g.pad_begin[1] as i32,
        dil_h: g.dilation[0] as i32,
        dil_w: g.dilation[1] as i32,
        groups: g.groups as i32,
    }
}

/// The igemm tile configuration for a problem: narrow output-channel tiles when a group
/// has few output channels, the large tile when both GEMM sides are large.
pub fn igemm_config(p: &ConvProblem) -> &'static IgemmConfig {
    let g = &p.geometry;
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

/// Which kernel runs an `ImplicitGemm` plan (or one chunk of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IgemmKernel {
    /// The NHWC kernels of igemm_mma.hip, with workspace.
    Nhwc { variant: MmaVariant, config: &'static IgemmNhwcConfig, splits: u32 },
    /// The NCHW FMA kernels of igemm.hip, no workspace: f16/bf16 where there are no matrix
    /// cores, and filters larger than 32 taps in a dimension.
    Nchw(&'static IgemmConfig),
}

/// Output activation of the fused epilogue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    #[default]
    None,
    Relu,
    Silu,
}

impl Activation {
    fn code(self) -> i32 {
        match self {
            Activation::None => 0,
            Activation::Relu => 1,
            Activation::Silu => 2,
        }
    }
}

/// What an implicit-GEMM launch fuses after the bias: `out = act(conv + bias) + residual`
/// (the residual is an NCHW tensor of the output's shape and dtype).
#[derive(Clone, Copy, Default)]
pub struct Epilogue<'a> {
    pub activation: Activation,
    pub residual: Option<&'a DeviceArray>,
}

impl Epilogue<'_> {
    fn is_plain(&self) -> bool {
        self.activation == Activation::None && self.residual.is_none()
    }
}

/// Channel slots per group of the packed input and weights: channels per group rounded up
/// to one 16-byte vector (8 f16/bf16, 4 f32).
fn padded_channels(cg: usize, elem_bytes: usize) -> usize {
    cg.next_multiple_of(16 / elem_bytes)
}

/// Filter taps of a phase as two arithmetic progressions (the taps of
/// `implicit_gemm::phases` are always a product of filter rows and columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TapGrid {
    r0: usize,
    rstep: usize,
    nr: usize,
    dh0: isize,
    ddh: isize,
    s0: usize,
    sstep: usize,
    ns: usize,
    dw0: isize,
    ddw: isize,
}

fn tap_grid(ph: &implicit_gemm::Phase) -> Result<TapGrid> {
    let mut rows: Vec<(usize, isize)> = Vec::new();
    let mut cols: Vec<(usize, isize)> = Vec::new();
    for t in &ph.taps {
        if !rows.iter().any(|&(r, _)| r == t.r) {
            rows.push((t.r, t.dh));
        }
        if !cols.iter().any(|&(s, _)| s == t.s) {
            cols.push((t.s, t.dw));
        }
    }
    let prog = |v: &[(usize, isize)]| -> Option<(usize, usize, isize, isize)> {
        let Some(&(a0, d0)) = v.first() else { return Some((0, 1, 0, 0)) };
        let (step, dstep) = if v.len() > 1 { (v[1].0.checked_sub(a0)?, v[1].1 - d0) } else { (1, 0) };
        for (i, &(a, d)) in v.iter().enumerate() {
            if a != a0 + i * step || d != d0 + i as isize * dstep {
                return None;
            }
        }
        Some((a0, step.max(1), d0, dstep))
    };
    let bad = || RocmError::op("conv", "a phase's filter taps are not a grid of rows and columns");
    let (r0, rstep, dh0, ddh) = prog(&rows).ok_or_else(bad)?;
    let (s0, sstep, dw0, ddw) = prog(&cols).ok_or_else(bad)?;
    if rows.len() * cols.len() != ph.taps.len() {
        return Err(bad());
    }
    Ok(TapGrid { r0, rstep, nr: rows.len(), dh0, ddh, s0, sstep, ns: cols.len(), dw0, ddw })
}

/// One kernel launch of a chunk: a phase as a forward convolution over the packed band.
#[derive(Clone, Copy, Debug)]
struct PhaseLaunch {
    params: Conv2dParams,
    taps: TapGrid,
    /// Output element offset of grid cell (0, 0) of image 0 of the chunk.
    out_offset: usize,
    /// os_n, os_c, os_y, os_x.
    view: [i64; 4],
    /// Output pixels of the phase over the chunk's images (GEMM M).
    m: usize,
}

/// How one chunk runs on the NHWC kernels.
#[derive(Clone, Debug)]
struct ChunkLayout {
    /// Input rows packed into the NHWC band.
    band: std::ops::Range<usize>,
    cgp: usize,
    phases: Vec<PhaseLaunch>,
}

fn chunk_layout(p: &ConvProblem, chunk: &Chunk) -> Result<ChunkLayout> {
    let g = &p.geometry;
    let [pp, qq] = g.out_hw();
    let [h, _] = g.in_size;
    let nb = chunk.batch.len();
    let cgp = padded_channels(g.in_channels_per_group(), p.dtype.size_in_bytes());
    let phases = implicit_gemm::geometry::phases(g, chunk.rows.clone());
    // The input rows any tap of any phase reads, clipped to the input.
    let (mut lo, mut hi) = (isize::MAX, isize::MIN);
    let mut grids = Vec::with_capacity(phases.len());
    for ph in &phases {
        let t = tap_grid(ph)?;
        if t.nr > 0 && t.ns > 0 && ph.rows > 0 {
            let dmin = t.dh0.min(t.dh0 + (t.nr as isize - 1) * t.ddh);
            let dmax = t.dh0.max(t.dh0 + (t.nr as isize - 1) * t.ddh);
            lo = lo.min(ph.base0[0] + dmin);
            hi = hi.max(ph.base0[0] + (ph.rows as isize - 1) * ph.base_step[0] + dmax);
        }
        grids.push(t);
    }
    let band = if lo > hi {
        0..0
    } else {
        let a = lo.clamp(0, h as isize) as usize;
        let b = (hi + 1).clamp(0, h as isize) as usize;
        a..b.max(a)
    };
    let mut out = Vec::with_capacity(phases.len());
    for (ph, t) in phases.iter().zip(grids) {
        if ph.rows == 0 || ph.cols == 0 {
            continue;
        }
        // A phase without taps still writes its pixels (bias only): one empty tap row.
        let (nr, ns) = if t.nr == 0 || t.ns == 0 { (0, 1) } else { (t.nr, t.ns) };
        let params = Conv2dParams {
            n: nb as i32,
            c: g.in_channels as i32,
            h: band.len() as i32,
            w: g.in_size[1] as i32,
            k: g.out_channels as i32,
            r: nr as i32,
            s: ns as i32,
            p: ph.rows as i32,
            q: ph.cols as i32,
            stride_h: ph.base_step[0] as i32,
            stride_w: ph.base_step[1] as i32,
            pad_h: -(ph.base0[0] + t.dh0 - band.start as isize) as i32,
            pad_w: -(ph.base0[1] + t.dw0) as i32,
            dil_h: t.ddh as i32,
            dil_w: t.ddw as i32,
            groups: g.groups as i32,
        };
        out.push(PhaseLaunch {
            params,
            taps: TapGrid { nr, ns, ..t },
            out_offset: ph.row0 * qq + ph.col0,
            view: [(g.out_channels * pp * qq) as i64, (pp * qq) as i64, (ph.row_step * qq) as i64, ph.col_step as i64],
            m: nb * ph.rows * ph.cols,
        });
    }
    Ok(ChunkLayout { band, cgp, phases: out })
}

/// Whether the NHWC kernels can run `p` at all (the padding masks have 32 bits per
/// dimension; indices are 32-bit inside a launch).
fn nhwc_supported(p: &ConvProblem) -> bool {
    let g = &p.geometry;
    let [pp, qq] = g.out_hw();
    g.kernel[0] <= 32
        && g.kernel[1] <= 32
        && (g.batch * pp * qq) < (1 << 31)
        && g.batch <= 65535
        && g.out_channels < (1 << 30)
        && g.in_channels < (1 << 30)
}

/// The default kernel for `p` (chunk `chunk`) on a device of `family` with `cus` compute
/// units: the tile table's configuration for the regime, split-K when the output tiles
/// leave compute units idle and the reduction is long.
pub fn igemm_kernel(family: ArchFamily, cus: usize, p: &ConvProblem, chunk: &Chunk) -> IgemmKernel {
    let half = p.dtype != ConvDType::F32;
    if !nhwc_supported(p) || (half && !has_matrix_cores(family)) {
        return IgemmKernel::Nchw(igemm_config(p));
    }
    let g = &p.geometry;
    let kg = g.out_channels_per_group();
    let [_, qq] = g.out_hw();
    let m = chunk.batch.len() * chunk.rows.len() * qq;
    let phases = if g.kind == ConvKind::Transposed { g.stride[0] * g.stride[1] } else { 1 };
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
    // Split-K: at least 16 k-tiles per split, at most 16 splits, about two tiles per CU.
    let cgp = padded_channels(g.in_channels_per_group(), p.dtype.size_in_bytes());
    let taps = g.taps().div_ceil(phases).max(1);
    let ktiles = (taps * cgp).div_ceil(config.k_tile(p.dtype.size_in_bytes() as u32) as usize);
    let t = tiles(config);
    let splits = if t < cus && ktiles >= 32 { (2 * cus).div_ceil(t).min(ktiles / 16).clamp(1, 16) } else { 1 };
    IgemmKernel::Nhwc { variant: MmaVariant::Native, config, splits: splits as u32 }
}

/// Workspace elements of the NHWC path for a chunk: (band elements, packed weight
/// elements, split-K partial f32 elements). The band and weights are never empty
/// allocations (one element at least), so the count is what `run` allocates.
fn nhwc_workspace_elems(p: &ConvProblem, layout: &ChunkLayout, nb: usize, splits: u32) -> (usize, usize, usize) {
    let g = &p.geometry;
    let ct = g.groups * layout.cgp;
    let band = (nb * layout.band.len() * g.in_size[1] * ct).max(1);
    let taps: usize = layout.phases.iter().map(|ph| ph.taps.nr * ph.taps.ns).sum();
    let weights = (g.out_channels * taps * layout.cgp).max(1);
    let partial = if splits > 1 {
        layout.phases.iter().map(|ph| splits as usize * g.out_channels * ph.m).max().unwrap_or(0)
    } else {
        0
    };
    (band, weights, partial)
}

/// Workspace bytes of the NHWC path for a chunk (band + packed weights + partials).
pub fn nhwc_workspace_bytes(p: &ConvProblem, chunk: &Chunk, splits: u32) -> Option<usize> {
    let layout = chunk_layout(p, chunk).ok()?;
    let (band, weights, partial) = nhwc_workspace_elems(p, &layout, chunk.batch.len(), splits);
    Some((band + weights) * p.dtype.size_in_bytes() + partial * 4)
}

/// Sustained TFLOP/s assumed for the NHWC kernels (of useful work; tile padding is
/// accounted separately). NVIDIA: the H200 sweep ([`IGEMM_SWEEP_FILE`]), 140-222 TFLOP/s f16/bf16 and
/// 27-30 f32 on the 3x3 VAE shapes with packing included. AMD: unmeasured, no hardware is
/// available: ordered as the matrix hardware suggests, above rocBLAS through im2col,
/// which pays the column copy.
fn igemm_tflops(family: ArchFamily, math: IgemmMath) -> f64 {
    match (math, family) {
        (IgemmMath::Mma, ArchFamily::NvidiaTestTier) => 200.0,
        (IgemmMath::Mma, ArchFamily::Cdna) => 250.0,
        (IgemmMath::Mma, ArchFamily::Rdna4) => 120.0,
        (IgemmMath::Mma, ArchFamily::Rdna3) => 90.0,
        (IgemmMath::Mma, _) => 5.0,
        (IgemmMath::Simt, ArchFamily::NvidiaTestTier) => 28.0,
        (IgemmMath::Simt, _) => 12.0,
    }
}

fn nhwc_seconds(family: ArchFamily, p: &ConvProblem, chunk: &Chunk, config: &IgemmNhwcConfig, share: f64) -> f64 {
    let g = &p.geometry;
    let es = p.dtype.size_in_bytes();
    let (cg, kg) = (g.in_channels_per_group(), g.out_channels_per_group());
    let cgp = padded_channels(cg, es);
    // Work the tiles really do: output channels rounded up to the tile, channels to the slots.
    let util = (kg as f64 / kg.next_multiple_of(config.bn as usize) as f64) * (cg as f64 / cgp as f64);
    let compute = g.flops() as f64 * share / util / (igemm_tflops(family, config.math) * 1e12);
    // Packing reads the chunk's input band once and writes it once.
    let band_rows = g.in_size[0] as f64 * share;
    let pack =
        2.0 * (chunk.batch.len() as f64 * band_rows * g.in_size[1] as f64 * (g.groups * cgp * es) as f64) / BANDWIDTH;
    compute + pack
}

/// Runs a plan on contiguous device arrays; returns the contiguous NCHW output.
pub fn run_plan(
    device: &Arc<RocmDevice>,
    plan: &Plan,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
) -> Result<DeviceArray> {
    run_plan_fused(device, plan, x, w, bias, Epilogue::default())
}

/// [`run_plan`] with a fused epilogue: `out = act(conv + bias) + residual`. Only the NHWC
/// implicit-GEMM kernels fuse it; any other plan with a non-trivial epilogue is an error.
pub fn run_plan_fused(
    device: &Arc<RocmDevice>,
    plan: &Plan,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
) -> Result<DeviceArray> {
    let p = &plan.problem;
    let g = &p.geometry;
    let dtype = p.dtype.to_candle();
    for (what, a, len) in [("input", x, g.input_len()), ("weight", w, g.weight_len())] {
        if a.len != len || a.dtype != dtype {
            return Err(RocmError::op(
                "conv",
                format!("{what} holds {} {:?} elements, the problem needs {len} {dtype:?}", a.len, a.dtype),
            ));
        }
    }
    if let Some(b) = bias
        && (b.len != g.out_channels || b.dtype != dtype)
    {
        return Err(RocmError::op(
            "conv",
            format!("bias holds {} {:?} elements, expected {} {dtype:?}", b.len, b.dtype, g.out_channels),
        ));
    }
    if let Some(r) = epilogue.residual
        && (r.len != g.output_len() || r.dtype != dtype)
    {
        return Err(RocmError::op(
            "conv",
            format!(
                "residual holds {} {:?} elements, expected the output's {} {dtype:?}",
                r.len,
                r.dtype,
                g.output_len()
            ),
        ));
    }
    let catalog = RocmCatalog::new(device.clone());
    if !epilogue.is_plain() {
        let fusable = plan.algorithm == Algorithm::ImplicitGemm
            && plan.chunks().iter().all(|c| matches!(catalog.igemm_kernel(p, c), IgemmKernel::Nhwc { .. }));
        if !fusable {
            return Err(RocmError::op(
                "conv",
                format!(
                    "a fused activation/residual needs the NHWC implicit-GEMM kernels; the plan for {p} uses {}",
                    plan.algorithm
                ),
            ));
        }
    }
    let out = DeviceArray::alloc(device, dtype, g.output_len())?;
    let kd = kernel_dtype(dtype)?;
    let es = dtype.size_in_bytes();
    let (img_in, img_out) = (g.input_len() / g.batch, g.output_len() / g.batch);
    let [pp, qq] = g.out_hw();
    let bias_ptr = bias.map_or(0, |b| b.ptr_at(0));
    match plan.algorithm {
        Algorithm::ImplicitGemm
            if plan.chunks().iter().any(|c| matches!(catalog.igemm_kernel(p, c), IgemmKernel::Nhwc { .. })) =>
        {
            for chunk in plan.chunks() {
                let kernel = catalog.igemm_kernel(p, &chunk);
                run_igemm_chunk(device, p, &chunk, kernel, x, w, bias, epilogue, &out)?;
            }
        }
        Algorithm::ImplicitGemm => {
            let cfg = igemm_config(p);
            let entry = kernels::igemm_entry_point(g.kind == ConvKind::Transposed, cfg, kd)
                .ok_or_else(|| RocmError::op("conv", format!("no implicit-GEMM kernel for {dtype:?}")))?;
            let params = kernel_params(g, g.batch);
            let grid = cfg.grid(&params);
            launch(
                device,
                &entry,
                grid,
                (cfg.threads(), 1, 1),
                &mut [
                    Arg::Conv(params),
                    Arg::Ptr(x.ptr_at(0)),
                    Arg::Ptr(w.ptr_at(0)),
                    Arg::Ptr(bias_ptr),
                    Arg::Ptr(out.ptr_at(0)),
                ],
            )?;
        }
        Algorithm::Direct => {
            let entry = match g.kind {
                ConvKind::Forward => format!("conv2d_direct_{}", kd.suffix()),
                ConvKind::Transposed => format!("conv_transpose2d_direct_{}", kd.suffix()),
            };
            launch(
                device,
                &entry,
                (grid_for(out.len, 256), 1, 1),
                (256, 1, 1),
                &mut [
                    Arg::Conv(kernel_params(g, g.batch)),
                    Arg::Ptr(x.ptr_at(0)),
                    Arg::Ptr(w.ptr_at(0)),
                    Arg::Ptr(bias_ptr),
                    Arg::Ptr(out.ptr_at(0)),
                ],
            )?;
        }
        Algorithm::Gemm1x1 => {
            let blas = device.blas()?;
            let (kg, cg) = (g.out_channels_per_group(), g.in_channels_per_group());
            let hw = pp * qq;
            // Row-major Out[kg, hw] = W[kg, cg] · X[cg, hw] is column-major
            // Outᵀ[hw, kg] = Xᵀ[hw, cg] · Wᵀ[cg, kg]; images are the batch.
            for grp in 0..g.groups {
                blas.gemm_strided_batched(
                    dtype,
                    false,
                    false,
                    (hw, kg, cg),
                    (x.ptr_at(grp * cg * hw), hw, img_in),
                    (w.ptr_at(grp * kg * cg), cg, 0),
                    (out.ptr_at(grp * kg * hw), hw, img_out),
                    g.batch,
                )?;
            }
            add_bias(device, &out, bias, g.batch, g.out_channels, hw)?;
        }
        Algorithm::Im2colGemm => {
            let blas = device.blas()?;
            let (kg, cg) = (g.out_channels_per_group(), g.in_channels_per_group());
            let rs = g.taps();
            match g.kind {
                ConvKind::Forward => {
                    let rows = plan.chunking.rows_per_chunk;
                    let col = DeviceArray::alloc(device, dtype, g.in_channels * rs * rows * qq)?;
                    let params = kernel_params(g, 1);
                    for n in 0..g.batch {
                        for r0 in (0..pp).step_by(rows) {
                            let count = rows.min(pp - r0) * qq;
                            let pix_begin = r0 * qq;
                            launch(
                                device,
                                &format!("im2col_{}", kd.bits_suffix()),
                                (count.div_ceil(256) as u32, (g.in_channels * rs).min(65535) as u32, 1),
                                (256, 1, 1),
                                &mut [
                                    Arg::Conv(params),
                                    Arg::I64(pix_begin as i64),
                                    Arg::I64(count as i64),
                                    Arg::Ptr(x.ptr_at(n * img_in)),
                                    Arg::Ptr(col.ptr_at(0)),
                                ],
                            )?;
                            // Per group: Out[kg, count] (ld = p·q) = W[kg, cg·rs] · col[cg·rs, count];
                            // column-major: Outᵀ = colᵀ · Wᵀ, groups as the batch.
                            blas.gemm_strided_batched(
                                dtype,
                                false,
                                false,
                                (count, kg, cg * rs),
                                (col.ptr_at(0), count, cg * rs * count),
                                (w.ptr_at(0), cg * rs, kg * cg * rs),
                                (out.ptr_at(n * img_out + pix_begin), pp * qq, kg * pp * qq),
                                g.groups,
                            )?;
                        }
                    }
                }
                ConvKind::Transposed => {
                    let [h, wd] = g.in_size;
                    let hw = h * wd;
                    let col = DeviceArray::alloc(device, dtype, g.out_channels * rs * hw)?;
                    // col2im sees the forward convolution whose input is our output.
                    let mut fwd = kernel_params(g, 1);
                    fwd.c = g.out_channels as i32;
                    fwd.h = pp as i32;
                    fwd.w = qq as i32;
                    fwd.k = g.in_channels as i32;
                    fwd.p = h as i32;
                    fwd.q = wd as i32;
                    for n in 0..g.batch {
                        // Per group: col[kg·rs, hw] = W_gᵀ[kg·rs, cg] · X_g[cg, hw]; column-major:
                        // colᵀ[hw, kg·rs] = X_gᵀ[hw, cg] · W_g[cg, kg·rs] with W_g stored
                        // row-major [cg, kg·rs], i.e. transposed for BLAS.
                        blas.gemm_strided_batched(
                            dtype,
                            false,
                            true,
                            (hw, kg * rs, cg),
                            (x.ptr_at(n * img_in), hw, cg * hw),
                            (w.ptr_at(0), kg * rs, cg * kg * rs),
                            (col.ptr_at(0), hw, kg * rs * hw),
                            g.groups,
                        )?;
                        launch(
                            device,
                            &format!("col2im_{}", kd.suffix()),
                            (grid_for(img_out, 256), 1, 1),
                            (256, 1, 1),
                            &mut [Arg::Conv(fwd), Arg::Ptr(col.ptr_at(0)), Arg::Ptr(out.ptr_at(n * img_out))],
                        )?;
                    }
                }
            }
            add_bias(device, &out, bias, g.batch, g.out_channels, pp * qq)?;
        }
        Algorithm::Miopen => {
            run_miopen_into(device, plan, x, w, &out)?;
            add_bias(device, &out, bias, g.batch, g.out_channels, pp * qq)?;
        }
        Algorithm::Winograd => {
            return Err(RocmError::op("conv", "Winograd is a CPU algorithm, not offered on ROCm".to_string()));
        }
    }
    let _ = es;
    Ok(out)
}

/// The sub-problem a `Miopen` plan runs for `chunk` of `p`: the chunk's images, all output
/// rows (`None` for a chunk of output rows, which MIOpen cannot run).
pub fn miopen_chunk_problem(p: &ConvProblem, chunk: &Chunk) -> Option<ConvProblem> {
    (chunk.rows == (0..p.geometry.out_hw()[0]) && !chunk.batch.is_empty()).then(|| p.with_batch(chunk.batch.len()))
}

/// `Miopen`'s workspace for `chunk` of `p` within `limit` bytes (see
/// [`crate::miopen::offered_workspace`]); `None` when MIOpen cannot run it.
#[cfg(feature = "miopen")]
fn miopen_workspace(device: &RocmDevice, p: &ConvProblem, chunk: &Chunk, limit: usize) -> Option<usize> {
    let sub = miopen_chunk_problem(p, chunk)?;
    if !crate::miopen::supports(&sub) {
        return None;
    }
    let solutions = device.miopen().and_then(|m| m.solutions(&sub));
    match solutions {
        Ok(s) => crate::miopen::offered_workspace(&s, limit),
        Err(e) => {
            tracing::debug!(target: "rocm_backend::miopen", problem = %sub, error = %e, "MIOpen not offered");
            None
        }
    }
}

#[cfg(not(feature = "miopen"))]
fn miopen_workspace(_device: &RocmDevice, _p: &ConvProblem, _chunk: &Chunk, _limit: usize) -> Option<usize> {
    None
}

/// Runs a `Miopen` plan into `out` (contiguous NCHW, no bias): per chunk, the solution
/// chosen within the plan's `workspace_limit` — the one the catalog reported when the plan
/// was made — with its workspace from the device's budgeted allocator.
#[cfg(feature = "miopen")]
pub fn run_miopen_into(
    device: &Arc<RocmDevice>,
    plan: &Plan,
    x: &DeviceArray,
    w: &DeviceArray,
    out: &DeviceArray,
) -> Result<()> {
    let p = &plan.problem;
    if plan.algorithm != Algorithm::Miopen {
        return Err(RocmError::op("conv", format!("run_miopen_into was given a {} plan for {p}", plan.algorithm)));
    }
    let mi = device.miopen()?;
    for chunk in plan.chunks() {
        let sub = miopen_chunk_problem(p, &chunk).ok_or_else(|| {
            RocmError::op("conv", format!("MIOpen cannot run output rows {:?} of {p} as a chunk", chunk.rows))
        })?;
        let solution = mi.best_within(&sub, plan.workspace_limit)?.ok_or_else(|| {
            RocmError::op(
                "conv",
                format!("no MIOpen solution for {sub} fits the plan's {} workspace bytes", plan.workspace_limit),
            )
        })?;
        tracing::debug!(target: "rocm_backend::miopen", problem = %sub, images = ?chunk.batch, solution = solution.id, workspace_bytes = solution.workspace_bytes, "MIOpen run");
        mi.run(device, &sub, &solution, x, w, out, chunk.batch.start)?;
    }
    Ok(())
}

/// Without the `miopen` feature there is no MIOpen to run.
#[cfg(not(feature = "miopen"))]
pub fn run_miopen_into(
    _device: &Arc<RocmDevice>,
    _plan: &Plan,
    _x: &DeviceArray,
    _w: &DeviceArray,
    _out: &DeviceArray,
) -> Result<()> {
    Err(RocmError::op("conv", "the Miopen algorithm is not built into this backend"))
}

/// Seconds this device has spent compiling MIOpen solutions (the one-time cost of the
/// `Miopen` algorithm; each compile is also a `tracing` event). Opens the device's MIOpen
/// if nothing has yet.
#[cfg(feature = "miopen")]
pub fn miopen_compile_seconds(device: &RocmDevice) -> Result<f64> {
    Ok(device.miopen()?.compile_seconds())
}

/// Runs `p` whole with an explicit implicit-GEMM kernel -- any configuration, the gfx11 /
/// gfx12 emulations, any split-K factor -- for the benchmarks and tests. The workspace is
/// allocated through the device's allocator (counted against its budget) and freed on return.
pub fn run_implicit_gemm(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    kernel: IgemmKernel,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
) -> Result<DeviceArray> {
    let out = DeviceArray::alloc(device, p.dtype.to_candle(), p.geometry.output_len())?;
    run_implicit_gemm_into(device, p, kernel, x, w, bias, epilogue, &out)?;
    Ok(out)
}

/// [`run_implicit_gemm`] into an existing output array (tests poison it first).
#[allow(clippy::too_many_arguments)]
pub fn run_implicit_gemm_into(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    kernel: IgemmKernel,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
    out: &DeviceArray,
) -> Result<()> {
    let g = &p.geometry;
    let dtype = p.dtype.to_candle();
    for (what, a, len) in [("input", x, g.input_len()), ("weight", w, g.weight_len())] {
        if a.len != len || a.dtype != dtype {
            return Err(RocmError::op(
                "conv",
                format!("{what} holds {} {:?} elements, the problem needs {len} {dtype:?}", a.len, a.dtype),
            ));
        }
    }
    if bias.is_some_and(|b| b.len != g.out_channels || b.dtype != dtype)
        || epilogue.residual.is_some_and(|r| r.len != g.output_len() || r.dtype != dtype)
    {
        return Err(RocmError::op("conv", format!("bias or residual does not match {p}")));
    }
    if out.len != g.output_len() || out.dtype != dtype {
        return Err(RocmError::op(
            "conv",
            format!("output holds {} {:?} elements, {p} needs {}", out.len, out.dtype, g.output_len()),
        ));
    }
    if !nhwc_supported(p) {
        return Err(RocmError::op("conv", format!("the NHWC implicit-GEMM kernels do not support {p}")));
    }
    let chunk = Chunk { batch: 0..g.batch, rows: 0..g.out_hw()[0] };
    run_igemm_chunk(device, p, &chunk, kernel, x, w, bias, epilogue, out)
}

/// One chunk (images `chunk.batch`, output rows `chunk.rows`) on the NHWC kernels: pack the
/// input band, then per phase pack its weights, run the GEMM, and reduce split-K partials.
#[allow(clippy::too_many_arguments)]
fn run_igemm_chunk(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    chunk: &Chunk,
    kernel: IgemmKernel,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
    out: &DeviceArray,
) -> Result<()> {
    let IgemmKernel::Nhwc { variant, config, splits } = kernel else {
        return Err(RocmError::op("conv", "run_igemm_chunk needs an NHWC kernel"));
    };
    let g = &p.geometry;
    let dtype = p.dtype.to_candle();
    let kd = kernel_dtype(dtype)?;
    let entry = kernels::igemm_nhwc_entry_point(variant, config, kd).ok_or_else(|| {
        RocmError::op("conv", format!("no {variant:?} implicit-GEMM kernel {} for {dtype:?}", config.name))
    })?;
    if variant != MmaVariant::Native && device.info().warp_size != 32 {
        return Err(RocmError::op(
            "conv",
            format!("the RDNA WMMA emulations need 32-lane waves; this device has {}", device.info().warp_size),
        ));
    }
    let layout = chunk_layout(p, chunk)?;
    let nb = chunk.batch.len();
    let splits = splits.max(1);
    let (band_len, w_len, part_len) = nhwc_workspace_elems(p, &layout, nb, splits);
    let band = DeviceArray::alloc(device, dtype, band_len)?;
    let packed = DeviceArray::alloc(device, dtype, w_len)?;
    let partial = if part_len > 0 { Some(DeviceArray::alloc(device, DType::F32, part_len)?) } else { None };
    let [h, wd] = g.in_size;
    let [pp, qq] = g.out_hw();
    let (img_in, img_out) = (g.in_channels * h * wd, g.out_channels * pp * qq);
    let cgp = layout.cgp;
    let ct = g.groups * cgp;
    let bits = kd.bits_suffix();
    if !layout.band.is_empty() {
        let full = Conv2dParams {
            n: nb as i32,
            c: g.in_channels as i32,
            h: h as i32,
            w: wd as i32,
            groups: g.groups as i32,
            ..Default::default()
        };
        let npix = layout.band.len() * wd;
        launch(
            device,
            &format!("igemm_pack_input_{bits}"),
            (npix.div_ceil(32) as u32, ct.div_ceil(32) as u32, nb as u32),
            (32, 8, 1),
            &mut [
                Arg::Conv(full),
                Arg::I32(layout.band.start as i32),
                Arg::I32(layout.band.len() as i32),
                Arg::I32(cgp as i32),
                Arg::Ptr(x.ptr_at(chunk.batch.start * img_in)),
                Arg::Ptr(band.ptr_at(0)),
            ],
        )?;
    }
    let wgeom = Conv2dParams {
        k: g.out_channels as i32,
        c: g.in_channels as i32,
        r: g.kernel[0] as i32,
        s: g.kernel[1] as i32,
        groups: g.groups as i32,
        ..Default::default()
    };
    let transposed = i32::from(g.kind == ConvKind::Transposed);
    let kg = g.out_channels_per_group();
    let act = epilogue.activation.code();
    let bias_ptr = bias.map_or(0, |b| b.ptr_at(0));
    let part_ptr = partial.as_ref().map_or(0, |a| a.ptr_at(0));
    let mut woff = 0;
    for ph in &layout.phases {
        let t = &ph.taps;
        let wlen = g.out_channels * t.nr * t.ns * cgp;
        if wlen > 0 {
            launch(
                device,
                &format!("igemm_pack_weight_{bits}"),
                (grid_for(wlen, 256), 1, 1),
                (256, 1, 1),
                &mut [
                    Arg::Conv(wgeom),
                    Arg::I32(cgp as i32),
                    Arg::I32(transposed),
                    Arg::I32(t.r0 as i32),
                    Arg::I32(t.rstep as i32),
                    Arg::I32(t.nr as i32),
                    Arg::I32(t.s0 as i32),
                    Arg::I32(t.sstep as i32),
                    Arg::I32(t.ns as i32),
                    Arg::Ptr(w.ptr_at(0)),
                    Arg::Ptr(packed.ptr_at(woff)),
                ],
            )?;
        }
        let out_off = chunk.batch.start * img_out + ph.out_offset;
        let res_ptr = epilogue.residual.map_or(0, |r| r.ptr_at(out_off));
        let [os_n, os_c, os_y, os_x] = ph.view;
        launch(
            device,
            &entry,
            config.grid(ph.m as u64, kg as u64, g.groups as u32, splits),
            (config.threads(), 1, 1),
            &mut [
                Arg::Conv(ph.params),
                Arg::I32(cgp as i32),
                Arg::I32(splits as i32),
                Arg::I32(act),
                Arg::I64(os_n),
                Arg::I64(os_c),
                Arg::I64(os_y),
                Arg::I64(os_x),
                Arg::Ptr(band.ptr_at(0)),
                Arg::Ptr(packed.ptr_at(woff)),
                Arg::Ptr(bias_ptr),
                Arg::Ptr(res_ptr),
                Arg::Ptr(part_ptr),
                Arg::Ptr(out.ptr_at(out_off)),
            ],
        )?;
        if splits > 1 {
            launch(
                device,
                &format!("igemm_splitk_{}", kd.suffix()),
                (grid_for(g.out_channels * ph.m.div_ceil(4), 256), 1, 1),
                (256, 1, 1),
                &mut [
                    Arg::Conv(ph.params),
                    Arg::I32(splits as i32),
                    Arg::I32(act),
                    Arg::I64(os_n),
                    Arg::I64(os_c),
                    Arg::I64(os_y),
                    Arg::I64(os_x),
                    Arg::Ptr(part_ptr),
                    Arg::Ptr(bias_ptr),
                    Arg::Ptr(res_ptr),
                    Arg::Ptr(out.ptr_at(out_off)),
                ],
            )?;
        }
        woff += wlen;
    }
    Ok(())
}

/// `out[n, k, :] += bias[k]` in place.
fn add_bias(
    device: &Arc<RocmDevice>,
    out: &DeviceArray,
    bias: Option<&DeviceArray>,
    n: usize,
    k: usize,
    hw: usize,
) -> Result<()> {
    let Some(b) = bias else { return Ok(()) };
    let d = kernel_dtype(out.dtype)?;
    let shape = [n, k, hw];
    let lhs = kernels::StridedLayout::contiguous(&shape).map_err(|e| RocmError::op("conv bias", e.to_string()))?;
    let rhs = kernels::StridedLayout::new(&shape, &[0, 1, 0]).map_err(|e| RocmError::op("conv bias", e.to_string()))?;
    launch(
        device,
        &format!("binary_add_{}", d.suffix()),
        (grid_for(out.len, 256), 1, 1),
        (256, 1, 1),
        &mut [
            Arg::I64(out.len as i64),
            Arg::Strided(lhs),
            Arg::Strided(rhs),
            Arg::Ptr(out.ptr_at(0)),
            Arg::Ptr(b.ptr_at(0)),
            Arg::Ptr(out.ptr_at(0)),
        ],
    )
}

/// Convolution on one ROCm device within its allocator's budget.
pub struct RocmConv {
    device: Arc<RocmDevice>,
    dispatcher: Dispatcher<RocmCatalog>,
}

impl RocmConv {
    pub fn new(device: Arc<RocmDevice>) -> Self {
        RocmConv { dispatcher: Dispatcher::new(RocmCatalog::new(device.clone())), device }
    }

    pub fn with_allowed(mut self, algorithms: &[Algorithm]) -> Self {
        self.dispatcher = self.dispatcher.with_allowed(algorithms);
        self
    }

    pub fn dispatcher(&self) -> &Dispatcher<RocmCatalog> {
        &self.dispatcher
    }

    /// The budget as the dispatcher sees it: the allocator's budget and live bytes. The
    /// output buffer is counted as live before the decision, since it must exist too.
    pub fn budget_state(&self, output_bytes: usize) -> BudgetState {
        let s = self.device.allocator().stats();
        BudgetState { budget: s.budget, live: s.live + crate::alloc::size_class(output_bytes) }
    }

    pub fn plan(&self, p: &ConvProblem) -> std::result::Result<Plan, conv_engine::ConvError> {
        self.dispatcher.plan(p, self.budget_state(p.output_bytes()))
    }

    /// Plans and runs `p` on contiguous device arrays.
    pub fn run(
        &self,
        p: &ConvProblem,
        x: &DeviceArray,
        w: &DeviceArray,
        bias: Option<&DeviceArray>,
    ) -> Result<DeviceArray> {
        let plan = self.plan(p).map_err(|e| RocmError::op("conv", e.to_string()))?;
        run_plan(&self.device, &plan, x, w, bias)
    }
}

/// Whether a dtype has convolution kernels here.
pub fn conv_dtype_supported(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}

#[cfg(test)]
mod tests {
    //! The host side of the NHWC path checked on the CPU: a model that follows the pack
    //! kernels and the implicit-GEMM kernel index for index (band rows, channel slots,
    //! phase taps, padding masks, output view) must reproduce the f64 reference for every
    //! chunking the dispatcher can choose, forward and transposed.
    use super::*;
    use conv_engine::reference::conv_f64;
    use conv_engine::{Conv2dParams as Params, Padding2d};
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// What the kernels compute for one chunk, written into `out`.
    fn model_chunk(p: &ConvProblem, chunk: &Chunk, x: &[f64], w: &[f64], bias: &[f64], out: &mut [f64]) {
        let g = &p.geometry;
        let layout = chunk_layout(p, chunk).unwrap();
        let (cg, kg) = (g.in_channels_per_group(), g.out_channels_per_group());
        let [h, wd] = g.in_size;
        let [pp, qq] = g.out_hw();
        let cgp = layout.cgp;
        assert_eq!(cgp % (16 / p.dtype.size_in_bytes()), 0);
        let ct = g.groups * cgp;
        let nb = chunk.batch.len();
        let hb = layout.band.len();
        // igemm_pack_input
        let mut band = vec![0.0; nb * hb * wd * ct];
        for img in 0..nb {
            for y in 0..hb {
                for xx in 0..wd {
                    for slot in 0..ct {
                        let (grp, ci) = (slot / cgp, slot % cgp);
                        if ci < cg {
                            band[((img * hb + y) * wd + xx) * ct + slot] =
                                x[(((chunk.batch.start + img) * g.in_channels + grp * cg + ci) * h
                                    + layout.band.start
                                    + y)
                                    * wd
                                    + xx];
                        }
                    }
                }
            }
        }
        for ph in &layout.phases {
            let t = ph.taps;
            let k = &ph.params;
            // igemm_pack_weight
            let packed = |ch: usize, tr: usize, ts: usize, ci: usize| -> f64 {
                if ci >= cg {
                    return 0.0;
                }
                let (grp, j) = (ch / kg, ch % kg);
                let (r, s) = (t.r0 + tr * t.rstep, t.s0 + ts * t.sstep);
                let [rr, ss] = g.kernel;
                match g.kind {
                    ConvKind::Forward => w[((ch * cg + ci) * rr + r) * ss + s],
                    ConvKind::Transposed => w[(((grp * cg + ci) * kg + j) * rr + r) * ss + s],
                }
            };
            // the kernel: GEMM rows m over the phase grid, every output channel
            let (gp, gq) = (k.p as usize, k.q as usize);
            for m in 0..nb * gp * gq {
                let (img, yy, xx) = (m / (gp * gq), (m % (gp * gq)) / gq, m % gq);
                let y0 = yy as i64 * k.stride_h as i64 - k.pad_h as i64;
                let x0 = xx as i64 * k.stride_w as i64 - k.pad_w as i64;
                for (ch, &bias_ch) in bias.iter().enumerate().take(g.out_channels) {
                    let grp = ch / kg;
                    let mut acc = 0.0;
                    for tr in 0..k.r as usize {
                        for ts in 0..k.s as usize {
                            let iy = y0 + tr as i64 * k.dil_h as i64;
                            let ix = x0 + ts as i64 * k.dil_w as i64;
                            if iy < 0 || iy >= k.h as i64 || ix < 0 || ix >= k.w as i64 {
                                continue;
                            }
                            for ci in 0..cgp {
                                acc += band[((img * hb + iy as usize) * wd + ix as usize) * ct + grp * cgp + ci]
                                    * packed(ch, tr, ts, ci);
                            }
                        }
                    }
                    let [os_n, os_c, os_y, os_x] = ph.view;
                    let off = (chunk.batch.start * g.out_channels * pp * qq + ph.out_offset) as i64
                        + img as i64 * os_n
                        + ch as i64 * os_c
                        + yy as i64 * os_y
                        + xx as i64 * os_x;
                    assert!(out[off as usize].is_nan(), "{p}: output {off} written twice");
                    out[off as usize] = acc + bias_ch;
                }
            }
        }
    }

    fn random_problem(rng: &mut StdRng, i: usize) -> ConvProblem {
        loop {
            let dt = [candle_core::DType::F16, candle_core::DType::F32][i % 2];
            let groups = [1, 1, 2, 3][i % 4];
            let (c, k) = (groups * rng.random_range(1..7), groups * rng.random_range(1..6));
            let (n, h, w) = (rng.random_range(1..3), rng.random_range(1..12), rng.random_range(1..12));
            let kern = [rng.random_range(1..5), rng.random_range(1..5)];
            let stride = [rng.random_range(1..4), rng.random_range(1..4)];
            let pad = Padding2d::tblr(
                rng.random_range(0..3),
                rng.random_range(0..3),
                rng.random_range(0..3),
                rng.random_range(0..3),
            );
            let dil = [rng.random_range(1..3), rng.random_range(1..3)];
            let transposed = i % 3 != 0;
            let op = if transposed {
                [rng.random_range(0..stride[0].max(dil[0])), rng.random_range(0..stride[1].max(dil[1]))]
            } else {
                [0, 0]
            };
            let params = Params { stride, padding: pad, dilation: dil, groups, output_padding: op };
            let p = if transposed {
                ConvProblem::conv_transpose2d(&[n, c, h, w], &[c, k / groups, kern[0], kern[1]], dt, dt, &params)
            } else {
                ConvProblem::conv2d(&[n, c, h, w], &[k, c / groups, kern[0], kern[1]], dt, dt, &params)
            };
            if let Ok(p) = p {
                return p;
            }
        }
    }

    #[test]
    fn the_nhwc_layout_reproduces_the_reference_for_every_chunking() {
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let mut checked = 0;
        for i in 0..120 {
            let p = random_problem(&mut rng, i);
            let g = &p.geometry;
            let x: Vec<f64> = (0..g.input_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
            let w: Vec<f64> = (0..g.weight_len()).map(|_| rng.random_range(-1.0..1.0)).collect();
            let b: Vec<f64> = (0..g.out_channels).map(|_| rng.random_range(-1.0..1.0)).collect();
            let want = conv_f64(&p, &x, &w, Some(&b));
            let rows = g.out_hw()[0];
            for (bpc, rpc) in [(g.batch, rows), (1, rows), (1, rows.div_ceil(2)), (1, 1), (1, 3)] {
                let mut out = vec![f64::NAN; g.output_len()];
                for b0 in (0..g.batch).step_by(bpc) {
                    for r0 in (0..rows).step_by(rpc) {
                        let chunk = Chunk { batch: b0..(b0 + bpc).min(g.batch), rows: r0..(r0 + rpc).min(rows) };
                        model_chunk(&p, &chunk, &x, &w, &b, &mut out);
                        // The workspace the catalog reports holds what the chunk packs.
                        let layout = chunk_layout(&p, &chunk).unwrap();
                        let (band, weights, _) = nhwc_workspace_elems(&p, &layout, chunk.batch.len(), 1);
                        assert!(band >= chunk.batch.len() * layout.band.len() * g.in_size[1] * g.groups * layout.cgp);
                        assert!(
                            weights
                                >= g.out_channels
                                    * layout.cgp
                                    * layout.phases.iter().map(|ph| ph.taps.nr * ph.taps.ns).sum::<usize>()
                        );
                    }
                }
                for (j, (o, r)) in out.iter().zip(&want).enumerate() {
                    assert!(
                        (o - r).abs() <= 1e-9 * r.abs().max(1.0),
                        "{p}, chunks of {bpc} images x {rpc} rows: element {j}: {o} vs {r}"
                    );
                }
                checked += 1;
            }
        }
        assert_eq!(checked, 600);
    }

    #[test]
    fn miopen_chunks_are_whole_images() {
        let dt = candle_core::DType::F32;
        let p = ConvProblem::conv2d(&[5, 4, 9, 7], &[6, 4, 3, 3], dt, dt, &Params::default().with_stride(2)).unwrap();
        let rows = p.geometry.out_hw()[0];
        assert_eq!(rows, 4);
        assert_eq!(miopen_chunk_problem(&p, &Chunk { batch: 0..5, rows: 0..rows }), Some(p));
        let sub = miopen_chunk_problem(&p, &Chunk { batch: 3..5, rows: 0..rows }).unwrap();
        assert_eq!(sub.geometry.batch, 2);
        assert_eq!(sub, p.with_batch(2));
        // Output-row chunks are not MIOpen problems.
        assert_eq!(miopen_chunk_problem(&p, &Chunk { batch: 0..1, rows: 0..2 }), None);
        assert_eq!(miopen_chunk_problem(&p, &Chunk { batch: 0..1, rows: 2..4 }), None);
        assert_eq!(miopen_chunk_problem(&p, &Chunk { batch: 2..2, rows: 0..rows }), None);
    }

    #[test]
    fn split_k_and_tile_choice_follow_the_problem() {
        let dt = candle_core::DType::F16;
        // The VAE's 512-channel 3x3 at 1024^2: large tiles, no split.
        let big =
            ConvProblem::conv2d(&[1, 512, 1024, 1024], &[512, 512, 3, 3], dt, dt, &Params::default().with_padding(1))
                .unwrap();
        let whole = Chunk { batch: 0..1, rows: 0..1024 };
        let IgemmKernel::Nhwc { config, splits, .. } = igemm_kernel(ArchFamily::NvidiaTestTier, 132, &big, &whole)
        else {
            panic!()
        };
        assert_eq!((config.name, splits), ("128x128_2x2", 1));
        // 512 channels at 16x16: few tiles, a long reduction: split-K.
        let small =
            ConvProblem::conv2d(&[1, 512, 16, 16], &[512, 512, 3, 3], dt, dt, &Params::default().with_padding(1))
                .unwrap();
        let c = Chunk { batch: 0..1, rows: 0..16 };
        let IgemmKernel::Nhwc { config, splits, .. } = igemm_kernel(ArchFamily::NvidiaTestTier, 132, &small, &c) else {
            panic!()
        };
        assert_eq!(config.name, "64x64_2x2");
        assert!(splits > 1, "{splits}");
        assert!(nhwc_workspace_bytes(&small, &c, splits).unwrap() >= splits as usize * 512 * 256 * 4);
        // conv_out: 3 output channels -> the 16-wide tile.
        let head = ConvProblem::conv2d(&[1, 128, 64, 64], &[3, 128, 3, 3], dt, dt, &Params::default().with_padding(1))
            .unwrap();
        let IgemmKernel::Nhwc { config, .. } =
            igemm_kernel(ArchFamily::Rdna3, 48, &head, &Chunk { batch: 0..1, rows: 0..64 })
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
            igemm_kernel(ArchFamily::Rdna2, 40, &f32p, &Chunk { batch: 0..1, rows: 0..62 })
        else {
            panic!()
        };
        assert_eq!(config.math, IgemmMath::Simt);
        assert!(matches!(
            igemm_kernel(ArchFamily::Rdna2, 40, &head, &Chunk { batch: 0..1, rows: 0..64 }),
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
