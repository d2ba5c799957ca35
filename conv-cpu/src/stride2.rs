//! The stride-2 lane shuffles of the kernel == stride executors, on the microkernel's ISA:
//! splitting an input row into its even and odd columns (widened to f32) as the forward
//! form packs it ([`split_pairs`]), and merging two rows of products into every other
//! column of an output row as the transposed form writes it out ([`merge_pairs`]).
//!
//! Each is a permute or two per 16 lanes (AVX-512: masked tails; AVX2: 8 lanes and a
//! scalar tail); the portable path is the element loop. Written as element loops, the
//! transposed form's interleave compiled (outside a `#[target_feature]` body) to scalar
//! SSE moves, a fifth of its layer's time. They only move and convert values (and add the
//! same bias to each), so every ISA gives the same bits. Also here: the non-temporal copy
//! both forms store their output rows with ([`stream_copy`]).

use crate::implicit_gemm::{Element, MicroKernel};
use half::{bf16, f16};
use std::any::TypeId;

/// `even[i] = src[2i]`, `odd[i] = src[2i + 1]`, widened to f32, for `i < even.len()`.
///
/// # Safety
/// `isa` is supported by this CPU.
#[inline(always)]
pub(crate) unsafe fn split_pairs<T: Element>(isa: MicroKernel, src: &[T], even: &mut [f32], odd: &mut [f32]) {
    let n = even.len();
    assert!(odd.len() == n && src.len() >= 2 * n, "{} pairs from {} values", n, src.len());
    #[cfg(target_arch = "x86_64")]
    {
        let (s, e, o) = (src.as_ptr(), even.as_mut_ptr(), odd.as_mut_ptr());
        let t = TypeId::of::<T>();
        // SAFETY: `src` holds 2n values and `even`, `odd` n each (asserted); the ISA is
        // supported (contract); the casts only reinterpret the same bits.
        unsafe {
            match isa {
                MicroKernel::Avx512 | MicroKernel::Avx512Narrow => {
                    if t == TypeId::of::<f32>() {
                        return x86::avx512_split_f32(s.cast(), e, o, n);
                    } else if t == TypeId::of::<bf16>() {
                        return x86::avx512_split_16::<false>(s.cast(), e, o, n);
                    } else if t == TypeId::of::<f16>() {
                        return x86::avx512_split_16::<true>(s.cast(), e, o, n);
                    }
                }
                MicroKernel::Avx2Fma => {
                    if t == TypeId::of::<f32>() {
                        return x86::avx2_split_f32(s.cast(), e, o, n);
                    } else if t == TypeId::of::<bf16>() {
                        return x86::avx2_split_bf16(s.cast(), e, o, n);
                    }
                }
                MicroKernel::Portable => {}
            }
        }
    }
    let _ = isa;
    for ((e, o), p) in even.iter_mut().zip(odd.iter_mut()).zip(src.chunks_exact(2)) {
        *e = p[0].to_f32();
        *o = p[1].to_f32();
    }
}

/// `dst[2i] = even[i] + bias`, `dst[2i + 1] = odd[i] + bias` for `i < even.len()`.
///
/// # Safety
/// `isa` is supported by this CPU.
#[inline(always)]
pub(crate) unsafe fn merge_pairs(isa: MicroKernel, even: &[f32], odd: &[f32], bias: f32, dst: &mut [f32]) {
    let n = even.len();
    assert!(odd.len() == n && dst.len() >= 2 * n, "{} pairs into {} values", n, dst.len());
    #[cfg(target_arch = "x86_64")]
    {
        let (e, o, d) = (even.as_ptr(), odd.as_ptr(), dst.as_mut_ptr());
        // SAFETY: as in `split_pairs`.
        unsafe {
            match isa {
                MicroKernel::Avx512 | MicroKernel::Avx512Narrow => return x86::avx512_merge(e, o, bias, d, n),
                MicroKernel::Avx2Fma => return x86::avx2_merge(e, o, bias, d, n),
                MicroKernel::Portable => {}
            }
        }
    }
    let _ = isa;
    for ((d, &e), &o) in dst.chunks_exact_mut(2).zip(even).zip(odd) {
        d[0] = e + bias;
        d[1] = o + bias;
    }
}

/// `dst.copy_from_slice(src)` with non-temporal stores where `dst` is 64-byte aligned
/// (AVX-512 or AVX2; a plain copy on the portable path): an output written once and not
/// read back by this layer skips the read-for-ownership of each of its lines, which
/// otherwise doubles the memory traffic of a layer whose output is 4x its input (the
/// 2x2 stride-2 deconvolutions). The caller ends its writes with [`store_fence`].
///
/// # Safety
/// `isa` is supported by this CPU.
#[inline(always)]
pub(crate) unsafe fn stream_copy(isa: MicroKernel, src: &[f32], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "stream_copy lengths");
    #[cfg(target_arch = "x86_64")]
    if isa != MicroKernel::Portable {
        let n = src.len();
        // Floats before the first 64-byte boundary of dst, and the whole lines after it.
        let head = (dst.as_ptr().align_offset(64)).min(n);
        let body = (n - head) / 16 * 16;
        // Element loops: a copy_from_slice of a few floats is a memmove call.
        for (d, s) in dst[..head].iter_mut().zip(&src[..head]) {
            *d = *s;
        }
        // SAFETY: `head..head + body` lies in both slices and starts 64-byte aligned in
        // dst; the ISA is supported (contract).
        unsafe {
            let (s, d) = (src.as_ptr().add(head), dst.as_mut_ptr().add(head));
            if isa.is_avx512() {
                x86::avx512_stream(s, d, body);
            } else {
                x86::avx2_stream(s, d, body);
            }
        }
        for (d, s) in dst[head + body..].iter_mut().zip(&src[head + body..]) {
            *d = *s;
        }
        return;
    }
    let _ = isa;
    dst.copy_from_slice(src);
}

/// Orders this thread's non-temporal stores before its later stores (the end of its work),
/// so that whoever reads the output after the join sees them.
#[inline(always)]
pub(crate) fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE, every x86-64 CPU.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    const EVEN: [i32; 16] = [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30];
    const ODD: [i32; 16] = [1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31];
    const LO: [i32; 16] = [0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23];
    const HI: [i32; 16] = [8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31];

    /// The lanes below `n` (≤ 16).
    #[inline(always)]
    fn mask16(n: usize) -> u16 {
        if n >= 16 { u16::MAX } else { (1u16 << n) - 1 }
    }

    /// # Safety
    /// AVX-512F; `s` holds 2n floats, `e` and `o` n writable ones.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn avx512_split_f32(s: *const f32, e: *mut f32, o: *mut f32, n: usize) {
        unsafe {
            let (ie, io) = (_mm512_loadu_si512(EVEN.as_ptr().cast()), _mm512_loadu_si512(ODD.as_ptr().cast()));
            let mut i = 0;
            while i < n {
                // 16 pairs a step; the last step masks its loads and stores.
                let left = n - i;
                let (a, b) = if left >= 16 {
                    (_mm512_loadu_ps(s.add(2 * i)), _mm512_loadu_ps(s.add(2 * i + 16)))
                } else {
                    (
                        _mm512_maskz_loadu_ps(mask16(2 * left), s.add(2 * i)),
                        _mm512_maskz_loadu_ps(mask16((2 * left).saturating_sub(16)), s.add(2 * i + 16)),
                    )
                };
                let m = mask16(left);
                _mm512_mask_storeu_ps(e.add(i), m, _mm512_permutex2var_ps(a, ie, b));
                _mm512_mask_storeu_ps(o.add(i), m, _mm512_permutex2var_ps(a, io, b));
                i += 16;
            }
        }
    }

    /// bf16 (`F16 = false`: the top half of an f32) or f16 pairs, each pair one 32-bit
    /// lane: the even value in its low half.
    ///
    /// # Safety
    /// AVX-512F; `s` holds 2n 16-bit values, `e` and `o` n writable floats.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn avx512_split_16<const F16: bool>(s: *const u16, e: *mut f32, o: *mut f32, n: usize) {
        unsafe {
            let mut i = 0;
            while i < n {
                let m = mask16(n - i);
                let v = _mm512_maskz_loadu_epi32(m, s.add(2 * i).cast());
                let (ev, ov) = if F16 {
                    (
                        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)),
                        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(v))),
                    )
                } else {
                    (
                        _mm512_castsi512_ps(_mm512_slli_epi32::<16>(v)),
                        _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32(0xffff_0000u32 as i32))),
                    )
                };
                _mm512_mask_storeu_ps(e.add(i), m, ev);
                _mm512_mask_storeu_ps(o.add(i), m, ov);
                i += 16;
            }
        }
    }

    /// # Safety
    /// AVX2; `s` holds 2n floats, `e` and `o` n writable ones.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn avx2_split_f32(s: *const f32, e: *mut f32, o: *mut f32, n: usize) {
        unsafe {
            let mut i = 0;
            while i + 8 <= n {
                let (a, b) = (_mm256_loadu_ps(s.add(2 * i)), _mm256_loadu_ps(s.add(2 * i + 8)));
                // Within 128-bit halves, then the 64-bit quarters into order.
                let ev =
                    _mm256_castpd_ps(_mm256_permute4x64_pd::<0xd8>(_mm256_castps_pd(_mm256_shuffle_ps::<0x88>(a, b))));
                let ov =
                    _mm256_castpd_ps(_mm256_permute4x64_pd::<0xd8>(_mm256_castps_pd(_mm256_shuffle_ps::<0xdd>(a, b))));
                _mm256_storeu_ps(e.add(i), ev);
                _mm256_storeu_ps(o.add(i), ov);
                i += 8;
            }
            for j in i..n {
                *e.add(j) = *s.add(2 * j);
                *o.add(j) = *s.add(2 * j + 1);
            }
        }
    }

    /// # Safety
    /// AVX2; `s` holds 2n bf16 values, `e` and `o` n writable floats.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn avx2_split_bf16(s: *const u16, e: *mut f32, o: *mut f32, n: usize) {
        unsafe {
            let mut i = 0;
            let top = _mm256_set1_epi32(0xffff_0000u32 as i32);
            while i + 8 <= n {
                let v = _mm256_loadu_si256(s.add(2 * i).cast());
                _mm256_storeu_ps(e.add(i), _mm256_castsi256_ps(_mm256_slli_epi32::<16>(v)));
                _mm256_storeu_ps(o.add(i), _mm256_castsi256_ps(_mm256_and_si256(v, top)));
                i += 8;
            }
            for j in i..n {
                *e.add(j) = f32::from_bits((*s.add(2 * j) as u32) << 16);
                *o.add(j) = f32::from_bits((*s.add(2 * j + 1) as u32) << 16);
            }
        }
    }

    /// # Safety
    /// AVX-512F; `s` holds n floats, `d` n writable ones from a 64-byte boundary; n is a
    /// multiple of 16.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn avx512_stream(s: *const f32, d: *mut f32, n: usize) {
        unsafe {
            for i in (0..n).step_by(16) {
                _mm512_stream_ps(d.add(i), _mm512_loadu_ps(s.add(i)));
            }
        }
    }

    /// # Safety
    /// AVX; `s` holds n floats, `d` n writable ones from a 32-byte boundary; n is a
    /// multiple of 8.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn avx2_stream(s: *const f32, d: *mut f32, n: usize) {
        unsafe {
            for i in (0..n).step_by(8) {
                _mm256_stream_ps(d.add(i), _mm256_loadu_ps(s.add(i)));
            }
        }
    }

    /// # Safety
    /// AVX-512F; `e` and `o` hold n floats, `d` 2n writable ones.
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(super) unsafe fn avx512_merge(e: *const f32, o: *const f32, bias: f32, d: *mut f32, n: usize) {
        unsafe {
            let (lo, hi) = (_mm512_loadu_si512(LO.as_ptr().cast()), _mm512_loadu_si512(HI.as_ptr().cast()));
            let b = _mm512_set1_ps(bias);
            let mut i = 0;
            while i < n {
                let left = n - i;
                let m = mask16(left);
                let ev = _mm512_add_ps(_mm512_maskz_loadu_ps(m, e.add(i)), b);
                let ov = _mm512_add_ps(_mm512_maskz_loadu_ps(m, o.add(i)), b);
                _mm512_mask_storeu_ps(d.add(2 * i), mask16(2 * left), _mm512_permutex2var_ps(ev, lo, ov));
                _mm512_mask_storeu_ps(
                    d.add(2 * i + 16),
                    mask16((2 * left).saturating_sub(16)),
                    _mm512_permutex2var_ps(ev, hi, ov),
                );
                i += 16;
            }
        }
    }

    /// # Safety
    /// AVX2; `e` and `o` hold n floats, `d` 2n writable ones.
    #[target_feature(enable = "avx2")]
    #[inline]
    pub(super) unsafe fn avx2_merge(e: *const f32, o: *const f32, bias: f32, d: *mut f32, n: usize) {
        unsafe {
            let b = _mm256_set1_ps(bias);
            let mut i = 0;
            while i + 8 <= n {
                let ev = _mm256_add_ps(_mm256_loadu_ps(e.add(i)), b);
                let ov = _mm256_add_ps(_mm256_loadu_ps(o.add(i)), b);
                // Pairs within 128-bit halves, then the halves into order.
                let (l, h) = (_mm256_unpacklo_ps(ev, ov), _mm256_unpackhi_ps(ev, ov));
                _mm256_storeu_ps(d.add(2 * i), _mm256_permute2f128_ps::<0x20>(l, h));
                _mm256_storeu_ps(d.add(2 * i + 8), _mm256_permute2f128_ps::<0x31>(l, h));
                i += 8;
            }
            for j in i..n {
                *d.add(2 * j) = *e.add(j) + bias;
                *d.add(2 * j + 1) = *o.add(j) + bias;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// Every ISA this CPU has against the element loop, bit for bit, at lengths around
    /// the 8- and 16-lane steps (the masked and scalar tails), from unaligned offsets,
    /// with the values past the written ones left alone.
    fn split_matches<T: Element>(rng: &mut StdRng) {
        for isa in MicroKernel::all_supported() {
            for n in [0usize, 1, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 47, 100] {
                for off in [0usize, 1, 3] {
                    let src: Vec<T> = (0..2 * n + off).map(|_| T::from_f32(rng.random_range(-4.0..4.0))).collect();
                    let (mut e, mut o) = (vec![f32::NAN; n + 3], vec![f32::NAN; n + 3]);
                    // SAFETY: only supported ISAs.
                    unsafe { split_pairs(isa, &src[off..], &mut e[..n], &mut o[..n]) };
                    for i in 0..n {
                        assert_eq!(
                            e[i].to_bits(),
                            src[off + 2 * i].to_f32().to_bits(),
                            "{isa:?} {} n={n} e{i}",
                            T::NAME
                        );
                        assert_eq!(o[i].to_bits(), src[off + 2 * i + 1].to_f32().to_bits(), "{isa:?} n={n} o{i}");
                    }
                    assert!(e[n..].iter().chain(&o[n..]).all(|v| v.is_nan()), "{isa:?} n={n}: wrote past the end");
                }
            }
        }
    }

    #[test]
    fn split_pairs_matches_the_element_loop_on_every_isa() {
        for (mk, why) in MicroKernel::all_unsupported() {
            test_support::skipped(format!("{mk:?}: this CPU lacks {why}"));
        }
        let mut rng = StdRng::seed_from_u64(0x52);
        split_matches::<f32>(&mut rng);
        split_matches::<f16>(&mut rng);
        split_matches::<bf16>(&mut rng);
        split_matches::<f64>(&mut rng);
    }

    #[test]
    fn merge_pairs_matches_the_element_loop_on_every_isa() {
        for (mk, why) in MicroKernel::all_unsupported() {
            test_support::skipped(format!("{mk:?}: this CPU lacks {why}"));
        }
        let mut rng = StdRng::seed_from_u64(0x53);
        for isa in MicroKernel::all_supported() {
            for n in [0usize, 1, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100] {
                let e: Vec<f32> = (0..n + 1).map(|_| rng.random_range(-4.0..4.0)).collect();
                let o: Vec<f32> = (0..n + 1).map(|_| rng.random_range(-4.0..4.0)).collect();
                let bias = rng.random_range(-1.0..1.0);
                let mut d = vec![f32::NAN; 2 * n + 5];
                // SAFETY: only supported ISAs.
                unsafe { merge_pairs(isa, &e[1..], &o[1..], bias, &mut d[..2 * n]) };
                for i in 0..n {
                    assert_eq!(d[2 * i].to_bits(), (e[1 + i] + bias).to_bits(), "{isa:?} n={n} {i}");
                    assert_eq!(d[2 * i + 1].to_bits(), (o[1 + i] + bias).to_bits(), "{isa:?} n={n} {i}");
                }
                assert!(d[2 * n..].iter().all(|v| v.is_nan()), "{isa:?} n={n}: wrote past the end");
            }
        }
    }
}
