//! The CPU cost model: each algorithm's sustained GFLOP/s per thread, measured, and the
//! share of it a problem's shape keeps. Only the ratios matter to the dispatcher.

use conv_engine::dispatch::Algorithm;
use conv_engine::problem::ConvDType;

/// Winograd F(2x2, 3x3)'s rate in GFLOP/s per thread of the direct convolution's FLOP
/// count (it does 2.25x fewer multiplies, but its transforms cost per channel, so it pays
/// off only with enough channels). f32 from `benches/winograd_vs_implicit_gemm.rs`
/// (ImplicitGemm, F(2x2) and F(4x4) back to back, best of alternating rounds, one 3x3 pad-1
/// image; 2026-12-04, 2-core AVX-512 AMD EPYC VM running the AVX2 microkernel, load
/// average 3-5 from other builds), F(2x2) / ImplicitGemm: 0.69-0.77 below 16 channels
/// (Real-CUGAN's 3-channel layers), 1.06-1.27 at 32, 1.24-1.47 at 64, 1.44-1.83 at 128,
/// 1.35-2.13 at 256-512; scaled to ImplicitGemm's 55. f16 from the 2026-12-03 run
/// (0.9-0.98 at 32, 0.99-1.28 at 64 and 128, 1.21-1.43 at 256 and up; ImplicitGemm 45).
///
/// Below 16 channels (a 3-channel input or output) Winograd's transforms dominate: with
/// the AVX-512 kernels (2-core Zen 4, idle, 2026-12-04, `cargo bench --bench conv --
/// --sizes 256 --only ... --algorithm ...`, docs/measurements/2026-12-04-cpu-conv.md)
/// F(4x4) ran 3->32 at 32-38 GFLOP/s and 128->3 at 33, against the implicit GEMM's 72 and
/// 25 and the vectorised direct conv's 55 and 49; its rates there are set to those
/// figures per thread (F(2x2) and f16 scaled alike), where they were 40-45, which made the
/// dispatcher choose Winograd for both at half the speed.
pub(super) fn winograd_gflops_per_thread(dtype: ConvDType, channels: usize) -> f64 {
    let f32_rate = match channels {
        // Below 16 channels: see above.
        0..=15 => 14.0,
        16..=32 => 65.0,
        33..=64 => 72.0,
        65..=128 => 85.0,
        _ => 95.0,
    };
    let half_rate = match channels {
        0..=15 => 10.5,
        16..=32 => 38.0,
        33..=64 => 46.0,
        65..=128 => 50.0,
        _ => 55.0,
    };
    if dtype == ConvDType::F32 { f32_rate } else { half_rate }
}

/// Winograd F(4x4, 3x3)'s rate, as [`winograd_gflops_per_thread`] (same runs). F(4x4) /
/// ImplicitGemm: 0.72-0.87 below 16 channels, 1.33-1.37 at 32, 1.35-1.92 at 64, 1.45-2.51
/// at 128, 1.38-1.96 at 256; at 512 channels on 32² 0.62 (its transformed weights, 38 MiB
/// made per run, cost more than the GEMMs save on so few pixels; not modelled, so that a
/// layer's choice depends on its channels only: see examples-sr's `cpu_device`). Above 128
/// channels F(2x2) was as fast or faster, and is chosen there. f16: F(2x2)'s rate times
/// F(4x4)'s f32 gain over F(2x2), not measured separately.
pub(super) fn winograd_f4_gflops_per_thread(dtype: ConvDType, channels: usize) -> f64 {
    let f32_rate = match channels {
        0..=15 => 16.0,
        16..=32 => 74.0,
        33..=64 => 88.0,
        65..=128 => 100.0,
        _ => 90.0,
    };
    if dtype == ConvDType::F32 {
        f32_rate
    } else {
        f32_rate / winograd_gflops_per_thread(ConvDType::F32, channels) * winograd_gflops_per_thread(dtype, channels)
    }
}

/// Sustained GFLOP/s per thread of each CPU algorithm on the VAE-decoder shapes, measured
/// on a 2-core Zen 3 (AVX2/FMA) with `cargo bench --bench conv` (docs/measurements/).
/// Only their ratios matter to the dispatcher. `channels` is min(C, K).
pub(super) fn gflops_per_thread(alg: Algorithm, dtype: ConvDType, channels: usize) -> f64 {
    match (alg, dtype) {
        (Algorithm::ImplicitGemm, ConvDType::F32) => 55.0,
        (Algorithm::ImplicitGemm, _) => 45.0,
        // 1.13-1.26x ImplicitGemm's speed on the VAE's 1x1 shapes (f32, same process,
        // 2026-12-03), so above ImplicitGemm's 3x3 average: it only competes on 1x1.
        (Algorithm::Gemm1x1, ConvDType::F32) => 62.0,
        (Algorithm::Gemm1x1, _) => 15.0,
        (Algorithm::Im2colGemm, ConvDType::F32) => 25.0,
        (Algorithm::Im2colGemm, _) => 6.0,
        (Algorithm::Winograd, _) => winograd_gflops_per_thread(dtype, channels),
        (Algorithm::Direct, _) => 0.8,
        (Algorithm::Miopen, _) => 0.0,
    }
}

/// The share of a GEMM-based kernel's rate (measured on the VAE's wide layers) that a
/// problem keeps: its `m` output channels padded to the tile's `mr` rows, with every
/// packed element reused only `m` times (a narrow layer, e.g. conv_out 128→3, is mostly
/// padding and packing), and a reduction of `k` that spends more on the accumulator tile
/// than on FMAs when short (a 3-channel input). About 1 on the VAE's 128–512-channel
/// layers; the 16s are the tile set-up cost in reduction steps, fitted to the A/B of
/// 2026-12-04 (docs/measurements/2026-12-04-cpu-kernels.md).
pub(super) fn gemm_shape_efficiency(m: usize, mr: usize, k: usize) -> f64 {
    let m_pad = m.div_ceil(mr) * mr;
    let rows = (1.15 * m as f64 / (m_pad + 16) as f64).min(1.0);
    let depth = (1.15 * k as f64 / (k + 16) as f64).min(1.0);
    rows * depth
}

/// The vectorised direct convolution's GFLOP/s per thread (direct.rs): it reads the input
/// in place, so it does not depend on the channel counts the way the GEMMs do. On the
/// 2-core Zen 4 (shared, 2026-12-04) it ran conv_out 128→3 at 2.5x and 3→32 at 1.9x the
/// implicit GEMM's speed in the same run; half-precision strips are staged (widened).
pub(super) fn direct_vectorised_gflops_per_thread(dtype: ConvDType) -> f64 {
    if dtype == ConvDType::F32 { 30.0 } else { 25.0 }
}

/// The space-to-depth GEMM's GFLOP/s per thread (s2d_gemm.rs, before its shape factor):
/// the implicit GEMM's rate times its gain on the layers it runs. On the 2-core AVX-512
/// Xeon (2026-12-07, `realcugan_layers`, best of alternating rounds, both on the 14x32
/// kernel) Real-CUGAN's 2x2 stride-2 layers ran 1.6x (64 channels) and 1.3x (128) the
/// implicit GEMM's speed; the smaller gain is taken.
pub(super) fn s2d_gflops_per_thread(dtype: ConvDType) -> f64 {
    gflops_per_thread(Algorithm::ImplicitGemm, dtype, 0) * 1.3
}
