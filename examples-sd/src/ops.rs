//! Memory-saving compositions the decoder needs beyond the library's ops: an in-place
//! residual add and an upsample-then-conv that never holds the whole upsampled input.

use crate::error::Result;
use rocm_vision::nn::Conv2d;
use rocm_vision::{Conv2dParams, Padding2d, Tensor};

/// `dst + src`, written into `dst`'s buffer when it can be (same shape and dtype, both
/// contiguous, buffer not shared), so a residual add allocates nothing.
///
/// `dst` is taken by value: the caller gives up its handle, and must not hold another
/// tensor sharing `dst`'s storage (the decoder only passes fresh conv outputs).
pub fn add_assign(dst: Tensor, src: &Tensor) -> Result<Tensor> {
    Ok(dst.add_assign(src)?)
}

/// `conv(upsample_nearest_2x(x))` for a 3x3, stride-1, padding-1 `conv`, computed in
/// bands of output rows so that at most `max_band_bytes` of upsampled input exist at a
/// time (the full upsampled input is 4x `x` and as large as the output). Each band is
/// the same arithmetic as the unbanded conv on those rows: the result is exact. Bands are
/// written into the output in place.
pub fn upsample2x_conv3x3(x: &Tensor, conv: &Conv2d, max_band_bytes: usize) -> Result<Tensor> {
    let dims = x.dims().to_vec();
    let k = conv.weight.dims().to_vec();
    let plain = Conv2dParams::default().with_padding(1);
    let bandable = dims.len() == 4 && k.len() == 4 && k[2] == 3 && k[3] == 3 && conv.params == plain;
    let (n, c, h, w) = match dims[..] {
        [n, c, h, w] => (n, c, h, w),
        _ => (0, 0, 0, 0),
    };
    let row_bytes = n * c * 2 * w * x.dtype().size_in_bytes();
    let rows_fit = max_band_bytes / row_bytes.max(1);
    if !bandable || rows_fit >= 2 * h + 2 {
        let up = x.upsample_nearest2d(2 * h, 2 * w)?;
        return Ok(conv.forward(&up)?);
    }
    // Output rows per band: its input needs one halo row above and below; a multiple of
    // crate::banded::BAND_ALIGN (even: bands start on a source row; and on the CPU
    // Winograd's grid, so that size-independent rounding gives the whole map's bits).
    let align = crate::banded::BAND_ALIGN;
    let band = (rows_fit.saturating_sub(2) / align * align).max(align);
    let (out_h, out_w) = (2 * h, 2 * w);
    // One allocation in its own dtype (Tensor::full's CPU path; the memory plan counts it once).
    let out = Tensor::zeros(&[n, k[0], out_h, out_w], x.dtype(), x.device())?;
    let mut r0 = 0;
    while r0 < out_h {
        let r1 = (r0 + band).min(out_h);
        // Upsampled rows [u0, u1) feed output rows [r0, r1); they come from source rows [s0, s1).
        let (u0, u1) = (r0.saturating_sub(1), (r1 + 1).min(out_h));
        let (s0, s1) = (u0 / 2, (u1 - 1) / 2 + 1);
        let up = x.narrow(2, s0, s1 - s0)?.upsample_nearest2d(2 * (s1 - s0), out_w)?.narrow(2, u0 - 2 * s0, u1 - u0)?;
        let params = Conv2dParams {
            padding: Padding2d::tblr(usize::from(r0 == 0), usize::from(r1 == out_h), 1, 1),
            ..conv.params
        };
        let y = up.conv2d(&conv.weight, conv.bias.as_ref(), &params)?.contiguous()?;
        drop(up);
        out.slice_set(&y, 2, r0)?;
        r0 = r1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rocm_vision::Device;

    fn seq(n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * scale).collect()
    }

    #[test]
    fn add_assign_reuses_the_buffer_and_adds() {
        let dev = Device::cpu();
        let a = Tensor::from_vec(vec![1f32, 2., 3., 4.], &[1, 1, 2, 2], &dev).unwrap();
        let b = Tensor::from_vec(vec![10f32, 20., 30., 40.], &[1, 1, 2, 2], &dev).unwrap();
        let y = add_assign(a, &b).unwrap();
        assert_eq!(y.to_vec::<f32>().unwrap(), vec![11., 22., 33., 44.]);
        // A broadcast operand falls back to the allocating add.
        let s = Tensor::from_vec(vec![1f32], &[1, 1, 1, 1], &dev).unwrap();
        assert_eq!(add_assign(y, &s).unwrap().to_vec::<f32>().unwrap(), vec![12., 23., 34., 45.]);
    }

    #[test]
    fn banded_upsample_conv_matches_the_plain_one() {
        let dev = Device::cpu();
        let (c, k, h, w) = (3, 4, 7, 5);
        let x = Tensor::from_vec(seq(c * h * w, 2.0), &[1, c, h, w], &dev).unwrap();
        let weight = Tensor::from_vec(seq(k * c * 9, 0.5), &[k, c, 3, 3], &dev).unwrap();
        let bias = Tensor::from_vec(seq(k, 0.3), &[k], &dev).unwrap();
        let conv = Conv2d::new(weight, Some(bias), Conv2dParams::default().with_padding(1));
        let whole = upsample2x_conv3x3(&x, &conv, usize::MAX).unwrap().to_vec::<f32>().unwrap();
        let row = c * 2 * w * 4;
        // 2-row and 4-row bands, and an odd number of bands ending on a short one.
        for rows in [4, 6, 7] {
            let banded = upsample2x_conv3x3(&x, &conv, rows * row).unwrap();
            assert_eq!(banded.dims(), &[1, k, 2 * h, 2 * w]);
            let d = banded.to_vec::<f32>().unwrap().iter().zip(&whole).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(d < 1e-5, "band budget {rows} rows: max diff {d}");
        }
    }
}
