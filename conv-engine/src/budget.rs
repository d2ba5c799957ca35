//! The memory budget convolution workspace must fit in.

use std::fmt;
use std::str::FromStr;

/// How many bytes of scratch memory a device may use beyond what is already live.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// A fixed number of bytes.
    Bytes(usize),
    /// A fraction (0, 1] of the device's free memory, read when the budget is resolved.
    FractionOfFree(f64),
}

/// The CPU's default: conv workspace stays within 64 MiB (onnxruntime's process peaks at
/// 5.2 GB RSS on the 128-channel 1024² shape; we do not need to).
pub const DEFAULT_CPU_WORKSPACE: usize = 64 << 20;

impl Budget {
    pub fn bytes(n: usize) -> Self {
        Budget::Bytes(n)
    }

    /// Panics if `f` is not in (0, 1]: that is a programming error, not input; user input
    /// goes through [`Budget::from_str`].
    pub fn fraction_of_free(f: f64) -> Self {
        assert!(f > 0.0 && f <= 1.0, "fraction_of_free({f}) outside (0, 1]");
        Budget::FractionOfFree(f)
    }

    /// Bytes this budget allows, given the device's free memory.
    pub fn resolve(&self, free_bytes: impl FnOnce() -> usize) -> usize {
        match *self {
            Budget::Bytes(n) => n,
            Budget::FractionOfFree(f) => (free_bytes() as f64 * f) as usize,
        }
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Budget::Bytes(n) => write!(f, "{}", format_bytes(n)),
            Budget::FractionOfFree(x) => write!(f, "{}% of free memory", x * 100.0),
        }
    }
}

/// `1.50 GiB`-style rendering for messages.
pub fn format_bytes(n: usize) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 { format!("{n} B") } else { format!("{v:.2} {}", UNITS[u]) }
}

/// Why a budget string did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid memory budget {input:?}: {reason} (examples: 12GiB, 512MiB, 2GB, 1000000, 80%)")]
pub struct BudgetParseError {
    pub input: String,
    pub reason: &'static str,
}

impl FromStr for Budget {
    type Err = BudgetParseError;

    /// Accepts a byte count with an optional unit (`B`, `KB`, `MB`, `GB`, `TB` are powers
    /// of 1000; `KiB`, `MiB`, `GiB`, `TiB` powers of 1024; case-insensitive) or a
    /// percentage of free memory (`80%`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason| BudgetParseError { input: s.to_string(), reason };
        let t = s.trim();
        if let Some(pct) = t.strip_suffix('%') {
            let v: f64 = pct.trim().parse().map_err(|_| err("the percentage is not a number"))?;
            if !(v > 0.0 && v <= 100.0) {
                return Err(err("a percentage must be in (0, 100]"));
            }
            return Ok(Budget::FractionOfFree(v / 100.0));
        }
        let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let v: f64 = num.trim().parse().map_err(|_| err("the amount is not a number"))?;
        let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "kb" | "k" => 1e3,
            "mb" | "m" => 1e6,
            "gb" | "g" => 1e9,
            "tb" | "t" => 1e12,
            "kib" => 1024.0,
            "mib" => 1024.0 * 1024.0,
            "gib" => 1024.0 * 1024.0 * 1024.0,
            "tib" => 1024.0f64.powi(4),
            _ => return Err(err("unknown unit")),
        };
        let bytes = v * mult;
        if !(bytes.is_finite() && bytes >= 0.0) {
            return Err(err("the amount must be a non-negative number"));
        }
        Ok(Budget::Bytes(bytes as usize))
    }
}

/// Free physical memory of this machine (`MemAvailable`), 0 if it cannot be read.
pub fn host_free_bytes() -> usize {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemAvailable:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<usize>().ok())
        })
        .map_or(0, |kb| kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_percentages() {
        assert_eq!("12GiB".parse(), Ok(Budget::Bytes(12 << 30)));
        assert_eq!("512 MiB".parse(), Ok(Budget::Bytes(512 << 20)));
        assert_eq!("2GB".parse(), Ok(Budget::Bytes(2_000_000_000)));
        assert_eq!("1000".parse(), Ok(Budget::Bytes(1000)));
        assert_eq!("1.5kib".parse(), Ok(Budget::Bytes(1536)));
        assert_eq!("80%".parse(), Ok(Budget::FractionOfFree(0.8)));
        for bad in ["", "12 parsecs", "-1GB", "0%", "150%", "GiB"] {
            let e = bad.parse::<Budget>().unwrap_err();
            assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn resolves_fractions_against_free_memory() {
        assert_eq!(Budget::fraction_of_free(0.25).resolve(|| 4000), 1000);
        assert_eq!(Budget::bytes(7).resolve(|| unreachable!()), 7);
    }
}
