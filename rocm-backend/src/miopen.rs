//! MIOpen as a convolution algorithm (feature `miopen`): Immediate mode only — the
//! solutions MIOpen lists for a problem, their workspace, one compile — never an
//! unbounded `Find`, which can spend minutes benchmarking on first use. The workspace is
//! allocated from the device's budgeted allocator, so a solution whose workspace does not
//! fit the budget is never chosen. The solution list is cached in memory and on disk per
//! (problem, architecture, MIOpen version); the one-time compile cost is logged and
//! counted.

use crate::buffer::DeviceArray;
use crate::device::RocmDevice;
use crate::error::{Result, RocmError};
use candle_core::DType;
use conv_engine::{ConvDType, ConvProblem};
use implicit_gemm::ConvKind;
use miopen_sys as mi;
use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

/// One MIOpen solution for a problem.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Solution {
    pub id: u64,
    pub workspace_bytes: usize,
    /// MIOpen's time estimate (Immediate mode: from its database or heuristics).
    pub time_ms: f32,
}

/// The MIOpen library bound to one device's stream.
pub struct Miopen {
    lib: mi::MIOpen,
    handle: mi::miopenHandle_t,
    version: (usize, usize, usize),
    arch: String,
    cache_dir: Option<PathBuf>,
    solutions: Mutex<HashMap<ConvProblem, Vec<Solution>>>,
    compiled: Mutex<HashSet<(ConvProblem, u64)>>,
    compile_seconds: Mutex<f64>,
}

// SAFETY: the handle is used only on its device's stream with the device current.
unsafe impl Send for Miopen {}
unsafe impl Sync for Miopen {}

fn mi_err(lib: &mi::MIOpen, call: &str, status: mi::miopenStatus_t) -> RocmError {
    RocmError::op("miopen", format!("{call}: {}", lib.error(status)))
}

/// Tensor and convolution descriptors of one problem, destroyed on drop.
struct Descriptors<'a> {
    lib: &'a mi::MIOpen,
    x: mi::miopenTensorDescriptor_t,
    w: mi::miopenTensorDescriptor_t,
    y: mi::miopenTensorDescriptor_t,
    conv: mi::miopenConvolutionDescriptor_t,
}

impl Drop for Descriptors<'_> {
    fn drop(&mut self) {
        let f = self.lib.fns();
        unsafe {
            (f.miopenDestroyTensorDescriptor)(self.x);
            (f.miopenDestroyTensorDescriptor)(self.w);
            (f.miopenDestroyTensorDescriptor)(self.y);
            (f.miopenDestroyConvolutionDescriptor)(self.conv);
        }
    }
}

/// Whether MIOpen (through the calls in FFI.md) can express `p`: NCHW, f32/f16/bf16,
/// symmetric padding, no output padding for transposed convolutions, and every dimension
/// within the `int` the descriptors take.
pub fn supports(p: &ConvProblem) -> bool {
    let g = p.geometry();
    let [pp, qq] = g.out_hw();
    let dims = [
        g.batch,
        g.in_channels,
        g.out_channels,
        g.in_size[0],
        g.in_size[1],
        g.kernel[0],
        g.kernel[1],
        pp,
        qq,
        g.stride[0],
        g.stride[1],
        g.pad_begin[0],
        g.pad_begin[1],
        g.dilation[0],
        g.dilation[1],
        g.groups,
    ];
    g.pad_begin == g.pad_end
        && g.output_padding == [0, 0]
        && matches!(p.dtype(), ConvDType::F32 | ConvDType::F16 | ConvDType::BF16)
        && dims.iter().all(|&d| i32::try_from(d).is_ok())
}

/// Device bytes a solution's workspace takes from the budget: the allocator's size class
/// of it (nothing when the solution needs no workspace; everything for an absurd answer
/// that the size classes cannot round).
pub fn footprint(s: &Solution) -> usize {
    match s.workspace_bytes {
        0 => 0,
        b if b > usize::MAX / 2 => usize::MAX,
        b => crate::alloc::size_class(b),
    }
}

/// The solution to run within `limit` bytes of workspace: of those whose [`footprint`]
/// fits, the fastest by MIOpen's estimate (a negative or non-finite estimate means none,
/// and ranks after every real one, in MIOpen's order); on equal times the smaller
/// workspace, then MIOpen's order. `None` when no solution fits.
pub fn choose(solutions: &[Solution], limit: usize) -> Option<Solution> {
    let known = |s: &Solution| s.time_ms.is_finite() && s.time_ms >= 0.0;
    solutions
        .iter()
        .enumerate()
        .filter(|(_, s)| footprint(s) <= limit)
        .min_by(|(i, a), (j, b)| match (known(a), known(b)) {
            (true, true) => {
                a.time_ms.total_cmp(&b.time_ms).then(a.workspace_bytes.cmp(&b.workspace_bytes)).then(i.cmp(j))
            }
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
            (false, false) => i.cmp(j),
        })
        .map(|(_, s)| *s)
}

/// What the conv catalog reports as MIOpen's workspace for a problem with these solutions
/// under `limit`: the chosen solution's workspace, or, when none fits, the smallest
/// footprint (which is then above `limit`, so the dispatcher never picks it but can name
/// the bytes needed). `None` when MIOpen lists no solution at all.
pub fn offered_workspace(solutions: &[Solution], limit: usize) -> Option<usize> {
    match choose(solutions, limit) {
        Some(s) => Some(s.workspace_bytes),
        None => solutions.iter().map(footprint).min(),
    }
}

/// The disk cache's text for a solution list: one `id workspace_bytes time_ms` line each.
fn format_solution_cache(solutions: &[Solution]) -> String {
    solutions.iter().map(|s| format!("{} {} {}\n", s.id, s.workspace_bytes, s.time_ms)).collect()
}

/// A solution list read back from [`format_solution_cache`]'s text; `None` when any line
/// is malformed.
fn parse_solution_cache(text: &str) -> Option<Vec<Solution>> {
    text.lines()
        .map(|l| {
            let v: Vec<&str> = l.split_whitespace().collect();
            if v.len() != 3 {
                return None;
            }
            Some(Solution { id: v[0].parse().ok()?, workspace_bytes: v[1].parse().ok()?, time_ms: v[2].parse().ok()? })
        })
        .collect()
}

impl Miopen {
    pub(crate) fn new(dev: &RocmDevice) -> Result<Miopen> {
        let lib = mi::MIOpen::load().map_err(|e| RocmError::op("miopen", e.to_string()))?;
        dev.activate()?;
        let mut handle: mi::miopenHandle_t = std::ptr::null_mut();
        let st = unsafe {
            (lib.fns().miopenCreateWithStream)(&mut handle, dev.stream().raw() as mi::miopenAcceleratorQueue_t)
        };
        if st != mi::miopenStatusSuccess {
            return Err(mi_err(&lib, "miopenCreateWithStream", st));
        }
        let version = lib.version().map_err(|e| RocmError::op("miopen", e.to_string()))?;
        let cache_dir = crate::jit::default_cache_dir().map(|d| d.join("miopen"));
        tracing::info!(target: "rocm_backend", ?version, library = %lib.path().display(), "MIOpen ready");
        Ok(Miopen {
            lib,
            handle,
            version,
            arch: dev.info().arch.clone(),
            cache_dir,
            solutions: Mutex::new(HashMap::new()),
            compiled: Mutex::new(HashSet::new()),
            compile_seconds: Mutex::new(0.0),
        })
    }

    pub fn version(&self) -> (usize, usize, usize) {
        self.version
    }

    /// Seconds spent compiling solutions so far (MIOpen's one-time cost).
    pub fn compile_seconds(&self) -> f64 {
        *self.compile_seconds.lock().expect("miopen poisoned")
    }

    /// How many (problem, solution) pairs have been compiled so far.
    pub fn compiled_solutions(&self) -> usize {
        self.compiled.lock().expect("miopen poisoned").len()
    }

    fn descriptors(&self, p: &ConvProblem) -> Result<Descriptors<'_>> {
        let f = self.lib.fns();
        let g = p.geometry();
        let ty = match p.dtype() {
            ConvDType::F32 => mi::miopenFloat,
            ConvDType::F16 => mi::miopenHalf,
            ConvDType::BF16 => mi::miopenBFloat16,
        };
        let mut d = Descriptors {
            lib: &self.lib,
            x: std::ptr::null_mut(),
            w: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            conv: std::ptr::null_mut(),
        };
        let ok = |call: &str, st| if st == mi::miopenStatusSuccess { Ok(()) } else { Err(mi_err(&self.lib, call, st)) };
        unsafe {
            ok("miopenCreateTensorDescriptor", (f.miopenCreateTensorDescriptor)(&mut d.x))?;
            ok("miopenCreateTensorDescriptor", (f.miopenCreateTensorDescriptor)(&mut d.w))?;
            ok("miopenCreateTensorDescriptor", (f.miopenCreateTensorDescriptor)(&mut d.y))?;
            ok("miopenCreateConvolutionDescriptor", (f.miopenCreateConvolutionDescriptor)(&mut d.conv))?;
            let [h, w] = g.in_size;
            let [r, s] = g.kernel;
            let [pp, qq] = g.out_hw();
            let i = |v: usize| v as i32;
            ok(
                "miopenSet4dTensorDescriptor(x)",
                (f.miopenSet4dTensorDescriptor)(d.x, ty, i(g.batch), i(g.in_channels), i(h), i(w)),
            )?;
            let wd = g.weight_dims();
            ok(
                "miopenSet4dTensorDescriptor(w)",
                (f.miopenSet4dTensorDescriptor)(d.w, ty, i(wd[0]), i(wd[1]), i(r), i(s)),
            )?;
            ok(
                "miopenSet4dTensorDescriptor(y)",
                (f.miopenSet4dTensorDescriptor)(d.y, ty, i(g.batch), i(g.out_channels), i(pp), i(qq)),
            )?;
            let mode = if g.kind == ConvKind::Transposed { mi::miopenTranspose } else { mi::miopenConvolution };
            ok(
                "miopenInitConvolutionDescriptor",
                (f.miopenInitConvolutionDescriptor)(
                    d.conv,
                    mode,
                    i(g.pad_begin[0]),
                    i(g.pad_begin[1]),
                    i(g.stride[0]),
                    i(g.stride[1]),
                    i(g.dilation[0]),
                    i(g.dilation[1]),
                ),
            )?;
            ok("miopenSetConvolutionGroupCount", (f.miopenSetConvolutionGroupCount)(d.conv, i(g.groups)))?;
            // MIOpen's own idea of the output must be ours, or the problem is not one
            // MIOpen can run as described.
            let (mut n, mut c, mut oh, mut ow) = (0, 0, 0, 0);
            ok(
                "miopenGetConvolutionForwardOutputDim",
                (f.miopenGetConvolutionForwardOutputDim)(d.conv, d.x, d.w, &mut n, &mut c, &mut oh, &mut ow),
            )?;
            if [n, c, oh, ow] != [i(g.batch), i(g.out_channels), i(pp), i(qq)] {
                return Err(RocmError::op("miopen", format!("MIOpen computes output [{n}, {c}, {oh}, {ow}] for {p}")));
            }
        }
        Ok(d)
    }

    fn cache_file(&self, p: &ConvProblem) -> Option<PathBuf> {
        use sha2::{Digest, Sha256};
        let key = format!("{p:?} {:?} {}", self.version, self.arch);
        let h: String = Sha256::digest(key.as_bytes()).iter().take(12).map(|b| format!("{b:02x}")).collect();
        self.cache_dir.as_ref().map(|d| d.join(format!("{}-{h}.solutions", self.arch)))
    }

    /// The solutions MIOpen lists for `p` (Immediate mode), fastest first by its estimate.
    pub fn solutions(&self, p: &ConvProblem) -> Result<Vec<Solution>> {
        if let Some(s) = self.solutions.lock().expect("miopen poisoned").get(p) {
            return Ok(s.clone());
        }
        if let Some(path) = self.cache_file(p)
            && let Ok(text) = std::fs::read_to_string(&path)
        {
            match parse_solution_cache(&text) {
                Some(s) if !s.is_empty() => {
                    self.solutions.lock().expect("miopen poisoned").insert(*p, s.clone());
                    return Ok(s);
                }
                _ => {
                    tracing::warn!(target: "rocm_backend::miopen", path = %path.display(), "unreadable MIOpen solution cache entry; querying again")
                }
            }
        }
        let d = self.descriptors(p)?;
        let f = self.lib.fns();
        let mut count = 0usize;
        let st =
            unsafe { (f.miopenConvolutionForwardGetSolutionCount)(self.handle, d.w, d.x, d.conv, d.y, &mut count) };
        if st != mi::miopenStatusSuccess {
            return Err(mi_err(&self.lib, "miopenConvolutionForwardGetSolutionCount", st));
        }
        let mut raw =
            vec![mi::miopenConvSolution_t { time: 0.0, workspace_size: 0, solution_id: 0, algorithm: 0 }; count.max(1)];
        let mut got = 0usize;
        let st = unsafe {
            (f.miopenConvolutionForwardGetSolution)(
                self.handle,
                d.w,
                d.x,
                d.conv,
                d.y,
                raw.len(),
                &mut got,
                raw.as_mut_ptr(),
            )
        };
        if st != mi::miopenStatusSuccess {
            return Err(mi_err(&self.lib, "miopenConvolutionForwardGetSolution", st));
        }
        let mut sols: Vec<Solution> = raw[..got.min(raw.len())]
            .iter()
            .map(|s| Solution { id: s.solution_id, workspace_bytes: s.workspace_size, time_ms: s.time })
            .collect();
        sols.sort_by(|a, b| a.time_ms.total_cmp(&b.time_ms));
        if let Some(path) = self.cache_file(p).filter(|_| !sols.is_empty()) {
            let text = format_solution_cache(&sols);
            if let Some(dir) = path.parent() {
                let tmp = path.with_extension(format!("tmp{}", std::process::id()));
                let written = std::fs::create_dir_all(dir)
                    .and_then(|_| std::fs::write(&tmp, text))
                    .and_then(|_| std::fs::rename(&tmp, &path));
                if let Err(e) = written {
                    tracing::warn!(target: "rocm_backend::miopen", path = %path.display(), error = %e, "could not write the MIOpen solution cache");
                }
            }
        }
        self.solutions.lock().expect("miopen poisoned").insert(*p, sols.clone());
        Ok(sols)
    }

    /// The solution [`choose`] picks for `p` within `limit` bytes of workspace.
    pub fn best_within(&self, p: &ConvProblem, limit: usize) -> Result<Option<Solution>> {
        Ok(choose(&self.solutions(p)?, limit))
    }

    /// Runs `p` with `solution`: images `first_image..first_image + p.geometry().batch` of
    /// the contiguous NCHW arrays `x` and `y` (so a batch chunk of a larger problem runs as
    /// the sub-problem `p`), weights `w`. The workspace comes from the device's allocator,
    /// so it counts against the budget; it is exactly `solution.workspace_bytes`, and a
    /// solution for which MIOpen now asks more is an error rather than an allocation the
    /// plan did not account for. The first run of a (problem, solution) compiles it first
    /// (timed: [`Miopen::compile_seconds`], and a `tracing` event).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        dev: &std::sync::Arc<RocmDevice>,
        p: &ConvProblem,
        solution: &Solution,
        x: &DeviceArray,
        w: &DeviceArray,
        y: &DeviceArray,
        first_image: usize,
    ) -> Result<()> {
        let g = p.geometry();
        let dtype = p.dtype().to_candle();
        let (img_in, img_out) = (g.input_len() / g.batch.max(1), g.output_len() / g.batch.max(1));
        let end = first_image + g.batch;
        for (what, a, len) in [("input", x, end * img_in), ("weight", w, g.weight_len()), ("output", y, end * img_out)]
        {
            if a.dtype != dtype || a.len < len {
                return Err(RocmError::op(
                    "miopen",
                    format!(
                        "{what} holds {} {:?} elements; images {first_image}..{end} of {p} need {len} {dtype:?}",
                        a.len, a.dtype
                    ),
                ));
            }
        }
        let d = self.descriptors(p)?;
        let f = self.lib.fns();
        dev.activate()?;
        let mut need = 0usize;
        let st = unsafe {
            (f.miopenConvolutionForwardGetSolutionWorkspaceSize)(
                self.handle,
                d.w,
                d.x,
                d.conv,
                d.y,
                solution.id,
                &mut need,
            )
        };
        if st != mi::miopenStatusSuccess {
            return Err(mi_err(
                &self.lib,
                &format!("miopenConvolutionForwardGetSolutionWorkspaceSize({})", solution.id),
                st,
            ));
        }
        if need > solution.workspace_bytes {
            return Err(RocmError::op(
                "miopen",
                format!(
                    "solution {} of {p} now needs {need} workspace bytes, {} were planned (stale solution cache?)",
                    solution.id, solution.workspace_bytes
                ),
            ));
        }
        if self.compiled.lock().expect("miopen poisoned").insert((*p, solution.id)) {
            let t = Instant::now();
            let st =
                unsafe { (f.miopenConvolutionForwardCompileSolution)(self.handle, d.w, d.x, d.conv, d.y, solution.id) };
            if st != mi::miopenStatusSuccess {
                self.compiled.lock().expect("miopen poisoned").remove(&(*p, solution.id));
                return Err(mi_err(&self.lib, "miopenConvolutionForwardCompileSolution", st));
            }
            let secs = t.elapsed().as_secs_f64();
            let total = {
                let mut c = self.compile_seconds.lock().expect("miopen poisoned");
                *c += secs;
                *c
            };
            tracing::info!(target: "rocm_backend::miopen", problem = %p, solution = solution.id, seconds = secs, total_seconds = total, "compiled MIOpen solution (one-time cost)");
        }
        let ws = if solution.workspace_bytes > 0 {
            Some(DeviceArray::alloc(dev, DType::U8, solution.workspace_bytes)?)
        } else {
            None
        };
        let st = unsafe {
            (f.miopenConvolutionForwardImmediate)(
                self.handle,
                d.w,
                w.ptr_at(0) as *const _,
                d.x,
                x.ptr_at(first_image * img_in) as *const _,
                d.conv,
                d.y,
                y.ptr_at(first_image * img_out) as *mut _,
                ws.as_ref().map_or(std::ptr::null_mut(), |b| b.ptr_at(0) as *mut _),
                solution.workspace_bytes,
                solution.id,
            )
        };
        if st != mi::miopenStatusSuccess {
            return Err(mi_err(&self.lib, "miopenConvolutionForwardImmediate", st));
        }
        Ok(())
    }
}

impl Drop for Miopen {
    fn drop(&mut self) {
        unsafe { (self.lib.fns().miopenDestroy)(self.handle) };
    }
}

#[cfg(test)]
mod tests {
    //! The host-side choices, without a GPU or libMIOpen.
    use super::*;
    use candle_core::DType as D;
    use conv_engine::{Conv2dParams, Padding2d};

    fn sol(id: u64, workspace_bytes: usize, time_ms: f32) -> Solution {
        Solution { id, workspace_bytes, time_ms }
    }

    #[test]
    fn choose_takes_the_fastest_solution_within_the_limit() {
        let sols = [sol(1, 64 << 20, 0.5), sol(2, 4 << 20, 0.9), sol(3, 0, 2.0), sol(4, 4 << 20, 0.7)];
        assert_eq!(choose(&sols, usize::MAX).map(|s| s.id), Some(1));
        // The fastest does not fit: the fastest of those that do.
        assert_eq!(choose(&sols, 8 << 20).map(|s| s.id), Some(4));
        assert_eq!(choose(&sols, 4 << 20).map(|s| s.id), Some(4));
        assert_eq!(choose(&sols, (4 << 20) - 1).map(|s| s.id), Some(3));
        assert_eq!(choose(&sols, 0).map(|s| s.id), Some(3));
        // Nothing fits, or nothing listed.
        assert_eq!(choose(&sols[..2], 1 << 20), None);
        assert_eq!(choose(&[], usize::MAX), None);
        // The list's order does not matter.
        let mut rev = sols;
        rev.reverse();
        assert_eq!(choose(&rev, 8 << 20).map(|s| s.id), Some(4));
    }

    #[test]
    fn the_limit_counts_the_allocators_rounding() {
        // 1 byte of workspace takes a 512-byte block; 1 MiB + 1 a 2 MiB one.
        let one = [sol(7, 1, 1.0)];
        assert_eq!(choose(&one, 511), None);
        assert_eq!(choose(&one, 512).map(|s| s.id), Some(7));
        let mib = [sol(8, (1 << 20) + 1, 1.0)];
        assert_eq!(choose(&mib, (2 << 20) - 1), None);
        assert_eq!(choose(&mib, 2 << 20).map(|s| s.id), Some(8));
        assert_eq!(footprint(&sol(0, 0, 1.0)), 0);
        assert_eq!(footprint(&sol(0, usize::MAX, 1.0)), usize::MAX);
        assert_eq!(choose(&[sol(9, usize::MAX - 1, 1.0)], usize::MAX - 1), None);
        for ws in [1usize, 511, 513, 1 << 20, (1 << 20) + 1, 3 << 20, (1 << 30) + 5] {
            let f = footprint(&sol(0, ws, 1.0));
            assert!(f >= ws && f == crate::alloc::size_class(ws), "{ws} -> {f}");
        }
    }

    #[test]
    fn estimates_break_ties_and_missing_ones_rank_last() {
        // Equal times: the smaller workspace, then MIOpen's order.
        let tie = [sol(1, 2048, 1.0), sol(2, 0, 1.0), sol(3, 0, 1.0)];
        assert_eq!(choose(&tie, usize::MAX).map(|s| s.id), Some(2));
        // A negative or non-finite estimate is no estimate: after every real one.
        let unknown = [sol(1, 0, -1.0), sol(2, 0, f32::NAN), sol(3, 0, 5.0), sol(4, 0, f32::INFINITY)];
        assert_eq!(choose(&unknown, usize::MAX).map(|s| s.id), Some(3));
        assert_eq!(choose(&unknown[..2], usize::MAX).map(|s| s.id), Some(1));
        assert_eq!(choose(&[sol(2, 0, f32::NAN), sol(1, 0, -1.0)], usize::MAX).map(|s| s.id), Some(2));
    }

    #[test]
    fn the_offered_workspace_never_passes_the_limit_unless_nothing_fits() {
        let sols = [sol(1, 3 << 20, 0.5), sol(2, 1000, 0.9)];
        assert_eq!(offered_workspace(&sols, usize::MAX), Some(3 << 20));
        assert_eq!(offered_workspace(&sols, 2 << 20), Some(1000));
        // 1000 bytes take a 1024-byte block: below that nothing fits, and the answer is
        // above the limit, so the dispatcher cannot pick it.
        for limit in [0usize, 999, 1000, 1023] {
            let w = offered_workspace(&sols, limit).unwrap();
            assert!(w > limit, "limit {limit}: offered {w}");
            assert_eq!(w, 1024);
        }
        assert_eq!(offered_workspace(&[], usize::MAX), None);
        // Whenever the offer fits the limit, the solution run with that limit is the one
        // offered, and its block fits too.
        for limit in [0usize, 1024, 2 << 20, 4 << 20, usize::MAX] {
            let w = offered_workspace(&sols, limit).unwrap();
            if w <= limit {
                let s = choose(&sols, limit).unwrap();
                assert_eq!(s.workspace_bytes, w);
                assert!(footprint(&s) <= limit);
            }
        }
    }

    #[test]
    fn the_solution_cache_text_round_trips() {
        let sols = vec![sol(1, 0, 0.25), sol(u64::MAX, usize::MAX, -1.0), sol(3, 12345, f32::INFINITY)];
        assert_eq!(parse_solution_cache(&format_solution_cache(&sols)), Some(sols));
        assert_eq!(parse_solution_cache(""), Some(vec![]));
        assert_eq!(parse_solution_cache("1 2\n"), None);
        assert_eq!(parse_solution_cache("1 2 3 4\n"), None);
        assert_eq!(parse_solution_cache("x 2 3\n"), None);
        assert_eq!(parse_solution_cache("1 -2 3\n"), None);
    }

    #[test]
    fn supports_what_the_descriptors_can_express() {
        let p = |params: Conv2dParams, dt: D| {
            ConvProblem::conv2d(&[2, 8, 16, 16], &[8, 8 / params.groups, 3, 3], dt, dt, &params).unwrap()
        };
        let base = Conv2dParams::default();
        assert!(supports(&p(base.with_padding(1).with_stride(2), D::F32)));
        assert!(supports(&p(base.with_dilation(2).with_groups(4), D::F16)));
        assert!(supports(&p(base, D::BF16)));
        // Asymmetric padding has no MIOpen descriptor.
        assert!(!supports(&p(Conv2dParams { padding: Padding2d::tblr(1, 0, 1, 1), ..base }, D::F32)));
        // Nor has a transposed convolution's output padding (not in FFI.md).
        let t = |op| {
            ConvProblem::conv_transpose2d(
                &[1, 4, 8, 8],
                &[4, 2, 3, 3],
                D::F32,
                D::F32,
                &base.with_stride(2).with_padding(1).with_output_padding(op),
            )
            .unwrap()
        };
        assert!(supports(&t(0)));
        assert!(!supports(&t(1)));
        // A dimension past i32.
        let big = p(base, D::F32).with_batch(1 << 31).unwrap();
        assert!(!supports(&big));
        let big = big.with_batch((1 << 31) - 1).unwrap();
        assert!(supports(&big));
    }
}
