//! The reference every convolution algorithm is tested against: the definition of
//! convolution accumulated in f64. Meant for tests and benchmarks; it is slow.

use crate::cpu::direct::direct_conv;
use crate::problem::ConvProblem;

/// `problem` computed in f64 from f64 inputs (values of any dtype widen exactly).
pub fn conv_f64(problem: &ConvProblem, input: &[f64], weight: &[f64], bias: Option<&[f64]>) -> Vec<f64> {
    let g = problem.geometry();
    let mut out = vec![f64::NAN; g.output_len()];
    direct_conv::<f64, f64>(g, input, weight, bias, &mut out, 0..g.out_hw()[0]);
    out
}
