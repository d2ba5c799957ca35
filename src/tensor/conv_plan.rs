//! Which algorithm runs a convolution, visible without tracing: the dispatcher's plan as a
//! value ([`ConvPlanInfo`]), from [`Device::conv_plan`] before a run or from
//! [`Tensor::conv2d_with_plan`] with the run's output.

use super::conv::RanPlan;
use super::{ConvEpilogue, Tensor};
use crate::device::Device;
use crate::error::Result;
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
                let plan = ctx.conv.plan_with_live(problem, self.conv_rounding(), live)?;
                Ok(ConvPlanInfo::from_plan(ctx.conv.dispatcher_for(self.conv_rounding()).catalog().device_key(), &plan))
            }
        }
    }
}

impl Device {
    /// The information of a plan this device ran.
    fn ran_plan_info(&self, plan: &RanPlan) -> ConvPlanInfo {
        use conv_engine::AlgorithmCatalog;
        let rounding = self.conv_rounding();
        match (plan, self.rocm_context()) {
            (RanPlan::Cpu(plan), _) => {
                ConvPlanInfo::from_plan(self.cpu_conv().dispatcher_for(rounding).catalog().device_key(), plan)
            }
            (RanPlan::Rocm(plan), Some(ctx)) => {
                ConvPlanInfo::from_plan(ctx.conv.dispatcher_for(rounding).catalog().device_key(), plan)
            }
            (RanPlan::Rocm(plan), None) => ConvPlanInfo::from_plan("rocm".into(), plan),
        }
    }
}

impl Tensor {
    /// [`Tensor::conv2d`] that also returns the plan it ran: which algorithm, kernel,
    /// chunking and workspace. The convolution is planned once, and that plan is run.
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
        let (out, plan) = self.conv_with_plan(weight, bias, problem, "conv2d", epilogue)?;
        Ok((out, self.device.ran_plan_info(&plan)))
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
        let (out, plan) = self.conv_with_plan(weight, bias, problem, "conv_transpose2d", &ConvEpilogue::default())?;
        Ok((out, self.device.ran_plan_info(&plan)))
    }
}

#[cfg(test)]
mod tests {
    use crate::prelude::*;
    use conv_cpu::CpuConv;

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
        assert!(plan.to_string().starts_with("Direct (direct-"), "{plan}");

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

    /// The plan returned is the plan executed: the workspace the engine's meter saw during
    /// the run is the plan's, under a large and a small budget, for each kernel the plan can name, and the
    /// kernel is the one the plan says (a transposed `Gemm1x1` is the tap GEMM; a `Direct`
    /// that vectorises stages its scratch, the scalar loop none).
    #[test]
    fn with_plan_runs_the_plan_it_returns() {
        let p = Conv2dParams::default().with_padding(1);
        let cases: [(Algorithm, usize, &[usize], &[usize], bool, &str); 5] = [
            (Algorithm::ImplicitGemm, 1 << 30, &[1, 32, 48, 40], &[48, 32, 3, 3], false, "implicit-gemm/"),
            (Algorithm::ImplicitGemm, 96 << 10, &[2, 32, 48, 40], &[48, 32, 3, 3], false, "implicit-gemm/"),
            (Algorithm::Winograd, 1 << 30, &[1, 16, 40, 40], &[16, 16, 3, 3], false, "winograd-"),
            (Algorithm::Gemm1x1, 1 << 30, &[1, 16, 20, 20], &[16, 8, 4, 4], true, "tap-gemm/"),
            (Algorithm::Direct, 1 << 30, &[1, 8, 30, 30], &[8, 8, 3, 3], false, "direct-"),
        ];
        for (alg, budget, xs, ws, transposed, kernel) in cases {
            let dev = Device::cpu_with_engine(CpuConv::new(Budget::bytes(budget)).with_allowed(&[alg]));
            let x = Tensor::ones(xs, DType::F32, &dev).unwrap();
            let w = Tensor::ones(ws, DType::F32, &dev).unwrap();
            let meter = dev.cpu_conv().meter();
            let before = meter.current_bytes();
            meter.reset_peak();
            let (y, plan) = if transposed {
                x.conv_transpose2d_with_plan(&w, None, &Conv2dParams::default().with_stride(2).with_padding(1))
            } else {
                x.conv2d_with_plan(&w, None, &p)
            }
            .unwrap();
            assert!(y.to_vec::<f32>().unwrap().iter().all(|v| v.is_finite()));
            assert_eq!(plan.algorithm, alg, "{plan}");
            assert!(plan.kernel.starts_with(kernel), "{plan}");
            // The meter counts workspace buffers (the output is admitted, not counted).
            assert!(plan.workspace_bytes > 0, "{plan}");
            assert_eq!(meter.peak_bytes() - before, plan.workspace_bytes, "{plan}");
            // Under a small budget the tiles shrink to fit it; the run sizes them alike.
            assert!(plan.workspace_bytes <= budget, "{plan}");
        }
    }
}
