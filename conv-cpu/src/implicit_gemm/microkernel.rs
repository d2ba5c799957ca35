//! The f32 register-blocked GEMM microkernels.
//!
//! `C[mr][nr] (+)= Σ_t A[t][0..mr] ⊗ B[t][0..nr]` over packed panels: `a` holds `mr`
//! values per reduction step, `b` `nr`. The tile shape is a property of the kernel
//! ([`MicroKernel::mr`], [`MicroKernel::nr`]) and the packing follows it.
//!
//! Every SIMD kernel is one generic body, [`simd::tile`], instantiated with the vector
//! type (8-lane ymm for AVX2, 16-lane zmm for AVX-512) and the tile shape as parameters:
//! `MR` rows by `NV` vectors is `MR·NV` accumulators, which with `NV` B vectors and one
//! broadcast must fit the register file (16 ymm, 32 zmm).

/// Rows of the 6×16 tile ([`MicroKernel::Portable`], [`MicroKernel::Avx2Fma`],
/// [`MicroKernel::Avx512Narrow`]): the tile of [`MicroKernel::narrow`] kernels, which
/// consumers that pack for a fixed 6×16 tile (Winograd's batched GEMMs) run.
pub const MR: usize = 6;
/// Columns of the 6×16 tile.
pub const NR: usize = 16;

/// Widest tile any kernel has: packing buffers sized for it fit every kernel.
pub const MAX_NR: usize = 32;

/// Which microkernel runs, chosen once from the CPU's features.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MicroKernel {
    /// AVX-512F, 14×32: 28 zmm accumulators. On Zen 4 (512-bit ops on two 256-bit FMA
    /// pipes) the FLOP peak equals AVX2's; the larger tile halves the loads and
    /// broadcasts per FMA and the packed-panel traffic per FLOP.
    Avx512,
    /// AVX-512F, 6×16: one zmm per row; the 6×16 tile for fixed-tile consumers.
    Avx512Narrow,
    /// AVX2 + FMA (x86-64-v3), 6×16: every x86 CPU since Haswell / Zen.
    Avx2Fma,
    /// Plain Rust that the compiler vectorises for the baseline target, 6×16; any CPU.
    Portable,
}

impl MicroKernel {
    /// Every kernel this build knows, fastest first.
    pub const ALL: [MicroKernel; 4] =
        [MicroKernel::Avx512, MicroKernel::Avx512Narrow, MicroKernel::Avx2Fma, MicroKernel::Portable];

    /// The fastest kernel this CPU supports.
    pub fn detect() -> Self {
        Self::ALL.into_iter().find(|k| k.is_supported()).unwrap_or(MicroKernel::Portable)
    }

    /// The fastest supported kernel with the 6×16 tile ([`MR`]×[`NR`]).
    pub fn detect_narrow() -> Self {
        Self::ALL.into_iter().find(|k| k.is_supported() && k.is_narrow()).unwrap_or(MicroKernel::Portable)
    }

    /// This kernel's ISA with the 6×16 tile: itself if it has that tile.
    pub fn narrow(self) -> Self {
        match self {
            MicroKernel::Avx512 => MicroKernel::Avx512Narrow,
            other => other,
        }
    }

    /// Whether the tile is [`MR`]×[`NR`].
    pub fn is_narrow(self) -> bool {
        self.mr() == MR && self.nr() == NR
    }

    /// Every kernel this CPU can run, fastest first.
    pub fn all_supported() -> Vec<Self> {
        Self::ALL.into_iter().filter(|k| k.is_supported()).collect()
    }

    /// Every kernel this CPU cannot run, with the features it lacks.
    pub fn all_unsupported() -> Vec<(Self, &'static str)> {
        Self::ALL.into_iter().filter_map(|k| k.missing_features().map(|why| (k, why))).collect()
    }

    /// Rows of the tile.
    pub const fn mr(self) -> usize {
        match self {
            MicroKernel::Avx512 => 14,
            _ => MR,
        }
    }

    /// Columns of the tile.
    pub const fn nr(self) -> usize {
        match self {
            MicroKernel::Avx512 => 32,
            _ => NR,
        }
    }

    /// `None` if this CPU runs the kernel, else the CPU features it lacks.
    pub fn missing_features(self) -> Option<&'static str> {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                MicroKernel::Portable => None,
                MicroKernel::Avx2Fma => (!(std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")))
                .then_some("avx2 and fma"),
                MicroKernel::Avx512 | MicroKernel::Avx512Narrow => {
                    (!std::arch::is_x86_feature_detected!("avx512f")).then_some("avx512f")
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        match self {
            MicroKernel::Portable => None,
            MicroKernel::Avx2Fma => Some("an x86-64 CPU (avx2 and fma)"),
            MicroKernel::Avx512 | MicroKernel::Avx512Narrow => Some("an x86-64 CPU (avx512f)"),
        }
    }

    /// Whether the kernel is one of the AVX-512 ones (whose callers may then use AVX-512
    /// code of their own once the kernel is known to be supported).
    pub fn is_avx512(self) -> bool {
        matches!(self, MicroKernel::Avx512 | MicroKernel::Avx512Narrow)
    }

    /// Whether this kernel can run on the current CPU.
    pub fn is_supported(self) -> bool {
        self.missing_features().is_none()
    }

    /// Runs the kernel over `kc` reduction steps.
    ///
    /// # Safety
    /// `a` must hold `kc·mr` floats, `b` `kc·nr` floats, and `c` must address an `mr × nr`
    /// tile with row stride `ldc` that no other thread touches; the kernel must be
    /// supported.
    #[inline]
    pub unsafe fn run(self, kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
        match self {
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx512 => unsafe { simd::avx512_14x32(kc, a, b, c, ldc, accumulate) },
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx512Narrow => unsafe { simd::avx512_6x16(kc, a, b, c, ldc, accumulate) },
            #[cfg(target_arch = "x86_64")]
            MicroKernel::Avx2Fma => unsafe { simd::avx2_6x16(kc, a, b, c, ldc, accumulate) },
            #[cfg(not(target_arch = "x86_64"))]
            MicroKernel::Avx512 | MicroKernel::Avx512Narrow | MicroKernel::Avx2Fma => {
                unreachable!("x86 kernel selected on a non-x86 target")
            }
            MicroKernel::Portable => unsafe { portable_6x16(kc, a, b, c, ldc, accumulate) },
        }
    }
}

impl MicroKernel {
    /// Most cache lines [`Self::run_prefetching`] asks for over `kc` reduction steps (two
    /// per four steps, spread among the FMAs).
    pub const fn prefetch_capacity(kc: usize) -> usize {
        kc / 2
    }

    /// [`Self::run`], asking meanwhile for the `lines` cache lines from `pf` (at most
    /// [`Self::prefetch_capacity`]`(kc)`; the portable kernel ignores them): a caller's
    /// next operands fetched from memory while the FMAs run, not in a burst that would
    /// wait for the line-fill buffers. The arithmetic, and so every bit, is `run`'s.
    ///
    /// # Safety
    /// As [`Self::run`]; `pf + 64·i` for `i < lines` lies in one allocation (a hint never
    /// faults, but the address arithmetic must stay in bounds).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn run_prefetching(
        self,
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        pf: *const u8,
        lines: usize,
    ) {
        #[cfg(target_arch = "x86_64")]
        if lines > 0 {
            let pf = simd::Prefetch { at: pf, lines };
            match self {
                MicroKernel::Avx512 => return unsafe { simd::avx512_14x32_pf(kc, a, b, c, ldc, accumulate, pf) },
                MicroKernel::Avx512Narrow => return unsafe { simd::avx512_6x16_pf(kc, a, b, c, ldc, accumulate, pf) },
                MicroKernel::Avx2Fma => return unsafe { simd::avx2_6x16_pf(kc, a, b, c, ldc, accumulate, pf) },
                MicroKernel::Portable => {}
            }
        }
        let _ = (pf, lines);
        unsafe { self.run(kc, a, b, c, ldc, accumulate) }
    }
}

impl std::fmt::Display for MicroKernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?} {}x{}", self.mr(), self.nr())
    }
}

unsafe fn portable_6x16(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, accumulate: bool) {
    let a = unsafe { std::slice::from_raw_parts(a, kc * MR) };
    let b = unsafe { std::slice::from_raw_parts(b, kc * NR) };
    let mut acc = [[0f32; NR]; MR];
    for (av, bv) in a.chunks_exact(MR).zip(b.chunks_exact(NR)) {
        for i in 0..MR {
            for j in 0..NR {
                // A fused multiply-add where the target has one; elsewhere `mul_add` is a
                // libm call (~100x slower), so multiply and add.
                acc[i][j] = if cfg!(target_feature = "fma") || !cfg!(target_arch = "x86_64") {
                    av[i].mul_add(bv[j], acc[i][j])
                } else {
                    av[i] * bv[j] + acc[i][j]
                };
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
mod simd {
    use crate::implicit_gemm::simd::F32Vector;
    use std::arch::x86_64::*;

    /// Cache lines a kernel asks for while it runs (`lines` of them from `at`).
    #[derive(Clone, Copy)]
    pub(super) struct Prefetch {
        pub(super) at: *const u8,
        pub(super) lines: usize,
    }

    impl Prefetch {
        const NONE: Prefetch = Prefetch { at: std::ptr::null(), lines: 0 };

        /// The next line, if any is left (into L2: the caller packs from it after the GEMM,
        /// which L1 would not hold).
        #[inline(always)]
        unsafe fn one(&mut self) {
            if self.lines > 0 {
                unsafe { _mm_prefetch::<_MM_HINT_T1>(self.at.cast()) };
                self.at = self.at.wrapping_add(64);
                self.lines -= 1;
            }
        }
    }

    /// One reduction step: `NV` B vectors, then per row one broadcast and `NV` FMAs.
    #[inline(always)]
    unsafe fn step<V: F32Vector, const MR: usize, const NV: usize>(
        acc: &mut [[V; NV]; MR],
        a: *const f32,
        b: *const f32,
    ) {
        unsafe {
            let mut bv = [V::zero(); NV];
            for (j, v) in bv.iter_mut().enumerate() {
                *v = V::load(b.add(j * V::LANES));
            }
            for (i, row) in acc.iter_mut().enumerate() {
                let ai = V::splat(a.add(i));
                for (j, c) in row.iter_mut().enumerate() {
                    *c = V::fma(ai, bv[j], *c);
                }
            }
        }
    }

    /// The generic `MR × (NV·LANES)` tile; with `PF`, two of `pf`'s lines per four steps.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn tile<V: F32Vector, const MR: usize, const NV: usize, const PF: bool>(
        kc: usize,
        mut a: *const f32,
        mut b: *const f32,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
        mut pf: Prefetch,
    ) {
        unsafe {
            let nr = NV * V::LANES;
            let mut acc = [[V::zero(); NV]; MR];
            let mut t = 0;
            while t + 4 <= kc {
                step::<V, MR, NV>(&mut acc, a, b);
                step::<V, MR, NV>(&mut acc, a.add(MR), b.add(nr));
                if PF {
                    pf.one();
                }
                step::<V, MR, NV>(&mut acc, a.add(2 * MR), b.add(2 * nr));
                step::<V, MR, NV>(&mut acc, a.add(3 * MR), b.add(3 * nr));
                if PF {
                    pf.one();
                }
                a = a.add(4 * MR);
                b = b.add(4 * nr);
                t += 4;
            }
            while t < kc {
                step::<V, MR, NV>(&mut acc, a, b);
                a = a.add(MR);
                b = b.add(nr);
                t += 1;
            }
            for (i, row) in acc.iter().enumerate() {
                let p = c.add(i * ldc);
                for (j, v) in row.iter().enumerate() {
                    let q = p.add(j * V::LANES);
                    if accumulate {
                        V::store(q, V::add(V::load(q), *v));
                    } else {
                        V::store(q, *v);
                    }
                }
            }
        }
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2_6x16(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
        unsafe { tile::<__m256, 6, 2, false>(kc, a, b, c, ldc, acc, Prefetch::NONE) }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512_6x16(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
        unsafe { tile::<__m512, 6, 1, false>(kc, a, b, c, ldc, acc, Prefetch::NONE) }
    }

    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512_14x32(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
        unsafe { tile::<__m512, 14, 2, false>(kc, a, b, c, ldc, acc, Prefetch::NONE) }
    }

    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn avx2_6x16_pf(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        acc: bool,
        pf: Prefetch,
    ) {
        unsafe { tile::<__m256, 6, 2, true>(kc, a, b, c, ldc, acc, pf) }
    }

    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn avx512_6x16_pf(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        acc: bool,
        pf: Prefetch,
    ) {
        unsafe { tile::<__m512, 6, 1, true>(kc, a, b, c, ldc, acc, pf) }
    }

    #[target_feature(enable = "avx512f")]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn avx512_14x32_pf(
        kc: usize,
        a: *const f32,
        b: *const f32,
        c: *mut f32,
        ldc: usize,
        acc: bool,
        pf: Prefetch,
    ) {
        unsafe { tile::<__m512, 14, 2, true>(kc, a, b, c, ldc, acc, pf) }
    }

    /// Candidate tiles for choosing the AVX-512 shape by measurement (`speed` test).
    #[cfg(test)]
    pub(super) mod candidates {
        use super::*;
        macro_rules! cand {
            ($name:ident, $mr:literal, $nv:literal) => {
                #[target_feature(enable = "avx512f")]
                pub unsafe fn $name(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
                    unsafe { tile::<__m512, $mr, $nv, false>(kc, a, b, c, ldc, acc, Prefetch::NONE) }
                }
            };
        }
        cand!(t6x32, 6, 2);
        cand!(t8x32, 8, 2);
        cand!(t12x32, 12, 2);
        cand!(t14x32, 14, 2);
        cand!(t4x64, 4, 4);
        cand!(t6x64, 6, 4);
        cand!(t8x48, 8, 3);
        cand!(t30x16, 30, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn check(kernel: MicroKernel, kc: usize, accumulate: bool, seed: u64) {
        let (mr, nr) = (kernel.mr(), kernel.nr());
        let mut rng = StdRng::seed_from_u64(seed);
        let a: Vec<f32> = (0..kc * mr).map(|_| rng.random_range(-1.0..1.0)).collect();
        let b: Vec<f32> = (0..kc * nr).map(|_| rng.random_range(-1.0..1.0)).collect();
        let ldc = nr + 5;
        let init: Vec<f32> = (0..mr * ldc).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut c = init.clone();
        unsafe { kernel.run(kc, a.as_ptr(), b.as_ptr(), c.as_mut_ptr(), ldc, accumulate) };
        for i in 0..mr {
            for j in 0..ldc {
                let got = c[i * ldc + j];
                if j >= nr {
                    assert_eq!(got, init[i * ldc + j], "wrote outside the tile at ({i},{j})");
                    continue;
                }
                let mut want: f64 = if accumulate { init[i * ldc + j] as f64 } else { 0.0 };
                for t in 0..kc {
                    want += a[t * mr + i] as f64 * b[t * nr + j] as f64;
                }
                let tol = 1e-5 * (kc as f64).sqrt().max(1.0) + 1e-6;
                assert!((got as f64 - want).abs() <= tol, "{kernel:?} kc={kc} ({i},{j}): {got} vs {want}");
            }
        }
    }

    #[test]
    fn kernels_match_f64_reference() {
        for (kernel, why) in MicroKernel::all_unsupported() {
            test_support::skipped(format!("{kernel:?}: this CPU lacks {why}"));
        }
        for kernel in MicroKernel::all_supported() {
            for (seed, kc) in [0usize, 1, 3, 4, 7, 64, 129].into_iter().enumerate() {
                check(kernel, kc, false, seed as u64);
                check(kernel, kc, true, 100 + seed as u64);
            }
        }
    }

    /// The prefetching entry computes `run`'s bits, with every kernel, whole and partial
    /// prefetch windows.
    #[test]
    fn prefetching_gives_the_same_bits() {
        let mut rng = StdRng::seed_from_u64(77);
        let lines: Vec<u8> = vec![0; 64 * 80];
        for kernel in MicroKernel::all_supported() {
            let (mr, nr) = (kernel.mr(), kernel.nr());
            for kc in [1usize, 5, 64, 128, 131] {
                let a: Vec<f32> = (0..kc * mr).map(|_| rng.random_range(-1.0..1.0)).collect();
                let b: Vec<f32> = (0..kc * nr).map(|_| rng.random_range(-1.0..1.0)).collect();
                let init: Vec<f32> = (0..mr * nr).map(|_| rng.random_range(-1.0..1.0)).collect();
                for accumulate in [false, true] {
                    let (mut want, mut got) = (init.clone(), init.clone());
                    let n = MicroKernel::prefetch_capacity(kc).min(80);
                    unsafe {
                        kernel.run(kc, a.as_ptr(), b.as_ptr(), want.as_mut_ptr(), nr, accumulate);
                        kernel.run_prefetching(
                            kc,
                            a.as_ptr(),
                            b.as_ptr(),
                            got.as_mut_ptr(),
                            nr,
                            accumulate,
                            lines.as_ptr(),
                            n,
                        );
                    }
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&got), bits(&want), "{kernel:?} kc={kc} accumulate {accumulate}");
                }
            }
        }
    }

    #[test]
    fn detection_prefers_the_widest_supported_kernel() {
        let best = MicroKernel::detect();
        assert!(best.is_supported());
        assert_eq!(MicroKernel::all_supported()[0], best);
        assert!(MicroKernel::detect_narrow().is_narrow());
        assert!(best.nr() <= MAX_NR);
    }
}

#[cfg(test)]
mod speed {
    use super::*;

    type Kernel = unsafe fn(usize, *const f32, *const f32, *mut f32, usize, bool);

    /// GFLOP/s of one thread sweeping a 144-row × kc packed A block (L2) against 16
    /// B panels (L1), as the executor's inner loops do.
    fn throughput(k: Kernel, mr: usize, nr: usize) -> f64 {
        let kc = 256;
        let (m_panels, n_panels) = (144usize.div_ceil(mr), 8);
        let a = vec![0.5f32; kc * mr * m_panels];
        let b = vec![0.25f32; kc * nr * n_panels];
        let ldc = nr * n_panels;
        let mut c = vec![0f32; mr * m_panels * ldc];
        // The best of many short sweeps (~0.2 ms each): on a shared, oversubscribed
        // machine most of them run unpreempted, so the minimum is the kernel's own speed.
        let mut best = f64::INFINITY;
        for _ in 0..3000 {
            let t = std::time::Instant::now();
            for jr in 0..n_panels {
                for ir in 0..m_panels {
                    unsafe {
                        k(
                            kc,
                            a[ir * kc * mr..].as_ptr(),
                            b[jr * kc * nr..].as_ptr(),
                            c[ir * mr * ldc + jr * nr..].as_mut_ptr(),
                            ldc,
                            true,
                        )
                    };
                }
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        (m_panels * n_panels) as f64 * (kc * mr * nr * 2) as f64 / best / 1e9
    }

    #[test]
    #[ignore = "prints microkernel throughput; run by hand"]
    fn microkernel_throughput() {
        for k in MicroKernel::all_supported() {
            let f: Kernel = match k {
                MicroKernel::Portable => portable_6x16,
                #[cfg(target_arch = "x86_64")]
                MicroKernel::Avx2Fma => simd::avx2_6x16,
                #[cfg(target_arch = "x86_64")]
                MicroKernel::Avx512Narrow => simd::avx512_6x16,
                #[cfg(target_arch = "x86_64")]
                MicroKernel::Avx512 => simd::avx512_14x32,
                #[allow(unreachable_patterns)]
                _ => continue,
            };
            println!("{k}: {:.1} GFLOP/s single thread", throughput(f, k.mr(), k.nr()));
        }
        #[cfg(target_arch = "x86_64")]
        if MicroKernel::Avx512.is_supported() {
            use simd::candidates::*;
            let cands: [(&str, Kernel, usize, usize); 8] = [
                ("6x32", t6x32, 6, 32),
                ("8x32", t8x32, 8, 32),
                ("12x32", t12x32, 12, 32),
                ("14x32", t14x32, 14, 32),
                ("4x64", t4x64, 4, 64),
                ("6x64", t6x64, 6, 64),
                ("8x48", t8x48, 8, 48),
                ("30x16", t30x16, 30, 16),
            ];
            for (name, f, mr, nr) in cands {
                println!("avx512 candidate {name}: {:.1} GFLOP/s single thread", throughput(f, mr, nr));
            }
        }
    }
}
