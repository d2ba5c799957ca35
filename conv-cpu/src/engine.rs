//! [`CpuConv`]: convolution on the CPU within a workspace budget. It plans with the
//! dispatcher over [`CpuCatalog`] and runs the plan's kernel on candle CPU tensors,
//! counting the workspace it allocates itself.

use crate::catalog::{CpuCatalog, CpuKernel, CpuPlan, chunk_geometry};
use crate::implicit_gemm::Element;
use crate::{candle_conv, check_len, direct, gemm1x1, s2d_gemm, tap_gemm};
use candle_core::{Device, Storage, Tensor, WithDType};
use conv_engine::budget::{DEFAULT_CPU_WORKSPACE, host_free_bytes};
use conv_engine::{
    Algorithm, AlgorithmCatalog, Budget, BudgetState, Conv1dParams, Conv2dParams, ConvDType, ConvError, ConvProblem,
    ConvRounding, Dispatcher, Epilogue, RoundingDispatchers, WorkspaceMeter,
};
use half::{bf16, f16};

/// Convolution on the CPU within a workspace budget: plans with the dispatcher, runs the
/// plan, and counts the workspace it allocates itself.
pub struct CpuConv {
    dispatchers: RoundingDispatchers<CpuCatalog>,
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
            dispatchers: RoundingDispatchers::new(|rounding| match rounding {
                ConvRounding::Fastest => catalog.clone(),
                ConvRounding::SizeIndependent => catalog.clone().with_rounding(rounding),
            }),
            budget,
            meter: WorkspaceMeter::default(),
        }
    }

    /// Only these algorithms may be chosen.
    pub fn with_allowed(mut self, algorithms: &[Algorithm]) -> Self {
        self.dispatchers = self.dispatchers.with_allowed(algorithms);
        self
    }

    pub fn budget(&self) -> Budget {
        self.budget
    }

    pub fn dispatcher(&self) -> &Dispatcher<CpuCatalog> {
        self.dispatchers.get(ConvRounding::Fastest)
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
        self.dispatchers.get(rounding)
    }

    /// [`Self::plan`] under `rounding`.
    pub fn plan_rounded(&self, problem: &ConvProblem, rounding: ConvRounding) -> Result<CpuPlan, ConvError> {
        self.dispatchers.plan(problem, rounding, self.budget_state())
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
        let threads = self.dispatcher().catalog().threads;
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

    /// The gemm crate's per-thread slabs a matrix product (candle's CPU matmul, the
    /// attention of a VAE) may leave behind: one L2-sized slab for each of this engine's
    /// threads and for the calling thread (small products run on it, unsplit). Kept by
    /// the crate for the life of the thread, so a plan holds them apart from its peak.
    /// The threads the engine's GEMMs run on (the attention's products use as many).
    pub fn threads(&self) -> usize {
        self.dispatcher().catalog().threads
    }

    pub fn matmul_gemm_crate_bytes(&self) -> usize {
        (self.dispatcher().catalog().threads + 1) * gemm1x1::l2_slab_bytes()
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
    /// The implicit GEMM, Winograd (in its output transform), `Gemm1x1` (all its forms) and the vectorised
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
        let catalog = self.dispatcher().catalog();
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
        if let CpuKernel::Winograd(_, mk) = *plan.kernel()
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
        let catalog = self.dispatcher().catalog();
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
                    let mut ws = self.meter.alloc_f32(tap_gemm::scratch_floats(&gc, mk, threads))?;
                    let (rows, ep) = (chunk.rows.clone(), &chunk_epilogue);
                    tap_gemm::run(mk, &gc, xs, w, b, ep, os, rows, threads, &mut ws)?
                }
                CpuKernel::S2dGemm(mk) => {
                    let threads = catalog.threads;
                    let mut ws = self.meter.alloc_f32(s2d_gemm::scratch_floats(&gc, mk, threads))?;
                    let (rows, ep) = (chunk.rows.clone(), &chunk_epilogue);
                    s2d_gemm::run(mk, &gc, xs, w, b, ep, os, rows, threads, &mut ws)?
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
        crate::implicit_gemm::apply_epilogue_in_place(epilogue, 0.0, part, res);
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
