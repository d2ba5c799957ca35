//! `--tile auto`: the tile side that finishes soonest within the memory budget.
//!
//! The largest tile that fits is not always the fastest. The SE passes stop every tile at
//! each pooling layer; a tile whose state does not fit beside the next tile's run is
//! recomputed from its input in the next pass. With the budget spent on one large tile,
//! nothing is kept: at 1080p f32 under 2 GiB, six tiles recomputed 16 runs and took 2.7x
//! the whole-image time on the H200. So the planner prices each candidate side by the
//! convolution FLOPs its passes will run — the halo of more tiles against the
//! recomputation of states that do not fit — and takes the cheapest. A parked state may
//! also be shed (`Network::shed`: maps a short conv chain rebuilds are dropped), which
//! fits more states for the FLOPs of the rebuilds; the pricing takes whichever is cheaper.

use crate::Error;
use crate::net::PoolPoint;

/// One candidate tile grid and what its runs do.
pub(crate) struct Candidate {
    pub tiles: usize,
    /// Convolution FLOPs of one tile's full run.
    pub flops: u64,
    /// The tile's stops at the pooling layers.
    pub pools: Vec<PoolPoint>,
    /// FLOPs one tile's run spends rebuilding its maps when its parked states are shed
    /// (`Network::replay_flops`).
    pub replay_flops: u64,
}

/// FLOPs of all passes over `c.tiles` tiles when `cache_bytes` holds the states that fit
/// (the upscaler keeps states first come, first served; the tile a pass ends with always
/// goes on, as the next pass's first, so the cache holds the other tiles' states). With
/// `shed`, every parked state is shed (`Network::shed`): smaller states, and each tile
/// rebuilds its shed maps once.
pub(crate) fn pass_flops(c: &Candidate, cache_bytes: usize, shed: bool) -> u64 {
    let n = c.tiles as u64;
    let mut total = if shed && n > 1 { n * c.replay_flops } else { 0 };
    let mut start: Option<&PoolPoint> = None;
    for k in 0..=c.pools.len() {
        let end = c.pools.get(k).map_or(c.flops, |p| p.flops_before);
        let kept = match start {
            None => 0,
            Some(p) => {
                let state = if shed { p.shed_bytes } else { p.state_bytes };
                (cache_bytes / state.max(1)).min(c.tiles - 1) as u64 + 1
            }
        };
        let resumed_from = start.map_or(0, |p| p.flops_before);
        total += kept * (end - resumed_from) + (n - kept) * end;
        start = c.pools.get(k);
    }
    total
}

/// Whether shedding the parked states makes the passes cheaper.
pub(crate) fn prefer_shed(c: &Candidate, cache_bytes: usize) -> bool {
    pass_flops(c, cache_bytes, true) < pass_flops(c, cache_bytes, false)
}

/// The candidate sides (multiples of `unit`, up to `max_side`) worth pricing: for each
/// tile count along the longer side, the smallest side that gives it.
pub(crate) fn candidate_sides(longest: usize, max_side: usize, unit: usize) -> Vec<usize> {
    let mut sides: Vec<usize> = (1..=longest.div_ceil(unit))
        .map(|count| longest.div_ceil(count).div_ceil(unit) * unit)
        .filter(|&s| s <= max_side)
        .collect();
    sides.dedup();
    // At most 48 counts priced (a candidate costs two walks over the graph).
    sides.truncate(48);
    sides
}

/// What one tile run of one pass costs on a GPU besides its convolutions, in FLOPs of
/// convolution the same time would do: the launches of a small map that leave the GPU
/// part idle, the read-back at each SE stop, the allocator's work. H200 sweep of
/// 2026-12-04 (scripts/gpu-tile-sweep.sh, docs/measurements/2026-12-04-h200-tiles.md):
/// 1080p f16 in 24 tiles (120 runs) took 35 ms more than in 8 (40 runs), 7 ms of it the
/// larger halo: about 0.35 ms per run, at the 54 TFLOP/s the whole image's kernels run
/// (3242 GFLOP in 60 ms) 19 GFLOP in f16/bf16; f32 runs at 14 TFLOP/s there, 5 GFLOP.
/// Unmeasured on AMD GPUs; the CPU's runs are long enough for it not to matter (0).
pub(crate) fn gpu_run_overhead_flops(half: bool) -> u64 {
    if half { 19_000_000_000 } else { 5_000_000_000 }
}

/// The cheapest candidate by [`pass_flops`] (shed or not, whichever is cheaper) plus `run_overhead` FLOPs per tile run (every
/// tile runs once per pass); on a tie, the larger side (fewer tiles).
pub(crate) fn cheapest(
    sides: &[usize],
    run_overhead: u64,
    mut price: impl FnMut(usize) -> Result<(Candidate, usize), Error>,
) -> Result<usize, Error> {
    let mut best: Option<(u64, usize)> = None;
    for &side in sides {
        let (c, cache_bytes) = price(side)?;
        let runs = (c.tiles * (c.pools.len() + 1)) as u64;
        let shed = prefer_shed(&c, cache_bytes);
        let cost = pass_flops(&c, cache_bytes, shed) + runs * run_overhead;
        if best.is_none_or(|(b, s)| cost < b || (cost == b && side > s)) {
            best = Some((cost, side));
        }
    }
    best.map(|(_, s)| s).ok_or_else(|| Error::Internal("no tile side to choose from".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(flops_before: u64, state_bytes: usize) -> PoolPoint {
        PoolPoint { flops_before, state_bytes, shed_bytes: state_bytes }
    }

    #[test]
    fn kept_states_resume_and_the_rest_recompute() {
        // Two pools at 30 and 60 of 100 FLOPs, states of 10 bytes, 4 tiles.
        let c = Candidate { tiles: 4, flops: 100, pools: vec![point(30, 10), point(60, 10)], replay_flops: 0 };
        // No cache: only the tile each pass ends with goes on; the other three recompute
        // from the input: 4·30 + (1·30 + 3·60) + (1·40 + 3·100).
        assert_eq!(pass_flops(&c, 0, false), 120 + 210 + 340);
        // Every state kept (three parked, the last going on): every tile runs once: 4·100.
        assert_eq!(pass_flops(&c, 30, false), 400);
        // Two parked and the last: 4·30 + (3·30 + 1·60) + (3·40 + 1·100).
        assert_eq!(pass_flops(&c, 25, false), 120 + 150 + 220);
        // One tile always goes on, whatever the cache.
        let one = Candidate { tiles: 1, ..c };
        assert_eq!(pass_flops(&one, 0, false), 100);
    }

    #[test]
    fn shed_states_fit_where_whole_ones_do_not() {
        // States of 10 bytes, 4 bytes shed; 4 tiles, cache of 12 bytes: one whole state
        // fits (plus the last tile going on), all three shed ones do.
        let pools = vec![PoolPoint { flops_before: 30, state_bytes: 10, shed_bytes: 4 }];
        let c = Candidate { tiles: 4, flops: 100, pools, replay_flops: 5 };
        // Whole: 4·30 + (2·70 + 2·100); shed: 4·5 + 4·30 + 4·70.
        assert_eq!(pass_flops(&c, 12, false), 120 + 140 + 200);
        assert_eq!(pass_flops(&c, 12, true), 20 + 120 + 280);
        assert!(prefer_shed(&c, 12));
        // With room for every whole state, shedding only adds the rebuilds.
        assert!(!prefer_shed(&c, 30));
        // A single tile is never parked: nothing to rebuild.
        assert_eq!(pass_flops(&Candidate { tiles: 1, ..c }, 0, true), 100);
    }

    #[test]
    fn sides_cover_each_tile_count_once() {
        let sides = candidate_sides(100, 100, 4);
        assert_eq!(sides[0], 100);
        assert!(sides.windows(2).all(|w| w[0] > w[1]), "{sides:?}");
        assert!(sides.iter().all(|s| s % 4 == 0));
        assert_eq!(candidate_sides(100, 40, 4)[0], 36); // 100 in 3 → 34, rounded up to 36
    }

    #[test]
    fn the_cheapest_side_wins_and_ties_go_to_the_larger() {
        let price = |side: usize| -> Result<(Candidate, usize), Error> {
            let tiles = 64 / side;
            let c = Candidate { tiles, flops: 10 + side as u64, pools: vec![point(5, 100)], replay_flops: 0 };
            Ok((c, if side == 16 { 1000 } else { 0 }))
        };
        // side 32 (the last tile goes on): 2·5 + 1·37 + 1·42 = 89; side 16 (all kept):
        // 4·5 + 4·21 = 104; side 8: 8·5 + 1·13 + 7·18 = 179.
        assert_eq!(cheapest(&[32, 16, 8], 0, price).unwrap(), 32);
        let flat = |side: usize| -> Result<(Candidate, usize), Error> {
            Ok((Candidate { tiles: 64 / side, flops: 10, pools: vec![], replay_flops: 0 }, 0))
        };
        // 2·10 = 20 against 4·10 = 40: fewer tiles; equal cost keeps the first (larger) side.
        assert_eq!(cheapest(&[32, 16], 0, flat).unwrap(), 32);
        let same = |_side: usize| -> Result<(Candidate, usize), Error> {
            Ok((Candidate { tiles: 2, flops: 10, pools: vec![], replay_flops: 0 }, 0))
        };
        assert_eq!(cheapest(&[16, 32], 0, same).unwrap(), 32);
    }

    /// A per-run overhead moves the choice to fewer, larger tiles once it outweighs the
    /// recomputation they bring.
    #[test]
    fn the_run_overhead_favours_fewer_tiles() {
        // Side 16: 4 tiles, everything kept: 4·100 = 400 FLOPs in 8 runs. Side 32: 2 tiles,
        // nothing parked (the last goes on): 2·50 + 1·150 + 1·200 = 450 FLOPs in 4 runs.
        let price = |side: usize| -> Result<(Candidate, usize), Error> {
            let (tiles, flops, cache) = if side == 16 { (4, 100, 1 << 20) } else { (2, 200, 0) };
            Ok((Candidate { tiles, flops, pools: vec![point(flops / 4, 10)], replay_flops: 0 }, cache))
        };
        assert_eq!(cheapest(&[32, 16], 0, price).unwrap(), 16);
        // 400 + 8·30 = 640 against 450 + 4·30 = 570.
        assert_eq!(cheapest(&[32, 16], 30, price).unwrap(), 32);
        assert_eq!(cheapest(&[32, 16], 10, price).unwrap(), 16); // 480 against 490
    }
}
