//! Elementwise ops, named by the vocabulary both devices share ([`kernels::ops`]): unary
//! (some with a parameter), binary with broadcasting, affine, comparison into a u8 mask and
//! selection by one.

use super::{Storage, Tensor};
use crate::cpu;
use crate::error::{Error, Result};
use candle_core::DType;
use kernels::ops::{BinaryOp, CmpOp, UnaryOp};

/// Methods `fn $name(&self)` for unary ops without a parameter.
macro_rules! unary {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $name(&self) -> Result<Tensor> {
                self.unary(UnaryOp::$op, 0.0)
            }
        )*
    };
}

/// Methods `fn $name(&self, rhs)` for binary ops with broadcasting.
macro_rules! binary {
    ($($(#[$doc:meta])* $name:ident => $op:ident),* $(,)?) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, rhs: &Tensor) -> Result<Tensor> {
                self.binary(BinaryOp::$op, rhs)
            }
        )*
    };
}

impl Tensor {
    /// `op(x)` on either device, `param` as [`UnaryOp`] documents it.
    fn unary(&self, op: UnaryOp, param: f64) -> Result<Tensor> {
        on_device!(self, t => cpu::unary(t, op, param), r => r.unary(op, param))
    }

    /// `self op rhs` with broadcasting on either device.
    fn binary(&self, op: BinaryOp, rhs: &Tensor) -> Result<Tensor> {
        self.same_device(rhs, op.name())?;
        match (&self.s, &rhs.s) {
            (Storage::Cpu(a), Storage::Cpu(b)) => self.wrap_cpu(cpu::binary(a, op, b)?),
            (Storage::Rocm(a), Storage::Rocm(b)) => self.wrap_rocm(a.binary(op, b)?),
            _ => unreachable!("same_device checked"),
        }
    }

    unary!(
        /// `x · sigmoid(x)`.
        silu => Silu,
        /// GELU, tanh approximation.
        gelu => Gelu,
        /// GELU with the exact erf.
        gelu_erf => GeluErf,
        relu => Relu,
        tanh => Tanh,
        exp => Exp,
        sqrt => Sqrt,
        sqr => Sqr,
        abs => Abs,
        neg => Neg,
        recip => Recip,
        /// `1 / (1 + e^{-x})`.
        sigmoid => Sigmoid,
    );

    binary!(
        /// `self + rhs` with broadcasting.
        add => Add,
        /// `self - rhs` with broadcasting.
        sub => Sub,
        /// `self · rhs` with broadcasting.
        mul => Mul,
        /// `self / rhs` with broadcasting.
        div => Div,
        maximum => Maximum,
        minimum => Minimum,
    );

    /// `x` where `x ≥ 0`, `slope · x` elsewhere.
    pub fn leaky_relu(&self, slope: f64) -> Result<Tensor> {
        self.unary(UnaryOp::LeakyRelu, slope)
    }

    /// `x^e` elementwise.
    pub fn powf(&self, e: f64) -> Result<Tensor> {
        self.unary(UnaryOp::Powf, e)
    }

    /// `x` where `x ≥ 0`, `alpha · (e^x − 1)` elsewhere.
    pub fn elu(&self, alpha: f64) -> Result<Tensor> {
        self.unary(UnaryOp::Elu, alpha)
    }

    /// `self · mul + add`.
    pub fn affine(&self, mul: f64, add: f64) -> Result<Tensor> {
        on_device!(self, t => t.affine(mul, add), r => r.affine(mul, add))
    }

    /// `self op rhs` elementwise with broadcasting: a u8 tensor, 1 where it holds.
    pub fn cmp(&self, op: CmpOp, rhs: &Tensor) -> Result<Tensor> {
        self.same_device(rhs, "cmp")?;
        if self.dtype() != rhs.dtype() {
            return Err(Error::op("cmp", format!("dtypes differ: {:?} and {:?}", self.dtype(), rhs.dtype())));
        }
        match &self.s {
            Storage::Cpu(a) => self.wrap_cpu(cpu::cmp(a, op, self.cpu_operand(rhs, "cmp")?)?),
            Storage::Rocm(a) => self.wrap_rocm(a.cmp(op, self.rocm_operand(rhs, "cmp")?)?),
        }
    }

    /// `self` is a u8 mask of the shape of `on_true` and `on_false`: `on_true` where it is
    /// non-zero, `on_false` elsewhere.
    pub fn where_cond(&self, on_true: &Tensor, on_false: &Tensor) -> Result<Tensor> {
        self.same_device(on_true, "where_cond")?;
        self.same_device(on_false, "where_cond")?;
        if self.dtype() != DType::U8 {
            return Err(Error::op("where_cond", format!("the mask must be u8, got {:?}", self.dtype())));
        }
        if on_true.dtype() != on_false.dtype() {
            return Err(Error::op(
                "where_cond",
                format!("on_true is {:?} but on_false is {:?}", on_true.dtype(), on_false.dtype()),
            ));
        }
        match &self.s {
            Storage::Cpu(m) => self.wrap_cpu(
                m.where_cond(self.cpu_operand(on_true, "where_cond")?, self.cpu_operand(on_false, "where_cond")?)?,
            ),
            Storage::Rocm(m) => self.wrap_rocm(
                m.where_cond(self.rocm_operand(on_true, "where_cond")?, self.rocm_operand(on_false, "where_cond")?)?,
            ),
        }
    }
}
