//! The tile configurations instantiated by `igemm.hip` and `igemm_mma.hip`, and the entry-point
//! names they give (igemm_configs.md explains the choice).

use crate::{Conv2dAbi, DType, module_of};

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
    pub fn grid(&self, params: &Conv2dAbi) -> (u32, u32, u32) {
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
    /// Matrix cores through the MMA layer of `mma.h` (f16/bf16, f32 accumulation). `a`, `b`
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
    /// Shared memory of one block: the pipeline's stages (`nv_stages` on NVIDIA, 2 on AMD)
    /// or the epilogue's f32 slice ([SW][BM + 4], SW = max(16, 4096 / BM) capped at BN),
    /// whichever is larger -- `rv_igemm_nhwc::SMEM * 16` in igemm_mma.hip.
    pub const fn shared_bytes(&self, nvidia: bool) -> u32 {
        let stages = if nvidia { self.nv_stages } else { 2 };
        let pipeline = self.lds_bytes(stages);
        let sw0 = if 4096 / self.bm < 16 { 16 } else { 4096 / self.bm };
        let sw = if sw0 > self.bn { self.bn } else { sw0 };
        let epilogue = (sw * (self.bm + 4)).div_ceil(4) * 16;
        if pipeline > epilogue { pipeline } else { epilogue }
    }
    /// The dynamic shared memory a launch passes: on NVIDIA the kernels declare theirs
    /// `extern` (so that a block may take more than the 48 KiB a static array may), on AMD
    /// it is static LDS within 64 KiB and the launch passes none.
    pub const fn dynamic_shared_bytes(&self, nvidia: bool) -> u32 {
        if nvidia { self.shared_bytes(true) } else { 0 }
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
