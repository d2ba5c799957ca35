//! The reference every convolution algorithm is tested against: the definition of
//! convolution accumulated in f64. Meant for tests and benchmarks; it is slow.

use crate::geometry::{ConvGeometry, ConvKind};
use crate::problem::ConvProblem;

/// `problem` computed in f64 from f64 inputs (values of any dtype widen exactly).
pub fn conv_f64(problem: &ConvProblem, input: &[f64], weight: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
    conv_geometry_f64(problem.geometry(), input, weight, bias)
}

/// Convolution of geometry `g` straight from its definition, accumulated in f64: no
/// executor's code, so that every executor (the direct ones too) is checked against
/// something else.
pub fn conv_geometry_f64(g: &ConvGeometry, x: &[f64], wt: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
    let [h, w] = g.in_size;
    let [p, q] = g.out_hw();
    let [kr, ks] = g.kernel;
    let (cg, mg) = (g.in_channels_per_group(), g.out_channels_per_group());
    let mut out = vec![0.0; g.output_len()];
    for n in 0..g.batch {
        for k in 0..g.out_channels {
            let grp = k / mg;
            let km = k % mg;
            for op in 0..p {
                for oq in 0..q {
                    let mut acc = bias.map_or(0.0, |b| b[k]);
                    for c in 0..cg {
                        let ci = grp * cg + c;
                        for r in 0..kr {
                            for s in 0..ks {
                                let (ih, iw) = match g.kind {
                                    ConvKind::Forward => (
                                        (op * g.stride[0] + r * g.dilation[0]) as isize - g.pad_begin[0] as isize,
                                        (oq * g.stride[1] + s * g.dilation[1]) as isize - g.pad_begin[1] as isize,
                                    ),
                                    ConvKind::Transposed => {
                                        let nh = (op + g.pad_begin[0]) as isize - (r * g.dilation[0]) as isize;
                                        let nw = (oq + g.pad_begin[1]) as isize - (s * g.dilation[1]) as isize;
                                        if nh.rem_euclid(g.stride[0] as isize) != 0
                                            || nw.rem_euclid(g.stride[1] as isize) != 0
                                        {
                                            continue;
                                        }
                                        (nh / g.stride[0] as isize, nw / g.stride[1] as isize)
                                    }
                                };
                                if ih < 0 || iw < 0 || ih >= h as isize || iw >= w as isize {
                                    continue;
                                }
                                let xv = x[((n * g.in_channels + ci) * h + ih as usize) * w + iw as usize];
                                let wv = match g.kind {
                                    ConvKind::Forward => wt[((k * cg + c) * kr + r) * ks + s],
                                    ConvKind::Transposed => wt[((ci * mg + km) * kr + r) * ks + s],
                                };
                                acc += xv * wv;
                            }
                        }
                    }
                    out[((n * g.out_channels + k) * p + op) * q + oq] = acc;
                }
            }
        }
    }
    out
}
