//! The fault-injection loop of the models' tests: every allocation a run makes through the
//! conv engine fails once, in turn, and each failed run must leave the engine's workspace
//! empty and the process heap where it was.

use crate::CountingAlloc;
use conv_engine::WorkspaceMeter;

/// Fails the `n`-th engine allocation of a run, for every `n` in `1..=per_run`, in two
/// rounds: the first may grow what is made once per thread (the gemm crate's packing
/// buffers of a rayon thread that had not packed yet: 1 MiB seen on CI, bounded here at
/// 16 MiB); the second must leave the heap where it was (4 KiB of lazily made state at
/// most, after each run and in all). `failing_run(n)` runs once with allocation `n` armed
/// to fail and checks the error it got. The meter is disarmed at the end.
pub fn fail_every_allocation(
    heap: &CountingAlloc,
    meter: &WorkspaceMeter,
    per_run: u64,
    mut failing_run: impl FnMut(u64),
) {
    let mut first_round_growth = 0isize;
    let mut worst_heap_drift = 0isize;
    let mut heap_at_start = heap.current() as isize;
    for round in 0..2 {
        if round == 1 {
            first_round_growth = heap.current() as isize - heap_at_start;
            heap_at_start = heap.current() as isize;
            worst_heap_drift = 0;
        }
        for n in 1..=per_run {
            let before = heap.current() as isize;
            meter.fail_nth_allocation(Some(n));
            failing_run(n);
            assert_eq!(meter.current_bytes(), 0, "allocation {n}: workspace still held after the error");
            worst_heap_drift = worst_heap_drift.max((heap.current() as isize - before).abs());
        }
    }
    meter.fail_nth_allocation(None);
    let total_drift = heap.current() as isize - heap_at_start;
    println!(
        "heap after the first round of {per_run} failed runs: {first_round_growth:+} bytes (made once per thread); \
         after the second: {total_drift:+} bytes; {per_run} engine allocations per run, each failed once, \
         heap drift at most {worst_heap_drift} bytes"
    );
    assert!(first_round_growth.abs() <= 16 << 20, "the first round grew the heap by {first_round_growth} bytes");
    assert!(total_drift.abs() <= 4096, "the failed runs left {total_drift} bytes behind");
    assert!(worst_heap_drift <= 4096, "heap grew by {worst_heap_drift} bytes after a failed run");
}
