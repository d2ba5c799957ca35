//! The bookkeeping of the caching allocator's device memory, without HIP: segments (one
//! `hipMalloc` each) cut into spans, handed out and given back, with free neighbours
//! merged again.
//!
//! Cutting a cached segment for a smaller request is what keeps a run near its budget off
//! `hipFree` + `hipMalloc` (each `hipFree` drains the device first). Real-CUGAN's tiles
//! under 2 GiB asked for 48, 94 and 188 MB maps in turn; a cache of whole blocks gave a
//! 188 MB block back to take a 94 MB one, then two 94 MB ones back for the next 188 MB:
//! 47 frees and 46 mallocs per 1080p image, 17.9 ms of GPU idle (H200 timeline of
//! 2026-12-05, docs/measurements/2026-12-05-h200-tiles.md). Cut and merged, the two halves
//! of a 188 MB segment serve the 94 MB maps and become the 188 MB block again.

use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Copy, Debug)]
struct Span {
    size: usize,
    /// Base address of the segment the span lies in (spans never merge across segments,
    /// even when HIP returned adjacent ones).
    segment: usize,
    free: bool,
}

/// Segments and their spans, by address.
#[derive(Debug, Default)]
pub(crate) struct SegmentPool {
    /// Base -> size of every segment held.
    segments: BTreeMap<usize, usize>,
    /// Start -> span; the spans of a segment tile it without gaps.
    spans: BTreeMap<usize, Span>,
    /// `(size, start)` of every free span: best fit is the first at or after `(size, 0)`.
    free: BTreeSet<(usize, usize)>,
}

/// What [`SegmentPool::take`] may do with a free span larger than the request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fit {
    /// Only a span of at most this many bytes, handed out whole.
    Whole { at_most: usize },
    /// Any span: one up to `at_most` whole, a larger one cut to the request.
    Cut { at_most: usize },
}

impl SegmentPool {
    /// A new segment from HIP, all of it free.
    pub fn add_segment(&mut self, base: usize, size: usize) {
        debug_assert!(size > 0 && !self.segments.contains_key(&base));
        self.segments.insert(base, size);
        self.spans.insert(base, Span { size, segment: base, free: true });
        self.free.insert((size, base));
    }

    /// The smallest free span of at least `size` bytes, as `(start, bytes handed out)`:
    /// whole when it is at most the fit's bound, else cut to `size` when the fit allows it
    /// (the rest stays free in the same segment).
    pub fn take(&mut self, size: usize, fit: Fit) -> Option<(usize, usize)> {
        let &(found, start) = self.free.range((size, 0)..).next()?;
        let (Fit::Whole { at_most } | Fit::Cut { at_most }) = fit;
        let handed = if found <= at_most {
            found
        } else if matches!(fit, Fit::Cut { .. }) {
            size
        } else {
            return None;
        };
        self.free.remove(&(found, start));
        let span = self.spans.get_mut(&start).expect("a free span is a span");
        span.size = handed;
        span.free = false;
        if handed < found {
            let segment = span.segment;
            let rest = (start + handed, found - handed);
            self.spans.insert(rest.0, Span { size: rest.1, segment, free: true });
            self.free.insert((rest.1, rest.0));
        }
        Some((start, handed))
    }

    /// Gives the span at `start` back, merged with free neighbours in its segment; its size,
    /// or `None` when no span handed out starts there.
    pub fn give_back(&mut self, start: usize) -> Option<usize> {
        let span = *self.spans.get(&start).filter(|s| !s.free)?;
        let (mut at, mut size) = (start, span.size);
        if let Some(next) = self.spans.get(&(start + size)).copied().filter(|n| n.free && n.segment == span.segment) {
            self.spans.remove(&(start + size));
            self.free.remove(&(next.size, start + size));
            size += next.size;
        }
        if let Some((&p, prev)) = self.spans.range(..start).next_back()
            && prev.free
            && prev.segment == span.segment
            && p + prev.size == start
        {
            let prev_size = prev.size;
            self.free.remove(&(prev_size, p));
            self.spans.remove(&start);
            at = p;
            size += prev_size;
        }
        self.spans.insert(at, Span { size, segment: span.segment, free: true });
        self.free.insert((size, at));
        Some(span.size)
    }

    /// Removes the largest segment that is wholly free, for `hipFree`: `(base, size)`.
    pub fn pop_free_segment(&mut self) -> Option<(usize, usize)> {
        let (base, size) = self
            .segments
            .iter()
            .filter(|&(b, &s)| self.spans.get(b).is_some_and(|sp| sp.free && sp.size == s))
            .max_by_key(|&(b, &s)| (s, std::cmp::Reverse(*b)))
            .map(|(&b, &s)| (b, s))?;
        self.segments.remove(&base);
        self.spans.remove(&base);
        self.free.remove(&(size, base));
        Some((base, size))
    }

    /// Bytes of the free spans that lie in segments still partly handed out (they cannot be
    /// given back to HIP until the rest of their segment is free).
    pub fn stranded_bytes(&self) -> usize {
        self.spans.values().filter(|s| s.free && self.segments.get(&s.segment) != Some(&s.size)).map(|s| s.size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MB: usize = 1 << 20;

    /// Every invariant: spans tile their segment, free spans are indexed, no two free
    /// neighbours in a segment.
    fn check(p: &SegmentPool) {
        for (&base, &size) in &p.segments {
            let mut at = base;
            let mut prev_free = false;
            while at < base + size {
                let s = p.spans.get(&at).unwrap_or_else(|| panic!("gap at {at:#x}"));
                assert_eq!(s.segment, base);
                assert!(!(prev_free && s.free), "unmerged free neighbours at {at:#x}");
                assert_eq!(p.free.contains(&(s.size, at)), s.free);
                prev_free = s.free;
                at += s.size;
            }
            assert_eq!(at, base + size);
        }
        assert_eq!(p.spans.len(), p.spans.values().filter(|s| p.segments.contains_key(&s.segment)).count());
        assert_eq!(p.free.len(), p.spans.values().filter(|s| s.free).count());
    }

    #[test]
    fn whole_fits_take_the_smallest_span_and_do_not_cut() {
        let mut p = SegmentPool::default();
        p.add_segment(0x1000_0000, 100 * MB);
        p.add_segment(0x2000_0000, 60 * MB);
        assert_eq!(p.take(50 * MB, Fit::Whole { at_most: 62 * MB }), Some((0x2000_0000, 60 * MB)));
        assert_eq!(p.take(50 * MB, Fit::Whole { at_most: 62 * MB }), None, "100 MB is past the bound");
        check(&p);
        assert_eq!(p.give_back(0x2000_0000), Some(60 * MB));
        assert_eq!(p.give_back(0x2000_0000), None, "given back twice");
        check(&p);
    }

    #[test]
    fn cut_spans_merge_back_into_their_segment() {
        let mut p = SegmentPool::default();
        p.add_segment(0x1000_0000, 188 * MB);
        let a = p.take(94 * MB, Fit::Cut { at_most: 117 * MB }).unwrap();
        let b = p.take(94 * MB, Fit::Cut { at_most: 117 * MB }).unwrap();
        assert_eq!((a, b), ((0x1000_0000, 94 * MB), (0x1000_0000 + 94 * MB, 94 * MB)));
        assert_eq!(p.take(MB, Fit::Cut { at_most: MB }), None, "nothing free is left");
        assert_eq!(p.pop_free_segment(), None);
        check(&p);
        // The second half back first: a free span, stranded while the first is handed out.
        p.give_back(b.0).unwrap();
        assert_eq!(p.stranded_bytes(), 94 * MB);
        check(&p);
        p.give_back(a.0).unwrap();
        check(&p);
        assert_eq!(p.stranded_bytes(), 0);
        assert_eq!(p.take(188 * MB, Fit::Whole { at_most: 188 * MB }), Some((0x1000_0000, 188 * MB)));
        p.give_back(0x1000_0000).unwrap();
        assert_eq!(p.pop_free_segment(), Some((0x1000_0000, 188 * MB)));
        assert!(p.spans.is_empty() && p.free.is_empty() && p.segments.is_empty());
    }

    #[test]
    fn spans_of_adjacent_segments_never_merge() {
        let mut p = SegmentPool::default();
        p.add_segment(0, 4 * MB);
        p.add_segment(4 * MB, 4 * MB);
        let x = p.take(2 * MB, Fit::Cut { at_most: 2 * MB }).unwrap();
        let y = p.take(4 * MB, Fit::Whole { at_most: 4 * MB }).unwrap();
        p.give_back(x.0).unwrap();
        p.give_back(y.0).unwrap();
        check(&p);
        assert_eq!(p.pop_free_segment().map(|s| s.1), Some(4 * MB));
        assert_eq!(p.pop_free_segment().map(|s| s.1), Some(4 * MB));
        assert_eq!(p.pop_free_segment(), None);
    }

    /// Random takes and give-backs against a model of what is handed out: the invariants
    /// hold after every step, handed-out spans never overlap, and everything merges back.
    #[test]
    fn random_traffic_keeps_the_invariants() {
        let mut p = SegmentPool::default();
        let segs = [(0x1000_0000usize, 64 * MB), (0x2000_0000, 40 * MB), (0x3000_0000, 8 * MB)];
        for (b, s) in segs {
            p.add_segment(b, s);
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let mut out: Vec<(usize, usize)> = Vec::new();
        for _ in 0..4000 {
            if out.is_empty() || rnd(3) > 0 {
                let size = (1 + rnd(12)) * MB / 2;
                let fit =
                    if rnd(2) == 0 { Fit::Cut { at_most: size + size / 4 } } else { Fit::Whole { at_most: size } };
                if let Some((at, got)) = p.take(size, fit) {
                    assert!(got >= size);
                    assert!(out.iter().all(|&(o, s)| at + got <= o || o + s <= at), "overlap");
                    out.push((at, got));
                }
            } else {
                let (at, got) = out.swap_remove(rnd(out.len()));
                assert_eq!(p.give_back(at), Some(got));
            }
            check(&p);
        }
        for (at, _) in out.drain(..) {
            p.give_back(at).unwrap();
        }
        check(&p);
        let mut back: Vec<_> = std::iter::from_fn(|| p.pop_free_segment()).collect();
        back.sort();
        assert_eq!(back, segs);
    }
}
