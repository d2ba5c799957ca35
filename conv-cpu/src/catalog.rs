//! The CPU's algorithm catalog: which kernel each algorithm runs a problem with (the one
//! decision a [`CpuPlan`] records), its exact workspace and its cost.

use crate::implicit_gemm::{CpuConvPlan, MicroKernel};
use crate::rates::{
    direct_vectorised_gflops_per_thread, gemm_shape_efficiency, gflops_per_thread, s2d_gflops_per_thread,
    winograd_f4_gflops_per_thread, winograd_gflops_per_thread,
};
use crate::winograd::{self, WinogradTile};
use crate::{candle_conv, direct, gemm1x1, s2d_gemm, tap_gemm};
use conv_engine::{
    Algorithm, AlgorithmCatalog, Chunk, Chunking, ConvDType, ConvGeometry, ConvKind, ConvProblem, ConvRounding, Plan,
};
use half::f16;

/// The kernel a CPU plan runs: the algorithm and, where it has a choice, the microkernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuKernel {
    /// Packed implicit GEMM; tiles fitted to the plan's workspace limit per chunk.
    ImplicitGemm(MicroKernel),
    /// Winograd F(2x2, 3x3) or F(4x4, 3x3); blocks of tiles fitted to the workspace limit
    /// per chunk.
    Winograd(WinogradTile, MicroKernel),
    /// candle's own conv (im2col + the gemm crate).
    CandleIm2col,
    /// `Gemm1x1` forward: the gemm crate over the input in place (1x1, stride 1).
    Gemm1x1,
    /// `Gemm1x1`'s transposed form: every tap of an ungrouped transposed conv is a 1x1
    /// GEMM, all of them one GEMM per band of input rows on the engine's microkernel, its
    /// products summed into each output pixel in tap order (col2im).
    TapGemm(MicroKernel),
    /// `Gemm1x1`'s space-to-depth form: a forward conv whose kernel is its stride
    /// (unpadded, undilated, ungrouped) as one GEMM per band of output rows over the input
    /// packed space-to-depth, on the engine's microkernel.
    S2dGemm(MicroKernel),
    /// `Direct` with the output pixels of a row in SIMD lanes, the epilogue in its
    /// write-out; needs staging scratch.
    DirectVectorised(MicroKernel),
    /// `Direct` as the scalar loop: any parameters, no workspace, epilogue in a pass after.
    DirectScalar,
}

impl CpuKernel {
    pub fn algorithm(self) -> Algorithm {
        match self {
            CpuKernel::ImplicitGemm(_) => Algorithm::ImplicitGemm,
            CpuKernel::Winograd(..) => Algorithm::Winograd,
            CpuKernel::CandleIm2col => Algorithm::Im2colGemm,
            CpuKernel::Gemm1x1 | CpuKernel::TapGemm(_) | CpuKernel::S2dGemm(_) => Algorithm::Gemm1x1,
            CpuKernel::DirectVectorised(_) | CpuKernel::DirectScalar => Algorithm::Direct,
        }
    }

    /// The engine's own microkernel this kernel runs, if it runs one (what must be
    /// supported by the CPU that runs the plan).
    pub fn microkernel(self) -> Option<MicroKernel> {
        match self {
            CpuKernel::ImplicitGemm(mk)
            | CpuKernel::Winograd(_, mk)
            | CpuKernel::TapGemm(mk)
            | CpuKernel::S2dGemm(mk)
            | CpuKernel::DirectVectorised(mk) => Some(mk),
            CpuKernel::CandleIm2col | CpuKernel::Gemm1x1 | CpuKernel::DirectScalar => None,
        }
    }

    /// Whether the kernel applies the epilogue in its own write-out (else one pass after).
    pub fn fuses_epilogue(self) -> bool {
        match self {
            CpuKernel::ImplicitGemm(_)
            | CpuKernel::Winograd(..)
            | CpuKernel::Gemm1x1
            | CpuKernel::TapGemm(_)
            | CpuKernel::S2dGemm(_)
            | CpuKernel::DirectVectorised(_) => true,
            CpuKernel::CandleIm2col | CpuKernel::DirectScalar => false,
        }
    }
}

impl std::fmt::Display for CpuKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CpuKernel::ImplicitGemm(mk) => write!(f, "implicit-gemm/{mk}"),
            CpuKernel::Winograd(tile, mk) => write!(f, "winograd-{tile}/{mk}"),
            CpuKernel::CandleIm2col => f.write_str("candle-im2col"),
            CpuKernel::Gemm1x1 => f.write_str("gemm1x1"),
            CpuKernel::TapGemm(mk) => write!(f, "tap-gemm/{mk}"),
            CpuKernel::S2dGemm(mk) => write!(f, "s2d-gemm/{mk}"),
            CpuKernel::DirectVectorised(mk) => write!(f, "direct-vectorised/{mk}"),
            CpuKernel::DirectScalar => f.write_str("direct-scalar"),
        }
    }
}

/// A plan of the CPU's dispatcher.
pub type CpuPlan = Plan<CpuKernel>;

/// The CPU's algorithms: `ImplicitGemm`, `Im2colGemm` (candle's own conv), `Gemm1x1` (the
/// gemm crate over the input in place; for transposed convs, one GEMM over every tap on the
/// engine's microkernel; for forward convs whose kernel is their stride, one GEMM over the
/// input packed space-to-depth), `Winograd` (F(4x4, 3x3) or F(2x2, 3x3) for 3x3 stride-1
/// convs) and `Direct`.
#[derive(Clone, Debug)]
pub struct CpuCatalog {
    pub(crate) threads: usize,
    pub(crate) kernel: MicroKernel,
    /// Winograd's tile when fixed ([`Self::with_winograd_tile`]); chosen per problem when
    /// `None`.
    winograd_tile: Option<WinogradTile>,
    /// What the catalog offers ([`Self::with_rounding`]).
    rounding: ConvRounding,
}

impl CpuCatalog {
    /// Uses rayon's current thread count and the best microkernel for this CPU.
    pub fn new() -> Self {
        CpuCatalog {
            threads: rayon::current_num_threads(),
            kernel: MicroKernel::detect(),
            winograd_tile: None,
            rounding: ConvRounding::Fastest,
        }
    }

    /// The catalog restricted to what `rounding` allows. Under
    /// [`ConvRounding::SizeIndependent`]: the implicit GEMM (each output sums its k-blocks
    /// in order whatever the column or reduction blocking), `Gemm1x1`'s transposed and
    /// space-to-depth forms (the same, on the engine's microkernel, whatever the band),
    /// Winograd (its tile chosen by channels, its transform grid the tiler's to align) and
    /// the vectorised direct convolution (each pixel its own lane, the taps in one order);
    /// not the gemm crate (`Gemm1x1`'s 1x1 form, candle's im2col), whose blocking is its
    /// own, nor the scalar direct loop.
    /// Costs are then compared without their fixed per-call term, so a layer's choice
    /// depends on its channels and kernel, not on its size: a tile chooses as the whole
    /// image does.
    pub fn with_rounding(mut self, rounding: ConvRounding) -> Self {
        self.rounding = rounding;
        self
    }

    pub fn rounding(&self) -> ConvRounding {
        self.rounding
    }

    /// A specific microkernel (e.g. `Portable` to test it on an AVX2 machine). Panics if
    /// this CPU cannot run it.
    pub fn with_kernel(mut self, kernel: MicroKernel) -> Self {
        assert!(kernel.is_supported(), "{kernel:?} is not supported by this CPU");
        self.kernel = kernel;
        self
    }

    /// Winograd always with this tile size (to test or measure one); by default F(4x4)
    /// where its rate beats F(2x2)'s (up to 128 channels) and its transformed weights fit
    /// the workspace limit.
    pub fn with_winograd_tile(mut self, tile: WinogradTile) -> Self {
        self.winograd_tile = Some(tile);
        self
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The Winograd tile for `problem`. It depends on the problem's channels and dtype, and
    /// on the workspace limit only through whether F(4x4)'s transformed weights fit, so a
    /// layer's tile (and with it the rounding of each output pixel) is the same for every
    /// image size that fits.
    fn winograd_tile(&self, problem: &ConvProblem, limit: usize) -> WinogradTile {
        if let Some(tile) = self.winograd_tile {
            return tile;
        }
        let g = problem.geometry();
        let f4_weights =
            36 * g.out_channels.div_ceil(crate::implicit_gemm::MR) * crate::implicit_gemm::MR * g.in_channels * 4;
        let channels = g.in_channels.min(g.out_channels);
        let f4_faster = winograd_f4_gflops_per_thread(problem.dtype(), channels)
            > winograd_gflops_per_thread(problem.dtype(), channels);
        if f4_faster && f4_weights <= limit { WinogradTile::F4 } else { WinogradTile::F2 }
    }

    /// The Winograd plan for a chunk (blocks shrunk to fit `limit` where possible), or
    /// `None` when the problem is not a 3x3 stride-1 one.
    pub(crate) fn winograd_plan(
        &self,
        tile: WinogradTile,
        mk: MicroKernel,
        problem: &ConvProblem,
        chunk: &Chunk,
        limit: usize,
    ) -> Option<winograd::WinogradPlan> {
        winograd::WinogradPlan::fitted(problem, tile, chunk, &chunk_geometry(problem, chunk), mk, self.threads, limit)
    }

    /// The scratch of the vectorised direct convolution with `mk` for a chunk, if it can
    /// run it: where the geometry vectorises on that ISA and the scratch fits `limit`.
    pub(crate) fn direct_vectorised_bytes(
        &self,
        mk: MicroKernel,
        problem: &ConvProblem,
        chunk: &Chunk,
        limit: usize,
    ) -> Option<usize> {
        let g = chunk_geometry(problem, chunk);
        if !direct::vectorises(&g, mk) {
            return None;
        }
        let floats = match problem.dtype() {
            ConvDType::F32 => direct::vectorised_scratch_floats::<f32>(&g, self.threads),
            _ => direct::vectorised_scratch_floats::<f16>(&g, self.threads),
        };
        (floats * 4 <= limit).then_some(floats * 4)
    }

    /// The executor plan for a chunk, with tiles shrunk (down to one worker) until its
    /// workspace fits `limit` where that is possible.
    pub(crate) fn implicit_plan(
        &self,
        mk: MicroKernel,
        problem: &ConvProblem,
        chunk: &Chunk,
        limit: usize,
    ) -> CpuConvPlan {
        CpuConvPlan::fitted(&chunk_geometry(problem, chunk), chunk.rows.clone(), self.threads, mk, limit)
    }
}

impl Default for CpuCatalog {
    fn default() -> Self {
        Self::new()
    }
}

/// The problem's geometry restricted to the chunk's images (rows are passed separately).
pub(crate) fn chunk_geometry(problem: &ConvProblem, chunk: &Chunk) -> ConvGeometry {
    let mut g = *problem.geometry();
    g.batch = chunk.batch.len();
    g
}

impl AlgorithmCatalog for CpuCatalog {
    type Kernel = CpuKernel;

    fn device_key(&self) -> String {
        let rounding = match self.rounding {
            ConvRounding::Fastest => "",
            ConvRounding::SizeIndependent => " (size-independent rounding)",
        };
        format!("cpu/{:?}/{} threads{rounding}", self.kernel, self.threads)
    }

    fn algorithms(&self) -> Vec<Algorithm> {
        match self.rounding {
            ConvRounding::Fastest => vec![
                Algorithm::ImplicitGemm,
                Algorithm::Im2colGemm,
                Algorithm::Gemm1x1,
                Algorithm::Winograd,
                Algorithm::Direct,
            ],
            // Gemm1x1 only in its transposed and space-to-depth forms, which run the
            // engine's microkernel.
            ConvRounding::SizeIndependent => {
                vec![Algorithm::ImplicitGemm, Algorithm::Gemm1x1, Algorithm::Winograd, Algorithm::Direct]
            }
        }
    }

    fn kernel(&self, alg: Algorithm, problem: &ConvProblem, chunking: Chunking, limit: usize) -> Option<CpuKernel> {
        match alg {
            Algorithm::ImplicitGemm => Some(CpuKernel::ImplicitGemm(self.kernel)),
            // Winograd's batched GEMMs pack for the 6x16 tile: the same ISA with that tile.
            Algorithm::Winograd => winograd::supports(problem)
                .then(|| CpuKernel::Winograd(self.winograd_tile(problem, limit), self.kernel.narrow())),
            Algorithm::Im2colGemm => Some(CpuKernel::CandleIm2col),
            Algorithm::Gemm1x1 if problem.geometry().kind == ConvKind::Transposed => {
                Some(CpuKernel::TapGemm(self.kernel))
            }
            // The space-to-depth form where the kernel is the stride, but not 1x1 (the
            // executor runs it, but it was measured only against the implicit GEMM on 2x2
            // stride-2 layers); else the gemm crate (1x1 stride 1, refused where it does not
            // run).
            Algorithm::Gemm1x1 => {
                let g = problem.geometry();
                Some(if s2d_gemm::fits(g) && g.kernel != [1, 1] {
                    CpuKernel::S2dGemm(self.kernel)
                } else {
                    CpuKernel::Gemm1x1
                })
            }
            // Vectorised where the geometry vectorises and its scratch fits (the scratch
            // does not depend on the chunk's images or rows); else the scalar loop, which
            // size-independent rounding does not take.
            Algorithm::Direct => {
                if self.direct_vectorised_bytes(self.kernel, problem, &chunking.first(problem), limit).is_some() {
                    Some(CpuKernel::DirectVectorised(self.kernel))
                } else if self.rounding == ConvRounding::SizeIndependent {
                    None
                } else {
                    Some(CpuKernel::DirectScalar)
                }
            }
            Algorithm::Miopen => None,
        }
    }

    fn workspace_bytes(&self, kernel: &CpuKernel, problem: &ConvProblem, chunk: &Chunk, limit: usize) -> Option<usize> {
        match *kernel {
            CpuKernel::ImplicitGemm(mk) => Some(self.implicit_plan(mk, problem, chunk, limit).workspace_bytes()),
            CpuKernel::DirectVectorised(mk) => self.direct_vectorised_bytes(mk, problem, chunk, limit),
            // The scalar loop's rounding is the same at every size, but it is not offered
            // under size-independent rounding (the vectorised loop sums in another order).
            CpuKernel::DirectScalar if self.rounding == ConvRounding::SizeIndependent => None,
            CpuKernel::DirectScalar => Some(0),
            CpuKernel::CandleIm2col => candle_conv::workspace_bytes(problem, chunk, self.threads),
            CpuKernel::TapGemm(mk) => tap_gemm::workspace_bytes(problem, mk, self.threads),
            CpuKernel::S2dGemm(mk) => s2d_gemm::workspace_bytes(problem, mk, self.threads),
            // The gemm crate's rounding may depend on the sizes it is given.
            CpuKernel::Gemm1x1 if self.rounding == ConvRounding::SizeIndependent => None,
            CpuKernel::Gemm1x1 => gemm1x1::workspace_bytes(problem, chunk, self.threads),
            CpuKernel::Winograd(tile, mk) => {
                self.winograd_plan(tile, mk, problem, chunk, limit).map(|p| p.workspace_bytes())
            }
        }
    }

    fn estimated_seconds(&self, kernel: &CpuKernel, problem: &ConvProblem, chunk: &Chunk) -> f64 {
        let alg = kernel.algorithm();
        let g = problem.geometry();
        let share = (chunk.batch.len() * chunk.rows.len()) as f64 / (g.batch * g.out_hw()[0]) as f64;
        let flops = g.flops() as f64 * share;
        let channels = g.in_channels.min(g.out_channels);
        let mut per_thread = match *kernel {
            CpuKernel::Winograd(WinogradTile::F4, _) => winograd_f4_gflops_per_thread(problem.dtype(), channels),
            _ => gflops_per_thread(alg, problem.dtype(), channels),
        };
        let (m, c) = (g.out_channels_per_group(), g.in_channels_per_group());
        // (Winograd's rates were measured on Real-CUGAN's and the VAE's shapes whole: no
        // shape factor on top.)
        match *kernel {
            CpuKernel::ImplicitGemm(mk) => per_thread *= gemm_shape_efficiency(m, mk.mr(), c * g.taps()),
            // The transposed form's GEMM has a row per (tap, output channel).
            CpuKernel::TapGemm(mk) => per_thread *= gemm_shape_efficiency(m * g.taps(), mk.mr(), c),
            CpuKernel::S2dGemm(mk) => {
                per_thread = s2d_gflops_per_thread(problem.dtype()) * gemm_shape_efficiency(m, mk.mr(), c * g.taps())
            }
            CpuKernel::Gemm1x1 => per_thread *= gemm_shape_efficiency(m, 16, c),
            CpuKernel::DirectVectorised(_) => per_thread = direct_vectorised_gflops_per_thread(problem.dtype()),
            _ => {}
        }
        let rate = per_thread * 1e9 * self.threads as f64;
        // Small problems are dominated by fixed costs (thread start-up, packing set-up);
        // left out where the choice must not depend on the size.
        let fixed = match (alg, self.rounding) {
            (_, ConvRounding::SizeIndependent) => 0.0,
            (Algorithm::Direct, _) => 2e-6,
            _ => 30e-6,
        };
        fixed + flops / rate
    }
}
