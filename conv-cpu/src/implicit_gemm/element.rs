//! Storage element types. The executor's arithmetic is f32: packing widens, the epilogue
//! narrows. f64 exists for the reference implementations built on the same trait.

use half::{bf16, f16, slice::HalfFloatSliceExt};

/// A tensor element the CPU code reads and writes (f32, f16, bf16; f64 for references).
/// Plain data (`Pod`): all-zero bytes are its 0, so buffers can come zeroed from the
/// allocator.
pub trait Element: bytemuck::Pod + Send + Sync + 'static {
    const NAME: &'static str;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    /// `dst[i] = src[i] as f32`, vectorised where the type allows.
    fn widen(src: &[Self], dst: &mut [f32]);
    /// `dst[i] = src[i] as Self` with round-to-nearest-even.
    fn narrow(src: &[f32], dst: &mut [Self]);
    /// [`Self::widen`] for one 16-wide panel row: the packing hot path.
    #[inline(always)]
    fn widen_panel(src: &[Self; 16], dst: &mut [f32; 16]) {
        Self::widen(src, dst)
    }
}

impl Element for f32 {
    const NAME: &'static str = "f32";
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self as f64
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    #[inline(always)]
    fn widen(src: &[Self], dst: &mut [f32]) {
        dst.copy_from_slice(src)
    }
    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [Self]) {
        dst.copy_from_slice(src)
    }
    #[inline(always)]
    fn widen_panel(src: &[Self; 16], dst: &mut [f32; 16]) {
        *dst = *src
    }
}

impl Element for f16 {
    const NAME: &'static str = "f16";
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        f16::to_f64(self)
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
    #[inline(always)]
    fn widen(src: &[Self], dst: &mut [f32]) {
        // `half` uses F16C when the CPU has it (runtime detection).
        src.convert_to_f32_slice(dst)
    }
    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [Self]) {
        dst.convert_from_f32_slice(src)
    }
}

impl Element for bf16 {
    const NAME: &'static str = "bf16";
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        bf16::to_f64(self)
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
    #[inline(always)]
    fn widen(src: &[Self], dst: &mut [f32]) {
        // bf16 is the top half of an f32: a shift the compiler vectorises.
        for (d, s) in dst.iter_mut().zip(src) {
            *d = f32::from_bits((s.to_bits() as u32) << 16);
        }
    }
    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [Self]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = bf16::from_f32(*s);
        }
    }
}

impl Element for f64 {
    const NAME: &'static str = "f64";
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self as f32
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v as f64
    }
    #[inline(always)]
    fn to_f64(self) -> f64 {
        self
    }
    #[inline(always)]
    fn from_f64(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn widen(src: &[Self], dst: &mut [f32]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s as f32;
        }
    }
    #[inline(always)]
    fn narrow(src: &[f32], dst: &mut [Self]) {
        for (d, s) in dst.iter_mut().zip(src) {
            *d = *s as f64;
        }
    }
}

/// `dst[j] = epilogue(dst[j] + bias, residual[j])` for stored values: widened through an
/// f32 buffer a block at a time so [`Epilogue::apply_row`]'s loop vectorises.
pub fn apply_epilogue_in_place<T: Element>(
    epilogue: &conv_engine::Epilogue<&[T]>,
    bias: f32,
    dst: &mut [T],
    residual: Option<&[T]>,
) {
    const BLOCK: usize = 256;
    let mut buf = [0f32; BLOCK];
    for (i, chunk) in dst.chunks_mut(BLOCK).enumerate() {
        let acc = &mut buf[..chunk.len()];
        T::widen(chunk, acc);
        if bias != 0.0 {
            acc.iter_mut().for_each(|v| *v += bias);
        }
        let res = residual.map(|r| r[i * BLOCK..][..chunk.len()].iter().map(|x| x.to_f32()));
        epilogue.apply_row(acc, res);
        T::narrow(acc, chunk);
    }
}
