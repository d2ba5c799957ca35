//! A deterministic mutation fuzzer for the loaders' tests (feature `testing`): seeded
//! mutations of valid files (truncation, bit flips, byte overwrites, inserted and deleted
//! runs, duplicated regions, and format-aware edits the caller supplies: wrong sizes,
//! huge dimensions, duplicate names), each parsed under `catch_unwind` with the largest
//! single allocation it asked for measured by [`CountingAlloc`]. A test asserts zero
//! panics and no allocation beyond what the input's length justifies.

use crate::CountingAlloc;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// SplitMix64: small, fast, and the same sequence on every machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Numbers that break size arithmetic, as text.
pub const HUGE_NUMBERS: [&str; 10] = [
    "0",
    "-1",
    "4294967295",
    "4294967296",
    "2147483647",
    "-2147483648",
    "18446744073709551615",
    "99999999999999999999999",
    "1000000000000",
    "65536",
];

/// One generic mutation of `data`.
pub fn mutate_bytes(rng: &mut Rng, data: &[u8]) -> Vec<u8> {
    let mut v = data.to_vec();
    let len = v.len();
    match rng.below(8) {
        // Truncation.
        0 => v.truncate(rng.below(len + 1)),
        // Bit flips.
        1 if len > 0 => {
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(len);
                v[i] ^= 1 << rng.below(8);
            }
        }
        // Interesting byte values.
        2 if len > 0 => {
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(len);
                v[i] = *rng.pick(&[0x00, 0xff, 0x7f, 0x80, 0x01, b'9', b'-', b'.', b' ', b'\n']);
            }
        }
        // A 4- or 8-byte little-endian field overwritten with an extreme value.
        3 if len >= 8 => {
            let i = rng.below(len - 7);
            let value: u64 = *rng.pick(&[u64::MAX, u32::MAX as u64, 1 << 31, 1 << 40, 0, 1 << 20]);
            let width = if rng.below(2) == 0 { 4 } else { 8 };
            v[i..i + width].copy_from_slice(&value.to_le_bytes()[..width]);
        }
        // Insert a run of random bytes.
        4 => {
            let at = rng.below(len + 1);
            let run: Vec<u8> = (0..1 + rng.below(16)).map(|_| rng.next_u64() as u8).collect();
            v.splice(at..at, run);
        }
        // Delete a run.
        5 if len > 0 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(16)).min(len);
            v.drain(at..end);
        }
        // Duplicate a region somewhere else (repeated records, names, chunks).
        6 if len > 0 => {
            let at = rng.below(len);
            let end = (at + 1 + rng.below(64)).min(len);
            let region = v[at..end].to_vec();
            let to = rng.below(len + 1);
            v.splice(to..to, region);
        }
        // A decimal number in text replaced with a huge or negative one.
        _ => replace_number(rng, &mut v),
    }
    v
}

/// Replaces one run of ASCII digits (if any) with one of [`HUGE_NUMBERS`].
pub fn replace_number(rng: &mut Rng, v: &mut Vec<u8>) {
    let runs: Vec<(usize, usize)> = {
        let mut runs = Vec::new();
        let mut i = 0;
        while i < v.len() {
            if v[i].is_ascii_digit() {
                let s = i;
                while i < v.len() && v[i].is_ascii_digit() {
                    i += 1;
                }
                runs.push((s, i));
            } else {
                i += 1;
            }
        }
        runs
    };
    if runs.is_empty() {
        return;
    }
    let (s, e) = *rng.pick(&runs);
    let n = rng.pick(&HUGE_NUMBERS).as_bytes().to_vec();
    v.splice(s..e, n);
}

/// A format-aware mutation: `None` when it does not apply to this input.
pub type AwareMutation<'a> = &'a dyn Fn(&mut Rng, &[u8]) -> Option<Vec<u8>>;

type PanicHook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

/// What one format's fuzzing found.
#[derive(Debug, Default)]
pub struct FuzzReport {
    pub format: String,
    pub tried: usize,
    pub accepted: usize,
    pub rejected: usize,
    /// Inputs whose parse panicked: (mutation index, panic message).
    pub panics: Vec<(usize, String)>,
    /// Inputs whose largest allocation passed the bound: (index, input bytes, asked bytes).
    pub over_allocations: Vec<(usize, usize, usize)>,
    /// The largest allocation any input asked for, and that input's length.
    pub largest: (usize, usize),
    pub elapsed: Duration,
}

impl std::fmt::Display for FuzzReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {} mutated inputs in {:.1} s: {} accepted, {} rejected with an error, {} panics, {} over the allocation bound; largest allocation {} bytes (for a {}-byte input)",
            self.format,
            self.tried,
            self.elapsed.as_secs_f64(),
            self.accepted,
            self.rejected,
            self.panics.len(),
            self.over_allocations.len(),
            self.largest.0,
            self.largest.1,
        )
    }
}

/// Fuzzes `parse` with `count` mutations of `seeds`: each input is one to three stacked
/// mutations, generic ([`mutate_bytes`]) or from `aware` (format-aware; `None` falls back
/// to a generic one). `bound(len)` is the most a `len`-byte input may ask for in one
/// allocation. Stops early, after at least `min_count`, if `time_limit` has passed.
#[allow(clippy::too_many_arguments)]
pub fn fuzz(
    format: &str,
    heap: &CountingAlloc,
    seed: u64,
    seeds: &[Vec<u8>],
    count: usize,
    time_limit: Duration,
    aware: AwareMutation<'_>,
    bound: &dyn Fn(usize) -> usize,
    parse: &dyn Fn(&[u8]) -> Result<(), String>,
) -> FuzzReport {
    let mut rng = Rng::new(seed);
    let mut report = FuzzReport { format: format.to_string(), ..Default::default() };
    let started = Instant::now();
    // Silence the default hook's message for every caught panic; they are counted.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    // The hook is restored however the loop ends (a bug in a mutator panics out of it).
    struct Restore(Option<PanicHook>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(h) = self.0.take() {
                let _ = std::panic::take_hook();
                std::panic::set_hook(h);
            }
        }
    }
    let restore = Restore(Some(hook));
    for i in 0..count {
        let mut input = rng.pick(seeds).clone();
        for _ in 0..1 + rng.below(3) {
            input = match rng.below(2) {
                0 => aware(&mut rng, &input).unwrap_or_else(|| mutate_bytes(&mut rng, &input)),
                _ => mutate_bytes(&mut rng, &input),
            };
        }
        let (outcome, largest) = heap.largest_during(|| catch_unwind(AssertUnwindSafe(|| parse(&input))));
        report.tried += 1;
        match outcome {
            Ok(Ok(())) => report.accepted += 1,
            Ok(Err(_)) => report.rejected += 1,
            Err(p) => {
                let msg = p
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_default();
                report.panics.push((i, msg));
            }
        }
        if largest > bound(input.len()) {
            report.over_allocations.push((i, input.len(), largest));
        }
        if largest > report.largest.0 {
            report.largest = (largest, input.len());
        }
        if i % 256 == 0 && started.elapsed() > time_limit {
            break;
        }
    }
    drop(restore);
    report.elapsed = started.elapsed();
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutations_are_deterministic_and_varied() {
        let data = b"7767517\n2 2\nInput in 0 1 in\n".to_vec();
        let a: Vec<Vec<u8>> = (0..50).scan(Rng::new(7), |r, _| Some(mutate_bytes(r, &data))).collect();
        let b: Vec<Vec<u8>> = (0..50).scan(Rng::new(7), |r, _| Some(mutate_bytes(r, &data))).collect();
        assert_eq!(a, b);
        let distinct: std::collections::BTreeSet<_> = a.iter().collect();
        assert!(distinct.len() > 40, "{}", distinct.len());
        assert!(a.iter().any(|m| m.len() < data.len()) && a.iter().any(|m| m.len() > data.len()));
    }
}
