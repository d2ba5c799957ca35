//! Measured tuning (issue 28): which kernel won for a problem when the candidates were
//! timed on this device, kept on disk so that a later run plans with the measurement
//! instead of the cost model.
//!
//! An entry is keyed by the catalog's [`AlgorithmCatalog::tuning_key`] (the device, its
//! architecture, the kernel sources' hash and the library versions: a new driver or kernel
//! set starts afresh) and the problem (its dtype and every geometry field, as
//! [`ConvProblem`]'s `Display` writes it). Filling the store is explicit
//! ([`Dispatcher::tune`], reached from the tools' `--tune`); a problem without an entry is
//! planned by the cost model as before.
//!
//! The file is plain text, one entry per line, tab-separated, so that a user can read and
//! delete what it holds:
//! `<tuning key>\t<problem>\t<algorithm>\t<kernel>\t<seconds>`. It is replaced whole
//! (written beside it, then renamed), so a crash never leaves half a file; lines this
//! version cannot read are reported and skipped, never trusted.

use crate::dispatch::{Algorithm, AlgorithmCatalog, BudgetState, Dispatcher, Plan, PlanCache};
use crate::problem::ConvProblem;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The first line of a store file: the format's name and version.
const HEADER: &str = "# rocm-vision tuning v1: tuning key, problem, algorithm, kernel, seconds (tab-separated)";

/// The measured winner for one problem on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct TunedEntry {
    pub algorithm: Algorithm,
    /// The kernel as the catalog names it ([`AlgorithmCatalog::Kernel`]'s `Display`).
    pub kernel: String,
    /// Its measured time, whole problem.
    pub seconds: f64,
}

/// A line of a store file that was not used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedLine {
    pub line: usize,
    pub reason: String,
}

/// Measured choices, in memory and (when opened from a file) on disk.
pub struct TuningStore {
    path: Option<PathBuf>,
    entries: Mutex<BTreeMap<(String, String), TunedEntry>>,
}

/// Where the store lives by default: `$ROCM_VISION_TUNING` (`off` or empty: no store),
/// else beside the kernel cache (`$XDG_CACHE_HOME/rocm-vision/tuning.tsv`, else
/// `~/.cache/rocm-vision/tuning.tsv`).
pub fn default_store_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ROCM_VISION_TUNING") {
        return (!p.is_empty() && p != "off").then(|| PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("rocm-vision").join("tuning.tsv"))
}

impl TuningStore {
    /// An empty store that is never written to disk (tests, one-off runs).
    pub fn in_memory() -> Self {
        TuningStore { path: None, entries: Mutex::default() }
    }

    /// The store at `path` (empty when the file does not exist yet), with the lines it
    /// could not read. An unreadable file is an error naming it.
    pub fn open(path: &Path) -> std::io::Result<(Self, Vec<SkippedLine>)> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(std::io::Error::new(e.kind(), format!("tuning store {}: {e}", path.display()))),
        };
        let (entries, skipped) = parse(&text);
        Ok((TuningStore { path: Some(path.to_path_buf()), entries: Mutex::new(entries) }, skipped))
    }

    /// The store at [`default_store_path`] (in memory when there is none), its skipped
    /// lines and any error reading it reported through `tracing` rather than failing the
    /// run: a damaged store only costs the measurements.
    pub fn open_default() -> Self {
        let Some(path) = default_store_path() else { return Self::in_memory() };
        match Self::open(&path) {
            Ok((store, skipped)) => {
                for s in skipped {
                    tracing::warn!(target: "conv_engine::tuning", path = %path.display(), line = s.line, reason = %s.reason, "tuning store line skipped");
                }
                store
            }
            Err(e) => {
                tracing::warn!(target: "conv_engine::tuning", error = %e, "tuning store not read; planning by the cost model");
                TuningStore { path: Some(path), entries: Mutex::default() }
            }
        }
    }

    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    pub fn len(&self) -> usize {
        self.entries.lock().expect("tuning store poisoned").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The measured winner for `problem` on the device `tuning_key` names.
    pub fn lookup(&self, tuning_key: &str, problem: &ConvProblem) -> Option<TunedEntry> {
        self.entries.lock().expect("tuning store poisoned").get(&(tuning_key.to_string(), problem.to_string())).cloned()
    }

    pub fn record(&self, tuning_key: &str, problem: &ConvProblem, entry: TunedEntry) {
        self.entries
            .lock()
            .expect("tuning store poisoned")
            .insert((tuning_key.to_string(), problem.to_string()), entry);
    }

    /// Writes the store to its file (a no-op for [`Self::in_memory`]): the whole file
    /// beside it, then renamed over it.
    pub fn save(&self) -> std::io::Result<()> {
        let Some(path) = &self.path else { return Ok(()) };
        let err = |what: &str, e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("tuning store {}: {what}: {e}", path.display()))
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| err("creating its folder", e))?;
        }
        let text = format(&self.entries.lock().expect("tuning store poisoned"));
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        std::fs::write(&tmp, text).map_err(|e| err("writing", e))?;
        std::fs::rename(&tmp, path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            err("replacing", e)
        })
    }
}

fn format(entries: &BTreeMap<(String, String), TunedEntry>) -> String {
    let mut s = String::from(HEADER);
    s.push('\n');
    for ((key, problem), e) in entries {
        s.push_str(&format!("{key}\t{problem}\t{}\t{}\t{:e}\n", e.algorithm.name(), e.kernel, e.seconds));
    }
    s
}

fn parse(text: &str) -> (BTreeMap<(String, String), TunedEntry>, Vec<SkippedLine>) {
    let mut entries = BTreeMap::new();
    let mut skipped = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if n == 1 && line.starts_with("# rocm-vision tuning") && line != HEADER {
            // Another version's file: none of it is trusted.
            skipped.push(SkippedLine { line: 1, reason: format!("unknown format {line:?}; every entry ignored") });
            return (BTreeMap::new(), skipped);
        }
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split('\t').collect();
        let [key, problem, algorithm, kernel, seconds] = fields[..] else {
            skipped.push(SkippedLine { line: n, reason: format!("{} fields, 5 expected", fields.len()) });
            continue;
        };
        let Ok(algorithm) = algorithm.parse::<Algorithm>() else {
            skipped.push(SkippedLine { line: n, reason: format!("unknown algorithm {algorithm:?}") });
            continue;
        };
        let seconds = match seconds.parse::<f64>() {
            Ok(s) if s.is_finite() && s > 0.0 => s,
            _ => {
                skipped.push(SkippedLine { line: n, reason: format!("time {seconds:?} is not a positive number") });
                continue;
            }
        };
        entries.insert(
            (key.to_string(), problem.to_string()),
            TunedEntry { algorithm, kernel: kernel.to_string(), seconds },
        );
    }
    (entries, skipped)
}

/// What [`Dispatcher::tune`] found for one problem.
#[derive(Clone, Debug)]
pub struct TuneOutcome {
    /// The candidates timed, with their times (whole problem), in the order timed.
    pub timings: Vec<(Algorithm, String, f64)>,
    /// The winner, now in the store.
    pub best: TunedEntry,
    /// The cost model's plan for the problem and its measured time (among `timings`).
    pub default_kernel: String,
    pub default_seconds: f64,
}

impl<C: AlgorithmCatalog> Dispatcher<C> {
    /// Plans a problem with its measured winner from `store` when there is one and it
    /// runs the problem whole within the budget; else with the cost model. Clears cached
    /// plans.
    pub fn with_tuning(mut self, store: Arc<TuningStore>) -> Self {
        self.tuning = Some(store);
        self.cache = PlanCache::default();
        self
    }

    /// [`Self::with_tuning`] for a catalog whose algorithms round differently but whose
    /// candidate kernels of one algorithm round alike (size-independent rounding): the
    /// algorithm stays the cost model's, only its kernel is measured and chosen.
    pub fn with_tuning_within_algorithm(mut self, store: Arc<TuningStore>) -> Self {
        self.tune_within_algorithm = true;
        self.with_tuning(store)
    }

    pub fn tuning(&self) -> Option<&Arc<TuningStore>> {
        self.tuning.as_ref()
    }

    /// The stored winner's plan for `problem`, if the store has one this catalog still
    /// offers (same allowed algorithm, a candidate of that name) and it fits `budget`.
    pub(crate) fn tuned_plan(&self, problem: &ConvProblem, budget: BudgetState) -> Option<Plan<C::Kernel>> {
        // An empty store (the common case) costs no key: on ROCm that hashes the kernels.
        let store = self.tuning.as_ref().filter(|s| !s.is_empty())?;
        let entry = store.lookup(&self.catalog().tuning_key(), problem)?;
        let plan = self
            .whole_problem_candidates(problem, budget)
            .into_iter()
            .find(|p| p.algorithm() == entry.algorithm && p.kernel().to_string() == entry.kernel)?;
        Some(plan.measured_at(entry.seconds))
    }

    /// Every (allowed algorithm, candidate kernel) that runs `problem` in one chunk
    /// within `budget`, each with its cost model's estimate.
    /// Only the cost model's algorithm's candidates under [`Self::with_tuning_within_algorithm`].
    pub(crate) fn whole_problem_candidates(&self, problem: &ConvProblem, budget: BudgetState) -> Vec<Plan<C::Kernel>> {
        let whole = Self::chunkings(problem)[0].0;
        let available = budget.available();
        let algorithms = if self.tune_within_algorithm {
            self.choose(problem, budget).map(|p| vec![p.algorithm()]).unwrap_or_default()
        } else {
            self.allowed().to_vec()
        };
        let mut plans = Vec::new();
        for &alg in &algorithms {
            for kernel in self.catalog().kernel_candidates(alg, problem, whole, available) {
                if let Some(plan) = self.plan_of(alg, kernel, problem, whole, available)
                    && plan.workspace_bytes() <= available
                {
                    plans.push(plan);
                }
            }
        }
        plans
    }

    /// Drops the cached plans of `problem` (after its stored winner changed).
    pub(crate) fn forget(&self, problem: &ConvProblem) {
        self.cache.plans.lock().expect("plan cache poisoned").retain(|(p, _), _| p != problem);
    }

    /// Times every candidate kernel of every allowed algorithm that runs `problem` whole
    /// within `budget` (the cost model's plan first) with `time`, which runs a plan and
    /// returns its seconds, and records the fastest in `store`. Stops early once
    /// `limit` is spent (the candidates timed so far still count). `Ok(None)` when no
    /// candidate runs the problem whole within the budget: then nothing is recorded and
    /// the cost model keeps planning it.
    pub fn tune<E>(
        &self,
        problem: &ConvProblem,
        budget: BudgetState,
        store: &TuningStore,
        limit: Duration,
        mut time: impl FnMut(&Plan<C::Kernel>) -> Result<f64, E>,
    ) -> Result<Option<TuneOutcome>, E> {
        let started = std::time::Instant::now();
        // Under size-independent rounding the candidates are the model's algorithm's only
        // (see `Dispatcher::with_tuning_within_algorithm`).
        let default = self.choose(problem, budget).ok().filter(|p| p.chunk_count() == 1);
        let mut candidates: Vec<Plan<C::Kernel>> = default.iter().cloned().collect();
        for plan in self.whole_problem_candidates(problem, budget) {
            if !candidates.iter().any(|c| c.algorithm() == plan.algorithm() && c.kernel() == plan.kernel()) {
                candidates.push(plan);
            }
        }
        let mut timings = Vec::new();
        let mut best: Option<(usize, f64)> = None;
        for (i, plan) in candidates.iter().enumerate() {
            if i > 0 && started.elapsed() >= limit {
                break;
            }
            let seconds = time(plan)?;
            timings.push((plan.algorithm(), plan.kernel().to_string(), seconds));
            if best.is_none_or(|(_, s)| seconds < s) {
                best = Some((i, seconds));
            }
        }
        let Some((i, seconds)) = best else { return Ok(None) };
        let entry =
            TunedEntry { algorithm: candidates[i].algorithm(), kernel: candidates[i].kernel().to_string(), seconds };
        store.record(&self.catalog().tuning_key(), problem, entry.clone());
        self.forget(problem);
        let (default_kernel, default_seconds) = match &default {
            Some(d) => (d.kernel().to_string(), timings[0].2),
            None => (String::from("(none runs it whole)"), f64::NAN),
        };
        Ok(Some(TuneOutcome { timings, best: entry, default_kernel, default_seconds }))
    }
}

/// An explicit tuning run over a model (`--tune`): each problem the model meets without a
/// stored winner is timed ([`Dispatcher::tune`]) until the session's time limit is spent;
/// the rest keep the cost model's plan. Shared by the threads of one device.
pub struct TuneSession {
    store: Arc<TuningStore>,
    limit: Duration,
    started: Instant,
    log: Mutex<Vec<(String, TuneOutcome)>>,
    /// Problems met after the limit was spent (left untuned).
    untuned: Mutex<Vec<String>>,
}

impl TuneSession {
    pub fn new(store: Arc<TuningStore>, limit: Duration) -> Self {
        TuneSession { store, limit, started: Instant::now(), log: Mutex::default(), untuned: Mutex::default() }
    }

    pub fn store(&self) -> &Arc<TuningStore> {
        &self.store
    }

    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Tunes `problem` on `dispatcher` unless its store already holds a winner for it;
    /// past the limit, notes it as untuned instead. `time` runs a plan and returns its
    /// seconds (a candidate that fails to run should answer `f64::INFINITY`).
    pub fn tune_if_new<C: AlgorithmCatalog, E>(
        &self,
        dispatcher: &Dispatcher<C>,
        problem: &ConvProblem,
        budget: BudgetState,
        time: impl FnMut(&Plan<C::Kernel>) -> Result<f64, E>,
    ) -> Result<(), E> {
        if self.store.lookup(&dispatcher.catalog().tuning_key(), problem).is_some() {
            return Ok(());
        }
        let Some(left) = self.limit.checked_sub(self.started.elapsed()).filter(|d| !d.is_zero()) else {
            let mut untuned = self.untuned.lock().expect("tune session poisoned");
            let name = problem.to_string();
            if !untuned.contains(&name) {
                untuned.push(name);
            }
            return Ok(());
        };
        if let Some(outcome) = dispatcher.tune(problem, budget, &self.store, left, time)? {
            tracing::info!(
                target: "conv_engine::tuning",
                problem = %problem,
                best = %outcome.best.kernel,
                best_ms = outcome.best.seconds * 1e3,
                default = %outcome.default_kernel,
                default_ms = outcome.default_seconds * 1e3,
                candidates = outcome.timings.len(),
                "tuned"
            );
            self.log.lock().expect("tune session poisoned").push((problem.to_string(), outcome));
        }
        Ok(())
    }

    /// Saves the store and returns the session's report: one line per tuned problem (the
    /// winner and the default with their times), the untuned count, the time spent.
    pub fn finish(&self) -> std::io::Result<String> {
        self.store.save()?;
        let log = self.log.lock().expect("tune session poisoned");
        let untuned = self.untuned.lock().expect("tune session poisoned");
        let mut s = String::new();
        for (problem, o) in log.iter() {
            let gain = o.default_seconds / o.best.seconds;
            s.push_str(&format!(
                "  {problem}\n    best {} {:.3} ms, default {} {:.3} ms ({gain:.2}x), {} candidates\n",
                o.best.kernel,
                o.best.seconds * 1e3,
                o.default_kernel,
                o.default_seconds * 1e3,
                o.timings.len()
            ));
        }
        s.push_str(&format!(
            "tuned {} problem(s) in {:.1} s of a {:.0} s limit; {} left to the cost model (limit spent){}",
            log.len(),
            self.started.elapsed().as_secs_f64(),
            self.limit.as_secs_f64(),
            untuned.len(),
            self.store.path().map(|p| format!("; store {}", p.display())).unwrap_or_default()
        ));
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::{Chunk, Chunking};
    use candle_core::DType;

    /// Two algorithms: A with kernels a1 (the model's pick) and a2, both needing 100
    /// bytes; B with one kernel and none. The model says a1 is fastest.
    struct Toy;
    impl AlgorithmCatalog for Toy {
        type Kernel = String;
        fn device_key(&self) -> String {
            "toy".into()
        }
        fn algorithms(&self) -> Vec<Algorithm> {
            vec![Algorithm::ImplicitGemm, Algorithm::Direct]
        }
        fn kernel(&self, alg: Algorithm, _: &ConvProblem, _: Chunking, _: usize) -> Option<String> {
            Some(if alg == Algorithm::ImplicitGemm { "a1" } else { "b" }.into())
        }
        fn kernel_candidates(&self, alg: Algorithm, _: &ConvProblem, _: Chunking, _: usize) -> Vec<String> {
            let names: &[&str] = if alg == Algorithm::ImplicitGemm { &["a1", "a2"] } else { &["b"] };
            names.iter().map(|s| s.to_string()).collect()
        }
        fn workspace_bytes(&self, k: &String, _: &ConvProblem, _: &Chunk, _: usize) -> Option<usize> {
            Some(if k == "b" { 0 } else { 100 })
        }
        fn estimated_seconds(&self, k: &String, _: &ConvProblem, _: &Chunk) -> f64 {
            match k.as_str() {
                "a1" => 1.0,
                "a2" => 2.0,
                _ => 3.0,
            }
        }
    }

    fn problem(dtype: DType) -> ConvProblem {
        let params = crate::problem::Conv2dParams::default().with_padding(1);
        ConvProblem::conv2d(&[1, 64, 32, 32], &[64, 64, 3, 3], dtype, dtype, &params).unwrap()
    }

    /// Every candidate is timed, the model's pick first; the fastest is stored and then
    /// planned, with its measured time; without room for its workspace the model plans.
    #[test]
    fn tune_times_every_candidate_and_the_winner_is_planned() {
        let store = Arc::new(TuningStore::in_memory());
        let d = Dispatcher::new(Toy).with_tuning(store.clone());
        let p = problem(DType::F16);
        let roomy = BudgetState { budget: 1 << 20, live: 0 };
        assert_eq!(d.plan(&p, roomy).unwrap().kernel(), "a1");
        let measured = |k: &str| match k {
            "a1" => 3e-3,
            "a2" => 1e-3,
            _ => 2e-3,
        };
        let mut order = Vec::new();
        let outcome = d
            .tune(&p, roomy, &store, Duration::from_secs(60), |plan| {
                order.push(plan.kernel().clone());
                Ok::<f64, ()>(measured(plan.kernel()))
            })
            .unwrap()
            .expect("candidates run whole");
        assert_eq!(order, ["a1", "a2", "b"]);
        assert_eq!((outcome.best.kernel.as_str(), outcome.best.seconds), ("a2", 1e-3));
        assert_eq!((outcome.default_kernel.as_str(), outcome.default_seconds), ("a1", 3e-3));
        let plan = d.plan(&p, roomy).unwrap();
        assert_eq!((plan.kernel().as_str(), plan.measured(), plan.estimated_seconds()), ("a2", true, 1e-3));
        // 50 bytes: a2's 100 do not fit, so the model plans (B, which needs none).
        let tight = BudgetState { budget: 50, live: 0 };
        let plan = d.plan(&p, tight).unwrap();
        assert_eq!((plan.kernel().as_str(), plan.measured()), ("b", false));
        // Another dtype has no entry: the model's choice.
        assert_eq!(d.plan(&problem(DType::F32), roomy).unwrap().kernel(), "a1");
        // A limit already spent times only the first candidate (the model's own plan).
        let other = Dispatcher::new(Toy);
        let q = problem(DType::BF16);
        let mut n = 0;
        other
            .tune(&q, roomy, &store, Duration::ZERO, |_| {
                Ok::<f64, ()>({
                    n += 1;
                    1.0
                })
            })
            .unwrap()
            .unwrap();
        assert_eq!(n, 1);
        // A failing run is the caller's error, and nothing is stored for it.
        let r = Dispatcher::new(Toy).tune(&problem(DType::F32), roomy, &store, Duration::from_secs(1), |_| Err("boom"));
        assert_eq!(r.unwrap_err(), "boom");
        assert!(store.lookup("toy", &problem(DType::F32)).is_none());
    }

    /// Under size-independent rounding only the model's algorithm's kernels are timed,
    /// and a stored winner of another algorithm is not planned.
    #[test]
    fn within_one_algorithm_the_algorithm_stays_the_models() {
        let store = Arc::new(TuningStore::in_memory());
        let d = Dispatcher::new(Toy).with_tuning_within_algorithm(store.clone());
        let (p, roomy) = (problem(DType::F16), BudgetState { budget: 1 << 20, live: 0 });
        let mut order = Vec::new();
        let o = d
            .tune(&p, roomy, &store, Duration::from_secs(60), |plan| {
                order.push(plan.kernel().clone());
                Ok::<f64, ()>(if plan.kernel() == "a2" { 1.0 } else { 2.0 })
            })
            .unwrap()
            .unwrap();
        assert_eq!(order, ["a1", "a2"], "B is another algorithm");
        assert_eq!(o.best.kernel, "a2");
        assert_eq!(d.plan(&p, roomy).unwrap().kernel(), "a2");
        let q = problem(DType::F32);
        store.record("toy", &q, TunedEntry { algorithm: Algorithm::Direct, kernel: "b".into(), seconds: 1e-9 });
        let plan = d.plan(&q, roomy).unwrap();
        assert_eq!((plan.kernel().as_str(), plan.measured()), ("a1", false));
    }

    #[test]
    fn entries_survive_a_save_and_a_reopen_and_bad_lines_are_named() {
        let dir = std::env::temp_dir().join(format!("rv-tuning-{}", std::process::id()));
        let path = dir.join("sub").join("tuning.tsv");
        let _ = std::fs::remove_dir_all(&dir);
        let (store, skipped) = TuningStore::open(&path).unwrap();
        assert!(store.is_empty() && skipped.is_empty());
        let (p, q) = (problem(DType::F16), problem(DType::F32));
        let e = TunedEntry {
            algorithm: Algorithm::ImplicitGemm,
            kernel: "nhwc mma 128x128_2x2 split-K 2".into(),
            seconds: 1.5e-3,
        };
        store.record("dev/a", &p, e.clone());
        store.record("dev/b", &p, TunedEntry { seconds: 2.0, ..e.clone() });
        store.save().unwrap();
        let (again, skipped) = TuningStore::open(&path).unwrap();
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(again.lookup("dev/a", &p), Some(e.clone()));
        assert_eq!(again.lookup("dev/b", &p).unwrap().seconds, 2.0);
        assert_eq!(again.lookup("dev/a", &q), None, "another dtype is another problem");
        assert_eq!(again.lookup("dev/c", &p), None, "another device key starts afresh");
        // Damaged lines are skipped with their line numbers, the good ones kept.
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("only\ttwo\n");
        text.push_str(&format!("dev/a\t{q}\tNoSuchAlgorithm\tk\t1e-3\n"));
        text.push_str(&format!("dev/a\t{q}\tDirect\tk\t-1\n"));
        std::fs::write(&path, text).unwrap();
        let (again, skipped) = TuningStore::open(&path).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(skipped.iter().map(|s| s.line).collect::<Vec<_>>(), vec![4, 5, 6], "{skipped:?}");
        assert!(skipped[1].reason.contains("NoSuchAlgorithm"), "{skipped:?}");
        // Another version's file: nothing trusted.
        std::fs::write(&path, "# rocm-vision tuning v9: ...\ndev/a\tx\tDirect\tk\t1\n").unwrap();
        let (again, skipped) = TuningStore::open(&path).unwrap();
        assert!(again.is_empty() && skipped.len() == 1, "{skipped:?}");
        // An unreadable store (a folder in its place) is an error naming it.
        let e = TuningStore::open(&dir).err().expect("a folder is not a store");
        assert!(e.to_string().contains("tuning store"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
