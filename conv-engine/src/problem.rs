//! `ConvProblem`: one convolution call, validated.

use crate::error::ConvError;
use crate::geometry::{ConvGeometry, ConvKind};
use std::fmt;

/// Element type of a convolution's tensors. Arithmetic always accumulates in f32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConvDType {
    F32,
    F16,
    BF16,
}

impl ConvDType {
    pub fn size_in_bytes(self) -> usize {
        match self {
            ConvDType::F32 => 4,
            ConvDType::F16 | ConvDType::BF16 => 2,
        }
    }

    pub fn from_candle(dtype: candle_core::DType) -> Option<Self> {
        match dtype {
            candle_core::DType::F32 => Some(ConvDType::F32),
            candle_core::DType::F16 => Some(ConvDType::F16),
            candle_core::DType::BF16 => Some(ConvDType::BF16),
            _ => None,
        }
    }

    pub fn to_candle(self) -> candle_core::DType {
        match self {
            ConvDType::F32 => candle_core::DType::F32,
            ConvDType::F16 => candle_core::DType::F16,
            ConvDType::BF16 => candle_core::DType::BF16,
        }
    }
}

impl fmt::Display for ConvDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConvDType::F32 => "f32",
            ConvDType::F16 => "f16",
            ConvDType::BF16 => "bf16",
        })
    }
}

/// Padding of a 2-D convolution; `begin` is `[top, left]`, `end` is `[bottom, right]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Padding2d {
    pub begin: [usize; 2],
    pub end: [usize; 2],
}

impl Padding2d {
    /// The same padding on every side.
    pub fn uniform(p: usize) -> Self {
        Padding2d { begin: [p, p], end: [p, p] }
    }

    /// `[top, bottom, left, right]`.
    pub fn tblr(top: usize, bottom: usize, left: usize, right: usize) -> Self {
        Padding2d { begin: [top, left], end: [bottom, right] }
    }

    pub fn is_symmetric(&self) -> bool {
        self.begin == self.end
    }
}

/// Parameters of a 2-D convolution (forward or transposed). `output_padding` only applies
/// to transposed convolutions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv2dParams {
    pub stride: [usize; 2],
    pub padding: Padding2d,
    pub dilation: [usize; 2],
    pub groups: usize,
    pub output_padding: [usize; 2],
}

impl Default for Conv2dParams {
    fn default() -> Self {
        Conv2dParams {
            stride: [1, 1],
            padding: Padding2d::default(),
            dilation: [1, 1],
            groups: 1,
            output_padding: [0, 0],
        }
    }
}

impl Conv2dParams {
    pub fn with_padding(mut self, p: usize) -> Self {
        self.padding = Padding2d::uniform(p);
        self
    }
    pub fn with_stride(mut self, s: usize) -> Self {
        self.stride = [s, s];
        self
    }
    pub fn with_dilation(mut self, d: usize) -> Self {
        self.dilation = [d, d];
        self
    }
    pub fn with_groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }
    pub fn with_output_padding(mut self, p: usize) -> Self {
        self.output_padding = [p, p];
        self
    }
}

/// Parameters of a 1-D convolution (forward or transposed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv1dParams {
    pub stride: usize,
    /// `[left, right]`.
    pub padding: [usize; 2],
    pub dilation: usize,
    pub groups: usize,
    pub output_padding: usize,
}

impl Default for Conv1dParams {
    fn default() -> Self {
        Conv1dParams { stride: 1, padding: [0, 0], dilation: 1, groups: 1, output_padding: 0 }
    }
}

impl Conv1dParams {
    fn as_2d(&self) -> Conv2dParams {
        Conv2dParams {
            stride: [1, self.stride],
            padding: Padding2d { begin: [0, self.padding[0]], end: [0, self.padding[1]] },
            dilation: [1, self.dilation],
            groups: self.groups,
            output_padding: [0, self.output_padding],
        }
    }
}

/// Whether the problem came in as 1-D (`[N, C, L]`) or 2-D (`[N, C, H, W]`) tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rank {
    One,
    Two,
}

/// One validated convolution: geometry, element type and tensor rank.
///
/// Built by [`ConvProblem::conv2d`], [`ConvProblem::conv1d`],
/// [`ConvProblem::conv_transpose2d`] or [`ConvProblem::conv_transpose1d`] from tensor
/// shapes, which check every parameter and name the bad one in the error. The fields are
/// private so that every `ConvProblem` is one of these validated ones: the executors rely
/// on it (groups divide both channel counts, the output is at least 1x1, ...).
///
/// ```compile_fail,E0616
/// # use conv_engine::{ConvProblem, Conv2dParams};
/// let mut p = ConvProblem::conv2d(&[1, 4, 8, 8], &[4, 4, 3, 3], candle_core::DType::F32,
///     candle_core::DType::F32, &Conv2dParams::default()).unwrap();
/// p.geometry.groups = 3; // private: an impossible problem cannot be made by hand
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConvProblem {
    geometry: ConvGeometry,
    dtype: ConvDType,
    rank: Rank,
}

impl fmt::Display for ConvProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let g = self.geometry();
        let name = match (g.kind, self.rank) {
            (ConvKind::Forward, Rank::Two) => "conv2d",
            (ConvKind::Forward, Rank::One) => "conv1d",
            (ConvKind::Transposed, Rank::Two) => "conv_transpose2d",
            (ConvKind::Transposed, Rank::One) => "conv_transpose1d",
        };
        let out = g.out_size().map_or("invalid".to_string(), |[p, q]| format!("{p}x{q}"));
        write!(
            f,
            "{name} {} N={} C={} {}x{} -> K={} {out}, kernel {}x{}, stride {:?}, pad {:?}/{:?}, dilation {:?}, groups {}",
            self.dtype,
            g.batch,
            g.in_channels,
            g.in_size[0],
            g.in_size[1],
            g.out_channels,
            g.kernel[0],
            g.kernel[1],
            g.stride,
            g.pad_begin,
            g.pad_end,
            g.dilation,
            g.groups
        )?;
        if g.kind == ConvKind::Transposed {
            write!(f, ", output_padding {:?}", g.output_padding)?;
        }
        Ok(())
    }
}

fn dtype_of(op: &'static str, what: &'static str, dtype: candle_core::DType) -> Result<ConvDType, ConvError> {
    ConvDType::from_candle(dtype).ok_or(ConvError::UnsupportedDType { op, what, dtype: format!("{dtype:?}") })
}

impl ConvProblem {
    /// The convolution's geometry (a copy of it can be edited freely; it does not feed
    /// back into the problem).
    pub fn geometry(&self) -> &ConvGeometry {
        &self.geometry
    }

    pub fn dtype(&self) -> ConvDType {
        self.dtype
    }

    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// A 2-D convolution of an `[N, C, H, W]` input with `[K, C/groups, R, S]` weights.
    pub fn conv2d(
        input: &[usize],
        weight: &[usize],
        input_dtype: candle_core::DType,
        weight_dtype: candle_core::DType,
        params: &Conv2dParams,
    ) -> Result<Self, ConvError> {
        Self::build(ConvKind::Forward, Rank::Two, input, weight, input_dtype, weight_dtype, params)
    }

    /// A 2-D transposed convolution of an `[N, C, H, W]` input with `[C, K/groups, R, S]`
    /// weights.
    pub fn conv_transpose2d(
        input: &[usize],
        weight: &[usize],
        input_dtype: candle_core::DType,
        weight_dtype: candle_core::DType,
        params: &Conv2dParams,
    ) -> Result<Self, ConvError> {
        Self::build(ConvKind::Transposed, Rank::Two, input, weight, input_dtype, weight_dtype, params)
    }

    /// A 1-D convolution of an `[N, C, L]` input with `[K, C/groups, S]` weights.
    pub fn conv1d(
        input: &[usize],
        weight: &[usize],
        input_dtype: candle_core::DType,
        weight_dtype: candle_core::DType,
        params: &Conv1dParams,
    ) -> Result<Self, ConvError> {
        let (i, w) = Self::lift_1d("conv1d", input, weight)?;
        Self::build(ConvKind::Forward, Rank::One, &i, &w, input_dtype, weight_dtype, &params.as_2d())
    }

    /// A 1-D transposed convolution of an `[N, C, L]` input with `[C, K/groups, S]` weights.
    pub fn conv_transpose1d(
        input: &[usize],
        weight: &[usize],
        input_dtype: candle_core::DType,
        weight_dtype: candle_core::DType,
        params: &Conv1dParams,
    ) -> Result<Self, ConvError> {
        let (i, w) = Self::lift_1d("conv_transpose1d", input, weight)?;
        Self::build(ConvKind::Transposed, Rank::One, &i, &w, input_dtype, weight_dtype, &params.as_2d())
    }

    fn lift_1d(op: &'static str, input: &[usize], weight: &[usize]) -> Result<([usize; 4], [usize; 4]), ConvError> {
        let rank = |what, shape: &[usize]| {
            if shape.len() == 3 {
                Ok([shape[0], shape[1], 1, shape[2]])
            } else {
                Err(ConvError::Rank { op, what, expected: 3, shape: shape.to_vec() })
            }
        };
        Ok((rank("input", input)?, rank("weight", weight)?))
    }

    fn build(
        kind: ConvKind,
        rank: Rank,
        input: &[usize],
        weight: &[usize],
        input_dtype: candle_core::DType,
        weight_dtype: candle_core::DType,
        p: &Conv2dParams,
    ) -> Result<Self, ConvError> {
        let op = op_name(kind, rank);
        for (what, shape) in [("input", input), ("weight", weight)] {
            if shape.len() != 4 {
                return Err(ConvError::Rank { op, what, expected: 4, shape: shape.to_vec() });
            }
        }
        let dtype = dtype_of(op, "input", input_dtype)?;
        let wdtype = dtype_of(op, "weight", weight_dtype)?;
        if dtype != wdtype {
            return Err(ConvError::DTypeMismatch { op, input: dtype, weight: wdtype });
        }
        let bad = |param: &'static str, value: String, reason: &'static str| {
            Err(ConvError::Parameter { op, param, value, reason })
        };
        for (param, v) in [("stride", p.stride), ("dilation", p.dilation)] {
            if v.contains(&0) {
                return bad(param, format!("{v:?}"), "must be at least 1");
            }
        }
        if p.groups == 0 {
            return bad("groups", "0".into(), "must be at least 1");
        }
        let [n, c, h, w] = [input[0], input[1], input[2], input[3]];
        let [w0, w1, r, s] = [weight[0], weight[1], weight[2], weight[3]];
        if [n, c, h, w].contains(&0) {
            return bad("input shape", format!("{input:?}"), "has a zero dimension");
        }
        if [w0, w1, r, s].contains(&0) {
            return bad("weight shape", format!("{weight:?}"), "has a zero dimension");
        }
        if c % p.groups != 0 {
            return bad("groups", p.groups.to_string(), "does not divide the input channels");
        }
        let out_channels = match kind {
            ConvKind::Forward => {
                if w1 * p.groups != c {
                    return Err(ConvError::ChannelMismatch {
                        op,
                        input_channels: c,
                        weight_shape: weight.to_vec(),
                        groups: p.groups,
                    });
                }
                if w0 % p.groups != 0 {
                    return bad("groups", p.groups.to_string(), "does not divide the output channels (weight dim 0)");
                }
                w0
            }
            ConvKind::Transposed => {
                if w0 != c {
                    return Err(ConvError::ChannelMismatch {
                        op,
                        input_channels: c,
                        weight_shape: weight.to_vec(),
                        groups: p.groups,
                    });
                }
                w1 * p.groups
            }
        };
        if kind == ConvKind::Forward && p.output_padding != [0, 0] {
            return bad("output_padding", format!("{:?}", p.output_padding), "only applies to transposed convolutions");
        }
        if kind == ConvKind::Transposed {
            for d in 0..2 {
                // PyTorch's rule: the extra rows must fall inside one stride or dilation step.
                if p.output_padding[d] >= p.stride[d] && p.output_padding[d] >= p.dilation[d] {
                    return bad(
                        "output_padding",
                        format!("{:?}", p.output_padding),
                        "must be smaller than the stride or the dilation",
                    );
                }
            }
        }
        let geometry = ConvGeometry {
            kind,
            batch: n,
            in_channels: c,
            in_size: [h, w],
            out_channels,
            kernel: [r, s],
            stride: p.stride,
            pad_begin: p.padding.begin,
            pad_end: p.padding.end,
            dilation: p.dilation,
            output_padding: p.output_padding,
            groups: p.groups,
        };
        if geometry.out_size().is_none() {
            let reason = match kind {
                ConvKind::Forward => "the dilated kernel is larger than the padded input: output size < 1",
                ConvKind::Transposed => "the padding removes the whole output: output size < 1",
            };
            return Err(ConvError::Parameter {
                op,
                param: "kernel size",
                value: format!(
                    "{r}x{s} (dilation {:?}) on input {h}x{w} with padding {:?}/{:?}",
                    p.dilation, p.padding.begin, p.padding.end
                ),
                reason,
            });
        }
        Ok(ConvProblem { geometry, dtype, rank })
    }

    /// Output tensor shape (`[N, K, L]` for 1-D, `[N, K, P, Q]` for 2-D).
    pub fn output_shape(&self) -> Vec<usize> {
        let g = self.geometry();
        let [p, q] = g.out_hw();
        match self.rank {
            Rank::One => vec![g.batch, g.out_channels, q],
            Rank::Two => vec![g.batch, g.out_channels, p, q],
        }
    }

    /// Input tensor shape (`[N, C, L]` for 1-D, `[N, C, H, W]` for 2-D).
    pub fn input_shape(&self) -> Vec<usize> {
        let g = self.geometry();
        let [h, w] = g.in_size;
        match self.rank {
            Rank::One => vec![g.batch, g.in_channels, w],
            Rank::Two => vec![g.batch, g.in_channels, h, w],
        }
    }

    /// Weight tensor shape in the layout documented on [`ConvGeometry`].
    pub fn weight_shape(&self) -> Vec<usize> {
        let d = self.geometry().weight_dims();
        match self.rank {
            Rank::One => vec![d[0], d[1], d[3]],
            Rank::Two => d.to_vec(),
        }
    }

    pub fn input_bytes(&self) -> usize {
        self.geometry().input_len() * self.dtype.size_in_bytes()
    }

    pub fn weight_bytes(&self) -> usize {
        self.geometry().weight_len() * self.dtype.size_in_bytes()
    }

    pub fn output_bytes(&self) -> usize {
        self.geometry().output_len() * self.dtype.size_in_bytes()
    }

    /// The same problem restricted to `batch` images (at least one).
    pub fn with_batch(&self, batch: usize) -> Result<Self, ConvError> {
        if batch == 0 {
            return Err(ConvError::Parameter {
                op: self.op_name(),
                param: "batch",
                value: "0".into(),
                reason: "a sub-problem needs at least one image",
            });
        }
        let mut p = *self;
        p.geometry.batch = batch;
        Ok(p)
    }

    /// A forward problem restricted to output rows `rows`: the input narrowed to the rows
    /// those outputs read, and the padding adjusted so the sub-problem's output is exactly
    /// those rows. Returns the sub-problem and the input rows it reads. `rows` must be a
    /// non-empty range of the output's rows, and the problem a forward one.
    pub fn output_rows(&self, rows: std::ops::Range<usize>) -> Result<(Self, std::ops::Range<usize>), ConvError> {
        let g = self.geometry();
        let out_rows = g.out_hw()[0];
        if g.kind != ConvKind::Forward || rows.is_empty() || rows.end > out_rows {
            return Err(ConvError::Parameter {
                op: self.op_name(),
                param: "output rows",
                value: format!("{rows:?} of {out_rows}"),
                reason: "row sub-problems need a non-empty range of a forward convolution's output rows",
            });
        }
        let input_rows = g.input_rows_for(rows.clone());
        let lo = (rows.start * g.stride[0]) as isize - g.pad_begin[0] as isize;
        let hi = ((rows.end - 1) * g.stride[0] + g.dilation[0] * (g.kernel[0] - 1)) as isize - g.pad_begin[0] as isize;
        let mut sub = *self;
        sub.geometry.in_size[0] = input_rows.len();
        sub.geometry.pad_begin[0] = (input_rows.start as isize - lo) as usize;
        sub.geometry.pad_end[0] = (hi + 1 - input_rows.end as isize) as usize;
        debug_assert_eq!(sub.geometry().out_size().map(|o| o[0]), Some(rows.len()));
        Ok((sub, input_rows))
    }

    /// `conv2d`, `conv1d`, `conv_transpose2d` or `conv_transpose1d`.
    pub fn op_name(&self) -> &'static str {
        op_name(self.geometry().kind, self.rank)
    }
}

fn op_name(kind: ConvKind, rank: Rank) -> &'static str {
    match (kind, rank) {
        (ConvKind::Forward, Rank::Two) => "conv2d",
        (ConvKind::Forward, Rank::One) => "conv1d",
        (ConvKind::Transposed, Rank::Two) => "conv_transpose2d",
        (ConvKind::Transposed, Rank::One) => "conv_transpose1d",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::DType;

    fn conv2d(i: &[usize], w: &[usize], p: Conv2dParams) -> Result<ConvProblem, ConvError> {
        ConvProblem::conv2d(i, w, DType::F32, DType::F32, &p)
    }

    #[test]
    fn errors_name_the_bad_parameter_and_value() {
        let msg = |r: Result<ConvProblem, ConvError>| r.unwrap_err().to_string();
        let e = msg(conv2d(&[1, 6, 8, 8], &[4, 3, 3, 3], Conv2dParams::default().with_groups(4)));
        assert!(e.contains("groups") && e.contains('4'), "{e}");
        let e = msg(conv2d(&[1, 5, 8, 8], &[4, 3, 3, 3], Conv2dParams::default()));
        assert!(e.contains("5") && e.contains("[4, 3, 3, 3]"), "{e}");
        let e = msg(conv2d(&[1, 3, 2, 2], &[4, 3, 5, 5], Conv2dParams::default()));
        assert!(e.contains("output size < 1") && e.contains("5x5"), "{e}");
        let e = msg(conv2d(&[1, 3, 8], &[4, 3, 3, 3], Conv2dParams::default()));
        assert!(e.contains("4-D") && e.contains("[1, 3, 8]"), "{e}");
        let e =
            msg(ConvProblem::conv2d(&[1, 3, 8, 8], &[4, 3, 3, 3], DType::F32, DType::F16, &Conv2dParams::default()));
        assert!(e.contains("f32") && e.contains("f16"), "{e}");
        let e = msg(ConvProblem::conv2d(&[1, 3, 8, 8], &[4, 3, 3, 3], DType::U8, DType::U8, &Conv2dParams::default()));
        assert!(e.contains("U8"), "{e}");
        let e = msg(conv2d(&[1, 3, 8, 8], &[4, 3, 3, 3], Conv2dParams::default().with_stride(0)));
        assert!(e.contains("stride") && e.contains("[0, 0]"), "{e}");
        let e = msg(ConvProblem::conv_transpose2d(
            &[1, 3, 8, 8],
            &[3, 4, 3, 3],
            DType::F32,
            DType::F32,
            &Conv2dParams::default().with_stride(2).with_output_padding(2),
        ));
        assert!(e.contains("output_padding") && e.contains("[2, 2]"), "{e}");
        let e = msg(ConvProblem::conv1d(&[1, 3, 8, 8], &[4, 3, 3], DType::F32, DType::F32, &Conv1dParams::default()));
        assert!(e.contains("3-D"), "{e}");
    }

    #[test]
    fn output_rows_subproblem_has_exactly_those_rows() {
        let p = conv2d(&[1, 2, 17, 9], &[3, 2, 3, 3], Conv2dParams::default().with_padding(1).with_stride(2)).unwrap();
        let [rows, _] = p.geometry().out_hw();
        for start in 0..rows {
            for end in start + 1..=rows {
                let (sub, _) = p.output_rows(start..end).unwrap();
                assert_eq!(sub.geometry().out_hw()[0], end - start);
            }
        }
    }
}
