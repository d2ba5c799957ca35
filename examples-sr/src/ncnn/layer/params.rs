//! Typed access to one raw layer's `.param` values, with ncnn's defaults and errors that
//! name the layer and its line.

use super::super::NcnnError;
use super::super::param::{ParamValue, RawLayer};

pub(super) struct Params<'a> {
    raw: &'a RawLayer,
}

impl<'a> Params<'a> {
    pub(super) fn new(raw: &'a RawLayer) -> Self {
        Params { raw }
    }

    pub(super) fn err(&self, msg: impl Into<String>) -> NcnnError {
        NcnnError::InvalidParam {
            line: self.raw.line,
            layer: self.raw.name.clone(),
            ty: self.raw.ty.clone(),
            msg: msg.into(),
        }
    }

    /// Every id the file sets must be one ncnn defines for this type.
    pub(super) fn only(&self, known: &[u32]) -> Result<(), NcnnError> {
        match self.raw.params.ids().find(|id| !known.contains(id)) {
            None => Ok(()),
            Some(id) => Err(self.err(format!("parameter {id} is not a {} parameter", self.raw.ty))),
        }
    }

    pub(super) fn int(&self, id: u32, default: i32) -> Result<i32, NcnnError> {
        match self.raw.params.get(id) {
            None => Ok(default),
            Some(ParamValue::Int(v)) => Ok(*v),
            Some(v) => Err(self.err(format!("parameter {id} must be an int, found a {}", v.kind()))),
        }
    }

    pub(super) fn float(&self, id: u32, default: f32) -> Result<f32, NcnnError> {
        match self.raw.params.get(id) {
            None => Ok(default),
            Some(ParamValue::Float(v)) => Ok(*v),
            Some(v) => Err(self.err(format!("parameter {id} must be a float, found a {}", v.kind()))),
        }
    }

    pub(super) fn int_array(&self, id: u32) -> Result<&'a [i32], NcnnError> {
        match self.raw.params.get(id) {
            None => Ok(&[]),
            Some(ParamValue::IntArray(v)) => Ok(v),
            Some(v) => Err(self.err(format!("parameter {id} must be an int array, found a {}", v.kind()))),
        }
    }

    pub(super) fn float_array(&self, id: u32) -> Result<&'a [f32], NcnnError> {
        match self.raw.params.get(id) {
            None => Ok(&[]),
            Some(ParamValue::FloatArray(v)) => Ok(v),
            // ncnn's writer prints `-23310=0` for an empty array: no element, no float.
            Some(ParamValue::IntArray(v)) if v.is_empty() => Ok(&[]),
            Some(v) => Err(self.err(format!("parameter {id} must be a float array, found a {}", v.kind()))),
        }
    }

    /// A strictly positive int (sizes, strides, counts).
    pub(super) fn positive(&self, id: u32, default: i32, what: &str) -> Result<usize, NcnnError> {
        let v = self.int(id, default)?;
        usize::try_from(v)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| self.err(format!("{what} (parameter {id}) must be positive, found {v}")))
    }

    /// A non-negative padding; ncnn's -233 / -234 (SAME_UPPER / SAME_LOWER) are not supported.
    pub(super) fn pad(&self, id: u32, default: i32, what: &str) -> Result<usize, NcnnError> {
        let v = self.int(id, default)?;
        usize::try_from(v).map_err(|_| {
            self.err(match v {
                -233 | -234 => {
                    format!("{what} (parameter {id}) = {v} (SAME padding) is not supported")
                }
                _ => format!("{what} (parameter {id}) must be >= 0, found {v}"),
            })
        })
    }

    /// Must equal `expected` (a feature this loader does not implement otherwise).
    pub(super) fn require_int(&self, id: u32, default: i32, expected: i32, what: &str) -> Result<(), NcnnError> {
        let v = self.int(id, default)?;
        if v == expected {
            Ok(())
        } else {
            Err(self.err(format!("{what} (parameter {id}) = {v} is not supported (only {expected})")))
        }
    }

    pub(super) fn bool01(&self, id: u32, what: &str) -> Result<bool, NcnnError> {
        match self.int(id, 0)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.err(format!("{what} (parameter {id}) must be 0 or 1, found {v}"))),
        }
    }

    /// `weight_data_size / (num_output * per_output)`, which must divide exactly.
    /// `per_output` is the kernel size (None when it overflowed).
    pub(super) fn num_input(
        &self,
        weight_data_size: usize,
        num_output: usize,
        per_output: Option<usize>,
    ) -> Result<usize, NcnnError> {
        let unit = per_output.and_then(|k| num_output.checked_mul(k)).filter(|&u| u > 0);
        match unit {
            Some(unit) if weight_data_size % unit == 0 => Ok(weight_data_size / unit),
            _ => Err(self.err(format!(
                "weight_data_size {weight_data_size} is not a multiple of num_output {num_output} x kernel size {}: \
                 inconsistent with the layer's other parameters",
                per_output.map_or_else(|| "(overflow)".to_string(), |k| k.to_string())
            ))),
        }
    }

    pub(super) fn expect_blobs(&self, bottoms: usize, tops: Option<usize>) -> Result<(), NcnnError> {
        let (b, t) = (self.raw.bottoms.len(), self.raw.tops.len());
        let tops_ok = match tops {
            Some(n) => t == n,
            None => t >= 1,
        };
        if b == bottoms && tops_ok {
            Ok(())
        } else {
            let want_tops = tops.map_or_else(|| "at least 1".to_string(), |n| n.to_string());
            Err(self.err(format!("takes {bottoms} input and {want_tops} output blobs, the file gives {b} and {t}")))
        }
    }
}
