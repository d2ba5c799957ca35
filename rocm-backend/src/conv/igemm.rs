//! `ImplicitGemm` on ROCm: the NHWC kernels of `igemm_mma.hip` (matrix cores for
//! f16/bf16 — WMMA on RDNA3/RDNA4, MFMA on CDNA, mma.sync on the NVIDIA test tier — FMA for
//! f32) with their workspace: the NHWC band of input rows a chunk reads, the packed
//! weights, and split-K partial sums. Row chunking bounds the band, so the dispatcher fits
//! the algorithm into any budget that holds one output row's band. Transposed
//! convolutions run as one forward launch per filter phase. Targets without matrix cores
//! keep the workspace-free NCHW FMA kernel (`igemm_*`) for f16/bf16.

use super::{Epilogue, check_operands, kernel_params};
use crate::buffer::DeviceArray;
use crate::conv::tiles::IgemmKernel;
use crate::device::RocmDevice;
use crate::error::{Result, RocmError};
use crate::launch::{Arg, Grid, Kernel, launch, launch_with_shared};
use crate::ops::kernel_dtype;
use candle_core::DType;
use conv_engine::{Chunk, ConvProblem};
use implicit_gemm::ConvKind;
use implicit_gemm::nhwc::{ChunkLayout, NhwcWorkspace, chunk_layout, nhwc_supported};
use kernels::{Conv2dAbi, IgemmMath, IgemmNhwcConfig, MmaVariant, family};
use std::sync::Arc;

fn layout_of(p: &ConvProblem, chunk: &Chunk) -> Result<ChunkLayout> {
    chunk_layout(p.geometry(), chunk.batch.len(), chunk.rows.clone(), p.dtype().size_in_bytes())
        .map_err(|e| RocmError::op("conv", e.to_string()))
}

/// The NHWC implicit-GEMM kernel of a configuration, fragment variant and dtype.
fn nhwc_kernel(variant: MmaVariant, config: &IgemmNhwcConfig, kd: kernels::DType) -> Result<Kernel> {
    let family = match (config.math, variant) {
        (IgemmMath::Simt, MmaVariant::Native) => &family::IGEMM_SIMT,
        (IgemmMath::Mma, MmaVariant::Native) if config.nvidia_only => &family::IGEMM_MMA_NV,
        (IgemmMath::Mma, MmaVariant::Native) => &family::IGEMM_MMA,
        (IgemmMath::Mma, MmaVariant::EmulateGfx11) => &family::IGEMM_EMU11,
        (IgemmMath::Mma, MmaVariant::EmulateGfx12) => &family::IGEMM_EMU12,
        (IgemmMath::Simt, _) => {
            return Err(RocmError::op("conv", format!("the FMA kernel {} has no {variant:?} variant", config.name)));
        }
    };
    Kernel::new(family, config.name, kd)
}

/// Whether `arch` compiles igemm_mma.hip's cp.async pipeline (`RV_MMA_HAVE_NV`: NVIDIA sm_80
/// and later), whose shared memory is dynamic and passed at launch.
fn cp_async_target(arch: &str) -> bool {
    arch.strip_prefix("sm_")
        .and_then(|v| v.trim_end_matches(|c: char| c.is_ascii_alphabetic()).parse::<u32>().ok())
        .is_some_and(|v| v >= 80)
}

/// Workspace bytes of the NHWC path for a chunk (band + packed weights + partials).
pub fn nhwc_workspace_bytes(p: &ConvProblem, chunk: &Chunk, splits: u32) -> Option<usize> {
    let layout = layout_of(p, chunk).ok()?;
    Some(NhwcWorkspace::of(p.geometry(), &layout, chunk.batch.len(), splits).bytes(p.dtype().size_in_bytes()))
}

/// Workspace bytes of `kernel` for a chunk.
pub(super) fn workspace_bytes(kernel: &IgemmKernel, p: &ConvProblem, chunk: &Chunk) -> Option<usize> {
    match *kernel {
        IgemmKernel::Nchw(_) => Some(0),
        IgemmKernel::Nhwc { splits, .. } => nhwc_workspace_bytes(p, chunk, splits),
    }
}

/// Runs every chunk of an `ImplicitGemm` plan with its kernel into `out`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    kernel: IgemmKernel,
    chunks: &[Chunk],
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
    out: &DeviceArray,
) -> Result<()> {
    match kernel {
        IgemmKernel::Nhwc { .. } => {
            for chunk in chunks {
                run_igemm_chunk(device, p, chunk, kernel, x, w, bias, epilogue, out)?;
            }
            Ok(())
        }
        IgemmKernel::Nchw(cfg) => {
            let g = p.geometry();
            let dtype = p.dtype().to_candle();
            let family = if g.kind == ConvKind::Transposed { &family::IGEMM_TCONV } else { &family::IGEMM_FWD };
            let params = kernel_params(g, g.batch);
            launch(
                device,
                &Kernel::new(family, cfg.name, kernel_dtype(dtype)?)?,
                Grid::Explicit { grid: cfg.grid(&params), block: (cfg.threads(), 1, 1) },
                &mut [
                    Arg::Conv(params),
                    Arg::Ptr(x.ptr_at(0)),
                    Arg::Ptr(w.ptr_at(0)),
                    Arg::Ptr(bias.map_or(0, |b| b.ptr_at(0))),
                    Arg::Ptr(out.ptr_at(0)),
                ],
            )
        }
    }
}

/// Runs `p` whole with an explicit implicit-GEMM kernel -- any configuration, the gfx11 /
/// gfx12 emulations, any split-K factor -- for the benchmarks and tests. The workspace is
/// allocated through the device's allocator (counted against its budget) and freed on return.
pub fn run_implicit_gemm(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    kernel: IgemmKernel,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
) -> Result<DeviceArray> {
    let out = DeviceArray::alloc(device, p.dtype().to_candle(), p.geometry().output_len())?;
    run_implicit_gemm_into(device, p, kernel, x, w, bias, epilogue, &out)?;
    Ok(out)
}

/// [`run_implicit_gemm`] into an existing output array (tests poison it first).
#[allow(clippy::too_many_arguments)]
pub fn run_implicit_gemm_into(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    kernel: IgemmKernel,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
    out: &DeviceArray,
) -> Result<()> {
    check_operands(p, x, w, bias, epilogue, Some(out))?;
    if !nhwc_supported(p.geometry()) {
        return Err(RocmError::op("conv", format!("the NHWC implicit-GEMM kernels do not support {p}")));
    }
    let chunk = Chunk { batch: 0..p.geometry().batch, rows: 0..p.geometry().out_hw()[0] };
    run_igemm_chunk(device, p, &chunk, kernel, x, w, bias, epilogue, out)
}

/// One chunk (images `chunk.batch`, output rows `chunk.rows`) on the NHWC kernels: pack the
/// input band, then per phase pack its weights, run the GEMM, and reduce split-K partials.
#[allow(clippy::too_many_arguments)]
fn run_igemm_chunk(
    device: &Arc<RocmDevice>,
    p: &ConvProblem,
    chunk: &Chunk,
    kernel: IgemmKernel,
    x: &DeviceArray,
    w: &DeviceArray,
    bias: Option<&DeviceArray>,
    epilogue: Epilogue<'_>,
    out: &DeviceArray,
) -> Result<()> {
    let IgemmKernel::Nhwc { variant, config, splits } = kernel else {
        return Err(RocmError::op("conv", "run_igemm_chunk needs an NHWC kernel"));
    };
    let g = p.geometry();
    let dtype = p.dtype().to_candle();
    let kd = kernel_dtype(dtype)?;
    let gemm = nhwc_kernel(variant, config, kd)?;
    let shared = config.dynamic_shared_bytes(cp_async_target(device.jit().arch()));
    if variant != MmaVariant::Native && device.info().warp_size != 32 {
        return Err(RocmError::op(
            "conv",
            format!("the RDNA WMMA emulations need 32-lane waves; this device has {}", device.info().warp_size),
        ));
    }
    let layout = layout_of(p, chunk)?;
    let nb = chunk.batch.len();
    let splits = splits.max(1);
    let ws = NhwcWorkspace::of(g, &layout, nb, splits);
    let band = DeviceArray::alloc(device, dtype, ws.band)?;
    let packed = DeviceArray::alloc(device, dtype, ws.weights)?;
    let partial = if ws.partials > 0 { Some(DeviceArray::alloc(device, DType::F32, ws.partials)?) } else { None };
    let [h, wd] = g.in_size;
    let [pp, qq] = g.out_hw();
    let (img_in, img_out) = (g.in_channels * h * wd, g.out_channels * pp * qq);
    let cgp = layout.cgp;
    let ct = g.groups * cgp;
    if !layout.band.is_empty() {
        let full = Conv2dAbi {
            n: nb as i32,
            c: g.in_channels as i32,
            h: h as i32,
            w: wd as i32,
            groups: g.groups as i32,
            ..Default::default()
        };
        let npix = layout.band.len() * wd;
        launch(
            device,
            &Kernel::new(&family::IGEMM_PACK_INPUT, "", kd)?,
            Grid::Explicit { grid: (npix.div_ceil(64) as u32, ct.div_ceil(64) as u32, nb as u32), block: (32, 8, 1) },
            &mut [
                Arg::Conv(full),
                Arg::I32(layout.band.start as i32),
                Arg::I32(layout.band.len() as i32),
                Arg::I32(cgp as i32),
                Arg::Ptr(x.ptr_at(chunk.batch.start * img_in)),
                Arg::Ptr(band.ptr_at(0)),
            ],
        )?;
    }
    let wgeom = Conv2dAbi {
        k: g.out_channels as i32,
        c: g.in_channels as i32,
        r: g.kernel[0] as i32,
        s: g.kernel[1] as i32,
        groups: g.groups as i32,
        ..Default::default()
    };
    let transposed = i32::from(g.kind == ConvKind::Transposed);
    let kg = g.out_channels_per_group();
    let ep = super::epilogue_abi(&epilogue);
    let bias_ptr = bias.map_or(0, |b| b.ptr_at(0));
    let part_ptr = partial.as_ref().map_or(0, |a| a.ptr_at(0));
    let mut woff = 0;
    for ph in &layout.phases {
        let t = &ph.taps;
        let wlen = g.out_channels * t.nr * t.ns * cgp;
        if wlen > 0 {
            launch(
                device,
                &Kernel::new(&family::IGEMM_PACK_WEIGHT, "", kd)?,
                Grid::Elements(wlen),
                &mut [
                    Arg::Conv(wgeom),
                    Arg::I32(cgp as i32),
                    Arg::I32(transposed),
                    Arg::I32(t.r0 as i32),
                    Arg::I32(t.rstep as i32),
                    Arg::I32(t.nr as i32),
                    Arg::I32(t.s0 as i32),
                    Arg::I32(t.sstep as i32),
                    Arg::I32(t.ns as i32),
                    Arg::Ptr(w.ptr_at(0)),
                    Arg::Ptr(packed.ptr_at(woff)),
                ],
            )?;
        }
        let out_off = chunk.batch.start * img_out + ph.out_offset;
        let res_ptr = epilogue.residual.map_or(0, |r| r.ptr_at(out_off));
        let [os_n, os_c, os_y, os_x] = ph.view;
        launch_with_shared(
            device,
            &gemm,
            shared,
            Grid::Explicit {
                grid: config.grid(ph.m as u64, kg as u64, g.groups as u32, splits),
                block: (config.threads(), 1, 1),
            },
            &mut [
                Arg::Conv(ph.params),
                Arg::I32(cgp as i32),
                Arg::I32(splits as i32),
                Arg::Epilogue(ep),
                Arg::I64(os_n),
                Arg::I64(os_c),
                Arg::I64(os_y),
                Arg::I64(os_x),
                Arg::Ptr(band.ptr_at(0)),
                Arg::Ptr(packed.ptr_at(woff)),
                Arg::Ptr(bias_ptr),
                Arg::Ptr(res_ptr),
                Arg::Ptr(part_ptr),
                Arg::Ptr(out.ptr_at(out_off)),
            ],
        )?;
        if splits > 1 {
            launch(
                device,
                &Kernel::new(&family::IGEMM_SPLITK, "", kd)?,
                Grid::Elements(g.out_channels * ph.m.div_ceil(4)),
                &mut [
                    Arg::Conv(ph.params),
                    Arg::I32(splits as i32),
                    Arg::Epilogue(ep),
                    Arg::I64(os_n),
                    Arg::I64(os_c),
                    Arg::I64(os_y),
                    Arg::I64(os_x),
                    Arg::Ptr(part_ptr),
                    Arg::Ptr(bias_ptr),
                    Arg::Ptr(res_ptr),
                    Arg::Ptr(out.ptr_at(out_off)),
                ],
            )?;
        }
        woff += wlen;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::cp_async_target;

    #[test]
    fn only_ampere_and_later_nvidia_take_dynamic_shared_memory() {
        assert!(cp_async_target("sm_90") && cp_async_target("sm_90a") && cp_async_target("sm_80"));
        assert!(!cp_async_target("sm_75") && !cp_async_target("gfx1100") && !cp_async_target("gfx942:sramecc+:xnack-"));
    }
}
