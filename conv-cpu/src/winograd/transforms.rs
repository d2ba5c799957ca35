//! The 1-D and 2-D Winograd transforms of F(2, 3) and F(4, 3), in the correlation form
//! `y = Aᵀ [(G g) ⊙ (Bᵀ d)]` (Lavin & Gray), built by Toom-Cook from interpolation points.
//!
//! - F(2, 3): points 0, 1, -1, ∞ (Lavin & Gray's matrices).
//! - F(4, 3): points 0, 1, -1, 2, -1/2, ∞. The usual 0, ±1, ±2 put coefficients up to 8
//!   in `Aᵀ` and 5 in `Bᵀ` on the same points and, measured in f32 with 256 input channels,
//!   err by about 1e-5 of the largest output, the engine's f32 tolerance; 2 and -1/2 split
//!   that growth between `Aᵀ` and `G` (Barabasz et al., "Error analysis and improving the
//!   accuracy of Winograd convolution", 2020) and err by about 3e-6. `Bᵀ`'s rows are
//!   scaled to small integers (its Toom-Cook rows are halves), the inverse scale going into
//!   `G`; powers of two scale exactly, so that changes no rounding.
//!
//! `G g` is applied in f64 and rounded once (it runs once per weight), `Bᵀ` and `Aᵀ` in
//! f32 on 16 tiles side by side (the GEMM's panel width), which the compiler vectorises.
//! Every function is generic in the tile size through the const `N` (input tile edge,
//! 4 or 6) and `M` (output tile edge, 2 or 4); other values are unreachable by
//! construction ([`super::WinogradTile`] has two variants).

use crate::implicit_gemm::NR;

/// Arithmetic the transforms are written in (f32 to run, f64 to build weights and test).
pub(super) trait Num:
    Copy + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self>
{
    fn c(v: f64) -> Self;
}

impl Num for f32 {
    #[inline(always)]
    fn c(v: f64) -> Self {
        v as f32
    }
}

impl Num for f64 {
    #[inline(always)]
    fn c(v: f64) -> Self {
        v
    }
}

/// `Bᵀ d` for one `N`-vector.
#[inline(always)]
pub(super) fn bt<F: Num, const N: usize>(d: [F; N]) -> [F; N] {
    let mut o = [F::c(0.0); N];
    let k = F::c;
    match N {
        4 => {
            o[0] = d[0] - d[2];
            o[1] = d[1] + d[2];
            o[2] = d[2] - d[1];
            o[3] = d[1] - d[3];
        }
        6 => {
            o[0] = k(2.0) * (d[0] + d[4]) + k(3.0) * (d[1] - d[3]) - k(4.0) * d[2];
            o[1] = k(2.0) * (d[4] - d[1]) - k(5.0) * d[2] - d[3];
            o[2] = k(2.0) * (d[1] + d[4]) + d[2] - k(5.0) * d[3];
            o[3] = k(2.0) * (d[4] - d[2]) + d[3] - d[1];
            o[4] = k(2.0) * (d[1] - d[3]) + d[4] - d[2];
            o[5] = k(2.0) * (d[1] + d[5]) + k(3.0) * (d[2] - d[4]) - k(4.0) * d[3];
        }
        _ => unreachable!("Winograd input tiles are 4 or 6 wide"),
    }
    o
}

/// `G g` for one 3-vector (f64: it runs once per weight).
#[inline(always)]
pub(super) fn gk<const N: usize>(g: [f64; 3]) -> [f64; N] {
    let mut o = [0.0; N];
    match N {
        4 => {
            o[0] = g[0];
            o[1] = 0.5 * (g[0] + g[1] + g[2]);
            o[2] = 0.5 * (g[0] - g[1] + g[2]);
            o[3] = g[2];
        }
        6 => {
            // Toom-Cook rows g_k·p^k / Π(p - q) over points p = 0, 1, -1, 2, -1/2, divided
            // by the scale `Bᵀ`'s row took (2, 2, 2, 2, 1), and the ∞ row over 2.
            o[0] = 0.5 * g[0];
            o[1] = -(g[0] + g[1] + g[2]) / 6.0;
            o[2] = (g[0] - g[1] + g[2]) / 6.0;
            o[3] = (g[0] + 2.0 * g[1] + 4.0 * g[2]) / 30.0;
            o[4] = (-16.0 * g[0] + 8.0 * g[1] - 4.0 * g[2]) / 15.0;
            o[5] = 0.5 * g[2];
        }
        _ => unreachable!("Winograd input tiles are 4 or 6 wide"),
    }
    o
}

/// `Aᵀ m` for one `N`-vector.
#[inline(always)]
pub(super) fn at<F: Num, const N: usize, const M: usize>(m: [F; N]) -> [F; M] {
    let mut o = [F::c(0.0); M];
    let k = F::c;
    match (N, M) {
        (4, 2) => {
            o[0] = m[0] + m[1] + m[2];
            o[1] = m[1] - m[2] - m[3];
        }
        (6, 4) => {
            let (s, d) = (m[1] + m[2], m[1] - m[2]);
            o[0] = m[0] + s + m[3] + m[4];
            o[1] = d + k(2.0) * m[3] - k(0.5) * m[4];
            o[2] = s + k(4.0) * m[3] + k(0.25) * m[4];
            o[3] = d + k(8.0) * m[3] - k(0.125) * m[4] + m[5];
        }
        _ => unreachable!("Winograd tiles are F(2, 3) and F(4, 3)"),
    }
    o
}

/// `G g Gᵀ` of a row-major 3x3 kernel, row-major `N`x`N` (`E` = `N`², f64).
pub(super) fn weight_tile<const N: usize, const E: usize>(g: &[f64; 9]) -> [f64; E] {
    let cols: [[f64; N]; 3] = std::array::from_fn(|s| gk([g[s], g[3 + s], g[6 + s]]));
    let mut out = [0.0; E];
    for r in 0..N {
        out[r * N..r * N + N].copy_from_slice(&gk::<N>([cols[0][r], cols[1][r], cols[2][r]]));
    }
    out
}

/// `Bᵀ d B` over 16 lanes: `d[row][col][lane]` to `put(e, lanes)` for each `e < E`, as
/// each row of the result is done (straight into its GEMM panel, no copy of the tile).
#[inline(always)]
pub(super) fn input_tile_lanes<const N: usize, const E: usize>(
    d: &[[[f32; NR]; N]; N],
    mut put: impl FnMut(usize, &[f32; NR]),
) {
    debug_assert_eq!(E, N * N);
    let mut cols = [[[0f32; NR]; N]; N]; // cols[r][s]: Bᵀ applied down column s
    for s in 0..N {
        for j in 0..NR {
            let v = bt(std::array::from_fn::<f32, N, _>(|r| d[r][s][j]));
            for r in 0..N {
                cols[r][s][j] = v[r];
            }
        }
    }
    for (r, cols_r) in cols.iter().enumerate() {
        let mut row = [[0f32; NR]; N];
        for j in 0..NR {
            let v = bt(std::array::from_fn::<f32, N, _>(|s| cols_r[s][j]));
            for s in 0..N {
                row[s][j] = v[s];
            }
        }
        for (s, lanes) in row.iter().enumerate() {
            put(r * N + s, lanes);
        }
    }
}

/// `Aᵀ m A` over 16 lanes: `m[e][lane]` to `y[row][col][lane]`.
#[inline(always)]
pub(super) fn output_tile_lanes<const N: usize, const M: usize, const E: usize>(
    m: &[[f32; NR]; E],
) -> [[[f32; NR]; M]; M] {
    let mut cols = [[[0f32; NR]; N]; M]; // cols[r][s]: Aᵀ applied down column s
    for s in 0..N {
        for j in 0..NR {
            let v: [f32; M] = at(std::array::from_fn::<f32, N, _>(|r| m[r * N + s][j]));
            for r in 0..M {
                cols[r][s][j] = v[r];
            }
        }
    }
    let mut y = [[[0f32; NR]; M]; M];
    for r in 0..M {
        for j in 0..NR {
            let v: [f32; M] = at(std::array::from_fn::<f32, N, _>(|s| cols[r][s][j]));
            for s in 0..M {
                y[r][s][j] = v[s];
            }
        }
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random value in [-1, 1).
    fn val(i: usize) -> f64 {
        let x = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17) ^ 0x5851_f42d_4c95_7f2d;
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    }

    /// `Bᵀ d B` of one row-major patch.
    fn input_tile<F: Num, const N: usize, const E: usize>(d: &[F; E]) -> [F; E] {
        let cols: [[F; N]; N] = std::array::from_fn(|s| bt(std::array::from_fn(|r| d[r * N + s])));
        let mut out = [F::c(0.0); E];
        for r in 0..N {
            out[r * N..r * N + N].copy_from_slice(&bt::<F, N>(std::array::from_fn(|s| cols[s][r])));
        }
        out
    }

    /// `Aᵀ m A` of one row-major product, row-major `M`x`M` (`MM` = `M`²).
    fn output_tile<F: Num, const N: usize, const M: usize, const E: usize, const MM: usize>(m: &[F; E]) -> [F; MM] {
        let cols: [[F; M]; N] = std::array::from_fn(|s| at::<F, N, M>(std::array::from_fn(|r| m[r * N + s])));
        let mut out = [F::c(0.0); MM];
        for r in 0..M {
            out[r * M..r * M + M].copy_from_slice(&at::<F, N, M>(std::array::from_fn(|s| cols[s][r])));
        }
        out
    }

    /// One tile in f64: Aᵀ[(G g Gᵀ) ⊙ (Bᵀ d B)]A is the 3x3 correlation of the patch.
    fn one_tile_is_the_correlation<const N: usize, const M: usize, const E: usize, const MM: usize>() {
        for seed in 0..20 {
            let d: [f64; E] = std::array::from_fn(|i| val(seed * 100 + i));
            let g: [f64; 9] = std::array::from_fn(|i| val(seed * 100 + 50 + i));
            let (u, v) = (weight_tile::<N, E>(&g), input_tile::<f64, N, E>(&d));
            let prod: [f64; E] = std::array::from_fn(|e| u[e] * v[e]);
            let y = output_tile::<f64, N, M, E, MM>(&prod);
            for oy in 0..M {
                for ox in 0..M {
                    let mut want = 0.0;
                    for r in 0..3 {
                        for s in 0..3 {
                            want += d[(oy + r) * N + ox + s] * g[r * 3 + s];
                        }
                    }
                    let got = y[oy * M + ox];
                    assert!((got - want).abs() < 1e-12, "F({M},3) seed {seed} ({oy},{ox}): {got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn one_tile_in_f64_is_the_correlation() {
        one_tile_is_the_correlation::<4, 2, 16, 4>();
        one_tile_is_the_correlation::<6, 4, 36, 16>();
    }

    /// The 16-lane transforms the executor runs equal the one-tile f32 transforms.
    fn lanes_match_one_tile<const N: usize, const M: usize, const E: usize, const MM: usize>() {
        let mut d = [[[0f32; NR]; N]; N];
        let mut m = [[0f32; NR]; E];
        for r in 0..N {
            for s in 0..N {
                for j in 0..NR {
                    d[r][s][j] = val(j * 1000 + r * N + s) as f32;
                    m[r * N + s][j] = val(j * 1000 + 500 + r * N + s) as f32;
                }
            }
        }
        let mut v = [[0f32; NR]; E];
        input_tile_lanes::<N, E>(&d, |e, lanes| v[e] = *lanes);
        let y = output_tile_lanes::<N, M, E>(&m);
        for j in 0..NR {
            let dj: [f32; E] = std::array::from_fn(|i| d[i / N][i % N][j]);
            let mj: [f32; E] = std::array::from_fn(|e| m[e][j]);
            let (vj, yj) = (input_tile::<f32, N, E>(&dj), output_tile::<f32, N, M, E, MM>(&mj));
            for e in 0..E {
                assert_eq!(v[e][j], vj[e], "F({M},3) input transform lane {j} element {e}");
            }
            for i in 0..MM {
                assert_eq!(y[i / M][i % M][j], yj[i], "F({M},3) output transform lane {j} element {i}");
            }
        }
    }

    #[test]
    fn lane_transforms_match_one_tile() {
        lanes_match_one_tile::<4, 2, 16, 4>();
        lanes_match_one_tile::<6, 4, 36, 16>();
    }
}
