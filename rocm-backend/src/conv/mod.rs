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
use conv_engine::{Algorithm, BudgetState, ConvProblem, Dispatcher, Plan};
use kernels::Conv2dParams;
use kernels::family;
use std::fmt;
use std::sync::Arc;

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
    let g = &p.geometry;
    let dtype = p.dtype.to_candle();
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

/// [`run_plan`] with a fused epilogue: `out = act(conv + bias) + residual`. Only the NHWC
/// implicit-GEMM kernels fuse it; any other plan with a non-trivial epilogue is an error.
pub fn run_plan_fused(
    device: &Arc<RocmDevice>,
    plan: &RocmPlan,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
) -> Result<DeviceArray> {
    let p = &plan.problem;
    let g = &p.geometry;
    check_operands(p, x, w, bias, epilogue, None)?;
    if !epilogue.is_plain() && !matches!(plan.kernel, RocmKernel::ImplicitGemm(IgemmKernel::Nhwc { .. })) {
        return Err(RocmError::op(
            "conv",
            format!(
                "a fused activation/residual needs the NHWC implicit-GEMM kernels; the plan for {p} uses {}",
                plan.kernel
            ),
        ));
    }
    let out = DeviceArray::alloc(device, p.dtype.to_candle(), g.output_len())?;
    let hw = g.out_hw()[0] * g.out_hw()[1];
    match plan.kernel {
        RocmKernel::ImplicitGemm(k) => igemm::run(device, p, k, &plan.chunks(), x, w, bias, epilogue, &out)?,
        RocmKernel::Direct => direct::run(device, p, x, w, bias, &out)?,
        RocmKernel::Gemm1x1 => {
            gemm1x1::run(device, p, x, w, &out)?;
            add_bias(device, &out, bias, g.batch, g.out_channels, hw)?;
        }
        RocmKernel::Im2colGemm => {
            im2col::run(device, p, plan.chunking.rows_per_chunk, x, w, &out)?;
            add_bias(device, &out, bias, g.batch, g.out_channels, hw)?;
        }
        RocmKernel::Miopen => {
            run_miopen_into(device, plan, x, w, &out)?;
            add_bias(device, &out, bias, g.batch, g.out_channels, hw)?;
        }
    }
    Ok(out)
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
        &Kernel::new(&family::BINARY, "add", d)?,
        Grid::Vectors { elements: out.len, widest_bytes: out.dtype.size_in_bytes() },
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

    pub fn plan(&self, p: &ConvProblem) -> std::result::Result<RocmPlan, conv_engine::ConvError> {
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
