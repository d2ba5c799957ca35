//! The kernels' ABI as the host sees it: dtypes, argument types, families and modules, the
//! limits the prelude sets and the by-value structs it declares, mirrored here.

use std::fmt;

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
    /// `rv_conv2d` by value: a [`Conv2dAbi`] (64 bytes).
    Conv2d,
    /// `rv_epilogue` by value: an [`EpilogueAbi`] (16 bytes).
    Epilogue,
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
            ArgType::Epilogue => "rv_epilogue".into(),
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
            ArgType::Conv2d => std::mem::size_of::<Conv2dAbi>(),
            ArgType::Epilogue => std::mem::size_of::<EpilogueAbi>(),
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

// Short constructors for the registry's tables.
pub(crate) const fn arg(name: &'static str, ty: ArgType, doc: &'static str) -> Arg {
    Arg { name, ty, doc }
}
pub(crate) const fn cptr(elem: Elem) -> ArgType {
    ArgType::Ptr { elem, mutable: false }
}
pub(crate) const fn mptr(elem: Elem) -> ArgType {
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
    /// groups), with the [`IgemmConfig`](crate::IgemmConfig) named in the entry point.
    Igemm,
    /// blockDim = (config.threads(), 1, 1) whatever the wave size; grid = (ceil(n*p*q / bm),
    /// ceil((k/groups) / bn), groups * splits), with the [`IgemmNhwcConfig`](crate::IgemmNhwcConfig) named in the
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
        // The family's suffixes are few: a scan, not the full entry-point list (launches
        // look their kernel up here every time).
        if !self.types.suffixes().iter().any(|s| s == t) {
            return None;
        }
        Some(self.pattern.replace("{op}", op).replace("{dtype}", t).replace("{bits}", t))
    }

    /// The entry point of a `{src}_{dst}` family (casts) for `src` to `dst`, if it has it.
    pub fn pair_entry_point(&self, src: DType, dst: DType) -> Option<String> {
        let pair = format!("{}_{}", src.suffix(), dst.suffix());
        (self.types == Types::CastPairs && self.types.suffixes().contains(&pair))
            .then(|| self.pattern.replace("{src}_{dst}", &pair))
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
    /// The source text; it includes each of `headers`, in their order.
    pub source: &'static str,
    /// The headers the source includes, as (name in its `#include "..."`, text), the prelude
    /// ([`PRELUDE_NAME`](crate::PRELUDE_NAME)) first: what a run-time compiler must be given.
    pub headers: &'static [(&'static str, &'static str)],
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

    /// The source with each of its headers pasted in place of its `#include`, for compilers
    /// that are given no headers.
    pub fn source_with_headers(&self) -> String {
        self.headers
            .iter()
            .fold(self.source.to_string(), |src, (name, text)| src.replacen(&format!("#include \"{name}\""), text, 1))
    }

    /// The name this had when the prelude was the only header: the same as
    /// [`Module::source_with_headers`].
    pub fn source_with_prelude(&self) -> String {
        self.source_with_headers()
    }
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

    /// Views of `N` operands over the same `dims` with the dimensions merged that every
    /// operand steps through as one: size-1 dimensions dropped, and `d` merged into `d + 1`
    /// where each operand's `stride[d] == stride[d + 1]·dims[d + 1]`. A per-channel bias
    /// over `[1, C, H, W]` becomes `[C, H·W]` against the output's one contiguous run, so
    /// the kernels divide once per vector instead of once per dimension.
    pub fn coalesced<const N: usize>(dims: &[usize], strides: [&[usize]; N]) -> Result<[Self; N], LayoutError> {
        let mut merged: Vec<(usize, [usize; N])> = Vec::with_capacity(dims.len());
        for (i, &d) in dims.iter().enumerate() {
            let s: [usize; N] = std::array::from_fn(|k| strides[k].get(i).copied().unwrap_or(0));
            if strides.iter().any(|st| st.len() != dims.len()) {
                let bad = strides.iter().find(|st| st.len() != dims.len()).map_or(0, |st| st.len());
                return Err(LayoutError::LengthMismatch { dims: dims.len(), strides: bad });
            }
            if d == 1 {
                continue;
            }
            match merged.last_mut() {
                Some((pd, ps)) if (0..N).all(|k| ps[k] == s[k] * d) => {
                    *pd *= d;
                    *ps = s;
                }
                _ => merged.push((d, s)),
            }
        }
        if dims.contains(&0) {
            merged = vec![(0, [0; N])];
        }
        let out_dims: Vec<usize> = merged.iter().map(|(d, _)| *d).collect();
        let mut out = [Self::default(); N];
        for (k, o) in out.iter_mut().enumerate() {
            let st: Vec<usize> = merged.iter().map(|(_, s)| s[k]).collect();
            *o = Self::new(&out_dims, &st)?;
        }
        Ok(out)
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
/// A convolution epilogue as the kernels take it (`rv_epilogue`, prelude.h), passed by
/// value: `out = (act(acc + bias) + residual) · scale` in f32. `act`: 0 identity, 1 ReLU,
/// 2 SiLU, 3 LeakyReLU with slope `alpha`, 4 GELU (tanh).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EpilogueAbi {
    pub act: i32,
    pub alpha: f32,
    pub scale: f32,
    pub reserved: i32,
}

impl Default for EpilogueAbi {
    fn default() -> Self {
        EpilogueAbi { act: 0, alpha: 0.0, scale: 1.0, reserved: 0 }
    }
}

/// Transposed: input [n, c, h, w], weights [c, k/groups, r, s], output [n, k, p, q].
/// Only the begin paddings enter the index math; asymmetric (end) padding is expressed
/// through the output size p, q. 1-D convolutions are 2-D ones with h = r = p = 1.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conv2dAbi {
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
