//! `tilec watch [PATHS]`: on every save, the file's diagnostics and, for each kernel instance whose
//! generated code changed, one status line: compile time, run time and bandwidth, and the check.
//!
//! The database lives for the whole session, so a save re-runs only the queries the edit reaches
//! (salsa); an instance whose CUDA text is what it was is not compiled or launched again. That is
//! decided on the memoized result of the CUDA query (`tilec_db::cuda_source`): when the edit did
//! not reach an instance's thread programs the query is not re-run and returns the very `Arc` the
//! session kept, so nothing is printed or compared; only a re-run query's text is compared.
//!
//! Files are watched with notify through notify-debouncer-full, which folds a burst of saves (and
//! an editor's write-to-temporary-then-rename) into one batch: the contents read after the batch
//! win. A file that no longer exists is dropped; a file that appears is added. Nothing a user
//! writes stops the loop: a syntax error is a diagnostic, a GPU fault a status line (and a fresh
//! context next time).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use notify::RecursiveMode;
use notify_debouncer_full::{DebounceEventResult, new_debouncer};
use serde_json::json;
use tilec_db::{
    Instance, RootDatabase, Settings, SourceFile, cuda_source, outline, thread_programs_for,
};
use tilec_ir::{Target, ThreadProgram};
use tilec_runtime::emulator::ErrorKind;
use tilec_runtime::tensor::RandomError;
use tilec_runtime::{CudaDevice, inputs, run_program_within};

use crate::discover::{FileId, file_id, is_regular_file};
use crate::run::{CheckVerdict, check_within};
use crate::workspace::{collect_python_files, manifest_instances_within};
use crate::{Format, render};

/// Carries the fingerprints of instances that failed on the GPU across a restart, one per line.
const FAULTED_ENV: &str = "TILEC_WATCH_GPU_FAILED";

/// How long the debouncer waits for a burst of saves to settle.
const DEBOUNCE: Duration = Duration::from_millis(50);

/// How often the roots are looked at between events: a root deleted and created again is watched
/// again within this time (the system's watch ends with the folder it was on).
const ROOT_POLL: Duration = Duration::from_millis(250);

#[derive(Debug)]
pub(crate) struct WatchOptions {
    pub paths: Vec<PathBuf>,
    pub run: bool,
    pub format: Format,
    pub target: Option<String>,
    /// How long one emulated launch may run before it is stopped (`--emulator-budget`).
    pub emulator_budget: Duration,
}

/// The session: the database, the files in it, and what each instance last generated.
struct Session {
    db: RootDatabase,
    /// The paths being watched: the tilec.toml search stops at their workspace root.
    roots: Vec<PathBuf>,
    files: BTreeMap<PathBuf, SourceFile>,
    /// The identity of each file in `files`: an event for another path to the same file (through
    /// a linked folder) updates the file under the path it was first found by.
    identities: BTreeMap<FileId, PathBuf>,
    /// (file, kernel, instance) → the CUDA last built for it, as the CUDA query returned it.
    built: BTreeMap<(PathBuf, String, u32), Arc<[String]>>,
    target: Target,
    format: Format,
    runner: Runner,
    /// Instances (with their code) that failed on the GPU in an earlier incarnation of this session:
    /// not launched again until their code changes.
    faulted_before: BTreeSet<String>,
}

/// Where instances run: the GPU, opened on first use, or the emulator.
struct Runner {
    run: bool,
    /// `None` until first use, and after a failure until the next attempt.
    device: Option<CudaDevice>,
    gpu_unavailable: bool,
    /// How long one emulated launch may run.
    emulator_budget: Duration,
    /// A GPU run failed: CUDA may be unusable in this process for good (a fault is sticky), so the
    /// session restarts itself (see [`Session::restart_after_gpu_failure`]).
    faulted: bool,
}

pub(crate) fn watch(options: &WatchOptions) -> Result<ExitCode> {
    let target = match options.target.as_deref() {
        Some(name) => Target::from_name(name)
            .with_context(|| format!("unknown target `{name}` (expected sm_80 or sm_90)"))?,
        None => Target::default(),
    };
    let roots: Vec<PathBuf> = if options.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        options.paths.clone()
    };
    let (sender, receiver) = mpsc::channel::<Vec<PathBuf>>();
    let mut debouncer = new_debouncer(DEBOUNCE, None, move |result: DebounceEventResult| {
        if let Ok(events) = result {
            // Reading a file is an event too (inotify's open and close): only changes count, or
            // every report would trigger the next.
            let paths = events
                .into_iter()
                .filter(|e| !matches!(e.event.kind, notify::EventKind::Access(_)))
                .flat_map(|e| e.event.paths)
                .collect::<Vec<_>>();
            if paths.is_empty() {
                return;
            }
            // The receiver is gone only when the session ends.
            let _ = sender.send(paths);
        }
    })
    .context("cannot start watching files")?;
    let mut armed = Roots::arm(&roots, &mut debouncer)?;
    let db = RootDatabase::default();
    let _settings = Settings::builder(target, Vec::new())
        .durability(salsa::Durability::HIGH)
        .new(&db);
    let mut session = Session {
        db,
        roots: roots.clone(),
        files: BTreeMap::new(),
        identities: BTreeMap::new(),
        built: BTreeMap::new(),
        target,
        format: options.format,
        faulted_before: std::env::var(FAULTED_ENV)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect(),
        runner: Runner {
            run: options.run,
            device: None,
            gpu_unavailable: false,
            emulator_budget: options.emulator_budget,
            faulted: false,
        },
    };
    let initial = collect_python_files(&roots)?;
    session.refresh(&initial)?;
    loop {
        let mut batch = match receiver.recv_timeout(ROOT_POLL) {
            Ok(batch) => batch,
            Err(mpsc::RecvTimeoutError::Timeout) => Vec::new(),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        };
        // Saves that arrived while the last batch was processed join this one.
        while let Ok(more) = receiver.try_recv() {
            batch.extend(more);
        }
        // A root that went away or came back brings its files along with the batch.
        batch.extend(armed.check(&mut debouncer, &session.files));
        let changed: BTreeSet<PathBuf> = batch
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "py"))
            .map(|p| normalize(&p))
            .collect();
        if !changed.is_empty() {
            session.refresh(&changed.into_iter().collect::<Vec<_>>())?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

type Debouncer = notify_debouncer_full::Debouncer<
    notify::RecommendedWatcher,
    notify_debouncer_full::RecommendedCache,
>;

/// The watched roots and the folder or file each watch was put on. The system's watch (inotify's)
/// belongs to the folder, not its name: once a root is deleted, nothing is reported for a new
/// folder of the same name. So the roots are looked at every [`ROOT_POLL`], and a root whose
/// identity changed is watched again and its files read afresh.
struct Roots {
    roots: Vec<(PathBuf, Option<FileId>)>,
}

impl Roots {
    /// Watches every root; a root that does not exist at the start is an error (a typo).
    fn arm(roots: &[PathBuf], debouncer: &mut Debouncer) -> Result<Roots> {
        let mut armed = Vec::new();
        for root in roots {
            debouncer
                .watch(root, RecursiveMode::Recursive)
                .with_context(|| format!("cannot watch {}", root.display()))?;
            armed.push((root.clone(), file_id(root)));
        }
        Ok(Roots { roots: armed })
    }

    /// Re-arms the roots that were replaced or came back, and returns the paths to read again: the
    /// `.py` files now under each such root, and the files known under a root that went away.
    fn check(
        &mut self,
        debouncer: &mut Debouncer,
        known: &BTreeMap<PathBuf, SourceFile>,
    ) -> Vec<PathBuf> {
        let mut paths = Vec::new();
        for (root, armed) in &mut self.roots {
            let now = file_id(root);
            if now == *armed {
                continue;
            }
            // The old watch went with the old folder; a failure to remove it is expected.
            let _ = debouncer.unwatch(root.as_path());
            let rearmed = now.is_some()
                && debouncer
                    .watch(root.as_path(), RecursiveMode::Recursive)
                    .is_ok();
            // A root that exists but cannot be watched yet is tried again at the next look.
            *armed = if rearmed { now } else { None };
            let absolute = normalize(root);
            paths.extend(known.keys().filter(|p| p.starts_with(&absolute)).cloned());
            if rearmed {
                paths.extend(collect_python_files(std::slice::from_ref(root)).unwrap_or_default());
            }
        }
        paths
    }
}

/// An absolute form of `path`, so that notify's paths and the initial scan's agree.
fn normalize(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_owned())
}

impl Session {
    /// Re-reads `paths` (added, edited or gone) and reports on each, then says the session is idle.
    /// A known file that is gone is dropped even when the event named it by another path.
    fn refresh(&mut self, paths: &[PathBuf]) -> Result<()> {
        let started = Instant::now();
        let mut updated = Vec::new();
        for path in paths {
            if let Some(path) = self.read(&normalize(path))? {
                updated.push(path);
            }
        }
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|path| !is_regular_file(path))
            .cloned()
            .collect();
        for path in gone {
            self.remove(&path)?;
        }
        // Imports resolve to the watched files; the files importing an edited one are reported
        // again, since their analysis may have changed with it.
        let all: Vec<SourceFile> = self.files.values().copied().collect();
        tilec_db::register_files(&mut self.db, &all);
        let importers = self.importers_of(&updated);
        for path in updated.iter().chain(&importers) {
            self.report_file(path)?;
        }
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        self.emit(
            json!({"kind": "idle", "files": self.files.len(), "ms": ms}),
            &format!(
                "-- watching {} file(s); updated in {ms:.1} ms",
                self.files.len()
            ),
        )
    }

    /// Reads one changed path into the session; returns the path it is known by when it was read.
    /// Only regular files are read: opening a FIFO would block the session until someone wrote
    /// to it, so a path that is not a regular file (any more) counts as gone.
    fn read(&mut self, path: &Path) -> Result<Option<PathBuf>> {
        let Some(id) = file_id(path).filter(|_| is_regular_file(path)) else {
            self.remove(path)?;
            return Ok(None);
        };
        let path = match self.identities.get(&id) {
            Some(known) => known.clone(),
            None => path.to_owned(),
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                self.update(&path, id, text);
                Ok(Some(path))
            }
            Err(error) => {
                self.emit(
                    json!({"kind": "error", "file": path.display().to_string(), "message": error.to_string()}),
                    &format!("{}: cannot read: {error}", path.display()),
                )?;
                Ok(None)
            }
        }
    }

    /// The watched files other than `edited` that import one of them, directly or not.
    fn importers_of(&self, edited: &[PathBuf]) -> Vec<PathBuf> {
        let edited_files: Vec<SourceFile> = edited
            .iter()
            .filter_map(|path| self.files.get(path).copied())
            .collect();
        self.files
            .iter()
            .filter(|(path, _)| !edited.contains(path))
            .filter(|(_, file)| {
                edited_files
                    .iter()
                    .any(|edited| tilec_db::imports_module(&self.db, **file, *edited))
            })
            .map(|(path, _)| path.clone())
            .collect()
    }

    fn update(&mut self, path: &Path, id: FileId, text: String) {
        use salsa::Setter;
        self.identities.insert(id, path.to_owned());
        match self.files.get(path) {
            Some(&file) => {
                if *file.text(&self.db) != text {
                    file.set_text(&mut self.db).to(text);
                }
            }
            None => {
                let manifest = manifest_instances_within(path, &self.roots);
                let file = SourceFile::new(&self.db, path.to_owned(), text, manifest);
                self.files.insert(path.to_owned(), file);
            }
        }
    }

    fn remove(&mut self, path: &Path) -> Result<()> {
        if self.files.remove(path).is_none() {
            return Ok(());
        }
        self.identities.retain(|_, known| known != path);
        self.built.retain(|(file, _, _), _| file != path);
        self.emit(
            json!({"kind": "removed", "file": path.display().to_string()}),
            &format!("{}: removed", path.display()),
        )
    }

    /// The file's diagnostics, then a status line for each instance whose code changed.
    fn report_file(&mut self, path: &Path) -> Result<()> {
        let Some(&file) = self.files.get(path) else {
            return Ok(());
        };
        if !outline(&self.db, file).uses_tilelang {
            return Ok(());
        }
        let (mut errors, mut warnings) = (0, 0);
        for diagnostic in tilec_db::file_diagnostics(&self.db, file) {
            match diagnostic.severity {
                tilec_ir::Severity::Error => errors += 1,
                tilec_ir::Severity::Warning => warnings += 1,
                tilec_ir::Severity::Info | tilec_ir::Severity::NotAnalysed => {}
            }
            let json = render::diagnostic_json(&self.db, file, diagnostic);
            let text = render::human(path, file.text(&self.db), diagnostic, false);
            self.emit(json, &text)?;
        }
        self.emit(
            json!({"kind": "checked", "file": path.display().to_string(), "errors": errors, "warnings": warnings}),
            &format!("{}: {errors} error(s), {warnings} warning(s)", path.display()),
        )?;
        let instances: Vec<Instance<'_>> = tilec_db::instances(&self.db, file).to_vec();
        let mut current = BTreeSet::new();
        for instance in instances {
            let key = (
                path.to_owned(),
                instance.kernel(&self.db).name(&self.db).clone(),
                instance.index(&self.db),
            );
            current.insert(key.clone());
            // The session's target is the settings' too, so this shares the lowering behind the
            // file's diagnostics.
            let Some(cuda) = cuda_source(&self.db, instance, self.target).clone() else {
                self.built.remove(&key);
                continue;
            };
            // The same `Arc` means the query was not re-run: the instance's programs are what
            // they were. Only a re-run query's text is compared.
            let unchanged = self
                .built
                .get(&key)
                .is_some_and(|built| Arc::ptr_eq(built, &cuda) || *built == cuda);
            if unchanged {
                continue;
            }
            let lowered = thread_programs_for(&self.db, instance, self.target);
            let Ok(programs) = lowered.as_ref().clone() else {
                self.built.remove(&key);
                continue;
            };
            let fingerprint = fingerprint(&key, &cuda);
            if self.faulted_before.contains(&fingerprint) {
                let status = json!({"result": "skipped", "reason": "this code failed on the GPU before the restart; save a change to run it again"});
                self.status_line(&key, status)?;
                self.built.insert(key, cuda);
                continue;
            }
            let status = match self.runner.status(&self.db, instance, (&programs, &cuda)) {
                Ok(fields) => fields,
                Err(error) => json!({"result": "failed", "error": format!("{error:#}")}),
            };
            self.status_line(&key, status)?;
            if std::mem::take(&mut self.runner.faulted) {
                self.restart_after_gpu_failure(fingerprint)?;
            }
            self.built.insert(key, cuda);
        }
        self.built.retain(|k, _| k.0 != path || current.contains(k));
        Ok(())
    }

    /// After a GPU failure: CUDA reports a fault to every later call in the process ("the process
    /// must be terminated and relaunched"), so the session replaces itself with a fresh `tilec
    /// watch` (same arguments, same terminal), telling it which code failed so that it does not
    /// launch it again until it changes. The new session re-reads every file.
    fn restart_after_gpu_failure(&self, failed: String) -> Result<()> {
        let mut carried: Vec<&str> = self.faulted_before.iter().map(String::as_str).collect();
        carried.push(&failed);
        self.emit(
            json!({"kind": "restart", "reason": "gpu-failure"}),
            "-- the GPU run failed; restarting tilec watch with a fresh CUDA context",
        )?;
        restart_self(&carried.join("\n"))
    }

    fn status_line(
        &self,
        (file, kernel, index): &(PathBuf, String, u32),
        mut fields: serde_json::Value,
    ) -> Result<()> {
        let human = human_status(file, kernel, *index, &fields);
        fields["kind"] = json!("status");
        fields["file"] = json!(file.display().to_string());
        fields["kernel"] = json!(kernel);
        fields["instance"] = json!(index);
        self.emit(fields, &human)
    }

    fn emit(&self, json: serde_json::Value, human: &str) -> Result<()> {
        let mut out = std::io::stdout().lock();
        match self.format {
            Format::Json => writeln!(out, "{json}")?,
            Format::Human => writeln!(out, "{human}")?,
        }
        out.flush()?;
        Ok(())
    }
}

impl Runner {
    /// Compiles and runs one instance (when running is on) and returns the status fields.
    fn status(
        &mut self,
        db: &RootDatabase,
        instance: Instance<'_>,
        (programs, cuda): (&[ThreadProgram], &[String]),
    ) -> Result<serde_json::Value> {
        if !self.run {
            return Ok(json!({"result": "lowered", "launches": programs.len()}));
        }
        let scalars = crate::run::scalar_values(db, instance, programs)?;
        let program = programs.first().context("no launch")?;
        let device = self.device();
        let threads = crate::run::launch_threads(program, &scalars)?;
        if device.is_none() && threads > crate::run::CHECK_LIMIT_THREADS {
            return Ok(json!({
                "result": "skipped", "device": "emulator",
                "reason": format!("{threads} threads is too many for the emulator; add a smaller instance in tilec.toml"),
            }));
        }
        // On the emulator the budget covers filling the inputs too: at a kernel's real sizes that
        // alone can take seconds.
        let started = Instant::now();
        let deadline = device.is_none().then(|| started + self.emulator_budget);
        let mut tensors =
            match inputs::make_tensors_before(program, &scalars, (0, device.is_some()), deadline) {
                Ok(tensors) => tensors,
                Err(RandomError::OutOfTime) => {
                    return Ok(json!({
                        "result": "skipped", "device": "emulator",
                        "reason": over_budget(self.emulator_budget),
                    }));
                }
                Err(RandomError::TooLarge(message)) => return Err(anyhow::anyhow!(message)),
            };
        let bytes = inputs::bytes_moved(program, &tensors) as f64;
        if let Some(device) = device {
            let inputs = tensors.clone();
            // After a failure the device is dropped: a fault leaves its context unusable, so the
            // next run opens a fresh one.
            let run = crate::run::run_on_gpu(
                &device,
                programs,
                cuda,
                &scalars,
                &mut tensors,
                false,
                None,
            );
            let (seconds, compile) = match run {
                Ok(times) => times,
                Err(error) => {
                    drop(device);
                    self.faulted = true;
                    return Err(error);
                }
            };
            self.device = Some(device);
            let budget = Some(self.emulator_budget);
            let verdict = check_within(programs, &scalars, inputs, &tensors, budget)?;
            let mut fields = json!({
                "result": "ok", "device": "gpu",
                "compile_ms": compile * 1e3, "run_us": seconds * 1e6,
                "gbps": bytes / seconds.max(1e-12) / 1e9,
            });
            let (check, detail) = match verdict {
                CheckVerdict::Matches(lines) => ("matches", lines.join("; ")),
                CheckVerdict::Differs(lines) => ("differs", lines.join("; ")),
                CheckVerdict::Skipped(why) => ("skipped", why),
            };
            fields["check"] = json!(check);
            fields["check_detail"] = json!(detail);
            return Ok(fields);
        }
        let budget = self.emulator_budget;
        for program in programs {
            let left = budget.saturating_sub(started.elapsed());
            match run_program_within(program, &mut tensors, &scalars, Some(left)) {
                Ok(_) => {}
                Err(error) if matches!(error.kind, ErrorKind::OutOfTime { .. }) => {
                    return Ok(json!({
                        "result": "skipped", "device": "emulator",
                        "reason": over_budget(budget),
                    }));
                }
                Err(error) => return Err(anyhow::anyhow!("emulator: {error}")),
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        Ok(json!({
            "result": "ok", "device": "emulator", "check": "reference",
            "run_us": seconds * 1e6, "gbps": bytes / seconds.max(1e-12) / 1e9,
        }))
    }

    /// The GPU, opened on first use (and again after a failure took it away).
    fn device(&mut self) -> Option<CudaDevice> {
        if let Some(device) = self.device.take() {
            return Some(device);
        }
        if self.gpu_unavailable {
            return None;
        }
        match CudaDevice::open() {
            Ok(device) => Some(device),
            Err(_) => {
                self.gpu_unavailable = true;
                None
            }
        }
    }
}

/// Why an emulated launch was stopped, for its status line.
pub(crate) fn over_budget(budget: Duration) -> String {
    format!(
        "the emulator did not finish within its budget of {:.1} s (--emulator-budget); a \
         smaller instance in tilec.toml runs within it",
        budget.as_secs_f64()
    )
}

/// `file kernel#i: compiled in 412 ms, ran in 80.6 µs (3331.0 GB/s) on the GPU`.
fn human_status(file: &Path, kernel: &str, index: u32, fields: &serde_json::Value) -> String {
    let number = |key: &str| fields[key].as_f64().unwrap_or(0.0);
    let what = match fields["result"].as_str() {
        Some("lowered") => "lowered".to_owned(),
        Some("skipped") => format!("not run: {}", fields["reason"].as_str().unwrap_or("")),
        Some("failed") => format!("FAILED: {}", fields["error"].as_str().unwrap_or("")),
        _ if fields["device"] == "gpu" => format!(
            "compiled in {:.0} ms, ran in {:.1} µs ({:.1} GB/s) on the GPU; {}",
            number("compile_ms"),
            number("run_us"),
            number("gbps"),
            check_phrase(fields)
        ),
        _ => format!(
            "ran in {:.1} ms ({:.3} GB/s) on the CPU emulator",
            number("run_us") / 1e3,
            number("gbps")
        ),
    };
    format!("{} {kernel}#{index}: {what}", file.display())
}

/// The check's part of a GPU status line.
fn check_phrase(fields: &serde_json::Value) -> String {
    let detail = fields["check_detail"].as_str().unwrap_or("");
    match fields["check"].as_str() {
        Some("matches") => "matches the emulator".to_owned(),
        Some("differs") => format!("WRONG: {detail}"),
        _ => format!("not checked: {detail}"),
    }
}

/// Identifies an instance and its generated code (the hash is stable for one build of tilec, which
/// is all a restart needs).
fn fingerprint((file, kernel, index): &(PathBuf, String, u32), cuda: &[String]) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    cuda.hash(&mut hasher);
    format!(
        "{}\t{kernel}\t{index}\t{:016x}",
        file.display(),
        hasher.finish()
    )
}

/// Replaces this process with a fresh `tilec` of the same arguments.
#[cfg(unix)]
fn restart_self(failed: &str) -> Result<()> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().context("cannot find the tilec executable to restart")?;
    let error = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(FAULTED_ENV, failed)
        .exec();
    Err(anyhow::Error::from(error).context("cannot restart tilec watch"))
}

#[cfg(not(unix))]
fn restart_self(_failed: &str) -> Result<()> {
    anyhow::bail!("the GPU failed and tilec watch cannot restart itself here; start it again")
}
