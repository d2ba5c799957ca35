//! Streams and events.

use crate::error::Result;
use crate::runtime::check;
use cubecl_hip_sys as hip;

/// A non-blocking HIP stream. All of a device's work goes to its one stream, so work on
/// it runs in the order it was queued.
pub struct Stream(pub(crate) hip::hipStream_t);

impl Stream {
    pub(crate) fn new() -> Result<Stream> {
        let mut s = std::ptr::null_mut();
        // hipStreamNonBlocking = 1: no implicit synchronisation with the null stream.
        unsafe { check("hipStreamCreateWithFlags", hip::hipStreamCreateWithFlags(&mut s, 1))? };
        Ok(Stream(s))
    }

    pub fn raw(&self) -> hip::hipStream_t {
        self.0
    }

    pub fn synchronize(&self) -> Result<()> {
        unsafe { check("hipStreamSynchronize", hip::hipStreamSynchronize(self.0)) }
    }

    /// Records a timing event at this point of the stream.
    pub fn record(&self) -> Result<Event> {
        let e = Event::new(true)?;
        unsafe { check("hipEventRecord", hip::hipEventRecord(e.0, self.0))? };
        Ok(e)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; the stream is gone either way.
        unsafe { hip::hipStreamDestroy(self.0) };
    }
}

/// A HIP event.
pub struct Event(pub(crate) hip::hipEvent_t);

// SAFETY: HIP events may be queried and waited on from any thread.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Event {
    fn new(timing: bool) -> Result<Event> {
        let mut e = std::ptr::null_mut();
        // hipEventDisableTiming = 2.
        let flags = if timing { 0 } else { 2 };
        unsafe { check("hipEventCreateWithFlags", hip::hipEventCreateWithFlags(&mut e, flags))? };
        Ok(Event(e))
    }

    /// Whether the work before the event has finished.
    pub fn is_complete(&self) -> Result<bool> {
        let rc = unsafe { hip::hipEventQuery(self.0) };
        if rc == hip::hipError_t_hipErrorNotReady {
            return Ok(false);
        }
        check("hipEventQuery", rc)?;
        Ok(true)
    }

    pub fn synchronize(&self) -> Result<()> {
        unsafe { check("hipEventSynchronize", hip::hipEventSynchronize(self.0)) }
    }

    /// Milliseconds from `start` to this event (both recorded with timing).
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32> {
        let mut ms = 0f32;
        unsafe { check("hipEventElapsedTime", hip::hipEventElapsedTime(&mut ms, start.0, self.0))? };
        Ok(ms)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        unsafe { hip::hipEventDestroy(self.0) };
    }
}
