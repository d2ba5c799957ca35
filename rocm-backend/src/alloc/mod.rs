//! The caching allocator: size classes, a budget on every byte, and blocks reused in
//! stream order.
//!
//! Freed blocks go back to a cache instead of to HIP (hipFree synchronises the device).
//! The cache is a [`SegmentPool`]: each `hipMalloc` is a segment, which later requests may
//! take whole or, near the budget, cut (see `pool`). Every byte is accounted: `live`
//! (handed out), `cached` (held for reuse) and their peaks. The budget bounds what the
//! allocator holds: an allocation that would pass it first cuts a cached span or releases
//! wholly free segments, and fails with [`RocmError::OverBudget`] when the live bytes alone
//! would pass it. Only fragmentation can take the held bytes past the budget (free memory
//! in segments still partly in use, see [`AllocStats::stranded_mallocs`]); the live bytes
//! never pass it.
//!
//! Reuse is safe without events because all work of a device is queued on its one
//! stream: a kernel that reads a block was queued before the block was freed, so any
//! later use of the block (also queued on that stream) runs after it. Host reads
//! synchronise the stream. Releasing blocks to HIP synchronises the stream first.

use crate::error::{Result, RocmError};
use crate::runtime::{check, code};
use cubecl_hip_sys as hip;
use std::sync::Mutex;

mod pool;
use pool::{Fit, SegmentPool};

/// Blocks below this are rounded up to a multiple of [`SMALL_GRANULE`]; above it to a
/// multiple of [`LARGE_GRANULE`] (bounded waste, few distinct classes).
const SMALL_LIMIT: usize = 1 << 20;
const SMALL_GRANULE: usize = 512;
const LARGE_GRANULE: usize = 2 << 20;

/// The block size an allocation of `bytes` gets.
pub fn size_class(bytes: usize) -> usize {
    let b = bytes.max(1);
    if b < SMALL_LIMIT { b.div_ceil(SMALL_GRANULE) * SMALL_GRANULE } else { b.div_ceil(LARGE_GRANULE) * LARGE_GRANULE }
}

/// Counters of an allocator, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    pub live: usize,
    pub cached: usize,
    pub peak_live: usize,
    /// Peak of live + cached: what the process held from HIP at most.
    pub peak_reserved: usize,
    pub allocations: u64,
    pub cache_hits: u64,
    /// `hipMalloc` calls made (cache misses that reached HIP).
    pub device_mallocs: u64,
    /// Blocks given back to HIP (`hipFree`), each batch after a stream synchronisation.
    pub device_frees: u64,
    /// `hipMalloc`s that took the allocator past its budget because the free memory it
    /// held lay in segments still partly in use (fragmentation; the live bytes stayed
    /// within the budget). `peak_reserved` shows by how much.
    pub stranded_mallocs: u64,
    /// Of `cached`, the bytes in segments still partly in use (they can go back to HIP only
    /// once the rest of their segment is free).
    pub stranded: usize,
    pub budget: usize,
}

struct State {
    pool: SegmentPool,
    stats: AllocStats,
    /// Fault hook: the value of `stats.allocations` whose allocation fails; 0: none.
    fail_at: u64,
}

/// A device's caching allocator.
pub struct Allocator {
    ordinal: usize,
    state: Mutex<State>,
}

/// A block of device memory: pointer and block size.
#[derive(Debug)]
pub struct Block {
    pub ptr: usize,
    pub size: usize,
}

impl Allocator {
    pub(crate) fn new(ordinal: usize) -> Self {
        Allocator {
            ordinal,
            state: Mutex::new(State {
                pool: SegmentPool::default(),
                stats: AllocStats { budget: usize::MAX, ..Default::default() },
                fail_at: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("allocator poisoned")
    }

    /// Sets the budget in bytes (`usize::MAX`: none). Cached blocks above it are released.
    pub fn set_budget(&self, bytes: usize, stream: &crate::stream::Stream) -> Result<()> {
        let mut st = self.lock();
        st.stats.budget = bytes;
        let excess = (st.stats.live + st.stats.cached).saturating_sub(bytes);
        if excess > 0 {
            self.release_cached(&mut st, excess, stream)?;
        }
        Ok(())
    }

    pub fn stats(&self) -> AllocStats {
        let st = self.lock();
        AllocStats { stranded: st.pool.stranded_bytes(), ..st.stats }
    }

    /// Test hook: the `n`-th allocation from now on (1: the next) fails with
    /// [`RocmError::InjectedFault`] before it takes a block; `None` disarms it. One
    /// failure per arming. Everything else behaves as without the hook.
    pub fn fail_nth_allocation(&self, n: Option<u64>) {
        let mut st = self.lock();
        st.fail_at = n.map_or(0, |n| st.stats.allocations + n.max(1));
    }

    /// Bytes an allocation of `bytes` may still take before the budget is reached.
    pub fn available(&self) -> usize {
        let st = self.lock();
        st.stats.budget.saturating_sub(st.stats.live)
    }

    /// A block of at least `bytes`: the smallest cached span of its size class or up to a
    /// quarter larger (large classes only); near the budget, a larger cached span cut to
    /// the size class; else a new segment from HIP. Taking a slightly larger or a cut block
    /// is what keeps a run whose tensor sizes vary (tiles, bands, the last chunk) off
    /// hipMalloc/hipFree, which synchronise the device.
    pub(crate) fn alloc(&self, bytes: usize, stream: &crate::stream::Stream) -> Result<Block> {
        let size = size_class(bytes);
        let mut st = self.lock();
        st.stats.allocations += 1;
        if st.fail_at != 0 && st.stats.allocations == st.fail_at {
            st.fail_at = 0;
            return Err(RocmError::InjectedFault {
                ordinal: self.ordinal,
                index: st.stats.allocations,
                requested: bytes,
            });
        }
        let at_most = if size < SMALL_LIMIT { size } else { size + size / 4 };
        if let Some(block) = self.take_cached(&mut st, size, Fit::Whole { at_most }) {
            return Ok(block);
        }
        if st.stats.live + size > st.stats.budget {
            return Err(RocmError::OverBudget {
                ordinal: self.ordinal,
                requested: bytes,
                live: st.stats.live,
                budget: st.stats.budget,
            });
        }
        let over = (st.stats.live + st.stats.cached + size).saturating_sub(st.stats.budget);
        if over > 0 {
            // A new segment would not fit beside the cache: cut a larger cached span
            // rather than give blocks back that the run will ask for again.
            if size >= SMALL_LIMIT
                && let Some(block) = self.take_cached(&mut st, size, Fit::Cut { at_most })
            {
                return Ok(block);
            }
            self.release_cached(&mut st, over, stream)?;
            if st.stats.live + st.stats.cached + size > st.stats.budget {
                // The free memory left lies in segments still partly in use. The live bytes
                // fit the budget, so the allocation goes ahead past it by at most those
                // stranded bytes (failing would refuse what a cache of whole blocks gave);
                // the excess is given back as soon as a segment is wholly free again.
                st.stats.stranded_mallocs += 1;
            }
        }
        st.stats.device_mallocs += 1;
        let ptr = match self.hip_malloc(size) {
            Ok(p) => p,
            Err(first) => {
                // The device itself is full: give everything cached back and retry once.
                let cached = st.stats.cached;
                self.release_cached(&mut st, cached, stream)?;
                self.hip_malloc(size).map_err(|code| RocmError::OutOfMemory {
                    ordinal: self.ordinal,
                    requested: bytes,
                    live: st.stats.live,
                    code: if code.code == first.code { code } else { first },
                })?
            }
        };
        st.pool.add_segment(ptr, size);
        let taken = st.pool.take(size, Fit::Whole { at_most: size });
        debug_assert_eq!(taken, Some((ptr, size)));
        self.add_live(&mut st, size);
        Ok(Block { ptr, size })
    }

    /// A cached span for `size` bytes as `fit` allows, counted live.
    fn take_cached(&self, st: &mut State, size: usize, fit: Fit) -> Option<Block> {
        let (ptr, got) = st.pool.take(size, fit)?;
        st.stats.cached -= got;
        st.stats.cache_hits += 1;
        self.add_live(st, got);
        Some(Block { ptr, size: got })
    }

    fn add_live(&self, st: &mut State, size: usize) {
        st.stats.live += size;
        st.stats.peak_live = st.stats.peak_live.max(st.stats.live);
        st.stats.peak_reserved = st.stats.peak_reserved.max(st.stats.live + st.stats.cached);
    }

    fn hip_malloc(&self, size: usize) -> std::result::Result<usize, crate::error::HipCode> {
        let mut p = std::ptr::null_mut();
        let rc = unsafe { hip::hipMalloc(&mut p, size) };
        if rc == hip::hipError_t_hipSuccess { Ok(p as usize) } else { Err(code(rc)) }
    }

    /// Returns a block to the cache.
    pub(crate) fn free(&self, block: Block) {
        let mut st = self.lock();
        let size = st.pool.give_back(block.ptr).expect("a block handed out by this allocator");
        debug_assert_eq!(size, block.size);
        st.stats.live -= size;
        st.stats.cached += size;
    }

    /// Gives wholly free segments back to HIP, largest first, until at least `bytes` are
    /// released or none is left.
    fn release_cached(&self, st: &mut State, bytes: usize, stream: &crate::stream::Stream) -> Result<()> {
        if bytes == 0 || st.stats.cached == 0 {
            return Ok(());
        }
        stream.synchronize()?;
        let mut released = 0;
        while released < bytes {
            let Some((ptr, size)) = st.pool.pop_free_segment() else { break };
            unsafe { check("hipFree", hip::hipFree(ptr as *mut _))? };
            st.stats.device_frees += 1;
            st.stats.cached -= size;
            released += size;
        }
        Ok(())
    }

    /// Releases every cached block to HIP.
    pub fn trim(&self, stream: &crate::stream::Stream) -> Result<()> {
        let mut st = self.lock();
        let cached = st.stats.cached;
        self.release_cached(&mut st, cached, stream)
    }

    /// Resets the peaks to the current values.
    pub fn reset_peaks(&self) {
        let mut st = self.lock();
        st.stats.peak_live = st.stats.live;
        st.stats.peak_reserved = st.stats.live + st.stats.cached;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_bound_waste() {
        assert_eq!(size_class(0), 512);
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(SMALL_LIMIT - 1), SMALL_LIMIT);
        assert_eq!(size_class(SMALL_LIMIT), 2 << 20);
        assert_eq!(size_class((2 << 20) + 1), 4 << 20);
        for b in [1usize, 700, 5000, 1 << 20, 3 << 20, 1 << 30] {
            let c = size_class(b);
            assert!(c >= b && c - b < LARGE_GRANULE.max(SMALL_GRANULE), "{b} -> {c}");
        }
    }
}
