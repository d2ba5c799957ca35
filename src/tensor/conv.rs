//! Convolutions: every one goes through the device's conv engine, with its epilogue (bias,
//! activation, residual, scale) fused into the same pass over the output.

use super::{Storage, Tensor};
use crate::error::{Error, Result};
use crate::rocm::RocmTensor;
use conv_engine::{Conv1dParams, Conv2dParams};

/// What a convolution applies to its output in the same pass: `out = (act(conv + bias) +
/// residual) · scale` ([`Tensor::conv2d_fused`]).
pub type ConvEpilogue<'a> = conv_engine::Epilogue<&'a Tensor>;

/// The plan a convolution ran, on its device ([`Tensor::conv_with_plan`]).
pub(super) enum RanPlan {
    Cpu(conv_cpu::CpuPlan),
    Rocm(rocm_backend::conv::RocmPlan),
}

impl Tensor {
    fn conv(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        problem: conv_engine::ConvProblem,
        op: &'static str,
        epilogue: &ConvEpilogue<'_>,
    ) -> Result<Tensor> {
        Ok(self.conv_with_plan(weight, bias, problem, op, epilogue)?.0)
    }

    /// Plans `problem` on this tensor's device (its budget state now, its rounding), runs
    /// that plan, and returns it with the output: the plan returned is the plan that ran.
    pub(super) fn conv_with_plan(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        problem: conv_engine::ConvProblem,
        op: &'static str,
        epilogue: &ConvEpilogue<'_>,
    ) -> Result<(Tensor, RanPlan)> {
        self.same_device(weight, op)?;
        if let Some(r) = epilogue.residual {
            self.same_device(r, op)?;
            if r.dims() != problem.output_shape() || r.dtype() != self.dtype() {
                return Err(Error::op(
                    op,
                    format!(
                        "residual is {:?} {:?}; the output is {:?} {:?}",
                        r.dims(),
                        r.dtype(),
                        problem.output_shape(),
                        self.dtype()
                    ),
                ));
            }
        }
        match (&self.s, &weight.s) {
            (Storage::Cpu(x), Storage::Cpu(w)) => {
                let b = self.cpu_of(bias, op)?;
                let r = self.cpu_of(epilogue.residual, op)?;
                let ep = conv_engine::Epilogue { activation: epilogue.activation, residual: r, scale: epilogue.scale };
                let engine = self.device.cpu_conv();
                let plan = engine.plan_rounded(&problem, self.device.conv_rounding())?;
                let out = self.wrap_cpu(engine.run_plan_fused(&plan, x, w, b, &ep)?)?;
                Ok((out, RanPlan::Cpu(plan)))
            }
            (Storage::Rocm(x), Storage::Rocm(w)) => {
                let ctx = self.device.rocm_context().expect("ROCm storage lives on a ROCm device");
                let b = self.rocm_of(bias, op)?;
                if let Some(b) = b
                    && b.dims() != [problem.geometry().out_channels]
                {
                    return Err(Error::op(
                        op,
                        format!("bias has shape {:?}, expected [{}]", b.dims(), problem.geometry().out_channels),
                    ));
                }
                let (x, w) = (x.contiguous()?, w.contiguous()?);
                let b = b.map(|b| b.contiguous()).transpose()?;
                let r = self.rocm_of(epilogue.residual, op)?.map(|r| r.contiguous()).transpose()?;
                let ep = rocm_backend::conv::Epilogue {
                    activation: epilogue.activation,
                    residual: r.as_ref().map(|r| &r.array),
                    scale: epilogue.scale,
                };
                let b = b.as_ref().map(|b| &b.array);
                // Planned once the operands are contiguous: what is live decides the plan.
                let plan = ctx.conv.plan_rounded(&problem, self.device.conv_rounding())?;
                let out = rocm_backend::conv::run_plan_fused(&ctx.device, &plan, &x.array, &w.array, b, ep)?;
                Ok((self.wrap_rocm(RocmTensor::contiguous_new(out, &problem.output_shape()))?, RanPlan::Rocm(plan)))
            }
            _ => unreachable!("same_device checked"),
        }
    }

    /// `conv2d` with its epilogue in the same pass over the output: `out = (act(conv +
    /// bias) + residual) · scale`, on either device (a residual must have the output's
    /// shape and dtype). A LeakyReLU after a conv, or a resnet's residual add, then costs
    /// no second pass over memory.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let device = Device::cpu();
    /// let x = Tensor::full(-1.0, &[1, 1, 3, 3], DType::F32, &device)?;
    /// let w = Tensor::ones(&[1, 1, 1, 1], DType::F32, &device)?;
    /// let skip = Tensor::ones(&[1, 1, 3, 3], DType::F32, &device)?;
    /// let ep = ConvEpilogue { activation: Activation::LeakyRelu(0.5), residual: Some(&skip), scale: 2.0 };
    /// let y = x.conv2d_fused(&w, None, &Conv2dParams::default(), &ep)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0; 9]); // (leaky(-1) + 1) · 2
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv2d_fused(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv2dParams,
        epilogue: &ConvEpilogue<'_>,
    ) -> Result<Tensor> {
        let p = conv_engine::ConvProblem::conv2d(self.dims(), weight.dims(), self.dtype(), weight.dtype(), params)?;
        self.conv(weight, bias, p, "conv2d", epilogue)
    }

    /// `conv_transpose2d` with its epilogue in the same pass (see [`Tensor::conv2d_fused`]).
    pub fn conv_transpose2d_fused(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        params: &Conv2dParams,
        epilogue: &ConvEpilogue<'_>,
    ) -> Result<Tensor> {
        let p = conv_engine::ConvProblem::conv_transpose2d(
            self.dims(),
            weight.dims(),
            self.dtype(),
            weight.dtype(),
            params,
        )?;
        self.conv(weight, bias, p, "conv_transpose2d", epilogue)
    }

    /// 2-D convolution of `[N, C, H, W]` by `[K, C/groups, R, S]` weights (PyTorch's
    /// `F.conv2d`), with the algorithm the device's dispatcher picks within its budget
    /// ([`Tensor::conv2d_with_plan`] says which).
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let device = Device::cpu();
    /// let x = Tensor::ones(&[1, 2, 5, 5], DType::F32, &device)?;
    /// let w = Tensor::ones(&[3, 2, 3, 3], DType::F32, &device)?;
    /// let b = Tensor::from_vec(vec![0f32, 1.0, 2.0], &[3], &device)?;
    /// let y = x.conv2d(&w, Some(&b), &Conv2dParams::default().with_stride(2))?;
    /// assert_eq!(y.dims(), &[1, 3, 2, 2]);
    /// assert_eq!(y.to_vec::<f32>()?[4], 19.0); // 2 channels × 9 taps + bias 1
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv2d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv2dParams) -> Result<Tensor> {
        self.conv2d_fused(weight, bias, params, &ConvEpilogue::default())
    }

    /// 2-D transposed convolution of `[N, C, H, W]` by `[C, K/groups, R, S]` weights
    /// (PyTorch's `F.conv_transpose2d`).
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let device = Device::cpu();
    /// let x = Tensor::ones(&[1, 1, 2, 2], DType::F32, &device)?;
    /// let w = Tensor::ones(&[1, 1, 2, 2], DType::F32, &device)?;
    /// // Stride 2 with a 2x2 kernel: each input pixel becomes a 2x2 block.
    /// let y = x.conv_transpose2d(&w, None, &Conv2dParams::default().with_stride(2))?;
    /// assert_eq!(y.dims(), &[1, 1, 4, 4]);
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0; 16]);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv_transpose2d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv2dParams) -> Result<Tensor> {
        self.conv_transpose2d_fused(weight, bias, params, &ConvEpilogue::default())
    }

    /// 1-D convolution of `[N, C, L]` by `[K, C/groups, S]` weights.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let device = Device::cpu();
    /// let x = Tensor::from_vec(vec![1f32, 2.0, 3.0, 4.0], &[1, 1, 4], &device)?;
    /// let w = Tensor::from_vec(vec![1f32, 1.0], &[1, 1, 2], &device)?;
    /// // Causal: pad one on the left only.
    /// let y = x.conv1d(&w, None, &Conv1dParams::default().with_padding_lr(1, 0))?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0, 3.0, 5.0, 7.0]);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv1d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv1dParams) -> Result<Tensor> {
        let p = conv_engine::ConvProblem::conv1d(self.dims(), weight.dims(), self.dtype(), weight.dtype(), params)?;
        self.conv(weight, bias, p, "conv1d", &ConvEpilogue::default())
    }

    pub fn conv_transpose1d(&self, weight: &Tensor, bias: Option<&Tensor>, params: &Conv1dParams) -> Result<Tensor> {
        let p = conv_engine::ConvProblem::conv_transpose1d(
            self.dims(),
            weight.dims(),
            self.dtype(),
            weight.dtype(),
            params,
        )?;
        self.conv(weight, bias, p, "conv_transpose1d", &ConvEpilogue::default())
    }
}
