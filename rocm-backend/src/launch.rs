//! Kernel launches: arguments marshalled as HIP's `kernelParams` array.

use crate::device::RocmDevice;
use crate::error::Result;
use crate::runtime::check;
use cubecl_hip_sys as hip;
use kernels::{Conv2dParams, StridedLayout};

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
    Conv(Conv2dParams),
}

/// Grid of `ceil(n / block)` blocks for grid-stride kernels, capped: the kernels loop.
pub fn grid_for(n: usize, block: u32) -> u32 {
    (n.div_ceil(block as usize)).clamp(1, 1 << 20) as u32
}

/// Grid for the elementwise kernels with 16-byte vector paths (the prelude's `rv_map1`,
/// `rv_map2`, `fill`): one thread per vector of the widest element type; the kernels loop
/// over what a capped grid leaves.
pub fn vector_grid(n: usize, widest_elem_bytes: usize, block: u32) -> u32 {
    grid_for(n.div_ceil(16 / widest_elem_bytes.clamp(1, 16)), block)
}

/// Launches `entry` on the device's stream.
pub fn launch(
    dev: &RocmDevice,
    entry: &str,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    args: &mut [Arg],
) -> Result<()> {
    dev.activate()?;
    let f = dev.jit().function(entry)?;
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
            Arg::Conv(v) => v as *mut Conv2dParams as *mut _,
        })
        .collect();
    // SAFETY: `params` points at values that live until this call returns (HIP copies
    // kernel arguments at launch); the argument list follows the registry's signature.
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
                0,
                dev.stream().raw(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            ),
        )
    }
}
