//! A group normalisation's statistics taken over a map that is seen in parts: the bands
//! of a banded decode, which never holds the whole map on the device.
//!
//! Each part adds the exact per-channel sums of its values and of their squares
//! ([`ChannelSums`]); the sums do not depend on how the map was cut, so a map normalised in
//! bands with [`Tensor::group_norm_with_stats`] equals the same map normalised whole with
//! [`GroupStats::of`]'s statistics, bit for bit, for any band height.
//!
//! The squares are computed in f32: exact for f16 and bf16 values (11 and 8 significant
//! bits square into at most 22), rounded once per value for f32 (the same rounding in every
//! partition). The variance is `E[x²] − E[x]²` in f64 from the two correctly rounded sums.

use crate::error::{Error, Result};
use crate::{ChannelSums, DType, Device, ExactSum, Tensor};

/// Per-group mean and (biased, as PyTorch's) variance of a `[1, C, H, W]` map.
#[derive(Clone, Debug, PartialEq)]
pub struct GroupStats {
    channels: usize,
    mean: Vec<f64>,
    var: Vec<f64>,
    /// Values per group.
    count: u64,
}

impl GroupStats {
    /// The statistics of the whole map `[1, C, H, W]` over `groups` channel groups.
    pub fn of(map: &Tensor, groups: usize) -> Result<GroupStats> {
        let mut acc = GroupStatsAccumulator::new(map_channels(map)?, groups, map.device())?;
        acc.add(map)?;
        acc.finish()
    }

    pub fn groups(&self) -> usize {
        self.mean.len()
    }

    pub fn channels(&self) -> usize {
        self.channels
    }

    /// Per group; NaN where the map held an infinity or NaN.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Per group, biased (divided by the count); NaN where the map held an infinity or NaN.
    pub fn var(&self) -> &[f64] {
        &self.var
    }

    /// Values each group's statistics cover.
    pub fn count(&self) -> u64 {
        self.count
    }
}

/// The most bytes of f32 temporaries [`GroupStatsAccumulator::add`] makes at once.
const SQUARES_CHUNK_BYTES: usize = 256 << 20;

/// [`GroupStats`] being gathered from the parts of a map (any rows of it, in any order).
pub struct GroupStatsAccumulator {
    groups: usize,
    sums: ChannelSums,
    squares: ChannelSums,
}

impl GroupStatsAccumulator {
    /// Empty statistics of a `channels`-channel map on `device` in `groups` groups.
    pub fn new(channels: usize, groups: usize, device: &Device) -> Result<GroupStatsAccumulator> {
        if groups == 0 || channels % groups != 0 {
            return Err(Error::op("group_stats", format!("groups = {groups} does not divide {channels} channels")));
        }
        Ok(GroupStatsAccumulator {
            groups,
            sums: ChannelSums::new(channels, device)?,
            squares: ChannelSums::new(channels, device)?,
        })
    }

    /// Adds a part of the map: a `[1, C, rows, W]` tensor (f32, f16 or bf16) on the device
    /// the statistics were made for.
    pub fn add(&mut self, part: &Tensor) -> Result<()> {
        self.add_in_chunks(part, SQUARES_CHUNK_BYTES)
    }

    fn add_in_chunks(&mut self, part: &Tensor, chunk_bytes: usize) -> Result<()> {
        let (rows, cols) = match part.dims() {
            &[1, _, rows, cols] => (rows, cols),
            d => return Err(Error::op("group_stats", format!("a part must be [1, C, rows, W], got {d:?}"))),
        };
        self.sums.add(part, rows, cols)?;
        // The squares in f32, a few rows at a time: two f32 copies of a whole 4096² map
        // were 16 GiB beside the decode (the H100's size-independent 4096² decode, 40 GiB
        // live where its plan said 24). The sums are exact, so the rows' grouping does not
        // change them.
        let channels = part.dims()[1];
        let step = (chunk_bytes / (2 * 4 * channels * cols).max(1)).clamp(1, rows.max(1));
        for r0 in (0..rows).step_by(step) {
            let n = step.min(rows - r0);
            let squares = part.narrow(2, r0, n)?.to_dtype(DType::F32)?.sqr()?;
            self.squares.add(&squares, n, cols)?;
        }
        Ok(())
    }

    /// The statistics of everything added.
    pub fn finish(self) -> Result<GroupStats> {
        let (sums, squares) = (self.sums.finish()?, self.squares.finish()?);
        let channels = sums.len();
        let per_group = channels / self.groups;
        let group_sum = |v: &[ExactSum], g: usize| {
            let mut s = ExactSum::new();
            for c in &v[g * per_group..(g + 1) * per_group] {
                s.merge(c);
            }
            s
        };
        let (mut mean, mut var) = (Vec::with_capacity(self.groups), Vec::with_capacity(self.groups));
        let mut count = 0;
        for g in 0..self.groups {
            let (s1, s2) = (group_sum(&sums, g), group_sum(&squares, g));
            count = s1.count();
            if s1.saw_non_finite() || s2.saw_non_finite() || count == 0 {
                mean.push(f64::NAN);
                var.push(f64::NAN);
                continue;
            }
            let n = count as f64;
            let m = s1.sum() / n;
            mean.push(m);
            var.push((s2.sum() / n - m * m).max(0.0));
        }
        Ok(GroupStats { channels, mean, var, count })
    }
}

fn map_channels(map: &Tensor) -> Result<usize> {
    match map.dims() {
        &[1, c, _, _] => Ok(c),
        d => Err(Error::op("group_stats", format!("the map must be [1, C, H, W], got {d:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(c: usize, h: usize, w: usize, dtype: DType) -> Tensor {
        // Shifted values, so that the variance is small beside the squared mean.
        let x = Tensor::rand_normal(&[1, c, h, w], (3.0, 0.7), 11, 0, DType::F32, &Device::cpu()).unwrap();
        x.to_dtype(dtype).unwrap()
    }

    /// f64 statistics of the values as stored (the reference).
    fn reference(x: &Tensor, groups: usize) -> (Vec<f64>, Vec<f64>) {
        let v: Vec<f64> = x.to_dtype(DType::F64).unwrap().to_vec().unwrap();
        let per = v.len() / groups;
        let (mut mean, mut var) = (vec![], vec![]);
        for g in v.chunks(per) {
            let m = g.iter().sum::<f64>() / per as f64;
            mean.push(m);
            var.push(g.iter().map(|x| (x - m).powi(2)).sum::<f64>() / per as f64);
        }
        (mean, var)
    }

    #[test]
    fn statistics_match_the_f64_reference_and_do_not_depend_on_the_bands() {
        let (c, h, w, groups) = (8, 13, 9, 4);
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let x = map(c, h, w, dtype);
            let whole = GroupStats::of(&x, groups).unwrap();
            let (mean, var) = reference(&x, groups);
            for g in 0..groups {
                assert!((whole.mean()[g] - mean[g]).abs() <= 1e-12 * mean[g].abs(), "{dtype:?} mean of group {g}");
                // f16/bf16 squares are exact, f32 ones rounded once (relative 2^-24 of E[x²]).
                let tol = if dtype == DType::F32 { 1e-6 * (mean[g] * mean[g] + var[g]) } else { 1e-10 };
                assert!(
                    (whole.var()[g] - var[g]).abs() <= tol,
                    "{dtype:?} var of group {g}: {} vs {}",
                    whole.var()[g],
                    var[g]
                );
            }
            assert_eq!(whole.count(), (c / groups * h * w) as u64);
            for band in [1, 2, 5, 13] {
                let mut acc = GroupStatsAccumulator::new(c, groups, &Device::cpu()).unwrap();
                // Bands added last to first: order does not matter either.
                let starts: Vec<usize> = (0..h).step_by(band).collect();
                for &r0 in starts.iter().rev() {
                    acc.add(&x.narrow(2, r0, band.min(h - r0)).unwrap()).unwrap();
                }
                assert_eq!(acc.finish().unwrap(), whole, "{dtype:?}, bands of {band} rows");
            }
            // The squares taken a few rows at a time (as a large map's are) change nothing.
            for chunk_bytes in [1, 2 * 4 * c * w * 3, 2 * 4 * c * w * h] {
                let mut acc = GroupStatsAccumulator::new(c, groups, &Device::cpu()).unwrap();
                acc.add_in_chunks(&x, chunk_bytes).unwrap();
                assert_eq!(acc.finish().unwrap(), whole, "{dtype:?}, squares in chunks of {chunk_bytes} bytes");
            }
        }
    }

    #[test]
    fn bands_normalised_with_the_whole_maps_statistics_are_the_whole_maps_rows() {
        let (c, h, w, groups) = (6, 11, 7, 3);
        let dev = Device::cpu();
        let weight = Tensor::rand_normal(&[c], (1.0, 0.3), 12, 0, DType::F32, &dev).unwrap();
        let bias = Tensor::rand_normal(&[c], (0.0, 0.3), 13, 0, DType::F32, &dev).unwrap();
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let x = map(c, h, w, dtype);
            let (wt, bt) = (weight.to_dtype(dtype).unwrap(), bias.to_dtype(dtype).unwrap());
            let stats = GroupStats::of(&x, groups).unwrap();
            for silu in [false, true] {
                let whole = x.group_norm_with_stats(&stats, Some(&wt), Some(&bt), 1e-6, silu).unwrap();
                // Against the library's own group norm (its statistics in f64, two passes).
                let own = if silu {
                    x.group_norm_silu(groups, Some(&wt), Some(&bt), 1e-6)
                } else {
                    x.group_norm(groups, Some(&wt), Some(&bt), 1e-6)
                }
                .unwrap();
                let (a, b): (Vec<f32>, Vec<f32>) = (
                    whole.to_dtype(DType::F32).unwrap().to_vec().unwrap(),
                    own.to_dtype(DType::F32).unwrap().to_vec().unwrap(),
                );
                let tol = if dtype == DType::F32 { 1e-5 } else { 1e-2 };
                let worst = a.iter().zip(&b).map(|(x, y)| (x - y).abs() / y.abs().max(1.0)).fold(0f32, f32::max);
                assert!(worst <= tol, "{dtype:?} silu {silu}: {worst} from group_norm");
                let whole_bits: Vec<f32> = a;
                for band in [1, 4] {
                    for r0 in (0..h).step_by(band) {
                        let rows = band.min(h - r0);
                        let part = x.narrow(2, r0, rows).unwrap().contiguous().unwrap();
                        let y = part.group_norm_with_stats(&stats, Some(&wt), Some(&bt), 1e-6, silu).unwrap();
                        let y: Vec<f32> = y.to_dtype(DType::F32).unwrap().to_vec().unwrap();
                        for ch in 0..c {
                            let want = &whole_bits[(ch * h + r0) * w..][..rows * w];
                            let got = &y[ch * rows * w..][..rows * w];
                            assert!(
                                want.iter().zip(got).all(|(a, b)| a.to_bits() == b.to_bits()),
                                "{dtype:?}: band at row {r0} ({rows} rows), channel {ch} differs from the whole map"
                            );
                        }
                    }
                }
            }
        }
        let stats = GroupStats::of(&map(c, h, w, DType::F32), groups).unwrap();
        let wrong = Tensor::zeros(&[1, 4, 2, 2], DType::F32, &dev).unwrap();
        let e = wrong.group_norm_with_stats(&stats, None, None, 1e-6, false).unwrap_err().to_string();
        assert!(e.contains("[1, 6, ...]"), "{e}");
    }

    #[test]
    fn a_non_finite_value_makes_its_group_nan() {
        let mut v = vec![1f32; 2 * 4];
        v[5] = f32::INFINITY;
        let x = Tensor::from_vec(v, &[1, 2, 2, 2], &Device::cpu()).unwrap();
        let s = GroupStats::of(&x, 2).unwrap();
        assert_eq!(s.mean()[0], 1.0);
        assert!(s.mean()[1].is_nan() && s.var()[1].is_nan());
    }

    #[test]
    fn bad_shapes_are_errors() {
        let x = Tensor::zeros(&[2, 4, 3, 3], DType::F32, &Device::cpu()).unwrap();
        assert!(GroupStats::of(&x, 2).unwrap_err().to_string().contains("[1, C, H, W]"));
        assert!(GroupStatsAccumulator::new(6, 4, &Device::cpu()).is_err());
    }
}
