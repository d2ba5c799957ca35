//! ncnn `Crop` (src/layer/crop.cpp), numpy-slice form only.

use super::super::{BlobShape, NcnnError};
use super::params::Params;
use super::unexpected_inputs;

/// ncnn `Crop` in its numpy-slice form (`-23309` starts, `-23310` ends, `-23311` axes),
/// the only form Real-CUGAN uses. Use [`Crop::resolve_chw`] to apply it to a shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crop {
    /// One entry per sliced axis, in file order.
    pub slices: Vec<CropSlice>,
}

/// One axis of a [`Crop`]: ncnn semantics, resolved against the axis size `n` as
/// `offset = start >= 0 ? start : n + start`, `end' = min(n, end > 0 ? end : n + end)`,
/// length `end' - offset`; `start = -233` means 0 and `end = -233` means `n`. Note the
/// ncnn quirk that `end = 0` also means `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CropSlice {
    pub axis: CropAxis,
    pub start: i32,
    pub end: i32,
}

/// Axis of a 3-D `[C, H, W]` blob. ncnn numbers them 0, 1, 2 and lets negative axes count
/// from the end (-3, -2, -1); the Real-CUGAN files use both spellings (`-2,-1` in se/pro,
/// `1,2` in nose) for H and W.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CropAxis {
    C,
    H,
    W,
}

/// The region a [`Crop`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CropRoi {
    pub c_offset: usize,
    pub channels: usize,
    pub h_offset: usize,
    pub height: usize,
    pub w_offset: usize,
    pub width: usize,
}

/// A crop that does not fit the blob it is applied to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("crop of axis {axis:?} with start {start} and end {end} is empty or outside an axis of size {size}")]
pub struct CropRangeError {
    pub axis: CropAxis,
    pub start: i32,
    pub end: i32,
    pub size: usize,
}

impl Crop {
    /// The kept region of a `[channels, height, width]` blob.
    pub fn resolve_chw(&self, channels: usize, height: usize, width: usize) -> Result<CropRoi, CropRangeError> {
        let mut roi = CropRoi { c_offset: 0, channels, h_offset: 0, height, w_offset: 0, width };
        for s in &self.slices {
            let size = match s.axis {
                CropAxis::C => channels,
                CropAxis::H => height,
                CropAxis::W => width,
            };
            let err = CropRangeError { axis: s.axis, start: s.start, end: s.end, size };
            let n = i64::try_from(size).map_err(|_| err.clone())?;
            let start = if s.start == -233 { 0 } else { i64::from(s.start) };
            let end = if s.end == -233 { n } else { i64::from(s.end) };
            let offset = if start >= 0 { start } else { n + start };
            let stop = n.min(if end > 0 { end } else { n + end });
            if offset < 0 || offset >= n || stop <= offset {
                return Err(err);
            }
            // Both fit in usize: 0 <= offset < stop <= n = size.
            let (offset, len) = ((offset) as usize, (stop - offset) as usize);
            match s.axis {
                CropAxis::C => (roi.c_offset, roi.channels) = (offset, len),
                CropAxis::H => (roi.h_offset, roi.height) = (offset, len),
                CropAxis::W => (roi.w_offset, roi.width) = (offset, len),
            }
        }
        Ok(roi)
    }

    pub(super) fn load(p: &Params<'_>) -> Result<Self, NcnnError> {
        p.expect_blobs(1, Some(1))?;
        p.only(&[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15])?;
        for (id, what) in [
            (0, "woffset"),
            (1, "hoffset"),
            (2, "coffset"),
            (3, "outw"),
            (4, "outh"),
            (5, "outc"),
            (6, "woffset2"),
            (7, "hoffset2"),
            (8, "coffset2"),
            (13, "doffset"),
            (14, "outd"),
            (15, "doffset2"),
        ] {
            p.require_int(id, 0, 0, &format!("{what} (offset-style crop)"))?;
        }
        let starts = p.int_array(9)?;
        let ends = p.int_array(10)?;
        let axes = p.int_array(11)?;
        if starts.is_empty() || starts.len() != ends.len() {
            return Err(p.err(format!(
                "numpy-style crop needs as many starts (-23309) as ends (-23310), at least one; found {} and {}",
                starts.len(),
                ends.len()
            )));
        }
        // ncnn: without axes, starts[i] / ends[i] apply to axis i of all the blob's axes.
        let axes: Vec<i32> = if axes.is_empty() {
            if starts.len() != 3 {
                return Err(p.err(format!(
                    "crop without axes (-23311) must give 3 starts/ends (c, h, w), found {}",
                    starts.len()
                )));
            }
            vec![0, 1, 2]
        } else if axes.len() == starts.len() {
            axes.to_vec()
        } else {
            return Err(p.err(format!("crop gives {} axes for {} starts/ends", axes.len(), starts.len())));
        };
        let mut slices: Vec<CropSlice> = Vec::new();
        for ((&axis, &start), &end) in axes.iter().zip(starts).zip(ends) {
            let axis = match axis {
                0 | -3 => CropAxis::C,
                1 | -2 => CropAxis::H,
                2 | -1 => CropAxis::W,
                _ => {
                    return Err(p.err(format!("crop axis {axis} is not an axis of a [C, H, W] blob")));
                }
            };
            if slices.iter().any(|s| s.axis == axis) {
                return Err(p.err(format!("crop axis {axis:?} is given twice")));
            }
            slices.push(CropSlice { axis, start, end });
        }
        Ok(Crop { slices })
    }

    /// Only the channel count is known before an input size is: H and W stay open.
    pub(super) fn output_shape(&self, inputs: &[BlobShape]) -> Result<BlobShape, String> {
        let [BlobShape::Image { channels }] = inputs else {
            return Err(unexpected_inputs("Crop", inputs));
        };
        let mut channels = *channels;
        if let Some(s) = self.slices.iter().find(|s| s.axis == CropAxis::C) {
            channels = match channels {
                Some(c) => Some(Crop { slices: vec![*s] }.resolve_chw(c, 1, 1).map_err(|e| e.to_string())?.channels),
                None => None,
            };
        }
        Ok(BlobShape::Image { channels })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crop(slices: &[(CropAxis, i32, i32)]) -> Crop {
        Crop { slices: slices.iter().map(|&(axis, start, end)| CropSlice { axis, start, end }).collect() }
    }

    #[test]
    fn crop_resolves_like_ncnn() {
        let c = crop(&[(CropAxis::H, 4, -4), (CropAxis::W, 4, -4)]);
        assert_eq!(
            c.resolve_chw(64, 20, 30).unwrap(),
            CropRoi { c_offset: 0, channels: 64, h_offset: 4, height: 12, w_offset: 4, width: 22 }
        );
        // -233 = open; end 0 = n (ncnn quirk); positive end past n clamps; negative start.
        let c = crop(&[(CropAxis::C, -233, 2), (CropAxis::H, 1, 0), (CropAxis::W, -5, 100)]);
        assert_eq!(
            c.resolve_chw(3, 10, 12).unwrap(),
            CropRoi { c_offset: 0, channels: 2, h_offset: 1, height: 9, w_offset: 7, width: 5 }
        );
        let c = crop(&[(CropAxis::W, 1, -233)]);
        assert_eq!(c.resolve_chw(1, 1, 3).unwrap().width, 2);
    }

    #[test]
    fn crop_out_of_range_is_an_error() {
        let c = crop(&[(CropAxis::H, 4, -4)]);
        assert_eq!(c.resolve_chw(3, 8, 8), Err(CropRangeError { axis: CropAxis::H, start: 4, end: -4, size: 8 }));
        assert!(crop(&[(CropAxis::W, 9, 12)]).resolve_chw(3, 8, 8).is_err());
        assert!(crop(&[(CropAxis::W, -9, 2)]).resolve_chw(3, 8, 8).is_err());
        assert!(crop(&[(CropAxis::C, 0, 1)]).resolve_chw(0, 8, 8).is_err());
    }
}
