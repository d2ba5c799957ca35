//! Convolution on ROCm: the device's algorithm catalog ([`catalog`]: which kernel each
//! algorithm runs a problem with, its workspace and cost), and the execution of the
//! dispatcher's plans, one file per algorithm:
//!
//! - [`igemm`]: `ImplicitGemm`, the NHWC implicit GEMM on matrix cores or FMA (tile choice
//!   in [`tiles`], index math in `implicit_gemm::nhwc`), or the NCHW FMA kernel;
//! - [`im2col`]: `Im2colGemm`, column buffer + rocBLAS (col2im for transposed convs);
//! - [`gemm1x1`]: `Gemm1x1`, rocBLAS on the input in place;
//! - [`direct`]: `Direct`, one thread per output element, the fallback;
//! - [`miopen`]: `Miopen` (feature `miopen`), Immediate mode within the budget.
//!
//! A [`RocmPlan`] carries the kernel the catalog chose; execution reads it from the plan.

pub mod catalog;
mod direct;
mod gemm1x1;
pub mod igemm;
mod im2col;
pub mod miopen;
pub mod tiles;

pub use catalog::RocmCatalog;
pub use igemm::{nhwc_workspace_bytes, run_implicit_gemm, run_implicit_gemm_into};
#[cfg(feature = "miopen")]
pub use miopen::miopen_compile_seconds;
pub use miopen::{miopen_chunk_problem, run_miopen_into};
pub use tiles::{
    IGEMM_SWEEP_FILE, IGEMM_TILE_TABLE, IgemmKernel, TileChoice, TileRegime, has_matrix_cores, igemm_config,
    igemm_kernel, nhwc_config,
};

use crate::buffer::DeviceArray;
use crate::device::RocmDevice;
use crate::error::{Result, RocmError};
use crate::launch::{Arg, Grid, Kernel, launch};
use crate::ops::kernel_dtype;
use candle_core::DType;
use conv_engine::tuning::TuneSession;
use conv_engine::{
    Algorithm, BudgetState, ConvProblem, ConvRounding, Dispatcher, Plan, RoundingDispatchers, TuningStore,
};
use kernels::Conv2dAbi;
use kernels::family;
use std::fmt;
use std::sync::{Arc, Mutex};

/// The kernel a ROCm plan runs, as the catalog chose it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RocmKernel {
    /// The implicit GEMM with this tile configuration, split-K and layout.
    ImplicitGemm(IgemmKernel),
    /// im2col into a column buffer, then rocBLAS.
    Im2colGemm,
    /// rocBLAS on the input in place.
    Gemm1x1,
    Direct,
    /// MIOpen's solution is chosen per chunk within the plan's workspace limit (MIOpen
    /// answers per sub-problem; equal chunks get the same one).
    Miopen,
}

impl RocmKernel {
    pub fn algorithm(&self) -> Algorithm {
        match self {
            RocmKernel::ImplicitGemm(_) => Algorithm::ImplicitGemm,
            RocmKernel::Im2colGemm => Algorithm::Im2colGemm,
            RocmKernel::Gemm1x1 => Algorithm::Gemm1x1,
            RocmKernel::Direct => Algorithm::Direct,
            RocmKernel::Miopen => Algorithm::Miopen,
        }
    }
}

impl fmt::Display for RocmKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RocmKernel::ImplicitGemm(k) => write!(f, "implicit-gemm {k}"),
            RocmKernel::Im2colGemm => f.write_str("im2col + rocBLAS"),
            RocmKernel::Gemm1x1 => f.write_str("rocBLAS 1x1"),
            RocmKernel::Direct => f.write_str("direct"),
            RocmKernel::Miopen => f.write_str("MIOpen immediate"),
        }
    }
}

/// A plan of the ROCm dispatcher.
pub type RocmPlan = Plan<RocmKernel>;

/// What a convolution applies before it writes its output: `out = (act(conv + bias) +
/// residual) · scale`, the residual an NCHW array of the output's shape and dtype. The
/// definition (and the CPU's) is `implicit_gemm::Epilogue`.
pub type Epilogue<'a> = implicit_gemm::Epilogue<&'a DeviceArray>;
pub use implicit_gemm::Activation;

/// The kernels' by-value form of an epilogue (the residual goes as a pointer).
pub(crate) fn epilogue_abi(e: &Epilogue<'_>) -> kernels::EpilogueAbi {
    kernels::EpilogueAbi { act: e.activation.code(), alpha: e.activation.alpha(), scale: e.scale, reserved: 0 }
}

/// The operands must be what `p` says: lengths and dtypes of input, weight, bias,
/// residual and (when given) output.
fn check_operands(
    p: &ConvProblem,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
    out: Option<&DeviceArray>,
) -> Result<()> {
    let g = p.geometry();
    let dtype = p.dtype().to_candle();
    let operands = [
        ("input", Some(x), g.input_len()),
        ("weight", Some(w), g.weight_len()),
        ("bias", bias, g.out_channels),
        ("residual", epilogue.residual, g.output_len()),
        ("output", out, g.output_len()),
    ];
    for (what, a, len) in operands {
        if let Some(a) = a
            && (a.len != len || a.dtype != dtype)
        {
            return Err(RocmError::op(
                "conv",
                format!("{what} holds {} {:?} elements, {p} needs {len} {dtype:?}", a.len, a.dtype),
            ));
        }
    }
    Ok(())
}

/// The kernels' geometry of `g` restricted to `batch` images.
fn kernel_params(g: &implicit_gemm::ConvGeometry, batch: usize) -> Conv2dAbi {
    let [p, q] = g.out_hw();
    Conv2dAbi {
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

/// Runs a plan on contiguous device arrays; returns the contiguous NCHW output.
pub fn run_plan(
    device: &Arc<RocmDevice>,
    plan: &RocmPlan,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
) -> Result<DeviceArray> {
    run_plan_fused(device, plan, x, w, bias, Epilogue::default())
}

/// [`run_plan`] with an epilogue: `out = (act(conv + bias) + residual) · scale`. The NHWC
/// implicit-GEMM kernels apply it as they write the output; every other algorithm (its
/// GEMM is rocBLAS's, MIOpen's, or writes without one) in one pass over the output after.
pub fn run_plan_fused(
    device: &Arc<RocmDevice>,
    plan: &RocmPlan,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
) -> Result<DeviceArray> {
    let p = &plan.problem();
    let g = p.geometry();
    check_operands(p, x, w, bias, epilogue, None)?;
    let out = DeviceArray::alloc(device, p.dtype().to_candle(), g.output_len())?;
    match *plan.kernel() {
        RocmKernel::ImplicitGemm(k @ IgemmKernel::Nhwc { .. }) => {
            igemm::run(device, p, k, &plan.chunks(), x, w, bias, epilogue, &out)?
        }
        // These add the bias themselves.
        RocmKernel::ImplicitGemm(k) => {
            igemm::run(device, p, k, &plan.chunks(), x, w, bias, Epilogue::default(), &out)?;
            apply_epilogue(device, p, &out, None, epilogue)?;
        }
        RocmKernel::Direct => {
            direct::run(device, p, x, w, bias, &out)?;
            apply_epilogue(device, p, &out, None, epilogue)?;
        }
        RocmKernel::Gemm1x1 => {
            gemm1x1::run(device, p, x, w, &out)?;
            apply_epilogue(device, p, &out, bias, epilogue)?;
        }
        RocmKernel::Im2colGemm => {
            im2col::run(device, p, plan.chunking().rows_per_chunk, x, w, &out)?;
            apply_epilogue(device, p, &out, bias, epilogue)?;
        }
        RocmKernel::Miopen => {
            run_miopen_into(device, plan, x, w, &out)?;
            apply_epilogue(device, p, &out, bias, epilogue)?;
        }
    }
    Ok(out)
}

/// The bias and epilogue of a convolution whose output `out` holds the bare sums, in one
/// pass over it (nothing to do without a bias and with a plain epilogue).
fn apply_epilogue(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    out: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
) -> Result<()> {
    if bias.is_none() && epilogue.is_plain() {
        return Ok(());
    }
    let g = p.geometry();
    launch(
        device,
        &Kernel::new(&family::CONV_EPILOGUE, "", kernel_dtype(out.dtype)?)?,
        Grid::Vectors { elements: out.len, widest_bytes: out.dtype.size_in_bytes() },
        &mut [
            Arg::I64(out.len as i64),
            Arg::I64((g.out_hw()[0] * g.out_hw()[1]) as i64),
            Arg::I64(g.out_channels as i64),
            Arg::Epilogue(epilogue_abi(&epilogue)),
            Arg::Ptr(bias.map_or(0, |b| b.ptr_at(0))),
            Arg::Ptr(epilogue.residual.map_or(0, |r| r.ptr_at(0))),
            Arg::Ptr(out.ptr_at(0)),
        ],
    )
}

/// Convolution on one ROCm device within its allocator's budget: one dispatcher (and plan
/// cache) per [`ConvRounding`].
pub struct RocmConv {
    device: Arc<RocmDevice>,
    dispatchers: RoundingDispatchers<RocmCatalog>,
    /// The `--tune` run in progress, if any ([`Self::start_tuning`]).
    tuning: Mutex<Option<Arc<TuneSession>>>,
}

impl RocmConv {
    /// Plans with the measured winners of the default tuning store
    /// (`conv_engine::tuning::default_store_path`) where it has them.
    pub fn new(device: Arc<RocmDevice>) -> Self {
        Self::with_store(device, Arc::new(TuningStore::open_default()))
    }

    /// [`Self::new`] with the measured winners of `store`.
    pub fn with_store(device: Arc<RocmDevice>, store: Arc<TuningStore>) -> Self {
        RocmConv {
            dispatchers: RoundingDispatchers::new(|r| RocmCatalog::new(device.clone()).with_rounding(r))
                .with_tuning(store),
            device,
            tuning: Mutex::default(),
        }
    }

    /// From now on, each problem run without a stored winner has its candidates timed on the device until `limit` is spent (an explicit
    /// `--tune`); [`Self::finish_tuning`] saves the store and reports.
    pub fn start_tuning(&self, limit: std::time::Duration) {
        let store = self.dispatcher().tuning().expect("RocmConv plans with a store").clone();
        *self.tuning.lock().expect("tuning poisoned") = Some(Arc::new(TuneSession::new(store, limit)));
    }

    /// Ends the tuning run: saves the store, returns the report (`None` when none ran).
    pub fn finish_tuning(&self) -> Result<Option<String>> {
        let Some(session) = self.tuning.lock().expect("tuning poisoned").take() else { return Ok(None) };
        session.finish().map(Some).map_err(|e| RocmError::op("conv", format!("--tune: {e}")))
    }

    /// Times every candidate of `p` (the tuning run's `time`): one run to compile and warm
    /// up, then the median of three, each to the device's completion. A candidate that
    /// fails (no memory, a launch error) is reported and timed as infinitely slow.
    fn tune(
        &self,
        p: &ConvProblem,
        x: &DeviceArray,
        w: &DeviceArray,
        bias: Option<&DeviceArray>,
        epilogue: Epilogue<'_>,
        rounding: ConvRounding,
    ) -> Result<()> {
        let Some(session) = self.tuning.lock().expect("tuning poisoned").clone() else { return Ok(()) };
        let budget = self.budget_state(p.output_bytes());
        session.tune_if_new(self.dispatcher_for(rounding), p, budget, |plan| {
            let once = || -> Result<f64> {
                let t = std::time::Instant::now();
                drop(run_plan_fused(&self.device, plan, x, w, bias, epilogue)?);
                self.device.synchronize()?;
                Ok(t.elapsed().as_secs_f64())
            };
            let timed = once().and_then(|_| {
                let mut t = [once()?, once()?, once()?];
                t.sort_by(f64::total_cmp);
                Ok(t[1])
            });
            Ok(timed.unwrap_or_else(|e| {
                tracing::warn!(target: "rocm_backend::conv", problem = %p, kernel = %plan.kernel(), error = %e, "tuning candidate failed");
                f64::INFINITY
            }))
        })
    }

    pub fn with_allowed(mut self, algorithms: &[Algorithm]) -> Self {
        self.dispatchers = self.dispatchers.with_allowed(algorithms);
        self
    }

    /// The dispatcher of [`ConvRounding::Fastest`].
    pub fn dispatcher(&self) -> &Dispatcher<RocmCatalog> {
        self.dispatchers.get(ConvRounding::Fastest)
    }

    pub fn dispatcher_for(&self, rounding: ConvRounding) -> &Dispatcher<RocmCatalog> {
        self.dispatchers.get(rounding)
    }

    /// The budget as the dispatcher sees it: the allocator's budget and live bytes. The
    /// output buffer is counted as live before the decision, since it must exist too.
    pub fn budget_state(&self, output_bytes: usize) -> BudgetState {
        // One snapshot of the allocator: its budget and live bytes together.
        let s = self.device.allocator().stats();
        BudgetState { budget: s.budget, live: s.live + crate::alloc::size_class(output_bytes) }
    }

    /// The budget as the dispatcher would see it with `live` bytes in use instead of what
    /// is live now: what a memory plan asks at each convolution of a walk through a model.
    pub fn budget_state_with_live(&self, live: usize) -> BudgetState {
        BudgetState { budget: self.device.allocator().stats().budget, live }
    }

    /// The plan under `rounding` with `live` bytes in use on the device (the problem's
    /// output included; see [`Self::budget_state_with_live`]).
    pub fn plan_with_live(
        &self,
        p: &ConvProblem,
        rounding: ConvRounding,
        live: usize,
    ) -> std::result::Result<RocmPlan, conv_engine::ConvError> {
        self.dispatchers.plan(p, rounding, self.budget_state_with_live(live))
    }

    /// The device bytes `plan`'s workspace takes from the allocator: its buffers (at most
    /// three: the implicit GEMM's input band, packed weights and split-K partials; the
    /// im2col column buffer) each rounded up to the allocator's size class, so at most one
    /// large granule more each.
    pub fn workspace_allocation_bytes(plan: &RocmPlan) -> usize {
        const MAX_WORKSPACE_BUFFERS: usize = 3;
        match plan.workspace_bytes() {
            0 => 0,
            ws => ws + MAX_WORKSPACE_BUFFERS * crate::alloc::LARGE_GRANULE,
        }
    }

    pub fn plan(&self, p: &ConvProblem) -> std::result::Result<RocmPlan, conv_engine::ConvError> {
        self.plan_rounded(p, ConvRounding::Fastest)
    }

    /// [`Self::plan`] under `rounding`.
    pub fn plan_rounded(
        &self,
        p: &ConvProblem,
        rounding: ConvRounding,
    ) -> std::result::Result<RocmPlan, conv_engine::ConvError> {
        self.dispatchers.plan(p, rounding, self.budget_state(p.output_bytes()))
    }

    /// Plans and runs `p` on contiguous device arrays.
    pub fn run(
        &self,
        p: &ConvProblem,
        x: &DeviceArray,
        w: &DeviceArray,
        bias: Option<&DeviceArray>,
    ) -> Result<DeviceArray> {
        self.run_fused(p, x, w, bias, Epilogue::default())
    }

    /// [`Self::run`] with an epilogue (see [`run_plan_fused`]).
    pub fn run_fused(
        &self,
        p: &ConvProblem,
        x: &DeviceArray,
        w: &DeviceArray,
        bias: Option<&DeviceArray>,
        epilogue: Epilogue<'_>,
    ) -> Result<DeviceArray> {
        self.run_rounded(p, x, w, bias, epilogue, ConvRounding::Fastest)
    }

    /// [`Self::run_fused`] under `rounding`.
    pub fn run_rounded(
        &self,
        p: &ConvProblem,
        x: &DeviceArray,
        w: &DeviceArray,
        bias: Option<&DeviceArray>,
        epilogue: Epilogue<'_>,
        rounding: ConvRounding,
    ) -> Result<DeviceArray> {
        self.tune(p, x, w, bias, epilogue, rounding)?;
        let plan = self.plan_rounded(p, rounding)?;
        run_plan_fused(&self.device, &plan, x, w, bias, epilogue)
    }
}

/// Whether a dtype has convolution kernels here.
pub fn conv_dtype_supported(dtype: DType) -> bool {
    matches!(dtype, DType::F32 | DType::F16 | DType::BF16)
}
