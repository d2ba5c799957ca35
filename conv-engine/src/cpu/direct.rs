//! Direct convolution: the definition, looped. Any parameters, no workspace; the fallback
//! when nothing else fits and, accumulated in f64, the reference everything is tested
//! against.

use implicit_gemm::cpu::Element;
use implicit_gemm::{ConvGeometry, ConvKind};
use rayon::prelude::*;

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
