//! The families of `igemm_mma.hip`: NHWC implicit GEMM on matrix cores and FMA, split-K, and
//! the MMA layer's own tile test (the NHWC packing is `nhwc_pack.hip`).

use crate::abi::{arg, cptr, mptr};
use crate::{Arg, ArgType, Elem, Family, Launch, Types};

const IGEMM_MMA_NAMES: &[&str] = &["128x128_2x4", "128x64_2x2", "64x128_2x2", "64x64_2x2", "128x32_4x1", "128x16_4x1"];
const IGEMM_MMA_NV_NAMES: &[&str] = &["128x128_2x2", "128x256_2x4", "256x128_4x2"];
const IGEMM_EMU_NAMES: &[&str] = &["128x128_2x4", "64x64_2x2"];
const IGEMM_SIMT_NAMES: &[&str] = &["128x128_8x8", "128x64_8x4", "64x64_4x4", "128x32_4x4", "128x16_4x2"];

const IGEMM_NHWC_ARGS: &[Arg] = &[
    arg("g", ArgType::Conv2d, "phase-local forward geometry over the NHWC band (igemm_mma.hip)"),
    arg("cgp", ArgType::I32, "channel slots per group in the NHWC input and packed weights (multiple of 16 bytes)"),
    arg("splits", ArgType::I32, "split-K factor (grid.z = groups * splits); > 1 writes `partial`"),
    arg("ep", ArgType::Epilogue, "epilogue: activation after the bias, then the residual, then the scale"),
    arg("os_n", ArgType::I64, "output view: elements between images"),
    arg("os_c", ArgType::I64, "output view: elements between channels"),
    arg("os_y", ArgType::I64, "output view: elements between grid rows"),
    arg("os_x", ArgType::I64, "output view: elements between grid columns"),
    arg("in", cptr(Elem::T), "NHWC input band [n][h][w][groups*cgp]"),
    arg("w", cptr(Elem::T), "packed weights [k][r][s][cgp]"),
    arg("bias", cptr(Elem::T), "bias [k], or null"),
    arg("res", cptr(Elem::T), "residual read through the output view, or null"),
    arg("partial", mptr(Elem::F32), "split-K partial sums [splits][k][n*p*q] (unused when splits == 1)"),
    arg("out", mptr(Elem::T), "output, through the view"),
];

/// `igemm_mma_{op}_{dtype}`
pub const IGEMM_MMA: Family = Family {
    pattern: "igemm_mma_{op}_{dtype}",
    export_macro: "RV_EXPORT_IGEMM_MMA",
    ops: IGEMM_MMA_NAMES,
    types: Types::Half,
    args: IGEMM_NHWC_ARGS,
    launch: Launch::IgemmNhwc,
    doc: "NHWC implicit-GEMM convolution on the compiling target's matrix cores (WMMA gfx11/gfx12, MFMA CDNA, mma.sync NVIDIA), cp.async pipeline on NVIDIA, fused bias/activation/residual epilogue, split-K partials.",
};

/// `igemm_mma_{op}_{dtype}`
pub const IGEMM_MMA_NV: Family = Family {
    pattern: "igemm_mma_{op}_{dtype}",
    export_macro: "RV_EXPORT_IGEMM_MMA_NV",
    ops: IGEMM_MMA_NV_NAMES,
    types: Types::Half,
    args: IGEMM_NHWC_ARGS,
    launch: Launch::IgemmNhwc,
    doc: "The same kernel with 64x64 warp tiles, NVIDIA only (the GPU tier's tile family); on AMD targets the entry points exist and trap, and the host never dispatches them there.",
};

/// `igemm_emu11_{op}_{dtype}`
pub const IGEMM_EMU11: Family = Family {
    pattern: "igemm_emu11_{op}_{dtype}",
    export_macro: "RV_EXPORT_IGEMM_EMU11",
    ops: IGEMM_EMU_NAMES,
    types: Types::Half,
    args: IGEMM_NHWC_ARGS,
    launch: Launch::IgemmNhwc,
    doc: "The same kernel with the RDNA3 (gfx11) fragment code and the WMMA instruction emulated by warp shuffles (warp 32): the GPU tier's check of the gfx11 layout.",
};

/// `igemm_emu12_{op}_{dtype}`
pub const IGEMM_EMU12: Family = Family {
    pattern: "igemm_emu12_{op}_{dtype}",
    export_macro: "RV_EXPORT_IGEMM_EMU12",
    ops: IGEMM_EMU_NAMES,
    types: Types::Half,
    args: IGEMM_NHWC_ARGS,
    launch: Launch::IgemmNhwc,
    doc: "The same kernel with the RDNA4 (gfx12) fragment code, WMMA emulated by warp shuffles.",
};

/// `igemm_simt_{op}_{dtype}`
pub const IGEMM_SIMT: Family = Family {
    pattern: "igemm_simt_{op}_{dtype}",
    export_macro: "RV_EXPORT_IGEMM_SIMT",
    ops: IGEMM_SIMT_NAMES,
    types: Types::F32,
    args: IGEMM_NHWC_ARGS,
    launch: Launch::IgemmNhwc,
    doc: "NHWC implicit-GEMM convolution in f32 FMA (no TF32), the same iterators, pipeline and epilogue.",
};

/// `igemm_splitk_{dtype}`
pub const IGEMM_SPLITK: Family = Family {
    pattern: "igemm_splitk_{dtype}",
    export_macro: "RV_EXPORT_IGEMM_SPLITK",
    ops: &[],
    types: Types::Gemm,
    args: &[
        arg("g", ArgType::Conv2d, "the geometry the partials were computed for"),
        arg("splits", ArgType::I32, "number of partial sums"),
        arg("ep", ArgType::Epilogue, "epilogue: activation after the bias, then the residual, then the scale"),
        arg("os_n", ArgType::I64, "output view: elements between images"),
        arg("os_c", ArgType::I64, "output view: elements between channels"),
        arg("os_y", ArgType::I64, "output view: elements between grid rows"),
        arg("os_x", ArgType::I64, "output view: elements between grid columns"),
        arg("partial", cptr(Elem::F32), "[splits][k][n*p*q] f32"),
        arg("bias", cptr(Elem::T), "bias [k], or null"),
        arg("res", cptr(Elem::T), "residual through the view, or null"),
        arg("out", mptr(Elem::T), "output, through the view"),
    ],
    launch: Launch::GridStride,
    doc: "Split-K reduction: sums the partials and applies the epilogue (bias, activation, residual, cast).",
};

/// `mma_tile_native_{dtype}`
pub const MMA_TILE_NATIVE: Family = Family {
    pattern: "mma_tile_native_{dtype}",
    export_macro: "RV_EXPORT_MMA_TILE_NATIVE",
    ops: &[],
    types: Types::Half,
    args: MMA_TILE_ARGS,
    launch: Launch::MmaTile,
    doc: "One 16x16x32 product through the compiling target's MMA fragment code (the layer's own test).",
};

/// `mma_tile_emu11_{dtype}`
pub const MMA_TILE_EMU11: Family = Family {
    pattern: "mma_tile_emu11_{dtype}",
    export_macro: "RV_EXPORT_MMA_TILE_EMU11",
    ops: &[],
    types: Types::Half,
    args: MMA_TILE_ARGS,
    launch: Launch::MmaTile,
    doc: "One 16x16x32 product through the gfx11 fragment code, WMMA emulated by shuffles.",
};

/// `mma_tile_emu12_{dtype}`
pub const MMA_TILE_EMU12: Family = Family {
    pattern: "mma_tile_emu12_{dtype}",
    export_macro: "RV_EXPORT_MMA_TILE_EMU12",
    ops: &[],
    types: Types::Half,
    args: MMA_TILE_ARGS,
    launch: Launch::MmaTile,
    doc: "One 16x16x32 product through the gfx12 fragment code, WMMA emulated by shuffles.",
};

pub(super) const FAMILIES: &[Family] = &[
    IGEMM_MMA,
    IGEMM_MMA_NV,
    IGEMM_EMU11,
    IGEMM_EMU12,
    IGEMM_SIMT,
    IGEMM_SPLITK,
    MMA_TILE_NATIVE,
    MMA_TILE_EMU11,
    MMA_TILE_EMU12,
];

const MMA_TILE_ARGS: &[Arg] = &[
    arg("a", cptr(Elem::T), "A [16][32] row-major"),
    arg("b", cptr(Elem::T), "B as [16 n][32 k] row-major (K contiguous)"),
    arg("c", cptr(Elem::F32), "C [16][16] f32"),
    arg("d", mptr(Elem::F32), "D = C + A * B, [16][16] f32"),
];
