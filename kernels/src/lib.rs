//! GPU kernel sources of rocm-vision and a registry of their entry points.
//!
//! Every kernel is written once, in the C++ dialect that HIP (hipcc, hiprtc) and CUDA
//! (nvcc, NVRTC) share. [`PRELUDE`] (`prelude.h`) maps the few names that differ between the
//! two toolkits onto names of our own (`rv_*`, `RV_*`) and never redefines a toolkit name.
//! The sources use the `.hip` extension: hipcc then needs no `-x hip`, and the run-time
//! compilers (hiprtc, NVRTC) take a string and do not look at the extension at all.
//!
//! # Compiling a module at run time
//! Each [`Module`] is one translation unit. It starts with `#include "prelude.h"`; give
//! hiprtc/NVRTC the prelude as an in-memory header named [`PRELUDE_NAME`] (the `headers` and
//! `includeNames` arguments of `hiprtcCreateProgram`/`nvrtcCreateProgram`), or compile
//! [`Module::source_with_prelude`], which has the prelude pasted in. No other file is
//! included; the fp16/bf16 headers come from the toolkit (built into hiprtc; found through
//! `-I<cuda>/include` with NVRTC). Options used by the checks: hiprtc
//! `--offload-arch=<gcnArchName without features> -O3`; NVRTC `--gpu-architecture=sm_XX
//! -I<cuda include dir>` (NVRTC rejects `-O3`).
//!
//! # Calling conventions
//! Every entry point is `extern "C"` and named after its family's pattern ([`Family`]),
//! e.g. `unary_silu_f16`, `cast_f32_bf16`, `copy_strided_b16`,
//! `igemm_fwd_64x64x16_4x4_bf16`. [`Family::args`] lists the arguments in order with their
//! C types; pointers are device pointers, `rv_strided` and `rv_conv2d` are passed by value
//! and mirrored here by [`StridedLayout`] and [`Conv2dParams`]. Scalars (`double`) are f64
//! whatever the tensor dtype. [`Family::launch`] gives the launch geometry. All kernels are
//! compiled with `__launch_bounds__(256)`: never launch more than [`MAX_THREADS`] threads
//! per block. Kernels that reduce across a block need blockDim.x to be a multiple of the
//! warp size (32 or 64; 256 suits both). Dtype suffixes: f32 f16 bf16 f64 u8 u32 i64; data
//! movement kernels are per element size instead: b8 b16 b32 b64 ([`DType::bits_suffix`]).

use std::fmt;

/// The prelude header, included by every module.
pub const PRELUDE: &str = include_str!("prelude.h");
/// The name under which the sources include the prelude (`#include "prelude.h"`).
pub const PRELUDE_NAME: &str = "prelude.h";
/// Every kernel is compiled for at most this many threads per block (`RV_MAX_THREADS`).
pub const MAX_THREADS: u32 = 256;
/// Largest rank a [`StridedLayout`] can describe (`RV_MAX_DIMS`).
pub const MAX_DIMS: usize = 6;

/// Element types of the kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    F32,
    F16,
    BF16,
    F64,
    U8,
    U32,
    I64,
}

impl DType {
    /// Every dtype, in the order the sources instantiate them.
    pub const ALL: [DType; 7] = [DType::F32, DType::F16, DType::BF16, DType::F64, DType::U8, DType::U32, DType::I64];
    /// The floating-point dtypes.
    pub const FLOAT: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];
    /// The dtypes of the convolution GEMM kernels (f32 accumulation).
    pub const GEMM: [DType; 3] = [DType::F32, DType::F16, DType::BF16];

    /// The suffix of the entry-point names (`unary_exp_bf16`).
    pub fn suffix(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::F64 => "f64",
            DType::U8 => "u8",
            DType::U32 => "u32",
            DType::I64 => "i64",
        }
    }

    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::U32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// The suffix of the data-movement kernels for this dtype (`copy_strided_b16` for f16
    /// and bf16).
    pub fn bits_suffix(self) -> &'static str {
        match self.size_in_bytes() {
            1 => "b8",
            2 => "b16",
            4 => "b32",
            _ => "b64",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.suffix())
    }
}

/// What the `{dtype}` (or `{bits}`, `{src}`/`{dst}`) part of a family's pattern ranges over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Types {
    /// f32 f16 bf16 f64
    Float,
    /// f32 f16 bf16 (the GEMM kernels)
    Gemm,
    /// every dtype
    All,
    /// element sizes b8 b16 b32 b64 (pattern uses `{bits}`)
    Bits,
    /// every ordered pair of distinct dtypes (pattern uses `{src}` and `{dst}`)
    CastPairs,
    /// f16 bf16 (the matrix-core kernels)
    Half,
    /// f32 only (the FMA NHWC implicit GEMM)
    F32,
    /// element sizes b16 b32 (pattern uses `{bits}`): the packing kernels of f16/bf16 and f32
    Bits16And32,
    /// u32 only (the raw random stream)
    U32,
}

impl Types {
    fn suffixes(self) -> Vec<String> {
        let from = |d: &[DType]| d.iter().map(|d| d.suffix().to_string()).collect();
        match self {
            Types::Float => from(&DType::FLOAT),
            Types::Gemm => from(&DType::GEMM),
            Types::All => from(&DType::ALL),
            Types::Bits => ["b8", "b16", "b32", "b64"].iter().map(|s| s.to_string()).collect(),
            Types::Half => from(&[DType::F16, DType::BF16]),
            Types::F32 => from(&[DType::F32]),
            Types::Bits16And32 => ["b16", "b32"].iter().map(|s| s.to_string()).collect(),
            Types::U32 => from(&[DType::U32]),
            Types::CastPairs => {
                let mut v = Vec::new();
                for s in DType::ALL {
                    for d in DType::ALL {
                        if s != d {
                            v.push(format!("{}_{}", s.suffix(), d.suffix()));
                        }
                    }
                }
                v
            }
        }
    }
}

/// The element type behind a pointer or value argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elem {
    /// The kernel's dtype (`T`).
    T,
    /// The source dtype of a cast (`S`).
    Src,
    /// The destination dtype of a cast (`D`).
    Dst,
    /// Always u32 (argmax/argmin indices).
    U32,
    /// Always u64 (exact-sum buckets).
    U64,
    /// Always f32 (workspaces of statistics).
    F32,
    /// Always u8 (comparison results, where_cond masks).
    U8,
    /// The index type that the entry point's `{op}` names (`u32` or `i64`, the indexing
    /// kernels). The export macros take it as a token `IDX` and declare `rv_##IDX`.
    Idx,
}

impl Elem {
    fn c_name(self) -> &'static str {
        match self {
            Elem::T => "T",
            Elem::Src => "S",
            Elem::Dst => "D",
            Elem::U32 => "rv_u32",
            Elem::U64 => "rv_u64",
            Elem::F32 => "float",
            Elem::U8 => "rv_u8",
            Elem::Idx => "rv_##IDX",
        }
    }
}

/// The type of one kernel argument, as the host must pass it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgType {
    /// `rv_i32`: i32.
    I32,
    /// `rv_i64`: i64.
    I64,
    /// `double`: f64.
    F64,
    /// `rv_strided` by value: a [`StridedLayout`] (112 bytes).
    Strided,
    /// `rv_conv2d` by value: a [`Conv2dParams`] (64 bytes).
    Conv2d,
    /// A device pointer to `elem`; `mutable` when the kernel writes through it.
    Ptr { elem: Elem, mutable: bool },
    /// A value of the element type itself (f16/bf16: their 2-byte pattern).
    Value(Elem),
}

impl ArgType {
    /// The C spelling of the type in the kernel signature (`const T*`, `rv_strided`).
    pub fn c_type(self) -> String {
        match self {
            ArgType::I32 => "rv_i32".into(),
            ArgType::I64 => "rv_i64".into(),
            ArgType::F64 => "double".into(),
            ArgType::Strided => "rv_strided".into(),
            ArgType::Conv2d => "rv_conv2d".into(),
            ArgType::Ptr { elem, mutable: false } => format!("const {}*", elem.c_name()),
            ArgType::Ptr { elem, mutable: true } => format!("{}*", elem.c_name()),
            ArgType::Value(elem) => elem.c_name().into(),
        }
    }

    /// Size in bytes of the argument, given the kernel's dtype for `Value(T)`.
    pub fn size_in_bytes(self, dtype: DType) -> usize {
        match self {
            ArgType::I32 => 4,
            ArgType::I64 | ArgType::F64 | ArgType::Ptr { .. } => 8,
            ArgType::Strided => std::mem::size_of::<StridedLayout>(),
            ArgType::Conv2d => std::mem::size_of::<Conv2dParams>(),
            ArgType::Value(_) => dtype.size_in_bytes(),
        }
    }
}

/// One argument of a kernel: its name in the source, type and meaning.
#[derive(Clone, Copy, Debug)]
pub struct Arg {
    pub name: &'static str,
    pub ty: ArgType,
    pub doc: &'static str,
}

const fn arg(name: &'static str, ty: ArgType, doc: &'static str) -> Arg {
    Arg { name, ty, doc }
}
const fn cptr(elem: Elem) -> ArgType {
    ArgType::Ptr { elem, mutable: false }
}
const fn mptr(elem: Elem) -> ArgType {
    ArgType::Ptr { elem, mutable: true }
}

/// How a family is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launch {
    /// 1-D: blockDim.x <= 256, any gridDim.x (the kernel loops, grid-stride).
    GridStride,
    /// One block per row, rows looped over gridDim.x: blockDim.x a multiple of the warp
    /// size, <= 256 (256 recommended), any gridDim.x.
    BlockPerRow,
    /// blockDim = (32, 8, 1); grid = (ceil(cols/32), ceil(rows/32), min(batch, 65535)).
    TransposeTiles,
    /// grid = (chunks, groups, n), n <= 65535; blockDim.x a multiple of the warp size, <= 256.
    GroupChunks,
    /// blockDim = (256, 1, 1); grid = (ceil(pix_count/256), min(c*r*s, 65535), 1).
    Im2col,
    /// blockDim = (config.threads(), 1, 1); grid = (ceil(n*p*q / bm), ceil((k/groups) / bn),
    /// groups), with the [`IgemmConfig`] named in the entry point.
    Igemm,
    /// blockDim = (config.threads(), 1, 1) whatever the wave size; grid = (ceil(n*p*q / bm),
    /// ceil((k/groups) / bn), groups * splits), with the [`IgemmNhwcConfig`] named in the
    /// entry point.
    IgemmNhwc,
    /// One block of one warp: the device's wave size for the native family, 32 for the
    /// emulations.
    MmaTile,
    /// grid = (ceil(rows*cols / per_block), channels, 1); blockDim.x a multiple of 32, <= 256.
    ChannelBlocks,
}

/// A kernel family: one signature, instantiated per op and dtype.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    /// Entry-point name pattern: `{op}` takes each of `ops`; `{dtype}`, `{bits}` or
    /// `{src}_{dst}` each of `types`.
    pub pattern: &'static str,
    /// The macro whose lines (`RV_EXPORT_<KIND>(symbol, ...)`) define the entry points.
    pub export_macro: &'static str,
    pub ops: &'static [&'static str],
    pub types: Types,
    pub args: &'static [Arg],
    pub launch: Launch,
    pub doc: &'static str,
}

impl Family {
    /// Every entry-point name of the family.
    pub fn entry_points(&self) -> Vec<String> {
        let ops: Vec<&str> = if self.ops.is_empty() { vec![""] } else { self.ops.to_vec() };
        let mut names = Vec::new();
        for op in ops {
            for t in self.types.suffixes() {
                let name = self
                    .pattern
                    .replace("{op}", op)
                    .replace("{dtype}", &t)
                    .replace("{bits}", &t)
                    .replace("{src}_{dst}", &t);
                names.push(name);
            }
        }
        names
    }

    /// The entry point for `op` (ignored when the family has no ops) and `dtype`, if the
    /// family has it. Data-movement families take the dtype's element size.
    pub fn entry_point(&self, op: &str, dtype: DType) -> Option<String> {
        if !self.ops.is_empty() && !self.ops.contains(&op) {
            return None;
        }
        let t = match self.types {
            Types::Bits | Types::Bits16And32 => dtype.bits_suffix(),
            Types::CastPairs => return None,
            _ => dtype.suffix(),
        };
        let name = self.pattern.replace("{op}", op).replace("{dtype}", t).replace("{bits}", t);
        self.entry_points().contains(&name).then_some(name)
    }

    /// The C parameter list, as the sources must declare it.
    pub fn c_params(&self) -> Vec<String> {
        self.args.iter().map(|a| format!("{} {}", a.ty.c_type(), a.name)).collect()
    }
}

/// One kernel source file: one translation unit for hiprtc/NVRTC.
#[derive(Clone, Copy, Debug)]
pub struct Module {
    /// Short name (the file stem), also a good cache-key component.
    pub name: &'static str,
    /// File name under `kernels/src`.
    pub file: &'static str,
    /// The source text; it includes [`PRELUDE_NAME`].
    pub source: &'static str,
    pub families: &'static [Family],
}

impl Module {
    /// Every entry point this module defines.
    pub fn entry_points(&self) -> Vec<String> {
        self.families.iter().flat_map(|f| f.entry_points()).collect()
    }

    pub fn defines(&self, entry: &str) -> bool {
        self.families.iter().any(|f| f.entry_points().iter().any(|n| n == entry))
    }

    /// The family that defines `entry`.
    pub fn family_of(&self, entry: &str) -> Option<&'static Family> {
        self.families.iter().find(|f| f.entry_points().iter().any(|n| n == entry))
    }

    /// The source with the prelude pasted in place of its `#include`, for compilers that
    /// are given no headers.
    pub fn source_with_prelude(&self) -> String {
        self.source.replacen(&format!("#include \"{PRELUDE_NAME}\""), PRELUDE, 1)
    }
}

/// A tile configuration of the implicit-GEMM kernels (`igemm_{fwd,tconv}_<name>_<dtype>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IgemmConfig {
    pub name: &'static str,
    /// Block tile: output pixels (GEMM M).
    pub bm: u32,
    /// Block tile: output channels of the group (GEMM N).
    pub bn: u32,
    /// Reduction step (GEMM K).
    pub bk: u32,
    /// Thread tile.
    pub tm: u32,
    pub tn: u32,
}

impl IgemmConfig {
    pub const fn threads(&self) -> u32 {
        (self.bm / self.tm) * (self.bn / self.tn)
    }
    /// Grid for a problem: (ceil(n*p*q / bm), ceil(k_per_group / bn), groups).
    pub fn grid(&self, params: &Conv2dParams) -> (u32, u32, u32) {
        let m = params.n as u64 * params.p as u64 * params.q as u64;
        let kg = (params.k / params.groups.max(1)) as u64;
        (m.div_ceil(self.bm as u64) as u32, kg.div_ceil(self.bn as u64) as u32, params.groups as u32)
    }
}

/// The instantiated implicit-GEMM configurations.
pub const IGEMM_CONFIGS: [IgemmConfig; 3] = [
    IgemmConfig { name: "64x64x16_4x4", bm: 64, bn: 64, bk: 16, tm: 4, tn: 4 },
    IgemmConfig { name: "128x128x8_8x8", bm: 128, bn: 128, bk: 8, tm: 8, tn: 8 },
    IgemmConfig { name: "128x16x16_4x2", bm: 128, bn: 16, bk: 16, tm: 4, tn: 2 },
];

/// Entry-point name of an implicit-GEMM kernel.
pub fn igemm_entry_point(transposed: bool, config: &IgemmConfig, dtype: DType) -> Option<String> {
    if !DType::GEMM.contains(&dtype) {
        return None;
    }
    let kind = if transposed { "tconv" } else { "fwd" };
    Some(format!("igemm_{kind}_{}_{}", config.name, dtype.suffix()))
}

/// What computes the NHWC implicit GEMM of `igemm_mma.hip`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IgemmMath {
    /// Matrix cores through the prelude's MMA layer (f16/bf16, f32 accumulation). `a`, `b`
    /// are the 32-lane warps along M and N.
    Mma,
    /// FMA (f32): `a`, `b` are the thread tile (pixels x channels) of each of 256 threads.
    Simt,
}

/// A tile configuration of the NHWC implicit-GEMM kernels (`igemm_mma.hip`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IgemmNhwcConfig {
    /// `<bm>x<bn>_<a>x<b>`, the middle of the entry-point name.
    pub name: &'static str,
    pub math: IgemmMath,
    /// Block tile: output pixels (GEMM M).
    pub bm: u32,
    /// Block tile: output channels of the group (GEMM N).
    pub bn: u32,
    /// Mma: 32-lane warps along M; Simt: pixels per thread.
    pub a: u32,
    /// Mma: 32-lane warps along N; Simt: channels per thread.
    pub b: u32,
    /// LDS pipeline stages on NVIDIA (cp.async); AMD targets always use 2.
    pub nv_stages: u32,
    /// Instantiated for NVIDIA only (the GPU tier's own tile family); on AMD targets the
    /// entry point exists but traps, and the host never dispatches it there. These are the
    /// 64x64 warp tiles, whose RDNA3 fragments (replicated, 8 VGPRs each) would spill.
    pub nvidia_only: bool,
}

impl IgemmNhwcConfig {
    /// Threads per block, whatever the hardware wave size.
    pub const fn threads(&self) -> u32 {
        match self.math {
            IgemmMath::Mma => self.a * self.b * 32,
            IgemmMath::Simt => 256,
        }
    }
    /// Reduction elements per k-tile: 64-byte LDS rows.
    pub const fn k_tile(&self, elem_bytes: u32) -> u32 {
        64 / elem_bytes
    }
    /// LDS bytes of the pipeline with `stages` stages.
    pub const fn lds_bytes(&self, stages: u32) -> u32 {
        stages * (self.bm + self.bn) * 64
    }
    /// Grid for `m` output pixels (n*p*q of the phase), `kg` output channels per group,
    /// `groups` and `splits`.
    pub fn grid(&self, m: u64, kg: u64, groups: u32, splits: u32) -> (u32, u32, u32) {
        (m.div_ceil(self.bm as u64) as u32, kg.div_ceil(self.bn as u64) as u32, groups * splits)
    }
}

const fn mma_cfg(name: &'static str, bm: u32, bn: u32, a: u32, b: u32, nv_stages: u32) -> IgemmNhwcConfig {
    IgemmNhwcConfig { name, math: IgemmMath::Mma, bm, bn, a, b, nv_stages, nvidia_only: false }
}
const fn mma_cfg_nv(name: &'static str, bm: u32, bn: u32, a: u32, b: u32, nv_stages: u32) -> IgemmNhwcConfig {
    IgemmNhwcConfig { name, math: IgemmMath::Mma, bm, bn, a, b, nv_stages, nvidia_only: true }
}
const fn simt_cfg(name: &'static str, bm: u32, bn: u32, a: u32, b: u32, nv_stages: u32) -> IgemmNhwcConfig {
    IgemmNhwcConfig { name, math: IgemmMath::Simt, bm, bn, a, b, nv_stages, nvidia_only: false }
}

/// The matrix-core configurations (`igemm_mma_<name>_{f16,bf16}`).
pub const IGEMM_MMA_CONFIGS: [IgemmNhwcConfig; 9] = [
    mma_cfg("128x128_2x4", 128, 128, 2, 4, 3),
    mma_cfg("128x64_2x2", 128, 64, 2, 2, 4),
    mma_cfg("64x128_2x2", 64, 128, 2, 2, 4),
    mma_cfg("64x64_2x2", 64, 64, 2, 2, 4),
    mma_cfg("128x32_4x1", 128, 32, 4, 1, 4),
    mma_cfg("128x16_4x1", 128, 16, 4, 1, 4),
    // 64x64 warp tiles: half the LDS fragment loads per MMA of the 64x32 ones, and (for the
    // 8-warp blocks) half the L2 traffic per FLOP of a 128x128 block.
    mma_cfg_nv("128x128_2x2", 128, 128, 2, 2, 3),
    mma_cfg_nv("128x256_2x4", 128, 256, 2, 4, 2),
    mma_cfg_nv("256x128_4x2", 256, 128, 4, 2, 2),
];

/// The configurations instantiated with the gfx11 and gfx12 WMMA emulation
/// (`igemm_emu11_<name>_*`, `igemm_emu12_<name>_*`).
pub const IGEMM_EMU_CONFIGS: [IgemmNhwcConfig; 2] = [IGEMM_MMA_CONFIGS[0], IGEMM_MMA_CONFIGS[3]];

/// The FMA configurations (`igemm_simt_<name>_f32`).
pub const IGEMM_SIMT_CONFIGS: [IgemmNhwcConfig; 5] = [
    simt_cfg("128x128_8x8", 128, 128, 8, 8, 3),
    simt_cfg("128x64_8x4", 128, 64, 8, 4, 4),
    simt_cfg("64x64_4x4", 64, 64, 4, 4, 4),
    simt_cfg("128x32_4x4", 128, 32, 4, 4, 4),
    simt_cfg("128x16_4x2", 128, 16, 4, 2, 4),
];

/// Which fragment code an NHWC implicit-GEMM entry point runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MmaVariant {
    /// The compiling target's own matrix cores (or FMA for [`IgemmMath::Simt`]).
    Native,
    /// The RDNA3 (gfx11) fragment layout with the WMMA instruction emulated by shuffles.
    EmulateGfx11,
    /// The RDNA4 (gfx12) fragment layout, emulated.
    EmulateGfx12,
}

/// Entry-point name of an NHWC implicit-GEMM kernel, if instantiated.
pub fn igemm_nhwc_entry_point(variant: MmaVariant, config: &IgemmNhwcConfig, dtype: DType) -> Option<String> {
    let name = match (config.math, variant) {
        (IgemmMath::Simt, MmaVariant::Native) if dtype == DType::F32 => format!("igemm_simt_{}_f32", config.name),
        (IgemmMath::Mma, MmaVariant::Native) => format!("igemm_mma_{}_{}", config.name, dtype.suffix()),
        (IgemmMath::Mma, MmaVariant::EmulateGfx11) => format!("igemm_emu11_{}_{}", config.name, dtype.suffix()),
        (IgemmMath::Mma, MmaVariant::EmulateGfx12) => format!("igemm_emu12_{}_{}", config.name, dtype.suffix()),
        _ => return None,
    };
    module_of(&name).map(|_| name)
}

/// A strided view, mirrored from `rv_strided` (prelude.h): passed by value.
///
/// `dims` is the logical shape (for an input read by an elementwise kernel, the output's
/// shape), `strides` are in elements (0 along a broadcast dimension), row-major, last
/// dimension fastest. `contiguous` promises that the strides are the row-major strides of
/// `dims`, which lets the kernel skip all index arithmetic.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridedLayout {
    pub rank: i64,
    pub contiguous: i64,
    pub dims: [i64; MAX_DIMS],
    pub strides: [i64; MAX_DIMS],
}

/// Why a [`StridedLayout`] could not be built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LayoutError {
    RankTooLarge { rank: usize },
    LengthMismatch { dims: usize, strides: usize },
    TooLarge { value: usize },
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::RankTooLarge { rank } => {
                write!(
                    f,
                    "rank {rank} exceeds the kernels' maximum of {MAX_DIMS}; make the tensor contiguous or merge dimensions first"
                )
            }
            LayoutError::LengthMismatch { dims, strides } => {
                write!(f, "{dims} dims but {strides} strides")
            }
            LayoutError::TooLarge { value } => {
                write!(f, "dimension or stride {value} does not fit in i64")
            }
        }
    }
}

impl std::error::Error for LayoutError {}

impl StridedLayout {
    /// A view of `dims` with `strides` (in elements). Rank 0 (a scalar) is allowed.
    pub fn new(dims: &[usize], strides: &[usize]) -> Result<Self, LayoutError> {
        if dims.len() != strides.len() {
            return Err(LayoutError::LengthMismatch { dims: dims.len(), strides: strides.len() });
        }
        if dims.len() > MAX_DIMS {
            return Err(LayoutError::RankTooLarge { rank: dims.len() });
        }
        let mut l = StridedLayout { rank: dims.len() as i64, ..Default::default() };
        for (i, (&d, &s)) in dims.iter().zip(strides).enumerate() {
            l.dims[i] = i64::try_from(d).map_err(|_| LayoutError::TooLarge { value: d })?;
            l.strides[i] = i64::try_from(s).map_err(|_| LayoutError::TooLarge { value: s })?;
        }
        l.contiguous = i64::from(l.is_row_major());
        Ok(l)
    }

    /// The contiguous (row-major) view of `dims`.
    pub fn contiguous(dims: &[usize]) -> Result<Self, LayoutError> {
        let mut strides = vec![0usize; dims.len()];
        let mut s = 1usize;
        for i in (0..dims.len()).rev() {
            strides[i] = s;
            s = s.saturating_mul(dims[i]);
        }
        Self::new(dims, &strides)
    }

    /// Number of elements of the view.
    pub fn numel(&self) -> i64 {
        self.dims[..self.rank as usize].iter().product()
    }

    /// Whether the strides are the row-major strides of the dims (dimensions of size 1
    /// may have any stride).
    fn is_row_major(&self) -> bool {
        let mut expected = 1i64;
        for i in (0..self.rank as usize).rev() {
            if self.dims[i] != 1 && self.strides[i] != expected {
                return false;
            }
            expected = expected.saturating_mul(self.dims[i]);
        }
        true
    }
}

/// 2-D convolution geometry, mirrored from `rv_conv2d` (prelude.h): passed by value.
///
/// Forward: input [n, c, h, w], weights [k, c/groups, r, s], output [n, k, p, q].
/// Transposed: input [n, c, h, w], weights [c, k/groups, r, s], output [n, k, p, q].
/// Only the begin paddings enter the index math; asymmetric (end) padding is expressed
/// through the output size p, q. 1-D convolutions are 2-D ones with h = r = p = 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conv2dParams {
    pub n: i32,
    pub c: i32,
    pub h: i32,
    pub w: i32,
    pub k: i32,
    pub r: i32,
    pub s: i32,
    pub p: i32,
    pub q: i32,
    pub stride_h: i32,
    pub stride_w: i32,
    pub pad_h: i32,
    pub pad_w: i32,
    pub dil_h: i32,
    pub dil_w: i32,
    pub groups: i32,
}

// ---------------------------------------------------------------------------------------
// The registry. Each family's `args` must match the parameter list of its export macro
// in the source: the tests compare them.

const UNARY_OPS: &[&str] = &[
    "neg",
    "exp",
    "log",
    "sqrt",
    "abs",
    "relu",
    "silu",
    "gelu",
    "gelu_erf",
    "sigmoid",
    "tanh",
    "sin",
    "cos",
    "recip",
    "sqr",
    "leaky_relu",
];

const NUMEL: Arg = arg("numel", ArgType::I64, "number of output elements");
const GEOM: Arg = arg("g", ArgType::Conv2d, "convolution geometry (Conv2dParams)");

const ELEMENTWISE: &[Family] = &[
    Family {
        pattern: "unary_{op}_{dtype}",
        export_macro: "RV_EXPORT_UNARY",
        ops: UNARY_OPS,
        types: Types::Float,
        args: &[
            NUMEL,
            arg("src", ArgType::Strided, "view of the input, dims = output shape"),
            arg("in", cptr(Elem::T), "input"),
            arg("out", mptr(Elem::T), "contiguous output"),
            arg("param", ArgType::F64, "leaky_relu's negative slope; ignored by the other ops"),
        ],
        launch: Launch::GridStride,
        doc: "out = op(in); f32 arithmetic for f32/f16/bf16, f64 for f64. gelu is the tanh approximation, gelu_erf the exact form.",
    },
    Family {
        pattern: "affine_{dtype}",
        export_macro: "RV_EXPORT_AFFINE",
        ops: &[],
        types: Types::Float,
        args: &[
            NUMEL,
            arg("src", ArgType::Strided, "view of the input, dims = output shape"),
            arg("in", cptr(Elem::T), "input"),
            arg("out", mptr(Elem::T), "contiguous output"),
            arg("mul", ArgType::F64, "factor"),
            arg("add", ArgType::F64, "offset"),
        ],
        launch: Launch::GridStride,
        doc: "out = in * mul + add (fused multiply-add in the accumulate type).",
    },
];

const BINARY: &[Family] = &[Family {
    pattern: "binary_{op}_{dtype}",
    export_macro: "RV_EXPORT_BINARY",
    ops: &["add", "sub", "mul", "div", "maximum", "minimum"],
    types: Types::All,
    args: &[
        NUMEL,
        arg("lhs_view", ArgType::Strided, "view of lhs, dims = output shape, stride 0 where broadcast"),
        arg("rhs_view", ArgType::Strided, "view of rhs, dims = output shape, stride 0 where broadcast"),
        arg("lhs", cptr(Elem::T), "left operand"),
        arg("rhs", cptr(Elem::T), "right operand"),
        arg("out", mptr(Elem::T), "contiguous output"),
    ],
    launch: Launch::GridStride,
    doc: "out = lhs op rhs with broadcasting. Floats: f32 arithmetic (f64 for f64), maximum/minimum propagate NaN. Integers: wrapping, in their own type.",
}];

const CAST: &[Family] = &[
    Family {
        pattern: "cast_{src}_{dst}",
        export_macro: "RV_EXPORT_CAST",
        ops: &[],
        types: Types::CastPairs,
        args: &[
            NUMEL,
            arg("src_view", ArgType::Strided, "view of the input, dims = output shape"),
            arg("in", cptr(Elem::Src), "input, source dtype"),
            arg("out", mptr(Elem::Dst), "contiguous output, destination dtype"),
        ],
        launch: Launch::GridStride,
        doc: "Dtype conversion: floats round to nearest even, float to integer truncates (C cast; out of range is undefined), f64 to f16 rounds through f32.",
    },
    Family {
        pattern: "fill_{dtype}",
        export_macro: "RV_EXPORT_FILL",
        ops: &[],
        types: Types::All,
        args: &[
            NUMEL,
            arg("out", mptr(Elem::T), "output"),
            arg("value", ArgType::Value(Elem::T), "the value, as the element type itself"),
        ],
        launch: Launch::GridStride,
        doc: "out[i] = value.",
    },
];

const COPY: &[Family] = &[
    Family {
        pattern: "copy_strided_{bits}",
        export_macro: "RV_EXPORT_COPY_STRIDED",
        ops: &[],
        types: Types::Bits,
        args: &[
            NUMEL,
            arg("src_view", ArgType::Strided, "view of the source, dims = output shape"),
            arg("in", cptr(Elem::T), "source"),
            arg("out", mptr(Elem::T), "contiguous destination"),
        ],
        launch: Launch::GridStride,
        doc: "Makes a strided view contiguous (rank <= 6).",
    },
    Family {
        pattern: "copy2d_{bits}",
        export_macro: "RV_EXPORT_COPY2D",
        ops: &[],
        types: Types::Bits,
        args: &[
            arg("rows", ArgType::I64, "rows to copy"),
            arg("cols", ArgType::I64, "elements per row"),
            arg("src_stride", ArgType::I64, "source row stride, elements"),
            arg("dst_stride", ArgType::I64, "destination row stride, elements"),
            arg("src", cptr(Elem::T), "source"),
            arg("dst", mptr(Elem::T), "destination"),
        ],
        launch: Launch::GridStride,
        doc: "dst[r*dst_stride + c] = src[r*src_stride + c] (concatenation, slicing).",
    },
    Family {
        pattern: "transpose2d_{bits}",
        export_macro: "RV_EXPORT_TRANSPOSE2D",
        ops: &[],
        types: Types::Bits,
        args: &[
            arg("batch", ArgType::I64, "number of matrices"),
            arg("rows", ArgType::I32, "rows of each input matrix"),
            arg("cols", ArgType::I32, "columns of each input matrix"),
            arg("in", cptr(Elem::T), "input [batch, rows, cols]"),
            arg("out", mptr(Elem::T), "output [batch, cols, rows]"),
        ],
        launch: Launch::TransposeTiles,
        doc: "Batched 2-D transpose through a 32x33 shared-memory tile (coalesced both ways).",
    },
    Family {
        pattern: "pad2d_{op}_{bits}",
        export_macro: "RV_EXPORT_PAD2D",
        ops: &["zero", "reflect", "replicate"],
        types: Types::Bits,
        args: &[
            arg("planes", ArgType::I64, "n*c"),
            arg("h", ArgType::I32, "input height"),
            arg("w", ArgType::I32, "input width"),
            arg("pad_top", ArgType::I32, "rows added above"),
            arg("pad_left", ArgType::I32, "columns added on the left"),
            arg("oh", ArgType::I32, "output height = h + pad_top + pad_bottom"),
            arg("ow", ArgType::I32, "output width = w + pad_left + pad_right"),
            arg("in", cptr(Elem::T), "input [planes, h, w]"),
            arg("out", mptr(Elem::T), "output [planes, oh, ow]"),
        ],
        launch: Launch::GridStride,
        doc: "2-D padding; reflect needs every pad < the dimension (PyTorch's rule), replicate repeats the edge.",
    },
    Family {
        pattern: "upsample_nearest2d_{bits}",
        export_macro: "RV_EXPORT_UPSAMPLE_NEAREST2D",
        ops: &[],
        types: Types::Bits,
        args: &[
            arg("planes", ArgType::I64, "n*c"),
            arg("h", ArgType::I32, "input height"),
            arg("w", ArgType::I32, "input width"),
            arg("oh", ArgType::I32, "output height"),
            arg("ow", ArgType::I32, "output width"),
            arg("in", cptr(Elem::T), "input [planes, h, w]"),
            arg("out", mptr(Elem::T), "output [planes, oh, ow]"),
        ],
        launch: Launch::GridStride,
        doc: "out[y][x] = in[floor(y*h/oh)][floor(x*w/ow)] in exact integer arithmetic.",
    },
    Family {
        pattern: "pool2d_{op}_{dtype}",
        export_macro: "RV_EXPORT_POOL2D",
        ops: &["max", "avg"],
        types: Types::Float,
        args: &[
            arg("planes", ArgType::I64, "n*c"),
            arg("h", ArgType::I32, "input height"),
            arg("w", ArgType::I32, "input width"),
            arg("oh", ArgType::I32, "output height = (h - kh) / sh + 1"),
            arg("ow", ArgType::I32, "output width = (w - kw) / sw + 1"),
            arg("kh", ArgType::I32, "window height"),
            arg("kw", ArgType::I32, "window width"),
            arg("sh", ArgType::I32, "vertical stride"),
            arg("sw", ArgType::I32, "horizontal stride"),
            arg("in", cptr(Elem::T), "input [planes, h, w]"),
            arg("out", mptr(Elem::T), "output [planes, oh, ow]"),
        ],
        launch: Launch::GridStride,
        doc: "Max / average pooling without padding; the average accumulates in f32 (f64 for f64), max propagates NaN.",
    },
];

const RV_REDUCE_OPS: &[&str] = &["sum", "max", "min"];
const RV_ARG_OPS: &[&str] = &["argmax", "argmin"];

const REDUCE: &[Family] = &[
    Family {
        pattern: "reduce_{op}_lastdim_{dtype}",
        export_macro: "RV_EXPORT_REDUCE_LASTDIM",
        ops: RV_REDUCE_OPS,
        types: Types::Float,
        args: &[
            arg("outer", ArgType::I64, "rows"),
            arg("len", ArgType::I64, "length of the reduced (last) dimension"),
            arg("in", cptr(Elem::T), "input [outer, len], contiguous"),
            arg("out", mptr(Elem::T), "output [outer]"),
        ],
        launch: Launch::BlockPerRow,
        doc: "Reduction over the last dimension; f32 accumulation (f64 for f64); max/min propagate NaN.",
    },
    Family {
        pattern: "reduce_{op}_strided_{dtype}",
        export_macro: "RV_EXPORT_REDUCE_STRIDED",
        ops: RV_REDUCE_OPS,
        types: Types::Float,
        args: &[
            arg("outer", ArgType::I64, "product of the dims before the reduced one"),
            arg("len", ArgType::I64, "length of the reduced dimension"),
            arg("inner", ArgType::I64, "product of the dims after it (> 1)"),
            arg("in", cptr(Elem::T), "input [outer, len, inner], contiguous"),
            arg("out", mptr(Elem::T), "output [outer, inner]"),
        ],
        launch: Launch::GridStride,
        doc: "Reduction over a middle dimension: one thread per output, coalesced over inner.",
    },
    Family {
        pattern: "reduce_{op}_lastdim_{dtype}",
        export_macro: "RV_EXPORT_ARGREDUCE_LASTDIM",
        ops: RV_ARG_OPS,
        types: Types::Float,
        args: &[
            arg("outer", ArgType::I64, "rows"),
            arg("len", ArgType::I64, "length of the reduced (last) dimension"),
            arg("in", cptr(Elem::T), "input [outer, len], contiguous"),
            arg("out", mptr(Elem::U32), "indices [outer], u32"),
        ],
        launch: Launch::BlockPerRow,
        doc: "Index of the first maximum/minimum (NaN counts as the extreme).",
    },
    Family {
        pattern: "reduce_{op}_strided_{dtype}",
        export_macro: "RV_EXPORT_ARGREDUCE_STRIDED",
        ops: RV_ARG_OPS,
        types: Types::Float,
        args: &[
            arg("outer", ArgType::I64, "product of the dims before the reduced one"),
            arg("len", ArgType::I64, "length of the reduced dimension"),
            arg("inner", ArgType::I64, "product of the dims after it (> 1)"),
            arg("in", cptr(Elem::T), "input [outer, len, inner], contiguous"),
            arg("out", mptr(Elem::U32), "indices [outer, inner], u32"),
        ],
        launch: Launch::GridStride,
        doc: "Index of the first maximum/minimum over a middle dimension.",
    },
    Family {
        pattern: "{op}_lastdim_{dtype}",
        export_macro: "RV_EXPORT_SOFTMAX",
        ops: &["softmax", "log_softmax"],
        types: Types::Float,
        args: &[
            arg("rows", ArgType::I64, "rows"),
            arg("cols", ArgType::I64, "length of the last dimension"),
            arg("in", cptr(Elem::T), "input [rows, cols], contiguous"),
            arg("out", mptr(Elem::T), "output [rows, cols]"),
        ],
        launch: Launch::BlockPerRow,
        doc: "Softmax / log-softmax over the last dimension, max-subtracted, f32 accumulation.",
    },
    Family {
        pattern: "exact_channel_sums_{dtype}",
        export_macro: "RV_EXPORT_EXACT_SUMS",
        ops: &[],
        types: Types::Gemm,
        args: &[
            arg("view", ArgType::Strided, "the [C, rows, cols] region, source strides"),
            arg("in", cptr(Elem::T), "input"),
            arg("per_block", ArgType::I64, "values of a channel per block"),
            arg("buckets", mptr(Elem::U64), "[C, 256] significand sums by biased exponent (i64 as u64), zeroed"),
            arg("non_finite", mptr(Elem::U32), "[C] set to 1 where an inf or NaN was seen, zeroed"),
        ],
        launch: Launch::ChannelBlocks,
        doc: "Order-independent exact per-channel sums (the buckets of rocm_vision::ExactSum).",
    },
];

const NORM: &[Family] = &[
    Family {
        pattern: "group_norm_stats_{dtype}",
        export_macro: "RV_EXPORT_GROUP_NORM_STATS",
        ops: &[],
        types: Types::Float,
        args: &[
            arg("n", ArgType::I32, "batch"),
            arg("c", ArgType::I32, "channels (multiple of groups)"),
            arg("hw", ArgType::I64, "spatial size H*W"),
            arg("groups", ArgType::I32, "groups"),
            arg("chunks", ArgType::I32, "slices per group (gridDim.x)"),
            arg("in", cptr(Elem::T), "input [n, c, hw]"),
            arg("partial", mptr(Elem::F32), "workspace [n, groups, chunks, 3] f32: count, mean, M2"),
        ],
        launch: Launch::GroupChunks,
        doc: "First pass of group_norm: Welford statistics of each slice of each group.",
    },
    Family {
        pattern: "group_norm_apply_{dtype}",
        export_macro: "RV_EXPORT_GROUP_NORM_APPLY",
        ops: &[],
        types: Types::Float,
        args: &[
            arg("n", ArgType::I32, "batch"),
            arg("c", ArgType::I32, "channels"),
            arg("hw", ArgType::I64, "spatial size H*W"),
            arg("groups", ArgType::I32, "groups"),
            arg("chunks", ArgType::I32, "as in group_norm_stats (same grid)"),
            arg("partial", cptr(Elem::F32), "the statistics written by group_norm_stats"),
            arg("eps", ArgType::F64, "added to the variance"),
            arg("gamma", cptr(Elem::T), "scale [c], or null"),
            arg("beta", cptr(Elem::T), "shift [c], or null"),
            arg("in", cptr(Elem::T), "input [n, c, hw]"),
            arg("out", mptr(Elem::T), "output [n, c, hw]"),
            arg("fuse_silu", ArgType::I32, "non-zero: apply silu after the affine step"),
        ],
        launch: Launch::GroupChunks,
        doc: "Second pass of group_norm: (x - mean) / sqrt(var + eps) * gamma + beta, biased variance, optional fused silu.",
    },
    Family {
        pattern: "{op}_{dtype}",
        export_macro: "RV_EXPORT_ROW_NORM",
        ops: &["layer_norm", "rms_norm"],
        types: Types::Float,
        args: &[
            arg("rows", ArgType::I64, "rows"),
            arg("cols", ArgType::I64, "normalised length"),
            arg("eps", ArgType::F64, "added to the variance (mean square for rms_norm)"),
            arg("gamma", cptr(Elem::T), "scale [cols], or null"),
            arg("beta", cptr(Elem::T), "shift [cols], or null"),
            arg("in", cptr(Elem::T), "input [rows, cols]"),
            arg("out", mptr(Elem::T), "output [rows, cols]"),
        ],
        launch: Launch::BlockPerRow,
        doc: "layer_norm: (x - mean) / sqrt(var + eps) * gamma + beta; rms_norm: x / sqrt(mean(x^2) + eps) * gamma + beta. f32 statistics.",
    },
];

const CMP_OPS: &[&str] = &["eq", "ne", "lt", "le", "gt", "ge"];
/// The index types of the indexing kernels: the `{op}` part of their names.
pub const INDEX_TYPES: &[&str] = &["u32", "i64"];

const POINTWISE: &[Family] = &[
    Family {
        pattern: "cmp_{op}_{dtype}",
        export_macro: "RV_EXPORT_CMP",
        ops: CMP_OPS,
        types: Types::All,
        args: &[
            NUMEL,
            arg("lhs_view", ArgType::Strided, "view of lhs, dims = output shape, stride 0 where broadcast"),
            arg("rhs_view", ArgType::Strided, "view of rhs, dims = output shape, stride 0 where broadcast"),
            arg("lhs", cptr(Elem::T), "left operand"),
            arg("rhs", cptr(Elem::T), "right operand"),
            arg("out", mptr(Elem::U8), "contiguous output, u8: 1 where the comparison holds, else 0"),
        ],
        launch: Launch::GridStride,
        doc: "out = (lhs op rhs) as u8, candle's cmp. Exact comparison; NaN is unequal to everything.",
    },
    Family {
        pattern: "where_u8_{dtype}",
        export_macro: "RV_EXPORT_WHERE",
        ops: &[],
        types: Types::All,
        args: &[
            NUMEL,
            arg("mask_view", ArgType::Strided, "view of the mask, dims = output shape"),
            arg("true_view", ArgType::Strided, "view of on_true, dims = output shape"),
            arg("false_view", ArgType::Strided, "view of on_false, dims = output shape"),
            arg("mask", cptr(Elem::U8), "mask, u8"),
            arg("on_true", cptr(Elem::T), "values where mask != 0"),
            arg("on_false", cptr(Elem::T), "values where mask == 0"),
            arg("out", mptr(Elem::T), "contiguous output"),
        ],
        launch: Launch::GridStride,
        doc: "out = mask != 0 ? on_true : on_false (candle's where_cond with a u8 mask).",
    },
    Family {
        pattern: "unary_{op}_{dtype}",
        export_macro: "RV_EXPORT_UNARY_PARAM",
        ops: &["powf", "elu"],
        types: Types::Float,
        args: &[
            NUMEL,
            arg("src", ArgType::Strided, "view of the input, dims = output shape"),
            arg("in", cptr(Elem::T), "input"),
            arg("out", mptr(Elem::T), "contiguous output"),
            arg("param", ArgType::F64, "powf: the exponent; elu: alpha"),
        ],
        launch: Launch::GridStride,
        doc: "powf: in^param; elu: in >= 0 ? in : param * (exp(in) - 1). Same signature as the unary family.",
    },
];

const INDEXING: &[Family] = &[
    Family {
        pattern: "index_select_{op}_{dtype}",
        export_macro: "RV_EXPORT_INDEX_SELECT",
        ops: INDEX_TYPES,
        types: Types::All,
        args: &[
            arg("left", ArgType::I64, "product of the dims before the indexed one"),
            arg("src_dim", ArgType::I64, "length of the indexed dimension of src"),
            arg("right", ArgType::I64, "product of the dims after it"),
            arg("n_ids", ArgType::I64, "number of indices"),
            arg("ids", cptr(Elem::Idx), "indices [n_ids]"),
            arg("src", cptr(Elem::T), "source [left, src_dim, right], contiguous"),
            arg("out", mptr(Elem::T), "output [left, n_ids, right]"),
        ],
        launch: Launch::GridStride,
        doc: "out[l, i, r] = src[l, ids[i], r]; an index outside [0, src_dim) (candle's max-value sentinel among them) gives 0.",
    },
    Family {
        pattern: "gather_{op}_{dtype}",
        export_macro: "RV_EXPORT_GATHER",
        ops: INDEX_TYPES,
        types: Types::All,
        args: &[
            arg("left", ArgType::I64, "product of the dims before the indexed one"),
            arg("src_dim", ArgType::I64, "length of the indexed dimension of src"),
            arg("ids_dim", ArgType::I64, "length of the indexed dimension of ids and out"),
            arg("right", ArgType::I64, "product of the dims after it"),
            arg("ids", cptr(Elem::Idx), "indices [left, ids_dim, right]"),
            arg("src", cptr(Elem::T), "source [left, src_dim, right], contiguous"),
            arg("out", mptr(Elem::T), "output [left, ids_dim, right]"),
        ],
        launch: Launch::GridStride,
        doc: "out[l, i, r] = src[l, ids[l, i, r], r]; an index outside [0, src_dim) gives 0.",
    },
    Family {
        pattern: "scatter_set_{op}_{dtype}",
        export_macro: "RV_EXPORT_SCATTER_SET",
        ops: INDEX_TYPES,
        types: Types::All,
        args: SCATTER_ARGS,
        launch: Launch::GridStride,
        doc: "dst[l, ids[l, i, r], r] = src[l, i, r] in place, one thread per (l, r) walking i in order (the last write wins); an index outside [0, dst_dim) is skipped. Grid over left*right.",
    },
    Family {
        pattern: "scatter_add_{op}_{dtype}",
        export_macro: "RV_EXPORT_SCATTER_ADD",
        ops: INDEX_TYPES,
        types: Types::All,
        args: SCATTER_ARGS,
        launch: Launch::GridStride,
        doc: "dst[l, ids[l, i, r], r] += src[l, i, r] in place, sequential per (l, r) column: deterministic, no atomics. Grid over left*right.",
    },
    Family {
        pattern: "index_add_{op}_{dtype}",
        export_macro: "RV_EXPORT_INDEX_ADD",
        ops: INDEX_TYPES,
        types: Types::All,
        args: &[
            arg("left", ArgType::I64, "product of the dims before the indexed one"),
            arg("dst_dim", ArgType::I64, "length of the indexed dimension of dst"),
            arg("n_ids", ArgType::I64, "number of indices = the indexed dimension of src"),
            arg("right", ArgType::I64, "product of the dims after it"),
            arg("ids", cptr(Elem::Idx), "indices [n_ids]"),
            arg("src", cptr(Elem::T), "source [left, n_ids, right], contiguous"),
            arg("dst", mptr(Elem::T), "destination [left, dst_dim, right], updated in place"),
        ],
        launch: Launch::GridStride,
        doc: "dst[l, ids[i], r] += src[l, i, r] in place, sequential per (l, r) column. Grid over left*right.",
    },
];

const SCATTER_ARGS: &[Arg] = &[
    arg("left", ArgType::I64, "product of the dims before the indexed one"),
    arg("dst_dim", ArgType::I64, "length of the indexed dimension of dst"),
    arg("ids_dim", ArgType::I64, "length of the indexed dimension of ids and src"),
    arg("right", ArgType::I64, "product of the dims after it"),
    arg("ids", cptr(Elem::Idx), "indices [left, ids_dim, right]"),
    arg("src", cptr(Elem::T), "source [left, ids_dim, right], contiguous"),
    arg("dst", mptr(Elem::T), "destination [left, dst_dim, right], updated in place"),
];

const RESAMPLE: &[Family] = &[
    Family {
        pattern: "upsample_nearest1d_{bits}",
        export_macro: "RV_EXPORT_UPSAMPLE_NEAREST1D",
        ops: &[],
        types: Types::Bits,
        args: &[
            arg("planes", ArgType::I64, "n*c"),
            arg("l", ArgType::I32, "input length"),
            arg("ol", ArgType::I32, "output length"),
            arg("scale", ArgType::F64, "l / ol, computed in f64"),
            arg("in", cptr(Elem::T), "input [planes, l]"),
            arg("out", mptr(Elem::T), "output [planes, ol]"),
        ],
        launch: Launch::GridStride,
        doc: "out[p][x] = in[p][min(l - 1, floor(x * scale))], the index in f64 as candle computes it.",
    },
    Family {
        pattern: "upsample_bilinear2d_{dtype}",
        export_macro: "RV_EXPORT_UPSAMPLE_BILINEAR2D",
        ops: &[],
        types: Types::Float,
        args: &[
            arg("planes", ArgType::I64, "n*c"),
            arg("h", ArgType::I32, "input height"),
            arg("w", ArgType::I32, "input width"),
            arg("oh", ArgType::I32, "output height"),
            arg("ow", ArgType::I32, "output width"),
            arg("scale_h", ArgType::F64, "align_corners: (h-1)/(oh-1) (0 if oh == 1); else h/oh"),
            arg("scale_w", ArgType::F64, "align_corners: (w-1)/(ow-1) (0 if ow == 1); else w/ow"),
            arg("align_corners", ArgType::I32, "non-zero: corner pixels aligned"),
            arg("in", cptr(Elem::T), "input [planes, h, w]"),
            arg("out", mptr(Elem::T), "output [planes, oh, ow]"),
        ],
        launch: Launch::GridStride,
        doc: "Bilinear resize with PyTorch's / candle's source coordinates; coordinates in f64, blend in f32 (f64 for f64).",
    },
];

const RAND_HEAD: [Arg; 3] = [
    NUMEL,
    arg("seed", ArgType::I64, "key of the generator (u64 bit pattern)"),
    arg("offset", ArgType::I64, "index of the first 32-bit word of the stream used (< 2^62)"),
];

const RANDOM: &[Family] = &[
    Family {
        pattern: "rand_bits_{dtype}",
        export_macro: "RV_EXPORT_RAND_BITS",
        ops: &[],
        types: Types::U32,
        args: &[RAND_HEAD[0], RAND_HEAD[1], RAND_HEAD[2], arg("out", mptr(Elem::T), "the raw words [numel]")],
        launch: Launch::GridStride,
        doc: "The raw Philox4x32-10 stream: out[i] = word offset + i of (seed).",
    },
    Family {
        pattern: "rand_uniform_{dtype}",
        export_macro: "RV_EXPORT_RAND_UNIFORM",
        ops: &[],
        types: Types::Float,
        args: &[
            RAND_HEAD[0],
            RAND_HEAD[1],
            RAND_HEAD[2],
            arg("lo", ArgType::F64, "lower bound"),
            arg("hi", ArgType::F64, "upper bound"),
            arg("out", mptr(Elem::T), "output [numel]"),
        ],
        launch: Launch::GridStride,
        doc: "Uniform in [lo, hi) from the Philox stream (24-bit uniforms; f64: 32-bit).",
    },
    Family {
        pattern: "rand_normal_{dtype}",
        export_macro: "RV_EXPORT_RAND_NORMAL",
        ops: &[],
        types: Types::Float,
        args: &[
            RAND_HEAD[0],
            RAND_HEAD[1],
            RAND_HEAD[2],
            arg("mean", ArgType::F64, "mean"),
            arg("std", ArgType::F64, "standard deviation"),
            arg("out", mptr(Elem::T), "output [numel]"),
        ],
        launch: Launch::GridStride,
        doc: "Normal(mean, std) by Box-Muller on word pairs of the Philox stream.",
    },
];

const CONV_ARGS: &[Arg] = &[
    GEOM,
    arg("in", cptr(Elem::T), "input [n, c, h, w]"),
    arg("w", cptr(Elem::T), "weights: [k, c/groups, r, s] forward, [c, k/groups, r, s] transposed"),
    arg("bias", cptr(Elem::T), "bias [k], or null"),
    arg("out", mptr(Elem::T), "output [n, k, p, q]"),
];

const CONV: &[Family] = &[
    Family {
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
    },
    Family {
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
    },
    Family {
        pattern: "conv2d_direct_{dtype}",
        export_macro: "RV_EXPORT_CONV2D_DIRECT",
        ops: &[],
        types: Types::Float,
        args: CONV_ARGS,
        launch: Launch::GridStride,
        doc: "Direct convolution, one thread per output element: reference and fallback for any parameters.",
    },
    Family {
        pattern: "conv_transpose2d_direct_{dtype}",
        export_macro: "RV_EXPORT_CONV_TRANSPOSE2D_DIRECT",
        ops: &[],
        types: Types::Float,
        args: CONV_ARGS,
        launch: Launch::GridStride,
        doc: "Direct transposed convolution (gather form): reference and fallback.",
    },
];

const IGEMM_CONFIG_NAMES: &[&str] = &["64x64x16_4x4", "128x128x8_8x8", "128x16x16_4x2"];

const IGEMM: &[Family] = &[
    Family {
        pattern: "igemm_fwd_{op}_{dtype}",
        export_macro: "RV_EXPORT_IGEMM",
        ops: IGEMM_CONFIG_NAMES,
        types: Types::Gemm,
        args: CONV_ARGS,
        launch: Launch::Igemm,
        doc: "Implicit-GEMM forward convolution: LDS tiles, FMA, f32 accumulation; M = n*p*q, N = k/groups, K = (c/groups)*r*s; any stride, padding, dilation, groups.",
    },
    Family {
        pattern: "igemm_tconv_{op}_{dtype}",
        export_macro: "RV_EXPORT_IGEMM",
        ops: IGEMM_CONFIG_NAMES,
        types: Types::Gemm,
        args: CONV_ARGS,
        launch: Launch::Igemm,
        doc: "Implicit-GEMM transposed convolution through the dgrad mapping: input row (y + pad - r*dil)/stride when exact.",
    },
];

const IGEMM_MMA_NAMES: &[&str] = &["128x128_2x4", "128x64_2x2", "64x128_2x2", "64x64_2x2", "128x32_4x1", "128x16_4x1"];
const IGEMM_MMA_NV_NAMES: &[&str] = &["128x128_2x2", "128x256_2x4", "256x128_4x2"];
const IGEMM_EMU_NAMES: &[&str] = &["128x128_2x4", "64x64_2x2"];
const IGEMM_SIMT_NAMES: &[&str] = &["128x128_8x8", "128x64_8x4", "64x64_4x4", "128x32_4x4", "128x16_4x2"];

const IGEMM_NHWC_ARGS: &[Arg] = &[
    arg("g", ArgType::Conv2d, "phase-local forward geometry over the NHWC band (igemm_mma.hip)"),
    arg("cgp", ArgType::I32, "channel slots per group in the NHWC input and packed weights (multiple of 16 bytes)"),
    arg("splits", ArgType::I32, "split-K factor (grid.z = groups * splits); > 1 writes `partial`"),
    arg("act", ArgType::I32, "activation after the bias: 0 none, 1 relu, 2 silu"),
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

const IGEMM_MMA: &[Family] = &[
    Family {
        pattern: "igemm_mma_{op}_{dtype}",
        export_macro: "RV_EXPORT_IGEMM_MMA",
        ops: IGEMM_MMA_NAMES,
        types: Types::Half,
        args: IGEMM_NHWC_ARGS,
        launch: Launch::IgemmNhwc,
        doc: "NHWC implicit-GEMM convolution on the compiling target's matrix cores (WMMA gfx11/gfx12, MFMA CDNA, mma.sync NVIDIA), cp.async pipeline on NVIDIA, fused bias/activation/residual epilogue, split-K partials.",
    },
    Family {
        pattern: "igemm_mma_{op}_{dtype}",
        export_macro: "RV_EXPORT_IGEMM_MMA_NV",
        ops: IGEMM_MMA_NV_NAMES,
        types: Types::Half,
        args: IGEMM_NHWC_ARGS,
        launch: Launch::IgemmNhwc,
        doc: "The same kernel with 64x64 warp tiles, NVIDIA only (the GPU tier's tile family); on AMD targets the entry points exist and trap, and the host never dispatches them there.",
    },
    Family {
        pattern: "igemm_emu11_{op}_{dtype}",
        export_macro: "RV_EXPORT_IGEMM_EMU11",
        ops: IGEMM_EMU_NAMES,
        types: Types::Half,
        args: IGEMM_NHWC_ARGS,
        launch: Launch::IgemmNhwc,
        doc: "The same kernel with the RDNA3 (gfx11) fragment code and the WMMA instruction emulated by warp shuffles (warp 32): the GPU tier's check of the gfx11 layout.",
    },
    Family {
        pattern: "igemm_emu12_{op}_{dtype}",
        export_macro: "RV_EXPORT_IGEMM_EMU12",
        ops: IGEMM_EMU_NAMES,
        types: Types::Half,
        args: IGEMM_NHWC_ARGS,
        launch: Launch::IgemmNhwc,
        doc: "The same kernel with the RDNA4 (gfx12) fragment code, WMMA emulated by warp shuffles.",
    },
    Family {
        pattern: "igemm_simt_{op}_{dtype}",
        export_macro: "RV_EXPORT_IGEMM_SIMT",
        ops: IGEMM_SIMT_NAMES,
        types: Types::F32,
        args: IGEMM_NHWC_ARGS,
        launch: Launch::IgemmNhwc,
        doc: "NHWC implicit-GEMM convolution in f32 FMA (no TF32), the same iterators, pipeline and epilogue.",
    },
    Family {
        pattern: "igemm_splitk_{dtype}",
        export_macro: "RV_EXPORT_IGEMM_SPLITK",
        ops: &[],
        types: Types::Gemm,
        args: &[
            arg("g", ArgType::Conv2d, "the geometry the partials were computed for"),
            arg("splits", ArgType::I32, "number of partial sums"),
            arg("act", ArgType::I32, "activation: 0 none, 1 relu, 2 silu"),
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
    },
    Family {
        pattern: "igemm_pack_input_{bits}",
        export_macro: "RV_EXPORT_IGEMM_PACK_INPUT",
        ops: &[],
        types: Types::Bits16And32,
        args: &[
            arg("g", ArgType::Conv2d, "the full input: n, c, h, w, groups"),
            arg("row0", ArgType::I32, "first input row of the band"),
            arg("rows", ArgType::I32, "rows in the band"),
            arg("cgp", ArgType::I32, "channel slots per group (>= c/groups; the extra slots are zero)"),
            arg("in", cptr(Elem::T), "NCHW input"),
            arg("out", mptr(Elem::T), "NHWC band [n][rows][w][groups*cgp]"),
        ],
        launch: Launch::TransposeTiles,
        doc: "NCHW -> NHWC of a band of input rows with padded channel slots (grid = (ceil(rows*w/32), ceil(groups*cgp/32), n)).",
    },
    Family {
        pattern: "igemm_pack_weight_{bits}",
        export_macro: "RV_EXPORT_IGEMM_PACK_WEIGHT",
        ops: &[],
        types: Types::Bits16And32,
        args: &[
            arg("g", ArgType::Conv2d, "the convolution: k, c, r, s (full filter), groups"),
            arg("cgp", ArgType::I32, "channel slots per group"),
            arg("transposed", ArgType::I32, "non-zero: weights are [c][k/groups][r][s]"),
            arg("r0", ArgType::I32, "first filter row of the phase"),
            arg("rstep", ArgType::I32, "filter row step"),
            arg("nr", ArgType::I32, "filter rows in the phase"),
            arg("s0", ArgType::I32, "first filter column"),
            arg("sstep", ArgType::I32, "filter column step"),
            arg("ns", ArgType::I32, "filter columns in the phase"),
            arg("w", cptr(Elem::T), "weights as the convolution takes them"),
            arg("out", mptr(Elem::T), "packed [k][nr][ns][cgp]"),
        ],
        launch: Launch::GridStride,
        doc: "Packs one phase's filter taps as [k][tap row][tap column][channel slot] for the NHWC kernels.",
    },
    Family {
        pattern: "mma_tile_native_{dtype}",
        export_macro: "RV_EXPORT_MMA_TILE_NATIVE",
        ops: &[],
        types: Types::Half,
        args: MMA_TILE_ARGS,
        launch: Launch::MmaTile,
        doc: "One 16x16x32 product through the compiling target's MMA fragment code (the layer's own test).",
    },
    Family {
        pattern: "mma_tile_emu11_{dtype}",
        export_macro: "RV_EXPORT_MMA_TILE_EMU11",
        ops: &[],
        types: Types::Half,
        args: MMA_TILE_ARGS,
        launch: Launch::MmaTile,
        doc: "One 16x16x32 product through the gfx11 fragment code, WMMA emulated by shuffles.",
    },
    Family {
        pattern: "mma_tile_emu12_{dtype}",
        export_macro: "RV_EXPORT_MMA_TILE_EMU12",
        ops: &[],
        types: Types::Half,
        args: MMA_TILE_ARGS,
        launch: Launch::MmaTile,
        doc: "One 16x16x32 product through the gfx12 fragment code, WMMA emulated by shuffles.",
    },
];

const MMA_TILE_ARGS: &[Arg] = &[
    arg("a", cptr(Elem::T), "A [16][32] row-major"),
    arg("b", cptr(Elem::T), "B as [16 n][32 k] row-major (K contiguous)"),
    arg("c", cptr(Elem::F32), "C [16][16] f32"),
    arg("d", mptr(Elem::F32), "D = C + A * B, [16][16] f32"),
];

/// Every kernel module.
pub static MODULES: [Module; 13] = [
    Module {
        name: "elementwise",
        file: "elementwise.hip",
        source: include_str!("elementwise.hip"),
        families: ELEMENTWISE,
    },
    Module { name: "binary", file: "binary.hip", source: include_str!("binary.hip"), families: BINARY },
    Module { name: "cast", file: "cast.hip", source: include_str!("cast.hip"), families: CAST },
    Module { name: "copy", file: "copy.hip", source: include_str!("copy.hip"), families: COPY },
    Module { name: "reduce", file: "reduce.hip", source: include_str!("reduce.hip"), families: REDUCE },
    Module { name: "norm", file: "norm.hip", source: include_str!("norm.hip"), families: NORM },
    Module { name: "conv", file: "conv.hip", source: include_str!("conv.hip"), families: CONV },
    Module { name: "igemm", file: "igemm.hip", source: include_str!("igemm.hip"), families: IGEMM },
    Module { name: "igemm_mma", file: "igemm_mma.hip", source: include_str!("igemm_mma.hip"), families: IGEMM_MMA },
    Module { name: "pointwise", file: "pointwise.hip", source: include_str!("pointwise.hip"), families: POINTWISE },
    Module { name: "indexing", file: "indexing.hip", source: include_str!("indexing.hip"), families: INDEXING },
    Module { name: "resample", file: "resample.hip", source: include_str!("resample.hip"), families: RESAMPLE },
    Module { name: "random", file: "random.hip", source: include_str!("random.hip"), families: RANDOM },
];

/// Every kernel module.
pub fn modules() -> &'static [Module] {
    &MODULES
}

/// The module that defines `entry`.
pub fn module_of(entry: &str) -> Option<&'static Module> {
    MODULES.iter().find(|m| m.defines(entry))
}

/// The family (and module) of `entry`.
pub fn family_of(entry: &str) -> Option<(&'static Module, &'static Family)> {
    MODULES.iter().find_map(|m| m.family_of(entry).map(|f| (m, f)))
}

#[cfg(test)]
mod tests;
