//! Test support that belongs to the conv engine's own types (feature `testing`, enabled
//! from dev-dependencies only): a seeded generator of random 2-D convolution problems, the
//! epilogue's activations in f64 from their definitions, and the one way a test says it
//! was skipped. Every crate's tests reach it through the `test-support` crate, which
//! re-exports it beside the counting allocator and the fuzzer; it stays here, behind a
//! feature, only while `rocm-backend`'s tests still name `conv_engine::testing` (when they
//! move to `test-support`, this file moves there and the feature goes).

use std::ops::Range;

use candle_core::DType;
use rand::Rng;

use crate::{Conv2dParams, ConvProblem, Padding2d};

/// The channels of a random problem, drawn by the caller of [`RandomConv2d::draw`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channels {
    /// C: input channels, a multiple of `groups`.
    pub input: usize,
    /// K: output channels, a multiple of `groups`.
    pub output: usize,
    pub groups: usize,
}

/// A random 2-D convolution, forward or transposed. The caller fixes the dtype, the
/// direction and the ranges; stride (1..4), padding (0..3 on each side, asymmetric),
/// dilation (1..3) and the output padding of a transposed problem (below
/// max(stride, dilation)) are drawn in [`RandomConv2d::draw`].
#[derive(Clone, Debug)]
pub struct RandomConv2d {
    pub dtype: DType,
    pub transposed: bool,
    /// Batch size N.
    pub batch: Range<usize>,
    /// Input height and width, each.
    pub size: Range<usize>,
    /// Kernel height and width, each.
    pub kernel: Range<usize>,
    /// Make it 1x1, stride 1, unpadded (the `Gemm1x1` shape) after the draws: the values are
    /// still drawn, so what a seed gives the other problems does not depend on it.
    pub pointwise: bool,
}

impl RandomConv2d {
    /// Draws until the problem is valid: `channels`, then N, H, W, the kernel, stride,
    /// padding (top, bottom, left, right), dilation and, when transposed, output padding,
    /// in that order. The order is part of the contract: it fixes what a seed produces.
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R, mut channels: impl FnMut(&mut R) -> Channels) -> ConvProblem {
        loop {
            let Channels { input: c, output: k, groups } = channels(rng);
            let n = rng.random_range(self.batch.clone());
            let (h, w) = (rng.random_range(self.size.clone()), rng.random_range(self.size.clone()));
            let mut kern = [rng.random_range(self.kernel.clone()), rng.random_range(self.kernel.clone())];
            let mut stride = [rng.random_range(1..4), rng.random_range(1..4)];
            let mut padding = Padding2d::tblr(
                rng.random_range(0..3),
                rng.random_range(0..3),
                rng.random_range(0..3),
                rng.random_range(0..3),
            );
            let dilation = [rng.random_range(1..3), rng.random_range(1..3)];
            if self.pointwise {
                kern = [1, 1];
                stride = [1, 1];
                padding = Padding2d::default();
            }
            let output_padding = if self.transposed {
                [rng.random_range(0..stride[0].max(dilation[0])), rng.random_range(0..stride[1].max(dilation[1]))]
            } else {
                [0, 0]
            };
            let params = Conv2dParams { stride, padding, dilation, groups, output_padding };
            let dt = self.dtype;
            let problem = if self.transposed {
                ConvProblem::conv_transpose2d(&[n, c, h, w], &[c, k / groups, kern[0], kern[1]], dt, dt, &params)
            } else {
                ConvProblem::conv2d(&[n, c, h, w], &[k, c / groups, kern[0], kern[1]], dt, dt, &params)
            };
            if let Ok(problem) = problem {
                return problem;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::StdRng};

    #[test]
    fn drawn_problems_are_valid_and_follow_the_spec() {
        let mut rng = StdRng::seed_from_u64(1);
        for i in 0..200 {
            let spec = RandomConv2d {
                dtype: DType::F16,
                transposed: i % 2 == 0,
                batch: 1..3,
                size: 1..9,
                kernel: 1..4,
                pointwise: i % 5 == 0,
            };
            let p = spec.draw(&mut rng, |rng| {
                let g = [1, 2][i % 2];
                Channels { input: g * rng.random_range(1..4), output: g * rng.random_range(1..4), groups: g }
            });
            let g = p.geometry();
            assert!((1..3).contains(&g.batch) && g.groups == [1, 2][i % 2], "{p}");
            if spec.pointwise {
                assert_eq!((g.kernel, g.stride, g.pad_begin, g.pad_end), ([1, 1], [1, 1], [0, 0], [0, 0]), "{p}");
            }
        }
        // The same seed gives the same problems.
        let draw = |seed| {
            let spec = RandomConv2d {
                dtype: DType::F32,
                transposed: true,
                batch: 1..4,
                size: 1..30,
                kernel: 1..5,
                pointwise: false,
            };
            let mut rng = StdRng::seed_from_u64(seed);
            (0..20).map(|_| spec.draw(&mut rng, |_| Channels { input: 3, output: 5, groups: 1 })).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
    }
}

/// An epilogue activation in f64, from its definition (the reference the fused epilogues
/// of every device are checked against).
pub fn activation_f64(a: crate::Activation, x: f64) -> f64 {
    match a {
        crate::Activation::Identity => x,
        crate::Activation::Relu => x.max(0.0),
        crate::Activation::Silu => x / (1.0 + (-x).exp()),
        crate::Activation::LeakyRelu(slope) => {
            if x >= 0.0 {
                x
            } else {
                x * slope as f64
            }
        }
        crate::Activation::Gelu => {
            0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
        }
    }
}

/// Says on the process's own stderr that the calling test is skipped, and why, as
/// `SKIPPED <test>: <reason>`. Written directly, not with `eprintln!`, which the test
/// harness captures (and drops) for a test that passes: a skip is seen in every
/// `cargo test` run (`cargo test 2>&1 | grep SKIPPED` lists them).
/// The device `opened` gave, or `None` after a [`skipped`] line naming why; under
/// `ROCM_VISION_REQUIRE_GPU=1` (the GPU tier) a device that did not open fails the test.
pub fn device_or_skip<D, E: std::fmt::Display>(opened: Result<D, E>) -> Option<D> {
    match opened {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(
                !std::env::var("ROCM_VISION_REQUIRE_GPU").is_ok_and(|v| v == "1"),
                "ROCM_VISION_REQUIRE_GPU=1 but {e}"
            );
            skipped(format!("no ROCm device: {e}"));
            None
        }
    }
}

pub fn skipped(reason: impl std::fmt::Display) {
    use std::io::Write;
    let thread = std::thread::current();
    // One line (a reason's first), written at once so that parallel tests do not split it.
    let reason = reason.to_string();
    let first = reason.lines().next().unwrap_or_default().trim_end_matches(" Tried:");
    let line = format!("SKIPPED {}: {first}\n", thread.name().unwrap_or("a test"));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
