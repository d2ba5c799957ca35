//! The ROCm device's algorithm catalog: which kernel each algorithm runs a problem with,
//! its exact workspace, and the cost models the dispatcher compares.

use super::tiles::{IgemmKernel, igemm_candidates, igemm_kernel};
use super::{RocmKernel, gemm1x1, igemm, im2col, miopen};
use crate::device::{ArchFamily, RocmDevice};
use conv_engine::{Algorithm, AlgorithmCatalog, Chunk, Chunking, ConvDType, ConvProblem, ConvRounding};
use implicit_gemm::nhwc::padded_channels;
use kernels::{IgemmMath, IgemmNhwcConfig};
use std::sync::Arc;

/// Sustained TFLOP/s assumed per algorithm and dtype class, per family. Only the ratios
/// matter. The NVIDIA test-tier figures are the H200 measurements of the GPU tier
/// (docs/measurements/); the AMD ones are unmeasured placeholders ordered as the hardware
/// suggests (matrix cores through rocBLAS for f16/bf16, FMA for the first igemm).
/// `ImplicitGemm` here is the NCHW FMA kernel; the NHWC kernels have [`igemm_tflops`].
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
        // Not offered on ROCm (CPU only); never reached.
        (Algorithm::Winograd, _, _) => 0.0,
    }
}

/// Device memory bandwidth assumed for the im2col copy, bytes/s.
const BANDWIDTH: f64 = 1.0e12;

/// The ROCm device's convolution algorithms.
pub struct RocmCatalog {
    device: Arc<RocmDevice>,
    rounding: ConvRounding,
    /// [`AlgorithmCatalog::tuning_key`], made once: it hashes every kernel source and
    /// asks rocBLAS its version.
    tuning_key: std::sync::OnceLock<String>,
}

impl RocmCatalog {
    pub fn new(device: Arc<RocmDevice>) -> Self {
        RocmCatalog { device, rounding: ConvRounding::Fastest, tuning_key: std::sync::OnceLock::new() }
    }

    /// The catalog restricted to what `rounding` allows ([`ConvRounding::SizeIndependent`]:
    /// the implicit GEMM without split-K, and direct convolution).
    pub fn with_rounding(mut self, rounding: ConvRounding) -> Self {
        self.rounding = rounding;
        // The key names the rounding (through the device key).
        self.tuning_key = std::sync::OnceLock::new();
        self
    }

    pub fn rounding(&self) -> ConvRounding {
        self.rounding
    }

    /// The kernel an `ImplicitGemm` plan runs `chunk` of `p` with on this device.
    pub fn igemm_kernel(&self, p: &ConvProblem, chunk: &Chunk) -> IgemmKernel {
        let i = self.device.info();
        let split_k = self.rounding == ConvRounding::Fastest;
        igemm_kernel(i.family, i.compute_units, p, chunk, split_k)
    }

    fn make_tuning_key(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for m in kernels::modules() {
            h.update(m.source.as_bytes());
            for (name, text) in m.headers {
                h.update(name.as_bytes());
                h.update(text.as_bytes());
            }
        }
        let sources: String = h.finalize().iter().take(8).map(|b| format!("{b:02x}")).collect();
        let blas = self.device.blas().map(|b| b.version().to_string()).unwrap_or_else(|_| "none".into());
        format!("{}/kernels {sources}/rocblas {blas}", self.device_key())
    }
}

impl AlgorithmCatalog for RocmCatalog {
    type Kernel = RocmKernel;

    fn device_key(&self) -> String {
        let i = self.device.info();
        let rt = crate::runtime::runtime().map(|r| r.runtime_version).unwrap_or_default();
        let rounding = match self.rounding {
            ConvRounding::Fastest => "",
            ConvRounding::SizeIndependent => " (size-independent rounding)",
        };
        format!("rocm/{}/hip {rt}{rounding}", i.arch)
    }

    /// The device key, the kernel sources (every module's text, hashed) and rocBLAS's
    /// version: a new kernel set or library is tuned afresh.
    fn tuning_key(&self) -> String {
        self.tuning_key.get_or_init(|| self.make_tuning_key()).clone()
    }

    fn kernel_candidates(&self, alg: Algorithm, p: &ConvProblem, chunking: Chunking, limit: usize) -> Vec<RocmKernel> {
        if alg != Algorithm::ImplicitGemm {
            return self.kernel(alg, p, chunking, limit).into_iter().collect();
        }
        let i = self.device.info();
        let split_k = self.rounding == ConvRounding::Fastest;
        igemm_candidates(i.family, i.compute_units, p, &chunking.first(p), split_k)
            .into_iter()
            .map(RocmKernel::ImplicitGemm)
            .collect()
    }

    fn algorithms(&self) -> Vec<Algorithm> {
        if self.rounding == ConvRounding::SizeIndependent {
            // rocBLAS and MIOpen choose their kernels (and summation order) by size. Direct
            // convolution sums in another order than the implicit GEMM, so offering it
            // where the GEMM's workspace does not fit made a layer's rounding depend on the
            // budget: the likely cause of the banded 2048²/4096² decodes that differed from
            // the whole ones on the H100 (2026-12-07; their bands left no room for the
            // workspace). The implicit GEMM runs every geometry (its NCHW form without
            // workspace where NHWC does not apply) and chunks to fit; past that, an error.
            return vec![Algorithm::ImplicitGemm];
        }
        #[allow(unused_mut)]
        let mut algs = vec![Algorithm::ImplicitGemm, Algorithm::Im2colGemm, Algorithm::Gemm1x1, Algorithm::Direct];
        #[cfg(feature = "miopen")]
        algs.push(Algorithm::Miopen);
        algs
    }

    /// The implicit GEMM's tile configuration and split-K are chosen for the chunking's
    /// first (largest) chunk and then run every chunk.
    fn kernel(&self, alg: Algorithm, p: &ConvProblem, chunking: Chunking, _limit: usize) -> Option<RocmKernel> {
        match alg {
            Algorithm::ImplicitGemm => Some(RocmKernel::ImplicitGemm(self.igemm_kernel(p, &chunking.first(p)))),
            Algorithm::Im2colGemm => im2col::runs(p, chunking).then_some(RocmKernel::Im2colGemm),
            Algorithm::Gemm1x1 => gemm1x1::applies(p).then_some(RocmKernel::Gemm1x1),
            Algorithm::Direct => Some(RocmKernel::Direct),
            Algorithm::Miopen => cfg!(feature = "miopen").then_some(RocmKernel::Miopen),
            // CPU only: not offered by this catalog.
            Algorithm::Winograd => None,
        }
    }

    fn workspace_bytes(&self, kernel: &RocmKernel, p: &ConvProblem, chunk: &Chunk, limit: usize) -> Option<usize> {
        match kernel {
            RocmKernel::ImplicitGemm(k) => igemm::workspace_bytes(k, p, chunk),
            RocmKernel::Direct | RocmKernel::Gemm1x1 => Some(0),
            RocmKernel::Im2colGemm => im2col::col_elems(p, chunk).map(|e| e * p.dtype().size_in_bytes()),
            RocmKernel::Miopen => miopen::miopen_workspace(&self.device, p, chunk, limit),
        }
    }

    fn estimated_seconds(&self, kernel: &RocmKernel, p: &ConvProblem, chunk: &Chunk) -> f64 {
        let g = p.geometry();
        let share = (chunk.batch.len() * chunk.rows.len()) as f64 / (g.batch * g.out_hw()[0]) as f64;
        let family = self.device.info().family;
        if let RocmKernel::ImplicitGemm(IgemmKernel::Nhwc { config, .. }) = kernel {
            return 10e-6 + nhwc_seconds(family, p, chunk, config, share);
        }
        let compute = g.flops() as f64 * share / (tflops(family, kernel.algorithm(), p.dtype()) * 1e12);
        let copy = match kernel {
            // Writing and reading back the column buffer.
            RocmKernel::Im2colGemm => {
                2.0 * im2col::col_elems(p, chunk).unwrap_or(0) as f64
                    * chunk.batch.len() as f64
                    * p.dtype().size_in_bytes() as f64
                    / BANDWIDTH
            }
            _ => 0.0,
        };
        10e-6 + compute + copy
    }
}

/// Sustained TFLOP/s assumed for the NHWC kernels (of useful work; tile padding is
/// accounted separately). NVIDIA: the H200 sweep ([`IGEMM_SWEEP_FILE`]), 140-222 TFLOP/s f16/bf16 and
/// 27-30 f32 on the 3x3 VAE shapes with packing included. AMD: unmeasured, no hardware is
/// available: ordered as the matrix hardware suggests, above rocBLAS through im2col,
/// which pays the column copy.
fn igemm_tflops(family: ArchFamily, math: IgemmMath) -> f64 {
    match (math, family) {
        (IgemmMath::Mma, ArchFamily::NvidiaTestTier) => 200.0,
        (IgemmMath::Mma, ArchFamily::Cdna) => 250.0,
        (IgemmMath::Mma, ArchFamily::Rdna4) => 120.0,
        (IgemmMath::Mma, ArchFamily::Rdna3) => 90.0,
        (IgemmMath::Mma, _) => 5.0,
        (IgemmMath::Simt, ArchFamily::NvidiaTestTier) => 28.0,
        (IgemmMath::Simt, _) => 12.0,
    }
}

fn nhwc_seconds(family: ArchFamily, p: &ConvProblem, chunk: &Chunk, config: &IgemmNhwcConfig, share: f64) -> f64 {
    let g = p.geometry();
    let es = p.dtype().size_in_bytes();
    let (cg, kg) = (g.in_channels_per_group(), g.out_channels_per_group());
    let cgp = padded_channels(cg, es);
    // Work the tiles really do: output channels rounded up to the tile, channels to the slots.
    let util = (kg as f64 / kg.next_multiple_of(config.bn as usize) as f64) * (cg as f64 / cgp as f64);
    let compute = g.flops() as f64 * share / util / (igemm_tflops(family, config.math) * 1e12);
    // Packing reads the chunk's input band once and writes it once.
    let band_rows = g.in_size[0] as f64 * share;
    let pack =
        2.0 * (chunk.batch.len() as f64 * band_rows * g.in_size[1] as f64 * (g.groups * cgp * es) as f64) / BANDWIDTH;
    compute + pack
}
