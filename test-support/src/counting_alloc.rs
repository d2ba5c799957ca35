//! A global allocator that counts the heap's live and peak bytes and its largest request.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use host_alloc::ReusingAllocator;

/// A global allocator over [`System`] that counts the bytes live on the heap and their
/// peak, so a test or benchmark can measure what a call really allocates rather than
/// trust an estimate. It sees every thread of the process: one measurement at a time.
///
/// ```
/// use test_support::CountingAlloc;
///
/// #[global_allocator]
/// static HEAP: CountingAlloc = CountingAlloc::new();
///
/// fn main() {
///     let (v, peak) = HEAP.peak_during(|| vec![1u8; 1 << 20]);
///     assert!(peak >= v.len());
/// }
/// ```
pub struct CountingAlloc {
    current: AtomicUsize,
    peak: AtomicUsize,
    /// The largest single request (alloc or realloc size), granted or not.
    largest: AtomicUsize,
    realloc: Realloc,
    /// Large blocks from a reusing pool instead of the system ([`Self::over_pool`]).
    pool: Option<ReusingAllocator>,
}

/// How [`CountingAlloc`] grows and shrinks a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Realloc {
    /// Through the system allocator's `realloc` (in place where it can), counting only the
    /// change in size.
    System,
    /// As a new block, a copy and a free (`GlobalAlloc`'s default), so both blocks count
    /// towards the peak while the copy runs.
    Copy,
}

impl CountingAlloc {
    /// Counts growth through the system `realloc` ([`Realloc::System`]).
    pub const fn new() -> Self {
        Self::with_realloc(Realloc::System)
    }

    pub const fn with_realloc(realloc: Realloc) -> Self {
        CountingAlloc {
            current: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            largest: AtomicUsize::new(0),
            realloc,
            pool: None,
        }
    }

    /// Counting as [`Self::with_realloc`], over a [`ReusingAllocator`] (as the `realcugan`
    /// binary allocates) instead of the system allocator: benchmarks then time the work,
    /// not first-touch page faults of every fresh output. The counts are of the requests,
    /// as before.
    pub const fn over_pool(realloc: Realloc) -> Self {
        let mut a = Self::with_realloc(realloc);
        a.pool = Some(ReusingAllocator::new());
        a
    }

    /// The pool under [`Self::over_pool`] (to turn its caching off for an A/B).
    pub fn pool(&self) -> Option<&ReusingAllocator> {
        self.pool.as_ref()
    }

    /// The allocator the counted requests go to.
    fn inner(&self) -> &dyn GlobalAlloc {
        match &self.pool {
            Some(pool) => pool,
            None => &System,
        }
    }

    /// Bytes live on the heap now.
    pub fn current(&self) -> usize {
        self.current.load(Ordering::SeqCst)
    }

    /// Runs `f` and returns its result with the heap's growth above the starting point at
    /// its highest while `f` ran.
    pub fn peak_during<R>(&self, f: impl FnOnce() -> R) -> (R, usize) {
        let before = self.current.load(Ordering::SeqCst);
        self.peak.store(before, Ordering::SeqCst);
        let r = f();
        (r, self.peak.load(Ordering::SeqCst).saturating_sub(before))
    }

    /// Runs `f` and returns its result with the largest single allocation asked for while
    /// it ran (granted or refused): what a loader given a small file must keep small.
    pub fn largest_during<R>(&self, f: impl FnOnce() -> R) -> (R, usize) {
        self.largest.store(0, Ordering::SeqCst);
        let r = f();
        (r, self.largest.load(Ordering::SeqCst))
    }

    fn grew(&self, bytes: usize) {
        let now = self.current.fetch_add(bytes, Ordering::SeqCst) + bytes;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }
}

impl Default for CountingAlloc {
    fn default() -> Self {
        Self::new()
    }
}

// SAFETY: every call is forwarded to `System` unchanged (the `Realloc::Copy` path is
// `GlobalAlloc`'s default `realloc`, over this allocator's own `alloc` and `dealloc`);
// the counters are only bookkeeping.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.largest.fetch_max(layout.size(), Ordering::Relaxed);
        let p = unsafe { self.inner().alloc(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.largest.fetch_max(layout.size(), Ordering::Relaxed);
        let p = unsafe { self.inner().alloc_zeroed(layout) };
        if !p.is_null() {
            self.grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe { self.inner().dealloc(p, layout) };
        self.current.fetch_sub(layout.size(), Ordering::SeqCst);
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.largest.fetch_max(new_size, Ordering::Relaxed);
        match self.realloc {
            Realloc::System => {
                let q = unsafe { self.inner().realloc(p, layout, new_size) };
                if !q.is_null() {
                    if new_size >= layout.size() {
                        self.grew(new_size - layout.size());
                    } else {
                        self.current.fetch_sub(layout.size() - new_size, Ordering::SeqCst);
                    }
                }
                q
            }
            Realloc::Copy => {
                // SAFETY: the caller guarantees `new_size`, rounded up to the alignment, fits
                // `isize`, as `realloc`'s contract requires.
                let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
                let q = unsafe { self.alloc(new_layout) };
                if !q.is_null() {
                    // SAFETY: both blocks are live, distinct and at least this long.
                    unsafe { std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size)) };
                    unsafe { self.dealloc(p, layout) };
                }
                q
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn realloc_modes_count_growth_and_return_to_zero() {
        for mode in [Realloc::System, Realloc::Copy] {
            let heap = CountingAlloc::with_realloc(mode);
            let layout = Layout::from_size_align(64, 8).unwrap();
            let ((), peak) = heap.peak_during(|| unsafe {
                let p = heap.alloc(layout);
                p.write_bytes(7, 64);
                let q = heap.realloc(p, layout, 4096);
                assert_eq!(*q.add(63), 7);
                assert_eq!(heap.current(), 4096);
                heap.dealloc(q, Layout::from_size_align(4096, 8).unwrap());
            });
            assert_eq!(heap.current(), 0);
            // A copying realloc holds both blocks at once.
            let want = if mode == Realloc::Copy { 64 + 4096 } else { 4096 };
            assert_eq!(peak, want, "{mode:?}");
        }
    }
}
