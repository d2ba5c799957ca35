//! The op vocabulary: what an elementwise, comparison, reduction, pooling or padding op is,
//! whatever device runs it (candle's `op.rs` plays this part in candle).
//!
//! Why in this crate: it is the bottom of the layering and depends on nothing, so the ROCm
//! backend and the root crate's CPU path both name these enums without either reaching up
//! or the CPU path depending on the ROCm crate; and the registry here already owns the op
//! names, as the `{op}` of the entry points (`unary_{op}_{dtype}`, `cmp_{op}_{dtype}`, ...).
//! Each enum's `name()` is that `{op}`; the tests check every variant against its family's
//! `ops` both ways, so the vocabulary and the kernels cannot drift apart. Nothing here is
//! GPU-specific: the CPU path maps the same variants onto candle's ops.

use crate::Family;
use crate::registry::family;

/// An enum of ops with `ALL` (every variant, in the registry's order) and `name()` (the
/// registry's `{op}`).
macro_rules! op_enum {
    ($(#[$doc:meta])* $enum:ident { $($(#[$vdoc:meta])* $variant:ident => $name:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $enum {
            $($(#[$vdoc])* $variant,)*
        }

        impl $enum {
            /// Every variant, in the order of the registry's op list.
            pub const ALL: [$enum; [$($name),*].len()] = [$($enum::$variant),*];

            /// The op's name in the kernel registry: the `{op}` of its family's entry points.
            pub const fn name(self) -> &'static str {
                match self {
                    $($enum::$variant => $name,)*
                }
            }
        }
    };
}

op_enum! {
    /// Elementwise ops of one operand: `out = op(x)`, some with a scalar parameter.
    UnaryOp {
        Neg => "neg",
        Exp => "exp",
        Log => "log",
        Sqrt => "sqrt",
        Abs => "abs",
        Relu => "relu",
        /// `x · sigmoid(x)`.
        Silu => "silu",
        /// GELU, tanh approximation.
        Gelu => "gelu",
        /// GELU with the exact erf.
        GeluErf => "gelu_erf",
        Sigmoid => "sigmoid",
        Tanh => "tanh",
        Sin => "sin",
        Cos => "cos",
        /// `1 / x`.
        Recip => "recip",
        /// `x²`.
        Sqr => "sqr",
        /// `x` where `x ≥ 0`, `param · x` elsewhere.
        LeakyRelu => "leaky_relu",
        /// `x^param`.
        Powf => "powf",
        /// `x` where `x ≥ 0`, `param · (e^x − 1)` elsewhere.
        Elu => "elu",
    }
}

impl UnaryOp {
    /// The family of its kernels: the ops whose parameter must be finite have their own
    /// (same signature, no vector path).
    pub fn family(self) -> &'static Family {
        match self {
            UnaryOp::Powf | UnaryOp::Elu => &family::UNARY_PARAM,
            _ => &family::UNARY,
        }
    }

    /// Whether the op reads its parameter (the others ignore it).
    pub fn takes_param(self) -> bool {
        matches!(self, UnaryOp::LeakyRelu | UnaryOp::Powf | UnaryOp::Elu)
    }
}

op_enum! {
    /// Elementwise ops of two operands, with broadcasting: `out = lhs op rhs`.
    BinaryOp {
        Add => "add",
        Sub => "sub",
        Mul => "mul",
        Div => "div",
        Maximum => "maximum",
        Minimum => "minimum",
    }
}

impl BinaryOp {
    pub fn family(self) -> &'static Family {
        &family::BINARY
    }
}

op_enum! {
    /// Comparisons, elementwise with broadcasting: a u8 mask, 1 where `lhs op rhs` holds.
    CmpOp {
        Eq => "eq",
        Ne => "ne",
        Lt => "lt",
        Le => "le",
        Gt => "gt",
        Ge => "ge",
    }
}

impl CmpOp {
    pub fn family(self) -> &'static Family {
        &family::CMP
    }
}

op_enum! {
    /// Reductions over a dimension; the arg reductions give u32 positions.
    ReduceOp {
        Sum => "sum",
        Max => "max",
        Min => "min",
        /// Position of the first maximum.
        ArgMax => "argmax",
        /// Position of the first minimum.
        ArgMin => "argmin",
    }
}

impl ReduceOp {
    /// Whether it gives positions (u32) rather than values.
    pub fn is_arg(self) -> bool {
        matches!(self, ReduceOp::ArgMax | ReduceOp::ArgMin)
    }

    /// The family that reduces the last (contiguous) dimension.
    pub fn lastdim_family(self) -> &'static Family {
        if self.is_arg() { &family::ARGREDUCE_LASTDIM } else { &family::REDUCE_LASTDIM }
    }

    /// The family that reduces a middle dimension.
    pub fn strided_family(self) -> &'static Family {
        if self.is_arg() { &family::ARGREDUCE_STRIDED } else { &family::REDUCE_STRIDED }
    }
}

op_enum! {
    /// Pooling over a window.
    PoolOp {
        Max => "max",
        Avg => "avg",
    }
}

impl PoolOp {
    pub fn family(self) -> &'static Family {
        &family::POOL2D
    }
}

op_enum! {
    /// How padding fills the border.
    PadMode {
        Zeros => "zero",
        /// Mirror without repeating the edge (PyTorch's `reflect`): `[a b c]` padded by 2 on
        /// the left is `[c b a b c]`.
        Reflect => "reflect",
        /// Repeat the edge value (PyTorch's `replicate`).
        Replicate => "replicate",
    }
}

impl PadMode {
    pub fn family(self) -> &'static Family {
        &family::PAD2D
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant is an op of its family, and every op of the families has a variant.
    fn same_ops<T: Copy>(all: &[T], name: fn(T) -> &'static str, families: &[&Family], fam: fn(T) -> &'static Family) {
        for &op in all {
            assert!(fam(op).ops.contains(&name(op)), "{} is not an op of {}", name(op), fam(op).pattern);
        }
        for f in families {
            for op in f.ops {
                assert!(
                    all.iter().any(|&v| name(v) == *op && fam(v).export_macro == f.export_macro),
                    "{op} of {} has no variant",
                    f.pattern
                );
            }
        }
    }

    #[test]
    fn every_variant_is_an_op_of_its_family_and_back() {
        same_ops(&UnaryOp::ALL, UnaryOp::name, &[&family::UNARY, &family::UNARY_PARAM], UnaryOp::family);
        same_ops(&BinaryOp::ALL, BinaryOp::name, &[&family::BINARY], BinaryOp::family);
        same_ops(&CmpOp::ALL, CmpOp::name, &[&family::CMP], CmpOp::family);
        same_ops(&PoolOp::ALL, PoolOp::name, &[&family::POOL2D], PoolOp::family);
        same_ops(&PadMode::ALL, PadMode::name, &[&family::PAD2D], PadMode::family);
        same_ops(
            &ReduceOp::ALL,
            ReduceOp::name,
            &[&family::REDUCE_LASTDIM, &family::ARGREDUCE_LASTDIM],
            ReduceOp::lastdim_family,
        );
        same_ops(
            &ReduceOp::ALL,
            ReduceOp::name,
            &[&family::REDUCE_STRIDED, &family::ARGREDUCE_STRIDED],
            ReduceOp::strided_family,
        );
    }

    #[test]
    fn every_float_dtype_has_every_unary_kernel() {
        for op in UnaryOp::ALL {
            for d in crate::DType::FLOAT {
                let entry = op.family().entry_point(op.name(), d).expect("an entry point");
                assert!(crate::module_of(&entry).is_some(), "{entry}");
            }
        }
    }
}
