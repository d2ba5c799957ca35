//! The attention products on the CPU in f32: `softmax(scale · q kᵀ) v` query chunk by query
//! chunk into one output buffer, with one score buffer reused by every chunk.
//!
//! Why not the tensor ops: each chunk of the generic path allocates its scores five times
//! over (the product, its scale, `x - max`, its exp, the division), and a fresh buffer of
//! that size is first-touch page faults. The 4096² decode on 2 Zen 4 cores (a 512² latent,
//! 262144 tokens, 1024 chunks of 256 MiB) took 298 million minor faults and 844 s of
//! system time in the mid block before it was stopped (2026-12-07). Here the scores live in
//! one buffer, the scale rides on the product (the gemm crate's `beta`), the softmax runs
//! in place and each chunk's output is written where it belongs (no concatenation).

use crate::error::{Error, Result};
use rayon::prelude::*;

/// Query rows per matrix product: every product has exactly this many (the last block is
/// padded), because the gemm crate picks its kernel, and with it the order of a dot
/// product's sums, from the shape: with 3 or 8 rows a call rounded differently from one
/// with 50 (2026-12-07, a 50-token test). A fixed shape makes each query's row the same
/// bits whatever the chunk, and so whatever the memory budget that set it.
pub const ROW_BLOCK: usize = 128;

/// Query rows per chunk of `t` tokens within `max_score_bytes` of f32 scores: a multiple of
/// [`ROW_BLOCK`], at least one block (so the scores take at least `ROW_BLOCK × t × 4`
/// bytes, however small the cap).
pub fn chunk_rows(t: usize, max_score_bytes: usize) -> usize {
    (max_score_bytes / (4 * t).max(1) / ROW_BLOCK).max(1) * ROW_BLOCK
}

/// Bytes [`attend_f32`] allocates for `t` tokens of `c` channels in chunks of `chunk` rows
/// (a multiple of [`ROW_BLOCK`]): the scores, and the padded last block's queries and
/// output when `t` is not a multiple of the block.
pub fn scratch_bytes(t: usize, c: usize, chunk: usize) -> usize {
    let pad = if t.is_multiple_of(ROW_BLOCK) { 0 } else { 2 * ROW_BLOCK * c * 4 };
    chunk.min(t.next_multiple_of(ROW_BLOCK)) * t * 4 + pad
}

/// `out[t × c] = softmax(scale · q kᵀ) v` for row-major `q`, `k`, `v`, `out` of `t × c`,
/// `chunk` queries at a time (a multiple of [`ROW_BLOCK`]: [`chunk_rows`]), on `threads`
/// threads. The result does not depend on `chunk` or `threads`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend_f32(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    (t, c): (usize, usize),
    scale: f32,
    chunk: usize,
    threads: usize,
    out: &mut [f32],
) -> Result<()> {
    let n = t.checked_mul(c).ok_or_else(|| Error::op("attention", format!("{t} x {c} overflows")))?;
    if [q.len(), k.len(), v.len(), out.len()] != [n; 4] {
        return Err(Error::op(
            "attention",
            format!("q, k, v, out of {}, {}, {}, {} elements for {t} x {c}", q.len(), k.len(), v.len(), out.len()),
        ));
    }
    if chunk == 0 || !chunk.is_multiple_of(ROW_BLOCK) {
        return Err(Error::op("attention", format!("a chunk of {chunk} rows is not a multiple of {ROW_BLOCK}")));
    }
    if t == 0 || c == 0 {
        return Ok(());
    }
    let chunk = chunk.min(t.next_multiple_of(ROW_BLOCK));
    let mut scores = vec![0f32; chunk * t];
    // The last block's queries and output, padded to ROW_BLOCK rows (zero queries: their
    // rows are a uniform softmax, finite, and thrown away).
    let tail = t % ROW_BLOCK;
    let (q_tail, mut out_tail) = if tail == 0 {
        (vec![], vec![])
    } else {
        let mut qt = vec![0f32; ROW_BLOCK * c];
        qt[..tail * c].copy_from_slice(&q[(t - tail) * c..]);
        (qt, vec![0f32; ROW_BLOCK * c])
    };
    let parallelism = if threads > 1 { gemm::Parallelism::Rayon(threads) } else { gemm::Parallelism::None };
    for start in (0..t).step_by(chunk) {
        let blocks = chunk.min(t.next_multiple_of(ROW_BLOCK) - start) / ROW_BLOCK;
        for b in 0..blocks {
            let row = start + b * ROW_BLOCK;
            let qb = if row + ROW_BLOCK <= t { &q[row * c..(row + ROW_BLOCK) * c] } else { &q_tail[..] };
            let s = &mut scores[b * ROW_BLOCK * t..(b + 1) * ROW_BLOCK * t];
            // SAFETY: qb holds ROW_BLOCK rows of c (stride c), k all t rows read as kᵀ
            // (column stride c, row stride 1), s ROW_BLOCK rows of t (stride t), written by
            // this call alone.
            unsafe { product(s, t, qb, c, (k, c as isize, 1), scale, parallelism) };
        }
        let s = &mut scores[..blocks * ROW_BLOCK * t];
        s.par_chunks_mut(t).for_each(softmax_in_place);
        for b in 0..blocks {
            let row = start + b * ROW_BLOCK;
            let ob = if row + ROW_BLOCK <= t { &mut out[row * c..(row + ROW_BLOCK) * c] } else { &mut out_tail[..] };
            // SAFETY: ROW_BLOCK rows of probabilities (stride t), all t rows of v (stride
            // c), ROW_BLOCK rows of output (stride c), written by this call alone.
            unsafe { product(ob, c, &s[b * ROW_BLOCK * t..], t, (v, 1, c as isize), 1.0, parallelism) };
        }
    }
    if tail != 0 {
        out[(t - tail) * c..].copy_from_slice(&out_tail[..tail * c]);
    }
    Ok(())
}

/// `dst[ROW_BLOCK × n] = beta · lhs[ROW_BLOCK × k] · rhs[k × n]`: `dst` and `lhs` row-major
/// (row strides `n` and `k`), `rhs` with its column and row strides.
///
/// # Safety
/// `dst` holds `ROW_BLOCK × n` and `lhs` `ROW_BLOCK × k` elements, and `rhs` every element
/// its strides address for `k × n`.
unsafe fn product(
    dst: &mut [f32],
    n: usize,
    lhs: &[f32],
    k: usize,
    (rhs, rhs_cs, rhs_rs): (&[f32], isize, isize),
    beta: f32,
    parallelism: gemm::Parallelism,
) {
    debug_assert!(dst.len() >= ROW_BLOCK * n && lhs.len() >= ROW_BLOCK * k);
    unsafe {
        gemm::gemm::<f32>(
            ROW_BLOCK,
            n,
            k,
            dst.as_mut_ptr(),
            1,
            n as isize,
            false,
            lhs.as_ptr(),
            1,
            k as isize,
            rhs.as_ptr(),
            rhs_cs,
            rhs_rs,
            0.0,
            beta,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// `row = exp(row - max) / Σ exp(row - max)`, the sum in order.
fn softmax_in_place(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f32;
    for x in row.iter_mut() {
        *x = (*x - max).exp();
        sum += *x;
    }
    row.iter_mut().for_each(|x| *x /= sum);
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// softmax(scale q kᵀ) v in f64.
    fn reference(q: &[f32], k: &[f32], v: &[f32], t: usize, c: usize, scale: f64) -> Vec<f64> {
        let mut out = vec![0f64; t * c];
        for i in 0..t {
            let s: Vec<f64> = (0..t)
                .map(|j| scale * (0..c).map(|x| q[i * c + x] as f64 * k[j * c + x] as f64).sum::<f64>())
                .collect();
            let max = s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let e: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let sum: f64 = e.iter().sum();
            for x in 0..c {
                out[i * c + x] = (0..t).map(|j| e[j] / sum * v[j * c + x] as f64).sum();
            }
        }
        out
    }

    #[test]
    fn matches_the_f64_reference_and_does_not_depend_on_the_chunk() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        // Tokens below, at and past one and two row blocks.
        for (t, c) in [(1, 1), (7, 3), (50, 16), (128, 8), (131, 40), (300, 24)] {
            let mut r = |n: usize| (0..n).map(|_| rng.random_range(-2.0f32..2.0)).collect::<Vec<_>>();
            let (q, k, v) = (r(t * c), r(t * c), r(t * c));
            let scale = 1.0 / (c as f32).sqrt();
            let want = reference(&q, &k, &v, t, c, scale as f64);
            let mut first: Option<Vec<f32>> = None;
            for (blocks, threads) in [(1, 1), (1, 2), (2, 1), (3, 2), (64, 2)] {
                let chunk = blocks * ROW_BLOCK;
                // Poisoned: an element the kernel does not write fails.
                let mut out = vec![f32::NAN; t * c];
                attend_f32(&q, &k, &v, (t, c), scale, chunk, threads, &mut out).unwrap();
                for (i, (&got, &w)) in out.iter().zip(&want).enumerate() {
                    assert!(
                        (got as f64 - w).abs() <= 1e-5 * (1.0 + w.abs()),
                        "{t}x{c} chunk {chunk}: element {i} is {got}, the f64 reference {w}"
                    );
                }
                match &first {
                    None => first = Some(out),
                    Some(f) => assert!(f == &out, "{t}x{c}: chunk {chunk} on {threads} threads changed the bits"),
                }
            }
        }
    }

    #[test]
    fn wrong_lengths_are_errors() {
        let x = vec![0f32; 6];
        let mut out = vec![0f32; 5];
        let e = attend_f32(&x, &x, &x, (2, 3), 1.0, ROW_BLOCK, 1, &mut out).unwrap_err().to_string();
        assert!(e.contains("6, 6, 6, 5 elements for 2 x 3"), "{e}");
        let mut out = vec![0f32; 6];
        let e = attend_f32(&x, &x, &x, (2, 3), 1.0, 100, 1, &mut out).unwrap_err().to_string();
        assert!(e.contains("not a multiple of 128"), "{e}");
    }

    #[test]
    fn chunks_are_whole_row_blocks_within_the_cap_but_one_at_least() {
        assert_eq!(chunk_rows(262144, 256 << 20), 256);
        assert_eq!(chunk_rows(262144, 1 << 20), ROW_BLOCK);
        assert_eq!(chunk_rows(16, 1 << 30) % ROW_BLOCK, 0);
        assert_eq!(scratch_bytes(262144, 512, 256), 256 << 20);
        assert_eq!(scratch_bytes(50, 16, 1024), 128 * 50 * 4 + 2 * 128 * 16 * 4);
    }
}
