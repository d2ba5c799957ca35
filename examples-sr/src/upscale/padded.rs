//! The network's input: the image's RGB planes reflect-padded as realcugan-ncnn-vulkan
//! pads them (see the module doc of `upscale`), and the windows of them that tiles run on.
//!
//! The planes are kept as normalised f32 samples, or, for an 8-bit image on a GPU, as the
//! 8-bit levels themselves: a window then goes up as a quarter of the bytes (6.5 MB
//! instead of 26 MB at 1080p, 3.7 ms of the H200's pageable copy) and is normalised on the
//! device. Both give the same f32 values bit for bit: `level · (1/max)` is one rounding of
//! an exact product whether the host or the device multiplies.

use std::ops::Range;
use std::sync::Mutex;

use rayon::prelude::*;
use rocm_vision::{DType, Device, PadMode, Tensor};

use crate::Error;
use crate::image_io::{Image, Pixels};

/// Mirror without repeating the edge (numpy's `reflect`, ncnn's `copy_make_border` type 2).
pub(super) fn reflect(i: isize, n: usize) -> usize {
    if n == 1 {
        return 0;
    }
    let period = 2 * (n as isize - 1);
    let m = i.rem_euclid(period);
    (if m < n as isize { m } else { period - m }) as usize
}

/// `(h, w)` rounded up to `multiple`, plus `pad` on each side.
fn padded_size(h: usize, w: usize, pad: usize, multiple: usize) -> (usize, usize) {
    (h.div_ceil(multiple) * multiple + 2 * pad, w.div_ceil(multiple) * multiple + 2 * pad)
}

/// The padded planes `[3][h][w]`.
pub(super) enum Planes {
    /// Samples · (1/max).
    F32(Vec<f32>),
    /// 8-bit levels, normalised after the upload.
    Levels(Vec<u8>),
    /// Made on the device ([`Padded::on_device`]): only the resident tensor holds them.
    OnDevice,
}

/// [`Padded::host`]: the padded planes on the host.
pub(super) struct HostSamples<'a> {
    data: HostData<'a>,
    h: usize,
    w: usize,
}

enum HostData<'a> {
    F32(&'a [f32]),
    /// Levels and 1/max.
    Levels(&'a [u8], f32),
}

impl HostSamples<'_> {
    /// The normalised sample of channel `c` at padded row `y`, column `x`.
    pub fn sample(&self, c: usize, y: usize, x: usize) -> f32 {
        let i = (c * self.h + y) * self.w + x;
        match self.data {
            HostData::F32(v) => v[i],
            HostData::Levels(v, inv) => v[i] as f32 * inv,
        }
    }
}

/// The padded, normalised RGB input planes.
pub(super) struct Padded {
    planes: Planes,
    pub h: usize,
    pub w: usize,
    /// 1/max: what a level is multiplied by.
    inv: f32,
    /// A tile window's samples, kept from one window to the next: a fresh buffer per tile
    /// costs its page faults again each time (0.3-0.9 ms of GPU idle per 480x360 tile on
    /// the H200 host, 2026-12-04 timeline). The f32 or the 8-bit one, as the planes are.
    scratch: Mutex<(Vec<f32>, Vec<u8>)>,
    /// The 8-bit planes on the GPU ([`Self::make_resident`]): tile windows are then views
    /// of them, and starting a tile queues its kernels without an upload, which would wait
    /// for the device to finish the previous tile.
    resident: Mutex<Option<Tensor>>,
}

impl Padded {
    /// `img`'s RGB planes reflect-padded by `pad`, plus the rows and columns that round
    /// the size up to a multiple of `multiple` (at the bottom/right); as levels when
    /// `levels` is asked for and the image is 8-bit. `reuse`: the planes of an earlier
    /// image ([`Self::into_planes`]), whose memory is written again instead of fresh pages
    /// (their first touch cost 3-6 ms per 1080p image on the H200's host).
    pub fn of(img: &Image, pad: usize, multiple: usize, levels: bool, reuse: Option<Planes>) -> Padded {
        let (w, h) = (img.width, img.height);
        let (hp, wp) = padded_size(h, w, pad, multiple);
        let inv = 1.0f32 / img.max_value();
        let ry: Vec<usize> = (0..hp).map(|y| reflect(y as isize - pad as isize, h)).collect();
        let rx: Vec<usize> = (0..wp).map(|x| reflect(x as isize - pad as isize, w)).collect();
        // Rows in parallel: at 1080p and up this is tens of milliseconds on one core.
        #[allow(clippy::too_many_arguments)]
        fn fill<T: Send + Default + Clone>(
            mut data: Vec<T>,
            hp: usize,
            wp: usize,
            ry: &[usize],
            rx: &[usize],
            w: usize,
            at: impl Fn(usize, usize) -> T + Sync,
        ) -> Vec<T> {
            data.clear();
            data.resize(3 * hp * wp, T::default());
            data.par_chunks_exact_mut(wp).enumerate().for_each(|(r, row)| {
                let (c, y) = (r / hp, r % hp);
                let src = ry[y] * w;
                for (x, v) in row.iter_mut().enumerate() {
                    *v = at(src + rx[x], c);
                }
            });
            data
        }
        let ch = img.channels;
        let (mut f32s, mut u8s) = (Vec::new(), Vec::new());
        match reuse {
            Some(Planes::F32(v)) => f32s = v,
            Some(Planes::Levels(v)) => u8s = v,
            Some(Planes::OnDevice) | None => {}
        }
        let planes = match &img.pixels {
            Pixels::U8(v) if levels => Planes::Levels(fill(u8s, hp, wp, &ry, &rx, w, |i, c| v[i * ch + c])),
            _ => Planes::F32(fill(f32s, hp, wp, &ry, &rx, w, |i, c| img.sample(i * ch + c) * inv)),
        };
        Padded::new(planes, hp, wp, inv)
    }

    fn new(planes: Planes, h: usize, w: usize, inv: f32) -> Padded {
        Padded { planes, h, w, inv, scratch: Default::default(), resident: Default::default() }
    }

    /// [`Self::of`]'s 8-bit planes made on `device` from the image's own interleaved
    /// samples: one upload of them (no host pass), then the channel transpose and the
    /// reflect padding there. On the H100 host the host planes took 3-5 ms of a 75 ms
    /// 1080p upscale (2026-12-05); on the device they take microseconds. `None` for a
    /// 16-bit image, or where a pad reaches past the mirrored edge (an image smaller than
    /// the pad: [`reflect`] bounces there, the device's PyTorch-style reflect does not).
    pub fn on_device(img: &Image, pad: usize, multiple: usize, device: &Device) -> Result<Option<Padded>, Error> {
        let Pixels::U8(v) = &img.pixels else { return Ok(None) };
        let (w, h, ch) = (img.width, img.height, img.channels);
        let (hp, wp) = padded_size(h, w, pad, multiple);
        let (bottom, right) = (hp - h - pad, wp - w - pad);
        if pad.max(bottom) >= h || pad.max(right) >= w {
            return Ok(None);
        }
        let planes = Tensor::from_slice(v, &[h, w, ch], device)?
            .narrow(2, 0, 3)?
            .permute(&[2, 0, 1])?
            .pad2d(pad, bottom, pad, right, PadMode::Reflect)?
            .reshape(&[1, 3, hp, wp])?;
        let padded = Padded::new(Planes::OnDevice, hp, wp, 1.0 / img.max_value());
        *padded.resident.lock().unwrap_or_else(|e| e.into_inner()) = Some(planes);
        Ok(Some(padded))
    }

    /// Uploads 8-bit planes to `device` once, when it is a GPU, for the windows of a tiled
    /// run; [`Self::resident_bytes`] is what that holds there. Other planes stay on the host.
    pub fn make_resident(&self, device: &Device) -> Result<(), Error> {
        if let (Planes::Levels(v), true) = (&self.planes, device.is_rocm()) {
            let mut resident = self.resident.lock().unwrap_or_else(|e| e.into_inner());
            if resident.is_none() {
                *resident = Some(Tensor::from_slice(v, &[1, 3, self.h, self.w], device)?);
            }
        }
        Ok(())
    }

    /// Device bytes [`Self::make_resident`] holds for padded planes of `h x w` (8-bit).
    pub fn resident_bytes(h: usize, w: usize) -> usize {
        3 * h * w
    }

    /// The planes, for the next image's [`Self::of`].
    pub fn into_planes(self) -> Planes {
        self.planes
    }

    /// The planes on the host, for reading samples there (4x's residual); `None` when they
    /// were made on the device.
    pub fn host(&self) -> Option<HostSamples<'_>> {
        let data = match &self.planes {
            Planes::F32(v) => HostData::F32(v),
            Planes::Levels(v) => HostData::Levels(v, self.inv),
            Planes::OnDevice => return None,
        };
        Some(HostSamples { data, h: self.h, w: self.w })
    }

    /// The net input of a tile: `rows x cols` of the rounded image plus `pad` on each side,
    /// as normalised f32 on `device`. The whole padded image is uploaded from the planes
    /// themselves (no host copy).
    pub fn window(
        &self,
        rows: &Range<usize>,
        cols: &Range<usize>,
        pad: usize,
        device: &Device,
    ) -> Result<Tensor, Error> {
        let (th, tw) = (rows.len() + 2 * pad, cols.len() + 2 * pad);
        if rows.start + th > self.h || cols.start + tw > self.w {
            return Err(Error::Internal(format!(
                "a {tw}x{th} window at ({}, {}) of a {}x{} padded image",
                cols.start, rows.start, self.w, self.h
            )));
        }
        let shape = [1, 3, th, tw];
        let whole = (rows.start, cols.start, th, tw) == (0, 0, self.h, self.w);
        let (h, w) = (self.h, self.w);
        fn copy<T: Copy>(
            src: &[T],
            dst: &mut Vec<T>,
            (h, w): (usize, usize),
            (y0, x0): (usize, usize),
            (th, tw): (usize, usize),
        ) {
            dst.clear();
            for c in 0..3 {
                for y in y0..y0 + th {
                    let at = (c * h + y) * w + x0;
                    dst.extend_from_slice(&src[at..at + tw]);
                }
            }
        }
        if let Some(all) = &*self.resident.lock().unwrap_or_else(|e| e.into_inner()) {
            return self.normalised(all.narrow(2, rows.start, th)?.narrow(3, cols.start, tw)?);
        }
        let at = (rows.start, cols.start);
        let mut scratch = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let (f32s, u8s) = &mut *scratch;
        Ok(match &self.planes {
            Planes::F32(v) if whole => Tensor::from_slice(v, &shape, device)?,
            Planes::Levels(v) if whole => self.normalised(Tensor::from_slice(v, &shape, device)?)?,
            Planes::F32(v) => {
                copy(v, f32s, (h, w), at, (th, tw));
                Tensor::from_slice(f32s, &shape, device)?
            }
            Planes::Levels(v) => {
                copy(v, u8s, (h, w), at, (th, tw));
                self.normalised(Tensor::from_slice(u8s, &shape, device)?)?
            }
            Planes::OnDevice => {
                return Err(Error::Internal("padded planes made on the device lost their tensor".into()));
            }
        })
    }

    /// Levels · (1/max) in f32, on the levels' device.
    fn normalised(&self, levels: Tensor) -> Result<Tensor, Error> {
        Ok(levels.to_dtype(DType::F32)?.affine(self.inv as f64, 0.0)?)
    }

    /// The planes in orientation `k` (0..8; 4..8 are transposed), `forward` mapping a
    /// position of the original to its place in the oriented planes (TTA).
    pub fn oriented(
        &self,
        k: usize,
        forward: impl Fn(usize, usize, usize, usize, usize) -> (usize, usize),
    ) -> Result<Padded, Error> {
        let (h, w) = (self.h, self.w);
        let (nh, nw) = if k >= 4 { (w, h) } else { (h, w) };
        fn turn<T: Copy + Default>(
            src: &[T],
            h: usize,
            w: usize,
            nw: usize,
            k: usize,
            forward: &impl Fn(usize, usize, usize, usize, usize) -> (usize, usize),
        ) -> Vec<T> {
            let mut data = vec![T::default(); src.len()];
            for c in 0..3 {
                let (s, d) = (&src[c * h * w..(c + 1) * h * w], &mut data[c * h * w..(c + 1) * h * w]);
                for i in 0..h {
                    for j in 0..w {
                        let (a, b) = forward(k, i, j, h, w);
                        d[a * nw + b] = s[i * w + j];
                    }
                }
            }
            data
        }
        let planes = match &self.planes {
            Planes::F32(v) => Planes::F32(turn(v, h, w, nw, k, &forward)),
            Planes::Levels(v) => Planes::Levels(turn(v, h, w, nw, k, &forward)),
            Planes::OnDevice => return Err(Error::Internal("TTA turns the padded planes on the host".into())),
        };
        Ok(Padded::new(planes, nh, nw, self.inv))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reflect_matches_numpy() {
        // np.pad([0,1,2,3], 5, mode="reflect") = [1 2 3 2 1 | 0 1 2 3 | 2 1 0 1 2]
        let got: Vec<usize> = (-5..9).map(|i| reflect(i, 4)).collect();
        assert_eq!(got, [1, 2, 3, 2, 1, 0, 1, 2, 3, 2, 1, 0, 1, 2]);
        assert_eq!(reflect(-3, 1), 0);
        assert_eq!((-2..4).map(|i| reflect(i, 2)).collect::<Vec<_>>(), [0, 1, 0, 1, 0, 1]);
    }

    /// Levels normalised after the upload are the f32 planes bit for bit, whole and in a
    /// window, and `sample` agrees with both.
    #[test]
    fn levels_and_f32_planes_give_the_same_input() {
        let (w, h) = (37, 23);
        let data: Vec<u8> = (0..w * h * 3).map(|i| (i * 97 % 256) as u8).collect();
        let img = Image::from_u8(w, h, 3, data).unwrap();
        let (f, l) = (Padded::of(&img, 5, 4, false, None), Padded::of(&img, 5, 4, true, None));
        assert!(matches!(f.planes, Planes::F32(_)) && matches!(l.planes, Planes::Levels(_)));
        assert_eq!((f.h, f.w), (l.h, l.w));
        let cpu = Device::cpu();
        for (rows, cols) in [(0..f.h - 10, 0..f.w - 10), (4..12, 8..20)] {
            let a = f.window(&rows, &cols, 5, &cpu).unwrap().to_vec::<f32>().unwrap();
            let b = l.window(&rows, &cols, 5, &cpu).unwrap().to_vec::<f32>().unwrap();
            assert_eq!(a.len(), b.len());
            assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        }
        let (fs, ls) = (f.host().unwrap(), l.host().unwrap());
        for (c, y, x) in [(0, 0, 0), (2, f.h - 1, f.w - 1), (1, 7, 30)] {
            assert_eq!(fs.sample(c, y, x).to_bits(), ls.sample(c, y, x).to_bits());
        }
        // 16-bit images stay f32 whatever is asked.
        let deep = Image::from_u16(2, 2, 3, vec![65535; 12]).unwrap();
        assert!(matches!(Padded::of(&deep, 1, 2, true, None).planes, Planes::F32(_)));
        // Reused planes of another image (larger, then of the other kind) give the same input.
        let again = Padded::of(&img, 5, 4, true, Some(Padded::of(&deep, 40, 2, false, None).into_planes()));
        let again = Padded::of(&img, 5, 4, true, Some(again.into_planes()));
        let rows = 0..again.h - 10;
        let cols = 0..again.w - 10;
        let a = again.window(&rows, &cols, 5, &cpu).unwrap().to_vec::<f32>().unwrap();
        let b = l.window(&rows, &cols, 5, &cpu).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(a, b);
    }

    /// The planes padded on a device (here the CPU's tensors, the same ops a GPU runs) are
    /// the host's, bit for bit, for RGB and RGBA, pads up to the image's edge, and odd sizes
    /// rounded up; a pad past the mirrored edge falls back to the host.
    #[test]
    fn planes_padded_on_a_device_are_the_hosts() {
        let cpu = Device::cpu();
        for (w, h, ch, pad, multiple) in [(37, 23, 3, 5, 4), (40, 21, 4, 18, 2), (21, 20, 3, 19, 2), (9, 13, 3, 4, 4)] {
            let data: Vec<u8> = (0..w * h * ch).map(|i| (i * 131 % 251) as u8).collect();
            let img = Image::from_u8(w, h, ch, data).unwrap();
            let host = Padded::of(&img, pad, multiple, true, None);
            let dev = Padded::on_device(&img, pad, multiple, &cpu).unwrap().expect("pads inside the image");
            assert!(dev.host().is_none());
            assert_eq!((dev.h, dev.w), (host.h, host.w));
            for (rows, cols) in [(0..host.h - 2 * pad, 0..host.w - 2 * pad), (2..6, 4..8)] {
                let a = host.window(&rows, &cols, pad, &cpu).unwrap().to_vec::<f32>().unwrap();
                let b = dev.window(&rows, &cols, pad, &cpu).unwrap().to_vec::<f32>().unwrap();
                assert!(
                    a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "{w}x{h}x{ch} pad {pad}"
                );
            }
        }
        let small = Image::from_u8(8, 8, 3, vec![7; 192]).unwrap();
        assert!(Padded::on_device(&small, 18, 2, &cpu).unwrap().is_none());
        let deep = Image::from_u16(30, 30, 3, vec![9; 2700]).unwrap();
        assert!(Padded::on_device(&deep, 5, 2, &cpu).unwrap().is_none());
    }
}
