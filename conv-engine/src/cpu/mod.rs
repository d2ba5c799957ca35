//! Convolution on the CPU: the algorithm catalog (workspace and cost of each algorithm
//! here) and the execution of plans on candle CPU tensors.

mod candle_conv;
mod checks;
pub mod direct;
mod gemm1x1;
mod gemm1x1_transposed;
mod panel_gemm;
mod rates;
mod winograd;
mod workers;

pub use winograd::{WINOGRAD_GRID, WinogradTile};

use crate::budget::{Budget, DEFAULT_CPU_WORKSPACE, host_free_bytes};
use crate::dispatch::{Algorithm, AlgorithmCatalog, BudgetState, Chunk, Chunking, ConvRounding, Dispatcher, Plan};
use crate::error::ConvError;
use crate::problem::{Conv1dParams, Conv2dParams, ConvDType, ConvProblem};
use crate::workspace::WorkspaceMeter;
use candle_core::{Device, Storage, Tensor, WithDType};
pub(crate) use checks::{check_executor_args, check_len};
use half::{bf16, f16};
use implicit_gemm::cpu::{CpuConvPlan, Element, MicroKernel};
use implicit_gemm::{ConvGeometry, ConvKind, Epilogue};
use rates::{
    direct_vectorised_gflops_per_thread, gemm_shape_efficiency, gflops_per_thread, winograd_f4_gflops_per_thread,
    winograd_gflops_per_thread,
};

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
    /// GEMM, all of them one GEMM per band of input rows on the engine's 6x16 microkernel,
    /// its products summed into each output pixel in tap order (col2im).
    TapGemm(MicroKernel),
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
            CpuKernel::Gemm1x1 | CpuKernel::TapGemm(_) => Algorithm::Gemm1x1,
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
            CpuKernel::DirectVectorised(mk) => write!(f, "direct-vectorised/{mk}"),
            CpuKernel::DirectScalar => f.write_str("direct-scalar"),
        }
    }
}

/// A plan of the CPU's dispatcher.
pub type CpuPlan = Plan<CpuKernel>;

/// The CPU's algorithms: `ImplicitGemm`, `Im2colGemm` (candle's own conv), `Gemm1x1` (the
/// gemm crate over the input in place; for transposed convs, one GEMM over every tap on the
/// engine's microkernel), `Winograd` (F(4x4, 3x3) or F(2x2, 3x3) for 3x3 stride-1 convs)
/// and `Direct`.
#[derive(Clone, Debug)]
pub struct CpuCatalog {
    threads: usize,
    kernel: MicroKernel,
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
    /// in order whatever the column or reduction blocking), Winograd (its tile chosen by
    /// channels, its transform grid the tiler's to align) and the vectorised direct
    /// convolution (each pixel its own lane, the taps in one order); not the gemm crate
    /// (`Gemm1x1`, candle's im2col), whose blocking is its own, nor the scalar direct loop.
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
            36 * g.out_channels.div_ceil(implicit_gemm::cpu::MR) * implicit_gemm::cpu::MR * g.in_channels * 4;
        let channels = g.in_channels.min(g.out_channels);
        let f4_faster = winograd_f4_gflops_per_thread(problem.dtype(), channels)
            > winograd_gflops_per_thread(problem.dtype(), channels);
        if f4_faster && f4_weights <= limit { WinogradTile::F4 } else { WinogradTile::F2 }
    }

    /// The Winograd plan for a chunk (blocks shrunk to fit `limit` where possible), or
    /// `None` when the problem is not a 3x3 stride-1 one.
    fn winograd_plan(
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
    fn direct_vectorised_bytes(
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
    fn implicit_plan(&self, mk: MicroKernel, problem: &ConvProblem, chunk: &Chunk, limit: usize) -> CpuConvPlan {
        CpuConvPlan::fitted(&chunk_geometry(problem, chunk), chunk.rows.clone(), self.threads, mk, limit)
    }
}

impl Default for CpuCatalog {
    fn default() -> Self {
        Self::new()
    }
}

/// The problem's geometry restricted to the chunk's images (rows are passed separately).
fn chunk_geometry(problem: &ConvProblem, chunk: &Chunk) -> ConvGeometry {
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
            // Gemm1x1 only in its transposed form, which runs the engine's microkernel.
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
            // The transposed form packs for the 6x16 tile, as Winograd's GEMMs do.
            Algorithm::Gemm1x1 if problem.geometry().kind == ConvKind::Transposed => {
                Some(CpuKernel::TapGemm(self.kernel.narrow()))
            }
            Algorithm::Gemm1x1 => Some(CpuKernel::Gemm1x1),
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
            CpuKernel::TapGemm(_) if problem.geometry().kind == ConvKind::Transposed => {
                gemm1x1_transposed::workspace_bytes(problem, self.threads)
            }
            CpuKernel::TapGemm(_) => None,
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

/// Convolution on the CPU within a workspace budget: plans with the dispatcher, runs the
/// plan, and counts the workspace it allocates itself.
pub struct CpuConv {
    dispatcher: Dispatcher<CpuCatalog>,
    /// The same catalog under [`ConvRounding::SizeIndependent`] ([`Self::dispatcher_for`]).
    size_independent: Dispatcher<CpuCatalog>,
    budget: Budget,
    meter: WorkspaceMeter,
}

impl Default for CpuConv {
    fn default() -> Self {
        Self::new(Budget::bytes(DEFAULT_CPU_WORKSPACE))
    }
}

impl CpuConv {
    pub fn new(budget: Budget) -> Self {
        Self::with_catalog(CpuCatalog::new(), budget)
    }

    pub fn with_catalog(catalog: CpuCatalog, budget: Budget) -> Self {
        CpuConv {
            size_independent: Dispatcher::new(catalog.clone().with_rounding(ConvRounding::SizeIndependent)),
            dispatcher: Dispatcher::new(catalog),
            budget,
            meter: WorkspaceMeter::default(),
        }
    }

    /// Only these algorithms may be chosen.
    pub fn with_allowed(mut self, algorithms: &[Algorithm]) -> Self {
        self.dispatcher = self.dispatcher.with_allowed(algorithms);
        self.size_independent = self.size_independent.with_allowed(algorithms);
        self
    }

    pub fn budget(&self) -> Budget {
        self.budget
    }

    pub fn dispatcher(&self) -> &Dispatcher<CpuCatalog> {
        &self.dispatcher
    }

    /// Workspace the engine itself allocated (candle's and the gemm crate's internal
    /// buffers are not seen here; their reported workspace is an upper bound).
    pub fn meter(&self) -> &WorkspaceMeter {
        &self.meter
    }

    /// The budget and the workspace this engine holds now (other threads' convolutions),
    /// so that concurrent convolutions share the budget instead of each taking all of it.
    pub fn budget_state(&self) -> BudgetState {
        BudgetState { budget: self.budget.resolve(host_free_bytes), live: self.meter.current_bytes() }
    }

    /// The plan the dispatcher chooses for `problem` now.
    pub fn plan(&self, problem: &ConvProblem) -> Result<CpuPlan, ConvError> {
        self.plan_rounded(problem, ConvRounding::Fastest)
    }

    /// The dispatcher that plans under `rounding` (the engine's own catalog for
    /// [`ConvRounding::Fastest`], restricted by [`CpuCatalog::with_rounding`] otherwise).
    pub fn dispatcher_for(&self, rounding: ConvRounding) -> &Dispatcher<CpuCatalog> {
        match rounding {
            ConvRounding::Fastest => &self.dispatcher,
            ConvRounding::SizeIndependent => &self.size_independent,
        }
    }

    /// [`Self::plan`] under `rounding`.
    pub fn plan_rounded(&self, problem: &ConvProblem, rounding: ConvRounding) -> Result<CpuPlan, ConvError> {
        self.dispatcher_for(rounding).plan(problem, self.budget_state())
    }

    /// [`Self::run_fused`] under `rounding`.
    pub fn run_rounded(
        &self,
        problem: &ConvProblem,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        epilogue: &Epilogue<&Tensor>,
        rounding: ConvRounding,
    ) -> Result<Tensor, ConvError> {
        let plan = self.plan_rounded(problem, rounding)?;
        self.run_plan_fused(&plan, input, weight, bias, epilogue)
    }

    /// The part of `plan`'s workspace that is the gemm crate's own buffers (`Gemm1x1` on
    /// a whole image, whose operands it reads in place, and candle's im2col): its
    /// per-thread L2 packing slab, allocated on a thread's first GEMM and kept for the
    /// process, and its operand packing, done only for wide outputs. The workspace counts
    /// them, as a first run allocates them; a memory plan of a later run holds them apart
    /// (upper bounds, not part of the exact walk). 0 for the kernels that pack themselves.
    pub fn gemm_crate_bytes(&self, plan: &CpuPlan) -> usize {
        let threads = self.dispatcher.catalog().threads;
        match plan.kernel() {
            // Row chunks are strided operands, which the crate packs into a buffer of its
            // own per call (measured: the whole figure, on top of what is live).
            CpuKernel::Gemm1x1 if plan.chunk_count() == 1 => plan.workspace_bytes(),
            CpuKernel::CandleIm2col => plan
                .chunks()
                .iter()
                .filter_map(|c| candle_conv::gemm_crate_bytes(plan.problem(), c, threads))
                .max()
                .unwrap_or(0),
            _ => 0,
        }
    }

    pub fn conv2d(
        &self,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv2dParams,
    ) -> Result<Tensor, ConvError> {
        let p = ConvProblem::conv2d(input.dims(), weight.dims(), input.dtype(), weight.dtype(), params)?;
        self.run(&p, input, weight, bias)
    }

    pub fn conv_transpose2d(
        &self,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv2dParams,
    ) -> Result<Tensor, ConvError> {
        let p = ConvProblem::conv_transpose2d(input.dims(), weight.dims(), input.dtype(), weight.dtype(), params)?;
        self.run(&p, input, weight, bias)
    }

    pub fn conv1d(
        &self,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv1dParams,
    ) -> Result<Tensor, ConvError> {
        let p = ConvProblem::conv1d(input.dims(), weight.dims(), input.dtype(), weight.dtype(), params)?;
        self.run(&p, input, weight, bias)
    }

    pub fn conv_transpose1d(
        &self,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv1dParams,
    ) -> Result<Tensor, ConvError> {
        let p = ConvProblem::conv_transpose1d(input.dims(), weight.dims(), input.dtype(), weight.dtype(), params)?;
        self.run(&p, input, weight, bias)
    }

    /// Runs `problem` (which must describe these tensors) with the plan the dispatcher
    /// chooses.
    pub fn run(
        &self,
        problem: &ConvProblem,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
    ) -> Result<Tensor, ConvError> {
        let plan = self.plan(problem)?;
        self.run_plan(&plan, input, weight, bias)
    }

    /// [`Self::run`] with an epilogue (see [`Self::run_plan_fused`]).
    pub fn run_fused(
        &self,
        problem: &ConvProblem,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        epilogue: &Epilogue<&Tensor>,
    ) -> Result<Tensor, ConvError> {
        self.run_rounded(problem, input, weight, bias, epilogue, ConvRounding::Fastest)
    }

    /// Runs a given plan.
    pub fn run_plan(
        &self,
        plan: &CpuPlan,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
    ) -> Result<Tensor, ConvError> {
        self.run_plan_fused(plan, input, weight, bias, &Epilogue::default())
    }

    /// Runs a given plan with an epilogue: `out = (act(conv + bias) + residual) · scale`.
    /// The implicit GEMM, Winograd (in its output transform), `Gemm1x1` and the vectorised
    /// direct convolution apply it in their write-out; the other kernels (candle's im2col,
    /// the scalar direct loop) in one pass after.
    ///
    /// The plan is checked again before anything runs: the tensors must be what its
    /// problem says, and this engine's catalog must accept its kernel for every chunk
    /// (a plan of another engine is run only if this one could have made it).
    pub fn run_plan_fused(
        &self,
        plan: &CpuPlan,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        epilogue: &Epilogue<&Tensor>,
    ) -> Result<Tensor, ConvError> {
        let problem = plan.problem();
        check_tensors(problem, input, weight, bias)?;
        if let Some(r) = epilogue.residual {
            if r.dims() != problem.output_shape() || ConvDType::from_candle(r.dtype()) != Some(problem.dtype()) {
                return Err(ConvError::Parameter {
                    op: "conv",
                    param: "residual",
                    value: format!("{:?} {:?}", r.dims(), r.dtype()),
                    reason: "must have the output's shape and dtype",
                });
            }
            if !r.device().is_cpu() {
                return Err(ConvError::Parameter {
                    op: "conv",
                    param: "residual device",
                    value: format!("{:?}", r.device().location()),
                    reason: "the CPU engine needs CPU tensors",
                });
            }
        }
        self.check_plan(plan)?;
        match problem.dtype() {
            ConvDType::F32 => self.run_typed::<f32>(plan, input, weight, bias, epilogue),
            ConvDType::F16 => self.run_typed::<f16>(plan, input, weight, bias, epilogue),
            ConvDType::BF16 => self.run_typed::<bf16>(plan, input, weight, bias, epilogue),
        }
    }

    /// The catalog accepts the plan's kernel for each of its chunks (what the executors
    /// rely on), and its microkernel runs on this CPU.
    fn check_plan(&self, plan: &CpuPlan) -> Result<(), ConvError> {
        let problem = plan.problem();
        let catalog = self.dispatcher.catalog();
        let unsupported = |why: &str| ConvError::AlgorithmUnsupported {
            problem: problem.to_string(),
            algorithm: plan.algorithm().name(),
            chunking: Some(format!(
                " in chunks of {} images x {} rows{why}",
                plan.chunking().batch_per_chunk,
                plan.chunking().rows_per_chunk
            )),
            requires: plan.algorithm().requirements(),
        };
        if let Some(mk) = plan.kernel().microkernel()
            && !mk.is_supported()
        {
            return Err(unsupported(&format!(" (microkernel {mk:?} is not supported by this CPU)")));
        }
        if let CpuKernel::Winograd(_, mk) | CpuKernel::TapGemm(mk) = *plan.kernel()
            && !mk.is_narrow()
        {
            return Err(unsupported(&format!(" (kernel {} packs for the 6x16 tile; {mk} has another)", plan.kernel())));
        }
        if plan.kernel().algorithm() != plan.algorithm() {
            return Err(unsupported(&format!(" (kernel {} is not one of this algorithm)", plan.kernel())));
        }
        for chunk in plan.chunks() {
            if catalog.workspace_bytes(plan.kernel(), problem, &chunk, plan.workspace_limit()).is_none() {
                return Err(unsupported(""));
            }
        }
        Ok(())
    }

    fn run_typed<T: Element + WithDType>(
        &self,
        plan: &CpuPlan,
        input: &Tensor,
        weight: &Tensor,
        bias: Option<&Tensor>,
        epilogue: &Epilogue<&Tensor>,
    ) -> Result<Tensor, ConvError> {
        let problem = plan.problem();
        let g = problem.geometry();
        let residual = epilogue.residual.map(|r| r.contiguous()).transpose()?;
        let r_guard = residual.as_ref().map(|r| r.storage_and_layout());
        let res: Option<&[T]> = match &r_guard {
            Some((st, l)) => Some(cpu_slice::<T>(st, l)?),
            None => None,
        };
        check_len("residual", res.map(<[T]>::len), g.output_len())?;
        let whole_epilogue = Epilogue { activation: epilogue.activation, residual: res, scale: epilogue.scale };
        let kernel = *plan.kernel();
        if kernel == CpuKernel::CandleIm2col {
            let out = candle_conv::run::<T>(plan, &self.meter, input, weight, bias)?;
            return apply_epilogue::<T>(out, &whole_epilogue);
        }
        let input = input.contiguous()?;
        let weight = weight.contiguous()?;
        let bias = bias.map(|b| b.contiguous()).transpose()?;
        let (x_st, x_l) = input.storage_and_layout();
        let (w_st, w_l) = weight.storage_and_layout();
        let x = cpu_slice::<T>(&x_st, x_l)?;
        let w = cpu_slice::<T>(&w_st, w_l)?;
        let b_guard = bias.as_ref().map(|b| b.storage_and_layout());
        let b = match &b_guard {
            Some((st, l)) => Some(cpu_slice::<T>(st, l)?),
            None => None,
        };
        // Every executor below indexes these slices by the problem's geometry.
        check_len("input", Some(x.len()), g.input_len())?;
        check_len("weight", Some(w.len()), g.weight_len())?;
        check_len("bias", b.map(<[T]>::len), g.out_channels)?;
        let mut out = output_buffer::<T>(&self.meter, g.output_len())?;
        let (img_in, img_out) = (g.input_len() / g.batch, g.output_len() / g.batch);
        let catalog = self.dispatcher.catalog();
        for chunk in plan.chunks() {
            let gc = chunk_geometry(problem, &chunk);
            let xs = &x[chunk.batch.start * img_in..chunk.batch.end * img_in];
            let os = &mut out[chunk.batch.start * img_out..chunk.batch.end * img_out];
            let chunk_epilogue = Epilogue {
                activation: epilogue.activation,
                residual: res.map(|r| &r[chunk.batch.start * img_out..chunk.batch.end * img_out]),
                scale: epilogue.scale,
            };
            match kernel {
                CpuKernel::ImplicitGemm(mk) => {
                    let exec = catalog.implicit_plan(mk, problem, &chunk, plan.workspace_limit());
                    let mut ws = self.meter.alloc_f32(exec.workspace_floats())?;
                    exec.run_fused(xs, w, b, &chunk_epilogue, os, &mut ws);
                }
                CpuKernel::Winograd(tile, mk) => {
                    let exec =
                        catalog.winograd_plan(tile, mk, problem, &chunk, plan.workspace_limit()).ok_or_else(|| {
                            ConvError::AlgorithmUnsupported {
                                problem: problem.to_string(),
                                algorithm: Algorithm::Winograd.name(),
                                chunking: None,
                                requires: Algorithm::Winograd.requirements(),
                            }
                        })?;
                    let mut ws = self.meter.alloc_f32(exec.workspace_floats())?;
                    let chunk_epilogue = Epilogue {
                        activation: epilogue.activation,
                        residual: res.map(|r| &r[chunk.batch.start * img_out..chunk.batch.end * img_out]),
                        scale: epilogue.scale,
                    };
                    exec.run(xs, w, b, &chunk_epilogue, os, &mut ws);
                }
                CpuKernel::DirectVectorised(mk) => {
                    let threads = catalog.threads;
                    let mut ws = self.meter.alloc_f32(direct::vectorised_scratch_floats::<T>(&gc, threads))?;
                    let (rows, ep) = (chunk.rows.clone(), &chunk_epilogue);
                    direct::direct_vectorised(mk, &gc, xs, w, b, ep, os, rows, threads, &mut ws);
                }
                CpuKernel::DirectScalar => direct::direct_conv::<T, f32>(&gc, xs, w, b, os, chunk.rows.clone()),
                CpuKernel::TapGemm(mk) => {
                    let threads = catalog.threads;
                    let mut ws = self.meter.alloc_f32(gemm1x1_transposed::scratch_floats(&gc, threads))?;
                    let (rows, ep) = (chunk.rows.clone(), &chunk_epilogue);
                    gemm1x1_transposed::run(mk, &gc, xs, w, b, ep, os, rows, threads, &mut ws)?
                }
                CpuKernel::Gemm1x1 => {
                    gemm1x1::run(&gc, xs, w, b, &chunk_epilogue, os, chunk.rows.clone(), catalog.threads)?
                }
                // Ran whole above; never reaches the loop.
                CpuKernel::CandleIm2col => {}
            }
        }
        let out = Tensor::from_vec(out, problem.output_shape(), &Device::Cpu)?;
        if kernel.fuses_epilogue() {
            return Ok(out);
        }
        apply_epilogue::<T>(out, &whole_epilogue)
    }
}

/// `out = (act(out) + residual) · scale` over a contiguous CPU tensor (the bias is already
/// in), in parallel; `out` itself when the epilogue is plain.
fn apply_epilogue<T: Element + WithDType>(out: Tensor, epilogue: &Epilogue<&[T]>) -> Result<Tensor, ConvError> {
    if epilogue.is_plain() {
        return Ok(out);
    }
    use rayon::prelude::*;
    let shape = out.dims().to_vec();
    let mut v = out.flatten_all()?.to_vec1::<T>()?;
    const CHUNK: usize = 1 << 14;
    v.par_chunks_mut(CHUNK).enumerate().for_each(|(i, part)| {
        let res = epilogue.residual.map(|r| &r[i * CHUNK..i * CHUNK + part.len()]);
        implicit_gemm::cpu::apply_epilogue_in_place(epilogue, 0.0, part, res);
    });
    Ok(Tensor::from_vec(v, shape, &Device::Cpu)?)
}

/// A fresh output buffer, which every algorithm writes in full: builds with debug
/// assertions (every test build) poison it with NaN, so an element no chunk writes fails
/// every comparison; optimised builds take the memory unfilled
/// ([`WorkspaceMeter::try_unfilled_vec`]). Admitted through the meter's fault hook, and
/// allocated fallibly.
pub(crate) fn output_buffer<T: Element>(meter: &WorkspaceMeter, len: usize) -> Result<Vec<T>, ConvError> {
    meter.try_unfilled_vec(len, T::from_f32(f32::NAN), "output")
}

/// The elements of a contiguous CPU tensor.
pub(crate) fn cpu_slice<'a, T: WithDType>(st: &'a Storage, layout: &candle_core::Layout) -> Result<&'a [T], ConvError> {
    match st {
        Storage::Cpu(c) => {
            let s = c.as_slice::<T>()?;
            Ok(&s[layout.start_offset()..layout.start_offset() + layout.shape().elem_count()])
        }
        other => Err(ConvError::Candle(candle_core::Error::Msg(format!(
            "CPU convolution given a tensor on {:?}",
            other.device().location()
        )))),
    }
}

/// The tensors must be what the problem says: shapes, dtype, device, bias.
fn check_tensors(
    problem: &ConvProblem,
    input: &Tensor,
    weight: &Tensor,
    bias: Option<&Tensor>,
) -> Result<(), ConvError> {
    let g = problem.geometry();
    let op = "conv";
    if input.dims() != problem.input_shape() || weight.dims() != problem.weight_shape() {
        return Err(ConvError::Parameter {
            op,
            param: "tensor shapes",
            value: format!("input {:?}, weight {:?}", input.dims(), weight.dims()),
            reason: "do not match the planned problem",
        });
    }
    for t in [input, weight] {
        if !t.device().is_cpu() {
            return Err(ConvError::Parameter {
                op,
                param: "device",
                value: format!("{:?}", t.device().location()),
                reason: "the CPU engine needs CPU tensors",
            });
        }
        if ConvDType::from_candle(t.dtype()) != Some(problem.dtype()) {
            return Err(ConvError::DTypeMismatch {
                op,
                input: problem.dtype(),
                weight: ConvDType::from_candle(t.dtype()).unwrap_or(problem.dtype()),
            });
        }
    }
    if let Some(b) = bias {
        if b.dims() != [g.out_channels] {
            return Err(ConvError::BiasShape { op, shape: b.dims().to_vec(), channels: g.out_channels });
        }
        if ConvDType::from_candle(b.dtype()) != Some(problem.dtype()) {
            return Err(ConvError::BiasDType { op, bias: format!("{:?}", b.dtype()), input: problem.dtype() });
        }
        if !b.device().is_cpu() {
            return Err(ConvError::Parameter {
                op,
                param: "bias device",
                value: format!("{:?}", b.device().location()),
                reason: "the CPU engine needs CPU tensors",
            });
        }
    }
    Ok(())
}
