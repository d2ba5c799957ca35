//! The 6×16 f32 register-blocked GEMM microkernels.
//!
//! `C[6][16] (+)= Σ_t A[t][0..6] ⊗ B[t][0..16]` over packed panels: `a` holds 6 values per
//! reduction step, `b` 16. Six rows by two 8-lane vectors is 12 accumulators, which with
//! two B vectors and one broadcast fits the 16 AVX2 registers (the BLIS Zen shape).

/// Rows of a microkernel tile.
pub const MR: usize = 6;
/// Columns of a microkernel tile.
pub const NR: usize = 16;

/// Which microkernel runs, chosen once from the CPU's features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MicroKernel {
    /// AVX2 + FMA (x86-64-v3): every x86 CPU since Haswell / Zen.
    Avx2Fma,
    /// Plain Rust that the compiler vectorises for the baseline target; any CPU.
    Portable,
}

impl MicroKernel {
    /// The fastest kernel this CPU supports.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
                return MicroKernel::Avx2Fma;
            }
        }
        MicroKernel::Portable
    }

    /// Whether this kernel can run on the current CPU.
    pub fn is_supported(self) -> bool {
        match self {
            MicroKernel::Portable => true,
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx2Fma => {
                std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(not(target_arch = "x86_64"))]
            MicroKernel::Avx2Fma => false,
        }
    }

    /// Runs the kernel over `kc` reduction steps.
    ///
    /// # Safety
    /// `a` must hold `kc·MR` floats, `b` `kc·NR` floats, and `c` must address a 6×16 tile
    /// with row stride `ldc` that no other thread touches; the kernel must be supported.
    #[inline]
    pub unsafe fn run(self, kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        match self {
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx2Fma => unsafe { avx2::kernel_6x16(kc, a, b, c, ldc, accumulate) },
            #[cfg(not(target_arch = "x86_64"))]
            MicroKernel::Avx2Fma => unreachable!("AVX2 kernel selected on a non-x86 target"),
            MicroKernel::Portable => unsafe { portable_6x16(kc, a, b, c, ldc, accumulate) },
        }
    }
}

unsafe fn portable_6x16(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
    let a = unsafe { std::slice::from_raw_parts(a, kc * MR) };
    let b = unsafe { std::slice::from_raw_parts(b, kc * NR) };
    let mut acc = [[0f32; NR]; MR];
    for (av, bv) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        for i in 0..MR {
            for j in 0..NR {
                acc[i][j] = av[i].mul_add(bv[j], acc[i][j]);
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        let dst = unsafe { std::slice::from_raw_parts_mut(c.add(i * ldc), NR) };
        if accumulate {
            for (d, v) in dst.iter_mut().zip(row) {
                *d += v;
            }
        } else {
            dst.copy_from_slice(row);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::{MR, NR};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn kernel_6x16(
        kc: usize,
        mut a: *const f32,
        mut b: *const f32,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        unsafe {
            let mut c00 = _mm256_setzero_ps();
            let mut c01 = _mm256_setzero_ps();
            let mut c10 = _mm256_setzero_ps();
            let mut c11 = _mm256_setzero_ps();
            let mut c20 = _mm256_setzero_ps();
            let mut c21 = _mm256_setzero_ps();
            let mut c30 = _mm256_setzero_ps();
            let mut c31 = _mm256_setzero_ps();
            let mut c40 = _mm256_setzero_ps();
            let mut c41 = _mm256_setzero_ps();
            let mut c50 = _mm256_setzero_ps();
            let mut c51 = _mm256_setzero_ps();
            macro_rules! step {
                () => {{
                    let b0 = _mm256_loadu_ps(b);
                    let b1 = _mm256_loadu_ps(b.add(8));
                    let a0 = _mm256_broadcast_ss(&*a);
                    c00 = _mm256_fmadd_ps(a0, b0, c00);
                    c01 = _mm256_fmadd_ps(a0, b1, c01);
                    let a1 = _mm256_broadcast_ss(&*a.add(1));
                    c10 = _mm256_fmadd_ps(a1, b0, c10);
                    c11 = _mm256_fmadd_ps(a1, b1, c11);
                    let a2 = _mm256_broadcast_ss(&*a.add(2));
                    c20 = _mm256_fmadd_ps(a2, b0, c20);
                    c21 = _mm256_fmadd_ps(a2, b1, c21);
                    let a3 = _mm256_broadcast_ss(&*a.add(3));
                    c30 = _mm256_fmadd_ps(a3, b0, c30);
                    c31 = _mm256_fmadd_ps(a3, b1, c31);
                    let a4 = _mm256_broadcast_ss(&*a.add(4));
                    c40 = _mm256_fmadd_ps(a4, b0, c40);
                    c41 = _mm256_fmadd_ps(a4, b1, c41);
                    let a5 = _mm256_broadcast_ss(&*a.add(5));
                    c50 = _mm256_fmadd_ps(a5, b0, c50);
                    c51 = _mm256_fmadd_ps(a5, b1, c51);
                    a = a.add(MR);
                    b = b.add(NR);
                }};
            }
            let mut t = 0;
            while t + 4 <= kc {
                step!();
                step!();
                step!();
                step!();
                t += 4;
            }
            while t < kc {
                step!();
                t += 1;
            }
            macro_rules! store_row {
                ($row:expr, $lo:expr, $hi:expr) => {{
                    let p = c.add($row * ldc);
                    if accumulate {
                        _mm256_storeu_ps(p, _mm256_add_ps(_mm256_loadu_ps(p), $lo));
                        _mm256_storeu_ps(p.add(8), _mm256_add_ps(_mm256_loadu_ps(p.add(8)), $hi));
                    } else {
                        _mm256_storeu_ps(p, $lo);
                        _mm256_storeu_ps(p.add(8), $hi);
                    }
                }};
            }
            store_row!(0, c00, c01);
            store_row!(1, c10, c11);
            store_row!(2, c20, c21);
            store_row!(3, c30, c31);
            store_row!(4, c40, c41);
            store_row!(5, c50, c51);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn check(kernel: MicroKernel, kc: usize, accumulate: bool, seed: u64) {
        let mut rng = StdRng::seed_from_u64(seed);
        let a: Vec<f32> = (0..kc * MR).map(|_| rng.random_range(-1.0..1.0)).collect();
        let b: Vec<f32> = (0..kc * NR).map(|_| rng.random_range(-1.0..1.0)).collect();
        let ldc = NR + 5;
        let init: Vec<f32> = (0..MR * ldc).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut c = init.clone();
        unsafe { kernel.run(kc, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), ldc, accumulate) };
        for i in 0..MR {
            for j in 0..ldc {
                let got = c[i * ldc + j];
                if j >= NR {
                    assert_eq!(got, init[i * ldc + j], "wrote outside the tile at ({i},{j})");
                    continue;
                }
                let mut want: f64 = if accumulate { init[i * ldc + j] as f64 } else { 0.0 };
                for t in 0..kc {
                    want += a[t * MR + i] as f64 * b[t * NR + j] as f64;
                }
                let tol = 1e-5 * (kc as f64).sqrt().max(1.0) + 1e-6;
                assert!((got as f64 - want).abs() <= tol, "{kernel:?} kc={kc} ({i},{j}): {got} vs {want}");
            }
        }
    }

    #[test]
    fn kernels_match_f64_reference() {
        for kernel in [MicroKernel::Portable, MicroKernel::Avx2Fma] {
            if !kernel.is_supported() {
                eprintln!("skipping {kernel:?}: not supported by this CPU");
                continue;
            }
            for (seed, kc) in [0usize, 1, 3, 4, 7, 64, 129].into_iter().enumerate() {
                check(kernel, kc, false, seed as u64);
                check(kernel, kc, true, 100 + seed as u64);
            }
        }
    }
}

#[cfg(test)]
mod speed {
    use super::*;
    #[test]
    #[ignore = "prints microkernel throughput; run by hand"]
    fn microkernel_throughput() {
        let kc = 256;
        let a = vec![0.5f32; kc * MR * 24];
        let b = vec![0.25f32; kc * NR * 16];
        let mut c = vec![0f32; MR * 24 * 256];
        let k = MicroKernel::detect();
        let reps = 2000;
        let t = std::time::Instant::now();
        for _ in 0..reps {
            for jr in 0..16 {
                for ir in 0..24 {
                    unsafe {
                        k.run(
                            kc,
                            a[ir * kc * MR..].as_ptr(),
                            b[jr * kc * NR..].as_ptr(),
                            c[ir * MR * 256 + jr * NR..].as_mut_ptr(),
                            256,
                            true,
                        )
                    };
                }
            }
        }
        let s = t.elapsed().as_secs_f64();
        let flops = reps as f64 * 16.0 * 24.0 * (kc * MR * NR * 2) as f64;
        println!("{:?}: {:.1} GFLOP/s single thread", k, flops / s / 1e9);
    }
}
