//! The f32 vector operations the SIMD kernels are written against, so that one generic
//! body serves every vector width: 8-lane ymm (AVX2 + FMA) and 16-lane zmm (AVX-512F).
//!
//! The methods are `inline(always)` without target features of their own: they must only
//! be called from a `#[target_feature]` function (an entry point that enables the
//! vector's ISA), into which they and the intrinsics they call inline.

use std::arch::x86_64::*;

/// An f32 SIMD register.
pub trait F32Vector: Copy {
    const LANES: usize;
    /// # Safety
    /// The caller's target features include the vector's ISA (as for every method).
    unsafe fn zero() -> Self;
    /// # Safety
    /// `p` addresses `LANES` floats.
    unsafe fn load(p: *const f32) -> Self;
    /// # Safety
    /// `p` addresses one float.
    unsafe fn splat(p: *const f32) -> Self;
    /// `a·b + c`, fused.
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    unsafe fn add(a: Self, b: Self) -> Self;
    /// # Safety
    /// `p` addresses `LANES` writable floats.
    unsafe fn store(p: *mut f32, v: Self);
}

impl F32Vector for __m256 {
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> Self {
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> Self {
        unsafe { _mm256_broadcast_ss(&*p) }
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        unsafe { _mm256_storeu_ps(p, v) }
    }
}

impl F32Vector for __m512 {
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> Self {
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> Self {
        unsafe { _mm512_set1_ps(*p) }
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        unsafe { _mm512_storeu_ps(p, v) }
    }
}
