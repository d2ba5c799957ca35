//! Model weights from safetensors files, memory-mapped: only the tensors asked for are
//! read, straight into the device's memory.

use crate::device::Device;
use crate::error::{Error, Result};
use crate::tensor::Tensor;
use candle_core::DType;
use safetensors::{Dtype, SafeTensorError, SafeTensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

struct Entry {
    dtype: DType,
    shape: Vec<usize>,
    /// Byte range in the file.
    start: usize,
    end: usize,
}

/// The file's bytes: mapped from disk, or given in memory.
enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

struct File {
    path: PathBuf,
    mmap: Bytes,
    entries: BTreeMap<String, Entry>,
}

/// A safetensors file opened for loading, viewed under a key prefix.
///
/// ```
/// use rocm_vision::prelude::*;
/// use std::collections::HashMap;
/// # let dir = std::env::temp_dir().join(format!("rv-doc-{}-{}", std::process::id(), line!()));
/// # std::fs::create_dir_all(&dir)?;
/// # let path = dir.join("model.safetensors");
/// // A file with one layer, `encoder.conv.weight` / `.bias` (written with candle here).
/// let cpu = candle_core::Device::Cpu;
/// let tensors = HashMap::from([
///     ("encoder.conv.weight".to_string(), candle_core::Tensor::ones((8, 3, 3, 3), candle_core::DType::F32, &cpu)?),
///     ("encoder.conv.bias".to_string(), candle_core::Tensor::zeros(8, candle_core::DType::F32, &cpu)?),
/// ]);
/// candle_core::safetensors::save(&tensors, &path)?;
///
/// let device = Device::cpu();
/// let weights = Weights::open(&path, &device)?.with_dtype(DType::F16);
/// let conv = Conv2d::load(&weights.pp("encoder.conv"), 3, 8, 3, Conv2dParams::default().with_padding(1))?;
/// assert_eq!((conv.weight.dims(), conv.weight.dtype()), (&[8, 3, 3, 3][..], DType::F16));
/// // A wrong shape names the tensor, what it has and what was expected.
/// let e = weights.pp("encoder.conv").get("weight", &[8, 3, 1, 1]).unwrap_err().to_string();
/// assert!(e.contains("\"encoder.conv.weight\" has shape [8, 3, 3, 3], expected [8, 3, 1, 1]"), "{e}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
pub struct Weights {
    file: Arc<File>,
    prefix: String,
    device: Device,
    /// Every tensor is converted to this dtype on load when set.
    dtype: Option<DType>,
}

fn candle_dtype(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::F32 => DType::F32,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F64 => DType::F64,
        Dtype::U8 => DType::U8,
        Dtype::U32 => DType::U32,
        Dtype::I64 => DType::I64,
        _ => return None,
    })
}

impl Weights {
    /// Opens and validates `path`: header, offsets, sizes and dtypes of every tensor.
    /// Errors name the file, the byte offset and what was wrong.
    pub fn open(path: impl AsRef<Path>, device: &Device) -> Result<Weights> {
        let path = path.as_ref().to_path_buf();
        let shown = path.display().to_string();
        let f = std::fs::File::open(&path).map_err(|source| Error::Io { path: shown.clone(), source })?;
        // SAFETY: the map is read-only; a file truncated underneath us while mapped is
        // outside what any loader can defend against (as with every mmap loader).
        let mmap = unsafe { memmap2::Mmap::map(&f) }.map_err(|source| Error::Io { path: shown.clone(), source })?;
        Self::from_buffer(path, Bytes::Mapped(mmap), device)
    }

    /// A safetensors file already in memory, validated as [`Weights::open`] validates a
    /// file; `name` stands for its path in errors.
    pub fn from_bytes(name: impl Into<PathBuf>, bytes: Vec<u8>, device: &Device) -> Result<Weights> {
        Self::from_buffer(name.into(), Bytes::Owned(bytes), device)
    }

    fn from_buffer(path: PathBuf, mmap: Bytes, device: &Device) -> Result<Weights> {
        let shown = path.display().to_string();
        let err = |msg: String| Error::Weights { path: shown.clone(), msg };
        let len = mmap.len();
        if len < 8 {
            return Err(err(format!("truncated: {len} bytes; a safetensors file starts with an 8-byte header length")));
        }
        let header_len = u64::from_le_bytes([mmap[0], mmap[1], mmap[2], mmap[3], mmap[4], mmap[5], mmap[6], mmap[7]]);
        if header_len > (len - 8) as u64 {
            return Err(err(format!(
                "truncated or not safetensors: the header length at offset 0 says {header_len} bytes, but only {} bytes follow it",
                len - 8
            )));
        }
        let data_start = 8 + header_len as usize;
        let (_, meta) = SafeTensors::read_metadata(&mmap).map_err(|e| err(describe(e, &mmap, data_start)))?;
        let mut entries = BTreeMap::new();
        for (name, info) in meta.tensors() {
            let dtype = candle_dtype(info.dtype).ok_or_else(|| {
                err(format!("tensor {name:?} has dtype {:?}, which this library does not load", info.dtype))
            })?;
            let (start, end) = (data_start + info.data_offsets.0, data_start + info.data_offsets.1);
            // read_metadata checked these; a loader that indexes by them checks again.
            if start > end || end > len {
                return Err(err(format!(
                    "tensor {name:?}: data offsets {start}..{end} outside the file ({len} bytes)"
                )));
            }
            if entries.insert(name.clone(), Entry { dtype, shape: info.shape.clone(), start, end }).is_some() {
                return Err(err(format!("tensor {name:?} appears twice in the header")));
            }
        }
        Ok(Weights {
            file: Arc::new(File { path, mmap, entries }),
            prefix: String::new(),
            device: device.clone(),
            dtype: None,
        })
    }

    /// The same file with every tensor converted to `dtype` when loaded.
    pub fn with_dtype(mut self, dtype: DType) -> Weights {
        self.dtype = Some(dtype);
        self
    }

    /// A view whose keys are prefixed by `prefix.` (nested views join with `.`).
    pub fn pp(&self, prefix: impl AsRef<str>) -> Weights {
        let mut w = self.clone();
        w.prefix = self.key(prefix.as_ref());
        w
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    pub fn path(&self) -> &Path {
        &self.file.path
    }

    fn key(&self, name: &str) -> String {
        if self.prefix.is_empty() { name.to_string() } else { format!("{}.{name}", self.prefix) }
    }

    /// Whether `name` (under this view's prefix) exists.
    pub fn contains(&self, name: &str) -> bool {
        self.file.entries.contains_key(&self.key(name))
    }

    /// Every key in the file (ignoring the prefix), sorted.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.file.entries.keys().map(String::as_str)
    }

    /// Shape and dtype of `name`, if present.
    pub fn info(&self, name: &str) -> Option<(Vec<usize>, DType)> {
        self.file.entries.get(&self.key(name)).map(|e| (e.shape.clone(), e.dtype))
    }

    /// Loads `name`, checking its shape.
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let t = self.get_unchecked_shape(name)?;
        if t.dims() != shape {
            return Err(Error::Weights {
                path: self.file.path.display().to_string(),
                msg: format!("tensor {:?} has shape {:?}, expected {shape:?}", self.key(name), t.dims()),
            });
        }
        Ok(t)
    }

    /// Loads `name` whatever its shape.
    pub fn get_unchecked_shape(&self, name: &str) -> Result<Tensor> {
        let key = self.key(name);
        let e = self.file.entries.get(&key).ok_or_else(|| Error::Weights {
            path: self.file.path.display().to_string(),
            msg: format!("missing tensor {key:?}{}", self.near_misses(&key)),
        })?;
        if !e.dtype.is_float() {
            return Err(Error::Weights {
                path: self.file.path.display().to_string(),
                msg: format!("tensor {key:?} has dtype {:?}; model weights must be f32, f16, bf16 or f64", e.dtype),
            });
        }
        let bytes = &self.file.mmap[e.start..e.end];
        let t = candle_core::Tensor::from_raw_buffer(bytes, e.dtype, &e.shape, &candle_core::Device::Cpu)?;
        let t = match self.dtype {
            Some(d) if d != e.dtype => t.to_dtype(d)?,
            _ => t,
        };
        Tensor::from_candle(t, &self.device)
    }

    /// Up to three keys with the same last component, to help with a renamed layer.
    fn near_misses(&self, key: &str) -> String {
        let last = key.rsplit('.').next().unwrap_or(key);
        let similar: Vec<&str> = self.keys().filter(|k| k.ends_with(&format!(".{last}"))).take(3).collect();
        if similar.is_empty() {
            format!(" (the file has {} tensors)", self.file.entries.len())
        } else {
            format!(" (the file has e.g. {similar:?})")
        }
    }
}

/// A safetensors error with the byte offsets that explain it.
fn describe(e: SafeTensorError, buf: &[u8], data_start: usize) -> String {
    match e {
        SafeTensorError::MetadataIncompleteBuffer => {
            let expected = header_data_end(&buf[8..data_start]).map(|end| data_start + end);
            match expected {
                Some(end) if end > buf.len() => format!(
                    "truncated: the header describes tensor data up to byte offset {end}, but the file ends at {}",
                    buf.len()
                ),
                Some(end) => format!(
                    "{} unexpected bytes after the last tensor (which ends at byte offset {end})",
                    buf.len() - end
                ),
                None => "tensor data does not match the header".to_string(),
            }
        }
        SafeTensorError::InvalidOffset(name) => {
            format!(
                "tensor {name:?}: its data offsets do not follow the previous tensor's (header ends at byte offset {data_start})"
            )
        }
        SafeTensorError::TensorInvalidInfo => "a tensor's byte size does not match its shape and dtype".to_string(),
        other => format!("malformed safetensors header (bytes 8..{data_start}): {other}"),
    }
}

/// The end offset (relative to the data section) of the last tensor in a header.
fn header_data_end(header: &[u8]) -> Option<usize> {
    let v: serde_json::Value = serde_json::from_slice(header).ok()?;
    v.as_object()?
        .iter()
        .filter(|(k, _)| k.as_str() != "__metadata__")
        .filter_map(|(_, t)| t.get("data_offsets")?.get(1)?.as_u64())
        .max()
        .map(|e| e as usize)
}
