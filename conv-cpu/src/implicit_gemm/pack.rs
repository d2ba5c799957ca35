//! Packing slices of the virtual im2col matrix straight from the NCHW input.

use super::element::Element;
use conv_engine::geometry::Phase;
use std::ops::Range;

/// Most columns one packed block may hold (`nc ≤ 512`).
pub(super) const MAX_COLS: usize = 512;
/// Most runs a block can split into: at worst every column starts a new grid row.
const MAX_RUNS: usize = MAX_COLS;

/// Consecutive columns of one panel that lie in one grid row, so their input column
/// advances by a fixed step.
#[derive(Clone, Copy, Default)]
struct Run {
    /// Offset of the run's first column inside a packed row of the block
    /// (`panel·kc·nr + column`); add `row·nr` for reduction row `row`.
    dst: usize,
    len: usize,
    base_h: isize,
    base_w: isize,
}

/// Packs reduction rows `rows` (row `kk = c·taps + t`) × columns
/// `col_start..col_start + ncols` of `phase`'s virtual matrix into `nr`-column panels
/// (`nr` the microkernel's, a multiple of 16): panel `jr` occupies `dst[jr·kc·nr..]` with
/// `nr` floats per row. Columns past `ncols` in the last panel are zero, as are taps that
/// fall outside the input.
///
/// Rows are the outer loop so that the per-row work (channel, tap, input row) is shared by
/// every panel of the block; the common case, a whole panel inside one input row, is
/// fixed-size 16-element copies.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn pack_b<T: Element>(
    x: &[T],
    [h, w]: [usize; 2],
    phase: &Phase,
    rows: Range<usize>,
    col_start: usize,
    ncols: usize,
    nr: usize,
    dst: &mut [f32],
) {
    debug_assert!(nr % 16 == 0 && ncols <= MAX_COLS);
    let kc = rows.len();
    let ntaps = phase.taps.len();
    let step_w = phase.base_step[1];
    let plane = h * w;
    let npanels = ncols.div_ceil(nr);

    let mut runs = [Run::default(); MAX_RUNS];
    let mut n_runs = 0;
    for jr in 0..npanels {
        let first = jr * nr;
        let width = nr.min(ncols - first);
        let mut j = 0;
        while j < width {
            let lin = col_start + first + j;
            let (gi, gj) = (lin / phase.cols, lin % phase.cols);
            let len = (phase.cols - gj).min(width - j);
            runs[n_runs] = Run {
                dst: jr * kc * nr + j,
                len,
                base_h: gi as isize * phase.base_step[0] + phase.base0[0],
                base_w: gj as isize * step_w + phase.base0[1],
            };
            n_runs += 1;
            j += len;
        }
    }
    let runs = &runs[..n_runs];
    // Columns past `ncols` in the last panel stay zero for every row.
    let tail = ncols % nr;
    if tail != 0 {
        let last = (npanels - 1) * kc * nr;
        for row in 0..kc {
            dst[last + row * nr + tail..last + (row + 1) * nr].fill(0.0);
        }
    }

    let mut c = rows.start / ntaps;
    let mut t = rows.start % ntaps;
    for row in 0..kc {
        let tap = phase.taps[t];
        let channel = &x[c * plane..(c + 1) * plane];
        let row_off = row * nr;
        for run in runs {
            let d = &mut dst[run.dst + row_off..run.dst + row_off + run.len];
            let ih = run.base_h + tap.dh;
            if ih < 0 || ih >= h as isize {
                d.fill(0.0);
                continue;
            }
            let src_row = &channel[ih as usize * w..(ih as usize + 1) * w];
            let iw0 = run.base_w + tap.dw;
            if step_w == 1 {
                if run.len == nr && iw0 >= 0 && iw0 as usize + nr <= w {
                    let s = iw0 as usize;
                    for (src, d) in src_row[s..s + nr].chunks_exact(16).zip(d.chunks_exact_mut(16)) {
                        T::widen_panel(src.try_into().expect("16 elements"), d.try_into().expect("16 elements"));
                    }
                    continue;
                }
                let lo = (-iw0).clamp(0, run.len as isize) as usize;
                let hi = (w as isize - iw0).clamp(lo as isize, run.len as isize) as usize;
                d[..lo].fill(0.0);
                for (k, v) in d[lo..hi].iter_mut().enumerate() {
                    *v = src_row[(iw0 + (lo + k) as isize) as usize].to_f32();
                }
                d[hi..].fill(0.0);
            } else if step_w < 1 {
                for (k, v) in d.iter_mut().enumerate() {
                    let iw = iw0 + k as isize * step_w;
                    *v = if iw >= 0 && iw < w as isize { src_row[iw as usize].to_f32() } else { 0.0 };
                }
            } else {
                // Columns `lo..hi` read inside the row (iw0 + k·step in 0..w): one strided
                // copy without a bound check per element (a stride-2 gather the compiler
                // turns into even/odd shuffles), zeros around it.
                let step = step_w as usize;
                let lo = if iw0 < 0 { ((-iw0) as usize).div_ceil(step).min(run.len) } else { 0 };
                let hi = if iw0 >= w as isize {
                    lo
                } else {
                    ((w as isize - iw0) as usize).div_ceil(step).clamp(lo, run.len)
                };
                d[..lo].fill(0.0);
                d[hi..].fill(0.0);
                if hi > lo {
                    let s = (iw0 + (lo * step) as isize) as usize;
                    let src = &src_row[s..s + (hi - lo - 1) * step + 1];
                    if step == 2 {
                        let pairs = src.len() / 2;
                        for (v, p) in d[lo..lo + pairs].iter_mut().zip(src.chunks_exact(2)) {
                            *v = p[0].to_f32();
                        }
                        if src.len() % 2 == 1 {
                            d[hi - 1] = src[src.len() - 1].to_f32();
                        }
                    } else {
                        for (v, x) in d[lo..hi].iter_mut().zip(src.iter().step_by(step)) {
                            *v = x.to_f32();
                        }
                    }
                }
            }
        }
        t += 1;
        if t == ntaps {
            t = 0;
            c += 1;
        }
    }
}
