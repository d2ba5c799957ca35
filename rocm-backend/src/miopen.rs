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
/// symmetric padding, and no output padding for transposed convolutions.
pub fn supports(p: &ConvProblem) -> bool {
    let g = &p.geometry;
    g.pad_begin == g.pad_end
        && g.output_padding == [0, 0]
        && matches!(p.dtype, ConvDType::F32 | ConvDType::F16 | ConvDType::BF16)
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

    fn descriptors(&self, p: &ConvProblem) -> Result<Descriptors<'_>> {
        let f = self.lib.fns();
        let g = &p.geometry;
        let ty = match p.dtype {
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
            let parsed: Option<Vec<Solution>> = text
                .lines()
                .map(|l| {
                    let v: Vec<&str> = l.split_whitespace().collect();
                    Some(Solution {
                        id: v.first()?.parse().ok()?,
                        workspace_bytes: v.get(1)?.parse().ok()?,
                        time_ms: v.get(2)?.parse().ok()?,
                    })
                })
                .collect();
            match parsed {
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
        if let Some(path) = self.cache_file(p) {
            let text: String = sols.iter().map(|s| format!("{} {} {}\n", s.id, s.workspace_bytes, s.time_ms)).collect();
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

    /// The fastest solution whose workspace fits `limit` bytes.
    pub fn best_within(&self, p: &ConvProblem, limit: usize) -> Result<Option<Solution>> {
        Ok(self.solutions(p)?.into_iter().find(|s| s.workspace_bytes <= limit))
    }

    /// Runs `p` with `solution` into `y` (contiguous NCHW arrays). The workspace comes from
    /// the device's allocator, so it counts against the budget.
    pub fn run(
        &self,
        dev: &std::sync::Arc<RocmDevice>,
        p: &ConvProblem,
        solution: &Solution,
        x: &DeviceArray,
        w: &DeviceArray,
        y: &DeviceArray,
    ) -> Result<()> {
        let d = self.descriptors(p)?;
        let f = self.lib.fns();
        dev.activate()?;
        if self.compiled.lock().expect("miopen poisoned").insert((*p, solution.id)) {
            let t = Instant::now();
            let st =
                unsafe { (f.miopenConvolutionForwardCompileSolution)(self.handle, d.w, d.x, d.conv, d.y, solution.id) };
            if st != mi::miopenStatusSuccess {
                self.compiled.lock().expect("miopen poisoned").remove(&(*p, solution.id));
                return Err(mi_err(&self.lib, "miopenConvolutionForwardCompileSolution", st));
            }
            let secs = t.elapsed().as_secs_f64();
            *self.compile_seconds.lock().expect("miopen poisoned") += secs;
            tracing::info!(target: "rocm_backend::miopen", problem = %p, solution = solution.id, seconds = secs, "compiled MIOpen solution (one-time cost)");
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
                x.ptr_at(0) as *const _,
                d.conv,
                d.y,
                y.ptr_at(0) as *mut _,
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
