//! An order-independent sum of f32 values (Real-CUGAN's SE blocks take their global means
//! with it), and [`Tensor::channel_exact_sums`](crate::Tensor::channel_exact_sums), which
//! computes one per channel of a feature map on either device.
//!
//! A tiled run adds each tile's share of a feature map to the sum, the untiled run adds
//! the whole map at once; for the two to agree bit for bit, the sum must not depend on the
//! order or grouping of the additions. Floating-point addition does (in f32 and in f64), so
//! every value is split into its integer significand and binary exponent, and the
//! significands are added exactly in one i64 per exponent. The bucket array is therefore
//! the same for any partition of the values, and the final conversion to f64 is a fixed
//! function of it.

use crate::error::{Error, Result};

/// Buckets of an [`ExactSum`]: one per biased f32 exponent 0..=254 (bucket 0 stays empty:
/// subnormals go to bucket 1; exponent 255, inf and NaN, is flagged instead).
pub const EXACT_SUM_BUCKETS: usize = 255;

/// Exact sum of f32 values (one accumulator; use one per channel).
#[derive(Clone, Debug)]
pub struct ExactSum {
    /// `buckets[e]`: sum of the signed 24-bit significands of the values with biased
    /// exponent `e` (subnormals share bucket 1 with the smallest normals). Each add is
    /// below 2^24 in magnitude, so a bucket cannot overflow before 2^39 additions.
    buckets: Box<[i64; EXACT_SUM_BUCKETS]>,
    count: u64,
    non_finite: bool,
}

impl Default for ExactSum {
    fn default() -> Self {
        ExactSum { buckets: Box::new([0; EXACT_SUM_BUCKETS]), count: 0, non_finite: false }
    }
}

impl ExactSum {
    pub fn new() -> Self {
        Self::default()
    }

    #[inline]
    pub fn add(&mut self, v: f32) {
        let bits = v.to_bits();
        let exp = ((bits >> 23) & 0xff) as usize;
        if exp == 0xff {
            self.non_finite = true;
            return;
        }
        let frac = (bits & 0x7f_ffff) as i64;
        // Normal: 1.frac · 2^(exp-127) = (2^23 + frac) · 2^(exp-150); subnormal:
        // frac · 2^(-149) = frac · 2^(1-150), hence bucket 1.
        let (sig, bucket) = if exp == 0 { (frac, 1) } else { (frac | (1 << 23), exp) };
        self.buckets[bucket] += if bits >> 31 == 1 { -sig } else { sig };
        self.count += 1;
    }

    /// The accumulator that adding `count` values gives when their significands summed to
    /// `buckets` (at least [`EXACT_SUM_BUCKETS`] long; the GPU kernel's layout).
    pub fn from_buckets(buckets: &[i64], count: u64, non_finite: bool) -> Self {
        let mut s = ExactSum { count, non_finite, ..Default::default() };
        s.buckets.copy_from_slice(&buckets[..EXACT_SUM_BUCKETS]);
        s
    }

    pub fn add_slice(&mut self, values: &[f32]) {
        for &v in values {
            self.add(v);
        }
    }

    /// Adds another accumulator's values (exactly).
    pub fn merge(&mut self, other: &ExactSum) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
        self.count += other.count;
        self.non_finite |= other.non_finite;
    }

    /// Number of values added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether an infinity or NaN was added (the sum is then meaningless).
    pub fn saw_non_finite(&self) -> bool {
        self.non_finite
    }

    /// The sum, correctly rounded to f64: a function of the exact value the buckets hold,
    /// not of how it is spread over them, so any grouping of the additions, and any
    /// bucket layout that holds the same value (the GPU's f16 kernel fills three fixed-point
    /// digits instead of one bucket per exponent), gives the same bits.
    pub fn sum(&self) -> f64 {
        // The exact value in units of 2^-149 (bucket 1's), as a 384-bit two's complement
        // integer: bucket e contributes b·2^(e-1); |b| < 2^63 and e ≤ 254, so 318 bits do.
        const LIMBS: usize = 6;
        let mut v = [0u64; LIMBS];
        for e in 1..EXACT_SUM_BUCKETS {
            let b = self.buckets[e];
            if b == 0 {
                continue;
            }
            let shift = e - 1;
            let (limb, bit) = (shift / 64, shift % 64);
            // b << bit over two limbs, sign-extended above them.
            let wide = (b as i128) << bit;
            let ext = if b < 0 { u64::MAX } else { 0 };
            let mut carry = 0u128;
            for (i, slot) in v.iter_mut().enumerate().skip(limb) {
                let add = match i - limb {
                    0 => wide as u64,
                    1 => (wide >> 64) as u64,
                    _ => ext,
                };
                let t = *slot as u128 + add as u128 + carry;
                *slot = t as u64;
                carry = t >> 64;
            }
        }
        let negative = v[LIMBS - 1] >> 63 == 1;
        if negative {
            // Two's complement negation: the magnitude.
            let mut carry = 1u128;
            for slot in v.iter_mut() {
                let t = (!*slot) as u128 + carry;
                *slot = t as u64;
                carry = t >> 64;
            }
        }
        let Some(top) = (0..LIMBS).rev().find(|&i| v[i] != 0) else { return 0.0 };
        // The top 64 bits of the magnitude, and whether anything below them is set.
        let lead = v[top].leading_zeros() as usize;
        let msb = top * 64 + 63 - lead; // bit index of the leading one
        let bit = |i: usize| (v[i / 64] >> (i % 64)) & 1;
        let mut m = 0u64;
        for k in 0..64 {
            if msb >= k {
                m |= bit(msb - k) << (63 - k);
            }
        }
        let sticky = msb >= 64 && (0..=msb - 64).any(|i| bit(i) == 1);
        // f64 keeps 53 of m's 64 bits; a set bit 0 turns an exact tie into "above half"
        // when anything below m was set, and changes nothing else.
        let mag = (m | sticky as u64) as f64 * two_pow(msb as i32 - 63 - 149);
        if negative { -mag } else { mag }
    }

    /// `sum / count`, or `None` when nothing was added.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum() / self.count as f64)
    }
}

/// Per-channel exact sums of several maps (a tiled pass's tiles), accumulated where the
/// maps are. On a GPU the buckets stay on the device until [`ChannelSums::finish`] reads
/// them back once: the host does not wait for the device after every tile, so the next
/// tile's work is queued while the GPU still runs the last one.
pub struct ChannelSums {
    channels: usize,
    /// Values added per channel.
    count: u64,
    acc: Accumulator,
}

enum Accumulator {
    Host(Vec<ExactSum>),
    Rocm(crate::rocm::DeviceSums),
}

impl ChannelSums {
    /// Empty sums of `channels` channels for maps on `device`.
    pub fn new(channels: usize, device: &crate::Device) -> Result<ChannelSums> {
        let acc = match device.rocm_device() {
            Some(d) => Accumulator::Rocm(crate::rocm::DeviceSums::new(d, channels)?),
            None => Accumulator::Host(vec![ExactSum::new(); channels]),
        };
        Ok(ChannelSums { channels, count: 0, acc })
    }

    /// Adds the first `rows x cols` of each plane of a `[1, C, H, W]` map.
    pub fn add(&mut self, map: &crate::Tensor, rows: usize, cols: usize) -> Result<()> {
        let [c, rows, cols] = plane_shape(map.dims(), rows, cols)?;
        if c != self.channels {
            return Err(Error::op(
                "channel_exact_sums",
                format!("a {c}-channel map added to {}-channel sums", self.channels),
            ));
        }
        match (&mut self.acc, map.rocm_storage()) {
            (Accumulator::Rocm(acc), Some(r)) => r.channel_exact_sums_into(rows, cols, acc)?,
            (Accumulator::Host(acc), None) => {
                for (a, part) in acc.iter_mut().zip(map.channel_exact_sums(rows, cols)?) {
                    a.merge(&part);
                }
            }
            _ => {
                return Err(Error::op(
                    "channel_exact_sums",
                    format!("a map on {} added to sums on another device", map.device().kind_name()),
                ));
            }
        }
        self.count += (rows * cols) as u64;
        Ok(())
    }

    /// The sums (on a GPU: read back, after the device has done every add).
    pub fn finish(self) -> Result<Vec<ExactSum>> {
        match self.acc {
            Accumulator::Host(acc) => Ok(acc),
            Accumulator::Rocm(acc) => acc.read(self.count),
        }
    }
}

/// 2^k exactly (for the range an [`ExactSum`] needs: -149 - 63 ≤ k ≤ 254 + 63 - 149).
fn two_pow(k: i32) -> f64 {
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Per-channel exact sums of the first `rows x cols` of each `H x W` plane of a
/// `[1, C, H, W]` CPU tensor (any strides), read in place and summed in parallel over
/// channels.
pub(crate) fn cpu_channel_sums(t: &candle_core::Tensor, rows: usize, cols: usize) -> Result<Vec<ExactSum>> {
    use candle_core::CpuStorage;
    use candle_core::backend::BackendStorage;
    use half::{bf16, f16};
    use rayon::prelude::*;
    let (storage, layout) = t.storage_and_layout();
    let candle_core::Storage::Cpu(cpu) = &*storage else {
        return Err(Error::op("channel_exact_sums", "a CPU tensor backed by another device"));
    };
    let [c, _, _] = plane_shape(layout.dims(), rows, cols)?;
    let st = layout.stride();
    let (sc, sh, sw) = (st[1], st[2], st[3]);
    let start = layout.start_offset();
    fn sums<T: Copy + Sync>(v: &[T], to_f32: impl Fn(T) -> f32 + Sync, g: [usize; 7]) -> Vec<ExactSum> {
        let [c, rows, cols, start, sc, sh, sw] = g;
        (0..c)
            .into_par_iter()
            .map(|ch| {
                let mut s = ExactSum::new();
                for y in 0..rows {
                    let base = start + ch * sc + y * sh;
                    if sw == 1 {
                        v[base..base + cols].iter().for_each(|&x| s.add(to_f32(x)));
                    } else {
                        (0..cols).for_each(|x| s.add(to_f32(v[base + x * sw])));
                    }
                }
                s
            })
            .collect()
    }
    let g = [c, rows, cols, start, sc, sh, sw];
    Ok(match cpu {
        CpuStorage::F32(v) => sums(v, |x| x, g),
        CpuStorage::F16(v) => sums(v, |x: f16| x.to_f32(), g),
        CpuStorage::BF16(v) => sums(v, |x: bf16| x.to_f32(), g),
        other => {
            return Err(Error::op(
                "channel_exact_sums",
                format!("a {:?} tensor; expected f32, f16 or bf16", other.dtype()),
            ));
        }
    })
}

/// `[C, rows, cols]` of a `[1, C, H, W]` tensor whose first `rows x cols` are summed.
pub(crate) fn plane_shape(dims: &[usize], rows: usize, cols: usize) -> Result<[usize; 3]> {
    let &[1, c, h, w] = dims else {
        return Err(Error::op("channel_exact_sums", format!("needs a [1, C, H, W] tensor, got {dims:?}")));
    };
    if rows == 0 || cols == 0 || rows > h || cols > w {
        return Err(Error::op("channel_exact_sums", format!("region {rows}x{cols} of a {h}x{w} map")));
    }
    Ok([c, rows, cols])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On the CPU, `ChannelSums` over a partition of a map equals the whole map's sums and
    /// counts every part; a map with another channel count is refused.
    #[test]
    fn channel_sums_of_parts_equal_the_whole_on_the_cpu() {
        let cpu = crate::Device::cpu();
        let v: Vec<f32> = (0..3 * 9 * 11).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013).collect();
        let t = crate::Tensor::from_vec(v, &[1, 3, 9, 11], &cpu).unwrap();
        let whole = t.channel_exact_sums(9, 11).unwrap();
        let mut acc = ChannelSums::new(3, &cpu).unwrap();
        acc.add(&t.narrow(2, 0, 4).unwrap(), 4, 11).unwrap();
        acc.add(&t.narrow(2, 4, 5).unwrap().narrow(3, 0, 6).unwrap(), 5, 6).unwrap();
        acc.add(&t.narrow(2, 4, 5).unwrap().narrow(3, 6, 5).unwrap(), 5, 5).unwrap();
        assert!(acc.add(&crate::Tensor::zeros(&[1, 2, 3, 3], crate::DType::F32, &cpu).unwrap(), 3, 3).is_err());
        let got = acc.finish().unwrap();
        for (a, b) in whole.iter().zip(&got) {
            assert_eq!(a.sum().to_bits(), b.sum().to_bits());
            assert_eq!(a.count(), 99);
            assert_eq!(b.count(), 99);
        }
    }

    fn lcg(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let u = (*seed >> 40) as f32 / (1u64 << 24) as f32;
        // Wide dynamic range and both signs, like activations after a leaky ReLU.
        (u - 0.3) * 10f32.powi(((*seed >> 20) % 7) as i32 - 3)
    }

    #[test]
    fn any_grouping_gives_the_same_bits() {
        let mut seed = 7;
        let values: Vec<f32> = (0..10_000).map(|_| lcg(&mut seed)).collect();
        let mut whole = ExactSum::new();
        whole.add_slice(&values);
        for split in [1, 17, 4999, 9999] {
            let (mut a, mut b) = (ExactSum::new(), ExactSum::new());
            b.add_slice(&values[split..]);
            a.add_slice(&values[..split]);
            a.merge(&b);
            assert_eq!(a.sum().to_bits(), whole.sum().to_bits(), "split at {split}");
            assert_eq!(a.count(), whole.count());
        }
        let mut rev = ExactSum::new();
        values.iter().rev().for_each(|&v| rev.add(v));
        assert_eq!(rev.sum().to_bits(), whole.sum().to_bits());
        let reference: f64 = values.iter().map(|&v| v as f64).sum();
        assert!((whole.sum() - reference).abs() <= 1e-9 * reference.abs().max(1.0));
    }

    /// The GPU's f16 kernel puts a block's exact total, in units of 2^-24, into buckets
    /// 126/150/174 as two 24-bit digits and a signed top; the sum must be the bits of the
    /// per-exponent layout of the same values, for any split into blocks.
    #[test]
    fn the_fixed_point_layout_of_f16_sums_gives_the_same_bits() {
        let mut seed = 11u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            half::f16::from_bits((seed >> 48) as u16)
        };
        let values: Vec<half::f16> = (0..20_000).map(|_| next()).filter(|h| h.is_finite()).collect();
        let mut per_exponent = ExactSum::new();
        values.iter().for_each(|h| per_exponent.add(h.to_f32()));
        let fixed = |h: half::f16| -> i64 {
            let b = h.to_bits();
            let (e, frac) = ((b >> 10) & 31, (b & 0x3ff) as i64);
            let m = if e == 0 { frac } else { (frac | 0x400) << (e - 1) };
            if b >> 15 == 1 { -m } else { m }
        };
        for block in [1, 7, 1000, values.len()] {
            let mut buckets = [0i64; 256];
            for chunk in values.chunks(block) {
                let total: i64 = chunk.iter().map(|&h| fixed(h)).sum();
                buckets[126] += total & 0xff_ffff;
                buckets[150] += (total >> 24) & 0xff_ffff;
                buckets[174] += total >> 48;
            }
            let digits = ExactSum::from_buckets(&buckets, values.len() as u64, false);
            assert_eq!(digits.sum().to_bits(), per_exponent.sum().to_bits(), "blocks of {block}");
        }
    }

    /// Correct rounding: ties to even, and anything below a tie rounds it up.
    #[test]
    fn the_sum_is_correctly_rounded() {
        let of = |values: &[f32]| {
            let mut s = ExactSum::new();
            values.iter().for_each(|&v| s.add(v));
            s.sum()
        };
        let tiny = f32::from_bits(1); // 2^-149
        // 1 + 2^-53: a tie between 1 and 1 + 2^-52, to even: 1.
        assert_eq!(of(&[1.0, 2f32.powi(-53)]), 1.0);
        // ... plus 2^-149 below it: above the tie.
        assert_eq!(of(&[1.0, 2f32.powi(-53), tiny]), 1.0 + 2f64.powi(-52));
        // (1 + 2^-52) + 2^-53: a tie, to even: 1 + 2^-51.
        assert_eq!(of(&[1.0, 2f32.powi(-52), 2f32.powi(-53)]), 1.0 + 2f64.powi(-51));
        assert_eq!(of(&[-3.0, 2f32.powi(-53), -tiny]), -3.0);
        assert_eq!(of(&[f32::MAX, f32::MAX]), 2.0 * f32::MAX as f64);
        assert_eq!(of(&[tiny, tiny, tiny]), 3.0 * tiny as f64);
        assert_eq!(of(&[]), 0.0);
    }

    #[test]
    fn exact_on_cancellation_and_subnormals() {
        let mut s = ExactSum::new();
        for v in [1e30f32, 1.0, -1e30, f32::from_bits(1), f32::from_bits(1), -0.0] {
            s.add(v);
        }
        assert_eq!(s.sum(), 1.0 + 2.0 * f32::from_bits(1) as f64);
        assert_eq!(s.count(), 6);
        assert_eq!(s.mean(), Some(s.sum() / 6.0));
        assert!(!s.saw_non_finite());
        s.add(f32::NAN);
        assert!(s.saw_non_finite());
        assert_eq!(ExactSum::new().mean(), None);
    }
}
