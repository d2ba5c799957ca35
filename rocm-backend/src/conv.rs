//! Convolution on ROCm: the device's algorithm catalog (workspace and cost of each
//! algorithm) and the execution of the dispatcher's plans.
//!
//! - `ImplicitGemm`: the LDS-tiled FMA kernel (`igemm_*`), no workspace.
//! - `Im2colGemm`: the im2col kernel into a column buffer (one image, a band of output
//!   rows per chunk — the buffer is the workspace) and a rocBLAS GEMM; transposed
//!   convolutions as a GEMM into columns and `col2im`.
//! - `Gemm1x1`: rocBLAS straight on the input and output of a 1x1, stride-1 convolution.
//! - `Direct`: one thread per output element; the fallback for anything.

use crate::buffer::DeviceArray;
use crate::device::{ArchFamily, RocmDevice};
use crate::error::{Result, RocmError};
use crate::launch::{Arg, grid_for, launch};
use crate::ops::kernel_dtype;
use candle_core::DType;
use conv_engine::{Algorithm, AlgorithmCatalog, BudgetState, Chunk, ConvDType, ConvProblem, Dispatcher, Plan};
use implicit_gemm::ConvKind;
use kernels::{Conv2dParams, IGEMM_CONFIGS, IgemmConfig};
use std::sync::Arc;

/// Sustained TFLOP/s assumed per algorithm and dtype class, per family. Only the ratios
/// matter. The NVIDIA test-tier figures are the H200 measurements of the GPU tier
/// (docs/measurements/); the AMD ones are unmeasured placeholders ordered as the hardware
/// suggests (matrix cores through rocBLAS for f16/bf16, FMA for the first igemm).
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
        vec![Algorithm::ImplicitGemm, Algorithm::Im2colGemm, Algorithm::Gemm1x1, Algorithm::Direct]
    }

    fn workspace_bytes(&self, alg: Algorithm, p: &ConvProblem, chunk: &Chunk, _limit: usize) -> Option<usize> {
        match alg {
            Algorithm::ImplicitGemm | Algorithm::Direct => Some(0),
            Algorithm::Gemm1x1 => is_gemm1x1(p).then_some(0),
            Algorithm::Im2colGemm => col_elems(p, chunk).map(|e| e * p.dtype.size_in_bytes()),
            Algorithm::Miopen => None,
        }
    }

    fn estimated_seconds(&self, alg: Algorithm, p: &ConvProblem, chunk: &Chunk) -> f64 {
        let g = &p.geometry;
        let share = (chunk.batch.len() * chunk.rows.len()) as f64 / (g.batch * g.out_hw()[0]) as f64;
        let flops = g.flops() as f64 * share;
        let compute = flops / (tflops(self.device.info().family, alg, p.dtype) * 1e12);
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

/// Runs a plan on contiguous device arrays; returns the contiguous NCHW output.
pub fn run_plan(
    device: &Arc<RocmDevice>,
    plan: &Plan,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
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
    let out = DeviceArray::alloc(device, dtype, g.output_len())?;
    let kd = kernel_dtype(dtype)?;
    let es = dtype.size_in_bytes();
    let (img_in, img_out) = (g.input_len() / g.batch, g.output_len() / g.batch);
    let [pp, qq] = g.out_hw();
    let bias_ptr = bias.map_or(0, |b| b.ptr_at(0));
    match plan.algorithm {
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
        Algorithm::Miopen => return Err(RocmError::op("conv", "the Miopen algorithm is not built into this backend")),
    }
    let _ = es;
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
