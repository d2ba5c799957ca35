//! Direct convolution: the definition, looped. Any parameters, no workspace; the fallback
//! when nothing else fits and, accumulated in f64, the reference everything is tested
//! against. [`direct_vectorised`] is its SIMD form for forward convolutions with unit
//! stride along the width, the fast path for layers with few output channels.

use super::workers::{SharedMut, run_on_workers};
#[cfg(target_arch = "x86_64")]
use crate::implicit_gemm::simd::F32Vector;
use crate::implicit_gemm::{Element, MicroKernel};
use conv_engine::{ConvGeometry, ConvKind, Epilogue};
use rayon::prelude::*;
use std::any::TypeId;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The accumulator type of a direct run (f32 for execution, f64 for the reference).
pub trait Accum: Element + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self> {
    const ZERO: Self;
    fn of<T: Element>(v: T) -> Self;
    fn out<T: Element>(self) -> T;
}

impl Accum for f32 {
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn of<T: Element>(v: T) -> Self {
        v.to_f32()
    }
    #[inline(always)]
    fn out<T: Element>(self) -> T {
        T::from_f32(self)
    }
}

impl Accum for f64 {
    const ZERO: Self = 0.0;
    #[inline(always)]
    fn of<T: Element>(v: T) -> Self {
        v.to_f64()
    }
    #[inline(always)]
    fn out<T: Element>(self) -> T {
        T::from_f64(self)
    }
}

/// Output rows `rows` of every (image, channel) plane of `g`, accumulated in `A`.
/// `output` is the whole NCHW output; rows outside `rows` are left untouched.
pub fn direct_conv<T: Element, A: Accum>(
    g: &ConvGeometry,
    input: &[T],
    weight: &[T],
    bias: Option<&[T]>,
    output: &mut [T],
    rows: std::ops::Range<usize>,
) {
    let [h, w] = g.in_size;
    let [p, q] = g.out_hw();
    let [kr, ks] = g.kernel;
    let (cg, mg) = (g.in_channels_per_group(), g.out_channels_per_group());
    assert_eq!(input.len(), g.input_len(), "input length");
    assert_eq!(weight.len(), g.weight_len(), "weight length");
    assert_eq!(output.len(), g.output_len(), "output length");

    // Input coordinate read by output coordinate `o` through tap `t` along dimension `d`.
    let source = |d: usize, o: usize, t: usize, extent: usize| -> Option<usize> {
        let v = match g.kind {
            ConvKind::Forward => (o * g.stride[d] + t * g.dilation[d]) as isize - g.pad_begin[d] as isize,
            ConvKind::Transposed => {
                let num = (o + g.pad_begin[d]) as isize - (t * g.dilation[d]) as isize;
                if num.rem_euclid(g.stride[d] as isize) != 0 {
                    return None;
                }
                num.div_euclid(g.stride[d] as isize)
            }
        };
        (v >= 0 && (v as usize) < extent).then_some(v as usize)
    };

    output.par_chunks_mut(p * q).enumerate().for_each(|(plane, out)| {
        let (n, k) = (plane / g.out_channels, plane % g.out_channels);
        let (grp, km) = (k / mg, k % mg);
        let b = bias.map_or(A::ZERO, |b| A::of(b[k]));
        for op in rows.clone() {
            for oq in 0..q {
                let mut acc = b;
                for c in 0..cg {
                    let ci = grp * cg + c;
                    let x = &input[(n * g.in_channels + ci) * h * w..][..h * w];
                    let wbase = match g.kind {
                        ConvKind::Forward => (k * cg + c) * kr * ks,
                        ConvKind::Transposed => (ci * mg + km) * kr * ks,
                    };
                    for r in 0..kr {
                        let Some(ih) = source(0, op, r, h) else { continue };
                        for s in 0..ks {
                            let Some(iw) = source(1, oq, s, w) else { continue };
                            acc = acc + A::of(x[ih * w + iw]) * A::of(weight[wbase + r * ks + s]);
                        }
                    }
                }
                out[op * q + oq] = acc.out();
            }
        }
    });
}

/// Output channels one pass of the vectorised path accumulates: the register tile's rows.
const VEC_CHANNELS: usize = 4;
/// Bands of rows per worker: enough for the load to balance when a worker is held up.
const BANDS_PER_WORKER: usize = 8;
/// Widest strip of output pixels one pass covers (4 zmm).
const MAX_STRIP: usize = 64;

/// Whether [`direct_vectorised`] runs `g` with `isa`: a forward convolution without groups
/// and with unit stride along the width (its pixels are SIMD lanes), on an x86 ISA.
pub fn vectorises(g: &ConvGeometry, isa: MicroKernel) -> bool {
    cfg!(target_arch = "x86_64")
        && isa != MicroKernel::Portable
        && isa.is_supported()
        && g.kind == ConvKind::Forward
        && g.groups == 1
        && g.stride[1] == 1
}

/// Floats of one strip's staged input rows: every (channel, filter row) segment a strip
/// reads, widened to f32 and zero-padded, `MAX_STRIP + (ks − 1)·dilation` each.
fn staging_floats(g: &ConvGeometry) -> usize {
    g.in_channels * g.kernel[0] * (MAX_STRIP + (g.kernel[1] - 1) * g.dilation[1])
}

/// Floats of scratch [`direct_vectorised`] needs with `threads` workers: the bias in f32,
/// the weights widened to f32 unless they are f32 already, and per worker one strip's
/// staged input rows.
pub fn vectorised_scratch_floats<T: Element>(g: &ConvGeometry, threads: usize) -> usize {
    let widened = if TypeId::of::<T>() == TypeId::of::<f32>() { 0 } else { g.weight_len() };
    g.out_channels + widened + threads.max(1) * staging_floats(g)
}

/// Direct convolution with the output pixels of a row in SIMD lanes: per strip of up to
/// 4 vectors of one output row and up to 4 output channels, every (input channel, tap) is
/// one broadcast weight and 4 FMAs over the input row read in place (no packing; strips
/// that touch the padding or read f16/bf16 read a staged, widened copy). This is what a
/// GEMM does badly: few output channels (the VAE's conv_out, 128→3), where a packed GEMM
/// tile is mostly padding and packing costs more than the arithmetic. The epilogue is
/// applied in the write-out.
///
/// Output rows `rows` of every image; `output` is the whole NCHW output. Returns `false`,
/// writing nothing, where [`vectorises`] says no. `scratch` holds
/// [`vectorised_scratch_floats`]`(g, threads)` floats.
#[allow(clippy::too_many_arguments)]
pub fn direct_vectorised<T: Element>(
    isa: MicroKernel,
    g: &ConvGeometry,
    input: &[T],
    weight: &[T],
    bias: Option<&[T]>,
    epilogue: &Epilogue<&[T]>,
    output: &mut [T],
    rows: Range<usize>,
    threads: usize,
    scratch: &mut [f32],
) -> bool {
    if !vectorises(g, isa) {
        return false;
    }
    assert_eq!(input.len(), g.input_len(), "input length");
    assert_eq!(weight.len(), g.weight_len(), "weight length");
    assert_eq!(output.len(), g.output_len(), "output length");
    assert!(rows.end <= g.out_hw()[0], "rows outside the output");
    assert!(scratch.len() >= vectorised_scratch_floats::<T>(g, threads), "scratch too small");
    if let Some(b) = bias {
        assert_eq!(b.len(), g.out_channels, "bias length");
    }
    if let Some(r) = epilogue.residual {
        assert_eq!(r.len(), output.len(), "residual length");
    }
    let (bias_f32, scratch) = scratch.split_at_mut(g.out_channels);
    for (k, v) in bias_f32.iter_mut().enumerate() {
        *v = bias.map_or(0.0, |b| b[k].to_f32());
    }
    let (wf, staging): (&[f32], &mut [f32]) = if TypeId::of::<T>() == TypeId::of::<f32>() {
        // SAFETY: T is f32.
        (unsafe { std::slice::from_raw_parts(weight.as_ptr() as *const f32, weight.len()) }, scratch)
    } else {
        let (s, rest) = scratch.split_at_mut(weight.len());
        T::widen(weight, s);
        (s, rest)
    };
    let cx = Ctx {
        g: *g,
        out_hw: g.out_hw(),
        x: input,
        w: wf,
        bias: bias_f32,
        epilogue,
        out: SharedMut(output.as_mut_ptr()),
    };
    let nrows = rows.len();
    // Units are bands of consecutive rows: where a row is not a whole number of cache lines,
    // two workers writing neighbouring rows share a line at every row boundary of every
    // plane (rows dealt one by one cost a 3->32 layer 25%).
    let band = nrows.div_ceil(threads.max(1) * BANDS_PER_WORKER).max(1);
    let bands = nrows.div_ceil(band);
    let units = g.batch * bands;
    let next = AtomicUsize::new(0);
    let work = |slot: &mut [f32]| loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= units {
            break;
        }
        let (n, b) = (i / bands, i % bands);
        let band_rows = rows.start + b * band..(rows.start + (b + 1) * band).min(rows.end);
        for op in band_rows {
            // SAFETY: `vectorises` checked the ISA; each (image, band of rows) is one
            // unit, written by the one worker that took it.
            #[cfg(target_arch = "x86_64")]
            unsafe {
                match isa {
                    MicroKernel::Avx512 | MicroKernel::Avx512Narrow => vec_avx512::row(&cx, n, op, slot),
                    _ => vec_avx2::row(&cx, n, op, slot),
                }
            }
            #[cfg(not(target_arch = "x86_64"))]
            let _ = (&cx, n, op, &slot);
        }
    };
    run_on_workers(staging, staging_floats(g), threads.clamp(1, units.max(1)), work);
    true
}

struct Ctx<'a, T> {
    g: ConvGeometry,
    /// `g.out_hw()`, computed once: per strip it was 16% of a 3->32 layer's time (perf).
    out_hw: [usize; 2],
    x: &'a [T],
    w: &'a [f32],
    bias: &'a [f32],
    epilogue: &'a Epilogue<&'a [T]>,
    out: SharedMut<T>,
}

#[cfg(target_arch = "x86_64")]
mod vec_avx512 {
    use super::*;
    use std::arch::x86_64::__m512;
    /// # Safety
    /// AVX-512F is present; no other worker writes row `op` of image `n`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn row<T: Element>(cx: &Ctx<T>, n: usize, op: usize, staging: &mut [f32]) {
        // 4 channels × 4 zmm = 16 accumulators: 64 pixels per strip.
        unsafe { conv_row::<T, __m512, 4>(cx, n, op, staging) }
    }
}

#[cfg(target_arch = "x86_64")]
mod vec_avx2 {
    use super::*;
    use std::arch::x86_64::__m256;
    /// # Safety
    /// AVX2 and FMA are present; no other worker writes row `op` of image `n`.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn row<T: Element>(cx: &Ctx<T>, n: usize, op: usize, staging: &mut [f32]) {
        // 4 channels × 3 ymm = 12 accumulators, 3 input vectors and a broadcast: 16 ymm.
        unsafe { conv_row::<T, __m256, 3>(cx, n, op, staging) }
    }
}

/// Output row `op` of image `n`, strip by strip; per strip, the input rows are staged
/// once (where they cannot be read in place) and then swept once per group of 4 channels.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn conv_row<T: Element, V: F32Vector, const NV: usize>(cx: &Ctx<T>, n: usize, op: usize, staging: &mut [f32]) {
    let g = &cx.g;
    let [h, w] = g.in_size;
    let [kr, ks] = g.kernel;
    let width = NV * V::LANES;
    let span = (ks - 1) * g.dilation[1] + width;
    let q = cx.out_hw[1];
    let m = g.out_channels;
    let is_f32 = TypeId::of::<T>() == TypeId::of::<f32>();
    let mut segments: Vec<(*const f32, usize)> = Vec::with_capacity(g.in_channels * kr);
    let mut oq0 = 0;
    while oq0 < q {
        let iw0 = oq0 as isize - g.pad_begin[1] as isize;
        let in_place = is_f32 && iw0 >= 0 && iw0 as usize + span <= w;
        if !in_place {
            // Every (channel, filter row) segment this strip reads, zero outside the row.
            for c in 0..g.in_channels {
                let plane = &cx.x[(n * g.in_channels + c) * h * w..][..h * w];
                for r in 0..kr {
                    let ih = (op * g.stride[0] + r * g.dilation[0]) as isize - g.pad_begin[0] as isize;
                    if ih < 0 || ih >= h as isize {
                        continue;
                    }
                    let src = &plane[ih as usize * w..][..w];
                    let seg = &mut staging[(c * kr + r) * span..][..span];
                    let lo = (-iw0).clamp(0, span as isize) as usize;
                    let hi = (w as isize - iw0).clamp(lo as isize, span as isize) as usize;
                    seg[..lo].fill(0.0);
                    if hi > lo {
                        // (A strip wholly in the right padding starts past the row's end.)
                        let from = (iw0 + lo as isize) as usize;
                        T::widen(&src[from..from + (hi - lo)], &mut seg[lo..hi]);
                    }
                    seg[hi..].fill(0.0);
                }
            }
        }
        // Where each (channel, filter row) segment of the strip starts, and its weights:
        // found once per strip, not once per group of output channels (with 3 input
        // channels the lookup cost as much as the segment's FMAs). A pass of its own after
        // the staging: the pointers come from shared borrows of the finished staging, which
        // a later mutable borrow of it (staging the next segment) would invalidate.
        segments.clear();
        for c in 0..g.in_channels {
            for r in 0..kr {
                let ih = (op * g.stride[0] + r * g.dilation[0]) as isize - g.pad_begin[0] as isize;
                if ih < 0 || ih >= h as isize {
                    continue;
                }
                let base: *const f32 = if in_place {
                    let row = &cx.x[((n * g.in_channels + c) * h + ih as usize) * w..][..w];
                    // In place only for f32 strips inside the row (checked above).
                    row[iw0 as usize..iw0 as usize + span].as_ptr() as *const f32
                } else {
                    staging[(c * kr + r) * span..][..span].as_ptr()
                };
                segments.push((base, (c * kr + r) * ks));
            }
        }
        let mut k0 = 0;
        // The 3-wide filter (every 3x3 layer) with its taps unrolled: a 3-iteration loop
        // per segment ran the FMAs at half their rate (perf).
        let three = ks == 3;
        while k0 < m {
            let mb = (m - k0).min(VEC_CHANNELS);
            unsafe {
                match (mb, three) {
                    (1, _) => strip::<T, V, 1, NV, 0, 0>(cx, n, op, oq0, k0, &segments),
                    (2, _) => strip::<T, V, 2, NV, 0, 0>(cx, n, op, oq0, k0, &segments),
                    (3, _) => strip::<T, V, 3, NV, 0, 0>(cx, n, op, oq0, k0, &segments),
                    (_, true) if segments.len() == 9 => {
                        strip::<T, V, VEC_CHANNELS, NV, 3, 9>(cx, n, op, oq0, k0, &segments)
                    }
                    (_, true) => strip::<T, V, VEC_CHANNELS, NV, 3, 0>(cx, n, op, oq0, k0, &segments),
                    (_, false) => strip::<T, V, VEC_CHANNELS, NV, 0, 0>(cx, n, op, oq0, k0, &segments),
                }
            }
            k0 += mb;
        }
        oq0 += width;
    }
}

/// Output channels `k0..k0 + MB`, pixels `oq0..oq0 + NV·LANES` (clipped) of row `op`,
/// reading the input in place (f32, strip inside the row) or from `staged` segments.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn strip<T: Element, V: F32Vector, const MB: usize, const NV: usize, const KS: usize, const NSEG: usize>(
    cx: &Ctx<T>,
    n: usize,
    op: usize,
    oq0: usize,
    k0: usize,
    segments: &[(*const f32, usize)],
) {
    let g = &cx.g;
    let [p, q] = cx.out_hw;
    let [kr, ks] = g.kernel;
    let c_in = g.in_channels;
    let width = NV * V::LANES;
    let mut acc = [[unsafe { V::zero() }; NV]; MB];
    let w_k = c_in * kr * ks;
    let ks = if KS > 0 { KS } else { ks };
    let segments = if NSEG > 0 { &segments[..NSEG] } else { segments };
    for &(base, wrow) in segments {
        for s in 0..ks {
            unsafe {
                let xp = base.add(s * g.dilation[1]);
                let mut xv = [V::zero(); NV];
                for (j, v) in xv.iter_mut().enumerate() {
                    *v = V::load(xp.add(j * V::LANES));
                }
                for (i, row) in acc.iter_mut().enumerate() {
                    let wv = V::splat(cx.w.as_ptr().add((k0 + i) * w_k + wrow + s));
                    for (j, a) in row.iter_mut().enumerate() {
                        *a = V::fma(wv, xv[j], *a);
                    }
                }
            }
        }
    }
    let valid = width.min(q - oq0);
    if valid == width && TypeId::of::<T>() == TypeId::of::<f32>() {
        // A whole f32 strip: straight from the registers with the bias, then the rest of
        // the epilogue in place, while the strip is in L1 (a short reduction, e.g. a
        // 3-channel input, spends as long here as in its FMAs: no staging copy).
        // Every store first, then the epilogue's calls: a call between the stores made the
        // compiler spill all accumulators to the stack, and the spills queued behind the
        // output's stores (which miss the cache) stalled the strip (perf: 20% of a 3->32 layer).
        let start = |k: usize| ((n * g.out_channels + k) * p + op) * q + oq0;
        for (i, row) in acc.iter().enumerate() {
            unsafe {
                let bv = V::splat(&cx.bias[k0 + i]);
                let dst = cx.out.ptr().add(start(k0 + i)) as *mut f32;
                for (j, v) in row.iter().enumerate() {
                    // SAFETY: T is f32; the strip's pixels are this unit's alone.
                    V::store(dst.add(j * V::LANES), V::add(*v, bv));
                }
            }
        }
        if !cx.epilogue.is_plain() {
            for i in 0..MB {
                let at = start(k0 + i);
                // SAFETY: as above; `width` pixels of this unit's row, T is f32.
                let out = unsafe { std::slice::from_raw_parts_mut(cx.out.ptr().add(at) as *mut f32, width) };
                let res = cx.epilogue.residual.map(|r| r[at..at + width].iter().map(|x| x.to_f32()));
                cx.epilogue.apply_row(out, res);
            }
        }
        return;
    }
    let mut lanes = [0f32; MAX_STRIP];
    for (i, row) in acc.iter().enumerate() {
        let k = k0 + i;
        let start = ((n * g.out_channels + k) * p + op) * q + oq0;
        for (j, v) in row.iter().enumerate() {
            unsafe { V::store(lanes.as_mut_ptr().add(j * V::LANES), *v) };
        }
        let bv = cx.bias[k];
        // SAFETY: pixels oq0..oq0 + valid of row op of plane (n, k) are this unit's alone.
        let dst = unsafe { std::slice::from_raw_parts_mut(cx.out.ptr().add(start), valid) };
        let acc = &mut lanes[..valid];
        acc.iter_mut().for_each(|v| *v += bv);
        if !cx.epilogue.is_plain() {
            let res = cx.epilogue.residual.map(|r| r[start..start + valid].iter().map(|x| x.to_f32()));
            cx.epilogue.apply_row(acc, res);
        }
        T::narrow(acc, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use conv_engine::Activation;
    use half::{bf16, f16};
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn random_geometry(rng: &mut StdRng) -> ConvGeometry {
        loop {
            let kernel = [rng.random_range(1..5), rng.random_range(1..5)];
            let g = ConvGeometry {
                kind: ConvKind::Forward,
                batch: rng.random_range(1..3),
                in_channels: rng.random_range(1..7),
                // Wide enough for whole strips read in place, narrow for partial ones; tall
                // enough at times for bands of several rows per worker.
                in_size: [
                    if rng.random_bool(0.25) { rng.random_range(17..60) } else { rng.random_range(1..9) },
                    rng.random_range(1..150),
                ],
                out_channels: rng.random_range(1..10),
                kernel,
                stride: [rng.random_range(1..3), 1],
                pad_begin: [rng.random_range(0..3), rng.random_range(0..3)],
                pad_end: [rng.random_range(0..3), rng.random_range(0..3)],
                dilation: [rng.random_range(1..3), rng.random_range(1..3)],
                output_padding: [0, 0],
                groups: 1,
            };
            if g.out_size().is_some() {
                return g;
            }
        }
    }

    fn check<T: Element>(isa: MicroKernel, g: &ConvGeometry, rng: &mut StdRng, act: Activation, tol: f64) {
        let rand = |n: usize, rng: &mut StdRng| -> Vec<T> {
            (0..n).map(|_| T::from_f32(rng.random_range(-1.0..1.0))).collect()
        };
        let (x, w, b, res) =
            (rand(g.input_len(), rng), rand(g.weight_len(), rng), rand(g.out_channels, rng), rand(g.output_len(), rng));
        let with_res = rng.random_bool(0.5);
        let scale = if with_res { 0.5 } else { 1.0 };
        let mut want = vec![0f64; g.output_len()];
        let [p, _] = g.out_hw();
        // The reference in f64 end to end, on exactly the values the dtype holds.
        let widen = |v: &[T]| v.iter().map(|e| e.to_f64()).collect::<Vec<f64>>();
        direct_conv::<f64, f64>(g, &widen(&x), &widen(&w), Some(&widen(&b)), &mut want, 0..p);
        let ep = Epilogue { activation: act, residual: with_res.then_some(res.as_slice()), scale };
        let mut out = vec![T::from_f32(f32::NAN); g.output_len()];
        let threads = 2;
        let mut scratch = vec![f32::NAN; vectorised_scratch_floats::<T>(g, threads)];
        // Two bands of rows, as chunked plans run it.
        for rows in [0..p / 2, p / 2..p] {
            assert!(direct_vectorised(isa, g, &x, &w, Some(&b), &ep, &mut out, rows, threads, &mut scratch));
        }
        let taps = (g.in_channels * g.kernel[0] * g.kernel[1]) as f64;
        for (i, (o, c)) in out.iter().zip(&want).enumerate() {
            let r = if with_res { res[i].to_f64() } else { 0.0 };
            let want = (act.apply(*c as f32) as f64 + r) * scale as f64;
            let o = o.to_f64();
            assert!(
                (o - want).abs() <= tol * taps.sqrt().max(1.0) * want.abs().max(1.0),
                "{isa:?} {g:?} {act:?} element {i}: {o} vs {want}"
            );
        }
    }

    /// Every vector ISA this CPU has against the f64 definition, on 200 random problems
    /// per dtype; the epilogue (activation, residual, scale) in the write-out.
    #[test]
    fn vectorised_direct_matches_the_f64_definition_with_every_isa() {
        for (mk, why) in MicroKernel::all_unsupported() {
            test_support::skipped(format!("{mk:?}: this CPU lacks {why}"));
        }
        let acts = [Activation::Identity, Activation::Relu, Activation::LeakyRelu(0.1), Activation::Silu];
        let mut rng = StdRng::seed_from_u64(0xd1ec7);
        let mut ran = 0;
        for isa in MicroKernel::all_supported() {
            if isa == MicroKernel::Portable {
                continue; // no vector path: the scalar loop runs it
            }
            for i in 0..200 {
                let g = random_geometry(&mut rng);
                assert!(vectorises(&g, isa), "{g:?}");
                // Every activation with every dtype (the plain f32 epilogue has its own store).
                let act = acts[(i / 4) % acts.len()];
                match i % 4 {
                    0 => check::<f16>(isa, &g, &mut rng, act, 4e-3),
                    1 => check::<bf16>(isa, &g, &mut rng, act, 2e-2),
                    _ => check::<f32>(isa, &g, &mut rng, act, 1e-5),
                }
                ran += 1;
            }
        }
        if ran == 0 {
            test_support::skipped("this CPU has no vector ISA; the scalar loop runs Direct");
        }
    }

    /// A strip wholly in the right padding (output wider than a strip past the input's
    /// end) reads nothing of the row; it once sliced past the row's end and panicked.
    #[test]
    fn vectorised_direct_runs_strips_wholly_in_the_padding() {
        let isa = MicroKernel::detect();
        if isa == MicroKernel::Portable {
            test_support::skipped("this CPU has no vector ISA; the scalar loop runs Direct");
            return;
        }
        let g = ConvGeometry {
            kind: ConvKind::Forward,
            batch: 1,
            in_channels: 2,
            in_size: [3, 5],
            out_channels: 3,
            kernel: [1, 3],
            stride: [1, 1],
            pad_begin: [0, 1],
            pad_end: [0, 140],
            dilation: [1, 1],
            output_padding: [0, 0],
            groups: 1,
        };
        let mut rng = StdRng::seed_from_u64(5);
        check::<f32>(isa, &g, &mut rng, Activation::Identity, 1e-5);
        check::<f16>(isa, &g, &mut rng, Activation::Relu, 4e-3);
    }

    /// The 3-channel 3x3 input layer (Real-CUGAN's first, 3->32), which has its own
    /// unrolled instance: rows whose 9 segments are all inside the image, edge rows with
    /// fewer, strips in place and staged, with every ISA.
    #[test]
    fn vectorised_direct_runs_the_three_channel_input_layer() {
        let mut rng = StdRng::seed_from_u64(0x3c);
        let vector_isas: Vec<_> =
            MicroKernel::all_supported().into_iter().filter(|&k| k != MicroKernel::Portable).collect();
        if vector_isas.is_empty() {
            test_support::skipped("this CPU has no vector ISA; the scalar loop runs Direct");
            return;
        }
        for isa in vector_isas {
            for (size, pad) in [([20, 150], 1), ([9, 67], 0)] {
                let g = ConvGeometry {
                    kind: ConvKind::Forward,
                    batch: 2,
                    in_channels: 3,
                    in_size: size,
                    out_channels: 32,
                    kernel: [3, 3],
                    stride: [1, 1],
                    pad_begin: [pad, pad],
                    pad_end: [pad, pad],
                    dilation: [1, 1],
                    output_padding: [0, 0],
                    groups: 1,
                };
                check::<f32>(isa, &g, &mut rng, Activation::LeakyRelu(0.1), 1e-5);
                check::<f32>(isa, &g, &mut rng, Activation::Identity, 1e-5);
                check::<bf16>(isa, &g, &mut rng, Activation::Identity, 2e-2);
            }
        }
    }

    #[test]
    fn vectorised_direct_refuses_what_it_does_not_run() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut g = random_geometry(&mut rng);
        assert!(!vectorises(&g, MicroKernel::Portable));
        g.groups = 2;
        g.in_channels = 2;
        g.out_channels = 2;
        assert!(!vectorises(&g, MicroKernel::detect()));
        g.groups = 1;
        g.stride = [1, 2];
        assert!(!vectorises(&g, MicroKernel::detect()));
        g.stride = [1, 1];
        g.kind = ConvKind::Transposed;
        assert!(!vectorises(&g, MicroKernel::detect()));
    }
}
