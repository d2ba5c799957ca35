//! The caching allocator: size classes, a budget on every byte, and blocks reused in
//! stream order.
//!
//! Freed blocks go to a cache keyed by size class instead of back to HIP (hipFree
//! synchronises the device). Every byte is accounted: `live` (handed out), `cached`
//! (held for reuse) and their peaks. The budget bounds what the allocator holds: an
//! allocation that would pass it first releases cached blocks, and fails with
//! [`RocmError::OverBudget`] when the live bytes alone would pass it.
//!
//! Reuse is safe without events because all work of a device is queued on its one
//! stream: a kernel that reads a block was queued before the block was freed, so any
//! later use of the block (also queued on that stream) runs after it. Host reads
//! synchronise the stream. Releasing blocks to HIP synchronises the stream first.

use crate::error::{Result, RocmError};
use crate::runtime::{check, code};
use cubecl_hip_sys as hip;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Blocks below this are rounded up to a multiple of [`SMALL_GRANULE`]; above it to a
/// multiple of [`LARGE_GRANULE`] (bounded waste, few distinct classes).
const SMALL_LIMIT: usize = 1 << 20;
const SMALL_GRANULE: usize = 512;
pub(crate) const LARGE_GRANULE: usize = 2 << 20;

/// The block size an allocation of `bytes` gets.
pub fn size_class(bytes: usize) -> usize {
    let b = bytes.max(1);
    if b < SMALL_LIMIT { b.div_ceil(SMALL_GRANULE) * SMALL_GRANULE } else { b.div_ceil(LARGE_GRANULE) * LARGE_GRANULE }
}

/// The cached block size to give back when `missing` bytes are still to be released: the
/// smallest that covers it, else the largest.
fn release_choice(free: &BTreeMap<usize, Vec<usize>>, missing: usize) -> Option<usize> {
    free.range(missing..).next().or_else(|| free.iter().next_back()).map(|(&size, _)| size)
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
    pub budget: usize,
}

struct State {
    free: BTreeMap<usize, Vec<usize>>,
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
                free: BTreeMap::new(),
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
        self.lock().stats
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

    /// A block of at least `bytes`: the smallest cached block of its size class or up to a
    /// quarter larger (large classes only), else a new one from HIP. Taking a slightly larger
    /// block is what keeps a run whose tensor sizes vary (tiles, bands, the last chunk) off
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
        let largest_fit = if size < SMALL_LIMIT { size } else { size + size / 4 };
        if let Some((&found, _)) = st.free.range(size..=largest_fit).next() {
            let list = st.free.get_mut(&found).expect("present");
            let ptr = list.pop().expect("non-empty lists only");
            if list.is_empty() {
                st.free.remove(&found);
            }
            st.stats.cached -= found;
            st.stats.cache_hits += 1;
            self.add_live(&mut st, found);
            return Ok(Block { ptr, size: found });
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
            self.release_cached(&mut st, over, stream)?;
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
        self.add_live(&mut st, size);
        Ok(Block { ptr, size })
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
        st.stats.live -= block.size;
        st.stats.cached += block.size;
        st.free.entry(block.size).or_default().push(block.ptr);
    }

    /// Gives at least `bytes` of cached blocks back to HIP, each the smallest that covers
    /// what is still missing (else the largest): giving back the largest first had a 1080p
    /// Real-CUGAN tile run free a 188 MB block to make room for 50 MB and allocate it again
    /// for the next 188 MB map (H200, 2026-12-05: 47 hipFree and 46 hipMalloc in one warm
    /// image, each after a synchronisation).
    fn release_cached(&self, st: &mut State, bytes: usize, stream: &crate::stream::Stream) -> Result<()> {
        if bytes == 0 || st.stats.cached == 0 {
            return Ok(());
        }
        stream.synchronize()?;
        let mut released = 0;
        while released < bytes {
            let Some(size) = release_choice(&st.free, bytes - released) else { break };
            let list = st.free.get_mut(&size).expect("present");
            let ptr = list.pop().expect("non-empty lists only");
            if list.is_empty() {
                st.free.remove(&size);
            }
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
    fn release_takes_the_smallest_block_that_covers_the_need() {
        let mb = 1 << 20;
        let free: BTreeMap<usize, Vec<usize>> = [(48 * mb, vec![1]), (94 * mb, vec![2, 3]), (188 * mb, vec![4])].into();
        assert_eq!(release_choice(&free, 50 * mb), Some(94 * mb));
        assert_eq!(release_choice(&free, 48 * mb), Some(48 * mb));
        assert_eq!(release_choice(&free, 1), Some(48 * mb));
        // Nothing covers it: the largest goes first, the rest follows in later rounds.
        assert_eq!(release_choice(&free, 300 * mb), Some(188 * mb));
        assert_eq!(release_choice(&BTreeMap::new(), 1), None);
    }

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
