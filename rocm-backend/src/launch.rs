//! Kernel launches through the registry: a [`Kernel`] names a family of the `kernels`
//! crate with its op and dtype, a [`Grid`] says how much work there is in the terms of the
//! family's `Launch` kind, and [`launch`] checks the argument list against the family's
//! signature before it marshals it as HIP's `kernelParams` array. A signature change (a new
//! epilogue argument, say) is then one edit in the registry and one per call site, and a
//! call site that disagrees with the source is a clear error instead of a wrong launch.

use crate::device::RocmDevice;
use crate::error::{Result, RocmError};
use crate::runtime::check;
use cubecl_hip_sys as hip;
use kernels::{ArgType, Conv2dAbi, DType, Elem, EpilogueAbi, Family, Launch, StridedLayout};

/// One kernel argument, by value, as the kernel's C signature declares it.
#[derive(Clone, Copy, Debug)]
pub enum Arg {
    /// A device pointer (`const T*` / `T*`), or 0 for null.
    Ptr(usize),
    I32(i32),
    I64(i64),
    F64(f64),
    /// A 2-byte element value (f16/bf16 bit pattern).
    B16(u16),
    /// A 4-byte element value (f32 or u32 bit pattern).
    B32(u32),
    /// An 8-byte element value (f64 or i64 bit pattern).
    B64(u64),
    B8(u8),
    Strided(StridedLayout),
    Conv(Conv2dAbi),
    Epilogue(EpilogueAbi),
}

/// Threads per block of the 1-D families.
pub const BLOCK: u32 = 256;

/// Grid of `ceil(n / block)` blocks for grid-stride kernels, capped: the kernels loop.
pub fn grid_for(n: usize, block: u32) -> u32 {
    (n.div_ceil(block as usize)).clamp(1, 1 << 20) as u32
}

/// A kernel of the registry: its family, entry point and the dtypes behind its `T` (and a
/// cast's `S` and `D`).
#[derive(Clone, Debug)]
pub struct Kernel {
    family: &'static Family,
    entry: String,
    dtype: DType,
    src: Option<DType>,
}

impl Kernel {
    /// `family`'s entry point for `op` (`""` for a family without ops; a tile configuration
    /// for the implicit GEMMs) and `dtype` (its element size for the data-movement families).
    pub fn new(family: &'static Family, op: &str, dtype: DType) -> Result<Kernel> {
        let entry = family.entry_point(op, dtype).ok_or_else(|| RocmError::MissingKernel {
            module: format!("family {}", family.pattern),
            entry: family
                .pattern
                .replace("{op}", op)
                .replace("{dtype}", dtype.suffix())
                .replace("{bits}", dtype.bits_suffix()),
        })?;
        Ok(Kernel { family, entry, dtype, src: None })
    }

    /// A `{src}_{dst}` family's entry point (casts).
    pub fn pair(family: &'static Family, src: DType, dst: DType) -> Result<Kernel> {
        let entry = family.pair_entry_point(src, dst).ok_or_else(|| RocmError::MissingKernel {
            module: format!("family {}", family.pattern),
            entry: family.pattern.replace("{src}_{dst}", &format!("{src}_{dst}")),
        })?;
        Ok(Kernel { family, entry, dtype: dst, src: Some(src) })
    }

    pub fn entry(&self) -> &str {
        &self.entry
    }

    pub fn family(&self) -> &'static Family {
        self.family
    }

    /// Bytes of an element `elem` stands for in this kernel's signature.
    fn elem_bytes(&self, elem: Elem) -> usize {
        match elem {
            Elem::T | Elem::Dst => self.dtype.size_in_bytes(),
            Elem::Src => self.src.unwrap_or(self.dtype).size_in_bytes(),
            Elem::U8 => 1,
            Elem::U32 | Elem::F32 => 4,
            Elem::U64 | Elem::Idx => 8,
        }
    }

    /// The argument list against the family's signature: count, kinds, and value sizes.
    fn check(&self, args: &[Arg]) -> Result<()> {
        let want = self.family.args;
        let bad = |reason: String| Err(RocmError::op("launch", format!("{}: {reason}", self.entry)));
        if args.len() != want.len() {
            return bad(format!("{} arguments given, the signature has {}", args.len(), want.len()));
        }
        for (i, (a, w)) in args.iter().zip(want).enumerate() {
            let ok = match (a, w.ty) {
                (Arg::Ptr(_), ArgType::Ptr { .. }) => true,
                (Arg::I32(_), ArgType::I32) | (Arg::I64(_), ArgType::I64) | (Arg::F64(_), ArgType::F64) => true,
                (Arg::Strided(_), ArgType::Strided) | (Arg::Conv(_), ArgType::Conv2d) => true,
                (Arg::Epilogue(_), ArgType::Epilogue) => true,
                (Arg::B8(_), ArgType::Value(e)) => self.elem_bytes(e) == 1,
                (Arg::B16(_), ArgType::Value(e)) => self.elem_bytes(e) == 2,
                (Arg::B32(_), ArgType::Value(e)) => self.elem_bytes(e) == 4,
                (Arg::B64(_), ArgType::Value(e)) => self.elem_bytes(e) == 8,
                _ => false,
            };
            if !ok {
                return bad(format!("argument {i} (`{}`, {}) given {a:?}", w.name, w.ty.c_type()));
            }
        }
        Ok(())
    }
}

/// How much work a launch has, in the terms of its family's [`Launch`] kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Grid {
    /// Grid-stride families: one thread per element, `BLOCK` threads per block, capped
    /// (the kernels loop).
    Elements(usize),
    /// Grid-stride families with 16-byte vector paths (the prelude's `rv_map1`/`rv_map2`,
    /// fill): one thread per four vectors of the widest element type.
    Vectors { elements: usize, widest_bytes: usize },
    /// Block-per-row families: one block of `BLOCK` threads per row, capped.
    Rows(usize),
    /// Every other family: the geometry its `Launch` documents, computed by the caller.
    Explicit { grid: (u32, u32, u32), block: (u32, u32, u32) },
}

impl Grid {
    fn dims(self, launch: Launch) -> std::result::Result<((u32, u32, u32), (u32, u32, u32)), String> {
        let one_d = |blocks: u32| Ok(((blocks, 1, 1), (BLOCK, 1, 1)));
        match (self, launch) {
            (Grid::Elements(n), Launch::GridStride) => one_d(grid_for(n, BLOCK)),
            // Four vectors per thread: the row paths set up a divider per thread.
            (Grid::Vectors { elements, widest_bytes }, Launch::GridStride) => {
                one_d(grid_for(elements.div_ceil(4 * (16 / widest_bytes.clamp(1, 16))), BLOCK))
            }
            (Grid::Rows(rows), Launch::BlockPerRow) => one_d(rows.clamp(1, 1 << 20) as u32),
            (Grid::Explicit { grid, block }, l) if !matches!(l, Launch::GridStride | Launch::BlockPerRow) => {
                Ok((grid, block))
            }
            (g, l) => Err(format!("a {g:?} grid for a {l:?} family")),
        }
    }
}

/// Launches `kernel` on the device's stream after checking `args` against its signature.
pub fn launch(dev: &RocmDevice, kernel: &Kernel, grid: Grid, args: &mut [Arg]) -> Result<()> {
    launch_with_shared(dev, kernel, 0, grid, args)
}

/// [`launch`] with `shared_bytes` of dynamic shared memory per block (the kernels that
/// declare theirs `extern`; above 48 KiB the function's limit is raised first).
pub fn launch_with_shared(
    dev: &RocmDevice,
    kernel: &Kernel,
    shared_bytes: u32,
    grid: Grid,
    args: &mut [Arg],
) -> Result<()> {
    kernel.check(args)?;
    let (grid, block) =
        grid.dims(kernel.family.launch).map_err(|e| RocmError::op("launch", format!("{}: {e}", kernel.entry)))?;
    launch_raw(dev, &kernel.entry, grid, block, shared_bytes, args)
}

/// Launches the entry point `entry` with explicit geometry and no signature check: for the
/// tests of the registry itself. Everything else goes through [`launch`].
pub fn launch_raw(
    dev: &RocmDevice,
    entry: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    shared_bytes: u32,
    args: &mut [Arg],
) -> Result<()> {
    dev.activate()?;
    let f = dev.jit().function_with_shared(entry, shared_bytes)?;
    let mut params: Vec<*mut std::ffi::c_void> = args
        .iter_mut()
        .map(|a| match a {
            Arg::Ptr(v) => v as *mut usize as *mut _,
            Arg::I32(v) => v as *mut i32 as *mut _,
            Arg::I64(v) => v as *mut i64 as *mut _,
            Arg::F64(v) => v as *mut f64 as *mut _,
            Arg::B16(v) => v as *mut u16 as *mut _,
            Arg::B32(v) => v as *mut u32 as *mut _,
            Arg::B64(v) => v as *mut u64 as *mut _,
            Arg::B8(v) => v as *mut u8 as *mut _,
            Arg::Strided(v) => v as *mut StridedLayout as *mut _,
            Arg::Conv(v) => v as *mut Conv2dAbi as *mut _,
            Arg::Epilogue(v) => v as *mut EpilogueAbi as *mut _,
        })
        .collect();
    // SAFETY: `params` points at values that live until this call returns (HIP copies
    // kernel arguments at launch); `launch` checked the list against the signature.
    unsafe {
        check(
            "hipModuleLaunchKernel",
            hip::hipModuleLaunchKernel(
                f.0,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                shared_bytes,
                dev.stream().raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernels::{Types, family};

    #[test]
    fn kernels_are_looked_up_in_the_registry() {
        assert_eq!(Kernel::new(&family::BINARY, "add", DType::F16).unwrap().entry(), "binary_add_f16");
        assert_eq!(Kernel::new(&family::COPY_STRIDED, "", DType::BF16).unwrap().entry(), "copy_strided_b16");
        assert_eq!(Kernel::pair(&family::CAST, DType::F32, DType::F16).unwrap().entry(), "cast_f32_f16");
        assert!(Kernel::new(&family::BINARY, "pow", DType::F32).is_err());
        assert!(Kernel::new(&family::IGEMM_SPLITK, "", DType::U8).is_err());
        assert!(Kernel::pair(&family::CAST, DType::F32, DType::F32).is_err());
        // Every family has types; `Types` decides what `new` accepts.
        assert_eq!(family::CAST.types, Types::CastPairs);
    }

    #[test]
    fn argument_lists_are_checked_against_the_signature() {
        let k = Kernel::new(&family::FILL, "", DType::F16).unwrap();
        k.check(&[Arg::I64(4), Arg::Ptr(0), Arg::B16(0x3c00)]).unwrap();
        let e = k.check(&[Arg::I64(4), Arg::Ptr(0), Arg::B32(0)]).unwrap_err().to_string();
        assert!(e.contains("fill_f16") && e.contains("argument 2"), "{e}");
        let e = k.check(&[Arg::I64(4), Arg::Ptr(0)]).unwrap_err().to_string();
        assert!(e.contains("2 arguments given, the signature has 3"), "{e}");
        let u = Kernel::new(&family::UNARY, "silu", DType::F32).unwrap();
        let e = u.check(&[Arg::I32(4), Arg::Ptr(0), Arg::Ptr(0), Arg::Ptr(0), Arg::F64(0.0)]).unwrap_err().to_string();
        assert!(e.contains("argument 0 (`numel`"), "{e}");
    }

    #[test]
    fn grids_follow_the_family_launch_kind() {
        assert_eq!(Grid::Elements(1000).dims(Launch::GridStride).unwrap(), ((4, 1, 1), (256, 1, 1)));
        let v = Grid::Vectors { elements: 1 << 20, widest_bytes: 2 };
        assert_eq!(v.dims(Launch::GridStride).unwrap(), ((128, 1, 1), (256, 1, 1)));
        assert_eq!(Grid::Rows(7).dims(Launch::BlockPerRow).unwrap(), ((7, 1, 1), (256, 1, 1)));
        assert!(Grid::Rows(7).dims(Launch::GridStride).is_err());
        assert!(Grid::Explicit { grid: (1, 1, 1), block: (32, 1, 1) }.dims(Launch::GridStride).is_err());
        assert!(Grid::Explicit { grid: (1, 1, 1), block: (32, 1, 1) }.dims(Launch::TransposeTiles).is_ok());
    }
}
