//! Between an image row and 16 tiles side by side in SIMD lanes, on AVX-512: the input
//! transform's row split (`d[s][j] = row[M·j + s]`) and the output transform's row join
//! (`row[M·j + s] = y[s][j] + bias`) as a few permutes per row. Written element by element
//! they compiled to scalar stores that vector loads read straight back, and each such read
//! waited for the stores to retire (store-forwarding stalls: the hottest instructions of
//! Real-CUGAN's Winograd layers). AVX2 keeps the element loops (its 8-lane permutes
//! would need a different plan for the same 16 lanes).

#[cfg(target_arch = "x86_64")]
pub(super) mod avx512 {
    use crate::implicit_gemm::NR;
    use std::arch::x86_64::*;

    /// `i`-th lane of the result picks lane `IDX[i]` of `a` (< 16) or of `b` (16..32).
    #[inline(always)]
    unsafe fn pick(a: __m512, idx: [i32; 16], b: __m512) -> __m512 {
        unsafe { _mm512_permutex2var_ps(a, _mm512_loadu_si512(idx.as_ptr().cast()), b) }
    }

    /// Lanes 1..16 of `v`, then lane 0 of `next`: `v` shifted down one lane.
    #[inline(always)]
    unsafe fn shift_in(v: __m512, next: __m512) -> __m512 {
        unsafe { _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(_mm512_castps_si512(next), _mm512_castps_si512(v))) }
    }

    /// Floats of `row` that [`split_row`] reads: 16 tiles `M` apart, `N` wide.
    pub(in crate::winograd) const fn split_span(m: usize, n: usize) -> usize {
        m * (NR - 1) + n
    }

    /// `d[s][j] = row[M·j + s]` for `s < N`, `j < 16`: one input row of 16 tiles of
    /// F(M×M, 3×3) side by side (`N = M + 2`; M is 2 or 4).
    ///
    /// # Safety
    /// AVX-512F is present; `row` addresses [`split_span`]`(M, N)` readable floats (the two
    /// past the last whole vector are read with a mask, nothing beyond them), `d` N·16
    /// writable ones (`d[s][j]` at `d + 16·s + j`; they need not be initialised).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::winograd) unsafe fn split_row<const M: usize, const N: usize>(row: *const f32, d: *mut f32) {
        const EVEN: [i32; 16] = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30];
        const ODD: [i32; 16] = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31];
        // (No closures here: they would not carry the function's target features.)
        unsafe {
            let store = |s: usize| d.add(s * NR);
            match (M, N) {
                (2, 4) => {
                    let (a, b) = (_mm512_loadu_ps(row), _mm512_loadu_ps(row.add(16)));
                    let tail = _mm512_maskz_loadu_ps(0b11, row.add(32)); // row[32], row[33]
                    let (s0, s1) = (pick(a, EVEN, b), pick(a, ODD, b));
                    _mm512_storeu_ps(store(0), s0);
                    _mm512_storeu_ps(store(1), s1);
                    _mm512_storeu_ps(store(2), shift_in(s0, tail));
                    _mm512_storeu_ps(store(3), shift_in(s1, shift_in(tail, tail)));
                }
                (4, 6) => {
                    let v = [
                        _mm512_loadu_ps(row),
                        _mm512_loadu_ps(row.add(16)),
                        _mm512_loadu_ps(row.add(32)),
                        _mm512_loadu_ps(row.add(48)),
                    ];
                    let tail = _mm512_maskz_loadu_ps(0b11, row.add(64)); // row[64], row[65]
                    let mut s = [_mm512_setzero_ps(); 4];
                    for (k, sk) in s.iter_mut().enumerate() {
                        // Lanes 0..8: elements k, k + 4, .. of each pair of vectors.
                        let mut idx = [0i32; 16];
                        for (t, i) in idx.iter_mut().enumerate() {
                            *i = (k + 4 * (t % 8)) as i32;
                        }
                        let (lo, hi) = (pick(v[0], idx, v[1]), pick(v[2], idx, v[3]));
                        // The low halves of both: row[k + 4j] for j < 16.
                        *sk = _mm512_shuffle_f32x4::<0b01_00_01_00>(lo, hi);
                        _mm512_storeu_ps(store(k), *sk);
                    }
                    _mm512_storeu_ps(store(4), shift_in(s[0], tail));
                    _mm512_storeu_ps(store(5), shift_in(s[1], shift_in(tail, tail)));
                }
                _ => unreachable!("Winograd tiles are F(2x2) and F(4x4)"),
            }
        }
    }

    /// `out[M·j + s] = y[s][j] + bias` for `s < M`, `j < 16`: one output row of 16 tiles
    /// side by side (M is 2 or 4).
    ///
    /// # Safety
    /// AVX-512F is present.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::winograd) unsafe fn join_row<const M: usize>(y: &[[f32; NR]; M], bias: f32, out: &mut [f32]) {
        assert!(out.len() >= M * NR, "join_row: output row too short");
        // Lanes 0..8 (LO) or 8..16 (HI) of `a` and `b`, alternating.
        const LO: [i32; 16] = [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23];
        const HI: [i32; 16] = [8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31];
        unsafe {
            let b = _mm512_set1_ps(bias);
            let mut v = [_mm512_setzero_ps(); 4];
            for (vs, ys) in v.iter_mut().zip(y) {
                *vs = _mm512_add_ps(_mm512_loadu_ps(ys.as_ptr()), b);
            }
            let o = out.as_mut_ptr();
            match M {
                2 => {
                    _mm512_storeu_ps(o, pick(v[0], LO, v[1]));
                    _mm512_storeu_ps(o.add(16), pick(v[0], HI, v[1]));
                }
                4 => {
                    // Pairs (a, b) and (c, d) interleaved, then the pairs interleaved.
                    const PAIRS_LO: [i32; 16] = [0, 1, 16, 17, 2, 3, 18, 19, 4, 5, 20, 21, 6, 7, 22, 23];
                    const PAIRS_HI: [i32; 16] = [8, 9, 24, 25, 10, 11, 26, 27, 12, 13, 28, 29, 14, 15, 30, 31];
                    let (ab_lo, ab_hi) = (pick(v[0], LO, v[1]), pick(v[0], HI, v[1]));
                    let (cd_lo, cd_hi) = (pick(v[2], LO, v[3]), pick(v[2], HI, v[3]));
                    _mm512_storeu_ps(o, pick(ab_lo, PAIRS_LO, cd_lo));
                    _mm512_storeu_ps(o.add(16), pick(ab_lo, PAIRS_HI, cd_lo));
                    _mm512_storeu_ps(o.add(32), pick(ab_hi, PAIRS_LO, cd_hi));
                    _mm512_storeu_ps(o.add(48), pick(ab_hi, PAIRS_HI, cd_hi));
                }
                _ => unreachable!("Winograd tiles are F(2x2) and F(4x4)"),
            }
        }
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::avx512::*;
    use crate::implicit_gemm::NR;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn has_avx512() -> bool {
        let yes = std::arch::is_x86_feature_detected!("avx512f");
        if !yes {
            test_support::skipped("Winograd's AVX-512 row split/join: this CPU lacks avx512f");
        }
        yes
    }

    fn check_split<const M: usize, const N: usize>(rng: &mut StdRng) {
        // Exactly `span` floats: the masked tail reads nothing past them.
        let span = split_span(M, N);
        let row: Box<[f32]> = (0..span).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut d = [[f32::NAN; NR]; N];
        unsafe { split_row::<M, N>(row.as_ptr(), d.as_mut_ptr().cast()) };
        for (s, lanes) in d.iter().enumerate() {
            for (j, &v) in lanes.iter().enumerate() {
                assert_eq!(v.to_bits(), row[M * j + s].to_bits(), "F{M}: d[{s}][{j}]");
            }
        }
    }

    fn check_join<const M: usize>(rng: &mut StdRng) {
        let y: [[f32; NR]; M] = std::array::from_fn(|_| std::array::from_fn(|_| rng.random_range(-1.0..1.0)));
        let bias = rng.random_range(-1.0..1.0);
        let mut out = vec![f32::NAN; M * NR + 3];
        unsafe { join_row::<M>(&y, bias, &mut out) };
        for j in 0..NR {
            for s in 0..M {
                assert_eq!(out[M * j + s].to_bits(), (y[s][j] + bias).to_bits(), "F{M}: out[{}]", M * j + s);
            }
        }
        assert!(out[M * NR..].iter().all(|v| v.is_nan()), "F{M}: wrote past the row");
    }

    #[test]
    fn rows_split_into_tile_lanes_and_join_back_exactly() {
        if !has_avx512() {
            test_support::skipped("this CPU has no AVX-512; the lane split and join are AVX-512 only");
            return;
        }
        let mut rng = StdRng::seed_from_u64(0x1a4e5);
        for _ in 0..50 {
            check_split::<2, 4>(&mut rng);
            check_split::<4, 6>(&mut rng);
            check_join::<2>(&mut rng);
            check_join::<4>(&mut rng);
        }
    }
}
