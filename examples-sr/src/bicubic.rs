//! Bicubic upscaling of the alpha channel, as ncnn's `Interp` layer (resize_type 3, no
//! align_corners) does it: realcugan-ncnn-vulkan passes the alpha plane through such a
//! layer instead of the network.
//!
//! ncnn's recipe (src/layer/interp.cpp and x86/interp_bicubic.h), re-stated: source
//! coordinate `fx = (dx + 0.5)·(w / outw) − 0.5` (computed in f64, rounded to f32),
//! `sx = floor(fx)`, the Keys cubic with A = −0.75 evaluated in f32 at the fraction, the
//! four weights folded onto the image when the support leaves it (so the taps stay within
//! columns `sx−1 .. sx+2` of a source of at least 4 pixels), a horizontal pass per source
//! row, then a vertical pass with fused multiply-adds (ncnn's AVX/FMA code path).

/// Per output coordinate: the first of the 4 source taps and their weights.
struct Taps {
    start: Vec<usize>,
    weights: Vec<[f32; 4]>,
}

fn cubic(fx: f32) -> [f32; 4] {
    const A: f32 = -0.75;
    let fx0 = fx + 1.0;
    let fx1 = fx;
    let fx2 = 1.0 - fx;
    let c0 = A * fx0 * fx0 * fx0 - 5.0 * A * fx0 * fx0 + 8.0 * A * fx0 - 4.0 * A;
    let c1 = (A + 2.0) * fx1 * fx1 * fx1 - (A + 3.0) * fx1 * fx1 + 1.0;
    let c2 = (A + 2.0) * fx2 * fx2 * fx2 - (A + 3.0) * fx2 * fx2 + 1.0;
    [c0, c1, c2, 1.0 - c0 - c1 - c2]
}

fn taps(n: usize, out: usize) -> Taps {
    let scale = n as f64 / out as f64;
    let mut start = Vec::with_capacity(out);
    let mut weights = Vec::with_capacity(out);
    for d in 0..out {
        let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
        let s = f.floor();
        let mut a = cubic(f - s);
        let mut s = s as i64;
        let n = n as i64;
        if n >= 4 {
            // ncnn's folding: keep the 4 taps inside the image, weights summing to 1.
            if s <= -1 {
                s = 1;
                a = [1.0 - a[3], a[3], 0.0, 0.0];
            }
            if s == 0 {
                s = 1;
                a = [a[0] + a[1], a[2], a[3], 0.0];
            }
            if s == n - 2 {
                s = n - 3;
                a = [0.0, a[0], a[1], a[2] + a[3]];
            }
            if s >= n - 1 {
                s = n - 3;
                a = [0.0, 0.0, a[0], 1.0 - a[0]];
            }
            start.push((s - 1) as usize);
            weights.push(a);
        } else {
            // ncnn reads outside sources narrower than 4 pixels; here the taps are clamped
            // to the edge instead (edge pixels repeated), expressed as merged weights over
            // a window that starts at 0.
            let mut merged = [0.0f32; 4];
            for (k, &wk) in a.iter().enumerate() {
                let idx = (s - 1 + k as i64).clamp(0, n - 1) as usize;
                merged[idx] += wk;
            }
            start.push(0);
            weights.push(merged);
        }
    }
    Taps { start, weights }
}

/// Upscales a `w x h` plane by `scale` (output `w·scale x h·scale`), values as given (e.g.
/// 0..255). The result is not rounded or clamped.
pub fn upscale_plane(src: &[f32], w: usize, h: usize, scale: usize) -> Vec<f32> {
    assert_eq!(src.len(), w * h, "plane size");
    let (ow, oh) = (w * scale, h * scale);
    let xt = taps(w, ow);
    let yt = taps(h, oh);
    // Horizontal pass of every source row that is read (all of them for h ≥ 4).
    let mut rows = vec![0.0f32; h * ow];
    for y in 0..h {
        let s = &src[y * w..(y + 1) * w];
        let r = &mut rows[y * ow..(y + 1) * ow];
        for (dx, out) in r.iter_mut().enumerate() {
            let x0 = xt.start[dx];
            let a = xt.weights[dx];
            let at = |k: usize| s.get(x0 + k).copied().unwrap_or(0.0);
            *out = at(0) * a[0] + at(1) * a[1] + at(2) * a[2] + at(3) * a[3];
        }
    }
    let mut dst = vec![0.0f32; ow * oh];
    let zero = vec![0.0f32; ow];
    for dy in 0..oh {
        let y0 = yt.start[dy];
        let b = yt.weights[dy];
        let row = |k: usize| if y0 + k < h { &rows[(y0 + k) * ow..(y0 + k + 1) * ow] } else { &zero[..] };
        let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
        for (dx, out) in dst[dy * ow..(dy + 1) * ow].iter_mut().enumerate() {
            let v = r0[dx] * b[0];
            let v = r1[dx].mul_add(b[1], v);
            let v = r2[dx].mul_add(b[2], v);
            *out = r3[dx].mul_add(b[3], v);
        }
    }
    dst
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_stays_constant_and_ramps_stay_ramps() {
        let (w, h) = (7, 5);
        let flat = vec![100.0f32; w * h];
        for s in 2..=4 {
            let out = upscale_plane(&flat, w, h, s);
            assert_eq!(out.len(), w * h * s * s);
            assert!(out.iter().all(|&v| (v - 100.0).abs() < 1e-3), "scale {s}");
        }
        // At 3x, every third output column and row sits exactly on a source pixel
        // (fraction 0: weights 0, 1, 0, 0), so it reproduces the source there, borders
        // included.
        let src: Vec<f32> = (0..w * h).map(|i| ((i * 37) % 101) as f32).collect();
        let out = upscale_plane(&src, w, h, 3);
        for y in 0..h {
            for x in 0..w {
                assert_eq!(out[(3 * y + 1) * 3 * w + 3 * x + 1], src[y * w + x], "({x}, {y})");
            }
        }
    }

    #[test]
    fn tiny_planes_do_not_read_outside() {
        for (w, h) in [(1, 1), (2, 3), (3, 2)] {
            let src: Vec<f32> = (0..w * h).map(|i| i as f32 * 10.0).collect();
            let out = upscale_plane(&src, w, h, 3);
            assert_eq!(out.len(), w * h * 9);
            assert!(out.iter().all(|v| v.is_finite()));
        }
    }
}
