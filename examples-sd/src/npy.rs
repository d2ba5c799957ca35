//! A strict `.npy` reader (NumPy's format description, versions 1.0 to 3.0) for latents:
//! every field is checked against the file before anything is allocated, so a short or
//! corrupt file is an error that names the byte offset, never a panic or an allocation
//! the file does not back (candle's `read_npy` allocated what the header's shape said).

use candle_core::{DType, Device, Tensor};

const MAGIC: &[u8] = b"\x93NUMPY";
/// NumPy writes headers well under this; a longer one is not a header.
const MAX_HEADER: usize = 1 << 16;
/// At most this many dimensions (NumPy's own limit is 64).
const MAX_RANK: usize = 32;

/// The parsed header: element type, shape, memory order and where the data starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NpyHeader {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub fortran_order: bool,
    pub data_offset: usize,
}

/// Parses and checks the header of `bytes`: magic, version, header length, the header
/// dictionary, and that the data after it is exactly what the shape and dtype say.
pub fn parse_header(bytes: &[u8]) -> Result<NpyHeader, String> {
    if bytes.len() < 10 || &bytes[..6] != MAGIC {
        let n = bytes.len().min(6);
        return Err(format!("not a .npy file: it does not start with \\x93NUMPY (first bytes {:?})", &bytes[..n]));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (header_len, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(format!("truncated: version {major}.{minor} needs a 4-byte header length at offset 8"));
            }
            (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12)
        }
        _ => return Err(format!("unsupported .npy version {major}.{minor} at offset 6 (1.0 to 3.0 are read)")),
    };
    if header_len > MAX_HEADER {
        return Err(format!("header length {header_len} at offset 8 is larger than any .npy header ({MAX_HEADER})"));
    }
    let end = start + header_len;
    if end > bytes.len() {
        return Err(format!(
            "truncated: the header is {header_len} bytes from offset {start}, the file ends at {}",
            bytes.len()
        ));
    }
    let header = std::str::from_utf8(&bytes[start..end])
        .map_err(|e| format!("the header (bytes {start}..{end}) is not text: {e}"))?;
    let descr = dict_value(header, "descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.strip_suffix('\''))
        .or_else(|| descr.strip_prefix('"').and_then(|d| d.strip_suffix('"')))
        .ok_or_else(|| format!("'descr' is not a quoted string: {descr:?}"))?;
    let dtype = match descr {
        "<f2" | "=f2" => DType::F16,
        "<f4" | "=f4" => DType::F32,
        "<f8" | "=f8" => DType::F64,
        d if d.starts_with('>') => return Err(format!("dtype {d:?} is big-endian; save the latents little-endian")),
        d => return Err(format!("dtype {d:?}; latents must be f2, f4 or f8 (little-endian floating point)")),
    };
    let fortran_order = match dict_value(header, "fortran_order")? {
        "False" => false,
        "True" => true,
        other => return Err(format!("'fortran_order' is {other:?}, expected True or False")),
    };
    let shape_text = dict_value(header, "shape")?;
    let inner = shape_text
        .strip_prefix('(')
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| format!("'shape' is not a tuple: {shape_text:?}"))?;
    let mut shape = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if shape.len() == MAX_RANK {
            return Err(format!("'shape' has more than {MAX_RANK} dimensions"));
        }
        let d = part.trim_end_matches('L');
        shape.push(d.parse::<usize>().map_err(|_| format!("'shape' dimension {part:?} is not a size"))?);
    }
    let elems = shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
    let bytes_needed = elems.and_then(|n| n.checked_mul(dtype.size_in_bytes()));
    let available = bytes.len() - end;
    match bytes_needed {
        Some(n) if n == available => {}
        Some(n) if n > available => {
            return Err(format!(
                "truncated: shape {shape:?} of {descr} needs {n} bytes of data from offset {end}, the file has {available}"
            ));
        }
        Some(n) => {
            return Err(format!(
                "{} unexpected bytes after the data (shape {shape:?} of {descr} ends at offset {})",
                available - n,
                end + n
            ));
        }
        None => return Err(format!("shape {shape:?} overflows: no file holds that many elements")),
    }
    Ok(NpyHeader { dtype, shape, fortran_order, data_offset: end })
}

/// The value text of `key` in a Python dict literal (`{'descr': '<f4', ...}`), up to the
/// next top-level comma or the closing brace.
fn dict_value<'a>(header: &'a str, key: &str) -> Result<&'a str, String> {
    let quoted = [format!("'{key}'"), format!("\"{key}\"")];
    let at = quoted
        .iter()
        .find_map(|q| header.find(q.as_str()).map(|i| i + q.len()))
        .ok_or_else(|| format!("the header has no '{key}': {:?}", header.trim_end()))?;
    let rest = header[at..].trim_start();
    let rest = rest.strip_prefix(':').ok_or_else(|| format!("'{key}' is not followed by ':'"))?.trim_start();
    let mut depth = 0i32;
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth <= 0 => return Ok(rest[..i].trim()),
            _ => {}
        }
        if depth < 0 {
            return Err(format!("unbalanced brackets in the value of '{key}'"));
        }
    }
    Err(format!("the value of '{key}' is not terminated"))
}

/// A CPU tensor of the `.npy` file in `bytes` (C order; Fortran order is transposed into
/// it).
pub fn read(bytes: &[u8]) -> Result<Tensor, String> {
    let h = parse_header(bytes)?;
    let data = &bytes[h.data_offset..];
    let err = |e: candle_core::Error| format!("cannot build the tensor: {e}");
    if h.fortran_order && h.shape.len() > 1 {
        let reversed: Vec<usize> = h.shape.iter().rev().copied().collect();
        let t = Tensor::from_raw_buffer(data, h.dtype, &reversed, &Device::Cpu).map_err(err)?;
        let dims: Vec<usize> = (0..reversed.len()).rev().collect();
        return t.permute(dims).and_then(|t| t.contiguous()).map_err(err);
    }
    Tensor::from_raw_buffer(data, h.dtype, &h.shape, &Device::Cpu).map_err(err)
}

/// An f32 array of `shape` (C order, little-endian) as a version 1.0 `.npy` file.
pub fn write_f32(shape: &[usize], data: &[f32]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(ToString::to_string).collect();
    let shape = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    // NumPy pads the header with spaces and a newline to a multiple of 64 bytes.
    while (MAGIC.len() + 4 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&[1, 0]);
    v.extend_from_slice(&(header.len() as u16).to_le_bytes());
    v.extend_from_slice(header.as_bytes());
    v.extend(data.iter().flat_map(|x| x.to_le_bytes()));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_what_it_reads() {
        let v: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
        let bytes = write_f32(&[1, 2, 3, 4], &v);
        assert_eq!((MAGIC.len() + 4 + u16::from_le_bytes([bytes[8], bytes[9]]) as usize) % 64, 0);
        let t = read(&bytes).unwrap();
        assert_eq!(t.dims(), &[1, 2, 3, 4]);
        assert_eq!(t.flatten_all().unwrap().to_vec1::<f32>().unwrap(), v);
        assert_eq!(read(&write_f32(&[3], &[1., 2., 3.])).unwrap().dims(), &[3]);
    }

    pub(crate) fn npy(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let mut header = format!(
            "{{'descr': '{descr}', 'fortran_order': {}, 'shape': {shape}, }}",
            if fortran { "True" } else { "False" }
        );
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut v = MAGIC.to_vec();
        v.extend_from_slice(&[1, 0]);
        v.extend_from_slice(&(header.len() as u16).to_le_bytes());
        v.extend_from_slice(header.as_bytes());
        v.extend_from_slice(data);
        v
    }

    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn reads_c_and_fortran_order() {
        let t = read(&npy("<f4", false, "(2, 3)", &f32s(&[0., 1., 2., 3., 4., 5.]))).unwrap();
        assert_eq!(t.dims(), &[2, 3]);
        assert_eq!(t.to_vec2::<f32>().unwrap(), vec![vec![0., 1., 2.], vec![3., 4., 5.]]);
        let t = read(&npy("<f4", true, "(2, 3)", &f32s(&[0., 3., 1., 4., 2., 5.]))).unwrap();
        assert_eq!(t.to_vec2::<f32>().unwrap(), vec![vec![0., 1., 2.], vec![3., 4., 5.]]);
        let t = read(&npy("<f4", false, "()", &f32s(&[7.]))).unwrap();
        assert_eq!(t.dims(), &[] as &[usize]);
        let t = read(&npy("<f2", false, "(3,)", &[0, 0x3c, 0, 0x40, 0, 0])).unwrap();
        assert_eq!(t.to_dtype(DType::F32).unwrap().to_vec1::<f32>().unwrap(), vec![1.0, 2.0, 0.0]);
    }

    #[test]
    fn errors_name_sizes_and_offsets() {
        let e = read(&npy("<f4", false, "(2, 3)", &f32s(&[0.; 5]))).unwrap_err();
        assert!(e.contains("truncated") && e.contains("24 bytes") && e.contains("has 20"), "{e}");
        let e = read(&npy("<f4", false, "(2, 3)", &f32s(&[0.; 7]))).unwrap_err();
        assert!(e.contains("4 unexpected bytes"), "{e}");
        let e = read(&npy("<i4", false, "(2,)", &f32s(&[0.; 2]))).unwrap_err();
        assert!(e.contains("<i4") && e.contains("floating point"), "{e}");
        let e = read(&npy(">f4", false, "(2,)", &f32s(&[0.; 2]))).unwrap_err();
        assert!(e.contains("big-endian"), "{e}");
        let e = read(&npy("<f4", false, "(4294967296, 4294967296, 4294967296)", &[])).unwrap_err();
        assert!(e.contains("overflows"), "{e}");
        let e = read(&npy("<f4", false, "(1000000000000,)", &[])).unwrap_err();
        assert!(e.contains("truncated") && e.contains("4000000000000 bytes"), "{e}");
        let e = read(b"\x93NUMPY\x01\x00\xff\xff{").unwrap_err();
        assert!(e.contains("truncated") && e.contains("65535"), "{e}");
        let e = read(b"PK\x03\x04").unwrap_err();
        assert!(e.contains("not a .npy file"), "{e}");
    }
}
