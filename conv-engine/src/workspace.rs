//! Workspace buffers that count themselves, and the engine's allocation fault hook.

use crate::error::ConvError;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Bytes of workspace the engine holds now and at most since the last reset; every
/// buffer the engine allocates itself (workspace and convolution outputs) is admitted
/// here first, which is where a test can make the N-th one fail
/// ([`WorkspaceMeter::fail_nth_allocation`]).
#[derive(Debug, Default)]
pub struct WorkspaceMeter {
    current: AtomicUsize,
    peak: AtomicUsize,
    /// Allocations admitted since the engine was made.
    allocations: AtomicU64,
    /// The allocation index (1-based, in `allocations`) that fails; 0: none.
    fail_at: AtomicU64,
}

impl WorkspaceMeter {
    /// An f32 buffer of `len` elements, counted until dropped. Its contents are
    /// unspecified (NaN in builds with debug assertions, every test build; unfilled in
    /// optimised ones, see [`Self::try_unfilled_vec`]): executors must write before they
    /// read. Fails cleanly (no abort) when the memory cannot be had, or when the
    /// fault hook says so.
    pub fn alloc_f32(&self, len: usize) -> Result<MeteredBuffer<'_>, ConvError> {
        let bytes = len.saturating_mul(std::mem::size_of::<f32>());
        let data = self.try_unfilled_vec(len, f32::NAN, "workspace")?;
        let now = self.current.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
        Ok(MeteredBuffer { data, meter: self, bytes })
    }

    /// A vector of `len` copies of `fill`, admitted through the fault hook and allocated
    /// fallibly: an error, not an abort, when it cannot be had. A zero `fill` takes zeroed
    /// memory from the allocator (`alloc_zeroed`: fresh pages come zero from the kernel,
    /// touched only when written) instead of writing it: `Vec::resize` wrote every byte
    /// of every 68 MB convolution output once more before the convolution did.
    pub fn try_vec<T: bytemuck::Pod>(&self, len: usize, fill: T, what: &'static str) -> Result<Vec<T>, ConvError> {
        let failed = self.admit::<T>(len, what)?;
        if bytemuck::bytes_of(&fill).iter().all(|&b| b == 0) {
            return raw_vec(len, true).ok_or_else(failed);
        }
        let mut v = Vec::new();
        v.try_reserve_exact(len).map_err(|_| failed())?;
        v.resize(len, fill);
        Ok(v)
    }

    /// A vector of `len` elements that the caller writes in full before it reads any: with
    /// debug assertions (every test build) filled with `poison`, so that the f64 grids
    /// fail on an element read before it is written; in optimised builds left as the
    /// allocator hands them out. That skips clearing a reused block (`host_alloc`'s pool
    /// cleared each one for `alloc_zeroed`: 6.8% of Real-CUGAN's CPU network, perf on
    /// 2026-12-05); fresh pages come zero from the kernel anyway. The elements are
    /// `Pod` numbers, for which every bit pattern is a value.
    pub fn try_unfilled_vec<T: bytemuck::Pod>(
        &self,
        len: usize,
        poison: T,
        what: &'static str,
    ) -> Result<Vec<T>, ConvError> {
        if cfg!(debug_assertions) {
            return self.try_vec(len, poison, what);
        }
        let failed = self.admit::<T>(len, what)?;
        raw_vec(len, false).ok_or_else(failed)
    }

    /// Counts an allocation of `len` elements through the fault hook: the injected
    /// failure, or the error to give if the memory cannot be had.
    fn admit<T>(&self, len: usize, what: &'static str) -> Result<impl Fn() -> ConvError, ConvError> {
        let bytes = len.saturating_mul(std::mem::size_of::<T>());
        let index = self.allocations.fetch_add(1, Ordering::Relaxed) + 1;
        let fail_at = self.fail_at.load(Ordering::Relaxed);
        if fail_at != 0 && index == fail_at {
            return Err(ConvError::AllocationFailed { what, bytes, index, injected: true });
        }
        Ok(move || ConvError::AllocationFailed { what, bytes, index, injected: false })
    }

    /// Test hook: the `n`-th allocation the engine makes from now on (1: the next) fails
    /// with [`ConvError::AllocationFailed`]; `None` disarms it. One failure per arming.
    pub fn fail_nth_allocation(&self, n: Option<u64>) {
        let at = n.map_or(0, |n| self.allocations.load(Ordering::Relaxed) + n.max(1));
        self.fail_at.store(at, Ordering::Relaxed);
    }

    /// Allocations the engine has admitted so far (the fault hook counts in these).
    pub fn allocations(&self) -> u64 {
        self.allocations.load(Ordering::Relaxed)
    }

    pub fn current_bytes(&self) -> usize {
        self.current.load(Ordering::Relaxed)
    }

    pub fn peak_bytes(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    pub fn reset_peak(&self) {
        self.peak.store(self.current_bytes(), Ordering::Relaxed);
    }
}

/// A counted workspace buffer.
pub struct MeteredBuffer<'a> {
    data: Vec<f32>,
    meter: &'a WorkspaceMeter,
    bytes: usize,
}

impl std::ops::Deref for MeteredBuffer<'_> {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.data
    }
}

impl std::ops::DerefMut for MeteredBuffer<'_> {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.data
    }
}

impl Drop for MeteredBuffer<'_> {
    fn drop(&mut self) {
        self.meter.current.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// `len` elements straight from the global allocator: `alloc_zeroed` (zeros) when
/// `zeroed`, else `alloc`, not written here (see [`WorkspaceMeter::try_unfilled_vec`]);
/// `None` when they cannot be had.
fn raw_vec<T: bytemuck::Pod>(len: usize, zeroed: bool) -> Option<Vec<T>> {
    let layout = std::alloc::Layout::array::<T>(len).ok()?;
    if layout.size() == 0 {
        return Some(std::iter::repeat_with(T::zeroed).take(len).collect());
    }
    // SAFETY: a non-zero size; the vector owns the allocation with exactly the layout `Vec`
    // itself would use for `len`; all-zero bytes are a valid `T` (`Pod`), and unfilled
    // memory is only handed to callers that write every element before reading it.
    unsafe {
        let ptr = if zeroed { std::alloc::alloc_zeroed(layout) } else { std::alloc::alloc(layout) } as *mut T;
        (!ptr.is_null()).then(|| Vec::from_raw_parts(ptr, len, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_current_and_peak() {
        let m = WorkspaceMeter::default();
        {
            let _a = m.alloc_f32(10).unwrap();
            let _b = m.alloc_f32(5).unwrap();
            assert_eq!(m.current_bytes(), 60);
        }
        assert_eq!((m.current_bytes(), m.peak_bytes()), (0, 60));
        m.reset_peak();
        assert_eq!(m.peak_bytes(), 0);
    }

    #[test]
    fn the_armed_allocation_fails_once_and_cleanly() {
        let m = WorkspaceMeter::default();
        let _a = m.alloc_f32(1).unwrap();
        m.fail_nth_allocation(Some(2));
        let _b = m.alloc_f32(1).unwrap();
        let e = m.alloc_f32(3).err().expect("the second allocation from arming fails");
        assert!(matches!(e, ConvError::AllocationFailed { bytes: 12, index: 3, injected: true, .. }), "{e:?}");
        assert_eq!(m.current_bytes(), 8);
        assert!(m.alloc_f32(3).is_ok());
        // A request no machine can hold is an error, not an abort.
        let e = m.try_vec::<u8>(usize::MAX / 2, 0, "output").unwrap_err();
        assert!(matches!(e, ConvError::AllocationFailed { injected: false, .. }), "{e:?}");
    }
}
