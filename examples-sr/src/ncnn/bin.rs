//! The ncnn `.bin` weight file: the weights of every layer that has any, back to back in
//! layer order, with no header and no names: the `.param` file says what comes next.
//!
//! Two kinds of read, as ncnn's `ModelBinFromDataReader::load(w, type)` (src/modelbin.cpp)
//! defines them:
//!
//! * type 0 (weights): a 4-byte little-endian tag, then the data. The tags this reader
//!   accepts are [`TAG_FP16`] (`0x01306B47`: IEEE half floats, the data padded to a
//!   multiple of 4 bytes), [`TAG_FP32`] (`0`: raw float32) and [`TAG_FP32_RAW`]
//!   (`0x0002C056`: raw float32, written by ncnn's tools for weights "with extra
//!   scaling"; ncnn loads it as plain float32, and so do we).
//!   ncnn also knows [`TAG_INT8`] (int8 weights for its quantised inference) and reads
//!   any other non-zero tag as a 256-entry float codebook followed by byte indices. The
//!   Real-CUGAN files use neither, a codebook tag is indistinguishable from a corrupt or
//!   misaligned one, and int8 needs scales this loader does not model: both are errors.
//! * type 1 (biases and other small vectors): raw little-endian float32, no tag.
//!
//! Every read keeps the file 4-byte aligned. Non-finite values (a half or float inf/NaN)
//! are rejected: ncnn would load them, but no trained Real-CUGAN weight is non-finite, and
//! one would silently turn every output pixel into NaN.

use half::f16;

use super::NcnnError;

/// Half-precision weights.
pub const TAG_FP16: u32 = 0x0130_6B47;
/// Plain float32 weights.
pub const TAG_FP32: u32 = 0x0000_0000;
/// Float32 weights "with extra scaling" (ncnn reads them as plain float32).
pub const TAG_FP32_RAW: u32 = 0x0002_C056;
/// int8 weights (ncnn quantised inference); recognised only to be rejected by name.
pub const TAG_INT8: u32 = 0x000D_4B38;

/// Who is reading: named in every error.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadCtx<'a> {
    pub layer: &'a str,
    pub ty: &'a str,
    /// What is being read: "weight tag", "weights", "bias", ...
    pub what: &'static str,
}

impl ReadCtx<'_> {
    fn with(self, what: &'static str) -> Self {
        ReadCtx { what, ..self }
    }
}

/// Sequential reader over the bytes of a `.bin` file.
#[derive(Debug)]
pub(crate) struct BinReader<'a> {
    data: &'a [u8],
    offset: usize,
}

impl<'a> BinReader<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        BinReader { data, offset: 0 }
    }

    /// Byte offset of the next read.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Take `len` bytes, or say exactly what is missing and where.
    fn take(&mut self, len: Option<usize>, ctx: ReadCtx<'_>) -> Result<&'a [u8], NcnnError> {
        let available = self.data.len() - self.offset;
        match len {
            Some(len) if len <= available => {
                let bytes = &self.data[self.offset..self.offset + len];
                self.offset += len;
                Ok(bytes)
            }
            _ => Err(NcnnError::Truncated {
                layer: ctx.layer.to_string(),
                ty: ctx.ty.to_string(),
                what: ctx.what,
                offset: self.offset,
                // `None` means the size overflowed usize: report it as the maximum.
                needed: len.unwrap_or(usize::MAX),
                available,
                file_len: self.data.len(),
            }),
        }
    }

    /// ncnn `load(count, 0)`: a tagged weight blob of `count` values, converted to f32.
    pub fn read_weights(&mut self, count: usize, ctx: ReadCtx<'_>) -> Result<Vec<f32>, NcnnError> {
        let tag_offset = self.offset;
        let tag_bytes = self.take(Some(4), ctx.with("weight tag"))?;
        let tag = u32::from_le_bytes([tag_bytes[0], tag_bytes[1], tag_bytes[2], tag_bytes[3]]);
        match tag {
            TAG_FP16 => {
                // Half data is padded to a 4-byte boundary (ncnn: alignSize(w * 2, 4)).
                let padded = count.checked_mul(2).and_then(|n| n.checked_add(3)).map(|n| n & !3);
                let data_offset = self.offset;
                let bytes = self.take(padded, ctx)?;
                let values: Vec<f32> =
                    bytes.chunks_exact(2).take(count).map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()).collect();
                check_finite(&values, data_offset, 2, ctx)?;
                Ok(values)
            }
            TAG_FP32 | TAG_FP32_RAW => self.read_f32(count, ctx),
            TAG_INT8 => Err(NcnnError::UnsupportedTag {
                layer: ctx.layer.to_string(),
                ty: ctx.ty.to_string(),
                what: ctx.what,
                offset: tag_offset,
                tag,
                format: "int8 quantised weights",
            }),
            _ => Err(NcnnError::UnknownTag {
                layer: ctx.layer.to_string(),
                ty: ctx.ty.to_string(),
                what: ctx.what,
                offset: tag_offset,
                tag,
            }),
        }
    }

    /// ncnn `load(count, 1)`: `count` untagged little-endian f32 values.
    pub fn read_f32(&mut self, count: usize, ctx: ReadCtx<'_>) -> Result<Vec<f32>, NcnnError> {
        let data_offset = self.offset;
        let bytes = self.take(count.checked_mul(4), ctx)?;
        let values: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        check_finite(&values, data_offset, 4, ctx)?;
        Ok(values)
    }

    /// The file must end where the last layer's weights end. `last` names the layer that
    /// read last (None when no layer has weights).
    pub fn finish(self, last: Option<(&str, &str)>) -> Result<(), NcnnError> {
        if self.offset == self.data.len() {
            return Ok(());
        }
        let (layer, ty) = last.unwrap_or(("(none)", "(no layer has weights)"));
        Err(NcnnError::Oversized {
            layer: layer.to_string(),
            ty: ty.to_string(),
            offset: self.offset,
            trailing: self.data.len() - self.offset,
            file_len: self.data.len(),
        })
    }
}

fn check_finite(values: &[f32], data_offset: usize, elem_bytes: usize, ctx: ReadCtx<'_>) -> Result<(), NcnnError> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(index) => Err(NcnnError::NonFinite {
            layer: ctx.layer.to_string(),
            ty: ctx.ty.to_string(),
            what: ctx.what,
            offset: data_offset + index * elem_bytes,
            index,
            value: values[index],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CTX: ReadCtx<'static> = ReadCtx { layer: "conv0", ty: "Convolution", what: "weights" };

    fn tagged(tag: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = tag.to_le_bytes().to_vec();
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn fp16_odd_count_is_padded() {
        let vals = [1.0f32, -2.5, 0.125];
        let mut payload: Vec<u8> = vals.iter().flat_map(|&v| f16::from_f32(v).to_le_bytes()).collect();
        payload.extend_from_slice(&[0, 0]); // 6 bytes -> 8
        payload.extend_from_slice(&7.0f32.to_le_bytes());
        let file = tagged(TAG_FP16, &payload);
        let mut r = BinReader::new(&file);
        assert_eq!(r.read_weights(3, CTX).unwrap(), vals);
        assert_eq!(r.offset(), 12);
        assert_eq!(r.read_f32(1, CTX).unwrap(), [7.0]);
        r.finish(Some(("conv0", "Convolution"))).unwrap();
    }

    #[test]
    fn fp32_tags() {
        for tag in [TAG_FP32, TAG_FP32_RAW] {
            let payload: Vec<u8> = [0.5f32, -1.0].iter().flat_map(|v| v.to_le_bytes()).collect();
            let file = tagged(tag, &payload);
            let mut r = BinReader::new(&file);
            assert_eq!(r.read_weights(2, CTX).unwrap(), [0.5, -1.0]);
            r.finish(None).unwrap();
        }
    }

    #[test]
    fn bad_tags() {
        let file = tagged(TAG_INT8, &[0; 8]);
        assert!(matches!(
            BinReader::new(&file).read_weights(2, CTX),
            Err(NcnnError::UnsupportedTag { offset: 0, tag: TAG_INT8, .. })
        ));
        let mut file = vec![0u8; 8];
        file.extend(tagged(0xDEAD_BEEF, &[0; 8]));
        let mut r = BinReader::new(&file);
        r.read_f32(2, CTX).unwrap();
        match r.read_weights(2, CTX) {
            Err(NcnnError::UnknownTag { offset, tag, layer, .. }) => {
                assert_eq!((offset, tag, layer.as_str()), (8, 0xDEAD_BEEF, "conv0"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn huge_counts_do_not_allocate_or_overflow() {
        let file = tagged(TAG_FP16, &[0; 4]);
        for count in [usize::MAX, usize::MAX / 2 + 1, 1 << 40] {
            match BinReader::new(&file).read_weights(count, CTX) {
                Err(NcnnError::Truncated { offset: 4, available: 4, .. }) => {}
                other => panic!("{count}: unexpected {other:?}"),
            }
            assert!(matches!(
                BinReader::new(&file).read_f32(count, CTX),
                Err(NcnnError::Truncated { offset: 0, available: 8, .. })
            ));
        }
    }

    #[test]
    fn non_finite_values_are_located() {
        let mut payload: Vec<u8> = [1.0f32, 2.0, f32::NAN].iter().flat_map(|v| v.to_le_bytes()).collect();
        let file = tagged(TAG_FP32, &payload);
        match BinReader::new(&file).read_weights(3, CTX) {
            Err(NcnnError::NonFinite { offset, index, .. }) => assert_eq!((offset, index), (12, 2)),
            other => panic!("unexpected {other:?}"),
        }
        payload = [f16::from_f32(1.0), f16::INFINITY].iter().flat_map(|v| v.to_le_bytes()).collect();
        let file = tagged(TAG_FP16, &payload);
        match BinReader::new(&file).read_weights(2, CTX) {
            Err(NcnnError::NonFinite { offset, index, value, .. }) => {
                assert_eq!((offset, index), (6, 1));
                assert!(value.is_infinite());
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn trailing_bytes_are_reported() {
        let file = [0u8; 10];
        let mut r = BinReader::new(&file);
        r.read_f32(2, CTX).unwrap();
        match r.finish(Some(("fc", "InnerProduct"))) {
            Err(NcnnError::Oversized { offset, trailing, layer, .. }) => {
                assert_eq!((offset, trailing, layer.as_str()), (8, 2, "fc"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}
