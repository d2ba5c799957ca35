//! `C = A · B` over operands packed in a microkernel's panels, for the CPU executors that
//! pack their own operands (Winograd's batched GEMMs, `Gemm1x1`'s transposed and
//! space-to-depth forms): A in `mr`-row panels `a[panel][k][mr]`, B in `nr`-column panels
//! `b[panel][k][nr]` (`mr × nr` the kernel's tile: 6×16, or AVX-512's 14×32), swept in
//! blocks that keep an `MC × KC` block of A in L2 while a `KC × nr` panel of B sits in L1.
//!
//! Each output is summed over `k` in one fixed order (the `KC` blocks in turn, each an FMA
//! chain in the microkernel) whatever `m`, `n` or the tile's place: its rounding depends on
//! its own `k` values and the kernel alone, which lossless tiling needs
//! (`ConvRounding::SizeIndependent`). `KC` is the implicit GEMM's (`CpuTiling::for_gemm`),
//! so that both sum an output alike.

use crate::implicit_gemm::MicroKernel;

/// Reduction rows per microkernel call: a `KC × nr` panel of B (16 KiB) stays in L1. 256
/// for the 6×16 tile, 128 for the 14×32 one.
pub(super) const fn kc(kernel: MicroKernel) -> usize {
    4096 / kernel.nr()
}

/// Rows of A per block (a multiple of the tile's `mr`): an `MC × KC` block (≤ 154 KiB)
/// stays in L2 while it sweeps the panels of B.
pub(super) const fn mc(kernel: MicroKernel) -> usize {
    144usize.div_ceil(kernel.mr()) * kernel.mr()
}

/// `C = A · B` for `m_panels` `mr`-row panels of A and `n_panels` `nr`-column panels of B
/// (the tile of `kernel`), both `k` deep; tile `(ir, jp)` (rows `mr·ir..`, columns
/// `nr·jp..`) is written at `c(ir, jp)` with row stride `ldc`.
///
/// # Safety
/// `kernel` is supported by this CPU; for every `ir < m_panels`, `jp < n_panels`,
/// `c(ir, jp)` addresses an `mr × nr` tile with row stride `ldc` that nothing else reads
/// or writes meanwhile.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm(
    kernel: MicroKernel,
    k: usize,
    a: &[f32],
    m_panels: usize,
    b: &[f32],
    n_panels: usize,
    ldc: usize,
    c: impl Fn(usize, usize) -> *mut f32,
) {
    // SAFETY: the caller's contract.
    unsafe { gemm_with(kernel, k, a, m_panels, b, n_panels, ldc, c, |_| (std::ptr::null(), 0)) }
}

/// [`gemm`], calling `before(capacity)` ahead of each microkernel call ([`steps`] of
/// them): room for the caller's own work between the calls, and the cache lines it
/// returns (`(start, lines)`, at most `capacity` lines) are fetched during the call
/// ([`MicroKernel::run_prefetching`]).
///
/// # Safety
/// As [`gemm`]; each range `before` returns lies in one allocation.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm_with(
    kernel: MicroKernel,
    k: usize,
    a: &[f32],
    m_panels: usize,
    b: &[f32],
    n_panels: usize,
    ldc: usize,
    c: impl Fn(usize, usize) -> *mut f32,
    mut before: impl FnMut(usize) -> (*const u8, usize),
) {
    let (mr, nr) = (kernel.mr(), kernel.nr());
    assert!(a.len() >= m_panels * k * mr, "A holds {} floats, its panels need {}", a.len(), m_panels * k * mr);
    assert!(b.len() >= n_panels * k * nr, "B holds {} floats, its panels need {}", b.len(), n_panels * k * nr);
    let mc_panels = mc(kernel) / mr;
    for mb in 0..m_panels.div_ceil(mc_panels) {
        let panels_m = mb * mc_panels..((mb + 1) * mc_panels).min(m_panels);
        let mut kb = 0;
        while kb < k {
            let kcb = kc(kernel).min(k - kb);
            for jp in 0..n_panels {
                let bp = b[jp * k * nr + kb * nr..].as_ptr();
                for ir in panels_m.clone() {
                    let ap = a[ir * k * mr + kb * mr..].as_ptr();
                    let (pf, lines) = before(MicroKernel::prefetch_capacity(kcb));
                    // SAFETY: the panels hold kcb·mr and kcb·nr floats from these offsets
                    // (asserted above); the tile is the caller's to write and the lines
                    // lie in one allocation (contract).
                    unsafe { kernel.run_prefetching(kcb, ap, bp, c(ir, jp), ldc, kb > 0, pf, lines) };
                }
            }
            kb += kcb;
        }
    }
}

/// How many times [`gemm_with`] calls `before` for these operands.
pub(super) fn steps(kernel: MicroKernel, k: usize, m_panels: usize, n_panels: usize) -> usize {
    m_panels * k.div_ceil(kc(kernel)) * n_panels
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// Against an f64 product, with every microkernel this CPU has, on sizes that cross the
    /// `KC` and `MC` blocks; and the same output of a narrower B is the same bits (the
    /// size-independent rounding the tiler relies on).
    #[test]
    fn packed_gemm_matches_f64_and_rounds_independently_of_the_width() {
        for (mk, why) in MicroKernel::all_unsupported() {
            test_support::skipped(format!("{mk:?}: this CPU lacks {why}"));
        }
        let mut rng = StdRng::seed_from_u64(0x9e);
        for kernel in MicroKernel::all_supported() {
            let (mr, nr) = (kernel.mr(), kernel.nr());
            for (m_panels, n_panels, k) in [(1, 1, 1), (3, 2, 37), (27, 3, 300), (2, 5, 513)] {
                let a: Vec<f32> = (0..m_panels * k * mr).map(|_| rng.random_range(-1.0..1.0)).collect();
                let b: Vec<f32> = (0..n_panels * k * nr).map(|_| rng.random_range(-1.0..1.0)).collect();
                let ldc = n_panels * nr;
                let run = |n_panels: usize, b: &[f32]| {
                    let ldc = n_panels * nr;
                    let mut c = vec![f32::NAN; m_panels * mr * ldc];
                    let cp = c.as_mut_ptr();
                    // SAFETY: the kernel is supported; each tile lies in `c`, written once.
                    unsafe {
                        gemm(kernel, k, &a, m_panels, b, n_panels, ldc, |ir, jp| cp.add(ir * mr * ldc + jp * nr))
                    };
                    c
                };
                let c = run(n_panels, &b);
                for row in 0..m_panels * mr {
                    for col in 0..ldc {
                        let (ir, i, jp, j) = (row / mr, row % mr, col / nr, col % nr);
                        let want: f64 =
                            (0..k).map(|kk| a[(ir * k + kk) * mr + i] as f64 * b[(jp * k + kk) * nr + j] as f64).sum();
                        let got = c[row * ldc + col] as f64;
                        assert!(
                            (got - want).abs() <= 1e-5 * (k as f64).sqrt(),
                            "{kernel:?} {row},{col}: {got} vs {want}"
                        );
                    }
                }
                // The last panel of B alone gives its columns' bits exactly.
                let last = &b[(n_panels - 1) * k * nr..];
                let alone = run(1, last);
                for row in 0..m_panels * mr {
                    for j in 0..nr {
                        let whole = c[row * ldc + (n_panels - 1) * nr + j];
                        assert_eq!(alone[row * nr + j].to_bits(), whole.to_bits(), "{kernel:?} row {row}");
                    }
                }
            }
        }
    }
}
