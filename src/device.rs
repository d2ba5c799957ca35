//! Where tensors live and convolutions run.

use crate::error::{Error, Result};
use conv_cpu::CpuConv;
use conv_engine::{Budget, ConvRounding};
use rocm_backend::{RocmConv, RocmDevice};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A ROCm GPU with its convolution engine.
pub(crate) struct RocmContext {
    pub device: Arc<RocmDevice>,
    pub conv: RocmConv,
}

/// A compute device: a cheap handle that carries the device's convolution engine (its
/// dispatcher, plan cache and workspace budget).
///
/// # Identity: the engine, not only the kind
///
/// Two handles are equal when they run convolutions through the same engine, so that a
/// budget never changes silently along a chain of ops:
///
/// - **CPU**: every [`Device::cpu`] handle shares one engine (the default 64 MiB
///   workspace budget); [`Device::cpu_with_budget`] and [`Device::cpu_with_engine`] each
///   make an engine of their own, equal only to its clones — two handles made with the
///   same budget are still two engines (each counts its own live workspace and caches its
///   own plans).
/// - **ROCm**: the budget belongs to the GPU. Every handle of one ordinal shares the
///   ordinal's one allocator and conv engine, so they are one device and compare equal;
///   [`Device::rocm_with_budget`] sets the allocator's budget for all of them (the last
///   call wins).
///
/// Every op taking two or more tensors (a convolution's input, weight, bias and residual;
/// elementwise ops, matmul, `cat`, indexing, `where_cond`, the norms' affine tensors,
/// `add_assign`, `slice_set`)
/// requires them on equal handles, else it returns [`Error::DeviceMismatch`] naming both
/// handles and their budgets; the result is on that handle, and a convolution runs under
/// its engine's budget. [`Tensor::to_device`](crate::Tensor::to_device) moves a tensor to
/// another handle: between two CPU engines that shares the data (no copy). The one
/// exception: group normalisation on the CPU reads its affine parameters as values from
/// any device (they govern nothing, and the result is on the input's handle).
///
/// ```
/// use rocm_vision::prelude::*;
/// let tight = Device::cpu_with_budget(Budget::bytes(1 << 20));
/// assert_ne!(tight, Device::cpu());
/// assert_eq!(tight, tight.clone());
/// let x = Tensor::ones(&[1, 1, 4, 4], DType::F32, &tight)?;
/// let w = Tensor::ones(&[1, 1, 3, 3], DType::F32, &Device::cpu())?;
/// // Made under another engine: an error naming both budgets, not a silent mix ...
/// let e = x.conv2d(&w, None, &Conv2dParams::default()).unwrap_err();
/// assert!(matches!(e, rocm_vision::Error::DeviceMismatch { .. }), "{e}");
/// // ... until the weight is moved to the tight handle (free on the CPU).
/// let y = x.conv2d(&w.to_device(&tight)?, None, &Conv2dParams::default())?;
/// assert_eq!(y.device(), &tight);
/// # Ok::<(), rocm_vision::Error>(())
/// ```
///
/// ```
/// use rocm_vision::prelude::*;
/// // The first ROCm GPU when there is one, else the CPU (and why, for a notice).
/// let (device, why_cpu) = Device::auto();
/// if let Some(why) = why_cpu {
///     println!("{why}");
/// }
/// let x = Tensor::ones(&[2, 3], DType::F32, &device)?;
/// assert_eq!(x.device(), &device);
/// # Ok::<(), rocm_vision::Error>(())
/// ```
#[derive(Clone)]
pub struct Device {
    kind: DeviceKind,
    cpu_conv: Arc<CpuConv>,
    /// Which CPU engine `cpu_conv` is, for messages: 0 for the one [`Device::cpu`] shares,
    /// else a number unique in the process.
    engine_id: u64,
    rocm: Option<Arc<RocmContext>>,
    /// How this handle's convolutions may round ([`Device::with_conv_rounding`]).
    conv_rounding: ConvRounding,
}

/// Which device a [`Device`] handle is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceKind {
    Cpu,
    Rocm(usize),
}

fn shared_cpu_conv() -> Arc<CpuConv> {
    static SHARED: OnceLock<Arc<CpuConv>> = OnceLock::new();
    SHARED.get_or_init(|| Arc::new(CpuConv::default())).clone()
}

/// A process-unique number for a CPU engine made by [`Device::cpu_with_engine`].
fn next_engine_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Device {
    /// The CPU with the default 64 MiB convolution workspace budget. All handles from
    /// this function share one engine, so plans made for one tensor serve the next.
    ///
    /// ```
    /// use rocm_vision::{Device, DeviceKind};
    /// let cpu = Device::cpu();
    /// assert!(cpu.is_cpu() && cpu.kind() == DeviceKind::Cpu);
    /// assert_eq!(cpu.to_string(), "cpu");
    /// ```
    pub fn cpu() -> Device {
        Device {
            kind: DeviceKind::Cpu,
            cpu_conv: shared_cpu_conv(),
            engine_id: 0,
            rocm: None,
            conv_rounding: ConvRounding::Fastest,
        }
    }

    /// The CPU with its own engine and workspace budget.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// // Convolutions on this handle keep their scratch memory within 8 MiB (chunking
    /// // the ones that would need more).
    /// let device = Device::cpu_with_budget(Budget::bytes(8 << 20));
    /// assert_eq!(device.cpu_conv().budget(), Budget::bytes(8 << 20));
    /// ```
    pub fn cpu_with_budget(budget: Budget) -> Device {
        Device::cpu_with_engine(CpuConv::new(budget))
    }

    /// The CPU with a given engine (e.g. restricted to some algorithms).
    ///
    /// ```
    /// use rocm_vision::conv_cpu::CpuConv;
    /// use rocm_vision::prelude::*;
    /// let engine = CpuConv::new(Budget::bytes(1 << 30)).with_allowed(&[Algorithm::Direct]);
    /// let device = Device::cpu_with_engine(engine);
    /// let x = Tensor::ones(&[1, 1, 4, 4], DType::F32, &device)?;
    /// let (_, plan) = x.conv2d_with_plan(&Tensor::ones(&[1, 1, 3, 3], DType::F32, &device)?, None,
    ///                                    &Conv2dParams::default())?;
    /// assert_eq!(plan.algorithm, Algorithm::Direct);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn cpu_with_engine(engine: CpuConv) -> Device {
        Device {
            kind: DeviceKind::Cpu,
            cpu_conv: Arc::new(engine),
            engine_id: next_engine_id(),
            rocm: None,
            conv_rounding: ConvRounding::Fastest,
        }
    }

    /// ROCm GPU `ordinal`, shared by every handle of that ordinal. Errors say whether the
    /// ROCm runtime is missing or the GPU is.
    ///
    /// ```
    /// use rocm_vision::Device;
    /// match Device::rocm(0) {
    ///     Ok(gpu) => println!("{gpu}"), // e.g. rocm:0 (gfx1100)
    ///     Err(e) => println!("no GPU: {e}"),
    /// }
    /// ```
    pub fn rocm(ordinal: usize) -> Result<Device> {
        static CONTEXTS: OnceLock<Mutex<HashMap<usize, Arc<RocmContext>>>> = OnceLock::new();
        let mut map = CONTEXTS.get_or_init(Default::default).lock().expect("device table poisoned");
        let ctx = match map.get(&ordinal) {
            Some(c) => c.clone(),
            None => {
                let device = RocmDevice::open(ordinal)?;
                let ctx = Arc::new(RocmContext { conv: RocmConv::new(device.clone()), device });
                map.insert(ordinal, ctx.clone());
                ctx
            }
        };
        Ok(Device {
            kind: DeviceKind::Rocm(ordinal),
            cpu_conv: shared_cpu_conv(),
            engine_id: 0,
            rocm: Some(ctx),
            conv_rounding: ConvRounding::Fastest,
        })
    }

    /// ROCm GPU `ordinal` with its allocator limited to `budget` (a byte count, or a
    /// fraction of the memory free now). The budget is the GPU's: it applies to every
    /// handle of `ordinal`, those made before included (they are one device, see
    /// [`Device`]).
    ///
    /// ```
    /// use rocm_vision::{Budget, Device};
    /// if let Ok(gpu) = Device::rocm_with_budget(0, Budget::fraction_of_free(0.8)) {
    ///     // Every allocation on `gpu` now counts against 80% of the memory that was free.
    ///     assert!(gpu.is_rocm());
    /// }
    /// ```
    pub fn rocm_with_budget(ordinal: usize, budget: Budget) -> Result<Device> {
        let d = Device::rocm(ordinal)?;
        let ctx = d.rocm.as_ref().expect("a ROCm handle has a context");
        let dev = &ctx.device;
        let (free, _) = dev.memory_info()?;
        let reserved = {
            let s = dev.allocator().stats();
            s.live + s.cached
        };
        let bytes = budget.resolve(|| free + reserved);
        dev.allocator().set_budget(bytes, dev.stream())?;
        Ok(d)
    }

    /// The first ROCm GPU if one is usable, else the CPU; the second value says why the
    /// CPU was chosen (for a one-line notice).
    pub fn auto() -> (Device, Option<String>) {
        match Device::rocm(0) {
            Ok(d) => (d, None),
            // One line: the full error (every path tried) is for `--device rocm`.
            Err(e) => {
                let msg = e.to_string();
                let first = msg.lines().next().unwrap_or_default().trim_end_matches(". Tried:").trim_end_matches(':');
                (Device::cpu(), Some(format!("using the CPU ({first})")))
            }
        }
    }

    /// `auto`, `cpu`, `rocm` (GPU 0) or `rocm:N`. `auto` falls back to the CPU silently;
    /// use [`Device::auto`] to learn why.
    ///
    /// ```
    /// use rocm_vision::Device;
    /// assert!(Device::parse("cpu")?.is_cpu());
    /// let e = Device::parse("cuda").unwrap_err();
    /// assert!(e.to_string().contains("expected auto, cpu, rocm or rocm:N"));
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn parse(s: &str) -> Result<Device> {
        let t = s.trim().to_ascii_lowercase();
        match t.as_str() {
            "auto" => Ok(Device::auto().0),
            "cpu" => Ok(Device::cpu()),
            "rocm" | "gpu" => Device::rocm(0),
            other => match other.strip_prefix("rocm:").map(str::parse::<usize>) {
                Some(Ok(n)) => Device::rocm(n),
                _ => Err(Error::DeviceParse { input: s.to_string() }),
            },
        }
    }

    /// This handle with its convolutions rounded as `rounding` says. With
    /// [`ConvRounding::SizeIndependent`] an output pixel's value depends only on the layer
    /// and its inputs, never on the image size, the chunking or the budget, which is what
    /// lossless tiling needs (Real-CUGAN's tiler uses it); on ROCm it gives up library GEMMs
    /// and split-K, on the CPU the gemm crate ([`conv_cpu::CpuCatalog::with_rounding`]). Tensors made on it, and the results of ops on them, carry the setting;
    /// the handle stays equal to the others of its device (same engine, same budget).
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// use rocm_vision::ConvRounding;
    /// let device = Device::cpu().with_conv_rounding(ConvRounding::SizeIndependent);
    /// assert_eq!(device, Device::cpu());
    /// let x = Tensor::ones(&[1, 1, 4, 4], DType::F32, &device)?;
    /// let y = x.conv2d(&Tensor::ones(&[1, 1, 3, 3], DType::F32, &Device::cpu())?, None, &Conv2dParams::default())?;
    /// assert_eq!(y.device().conv_rounding(), ConvRounding::SizeIndependent);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn with_conv_rounding(mut self, rounding: ConvRounding) -> Device {
        self.conv_rounding = rounding;
        self
    }

    pub fn conv_rounding(&self) -> ConvRounding {
        self.conv_rounding
    }

    pub fn kind(&self) -> DeviceKind {
        self.kind
    }

    /// The handle with what tells it apart from other handles of its kind, for messages:
    /// `cpu (the shared engine of Device::cpu(), conv workspace budget 64.00 MiB)`,
    /// `cpu (engine #3, conv workspace budget 8.00 MiB)`, `rocm:0 (gfx1100; budget 2.00
    /// GiB, shared by every handle of rocm:0)`.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// let d = Device::cpu_with_budget(Budget::bytes(8 << 20));
    /// assert!(d.describe().contains("conv workspace budget 8.00 MiB"), "{}", d.describe());
    /// assert!(Device::cpu().describe().contains("shared engine of Device::cpu()"));
    /// ```
    pub fn describe(&self) -> String {
        match (&self.rocm, self.engine_id) {
            (Some(c), _) => {
                let budget = c.device.allocator().stats().budget;
                let budget = if budget == usize::MAX {
                    "no budget".to_string()
                } else {
                    format!("budget {}", conv_engine::format_bytes(budget))
                };
                let name = self.kind_name();
                format!("{name} ({}; {budget}, shared by every handle of {name})", c.device.info().arch)
            }
            (None, 0) => {
                format!("cpu (the shared engine of Device::cpu(), conv workspace budget {})", self.cpu_conv.budget())
            }
            (None, id) => format!("cpu (engine #{id}, conv workspace budget {})", self.cpu_conv.budget()),
        }
    }

    pub(crate) fn kind_name(&self) -> String {
        match self.kind {
            DeviceKind::Cpu => "cpu".into(),
            DeviceKind::Rocm(n) => format!("rocm:{n}"),
        }
    }

    pub fn is_cpu(&self) -> bool {
        self.kind == DeviceKind::Cpu
    }

    pub fn is_rocm(&self) -> bool {
        matches!(self.kind, DeviceKind::Rocm(_))
    }

    /// The CPU convolution engine of this handle.
    pub fn cpu_conv(&self) -> &CpuConv {
        &self.cpu_conv
    }

    pub(crate) fn rocm_context(&self) -> Option<&Arc<RocmContext>> {
        self.rocm.as_ref()
    }

    /// The ROCm device behind this handle, if it is one.
    pub fn rocm_device(&self) -> Option<&Arc<RocmDevice>> {
        self.rocm.as_ref().map(|c| &c.device)
    }

    /// `len` zero bytes of host memory to read tensors back into ([`crate::Tensor::to_slice`]):
    /// page-locked on a GPU, where the copy then skips the driver's staging (see
    /// `rocm_backend::host_buffer`); a plain vector on the CPU. Keep it for reuse: making
    /// page-locked memory costs more than one copy saves.
    pub fn host_buffer(&self, len: usize) -> Result<HostBuffer> {
        Ok(HostBuffer(match &self.rocm {
            Some(c) => HostMemory::Pinned(rocm_backend::PinnedHostBuffer::new(&c.device, len)?),
            None => HostMemory::Heap(vec![0; len]),
        }))
    }

    /// Waits for all queued work (a no-op on the CPU).
    pub fn synchronize(&self) -> Result<()> {
        if let Some(c) = &self.rocm {
            c.device.synchronize()?;
        }
        Ok(())
    }

    /// Starts an explicit tuning run (the tools' `--tune`): from now on each convolution
    /// without a measured winner in the tuning store has its candidate kernels timed on
    /// the device until `limit` is spent; the rest keep the cost model's plan. Measured
    /// winners are used by every later run on this device and library version. On the
    /// CPU, an error: its plans are not tuned.
    pub fn start_tuning(&self, limit: std::time::Duration) -> Result<()> {
        match &self.rocm {
            Some(c) => {
                c.conv.start_tuning(limit);
                Ok(())
            }
            None => Err(Error::op("tune", "only ROCm devices are tuned; the CPU plans by its cost model")),
        }
    }

    /// Ends the tuning run: saves the store and returns its report (`None` when none ran).
    pub fn finish_tuning(&self) -> Result<Option<String>> {
        match &self.rocm {
            Some(c) => Ok(c.conv.finish_tuning()?),
            None => Ok(None),
        }
    }

    /// Makes every GPU kernel ready before the first op needs it: modules missing from the
    /// on-disk cache are compiled in parallel (one thread each), and each step is told to
    /// `progress` (a line per module on a terminal is what the tools print). A no-op on the
    /// CPU; on ROCm with a warm cache, a load of the cached code objects.
    pub fn warm_kernels(&self, progress: &(dyn Fn(rocm_backend::jit::WarmEvent<'_>) + Sync)) -> Result<()> {
        if let Some(c) = &self.rocm {
            c.device.jit().warm_all(progress)?;
        }
        Ok(())
    }

    /// [`Device::warm_kernels`] reporting to stderr: nothing when every module is cached,
    /// else which modules are compiled for which architecture, then each as it finishes.
    pub fn warm_kernels_verbose(&self) -> Result<()> {
        let started = std::time::Instant::now();
        let any = std::sync::atomic::AtomicBool::new(false);
        self.warm_kernels(&|e| match e {
            rocm_backend::jit::WarmEvent::Compiling { modules, arch } if !modules.is_empty() => {
                any.store(true, std::sync::atomic::Ordering::Relaxed);
                let dir = rocm_backend::jit::default_cache_dir()
                    .map_or("no cache directory: set ROCM_VISION_KERNEL_CACHE".into(), |d| d.display().to_string());
                eprintln!(
                    "compiling {} GPU kernel modules for {arch} in parallel, once (cached in {dir}): {}",
                    modules.len(),
                    modules.join(", ")
                );
            }
            rocm_backend::jit::WarmEvent::Compiled { module, seconds } => {
                eprintln!("  compiled {module} in {seconds:.1} s")
            }
            _ => {}
        })?;
        if any.load(std::sync::atomic::Ordering::Relaxed) {
            eprintln!("kernels ready in {:.1} s", started.elapsed().as_secs_f64());
        }
        Ok(())
    }

    /// The workspace bytes this device's dispatcher plans for `problem` when nothing else
    /// is live: what a memory estimate adds for the conv beside its input and output.
    ///
    /// ```
    /// use rocm_vision::prelude::*;
    /// use rocm_vision::ConvProblem;
    /// let device = Device::cpu_with_budget(Budget::bytes(4 << 20));
    /// let p = Conv2dParams::default().with_padding(1);
    /// let problem = ConvProblem::conv2d(&[1, 128, 64, 64], &[128, 128, 3, 3], DType::F32, DType::F32, &p)?;
    /// assert!(device.conv_workspace_bytes(&problem)? <= 4 << 20);
    /// # Ok::<(), rocm_vision::Error>(())
    /// ```
    pub fn conv_workspace_bytes(&self, problem: &conv_engine::ConvProblem) -> Result<usize> {
        match &self.rocm {
            None => Ok(self.cpu_conv.plan_rounded(problem, self.conv_rounding)?.workspace_bytes()),
            Some(c) => {
                let live = rocm_backend::alloc::size_class(problem.output_bytes());
                let plan = c.conv.plan_with_live(problem, self.conv_rounding, live)?;
                Ok(rocm_backend::conv::RocmConv::workspace_allocation_bytes(&plan))
            }
        }
    }

    /// The bytes an allocation of `bytes` takes on this device: the ROCm allocator rounds
    /// to its size classes (2 MiB steps above 1 MiB); the CPU's heap is taken as exact.
    pub fn allocation_bytes(&self, bytes: usize) -> usize {
        if self.rocm.is_some() && bytes > 0 { rocm_backend::alloc::size_class(bytes) } else { bytes }
    }

    /// Peak bytes of device memory live (handed out) since the last reset (ROCm), or
    /// `None` (CPU): what a run needed, without the allocator's cache.
    pub fn peak_live_memory(&self) -> Option<usize> {
        self.rocm.as_ref().map(|c| c.device.allocator().stats().peak_live)
    }

    /// Bytes of device memory live (handed out) now (ROCm), or `None` (CPU).
    pub fn live_memory(&self) -> Option<usize> {
        self.rocm.as_ref().map(|c| c.device.allocator().stats().live)
    }

    /// Peak bytes of device memory held since the last reset (ROCm), or `None` (CPU).
    pub fn peak_memory(&self) -> Option<usize> {
        self.rocm.as_ref().map(|c| c.device.allocator().stats().peak_reserved)
    }

    pub(crate) fn candle(&self) -> candle_core::Device {
        candle_core::Device::Cpu
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            DeviceKind::Cpu => write!(f, "cpu"),
            DeviceKind::Rocm(n) => match &self.rocm {
                Some(c) => write!(f, "rocm:{n} ({})", c.device.info().arch),
                None => write!(f, "rocm:{n}"),
            },
        }
    }
}

/// Equal when ops may mix their tensors: the same CPU engine, or the same GPU (see
/// [`Device`]).
impl PartialEq for Device {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
            && match self.kind {
                DeviceKind::Cpu => Arc::ptr_eq(&self.cpu_conv, &other.cpu_conv),
                // One context per ordinal (`Device::rocm`), so its one allocator and engine.
                DeviceKind::Rocm(_) => true,
            }
    }
}

impl Eq for Device {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_device_names() {
        assert!(Device::parse("CPU").unwrap().is_cpu());
        let e = Device::parse("gpu:0").unwrap_err().to_string();
        assert!(e.contains("\"gpu:0\"") && e.contains("rocm:N"), "{e}");
        let e = Device::parse("rocm:x").unwrap_err().to_string();
        assert!(e.contains("rocm:N"), "{e}");
    }

    /// Without ROCm (this CI machine) `auto` falls back to the CPU and says why, and
    /// `rocm` is a clear error. With a GPU, both give the GPU.
    #[test]
    fn auto_falls_back_to_cpu_with_a_reason() {
        let (d, why) = Device::auto();
        match Device::rocm(0) {
            Ok(_) => assert!(d.is_rocm() && why.is_none()),
            Err(e) => {
                assert!(d.is_cpu());
                let why = why.expect("a reason for the fallback");
                assert!(why.contains("ROCm runtime not found") || why.contains("no ROCm device"), "{why}");
                let msg = e.to_string();
                assert!(msg.contains("ROCm runtime not found") || msg.contains("no ROCm device"), "{msg}");
            }
        }
    }
}

/// [`Device::host_buffer`]: bytes on the host, page-locked for a GPU.
#[derive(Debug)]
pub struct HostBuffer(HostMemory);

#[derive(Debug)]
enum HostMemory {
    Pinned(rocm_backend::PinnedHostBuffer),
    Heap(Vec<u8>),
}

impl std::ops::Deref for HostBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            HostMemory::Pinned(p) => p.as_slice(),
            HostMemory::Heap(v) => v,
        }
    }
}

impl std::ops::DerefMut for HostBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            HostMemory::Pinned(p) => p.as_mut_slice(),
            HostMemory::Heap(v) => v,
        }
    }
}
