//! The families of `conv.hip`: im2col, col2im and the direct convolutions.

use crate::abi::{arg, cptr, mptr};
use crate::{Arg, ArgType, Elem, Family, Launch, Types};

use super::GEOM;

pub(super) const CONV_ARGS: &[Arg] = &[
    GEOM,
    arg("in", cptr(Elem::T), "input [n, c, h, w]"),
    arg("w", cptr(Elem::T), "weights: [k, c/groups, r, s] forward, [c, k/groups, r, s] transposed"),
    arg("bias", cptr(Elem::T), "bias [k], or null"),
    arg("out", mptr(Elem::T), "output [n, k, p, q]"),
];

/// `im2col_{bits}`
pub const IM2COL: Family = Family {
    pattern: "im2col_{bits}",
    export_macro: "RV_EXPORT_IM2COL",
    ops: &[],
    types: Types::Bits,
    args: &[
        GEOM,
        arg("pix_begin", ArgType::I64, "first output pixel (y*q + x) of the chunk"),
        arg("pix_count", ArgType::I64, "output pixels in the chunk"),
        arg("in", cptr(Elem::T), "one image [c, h, w]"),
        arg("col", mptr(Elem::T), "[c*r*s, pix_count] row-major"),
    ],
    launch: Launch::Im2col,
    doc: "Column matrix of one image for a range of output pixels, so out[k, pix] = W[k, :] . col[:, pix] is a row-major GEMM.",
};

/// `col2im_{dtype}`
pub const COL2IM: Family = Family {
    pattern: "col2im_{dtype}",
    export_macro: "RV_EXPORT_COL2IM",
    ops: &[],
    types: Types::Float,
    args: &[
        GEOM,
        arg("col", cptr(Elem::T), "[c*r*s, p*q] row-major"),
        arg("img", mptr(Elem::T), "one image [c, h, w]"),
    ],
    launch: Launch::GridStride,
    doc: "Adjoint of im2col (gather, deterministic): conv_transpose as GEMM then col2im, with the geometry of the forward conv whose input is the transposed conv's output.",
};

/// `conv2d_direct_{dtype}`
pub const CONV2D_DIRECT: Family = Family {
    pattern: "conv2d_direct_{dtype}",
    export_macro: "RV_EXPORT_CONV2D_DIRECT",
    ops: &[],
    types: Types::Float,
    args: CONV_ARGS,
    launch: Launch::GridStride,
    doc: "Direct convolution, one thread per output element: reference and fallback for any parameters.",
};

/// `conv_transpose2d_direct_{dtype}`
pub const CONV_TRANSPOSE2D_DIRECT: Family = Family {
    pattern: "conv_transpose2d_direct_{dtype}",
    export_macro: "RV_EXPORT_CONV_TRANSPOSE2D_DIRECT",
    ops: &[],
    types: Types::Float,
    args: CONV_ARGS,
    launch: Launch::GridStride,
    doc: "Direct transposed convolution (gather form): reference and fallback.",
};

/// `conv_epilogue_{dtype}`
pub const CONV_EPILOGUE: Family = Family {
    pattern: "conv_epilogue_{dtype}",
    export_macro: "RV_EXPORT_CONV_EPILOGUE",
    ops: &[],
    types: Types::Gemm,
    args: &[
        arg("numel", ArgType::I64, "elements of the output"),
        arg("plane", ArgType::I64, "output pixels per channel (p*q)"),
        arg("channels", ArgType::I64, "output channels (k)"),
        arg("ep", ArgType::Epilogue, "activation, residual and scale"),
        arg("bias", cptr(Elem::T), "bias [k], or null"),
        arg("res", cptr(Elem::T), "residual of the output's shape, or null"),
        arg("out", mptr(Elem::T), "the contiguous NCHW output, updated in place"),
    ],
    launch: Launch::GridStride,
    doc: "A convolution's epilogue in one pass over its output, for the algorithms that cannot fuse it.",
};

pub(super) const FAMILIES: &[Family] = &[IM2COL, COL2IM, CONV2D_DIRECT, CONV_TRANSPOSE2D_DIRECT, CONV_EPILOGUE];
