//! Shedding a parked run: the feature maps that a short chain of convolutions rebuilds
//! from a map the run keeps anyway are dropped while the run waits between SE passes, and
//! rebuilt just before their next reader.
//!
//! Why: in Real-CUGAN 2x the skip map of the second U-Net (64 channels at twice the input
//! size, `convrelu_8`'s output) is live from the second SE stop to the last layers. Per
//! 640x540 f16 tile it is 188 of the 276 MiB a parked state holds there, and two
//! convolutions (about 10% of the tile's FLOPs) rebuild it from the 3-channel map the state
//! keeps for the final add. Under the CLI's 2 GiB budget the six unshed states do not fit
//! beside a running tile, and three tile runs were recomputed from the input (H200,
//! 2026-12-05). Replaying a chain runs the same kernels on the same input, so the rebuilt
//! map is the same bit for bit.
//!
//! Which maps: at each pooling layer, a live image blob whose producers, followed back
//! through convolutions, splits and crops, reach a blob that is live there too and stays
//! live until the shed blob's next reader; whose storage no other live blob shares (or
//! nothing would be freed); and that frees more bytes per FLOP of replay than the whole
//! state does per FLOP of recomputing it from the input (the alternative a tight budget
//! leaves), measured on a nominal input.

use std::collections::HashSet;

use super::analysis::Shape;
use super::exec::{Run, Value};
use super::graph::{Graph, NodeKind};
use super::{Network, err};
use crate::Error;

/// How to rebuild one shed blob.
#[derive(Clone, Debug)]
pub(super) struct Replay {
    /// The blob dropped.
    pub blob: usize,
    /// A blob the run keeps until the shed blob's next reader, holding the chain's input.
    pub source: usize,
    /// The convolution and crop nodes that rebuild `blob` from `source`, in order.
    pub nodes: Vec<usize>,
}

/// What the graph's blobs share: `storage[b]` is the blob whose allocation `b` lives in
/// (splits and crops share their input's), `value[b]` the blob whose value `b` is (a
/// split's outputs are its input), `view[b]` whether `b` is a crop's strided view (through
/// splits too).
pub(super) struct Aliases {
    pub storage: Vec<usize>,
    pub value: Vec<usize>,
    pub view: Vec<bool>,
}

impl Graph {
    pub(super) fn aliases(&self) -> Aliases {
        let mut storage: Vec<usize> = (0..self.blobs.len()).collect();
        let mut value = storage.clone();
        let mut view = vec![false; self.blobs.len()];
        for node in &self.nodes {
            for &t in &node.tops {
                match node.kind {
                    NodeKind::Split => {
                        storage[t] = storage[node.bottoms[0]];
                        value[t] = value[node.bottoms[0]];
                        view[t] = view[node.bottoms[0]];
                    }
                    NodeKind::Crop(_) => {
                        storage[t] = storage[node.bottoms[0]];
                        view[t] = true;
                    }
                    _ => {}
                }
            }
        }
        Aliases { storage, value, view }
    }

    /// Every shed candidate at each pooling layer (in pooling order), before the
    /// bytes-per-FLOP test of [`Network::select_replays`].
    fn replay_candidates(&self) -> Vec<Vec<Replay>> {
        let aliases = self.aliases();
        let mut producer = vec![None; self.blobs.len()];
        let mut last_reader = vec![0usize; self.blobs.len()];
        for (i, node) in self.nodes.iter().enumerate() {
            for &t in &node.tops {
                producer[t] = Some(i);
            }
            for &b in &node.bottoms {
                last_reader[b] = i;
            }
        }
        let next_reader = |b: usize, after: usize| {
            self.nodes.iter().enumerate().skip(after + 1).find(|(_, n)| n.bottoms.contains(&b)).map(|(i, _)| i)
        };
        let mut live: HashSet<usize> = HashSet::from([self.input]);
        let mut out = Vec::new();
        for (at, node) in self.nodes.iter().enumerate() {
            if let NodeKind::Pool(_) = node.kind {
                let mut here = Vec::new();
                for &b in &live {
                    let Some(reader) = next_reader(b, at) else { continue };
                    let sharing = live.iter().filter(|&&o| aliases.storage[o] == aliases.storage[b]).count();
                    if sharing != 1 {
                        continue;
                    }
                    // Back through the producers to a value the run still holds at `reader`.
                    let (mut cur, mut nodes) = (b, Vec::new());
                    let source = loop {
                        let Some(p) = producer[cur] else { break None };
                        let pn = &self.nodes[p];
                        match pn.kind {
                            NodeKind::Split => {}
                            NodeKind::Conv(_) | NodeKind::Crop(_) => nodes.push(p),
                            _ => break None,
                        }
                        cur = pn.bottoms[0];
                        let kept = live
                            .iter()
                            .copied()
                            .filter(|&s| aliases.storage[s] != aliases.storage[b])
                            .filter(|&s| aliases.value[s] == aliases.value[cur] && last_reader[s] >= reader)
                            .max_by_key(|&s| last_reader[s]);
                        if let Some(s) = kept {
                            break Some(s);
                        }
                    };
                    let convs = nodes.iter().filter(|&&n| matches!(self.nodes[n].kind, NodeKind::Conv(_))).count();
                    if let Some(source) = source
                        && convs > 0
                    {
                        nodes.reverse();
                        here.push(Replay { blob: b, source, nodes });
                    }
                }
                here.sort_by_key(|r| r.blob);
                out.push(here);
            }
            for &t in &node.tops {
                live.insert(t);
            }
            for b in &node.frees {
                live.remove(b);
            }
        }
        out
    }
}

impl Network {
    /// The replays worth shedding at each pooling layer: [`Graph::replay_candidates`] that
    /// free more bytes per FLOP of replay than the pool's whole state does per FLOP of
    /// recomputing it, on a nominal 256x256 input (both scale with the area).
    pub(super) fn select_replays(&self) -> Result<Vec<Vec<Replay>>, Error> {
        let side = 256usize.div_ceil(self.graph.align) * self.graph.align;
        let shapes = self.shapes(side, side)?;
        let elem = self.dtype.size_in_bytes();
        let storage = self.graph.aliases().storage;
        let bytes = |b: usize| match shapes[storage[b]] {
            Some(Shape::Image { c, h, w }) => (c * h * w * elem) as f64,
            _ => 0.0,
        };
        let conv_flops = |n: usize| match (&self.graph.nodes[n].kind, shapes[self.graph.nodes[n].bottoms[0]]) {
            (NodeKind::Conv(c), Some(Shape::Image { c: ic, h, w })) => c.flops(&[1, ic, h, w], self.dtype),
            _ => 0,
        };
        let points = self.walk(side, side, None)?.pools;
        let candidates = self.graph.replay_candidates();
        let mut chosen: Vec<Vec<Replay>> = candidates
            .into_iter()
            .zip(points)
            .map(|(here, point)| {
                let state_rate = point.state_bytes as f64 / point.flops_before.max(1) as f64;
                here.into_iter()
                    .filter(|r| {
                        let replay: u64 = r.nodes.iter().map(|&n| conv_flops(n)).sum();
                        bytes(r.blob) / replay.max(1) as f64 > state_rate
                    })
                    .collect()
            })
            .collect();
        // A source must be there when its map is rebuilt: none is itself shed.
        loop {
            let shed: HashSet<usize> = chosen.iter().flatten().map(|r| r.blob).collect();
            let before: usize = chosen.iter().map(Vec::len).sum();
            for here in &mut chosen {
                here.retain(|r| !shed.contains(&r.source));
            }
            if chosen.iter().map(Vec::len).sum::<usize>() == before {
                return Ok(chosen);
            }
        }
    }

    /// Drops from `run`, stopped at a pooling layer, the maps [`Self::select_replays`]
    /// chose there (rebuilt by [`Self::advance`] before their next reader). Returns how
    /// many were dropped.
    pub fn shed(&self, run: &mut Run) -> Result<usize, Error> {
        let Some(NodeKind::Pool(p)) = self.graph.nodes.get(run.next).map(|n| &n.kind) else {
            return Err(err("a run is shed only where it stopped at a pooling layer"));
        };
        let mut dropped = 0;
        for (i, r) in self.replays[*p].iter().enumerate() {
            if run.values[r.blob].take().is_some() {
                run.shed.push((*p, i));
                dropped += 1;
            }
        }
        Ok(dropped)
    }

    /// Rebuilds the shed maps that node `at` reads.
    pub(super) fn rebuild(&self, run: &mut Run, at: usize) -> Result<(), Error> {
        let node = &self.graph.nodes[at];
        while let Some(k) = run.shed.iter().position(|&(p, i)| node.bottoms.contains(&self.replays[p][i].blob)) {
            let (p, i) = run.shed.swap_remove(k);
            let r = &self.replays[p][i];
            let mut x = match run.values[r.source].as_ref() {
                Some(Value::Image(t)) => t.clone(),
                _ => {
                    return Err(err(format!(
                        "the map '{}' was shed and its source is gone",
                        self.graph.blobs[r.blob].name
                    )));
                }
            };
            for &n in &r.nodes {
                let step = &self.graph.nodes[n];
                x = match &step.kind {
                    NodeKind::Conv(c) => self.conv(c, &x, step, self.profiling().then(std::time::Instant::now))?,
                    NodeKind::Crop(crop) => self.crop(&x, crop)?,
                    _ => return Err(err(format!("layer '{}' cannot be replayed", step.name))),
                };
            }
            run.values[r.blob] = Some(Value::Image(x));
        }
        Ok(())
    }
}
