//! Test and benchmark support shared across the workspace (feature `testing`, enabled
//! from dev-dependencies only): a global allocator that counts the heap's live and peak
//! bytes, a seeded generator of random 2-D convolution problems, and the epilogue's
//! activations in f64 from their definitions. It lives here, at
//! the bottom of the conv path, so the tests of every crate above can reach it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::DType;
use rand::Rng;

use crate::host_alloc::ReusingAllocator;
use crate::{Conv2dParams, ConvProblem, Padding2d};

/// A global allocator over [`System`] that counts the bytes live on the heap and their
/// peak, so a test or benchmark can measure what a call really allocates rather than
/// trust an estimate. It sees every thread of the process: one measurement at a time.
///
/// ```
/// use conv_engine::testing::CountingAlloc;
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

/// The channels of a random problem, drawn by the caller of [`RandomConv2d::draw`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Channels {
    /// C: input channels, a multiple of `groups`.
    pub input: usize,
    /// K: output channels, a multiple of `groups`.
    pub output: usize,
    pub groups: usize,
}

/// A random 2-D convolution, forward or transposed. The caller fixes the dtype, the
/// direction and the ranges; stride (1..4), padding (0..3 on each side, asymmetric),
/// dilation (1..3) and the output padding of a transposed problem (below
/// max(stride, dilation)) are drawn in [`RandomConv2d::draw`].
#[derive(Clone, Debug)]
pub struct RandomConv2d {
    pub dtype: DType,
    pub transposed: bool,
    /// Batch size N.
    pub batch: Range<usize>,
    /// Input height and width, each.
    pub size: Range<usize>,
    /// Kernel height and width, each.
    pub kernel: Range<usize>,
    /// Make it 1x1, stride 1, unpadded (the `Gemm1x1` shape) after the draws: the values are
    /// still drawn, so what a seed gives the other problems does not depend on it.
    pub pointwise: bool,
}

impl RandomConv2d {
    /// Draws until the problem is valid: `channels`, then N, H, W, the kernel, stride,
    /// padding (top, bottom, left, right), dilation and, when transposed, output padding,
    /// in that order. The order is part of the contract: it fixes what a seed produces.
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R, mut channels: impl FnMut(&mut R) -> Channels) -> ConvProblem {
        loop {
            let Channels { input: c, output: k, groups } = channels(rng);
            let n = rng.random_range(self.batch.clone());
            let (h, w) = (rng.random_range(self.size.clone()), rng.random_range(self.size.clone()));
            let mut kern = [rng.random_range(self.kernel.clone()), rng.random_range(self.kernel.clone())];
            let mut stride = [rng.random_range(1..4), rng.random_range(1..4)];
            let mut padding = Padding2d::tblr(
                rng.random_range(0..3),
                rng.random_range(0..3),
                rng.random_range(0..3),
                rng.random_range(0..3),
            );
            let dilation = [rng.random_range(1..3), rng.random_range(1..3)];
            if self.pointwise {
                kern = [1, 1];
                stride = [1, 1];
                padding = Padding2d::default();
            }
            let output_padding = if self.transposed {
                [rng.random_range(0..stride[0].max(dilation[0])), rng.random_range(0..stride[1].max(dilation[1]))]
            } else {
                [0, 0]
            };
            let params = Conv2dParams { stride, padding, dilation, groups, output_padding };
            let dt = self.dtype;
            let problem = if self.transposed {
                ConvProblem::conv_transpose2d(&[n, c, h, w], &[c, k / groups, kern[0], kern[1]], dt, dt, &params)
            } else {
                ConvProblem::conv2d(&[n, c, h, w], &[k, c / groups, kern[0], kern[1]], dt, dt, &params)
            };
            if let Ok(problem) = problem {
                return problem;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{SeedableRng, rngs::StdRng};

    #[test]
    fn drawn_problems_are_valid_and_follow_the_spec() {
        let mut rng = StdRng::seed_from_u64(1);
        for i in 0..200 {
            let spec = RandomConv2d {
                dtype: DType::F16,
                transposed: i % 2 == 0,
                batch: 1..3,
                size: 1..9,
                kernel: 1..4,
                pointwise: i % 5 == 0,
            };
            let p = spec.draw(&mut rng, |rng| {
                let g = [1, 2][i % 2];
                Channels { input: g * rng.random_range(1..4), output: g * rng.random_range(1..4), groups: g }
            });
            let g = p.geometry();
            assert!((1..3).contains(&g.batch) && g.groups == [1, 2][i % 2], "{p}");
            if spec.pointwise {
                assert_eq!((g.kernel, g.stride, g.pad_begin, g.pad_end), ([1, 1], [1, 1], [0, 0], [0, 0]), "{p}");
            }
        }
        // The same seed gives the same problems.
        let draw = |seed| {
            let spec = RandomConv2d {
                dtype: DType::F32,
                transposed: true,
                batch: 1..4,
                size: 1..30,
                kernel: 1..5,
                pointwise: false,
            };
            let mut rng = StdRng::seed_from_u64(seed);
            (0..20).map(|_| spec.draw(&mut rng, |_| Channels { input: 3, output: 5, groups: 1 })).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
    }

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

/// An epilogue activation in f64, from its definition (the reference the fused epilogues
/// of every device are checked against).
pub fn activation_f64(a: crate::Activation, x: f64) -> f64 {
    match a {
        crate::Activation::Identity => x,
        crate::Activation::Relu => x.max(0.0),
        crate::Activation::Silu => x / (1.0 + (-x).exp()),
        crate::Activation::LeakyRelu(slope) => {
            if x >= 0.0 {
                x
            } else {
                x * slope as f64
            }
        }
        crate::Activation::Gelu => {
            0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
        }
    }
}

/// Says on the process's own stderr that the calling test is skipped, and why, as
/// `SKIPPED <test>: <reason>`. Written directly, not with `eprintln!`, which the test
/// harness captures (and drops) for a test that passes: a skip is seen in every
/// `cargo test` run (`cargo test 2>&1 | grep SKIPPED` lists them).
/// The device `opened` gave, or `None` after a [`skipped`] line naming why; under
/// `ROCM_VISION_REQUIRE_GPU=1` (the GPU tier) a device that did not open fails the test.
pub fn device_or_skip<D, E: std::fmt::Display>(opened: Result<D, E>) -> Option<D> {
    match opened {
        Ok(d) => Some(d),
        Err(e) => {
            assert!(
                !std::env::var("ROCM_VISION_REQUIRE_GPU").is_ok_and(|v| v == "1"),
                "ROCM_VISION_REQUIRE_GPU=1 but {e}"
            );
            skipped(format!("no ROCm device: {e}"));
            None
        }
    }
}

pub fn skipped(reason: impl std::fmt::Display) {
    use std::io::Write;
    let thread = std::thread::current();
    // One line (a reason's first), written at once so that parallel tests do not split it.
    let reason = reason.to_string();
    let first = reason.lines().next().unwrap_or_default().trim_end_matches(" Tried:");
    let line = format!("SKIPPED {}: {first}\n", thread.name().unwrap_or("a test"));
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}
