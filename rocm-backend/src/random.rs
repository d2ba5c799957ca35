//! Random numbers from a counter-based generator of our own: Philox4x32-10 (Salmon et al.,
//! "Parallel random numbers: as easy as 1, 2, 3", SC 2011), kernels of `random.hip`, and a
//! host implementation of the same stream that the tests compare against bit for bit.
//!
//! The stream of a `seed`: 32-bit word `j` is word `j % 4` of
//! `philox4x32_10([lo32(j/4), hi32(j/4), 0, 0], [lo32(seed), hi32(seed)])`. A call with
//! `offset` uses words `offset ..  offset + n`: the result depends on (seed, offset) only,
//! never on the launch geometry, so it is the same on every run and every GPU. Advance the
//! offset by the number of elements drawn (see [`Philox`]) to get fresh numbers.

use crate::buffer::DeviceArray;
use crate::device::RocmDevice;
use crate::error::{Result, RocmError};
use crate::launch::{Arg, Grid, Kernel, launch};
use crate::ops::float_only;
use candle_core::DType;
use kernels::family;
use std::sync::Arc;

const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// Largest offset + count a call may use (the kernels do i64 arithmetic on word indices).
pub const MAX_WORDS: u64 = 1 << 62;

/// One Philox4x32-10 block: 10 rounds, the key bumped by the Weyl constants between rounds.
pub fn philox4x32_10(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (ctr, key);
    for round in 0..10 {
        if round > 0 {
            k[0] = k[0].wrapping_add(W0);
            k[1] = k[1].wrapping_add(W1);
        }
        let p0 = u64::from(M0) * u64::from(c[0]);
        let p1 = u64::from(M1) * u64::from(c[2]);
        let (hi0, lo0) = ((p0 >> 32) as u32, p0 as u32);
        let (hi1, lo1) = ((p1 >> 32) as u32, p1 as u32);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// Word `j` of the stream of `seed`.
pub fn stream_word(seed: u64, j: u64) -> u32 {
    let b = j / 4;
    philox4x32_10([b as u32, (b >> 32) as u32, 0, 0], [seed as u32, (seed >> 32) as u32])[(j % 4) as usize]
}

/// Host reference of `rand_bits_u32`: words `offset .. offset + n`.
pub fn reference_bits(seed: u64, offset: u64, n: usize) -> Vec<u32> {
    (0..n as u64).map(|i| stream_word(seed, offset + i)).collect()
}

/// Host reference of `rand_uniform_f32`: `lo + (hi − lo)·u`, `u = (word >> 8)·2⁻²⁴`.
pub fn reference_uniform_f32(seed: u64, offset: u64, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    reference_bits(seed, offset, n).into_iter().map(|w| lo + (hi - lo) * ((w >> 8) as f32 / 16_777_216.0)).collect()
}

/// Host reference of `rand_normal_f32` (Box-Muller in f64 here, f32 on the device: the
/// two agree to a few f32 ulps of the radius, not bit for bit).
pub fn reference_normal(seed: u64, offset: u64, n: usize, mean: f64, std: f64) -> Vec<f64> {
    (0..n as u64)
        .map(|i| {
            let j = offset + i;
            let pair = j & !1;
            let (w0, w1) = (stream_word(seed, pair), stream_word(seed, pair + 1));
            let u1 = f64::from((w0 >> 8) + 1) / 16_777_216.0;
            let u2 = f64::from(w1 >> 8) / 16_777_216.0;
            let r = (-2.0 * u1.ln()).sqrt();
            let theta = std::f64::consts::TAU * u2;
            mean + std * if j & 1 == 1 { r * theta.sin() } else { r * theta.cos() }
        })
        .collect()
}

/// A seed and the next unused word of its stream: each draw advances the offset by its
/// element count, so successive draws never reuse a word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Philox {
    pub seed: u64,
    pub offset: u64,
}

impl Philox {
    pub fn new(seed: u64) -> Philox {
        Philox { seed, offset: 0 }
    }

    /// The offset for a draw of `n` elements, advancing past it.
    pub fn take(&mut self, n: usize) -> Result<u64> {
        let o = self.offset;
        check_range("random", o, n)?;
        self.offset += n as u64;
        Ok(o)
    }
}

fn check_range(op: &'static str, offset: u64, n: usize) -> Result<()> {
    if offset.checked_add(n as u64).is_none_or(|end| end > MAX_WORDS) {
        return Err(RocmError::op(op, format!("offset {offset} + {n} elements exceeds the stream limit 2^62")));
    }
    Ok(())
}

fn check_param(op: &'static str, what: &str, v: f64) -> Result<()> {
    if !v.is_finite() {
        return Err(RocmError::op(op, format!("{what} must be finite, got {v}")));
    }
    Ok(())
}

/// Validates the parameters of [`rand_uniform`]: finite bounds with `lo <= hi`.
pub fn check_uniform(lo: f64, hi: f64) -> Result<()> {
    check_param("rand_uniform", "lo", lo)?;
    check_param("rand_uniform", "hi", hi)?;
    if lo > hi {
        return Err(RocmError::op("rand_uniform", format!("lo {lo} is above hi {hi}")));
    }
    Ok(())
}

/// Validates the parameters of [`rand_normal`]: finite mean, finite `std >= 0`.
pub fn check_normal(mean: f64, std: f64) -> Result<()> {
    check_param("rand_normal", "mean", mean)?;
    check_param("rand_normal", "std", std)?;
    if std < 0.0 {
        return Err(RocmError::op("rand_normal", format!("std {std} is negative")));
    }
    Ok(())
}

fn run(
    dev: &Arc<RocmDevice>,
    kernel: Kernel,
    dtype: DType,
    n: usize,
    seed: u64,
    offset: u64,
    params: &[f64],
) -> Result<DeviceArray> {
    let out = DeviceArray::alloc(dev, dtype, n)?;
    if n > 0 {
        // One thread per block of four words.
        let blocks = ((offset + n as u64).div_ceil(4) - offset / 4) as usize;
        let mut args = vec![Arg::I64(n as i64), Arg::I64(seed as i64), Arg::I64(offset as i64)];
        args.extend(params.iter().map(|&p| Arg::F64(p)));
        args.push(Arg::Ptr(out.ptr_at(0)));
        launch(dev, &kernel, Grid::Elements(blocks), &mut args)?;
    }
    Ok(out)
}

/// The raw stream: `n` u32 words of `seed` from `offset`.
pub fn rand_bits(dev: &Arc<RocmDevice>, n: usize, seed: u64, offset: u64) -> Result<DeviceArray> {
    check_range("rand_bits", offset, n)?;
    run(dev, Kernel::new(&family::RAND_BITS, "", kernels::DType::U32)?, DType::U32, n, seed, offset, &[])
}

/// `n` values uniform in `[lo, hi)` (f16/bf16 rounding may reach `hi`).
pub fn rand_uniform(
    dev: &Arc<RocmDevice>,
    dtype: DType,
    n: usize,
    lo: f64,
    hi: f64,
    seed: u64,
    offset: u64,
) -> Result<DeviceArray> {
    let d = float_only("rand_uniform", dtype)?;
    check_uniform(lo, hi)?;
    check_range("rand_uniform", offset, n)?;
    run(dev, Kernel::new(&family::RAND_UNIFORM, "", d)?, dtype, n, seed, offset, &[lo, hi])
}

/// `n` values from Normal(mean, std).
pub fn rand_normal(
    dev: &Arc<RocmDevice>,
    dtype: DType,
    n: usize,
    mean: f64,
    std: f64,
    seed: u64,
    offset: u64,
) -> Result<DeviceArray> {
    let d = float_only("rand_normal", dtype)?;
    check_normal(mean, std)?;
    check_range("rand_normal", offset, n)?;
    run(dev, Kernel::new(&family::RAND_NORMAL, "", d)?, dtype, n, seed, offset, &[mean, std])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Known answers of Philox4x32-10 (the Random123 distribution's kat_vectors): zero
    /// counter and key, all-ones counter and key, and the digits of pi.
    #[test]
    fn philox_known_answers() {
        assert_eq!(philox4x32_10([0; 4], [0; 2]), [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]);
        assert_eq!(philox4x32_10([u32::MAX; 4], [u32::MAX; 2]), [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]);
        assert_eq!(
            philox4x32_10([0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344], [0xa409_3822, 0x299f_31d0]),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn the_stream_depends_on_seed_and_offset_only() {
        let a = reference_bits(42, 0, 64);
        assert_eq!(a, reference_bits(42, 0, 64));
        // A later offset is a shifted window of the same stream, at any alignment.
        for off in [1u64, 3, 4, 7] {
            assert_eq!(reference_bits(42, off, 32), a[off as usize..off as usize + 32]);
        }
        assert_ne!(a, reference_bits(43, 0, 64));
        // Words of block b: counter b in the low word, high word of the counter used too.
        assert_eq!(stream_word(5, 4 * (1u64 << 32) + 2), philox4x32_10([0, 1, 0, 0], [5, 0])[2]);
        assert_eq!(stream_word(1u64 << 32, 0), philox4x32_10([0; 4], [0, 1])[0]);
    }

    #[test]
    fn uniform_and_normal_statistics() {
        let n = 200_000;
        let u = reference_uniform_f32(7, 13, n, -1.0, 3.0);
        assert!(u.iter().all(|&x| (-1.0..3.0).contains(&x)));
        let mean = u.iter().map(|&x| x as f64).sum::<f64>() / n as f64;
        let var = u.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        // Uniform(-1, 3): mean 1, variance 16/12; 5 sigma bounds for n = 200k.
        assert!((mean - 1.0).abs() < 5.0 * (16.0f64 / 12.0 / n as f64).sqrt(), "mean {mean}");
        assert!((var - 16.0 / 12.0).abs() < 0.02, "var {var}");
        // Every tenth of the range gets its share (a coarse chi-square, 10 bins).
        let mut bins = [0usize; 10];
        for &x in &u {
            bins[(((x + 1.0) / 4.0 * 10.0) as usize).min(9)] += 1;
        }
        let e = n as f64 / 10.0;
        let chi2: f64 = bins.iter().map(|&b| (b as f64 - e).powi(2) / e).sum();
        assert!(chi2 < 33.7, "chi-square {chi2} over 10 bins (p = 1e-4 bound 33.7): {bins:?}");

        let z = reference_normal(7, 13, n, 2.0, 0.5);
        let mean = z.iter().sum::<f64>() / n as f64;
        let var = z.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64;
        assert!((mean - 2.0).abs() < 5.0 * 0.5 / (n as f64).sqrt(), "mean {mean}");
        assert!((var - 0.25).abs() < 0.01, "var {var}");
        let within1 = z.iter().filter(|x| (*x - 2.0).abs() < 0.5).count() as f64 / n as f64;
        assert!((within1 - 0.6827).abs() < 0.01, "{within1} within one sigma");
    }

    #[test]
    fn parameters_are_checked() {
        assert!(check_uniform(0.0, 1.0).is_ok());
        let e = check_uniform(2.0, 1.0).unwrap_err().to_string();
        assert!(e.contains("lo 2 is above hi 1"), "{e}");
        let e = check_uniform(f64::NAN, 1.0).unwrap_err().to_string();
        assert!(e.contains("lo must be finite, got NaN"), "{e}");
        let e = check_normal(0.0, -1.0).unwrap_err().to_string();
        assert!(e.contains("std -1 is negative"), "{e}");
        let e = check_normal(f64::INFINITY, 1.0).unwrap_err().to_string();
        assert!(e.contains("mean must be finite"), "{e}");
        let e = check_range("rand_bits", MAX_WORDS - 2, 3).unwrap_err().to_string();
        assert!(e.contains("exceeds the stream limit"), "{e}");
        let mut p = Philox::new(9);
        assert_eq!(p.take(10).unwrap(), 0);
        assert_eq!(p.take(5).unwrap(), 10);
        assert_eq!(p.offset, 15);
        p.offset = MAX_WORDS;
        assert!(p.take(1).is_err());
        assert_eq!(p.offset, MAX_WORDS, "a failed take does not advance");
    }
}
