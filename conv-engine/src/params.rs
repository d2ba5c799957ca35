//! Builders of convolution parameters per axis: different stride, dilation or padding
//! along the height and the width, asymmetric padding, and the 1-D parameters.
//!
//! The uniform builders (`with_stride(2)`, `with_padding(1)`, ...) are next to the types
//! in `problem.rs`; these are the per-axis ones.

use crate::problem::{Conv1dParams, Conv2dParams, Padding2d};

impl Conv2dParams {
    /// Stride `h` along the height and `w` along the width.
    ///
    /// ```
    /// use conv_engine::{Conv2dParams, ConvProblem};
    /// use candle_core::DType;
    /// let p = Conv2dParams::default().with_stride_hw(2, 1).with_padding_hw(1, 0);
    /// // 3x3 kernel over a 9x9 image: (9 + 2 - 3) / 2 + 1 = 5 rows, 9 - 3 + 1 = 7 columns.
    /// let problem = ConvProblem::conv2d(&[1, 3, 9, 9], &[8, 3, 3, 3], DType::F32, DType::F32, &p).unwrap();
    /// assert_eq!(problem.output_shape(), vec![1, 8, 5, 7]);
    /// ```
    pub fn with_stride_hw(mut self, h: usize, w: usize) -> Self {
        self.stride = [h, w];
        self
    }

    /// Dilation `h` along the height and `w` along the width.
    ///
    /// ```
    /// use conv_engine::{Conv2dParams, ConvProblem};
    /// use candle_core::DType;
    /// let p = Conv2dParams::default().with_dilation_hw(2, 1);
    /// // A dilated 3x3 kernel spans 5 rows and 3 columns.
    /// let problem = ConvProblem::conv2d(&[1, 1, 9, 9], &[1, 1, 3, 3], DType::F32, DType::F32, &p).unwrap();
    /// assert_eq!(problem.output_shape(), vec![1, 1, 5, 7]);
    /// ```
    pub fn with_dilation_hw(mut self, h: usize, w: usize) -> Self {
        self.dilation = [h, w];
        self
    }

    /// Padding `h` rows above and below, `w` columns left and right.
    ///
    /// ```
    /// use conv_engine::{Conv2dParams, Padding2d};
    /// let p = Conv2dParams::default().with_padding_hw(1, 2);
    /// assert_eq!(p.padding, Padding2d { begin: [1, 2], end: [1, 2] });
    /// ```
    pub fn with_padding_hw(mut self, h: usize, w: usize) -> Self {
        self.padding = Padding2d { begin: [h, w], end: [h, w] };
        self
    }

    /// Asymmetric padding: `top`, `bottom`, `left`, `right` (PyTorch's `F.pad` order is
    /// left, right, top, bottom; this is the order of the image's rows, then columns).
    ///
    /// ```
    /// use conv_engine::{Conv2dParams, ConvProblem};
    /// use candle_core::DType;
    /// // The SD VAE encoder's downsampler: pad right and bottom by one, then stride 2.
    /// let p = Conv2dParams::default().with_padding_tblr(0, 1, 0, 1).with_stride(2);
    /// let problem = ConvProblem::conv2d(&[1, 4, 8, 8], &[4, 4, 3, 3], DType::F32, DType::F32, &p).unwrap();
    /// assert_eq!(problem.output_shape(), vec![1, 4, 4, 4]);
    /// ```
    pub fn with_padding_tblr(mut self, top: usize, bottom: usize, left: usize, right: usize) -> Self {
        self.padding = Padding2d::tblr(top, bottom, left, right);
        self
    }

    /// Any [`Padding2d`].
    ///
    /// ```
    /// use conv_engine::{Conv2dParams, Padding2d};
    /// let p = Conv2dParams::default().with_padding2d(Padding2d::uniform(3));
    /// assert_eq!(p, Conv2dParams::default().with_padding(3));
    /// ```
    pub fn with_padding2d(mut self, padding: Padding2d) -> Self {
        self.padding = padding;
        self
    }

    /// Output padding `h` rows and `w` columns (transposed convolutions only).
    ///
    /// ```
    /// use conv_engine::{Conv2dParams, ConvProblem};
    /// use candle_core::DType;
    /// let p = Conv2dParams::default().with_stride(2).with_padding(1).with_output_padding_hw(1, 0);
    /// // Transposed: (4 - 1) * 2 - 2 + 3 + output padding = 8 rows and 7 columns.
    /// let problem =
    ///     ConvProblem::conv_transpose2d(&[1, 2, 4, 4], &[2, 3, 3, 3], DType::F32, DType::F32, &p).unwrap();
    /// assert_eq!(problem.output_shape(), vec![1, 3, 8, 7]);
    /// ```
    pub fn with_output_padding_hw(mut self, h: usize, w: usize) -> Self {
        self.output_padding = [h, w];
        self
    }
}

impl Conv1dParams {
    /// Stride `s`.
    ///
    /// ```
    /// use conv_engine::{Conv1dParams, ConvProblem};
    /// use candle_core::DType;
    /// let p = Conv1dParams::default().with_stride(2).with_padding(1);
    /// let problem = ConvProblem::conv1d(&[1, 2, 10], &[4, 2, 3], DType::F32, DType::F32, &p).unwrap();
    /// assert_eq!(problem.output_shape(), vec![1, 4, 5]);
    /// ```
    pub fn with_stride(mut self, s: usize) -> Self {
        self.stride = s;
        self
    }

    /// `p` on both ends.
    ///
    /// ```
    /// use conv_engine::Conv1dParams;
    /// assert_eq!(Conv1dParams::default().with_padding(2).padding, [2, 2]);
    /// ```
    pub fn with_padding(mut self, p: usize) -> Self {
        self.padding = [p, p];
        self
    }

    /// `left` before the first element, `right` after the last (a causal convolution pads
    /// only on the left).
    ///
    /// ```
    /// use conv_engine::{Conv1dParams, ConvProblem};
    /// use candle_core::DType;
    /// let causal = Conv1dParams::default().with_padding_lr(2, 0);
    /// let problem = ConvProblem::conv1d(&[1, 1, 10], &[1, 1, 3], DType::F32, DType::F32, &causal).unwrap();
    /// assert_eq!(problem.output_shape(), vec![1, 1, 10]);
    /// ```
    pub fn with_padding_lr(mut self, left: usize, right: usize) -> Self {
        self.padding = [left, right];
        self
    }

    /// Dilation `d`.
    ///
    /// ```
    /// use conv_engine::Conv1dParams;
    /// assert_eq!(Conv1dParams::default().with_dilation(4).dilation, 4);
    /// ```
    pub fn with_dilation(mut self, d: usize) -> Self {
        self.dilation = d;
        self
    }

    /// `g` groups.
    ///
    /// ```
    /// use conv_engine::Conv1dParams;
    /// assert_eq!(Conv1dParams::default().with_groups(8).groups, 8);
    /// ```
    pub fn with_groups(mut self, g: usize) -> Self {
        self.groups = g;
        self
    }

    /// Output padding `p` (transposed convolutions only).
    ///
    /// ```
    /// use conv_engine::Conv1dParams;
    /// assert_eq!(Conv1dParams::default().with_output_padding(1).output_padding, 1);
    /// ```
    pub fn with_output_padding(mut self, p: usize) -> Self {
        self.output_padding = p;
        self
    }
}

#[cfg(test)]
mod tests {
    use crate::{Conv1dParams, Conv2dParams, ConvProblem, Padding2d};
    use candle_core::DType;

    #[test]
    fn per_axis_builders_set_each_axis() {
        let p = Conv2dParams::default()
            .with_stride_hw(2, 3)
            .with_dilation_hw(1, 2)
            .with_padding_tblr(1, 2, 3, 4)
            .with_output_padding_hw(1, 0)
            .with_groups(2);
        assert_eq!(p.stride, [2, 3]);
        assert_eq!(p.dilation, [1, 2]);
        assert_eq!(p.padding, Padding2d { begin: [1, 3], end: [2, 4] });
        assert_eq!(p.output_padding, [1, 0]);
        assert_eq!(p.groups, 2);
        // Rows: (10 + 1 + 2 - 3) / 2 + 1 = 6; columns: (10 + 3 + 4 - 5) / 3 + 1 = 5.
        // A forward conv refuses output padding (it only applies to transposed ones).
        let e = ConvProblem::conv2d(&[1, 4, 10, 10], &[6, 2, 3, 3], DType::F32, DType::F32, &p).unwrap_err();
        assert!(e.to_string().contains("output_padding"), "{e}");
        let p = p.with_output_padding_hw(0, 0);
        let q = ConvProblem::conv2d(&[1, 4, 10, 10], &[6, 2, 3, 3], DType::F32, DType::F32, &p).unwrap();
        assert_eq!(q.output_shape(), vec![1, 6, 6, 5]);
        let c = Conv1dParams::default().with_padding_lr(3, 1).with_dilation(2).with_stride(2).with_groups(1);
        assert_eq!((c.padding, c.dilation, c.stride), ([3, 1], 2, 2));
    }
}
