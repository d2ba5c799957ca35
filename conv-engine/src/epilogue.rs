//! What a convolution does to its accumulator before it writes it, once, on every device:
//! `out = (act(acc + bias) + residual) · scale`. Real-CUGAN's conv + LeakyReLU, the VAE
//! resnets' second conv + shortcut and the upsamplers' conv then make no second pass over
//! memory. The GPU kernels read the same definition through `rv_epilogue` (prelude.h).

/// The activation of an epilogue, in f32.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Activation {
    #[default]
    Identity,
    Relu,
    /// `x ≥ 0 ? x : x·slope` (ncnn's and PyTorch's LeakyReLU).
    LeakyRelu(f32),
    /// `x · sigmoid(x)`.
    Silu,
    /// GELU, tanh approximation (PyTorch's `approximate="tanh"`).
    Gelu,
}

impl Activation {
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Activation::Identity => x,
            Activation::Relu => x.max(0.0),
            Activation::LeakyRelu(slope) => {
                if x >= 0.0 {
                    x
                } else {
                    x * slope
                }
            }
            Activation::Silu => x / (1.0 + (-x).exp()),
            Activation::Gelu => {
                const SQRT_2_OVER_PI: f32 = 0.797_884_6;
                0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)).tanh())
            }
        }
    }

    /// The kernels' code (`rv_epilogue.act`).
    pub fn code(self) -> i32 {
        match self {
            Activation::Identity => 0,
            Activation::Relu => 1,
            Activation::Silu => 2,
            Activation::LeakyRelu(_) => 3,
            Activation::Gelu => 4,
        }
    }

    /// The activation's parameter (`rv_epilogue.alpha`): LeakyReLU's slope, else 0.
    pub fn alpha(self) -> f32 {
        match self {
            Activation::LeakyRelu(slope) => slope,
            _ => 0.0,
        }
    }
}

/// `out = (act(acc + bias) + residual) · scale`, with the residual an NCHW tensor of the
/// output's shape and dtype (`T` is its element type, or a device array).
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<R> {
    pub activation: Activation,
    pub residual: Option<R>,
    pub scale: f32,
}

impl<R> Default for Epilogue<R> {
    fn default() -> Self {
        Epilogue { activation: Activation::Identity, residual: None, scale: 1.0 }
    }
}

impl<R> Epilogue<R> {
    /// Only the bias: what a plain convolution writes.
    pub fn is_plain(&self) -> bool {
        self.activation == Activation::Identity && self.residual.is_none() && self.scale == 1.0
    }

    pub fn with_activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }

    pub fn with_residual<S>(self, residual: S) -> Epilogue<S> {
        Epilogue { activation: self.activation, residual: Some(residual), scale: self.scale }
    }

    pub fn with_scale(mut self, scale: f32) -> Self {
        self.scale = scale;
        self
    }

    /// The same epilogue with the residual mapped (a tensor to its slice, a view to a chunk).
    pub fn map_residual<S>(&self, f: impl FnOnce(&R) -> S) -> Epilogue<S> {
        Epilogue { activation: self.activation, residual: self.residual.as_ref().map(f), scale: self.scale }
    }

    /// The epilogue of one value: `acc` already holds the bias.
    #[inline]
    pub fn apply(&self, acc: f32, residual: f32) -> f32 {
        (self.activation.apply(acc) + residual) * self.scale
    }

    /// [`Self::apply`] on a row of accumulators (bias included) in place, with `residual`
    /// yielding the row's residual values in order (0 without one, as in `apply`). The
    /// activation is matched once per row, so the loop vectorises: a match per value, not
    /// inlined, was 14% of Real-CUGAN's CPU time (perf, 2026-12-04).
    #[inline(always)]
    pub fn apply_row(&self, acc: &mut [f32], residual: Option<impl Iterator<Item = f32>>) {
        #[inline(always)]
        fn each(acc: &mut [f32], residual: Option<impl Iterator<Item = f32>>, scale: f32, act: impl Fn(f32) -> f32) {
            match residual {
                Some(r) => acc.iter_mut().zip(r).for_each(|(v, r)| *v = (act(*v) + r) * scale),
                None => acc.iter_mut().for_each(|v| *v = (act(*v) + 0.0) * scale),
            }
        }
        let scale = self.scale;
        match self.activation {
            Activation::Identity => each(acc, residual, scale, |x| x),
            Activation::Relu => each(acc, residual, scale, |x| x.max(0.0)),
            Activation::LeakyRelu(slope) => each(acc, residual, scale, |x| if x >= 0.0 { x } else { x * slope }),
            act @ (Activation::Silu | Activation::Gelu) => each(acc, residual, scale, |x| act.apply(x)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activations_follow_their_definitions() {
        let xs = [-3.0f32, -0.5, 0.0, 0.25, 2.0];
        for &x in &xs {
            assert_eq!(Activation::Identity.apply(x), x);
            assert_eq!(Activation::Relu.apply(x), if x > 0.0 { x } else { 0.0 });
            assert_eq!(Activation::LeakyRelu(0.1).apply(x), if x >= 0.0 { x } else { 0.1 * x });
            let silu = x as f64 / (1.0 + (-x as f64).exp());
            assert!((Activation::Silu.apply(x) as f64 - silu).abs() <= 1e-6 * silu.abs().max(1.0));
            let xd = x as f64;
            let gelu = 0.5 * xd * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (xd + 0.044715 * xd.powi(3))).tanh());
            assert!((Activation::Gelu.apply(x) as f64 - gelu).abs() <= 1e-6 * gelu.abs().max(1.0), "{x}");
        }
        let e = Epilogue::<()>::default().with_activation(Activation::Relu).with_scale(0.5).with_residual(());
        assert_eq!(e.apply(-2.0, 3.0), 1.5);
        assert_eq!(e.apply(4.0, 1.0), 2.5);
        assert!(Epilogue::<()>::default().is_plain());
    }

    #[test]
    fn a_row_matches_each_value() {
        let xs: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) * 0.37).collect();
        let res: Vec<f32> = (0..37).map(|i| (i as f32 * 0.91).sin()).collect();
        for act in
            [Activation::Identity, Activation::Relu, Activation::LeakyRelu(0.1), Activation::Silu, Activation::Gelu]
        {
            for residual in [None, Some(&res)] {
                let e = Epilogue::<()>::default().with_activation(act).with_scale(0.75);
                let mut row = xs.clone();
                e.apply_row(&mut row, residual.map(|r| r.iter().copied()));
                for (j, (&got, &x)) in row.iter().zip(&xs).enumerate() {
                    let want = e.apply(x, residual.map_or(0.0, |r| r[j]));
                    assert_eq!(got.to_bits(), want.to_bits(), "{act:?} residual {} at {j}", residual.is_some());
                }
            }
        }
    }
}
