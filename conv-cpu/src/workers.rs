//! Sharing one executor call among threads: the raw output pointer its workers write
//! disjoint parts through, and the workers themselves, each with its own scratch slot.

/// A raw pointer shared by workers that write disjoint elements.
#[derive(Clone, Copy)]
pub(super) struct SharedMut<T>(pub(super) *mut T);
unsafe impl<T: Send> Send for SharedMut<T> {}
unsafe impl<T: Send> Sync for SharedMut<T> {}

impl<T> SharedMut<T> {
    /// By value, so closures capture the wrapper (Send + Sync), not the raw pointer.
    pub(super) fn ptr(self) -> *mut T {
        self.0
    }
}

/// Runs `work` on `workers` threads (on this one when there is one), each given its own
/// `slot_len` floats of `slots`; `work` takes its units from a shared counter until none
/// are left.
pub(super) fn run_on_workers(slots: &mut [f32], slot_len: usize, workers: usize, work: impl Fn(&mut [f32]) + Sync) {
    if workers <= 1 {
        work(&mut slots[..slot_len]);
        return;
    }
    rayon::scope(|sc| {
        for slot in slots.chunks_exact_mut(slot_len).take(workers) {
            let work = &work;
            sc.spawn(move |_| work(slot));
        }
    });
}
