//! The byte-budget dispatcher: which algorithm runs a convolution, in how many chunks.
//!
//! Every algorithm reports the exact workspace it needs for a (sub-)problem. The
//! dispatcher keeps the algorithms whose workspace fits what the budget leaves, and picks
//! the cheapest by the device's cost model (or by a time measured earlier and recorded in
//! the plan cache). An algorithm that does not fit whole is tried on chunks — batch
//! first, then output rows — until one fits; if none fits even one output row, the error
//! names the bytes the smallest plan needs.

use crate::budget::format_bytes;
use crate::error::ConvError;
use crate::geometry::ConvKind;
use crate::problem::ConvProblem;
use crate::tuning::TuningStore;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use std::sync::{Arc, Mutex};

/// A convolution algorithm. Which ones a device offers, and what each costs there, comes
/// from the device's [`AlgorithmCatalog`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algorithm {
    /// Conv as GEMM reading the input through the index map; no im2col buffer.
    ImplicitGemm,
    /// Materialised im2col matrix times the weights (candle's conv on the CPU, rocBLAS
    /// on ROCm). Chunked over batch and output rows when the column buffer is too big.
    Im2colGemm,
    /// A 1x1, stride-1, unpadded convolution as one GEMM over the input in place.
    Gemm1x1,
    /// MIOpen's solver (ROCm, opt-in), workspace capped by the budget.
    Miopen,
    /// Winograd F(4x4, 3x3) or F(2x2, 3x3) (CPU): 3x3, stride-1, dilation-1, ungrouped
    /// forward convs as 36 (16) GEMMs over transformed 6x6 (4x4) tiles; chunked by blocks
    /// of tiles.
    Winograd,
    /// Direct convolution: the reference, any parameters, no workspace.
    Direct,
}

/// Whether a convolution's rounding may depend on the problem's size. Every algorithm
/// rounds each output differently (a GEMM library, split-K and Winograd each sum in their
/// own order), so when the dispatcher picks by size and budget, the last bits of an output
/// pixel can change with the image size, the chunking or the budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ConvRounding {
    /// The fastest plan that fits; its rounding may change with the size and the budget.
    #[default]
    Fastest,
    /// Each output's rounding depends only on the layer (kind, channels, kernel, stride,
    /// dilation, dtype), never on the spatial size, the chunking or the budget: an output
    /// computed on a crop of the input equals the same output of the whole map bit for
    /// bit. What lossless tiling needs. On ROCm: the implicit GEMM without split-K (any
    /// tile configuration sums each output in the same order), chunked to fit the budget,
    /// else an error; not direct convolution (another order) and no library GEMM (rocBLAS
    /// and MIOpen pick kernels by size). On the CPU: the implicit GEMM, Winograd (its tile chosen by channels, its
    /// transform grid the tiler's to align), the vectorised direct convolution and
    /// `Gemm1x1`'s transposed form (all on the engine's microkernels), chosen without their
    /// fixed per-call costs; not the gemm crate.
    SizeIndependent,
}

impl Algorithm {
    pub const ALL: [Algorithm; 6] = [
        Algorithm::ImplicitGemm,
        Algorithm::Im2colGemm,
        Algorithm::Gemm1x1,
        Algorithm::Miopen,
        Algorithm::Winograd,
        Algorithm::Direct,
    ];

    /// What a problem must be for this algorithm to run it, on any device (a device may
    /// ask more; its catalog decides).
    pub fn requirements(self) -> &'static str {
        match self {
            Algorithm::ImplicitGemm | Algorithm::Direct => "any convolution",
            Algorithm::Im2colGemm => {
                "ungrouped, equal stride and dilation on both axes, not bf16 on the CPU; transposed ones whole (no row chunks) with uniform padding"
            }
            Algorithm::Gemm1x1 => {
                "a forward 1x1 convolution with stride 1 and no padding (not bf16 on the CPU), or on the CPU an ungrouped transposed convolution (each tap a 1x1 GEMM, summed into the output)"
            }
            Algorithm::Miopen => "a ROCm device built with the `miopen` feature",
            Algorithm::Winograd => "a forward 3x3 convolution with stride 1, dilation 1 and no groups",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Algorithm::ImplicitGemm => "ImplicitGemm",
            Algorithm::Im2colGemm => "Im2colGemm",
            Algorithm::Gemm1x1 => "Gemm1x1",
            Algorithm::Miopen => "Miopen",
            Algorithm::Winograd => "Winograd",
            Algorithm::Direct => "Direct",
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Algorithm {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Algorithm::ALL.into_iter().find(|a| a.name().eq_ignore_ascii_case(s)).ok_or_else(|| {
            let names: Vec<_> = Algorithm::ALL.iter().map(|a| a.name()).collect();
            format!("unknown convolution algorithm {s:?}; known: {}", names.join(", "))
        })
    }
}

/// One piece of a chunked problem: images `batch` and output rows `rows`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub batch: Range<usize>,
    pub rows: Range<usize>,
}

/// How a plan splits its problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Chunking {
    pub batch_per_chunk: usize,
    pub rows_per_chunk: usize,
}

impl Chunking {
    /// The first (and largest) chunk of `problem` under this chunking.
    pub fn first(&self, problem: &ConvProblem) -> Chunk {
        let g = problem.geometry();
        Chunk { batch: 0..self.batch_per_chunk.min(g.batch), rows: 0..self.rows_per_chunk.min(g.out_hw()[0]) }
    }
}

/// What a device knows about its algorithms.
///
/// For each (algorithm, chunking) the catalog first chooses the kernel that will run it
/// ([`AlgorithmCatalog::kernel`]: tile configuration, split-K, layout, microkernel). That
/// one decision goes into the [`Plan`]; the workspace, the cost and the execution all read
/// it from there, so the estimate and the run cannot drift apart.
pub trait AlgorithmCatalog: Send + Sync {
    /// The device's record of a chosen kernel (shown in the `conv plan` trace line).
    type Kernel: Clone + fmt::Debug + fmt::Display + PartialEq + Send + Sync;

    /// Identifies the device and its library versions in cache keys and logs
    /// (e.g. `cpu/avx2fma/2 threads`, `rocm/gfx1100/hip 6.4.43484/rocblas 4.4`).
    fn device_key(&self) -> String;

    /// The algorithms this device can run, in no particular order.
    fn algorithms(&self) -> Vec<Algorithm>;

    /// The kernel `algorithm` runs `problem` with when it is split by `chunking`, or
    /// `None` when it cannot run it so (unsupported parameters, or chunks of a shape this
    /// algorithm cannot run). An algorithm whose kernel can shrink its workspace (smaller
    /// tiles, fewer workers) sizes it to fit `limit` where it can.
    fn kernel(
        &self,
        algorithm: Algorithm,
        problem: &ConvProblem,
        chunking: Chunking,
        limit: usize,
    ) -> Option<Self::Kernel>;

    /// Exact workspace bytes `kernel` allocates for `chunk` of `problem`, or `None` when it
    /// cannot run that chunk. Execution is given the plan's `workspace_limit` back, so it
    /// allocates exactly what was answered here.
    fn workspace_bytes(
        &self,
        kernel: &Self::Kernel,
        problem: &ConvProblem,
        chunk: &Chunk,
        limit: usize,
    ) -> Option<usize>;

    /// Estimated seconds to run `chunk` of `problem` with `kernel`.
    fn estimated_seconds(&self, kernel: &Self::Kernel, problem: &ConvProblem, chunk: &Chunk) -> f64;

    /// What measured choices are stored under ([`crate::tuning`]): the device key and
    /// whatever else changes which kernel wins (kernel sources, library versions).
    fn tuning_key(&self) -> String {
        self.device_key()
    }

    /// Every kernel `algorithm` could run `problem` with under `chunking` (what
    /// [`Dispatcher::tune`] times, and where a stored winner is looked up by name);
    /// by default only the one [`Self::kernel`] picks.
    fn kernel_candidates(
        &self,
        algorithm: Algorithm,
        problem: &ConvProblem,
        chunking: Chunking,
        limit: usize,
    ) -> Vec<Self::Kernel> {
        self.kernel(algorithm, problem, chunking, limit).into_iter().collect()
    }
}

/// The budget as the dispatcher sees it for one decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BudgetState {
    /// Total budget in bytes.
    pub budget: usize,
    /// Bytes already live on the device and counted against the budget.
    pub live: usize,
}

impl BudgetState {
    pub fn available(&self) -> usize {
        self.budget.saturating_sub(self.live)
    }
}

/// The dispatcher's decision for one problem: the algorithm, the kernel the device's
/// catalog chose for it (`K`, the catalog's [`AlgorithmCatalog::Kernel`]) and the chunking.
///
/// Only a [`Dispatcher`] makes plans ([`Dispatcher::plan`], or [`Dispatcher::plan_with`]
/// for a given algorithm and chunking), after its catalog accepted the (problem,
/// algorithm, chunking) and sized the workspace; the fields are private so that a plan
/// cannot name an algorithm its problem does not fit.
///
/// ```compile_fail,E0451
/// # fn f(plan: conv_engine::Plan<u8>) {
/// let forged = conv_engine::Plan { algorithm: conv_engine::Algorithm::Gemm1x1, ..plan };
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Plan<K> {
    problem: ConvProblem,
    algorithm: Algorithm,
    kernel: K,
    chunking: Chunking,
    workspace_bytes: usize,
    workspace_limit: usize,
    estimated_seconds: f64,
    measured: bool,
}

impl<K> Plan<K> {
    pub fn problem(&self) -> &ConvProblem {
        &self.problem
    }

    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// What runs every chunk; execution reads it instead of choosing again.
    pub fn kernel(&self) -> &K {
        &self.kernel
    }

    pub fn chunking(&self) -> Chunking {
        self.chunking
    }

    /// Peak workspace of the largest chunk.
    pub fn workspace_bytes(&self) -> usize {
        self.workspace_bytes
    }

    /// The limit the algorithm sized its workspace for (what the budget left when the
    /// plan was made); execution passes it back to the catalog.
    pub fn workspace_limit(&self) -> usize {
        self.workspace_limit
    }

    pub fn estimated_seconds(&self) -> f64 {
        self.estimated_seconds
    }

    /// Whether the time came from a measurement (the plan cache's, or the tuning store's).
    pub fn measured(&self) -> bool {
        self.measured
    }

    /// The same plan with a measured time.
    pub(crate) fn measured_at(self, seconds: f64) -> Self {
        Plan { estimated_seconds: seconds, measured: true, ..self }
    }

    /// The chunks in execution order (batch outer, rows inner).
    pub fn chunks(&self) -> Vec<Chunk> {
        chunk_list(&self.problem, self.chunking)
    }

    pub fn chunk_count(&self) -> usize {
        let g = self.problem.geometry();
        g.batch.div_ceil(self.chunking.batch_per_chunk) * g.out_hw()[0].div_ceil(self.chunking.rows_per_chunk)
    }
}

fn chunk_list(problem: &ConvProblem, c: Chunking) -> Vec<Chunk> {
    let g = problem.geometry();
    let rows = g.out_hw()[0];
    let mut out = Vec::new();
    for b0 in (0..g.batch).step_by(c.batch_per_chunk) {
        for r0 in (0..rows).step_by(c.rows_per_chunk) {
            out.push(Chunk {
                batch: b0..(b0 + c.batch_per_chunk).min(g.batch),
                rows: r0..(r0 + c.rows_per_chunk).min(rows),
            });
        }
    }
    out
}

/// Plans keyed by problem and the allowed algorithms.
type PlanMap<K> = HashMap<(ConvProblem, Vec<Algorithm>), Plan<K>>;

/// Plans already made, and times measured, keyed by problem (dtype included) and the set
/// of allowed algorithms. Safe to share between threads.
pub struct PlanCache<K> {
    pub(crate) plans: Mutex<PlanMap<K>>,
    measured: Mutex<HashMap<(ConvProblem, Algorithm), f64>>,
}

impl<K> Default for PlanCache<K> {
    fn default() -> Self {
        PlanCache { plans: Mutex::default(), measured: Mutex::default() }
    }
}

impl<K> PlanCache<K> {
    /// Records a measured run time, which then replaces the cost model's estimate for
    /// that (problem, algorithm) and invalidates plans made for the problem.
    pub fn record_measurement(&self, problem: &ConvProblem, algorithm: Algorithm, seconds: f64) {
        self.measured.lock().expect("plan cache poisoned").insert((*problem, algorithm), seconds);
        self.plans.lock().expect("plan cache poisoned").retain(|(p, _), _| p != problem);
    }

    pub fn measurement(&self, problem: &ConvProblem, algorithm: Algorithm) -> Option<f64> {
        self.measured.lock().expect("plan cache poisoned").get(&(*problem, algorithm)).copied()
    }

    pub fn len(&self) -> usize {
        self.plans.lock().expect("plan cache poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One dispatcher (and plan cache) per [`ConvRounding`] over one device's catalog: what
/// each device's engine holds (`conv_cpu::CpuConv`, `rocm_backend::conv::RocmConv`), so
/// that choosing by rounding and restricting the algorithms are written once.
pub struct RoundingDispatchers<C: AlgorithmCatalog> {
    fastest: Dispatcher<C>,
    size_independent: Dispatcher<C>,
}

impl<C: AlgorithmCatalog> RoundingDispatchers<C> {
    /// `catalog(rounding)`: the device's catalog as it plans under `rounding`.
    pub fn new(mut catalog: impl FnMut(ConvRounding) -> C) -> Self {
        RoundingDispatchers {
            fastest: Dispatcher::new(catalog(ConvRounding::Fastest)),
            size_independent: Dispatcher::new(catalog(ConvRounding::SizeIndependent)),
        }
    }

    /// Only these algorithms may be chosen, under either rounding.
    pub fn with_allowed(self, algorithms: &[Algorithm]) -> Self {
        RoundingDispatchers {
            fastest: self.fastest.with_allowed(algorithms),
            size_independent: self.size_independent.with_allowed(algorithms),
        }
    }

    /// Measured winners from `store`: any algorithm's under the fastest rounding; under
    /// size-independent rounding only another kernel of the cost model's algorithm (the
    /// catalog offers only candidates that round alike there), so that a tile and the
    /// whole image still round alike whatever was measured at either size.
    pub fn with_tuning(self, store: Arc<TuningStore>) -> Self {
        RoundingDispatchers {
            fastest: self.fastest.with_tuning(store.clone()),
            size_independent: self.size_independent.with_tuning_within_algorithm(store),
        }
    }

    /// The dispatcher that plans under `rounding`.
    pub fn get(&self, rounding: ConvRounding) -> &Dispatcher<C> {
        match rounding {
            ConvRounding::Fastest => &self.fastest,
            ConvRounding::SizeIndependent => &self.size_independent,
        }
    }

    /// [`Dispatcher::plan`] under `rounding`.
    pub fn plan(
        &self,
        problem: &ConvProblem,
        rounding: ConvRounding,
        budget: BudgetState,
    ) -> Result<Plan<C::Kernel>, ConvError> {
        self.get(rounding).plan(problem, budget)
    }
}

/// Fixed cost of running one more chunk (a launch, re-reading the overlap rows).
const PER_CHUNK_SECONDS: f64 = 20e-6;

/// Chooses plans for a device's catalog within a budget.
pub struct Dispatcher<C: AlgorithmCatalog> {
    catalog: C,
    allowed: Vec<Algorithm>,
    pub(crate) cache: PlanCache<C::Kernel>,
    /// Measured winners, consulted before the cost model ([`Self::with_tuning`]).
    pub(crate) tuning: Option<Arc<TuningStore>>,
    /// Whether a measured winner may only replace the kernel of the cost model's own
    /// algorithm ([`Self::with_tuning_within_algorithm`]).
    pub(crate) tune_within_algorithm: bool,
}

impl<C: AlgorithmCatalog> Dispatcher<C> {
    pub fn new(catalog: C) -> Self {
        let mut allowed = catalog.algorithms();
        allowed.sort();
        Dispatcher { catalog, allowed, cache: PlanCache::default(), tuning: None, tune_within_algorithm: false }
    }

    /// Restricts the dispatcher to `algorithms` (those the device does not offer are
    /// ignored). Clears cached plans.
    pub fn with_allowed(mut self, algorithms: &[Algorithm]) -> Self {
        let offered = self.catalog.algorithms();
        self.allowed = offered.into_iter().filter(|a| algorithms.contains(a)).collect();
        self.allowed.sort();
        self.cache = PlanCache::default();
        self
    }

    pub fn catalog(&self) -> &C {
        &self.catalog
    }

    pub fn cache(&self) -> &PlanCache<C::Kernel> {
        &self.cache
    }

    pub fn allowed(&self) -> &[Algorithm] {
        &self.allowed
    }

    /// The plan for `problem` given the budget, from the cache when a cached plan still
    /// fits. Emits one `tracing` event per decision.
    pub fn plan(&self, problem: &ConvProblem, budget: BudgetState) -> Result<Plan<C::Kernel>, ConvError> {
        let key = (*problem, self.allowed.clone());
        if let Some(plan) = self.cache.plans.lock().expect("plan cache poisoned").get(&key)
            && plan.workspace_bytes <= budget.available()
        {
            trace_decision(&self.catalog, plan, budget, true);
            return Ok(plan.clone());
        }
        let plan = match (self.tune_within_algorithm, self.tuned_plan(problem, budget)) {
            (false, Some(plan)) => plan,
            (true, Some(tuned)) => {
                let model = self.choose(problem, budget)?;
                if tuned.algorithm == model.algorithm { tuned } else { model }
            }
            (_, None) => self.choose(problem, budget)?,
        };
        trace_decision(&self.catalog, &plan, budget, false);
        self.cache.plans.lock().expect("plan cache poisoned").insert(key, plan.clone());
        Ok(plan)
    }

    /// The candidate chunkings of `problem` in order of preference: whole, batch
    /// halvings, then row halvings of one image, each with the unit it splits by.
    pub(crate) fn chunkings(problem: &ConvProblem) -> Vec<(Chunking, &'static str)> {
        let g = problem.geometry();
        let rows = g.out_hw()[0];
        let mut chunkings = vec![(Chunking { batch_per_chunk: g.batch, rows_per_chunk: rows }, "problem")];
        let mut nb = g.batch;
        while nb > 1 {
            nb = nb.div_ceil(2);
            chunkings.push((Chunking { batch_per_chunk: nb, rows_per_chunk: rows }, "image"));
        }
        let mut nr = rows;
        while nr > 1 {
            nr = nr.div_ceil(2);
            chunkings.push((Chunking { batch_per_chunk: 1, rows_per_chunk: nr }, "output row"));
        }
        chunkings
    }

    /// The plan of `alg` over `chunking` with its workspace, whether it fits `available`
    /// or not; `None` when the catalog cannot run the problem so.
    fn candidate(
        &self,
        alg: Algorithm,
        problem: &ConvProblem,
        chunking: Chunking,
        available: usize,
    ) -> Option<Plan<C::Kernel>> {
        let kernel = self.catalog.kernel(alg, problem, chunking, available)?;
        self.plan_of(alg, kernel, problem, chunking, available)
    }

    /// [`Self::candidate`] with a given kernel.
    pub(crate) fn plan_of(
        &self,
        alg: Algorithm,
        kernel: C::Kernel,
        problem: &ConvProblem,
        chunking: Chunking,
        available: usize,
    ) -> Option<Plan<C::Kernel>> {
        let ws = self.max_workspace(&kernel, problem, chunking, available)?;
        let chunks = chunk_list(problem, chunking);
        let measured = self.cache.measurement(problem, alg).filter(|_| chunks.len() == 1);
        let seconds = measured.unwrap_or_else(|| {
            chunks.iter().map(|c| self.catalog.estimated_seconds(&kernel, problem, c)).sum::<f64>()
                + PER_CHUNK_SECONDS * (chunks.len() - 1) as f64
        });
        Some(Plan {
            problem: *problem,
            algorithm: alg,
            kernel,
            chunking,
            workspace_bytes: ws,
            workspace_limit: available,
            estimated_seconds: seconds,
            measured: measured.is_some(),
        })
    }

    /// Every feasible (algorithm, chunking) with its cost; the cheapest wins.
    pub(crate) fn choose(&self, problem: &ConvProblem, budget: BudgetState) -> Result<Plan<C::Kernel>, ConvError> {
        let available = budget.available();
        let mut best: Option<Plan<C::Kernel>> = None;
        // The smallest workspace any allowed algorithm needs, for the error message.
        let mut smallest: Option<(usize, Algorithm, &'static str)> = None;
        let chunkings = Self::chunkings(problem);
        for &alg in &self.allowed {
            for &(chunking, unit) in &chunkings {
                // None: the algorithm cannot run chunks of this shape; try the next.
                let Some(plan) = self.candidate(alg, problem, chunking, available) else { continue };
                if smallest.is_none_or(|(s, _, _)| plan.workspace_bytes < s) {
                    smallest = Some((plan.workspace_bytes, alg, unit));
                }
                if plan.workspace_bytes > available {
                    continue;
                }
                if best.as_ref().is_none_or(|b| plan.estimated_seconds < b.estimated_seconds) {
                    best = Some(plan);
                }
                break;
            }
        }
        if let Some(plan) = best {
            return Ok(plan);
        }
        match smallest {
            None => Err(ConvError::NoAlgorithm {
                problem: problem.to_string(),
                allowed: self.allowed.iter().map(|a| a.name()).collect::<Vec<_>>().join(", "),
            }),
            Some((needed, alg, unit)) => Err(budget_exceeded(problem, alg, unit, needed, budget)),
        }
    }

    /// The plan that runs `problem` with `algorithm` (whether or not the dispatcher would
    /// choose it), split by `chunking` or, when `None`, by the first of the dispatcher's
    /// chunkings that fits the budget. Errors, instead of a plan the executors cannot run:
    /// [`ConvError::AlgorithmNotOffered`] when the device has no such algorithm,
    /// [`ConvError::AlgorithmUnsupported`] when it cannot run this problem (or these
    /// chunks), a [`ConvError::Parameter`] for an empty chunk, and
    /// [`ConvError::BudgetExceeded`] when the workspace does not fit. Not cached.
    pub fn plan_with(
        &self,
        problem: &ConvProblem,
        algorithm: Algorithm,
        chunking: Option<Chunking>,
        budget: BudgetState,
    ) -> Result<Plan<C::Kernel>, ConvError> {
        if !self.catalog.algorithms().contains(&algorithm) {
            return Err(ConvError::AlgorithmNotOffered {
                algorithm: algorithm.name(),
                device: self.catalog.device_key(),
            });
        }
        let available = budget.available();
        let unsupported = |chunking: Option<Chunking>| ConvError::AlgorithmUnsupported {
            problem: problem.to_string(),
            algorithm: algorithm.name(),
            chunking: chunking
                .map(|c| format!(" in chunks of {} images x {} rows", c.batch_per_chunk, c.rows_per_chunk)),
            requires: algorithm.requirements(),
        };
        let candidates = match chunking {
            Some(c) => {
                if c.batch_per_chunk == 0 || c.rows_per_chunk == 0 {
                    return Err(ConvError::Parameter {
                        op: problem.op_name(),
                        param: "chunking",
                        value: format!("{} images x {} rows", c.batch_per_chunk, c.rows_per_chunk),
                        reason: "a chunk needs at least one image and one output row",
                    });
                }
                vec![(c, "chunk")]
            }
            None => Self::chunkings(problem),
        };
        let mut smallest: Option<(usize, &'static str)> = None;
        for (c, unit) in candidates {
            let Some(plan) = self.candidate(algorithm, problem, c, available) else { continue };
            if plan.workspace_bytes <= available {
                trace_decision(&self.catalog, &plan, budget, false);
                return Ok(plan);
            }
            if smallest.is_none_or(|(s, _)| plan.workspace_bytes < s) {
                smallest = Some((plan.workspace_bytes, unit));
            }
        }
        match smallest {
            None => Err(unsupported(chunking)),
            Some((needed, unit)) => Err(budget_exceeded(problem, algorithm, unit, needed, budget)),
        }
    }

    /// The largest workspace over a chunking's chunks. Chunks of the same size differ only
    /// at the borders (padding), so the first, a middle and the last chunk stand for all.
    fn max_workspace(
        &self,
        kernel: &C::Kernel,
        problem: &ConvProblem,
        chunking: Chunking,
        limit: usize,
    ) -> Option<usize> {
        let chunks = chunk_list(problem, chunking);
        let picks: Vec<&Chunk> = if chunks.len() <= 8 {
            chunks.iter().collect()
        } else {
            vec![&chunks[0], &chunks[1], &chunks[chunks.len() / 2], &chunks[chunks.len() - 1]]
        };
        let mut max = 0;
        for c in picks {
            max = max.max(self.catalog.workspace_bytes(kernel, problem, c, limit)?);
        }
        Some(max)
    }
}

fn budget_exceeded(
    problem: &ConvProblem,
    alg: Algorithm,
    unit: &'static str,
    needed: usize,
    budget: BudgetState,
) -> ConvError {
    ConvError::BudgetExceeded {
        problem: problem.to_string(),
        algorithm: alg.to_string(),
        unit,
        needed,
        available: budget.available(),
        budget: budget.budget,
        live: budget.live,
    }
}

fn trace_decision<C: AlgorithmCatalog>(catalog: &C, plan: &Plan<C::Kernel>, budget: BudgetState, cached: bool) {
    tracing::debug!(
        target: "conv_engine::dispatch",
        device = %catalog.device_key(),
        problem = %plan.problem,
        algorithm = %plan.algorithm,
        kernel = %plan.kernel,
        workspace_bytes = plan.workspace_bytes,
        workspace = %format_bytes(plan.workspace_bytes),
        chunks = plan.chunk_count(),
        batch_per_chunk = plan.chunking.batch_per_chunk,
        rows_per_chunk = plan.chunking.rows_per_chunk,
        estimated_ms = plan.estimated_seconds * 1e3,
        measured = plan.measured,
        budget_bytes = budget.budget,
        live_bytes = budget.live,
        cached,
        "conv plan"
    );
}

/// Whether output-row chunking of `problem` can be expressed as independent sub-problems
/// (forward convolutions); transposed ones are chunked by the executors that can.
pub fn rows_are_subproblems(problem: &ConvProblem) -> bool {
    problem.geometry().kind == ConvKind::Forward
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::{Conv2dParams, ConvProblem};
    use candle_core::DType;

    /// A catalog with made-up costs: A is fast with workspace proportional to the chunk,
    /// B is slow with none.
    struct Toy {
        b_offered: bool,
    }
    impl AlgorithmCatalog for Toy {
        type Kernel = Algorithm;
        fn device_key(&self) -> String {
            "toy".into()
        }
        fn algorithms(&self) -> Vec<Algorithm> {
            let mut v = vec![Algorithm::Im2colGemm];
            if self.b_offered {
                v.push(Algorithm::Direct);
            }
            v
        }
        fn kernel(&self, a: Algorithm, _p: &ConvProblem, _c: Chunking, _limit: usize) -> Option<Algorithm> {
            Some(a)
        }
        fn workspace_bytes(&self, a: &Algorithm, _p: &ConvProblem, c: &Chunk, _limit: usize) -> Option<usize> {
            Some(match a {
                Algorithm::Im2colGemm => 1000 * c.batch.len() * c.rows.len(),
                _ => 0,
            })
        }
        fn estimated_seconds(&self, a: &Algorithm, _p: &ConvProblem, c: &Chunk) -> f64 {
            let work = (c.batch.len() * c.rows.len()) as f64;
            match a {
                Algorithm::Im2colGemm => work,
                _ => 100.0 * work,
            }
        }
    }

    fn problem(batch: usize) -> ConvProblem {
        ConvProblem::conv2d(
            &[batch, 2, 16, 16],
            &[2, 2, 3, 3],
            DType::F32,
            DType::F32,
            &Conv2dParams::default().with_padding(1),
        )
        .unwrap()
    }

    #[test]
    fn picks_the_fastest_that_fits_and_chunks_batch_before_rows() {
        let d = Dispatcher::new(Toy { b_offered: true });
        let p = problem(4);
        let plan = d.plan(&p, BudgetState { budget: 1 << 30, live: 0 }).unwrap();
        assert_eq!((plan.algorithm, plan.chunk_count()), (Algorithm::Im2colGemm, 1));
        // 4 images × 16 rows × 1000 = 64000 bytes whole; 32000 fits two images at a time.
        let plan = d.plan(&p, BudgetState { budget: 40_000, live: 8_000 }).unwrap();
        assert_eq!(plan.chunking, Chunking { batch_per_chunk: 2, rows_per_chunk: 16 });
        // 5000 bytes: one image, 4 rows at a time.
        let plan = d.plan(&p, BudgetState { budget: 5_000, live: 0 }).unwrap();
        assert_eq!(plan.chunking, Chunking { batch_per_chunk: 1, rows_per_chunk: 4 });
        assert!(plan.workspace_bytes <= 5_000);
    }

    #[test]
    fn error_names_the_bytes_needed() {
        let d = Dispatcher::new(Toy { b_offered: false });
        let e = d.plan(&problem(1), BudgetState { budget: 900, live: 100 }).unwrap_err().to_string();
        assert!(e.contains("1000 bytes") && e.contains("800 bytes") && e.contains("output row"), "{e}");
    }

    #[test]
    fn measured_time_overrides_the_model() {
        let d = Dispatcher::new(Toy { b_offered: true });
        let p = problem(1);
        let budget = BudgetState { budget: 1 << 30, live: 0 };
        assert_eq!(d.plan(&p, budget).unwrap().algorithm, Algorithm::Im2colGemm);
        d.cache().record_measurement(&p, Algorithm::Direct, 1e-6);
        let plan = d.plan(&p, budget).unwrap();
        assert_eq!(plan.algorithm, Algorithm::Direct);
        assert!(plan.measured);
    }
}
