//! A whole feature map kept in a file, for a banded run whose maps do not fit the memory
//! it is given ([`crate::banded::Home::Disk`]): on the CPU, a 4096² f32 decode's full-size
//! maps are 8.6 GB each (128 channels) and 17 GB (256), more than a desktop's RAM.
//!
//! The map is stored as the tensor would be (NCHW, little-endian elements); a band of rows
//! is one positioned read or write per channel, so nothing but the band is ever in the
//! process's memory. The file is unnamed (`tempfile::tempfile_in`): the system removes it
//! when the run ends, however it ends.

use crate::error::{Result, SdError};
use candle_core::WithDType;
use half::{bf16, f16};
use rocm_vision::{DType, Device, Tensor};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One `[1, channels, h, w]` map of `dtype` in an unnamed file. Clones share the file.
#[derive(Clone, Debug)]
pub(crate) struct FileMap {
    file: Arc<File>,
    dir: PathBuf,
    channels: usize,
    h: usize,
    w: usize,
    dtype: DType,
}

impl FileMap {
    /// A zero-filled map in a new unnamed file in `dir` (sparse where the file system
    /// allows: space is taken as bands are written).
    pub fn create(dir: &Path, [channels, h, w]: [usize; 3], dtype: DType) -> Result<FileMap> {
        if !matches!(dtype, DType::F32 | DType::F16 | DType::BF16) {
            return Err(unsupported(dtype));
        }
        let bytes = channels * h * w * dtype.size_in_bytes();
        let io = |what: &str, e: std::io::Error| {
            SdError::Output(format!(
                "a banded run's map on disk ({channels}x{h}x{w} {dtype:?}, {bytes} bytes) in {}: {what}: {e}",
                dir.display()
            ))
        };
        let file = tempfile::tempfile_in(dir).map_err(|e| io("could not create a file there", e))?;
        file.set_len(bytes as u64).map_err(|e| io("could not size the file", e))?;
        Ok(FileMap { file: Arc::new(file), dir: dir.to_path_buf(), channels, h, w, dtype })
    }

    pub fn dims(&self) -> [usize; 4] {
        [1, self.channels, self.h, self.w]
    }

    /// Rows `[r0, r1)` of every channel, as a contiguous `[1, C, r1 - r0, W]` tensor on
    /// `device`.
    pub fn read_rows(&self, r0: usize, r1: usize, device: &Device) -> Result<Tensor> {
        self.check_rows(r0, r1)?;
        let t = match self.dtype {
            DType::F32 => self.read_as::<f32>(r0, r1)?,
            DType::F16 => self.read_as::<f16>(r0, r1)?,
            DType::BF16 => self.read_as::<bf16>(r0, r1)?,
            d => return Err(unsupported(d)),
        };
        Ok(t.to_device(device)?)
    }

    /// Writes `band` (`[1, C, rows, W]`, any device) into rows `r0..` of every channel.
    pub fn write_rows(&self, r0: usize, band: &Tensor) -> Result<()> {
        let dims = band.dims();
        if dims.len() != 4
            || dims[0] != 1
            || dims[1] != self.channels
            || dims[3] != self.w
            || band.dtype() != self.dtype
        {
            return Err(SdError::Internal(format!(
                "banded run: a {:?} {dims:?} band written into a {:?} {:?} map on disk",
                band.dtype(),
                self.dtype,
                self.dims()
            )));
        }
        self.check_rows(r0, r0 + dims[2])?;
        match self.dtype {
            DType::F32 => self.write_as::<f32>(r0, band),
            DType::F16 => self.write_as::<f16>(r0, band),
            DType::BF16 => self.write_as::<bf16>(r0, band),
            d => Err(unsupported(d)),
        }
    }

    fn check_rows(&self, r0: usize, r1: usize) -> Result<()> {
        if r0 > r1 || r1 > self.h {
            return Err(SdError::Internal(format!("banded run: rows {r0}..{r1} of a map on disk of {} rows", self.h)));
        }
        Ok(())
    }

    fn offset(&self, channel: usize, row: usize) -> u64 {
        ((channel * self.h + row) * self.w * self.dtype.size_in_bytes()) as u64
    }

    fn io_error(&self, what: &str, offset: u64, len: usize, e: std::io::Error) -> SdError {
        SdError::Output(format!(
            "a banded run's map on disk in {}: {what} {len} bytes at offset {offset}: {e}",
            self.dir.display()
        ))
    }

    fn read_as<T: FileElement>(&self, r0: usize, r1: usize) -> Result<Tensor> {
        let plane = (r1 - r0) * self.w;
        let mut bytes = vec![0u8; plane * T::SIZE];
        let mut data = Vec::with_capacity(self.channels * plane);
        for c in 0..self.channels {
            let at = self.offset(c, r0);
            self.file.read_exact_at(&mut bytes, at).map_err(|e| self.io_error("reading", at, bytes.len(), e))?;
            data.extend(bytes.chunks_exact(T::SIZE).map(T::from_le));
        }
        Ok(Tensor::from_vec(data, &[1, self.channels, r1 - r0, self.w], &Device::cpu())?)
    }

    /// One channel at a time: the band is not copied whole.
    fn write_as<T: FileElement>(&self, r0: usize, band: &Tensor) -> Result<()> {
        let plane = band.dims()[2] * self.w;
        let mut bytes = vec![0u8; plane * T::SIZE];
        for c in 0..self.channels {
            let values = band.narrow(1, c, 1)?.to_vec::<T>()?;
            for (v, out) in values.iter().zip(bytes.chunks_exact_mut(T::SIZE)) {
                v.to_le(out);
            }
            let at = self.offset(c, r0);
            self.file.write_all_at(&bytes, at).map_err(|e| self.io_error("writing", at, bytes.len(), e))?;
        }
        Ok(())
    }
}

/// The element types a map on disk holds, with their little-endian encoding.
trait FileElement: WithDType + Copy {
    const SIZE: usize;
    fn from_le(b: &[u8]) -> Self;
    fn to_le(self, out: &mut [u8]);
}

impl FileElement for f32 {
    const SIZE: usize = 4;
    fn from_le(b: &[u8]) -> f32 {
        f32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
    fn to_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}

/// The 16-bit floats, stored as their bits.
macro_rules! bits16_element {
    ($t:ty) => {
        impl FileElement for $t {
            const SIZE: usize = 2;
            fn from_le(b: &[u8]) -> $t {
                <$t>::from_bits(u16::from_le_bytes([b[0], b[1]]))
            }
            fn to_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_bits().to_le_bytes());
            }
        }
    };
}
bits16_element!(f16);
bits16_element!(bf16);

fn unsupported(dtype: DType) -> SdError {
    SdError::Internal(format!("banded run: maps on disk hold f32, f16 or bf16, not {dtype:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_written_and_read_back_are_the_same_bits_in_every_dtype() {
        let dir = std::env::temp_dir();
        for dtype in [DType::F32, DType::F16, DType::BF16] {
            let (c, h, w) = (3, 10, 7);
            let whole = Tensor::rand_normal(&[1, c, h, w], (0.0, 1.0), 5, 0, DType::F32, &Device::cpu())
                .unwrap()
                .to_dtype(dtype)
                .unwrap();
            let map = FileMap::create(&dir, [c, h, w], dtype).unwrap();
            // Unwritten rows read as zeros.
            let zeros = map.read_rows(0, h, &Device::cpu()).unwrap().to_dtype(DType::F32).unwrap();
            assert!(zeros.to_vec::<f32>().unwrap().iter().all(|v| *v == 0.0));
            for (r0, r1) in [(0, 4), (4, 8), (8, 10)] {
                map.write_rows(r0, &whole.narrow(2, r0, r1 - r0).unwrap().contiguous().unwrap()).unwrap();
            }
            let back = map.read_rows(0, h, &Device::cpu()).unwrap();
            assert_eq!(back.dims(), &[1, c, h, w]);
            let bits = |t: &Tensor| t.to_dtype(DType::F32).unwrap().to_vec::<f32>().unwrap();
            assert_eq!(bits(&back), bits(&whole), "{dtype:?}");
            let mid = map.read_rows(3, 6, &Device::cpu()).unwrap();
            assert_eq!(bits(&mid), bits(&whole.narrow(2, 3, 3).unwrap().contiguous().unwrap()), "{dtype:?}");
        }
    }

    #[test]
    fn a_band_of_the_wrong_shape_or_past_the_map_is_an_error() {
        let map = FileMap::create(&std::env::temp_dir(), [2, 4, 3], DType::F32).unwrap();
        let band = Tensor::zeros(&[1, 3, 1, 3], DType::F32, &Device::cpu()).unwrap();
        assert!(map.write_rows(0, &band).unwrap_err().to_string().contains("band written"));
        let band = Tensor::zeros(&[1, 2, 2, 3], DType::F32, &Device::cpu()).unwrap();
        assert!(map.write_rows(3, &band).unwrap_err().to_string().contains("rows 3..5"));
        assert!(map.read_rows(2, 5, &Device::cpu()).is_err());
        let missing = FileMap::create(Path::new("/nonexistent/dir"), [1, 1, 1], DType::F32).unwrap_err();
        assert!(missing.to_string().contains("/nonexistent/dir"), "{missing}");
    }
}
