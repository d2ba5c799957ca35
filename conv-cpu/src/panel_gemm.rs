//! `C = A · B` over operands packed in the 6×16 microkernel's panels, for the CPU executors
//! that pack their own operands (Winograd's batched GEMMs, `Gemm1x1`'s transposed form): A
//! in 6-row panels `a[panel][k][6]`, B in 16-column panels `b[panel][k][16]`, swept in
//! blocks that keep an `MC × KC` block of A in L2 while a `KC × 16` panel of B sits in L1.
//!
//! Each output is summed over `k` in one fixed order (the `KC` blocks in turn, each an FMA
//! chain in the microkernel) whatever `m`, `n` or the tile's place: its rounding depends on
//! its own `k` values alone, which lossless tiling needs (`ConvRounding::SizeIndependent`).

use crate::implicit_gemm::{MR, MicroKernel, NR};

/// Reduction rows per microkernel call: a `KC × 16` panel of B (16 KiB) stays in L1.
pub(super) const KC: usize = 256;
/// Rows of A per block (a multiple of [`MR`]): an `MC × KC` block (144 KiB) stays in L2
/// while it sweeps the panels of B.
pub(super) const MC: usize = 144;

/// `C = A · B` for `m_panels` 6-row panels of A and `n_panels` 16-column panels of B, both
/// `k` deep; tile `(ir, jp)` (rows `6·ir..`, columns `16·jp..`) is written at `c(ir, jp)`
/// with row stride `ldc`.
///
/// # Safety
/// `kernel` is supported by this CPU; for every `ir < m_panels`, `jp < n_panels`,
/// `c(ir, jp)` addresses a 6×16 tile with row stride `ldc` that nothing else reads or
/// writes meanwhile.
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
    assert!(a.len() >= m_panels * k * MR, "A holds {} floats, its panels need {}", a.len(), m_panels * k * MR);
    assert!(b.len() >= n_panels * k * NR, "B holds {} floats, its panels need {}", b.len(), n_panels * k * NR);
    let mc_panels = MC / MR;
    for mb in 0..m_panels.div_ceil(mc_panels) {
        let panels_m = mb * mc_panels..((mb + 1) * mc_panels).min(m_panels);
        let mut kb = 0;
        while kb < k {
            let kcb = KC.min(k - kb);
            for jp in 0..n_panels {
                let bp = b[jp * k * NR + kb * NR..].as_ptr();
                for ir in panels_m.clone() {
                    let ap = a[ir * k * MR + kb * MR..].as_ptr();
                    // SAFETY: the panels hold kcb·6 and kcb·16 floats from these offsets
                    // (asserted above); the tile is the caller's to write (contract).
                    unsafe { kernel.run(kcb, ap, bp, c(ir, jp), ldc, kb > 0) };
                }
            }
            kb += kcb;
        }
    }
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
        for kernel in MicroKernel::all_supported().into_iter().map(MicroKernel::narrow) {
            for (m_panels, n_panels, k) in [(1, 1, 1), (3, 2, 37), (27, 3, 300), (2, 5, 513)] {
                let a: Vec<f32> = (0..m_panels * k * MR).map(|_| rng.random_range(-1.0..1.0)).collect();
                let b: Vec<f32> = (0..n_panels * k * NR).map(|_| rng.random_range(-1.0..1.0)).collect();
                let ldc = n_panels * NR;
                let run = |n_panels: usize, b: &[f32]| {
                    let ldc = n_panels * NR;
                    let mut c = vec![f32::NAN; m_panels * MR * ldc];
                    let cp = c.as_mut_ptr();
                    // SAFETY: the kernel is supported; each tile lies in `c`, written once.
                    unsafe {
                        gemm(kernel, k, &a, m_panels, b, n_panels, ldc, |ir, jp| cp.add(ir * MR * ldc + jp * NR))
                    };
                    c
                };
                let c = run(n_panels, &b);
                for row in 0..m_panels * MR {
                    for col in 0..ldc {
                        let (ir, i, jp, j) = (row / MR, row % MR, col / NR, col % NR);
                        let want: f64 =
                            (0..k).map(|kk| a[(ir * k + kk) * MR + i] as f64 * b[(jp * k + kk) * NR + j] as f64).sum();
                        let got = c[row * ldc + col] as f64;
                        assert!(
                            (got - want).abs() <= 1e-5 * (k as f64).sqrt(),
                            "{kernel:?} {row},{col}: {got} vs {want}"
                        );
                    }
                }
                // The last panel of B alone gives its columns' bits exactly.
                let last = &b[(n_panels - 1) * k * NR..];
                let alone = run(1, last);
                for row in 0..m_panels * MR {
                    for j in 0..NR {
                        let whole = c[row * ldc + (n_panels - 1) * NR + j];
                        assert_eq!(alone[row * NR + j].to_bits(), whole.to_bits(), "{kernel:?} row {row}");
                    }
                }
            }
        }
    }
}
