//! A global allocator for programs that run the CPU path: large blocks are kept when freed
//! and handed out again, as ncnn's pool allocator does, so that a feature map or a
//! convolution workspace of the same size class costs no page faults the second time.
//!
//! Why: a fresh 68 MB buffer costs about 37 ms of first-touch page faults on the 2-core
//! development VM, and 3 ms once resident (`memset`, 2026-12-04). Real-CUGAN's network
//! allocates about 680 MB of fresh maps and workspaces per 256² image, and page faults
//! were 13% of its CPU time (perf, 2026-12-04).
//!
//! The footprint stays tied to what the program itself has needed: the blocks held (live
//! plus cached) never exceed the most live bytes the program ever had at once plus a
//! headroom (50% by default); a miss that would pass that resizes a cached block into the
//! new one, or frees cached blocks. With no headroom the cache could only hold what a
//! later allocation of the same class takes before the next high-water mark, and
//! Real-CUGAN's network reused 28 of its 48 large blocks per run; with 50%, 43 of 47 and 3
//! resized (footprint 384 MiB for 260 MiB live); with 100%, all (456 MiB). Measured gain
//! on the 2-core VM: 8-10% of the network's time (`cargo bench -p examples-sr --bench
//! cpu`, its "no block reuse" row, 2026-12-04).
//!
//! Opt in from a binary:
//! ```
//! #[global_allocator]
//! static ALLOC: host_alloc::ReusingAllocator = host_alloc::ReusingAllocator::new();
//! # fn main() {}
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Blocks from this size on are pooled; smaller ones go straight to the system allocator.
pub const POOLED_FROM: usize = 256 << 10;
/// Pooled blocks have malloc's own alignment, so that a fresh zeroed block is `calloc`'s
/// (lazily mapped zero pages) and not an aligned allocation filled with zeros; requests
/// that need more go straight to the system allocator.
const BLOCK_ALIGN: usize = 16;
/// Size classes per power of two: a block is at most 1/8 larger than its request.
const STEPS: usize = 8;
const CLASSES: usize = STEPS * (usize::BITS as usize - POOLED_FROM.trailing_zeros() as usize);
/// A request may take a cached block up to this many classes larger (at most 1.375x its
/// size; ncnn's pool allows 1.33x): maps of neighbouring sizes (548², 550²) share blocks.
const LARGER_CLASSES: usize = 3;
/// Blocks handed out from a larger class than their request's, remembered so that their
/// release returns them to their own class.
const PROMOTED_SLOTS: usize = 256;

/// The pooled size class of a request of `size ≥ POOLED_FROM` bytes, and the class's block
/// size.
fn class_of(size: usize) -> Option<(usize, usize)> {
    let octave = usize::BITS - 1 - size.leading_zeros();
    let base = 1usize << octave;
    let step = base / STEPS;
    let sub = (size - base).div_ceil(step);
    let block = base.checked_add(sub.checked_mul(step)?)?;
    let index = (octave - POOLED_FROM.trailing_zeros()) as usize * STEPS + sub;
    (index < CLASSES).then_some((index, block))
}

/// What the pool holds and has done (bytes are block sizes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Pooled blocks in use.
    pub live_bytes: usize,
    /// Freed blocks kept for reuse.
    pub cached_bytes: usize,
    /// The most `live_bytes` ever.
    pub high_water_bytes: usize,
    /// The most `live_bytes + cached_bytes` ever: the pool's resident footprint.
    pub peak_footprint_bytes: usize,
    /// Requests served from the cache.
    pub hits: u64,
    /// Requests that took a fresh block from the system.
    pub misses: u64,
    /// Cached blocks returned to the system to make room for a miss.
    pub evictions: u64,
    /// Misses served by resizing a cached block that had to go (its resident pages kept).
    pub recycled: u64,
}

impl PoolStats {
    /// A block of `bytes` goes to a caller: live, and the marks that follow it.
    fn hand_out(&mut self, bytes: usize) {
        self.live_bytes += bytes;
        self.high_water_bytes = self.high_water_bytes.max(self.live_bytes);
        self.peak_footprint_bytes = self.peak_footprint_bytes.max(self.live_bytes + self.cached_bytes);
    }
}

struct Pool {
    /// Per class, a singly linked list threaded through the cached blocks' first word.
    heads: [*mut u8; CLASSES],
    counts: [usize; CLASSES],
    /// (block address, its class) of blocks in use from a larger class than their
    /// request's; address 0 is a free slot.
    promoted: [(usize, usize); PROMOTED_SLOTS],
    stats: PoolStats,
}

// SAFETY: the pointers are blocks this pool owns; all access is under the mutex.
unsafe impl Send for Pool {}

/// See the module documentation.
pub struct ReusingAllocator {
    pool: Mutex<Pool>,
    caching: AtomicBool,
    /// Live plus cached stays within the live high-water mark times (100 + this) / 100.
    headroom_percent: usize,
}

impl Default for ReusingAllocator {
    fn default() -> Self {
        Self::new()
    }
}

impl ReusingAllocator {
    /// A pool with 50% headroom over the live high-water mark.
    pub const fn new() -> Self {
        Self::with_headroom_percent(50)
    }

    /// A pool whose live plus cached blocks stay within the live high-water mark times
    /// `(100 + percent) / 100`.
    pub const fn with_headroom_percent(percent: usize) -> Self {
        ReusingAllocator {
            pool: Mutex::new(Pool {
                heads: [ptr::null_mut(); CLASSES],
                counts: [0; CLASSES],
                promoted: [(0, 0); PROMOTED_SLOTS],
                stats: PoolStats {
                    live_bytes: 0,
                    cached_bytes: 0,
                    high_water_bytes: 0,
                    peak_footprint_bytes: 0,
                    hits: 0,
                    misses: 0,
                    evictions: 0,
                    recycled: 0,
                },
            }),
            caching: AtomicBool::new(true),
            headroom_percent: percent,
        }
    }

    pub fn stats(&self) -> PoolStats {
        self.lock().stats
    }

    /// Returns every cached block to the system (between jobs, or before a phase that
    /// needs the memory elsewhere).
    pub fn release_cached(&self) {
        let mut pool = self.lock();
        while pool.stats.cached_bytes > 0 {
            // SAFETY: the pool's own cached blocks.
            unsafe { pool.evict_largest() };
        }
    }

    /// Whether freed blocks are kept (the default). Off, every large block is taken from
    /// and returned to the system as without this allocator, and the cache is emptied: for
    /// A/B measurements in one process.
    pub fn set_caching(&self, on: bool) {
        self.caching.store(on, Ordering::Relaxed);
        if !on {
            self.release_cached();
        }
    }

    fn is_promoted(&self, block: *mut u8) -> bool {
        self.lock().promoted.iter().any(|&(at, _)| at == block as usize)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn pooled(layout: Layout) -> Option<(usize, usize)> {
        if layout.size() < POOLED_FROM || layout.align() > BLOCK_ALIGN {
            return None;
        }
        class_of(layout.size())
    }
}

impl Pool {
    /// A cached block of `class` or up to [`LARGER_CLASSES`] above it (the smallest
    /// there is), taken out of the cache, with its class.
    fn take(&mut self, class: usize) -> Option<(*mut u8, usize)> {
        let free_slot = self.promoted.iter().position(|&(at, _)| at == 0);
        let top = (class + LARGER_CLASSES).min(CLASSES - 1);
        let from = (class..=top).find(|&c| self.counts[c] > 0 && (c == class || free_slot.is_some()))?;
        let block = self.heads[from];
        // SAFETY: a cached block starts with its list's next pointer.
        self.heads[from] = unsafe { (block as *mut *mut u8).read() };
        self.counts[from] -= 1;
        if from != class {
            self.promoted[free_slot?] = (block as usize, from);
        }
        Some((block, from))
    }

    /// The class a block in use belongs to, given its request's class.
    fn class_in_use(&mut self, block: *mut u8, request_class: usize) -> usize {
        match self.promoted.iter_mut().find(|(at, _)| *at == block as usize) {
            Some(slot) => {
                let class = slot.1;
                *slot = (0, 0);
                class
            }
            None => request_class,
        }
    }

    /// The largest cached block, out of the cache (its bytes still counted as cached), and
    /// its size.
    ///
    /// # Safety
    /// The cache must be non-empty and its lists well formed.
    unsafe fn take_largest(&mut self) -> (*mut u8, usize) {
        let class = (0..CLASSES).rev().find(|&c| self.counts[c] > 0).expect("a non-empty cache");
        let block = self.heads[class];
        // SAFETY: a cached block starts with the next pointer written by `dealloc`.
        self.heads[class] = unsafe { (block as *mut *mut u8).read() };
        self.counts[class] -= 1;
        (block, block_size(class))
    }

    /// # Safety
    /// The cache must be non-empty and its lists well formed.
    unsafe fn evict_largest(&mut self) {
        // SAFETY: forwarded.
        let (block, size) = unsafe { self.take_largest() };
        self.stats.cached_bytes -= size;
        self.stats.evictions += 1;
        // SAFETY: allocated by `System` with this layout.
        unsafe { System.dealloc(block, Layout::from_size_align_unchecked(size, BLOCK_ALIGN)) };
    }
}

fn block_size(class: usize) -> usize {
    let octave = class / STEPS + POOLED_FROM.trailing_zeros() as usize;
    let base = 1usize << octave;
    base + (class % STEPS) * (base / STEPS)
}

impl ReusingAllocator {
    /// A block for `layout`: from the cache (zeroed here if asked) or from the system
    /// (zeroed by it if asked).
    ///
    /// # Safety
    /// As [`GlobalAlloc::alloc`].
    unsafe fn take_or_allocate(&self, layout: Layout, zeroed: bool) -> *mut u8 {
        let Some((class, size)) = Self::pooled(layout) else {
            // SAFETY: forwarded from the caller.
            return unsafe { if zeroed { System.alloc_zeroed(layout) } else { System.alloc(layout) } };
        };
        let mut pool = self.lock();
        if let Some((block, from)) = pool.take(class) {
            let s = &mut pool.stats;
            s.cached_bytes -= block_size(from);
            s.hand_out(block_size(from));
            s.hits += 1;
            drop(pool);
            if zeroed {
                // SAFETY: the block holds at least the request's bytes.
                unsafe { block.write_bytes(0, layout.size()) };
            }
            return block;
        }
        // A miss: make room so that live + cached stays within the high-water mark this
        // block sets (or the one already reached) and its headroom. The first block that
        // has to go is resized into the new one (`realloc`: for glibc's mmapped chunks an
        // mremap, which keeps its resident pages) instead of being unmapped while a fresh
        // block faults every page in again: with Real-CUGAN's maps of many sizes that
        // recycles what the headroom cannot keep.
        let high_water = pool.stats.high_water_bytes.max(pool.stats.live_bytes + size);
        let limit = high_water.saturating_mul(100 + self.headroom_percent) / 100;
        if pool.stats.cached_bytes > 0 && pool.stats.live_bytes + pool.stats.cached_bytes + size > limit {
            // SAFETY: the cache is non-empty; the victim is ours and (class size,
            // BLOCK_ALIGN) is its layout; on failure realloc leaves it valid.
            let (victim, victim_size) = unsafe { pool.take_largest() };
            pool.stats.cached_bytes -= victim_size;
            let block =
                unsafe { System.realloc(victim, Layout::from_size_align_unchecked(victim_size, BLOCK_ALIGN), size) };
            if block.is_null() {
                unsafe { System.dealloc(victim, Layout::from_size_align_unchecked(victim_size, BLOCK_ALIGN)) };
                pool.stats.evictions += 1;
            } else {
                while pool.stats.cached_bytes > 0 && pool.stats.live_bytes + pool.stats.cached_bytes + size > limit {
                    // SAFETY: the cache is non-empty.
                    unsafe { pool.evict_largest() };
                }
                pool.stats.hand_out(size);
                pool.stats.recycled += 1;
                drop(pool);
                if zeroed {
                    // SAFETY: the block holds `size` bytes.
                    unsafe { block.write_bytes(0, layout.size()) };
                }
                return block;
            }
        }
        while pool.stats.cached_bytes > 0 && pool.stats.live_bytes + pool.stats.cached_bytes + size > limit {
            // SAFETY: the cache is non-empty.
            unsafe { pool.evict_largest() };
        }
        // SAFETY: a non-zero size (≥ POOLED_FROM) and a power-of-two alignment.
        let block_layout = unsafe { Layout::from_size_align_unchecked(size, BLOCK_ALIGN) };
        let block = unsafe { if zeroed { System.alloc_zeroed(block_layout) } else { System.alloc(block_layout) } };
        if !block.is_null() {
            pool.stats.hand_out(size);
            pool.stats.misses += 1;
        }
        block
    }
}

// SAFETY: every pooled block comes from `System` with (class size, BLOCK_ALIGN) and goes
// back to it with the same layout; a cached block is owned by the pool alone until handed
// out again; small requests are `System`'s own.
unsafe impl GlobalAlloc for ReusingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        unsafe { self.take_or_allocate(layout, false) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        unsafe { self.take_or_allocate(layout, true) }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let Some((request_class, _)) = Self::pooled(layout) else { return unsafe { System.dealloc(block, layout) } };
        let mut pool = self.lock();
        let class = pool.class_in_use(block, request_class);
        let size = block_size(class);
        if !self.caching.load(Ordering::Relaxed) {
            pool.stats.live_bytes -= size;
            drop(pool);
            // SAFETY: allocated by `System` with this layout.
            return unsafe { System.dealloc(block, Layout::from_size_align_unchecked(size, BLOCK_ALIGN)) };
        }
        // SAFETY: the block is ours again and at least a page long.
        unsafe { (block as *mut *mut u8).write(pool.heads[class]) };
        pool.heads[class] = block;
        pool.counts[class] += 1;
        pool.stats.live_bytes -= size;
        pool.stats.cached_bytes += size;
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's layout is valid; so is the new one (same alignment).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (Self::pooled(layout), Self::pooled(new_layout)) {
            (None, None) => unsafe { System.realloc(block, layout, new_size) },
            (Some((a, _)), Some((b, _))) if a == b && !self.is_promoted(block) => block,
            _ => {
                // SAFETY: as `GlobalAlloc::realloc`'s default: a new block, the common
                // prefix copied, the old block freed.
                unsafe {
                    let new = self.alloc(new_layout);
                    if !new.is_null() {
                        ptr::copy_nonoverlapping(block, new, layout.size().min(new_size));
                        self.dealloc(block, layout);
                    }
                    new
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_at_most_an_eighth_larger_and_round_trip() {
        for size in [POOLED_FROM, POOLED_FROM + 1, 300_000, 1 << 20, (1 << 20) + 1, 68 << 20, 77_440_000, 3 << 30] {
            let (class, block) = class_of(size).unwrap();
            assert!(block >= size && (block - size) as f64 <= size as f64 / 8.0, "{size} -> {block}");
            assert_eq!(block_size(class), block, "{size}");
            assert_eq!(class_of(block).unwrap(), (class, block), "a block is its own class");
        }
        assert!(class_of(usize::MAX).is_none());
    }

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, 8).unwrap()
    }

    #[test]
    fn a_freed_block_is_handed_out_again_and_small_ones_are_not_pooled() {
        let a = ReusingAllocator::new();
        unsafe {
            let p = a.alloc(layout(5 << 20));
            p.write_bytes(7, 5 << 20);
            a.dealloc(p, layout(5 << 20));
            // A request of the same class, a little smaller, gets the same block.
            let q = a.alloc(layout((5 << 20) - 1000));
            assert_eq!(p, q);
            a.dealloc(q, layout((5 << 20) - 1000));
            let small = a.alloc(layout(1000));
            a.dealloc(small, layout(1000));
        }
        let s = a.stats();
        assert_eq!((s.hits, s.misses, s.live_bytes), (1, 1, 0));
        assert_eq!(s.cached_bytes, class_of(5 << 20).unwrap().1);
        a.release_cached();
        assert_eq!(a.stats().cached_bytes, 0);
        a.set_caching(false);
        unsafe {
            let p = a.alloc(layout(5 << 20));
            a.dealloc(p, layout(5 << 20));
        }
        let s = a.stats();
        assert_eq!((s.cached_bytes, s.misses, s.live_bytes), (0, 2, 0), "not kept with caching off");
    }

    #[test]
    fn a_zeroed_request_gets_zeros_from_a_reused_block_too() {
        let a = ReusingAllocator::new();
        unsafe {
            let p = a.alloc_zeroed(layout(3 << 20));
            assert!(std::slice::from_raw_parts(p, 3 << 20).iter().all(|&b| b == 0));
            p.write_bytes(0xab, 3 << 20);
            a.dealloc(p, layout(3 << 20));
            let q = a.alloc_zeroed(layout(3 << 20));
            assert_eq!(p, q, "reused");
            assert!(std::slice::from_raw_parts(q, 3 << 20).iter().all(|&b| b == 0));
            a.dealloc(q, layout(3 << 20));
        }
        a.release_cached();
    }

    #[test]
    fn a_block_that_must_go_is_resized_into_the_miss() {
        let a = ReusingAllocator::with_headroom_percent(0);
        unsafe {
            let p = a.alloc(layout(10 << 20));
            p.write_bytes(1, 10 << 20);
            a.dealloc(p, layout(10 << 20));
            // 5 MiB is not within 3 classes of 10 MiB, and 10 + 5 MiB would pass the high
            // water mark: the 10 MiB block becomes the 5 MiB one.
            let q = a.alloc_zeroed(layout(5 << 20));
            assert!(std::slice::from_raw_parts(q, 5 << 20).iter().all(|&b| b == 0));
            q.add((5 << 20) - 1).write(9);
            let s = a.stats();
            assert_eq!((s.recycled, s.misses, s.evictions, s.cached_bytes), (1, 1, 0, 0), "{s:?}");
            assert!(s.live_bytes + s.cached_bytes <= s.high_water_bytes);
            a.dealloc(q, layout(5 << 20));
        }
        a.release_cached();
    }

    #[test]
    fn a_smaller_request_takes_a_slightly_larger_block_and_returns_it_to_its_class() {
        let a = ReusingAllocator::new();
        unsafe {
            let big = 10 << 20;
            let p = a.alloc(layout(big));
            a.dealloc(p, layout(big));
            // Two classes smaller (10 MiB is class 8·1.25): served from the 10 MiB block.
            let smaller = (8 << 20) + (1 << 20) - 4096;
            let q = a.alloc(layout(smaller));
            assert_eq!(p, q);
            assert_eq!(a.stats().live_bytes, class_of(big).unwrap().1, "held at its own size");
            a.dealloc(q, layout(smaller));
            // Back in the 10 MiB class: a 10 MiB request gets it.
            let r = a.alloc(layout(big));
            assert_eq!(p, r);
            a.dealloc(r, layout(big));
            // Far smaller requests do not take it.
            let tiny = a.alloc(layout(2 << 20));
            assert_ne!(tiny, p);
            a.dealloc(tiny, layout(2 << 20));
        }
        let s = a.stats();
        assert_eq!((s.hits, s.live_bytes), (2, 0), "{s:?}");
        a.release_cached();
    }

    #[test]
    fn live_plus_cached_stays_within_the_high_water_mark_and_headroom() {
        for headroom in [0, 50] {
            walk(headroom);
        }
    }

    fn walk(headroom: usize) {
        let a = ReusingAllocator::with_headroom_percent(headroom);
        let mut rng = 12345u64;
        let mut next = || {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (rng >> 33) as usize
        };
        let mut held: Vec<(*mut u8, usize)> = Vec::new();
        for _ in 0..2000 {
            if held.len() < 6 && next() % 3 != 0 {
                let size = POOLED_FROM + next() % (24 << 20);
                let p = unsafe { a.alloc(layout(size)) };
                assert!(!p.is_null());
                // The block is writable over its whole requested size.
                unsafe { p.add(size - 1).write(1) };
                held.push((p, size));
            } else if !held.is_empty() {
                let (p, size) = held.swap_remove(next() % held.len());
                unsafe { a.dealloc(p, layout(size)) };
            }
            let s = a.stats();
            assert!((s.live_bytes + s.cached_bytes) * 100 <= s.high_water_bytes * (100 + headroom), "{s:?}");
        }
        for (p, size) in held {
            unsafe { a.dealloc(p, layout(size)) };
        }
        let s = a.stats();
        assert!(s.hits > 0 && s.evictions + s.recycled > 0, "the walk exercised both paths: {s:?}");
        a.release_cached();
    }

    #[test]
    fn realloc_within_a_class_keeps_the_block_and_across_classes_copies() {
        let a = ReusingAllocator::new();
        unsafe {
            let p = a.alloc(layout((1 << 20) + 100));
            p.write_bytes(3, (1 << 20) + 100);
            let q = a.realloc(p, layout((1 << 20) + 100), (1 << 20) + 5000);
            assert_eq!(p, q, "same class");
            let r = a.realloc(q, layout((1 << 20) + 5000), 4 << 20);
            assert_eq!(*r.add((1 << 20) - 1), 3, "the prefix is copied");
            let small = a.realloc(r, layout(4 << 20), 100);
            assert_eq!(*small.add(99), 3);
            a.dealloc(small, layout(100));
        }
        assert_eq!(a.stats().live_bytes, 0);
        a.release_cached();
    }
}
