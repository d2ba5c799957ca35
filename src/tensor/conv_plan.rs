//! Which algorithm runs a convolution, visible without tracing: the dispatcher's plan as a
//! value ([`ConvPlanInfo`]), from [`Device::conv_plan`] before a run or from
//! [`Tensor::conv2d_with_plan`] with the run's output.

use super::{ConvEpilogue, Storage, Tensor};
use crate::device::Device;
use crate::error::{Error, Result};
use conv_engine::{Algorithm, Conv2dParams, ConvProblem, Plan, format_bytes};
use std::fmt;

/// The dispatcher's decision for one convolution: the algorithm, the device's kernel for
/// it, how the problem is chunked and the workspace it takes. Its `Display` is one line,
/// e.g. `ImplicitGemm (implicit-gemm/Avx2Fma) on cpu/Avx2Fma/2 threads, 1 chunk, workspace
/// 1.50 MiB, ~0.42 ms: conv2d f32 N=1 C=64 ...`.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvPlanInfo {
    /// The device and its library versions, as the plan cache keys them.
    pub device: String,
    /// The problem, one line (operation, dtype, shapes, parameters).
    pub problem: String,
    pub algorithm: Algorithm,
    /// The device's kernel for the algorithm (tile configuration, microkernel, layout).
    pub kernel: String,
    /// How many pieces the problem runs in (1: whole).
    pub chunks: usize,
    pub batch_per_chunk: usize,
    pub rows_per_chunk: usize,
    /// Peak workspace bytes of the largest chunk.
    pub workspace_bytes: usize,
    /// The cost model's (or a recorded measurement's) time for the whole problem.
    pub estimated_seconds: f64,
    /// Whether `estimated_seconds` is a measurement from the plan cache.
    pub measured: bool,
}

impl ConvPlanInfo {
    fn from_plan<K: fmt::Display>(device: String, plan: &Plan<K>) -> Self {
        ConvPlanInfo {
            device,
            problem: plan.problem().to_string(),
            algorithm: plan.algorithm(),
            kernel: plan.kernel().to_string(),
            chunks: plan.chunk_count(),
            batch_per_chunk: plan.chunking().batch_per_chunk,
            rows_per_chunk: plan.chunking().rows_per_chunk,
            workspace_bytes: plan.workspace_bytes(),
            estimated_seconds: plan.estimated_seconds(),
            measured: plan.measured(),
        }
    }
}

impl fmt::Display for ConvPlanInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) on {}, {} chunk{}, workspace {}, {}{:.3} ms: {}",
            self.algorithm,
            self.kernel,
            self.device,
            self.chunks,
            if self.chunks == 1 { "" } else { "s" },
            format_bytes(self.workspace_bytes),
            if self.measured { "measured " } else { "~" },
            self.estimated_seconds * 1e3,
            self.problem
        )
    }
}

impl Device {
    /// The plan this device's dispatcher makes for `problem` now (with what is live on the
    /// device now), without running it.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// use rocm_vision::conv_engine::ConvProblem;
    /// let device = Device::cpu();
    /// let p = Conv2dParams::default().with_padding(1);
    /// let problem = ConvProblem::conv2d(&[1, 64, 32, 32], &[64, 64, 3, 3], DType::F32, DType::F32, &p)?;
    /// let plan = device.conv_plan(&problem)?;
    /// assert_eq!(plan.chunks, 1);
    /// assert!(plan.workspace_bytes <= 64 << 20); // the CPU's default workspace budget
    /// println!("{plan}");
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv_plan(&self, problem: &ConvProblem) -> Result<ConvPlanInfo> {
        use conv_engine::AlgorithmCatalog;
        match self.rocm_context() {
            None => {
                let plan = self.cpu_conv().plan_rounded(problem, self.conv_rounding())?;
                let key = self.cpu_conv().dispatcher_for(self.conv_rounding()).catalog().device_key();
                Ok(ConvPlanInfo::from_plan(key, &plan))
            }
            Some(ctx) => {
                let plan = ctx.conv.plan_rounded(problem, self.conv_rounding())?;
                Ok(ConvPlanInfo::from_plan(ctx.conv.dispatcher_for(self.conv_rounding()).catalog().device_key(), &plan))
            }
        }
    }
}

impl Device {
    /// The plan this device's dispatcher would make for `problem` with `live` bytes in
    /// use on the device (the problem's output included): what a memory plan asks at each
    /// convolution of a walk through a model. On the CPU the conv budget is workspace
    /// only, so `live` does not matter; on ROCm it is the allocator's budget less `live`.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// use rocm_vision::ConvProblem;
    /// let device = Device::cpu();
    /// let p = Conv2dParams::default().with_padding(1);
    /// let problem = ConvProblem::conv2d(&[1, 32, 64, 64], &[32, 32, 3, 3], DType::F16, DType::F16, &p)?;
    /// assert_eq!(device.conv_plan_with_live(&problem, 1 << 30)?, device.conv_plan(&problem)?);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv_plan_with_live(&self, problem: &ConvProblem, live: usize) -> Result<ConvPlanInfo> {
        use conv_engine::AlgorithmCatalog;
        match self.rocm_context() {
            None => self.conv_plan(problem),
            Some(ctx) => {
                let state = conv_engine::BudgetState { budget: ctx.device.allocator().stats().budget, live };
                let dispatcher = ctx.conv.dispatcher_for(self.conv_rounding());
                let plan = dispatcher.plan(problem, state)?;
                Ok(ConvPlanInfo::from_plan(dispatcher.catalog().device_key(), &plan))
            }
        }
    }
}

impl Tensor {
    /// [`Tensor::conv2d`] that also returns the plan it ran: which algorithm, kernel,
    /// chunking and workspace. The plan is made first, with the budget state the run sees;
    /// the run's own request then gets that plan back from the dispatcher's cache (the
    /// dispatcher is deterministic for a problem and a budget state).
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let device = Device::cpu();
    /// let x = Tensor::ones(&[1, 8, 16, 16], DType::F32, &device)?;
    /// let w = Tensor::ones(&[4, 8, 1, 1], DType::F32, &device)?;
    /// let (y, plan) = x.conv2d_with_plan(&w, None, &Conv2dParams::default())?;
    /// assert_eq!(y.dims(), &[1, 4, 16, 16]);
    /// assert_eq!(y.to_vec::<f32>()?[0], 8.0);
    /// println!("ran {}", plan.algorithm); // e.g. Gemm1x1 for this 1x1 convolution
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv2d_with_plan(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv2dParams,
    ) -> Result<(Tensor, ConvPlanInfo)> {
        self.conv2d_fused_with_plan(weight, bias, params, &ConvEpilogue::default())
    }

    /// [`Tensor::conv2d_fused`] that also returns the plan it ran (see
    /// [`Tensor::conv2d_with_plan`]).
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let device = Device::cpu();
    /// let x = Tensor::full(-1.0, &[1, 2, 8, 8], DType::F32, &device)?;
    /// let w = Tensor::ones(&[2, 2, 3, 3], DType::F32, &device)?;
    /// let ep = ConvEpilogue { activation: Activation::Relu, ..Default::default() };
    /// let (y, plan) = x.conv2d_fused_with_plan(&w, None, &Conv2dParams::default().with_padding(1), &ep)?;
    /// assert!(y.to_vec::<f32>()?.iter().all(|&v| v == 0.0)); // ReLU of negative sums
    /// assert!(plan.problem.starts_with("conv2d f32"));
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv2d_fused_with_plan(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv2dParams,
        epilogue: &ConvEpilogue<'_>,
    ) -> Result<(Tensor, ConvPlanInfo)> {
        let problem = ConvProblem::conv2d(self.dims(), weight.dims(), self.dtype(), weight.dtype(), params)?;
        let (x, w) = self.contiguous_operands(weight)?;
        let plan = self.device.conv_plan(&problem)?;
        Ok((x.conv2d_fused(&w, bias, params, epilogue)?, plan))
    }

    /// [`Tensor::conv_transpose2d`] that also returns the plan it ran (see
    /// [`Tensor::conv2d_with_plan`]).
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let device = Device::cpu();
    /// let x = Tensor::ones(&[1, 4, 8, 8], DType::F32, &device)?;
    /// let w = Tensor::ones(&[4, 2, 2, 2], DType::F32, &device)?;
    /// let (y, plan) = x.conv_transpose2d_with_plan(&w, None, &Conv2dParams::default().with_stride(2))?;
    /// assert_eq!(y.dims(), &[1, 2, 16, 16]);
    /// assert!(plan.problem.starts_with("conv_transpose2d"));
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv_transpose2d_with_plan(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv2dParams,
    ) -> Result<(Tensor, ConvPlanInfo)> {
        let problem = ConvProblem::conv_transpose2d(self.dims(), weight.dims(), self.dtype(), weight.dtype(), params)?;
        let (x, w) = self.contiguous_operands(weight)?;
        let plan = self.device.conv_plan(&problem)?;
        Ok((x.conv_transpose2d(&w, bias, params)?, plan))
    }

    /// On ROCm, the operands made contiguous before the plan is made, so that the run
    /// allocates nothing between the plan and its own request (what is live decides the
    /// plan there). On the CPU the budget does not depend on what is live.
    fn contiguous_operands(&self, weight: &Tensor) -> Result<(Tensor, Tensor)> {
        self.same_device(weight, "conv")?;
        match (&self.s, &weight.s) {
            (Storage::Rocm(_), Storage::Rocm(_)) => Ok((self.contiguous()?, weight.contiguous()?)),
            (Storage::Cpu(_), Storage::Cpu(_)) => Ok((self.clone(), weight.clone())),
            _ => Err(Error::device_mismatch("conv", &self.device, &weight.device)),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use conv_engine::CpuConv;

    /// The plan returned is the one that ran: an engine restricted to one algorithm reports
    /// it, and a budget too small for the whole problem shows as chunks.
    #[test]
    fn reports_the_algorithm_and_chunks_that_ran() {
        let p = Conv2dParams::default().with_padding(1);
        let dev = Device::cpu_with_engine(CpuConv::new(Budget::bytes(1 << 30)).with_allowed(&[Algorithm::Direct]));
        let x = Tensor::ones(&[1, 4, 16, 16], DType::F32, &dev).unwrap();
        let w = Tensor::ones(&[4, 4, 3, 3], DType::F32, &dev).unwrap();
        let (y, plan) = x.conv2d_with_plan(&w, None, &p).unwrap();
        assert_eq!(plan.algorithm, Algorithm::Direct);
        // Whole; the vectorised direct conv stages edge strips per worker (a few KiB).
        assert!(plan.chunks == 1 && plan.workspace_bytes < 64 << 10, "{plan}");
        // The centre pixel sees 3x3 taps over 4 channels of ones.
        assert_eq!(y.to_vec::<f32>().unwrap()[8 * 16 + 8], 36.0);
        assert!(plan.to_string().starts_with("Direct (direct) on cpu/"), "{plan}");

        // im2col + GEMM only: with room for the whole column matrix it runs whole; with
        // three quarters of that room its output rows are chunked, within the budget.
        let im2col = |budget| {
            Device::cpu_with_engine(CpuConv::new(Budget::bytes(budget)).with_allowed(&[Algorithm::Im2colGemm]))
        };
        let run = |dev: &Device| {
            let x = Tensor::ones(&[1, 16, 128, 128], DType::F32, dev).unwrap();
            let w = Tensor::ones(&[16, 16, 3, 3], DType::F32, dev).unwrap();
            x.conv2d_with_plan(&w, None, &p).unwrap()
        };
        let (_, whole) = run(&im2col(1 << 30));
        assert_eq!((whole.algorithm, whole.chunks), (Algorithm::Im2colGemm, 1), "{whole}");
        let budget = whole.workspace_bytes * 3 / 4;
        let (y, plan) = run(&im2col(budget));
        assert_eq!(plan.algorithm, Algorithm::Im2colGemm);
        assert!(plan.chunks > 1 && plan.workspace_bytes <= budget, "{plan} (budget {budget})");
        assert_eq!(plan.chunks, 128usize.div_ceil(plan.rows_per_chunk));
        assert_eq!(y.to_vec::<f32>().unwrap()[60 * 128 + 60], 144.0);
    }
}
