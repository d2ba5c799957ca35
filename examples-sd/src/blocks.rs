//! The blocks the encoder and the decoder share: the resnet (GroupNorm + SiLU, conv, with
//! the residual fused into the second conv's epilogue), the mid-block attention, and the
//! f16 overflow guard that runs a network block by block ([`crate::precision`]).

use crate::config::NORM_EPS;
use crate::error::{Result, SdError};
use crate::layout::{KeyLayout, KeyStyle};
use crate::ops;
use crate::precision::{self, SharedStats, all_finite};
use rocm_vision::nn::{Conv2d, GroupNorm, Linear, SpatialAttention};
use rocm_vision::{Conv2dParams, DType, GroupStats, Tensor, Weights};

/// diffusers' `ResnetBlock2D` (no time embedding, SiLU, output scale 1).
#[derive(Clone, Debug)]
pub(crate) struct Resnet {
    pub norm1: GroupNorm,
    pub conv1: Conv2d,
    pub norm2: GroupNorm,
    pub conv2: Conv2d,
    pub shortcut: Option<Conv2d>,
    /// Run the shortcut before conv1 (it narrows the channels, so the input dies sooner).
    shortcut_first: bool,
    /// Normalise with exact statistics ([`norm_silu`]).
    pub exact_norms: bool,
}

/// `silu(norm(x))`, with the statistics from exact sums when `exact` (and `x` is one
/// image): the same bits as a banded decode's bands normalised with the whole map's
/// statistics ([`crate::banded`]). Else the library's own group norm (its own statistics,
/// in f32 on a GPU).
pub(crate) fn norm_silu(norm: &GroupNorm, x: &Tensor, exact: bool) -> Result<Tensor> {
    if exact && x.dims().first() == Some(&1) {
        return Ok(norm.forward_silu_with_stats(x, &GroupStats::of(x, norm.groups)?)?);
    }
    Ok(norm.forward_silu(x)?)
}

impl Resnet {
    pub fn load(w: &Weights, layout: &KeyLayout, key: &str, cin: usize, cout: usize, groups: usize) -> Result<Resnet> {
        let conv3 = Conv2dParams::default().with_padding(1);
        let p = |s: &str| w.pp(format!("{key}.{s}"));
        let shortcut = if cin != cout {
            Some(Conv2d::load(&p(layout.shortcut()), cin, cout, 1, Conv2dParams::default())?)
        } else {
            None
        };
        Ok(Resnet {
            norm1: GroupNorm::load(&p("norm1"), groups, cin, NORM_EPS)?,
            conv1: Conv2d::load(&p("conv1"), cin, cout, 3, conv3)?,
            norm2: GroupNorm::load(&p("norm2"), groups, cout, NORM_EPS)?,
            conv2: Conv2d::load(&p("conv2"), cout, cout, 3, conv3)?,
            shortcut,
            shortcut_first: cout <= cin,
            exact_norms: false,
        })
    }

    pub fn forward(&self, x: Tensor) -> Result<Tensor> {
        let mut h = norm_silu(&self.norm1, &x, self.exact_norms)?;
        let mut input = Some(x);
        let mut skip = None;
        if let (Some(sc), true) = (&self.shortcut, self.shortcut_first) {
            let x = input.take().expect("input not yet consumed");
            skip = Some(sc.forward(&x)?);
        }
        h = self.conv1.forward(&h)?;
        h = norm_silu(&self.norm2, &h, self.exact_norms)?;
        // Without a widening shortcut the residual exists before conv2, which adds it as it
        // writes its output (no second pass over memory).
        let skip = match (skip, input.take(), &self.shortcut) {
            (Some(s), _, _) => s,
            (None, Some(x), None) => x,
            (None, Some(x), Some(sc)) => {
                // A widening shortcut (the encoder's) runs after conv2, so the narrower
                // input is all that is alive beside conv2's operands; conv2's input dies
                // before the shortcut's output exists.
                let y = self.conv2.forward(&h)?;
                drop(h);
                return ops::add_assign(y, &sc.forward(&x)?);
            }
            (None, None, _) => return Err(SdError::Output("resnet: residual lost (internal error)".into())),
        };
        Ok(self.conv2.forward_fused(&h, Some(&skip), 1.0)?)
    }

    /// The same block with its weights in `dtype` (copies).
    pub fn to_dtype(&self, dtype: DType) -> Result<Resnet> {
        Ok(Resnet {
            norm1: precision::norm_in(&self.norm1, dtype)?,
            conv1: precision::conv_in(&self.conv1, dtype)?,
            norm2: precision::norm_in(&self.norm2, dtype)?,
            conv2: precision::conv_in(&self.conv2, dtype)?,
            shortcut: self.shortcut.as_ref().map(|c| precision::conv_in(c, dtype)).transpose()?,
            shortcut_first: self.shortcut_first,
            exact_norms: self.exact_norms,
        })
    }
}

/// The mid-block attention under `key` (`layout.attention_of(part)`): one head over `c`
/// channels; the original layout's 1x1 convs become linear layers.
pub(crate) fn load_attention(
    w: &Weights,
    layout: &KeyLayout,
    key: &str,
    c: usize,
    groups: usize,
) -> Result<SpatialAttention> {
    let a = w.pp(key);
    let [norm, q, k, v, out] = layout.attention_parts();
    let linear = |name: &str| -> Result<Linear> {
        let p = a.pp(name);
        let weight = match layout.style {
            KeyStyle::Diffusers => p.get("weight", &[c, c])?,
            // The original layout stores these as 1x1 convs.
            KeyStyle::Original => match p.info("weight").map(|(s, _)| s) {
                Some(s) if s == [c, c] => p.get("weight", &[c, c])?,
                _ => p.get("weight", &[c, c, 1, 1])?.reshape(&[c, c])?,
            },
        };
        let bias = if p.contains("bias") { Some(p.get("bias", &[c])?) } else { None };
        Ok(Linear::new(weight, bias))
    };
    Ok(SpatialAttention {
        norm: GroupNorm::load(&a.pp(norm), groups, c, NORM_EPS)?,
        q: linear(q)?,
        k: linear(k)?,
        v: linear(v)?,
        out: linear(out)?,
        max_score_bytes: SpatialAttention::DEFAULT_MAX_SCORE_BYTES,
    })
}

/// One block of a network, as the f16 overflow guard checks and reruns them.
#[derive(Clone, Copy)]
pub(crate) enum Block<'a> {
    Conv(&'a Conv2d),
    Resnet(&'a Resnet),
    Attention(&'a SpatialAttention),
    /// Nearest-2x upsample + 3x3 conv, in bands of at most this many bytes of upsampled rows.
    Upsample(&'a Conv2d, usize),
    /// GroupNorm + SiLU + conv (a network's output layers); exact statistics when set.
    NormConv(&'a GroupNorm, &'a Conv2d, bool),
}

impl Block<'_> {
    /// Runs the block on `x` with activations and weights in `dtype` (the weights, stored in
    /// `stored`, converted for this call when that differs).
    fn run(self, x: Tensor, dtype: DType, stored: DType) -> Result<Tensor> {
        let conv = |c: &Conv2d| precision::conv_in(c, dtype);
        let same = dtype == stored;
        Ok(match self {
            Block::Conv(c) if same => c.forward(&x)?,
            Block::Conv(c) => conv(c)?.forward(&x)?,
            Block::Resnet(r) if same => r.forward(x)?,
            Block::Resnet(r) => r.to_dtype(dtype)?.forward(x)?,
            Block::Attention(a) if same => a.forward(&x)?,
            Block::Attention(a) => precision::attention_in(a, dtype)?.forward(&x)?,
            Block::Upsample(c, band) if same => ops::upsample2x_conv3x3(&x, c, band)?,
            Block::Upsample(c, band) => ops::upsample2x_conv3x3(&x, &conv(c)?, band)?,
            Block::NormConv(n, c, exact) if same => c.forward(&norm_silu(n, &x, exact)?)?,
            Block::NormConv(n, c, exact) => conv(c)?.forward(&norm_silu(&precision::norm_in(n, dtype)?, &x, exact)?)?,
        })
    }
}

/// Runs a network's blocks in its dtype, with the f16 overflow guard when it is on.
pub(crate) struct Guard<'a> {
    /// The network's dtype (its weights are stored in it).
    pub dtype: DType,
    pub stats: &'a SharedStats,
}

impl Guard<'_> {
    /// `pass(x, in_f32)` runs the network on `x`: without checks when `in_f32` is `None`,
    /// else checking each block's output (with [`Guard::block`]) and returning
    /// `Ok(Err(block))` for the first block whose f16 output was not finite.
    ///
    /// An inf or NaN never disappears on its way through these networks (norms,
    /// convolutions, SiLU, attention and additions all carry it), so the output alone says
    /// whether anything overflowed: the first pass is the plain one plus one check of its
    /// output. Only when that fails are the blocks checked one by one, and each block found
    /// overflowing is added to the set run in f32 and the pass restarted from `x` (kept:
    /// the network's input is small). No block input is kept alive for a rerun, so the
    /// normal path's memory and in-place reuse are exactly the unguarded pass's.
    pub fn run(
        &self,
        x: Tensor,
        guard: bool,
        mut pass: impl FnMut(Tensor, Option<&[String]>) -> Result<std::result::Result<Tensor, String>>,
    ) -> Result<Tensor> {
        if !guard {
            return pass(x, None)?.map_err(|_| SdError::Internal("a pass without checks overflowed".into()));
        }
        let y = pass(x.clone(), None)?.map_err(|_| SdError::Internal("unchecked pass".into()))?;
        self.stats.update(|s| s.checked_blocks = 1);
        if all_finite(&y)? {
            return Ok(y);
        }
        drop(y);
        let mut in_f32: Vec<String> = Vec::new();
        loop {
            self.stats.update(|s| {
                s.checked_blocks = 0;
                s.continued_in_f32.clear();
            });
            match pass(x.clone(), Some(&in_f32))? {
                Ok(y) => return Ok(y),
                Err(block) => {
                    tracing::warn!(block = block.as_str(), "f16 overflow (inf/NaN) in {block}: recomputing it in f32");
                    if in_f32.contains(&block) {
                        return Err(SdError::Internal(format!("{block} overflowed again in f32")));
                    }
                    in_f32.push(block.clone());
                    self.stats.update(|s| s.recomputed_in_f32.push(block));
                }
            }
        }
    }

    /// Runs one block: plainly (no checks), or checked: in f32 when it is named in
    /// `in_f32` or the values before it are past f16's range (`state` is f32), else in
    /// f16 with `None` when its output is not finite.
    pub fn block(
        &self,
        name: &str,
        block: Block<'_>,
        x: Tensor,
        in_f32: Option<&[String]>,
        state: &mut DType,
    ) -> Result<Option<Tensor>> {
        let Some(in_f32) = in_f32 else {
            return Ok(Some(block.run(x, self.dtype, self.dtype)?));
        };
        self.stats.update(|s| s.checked_blocks += 1);
        if *state == DType::F32 {
            self.stats.update(|s| s.continued_in_f32.push(name.to_string()));
            let y = block.run(x, DType::F32, self.dtype)?;
            return self.back_to_half(y, state).map(Some);
        }
        if in_f32.iter().any(|b| b == name) {
            let y = block.run(x.to_dtype(DType::F32)?, DType::F32, self.dtype)?;
            return self.back_to_half(y, state).map(Some);
        }
        let y = block.run(x, self.dtype, self.dtype)?;
        Ok(if all_finite(&y)? { Some(y) } else { None })
    }

    /// An f32 block output back in the network's dtype when every value fits; else it
    /// stays f32 and the next block runs in f32 too.
    fn back_to_half(&self, y: Tensor, state: &mut DType) -> Result<Tensor> {
        let h = y.to_dtype(self.dtype)?;
        if all_finite(&h)? {
            *state = self.dtype;
            Ok(h)
        } else {
            *state = DType::F32;
            Ok(y)
        }
    }
}
