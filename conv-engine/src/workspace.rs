//! Workspace buffers that count themselves.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes of workspace the engine holds now and at most since the last reset.
#[derive(Debug, Default)]
pub struct WorkspaceMeter {
    current: AtomicUsize,
    peak: AtomicUsize,
}

impl WorkspaceMeter {
    /// An f32 buffer of `len` elements, counted until dropped. Its contents are
    /// unspecified (NaN): executors must write before they read.
    pub fn alloc_f32(&self, len: usize) -> MeteredBuffer<'_> {
        let bytes = len * std::mem::size_of::<f32>();
        let now = self.current.fetch_add(bytes, Ordering::Relaxed) + bytes;
        self.peak.fetch_max(now, Ordering::Relaxed);
        MeteredBuffer { data: vec![f32::NAN; len], meter: self, bytes }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_current_and_peak() {
        let m = WorkspaceMeter::default();
        {
            let _a = m.alloc_f32(10);
            let _b = m.alloc_f32(5);
            assert_eq!(m.current_bytes(), 60);
        }
        assert_eq!((m.current_bytes(), m.peak_bytes()), (0, 60));
        m.reset_peak();
        assert_eq!(m.peak_bytes(), 0);
    }
}
