//! `tilec build [PATHS] --out DIR`: every kernel instance under the paths, lowered, printed as CUDA,
//! compiled to PTX when NVRTC is available, and described in a JSON file, through the content-addressed
//! cache of `cache`, so that a build pays only for kernels that changed since any earlier build.
//!
//! The work runs in three phases. Analysis and lowering run on this thread (salsa's database is not
//! shared between threads, and they take milliseconds). Each instance's lowering is first looked
//! up in the cache's tiers (`tiers.rs`: the local folder, then the remote store) by what the
//! lowering reads, and with it the compiled launches it names: an unchanged instance is neither
//! lowered nor compiled. The other instances are lowered, every launch still missing is looked up
//! by its CUDA source, and compilation, the slow part, runs for the rest on a pool of worker
//! threads; what the build made goes to the remote store at the end. The outputs are written
//! last, in a stable order.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tilec_db::{
    Db, Instance, SourceFile, cuda_source, lowering_diagnostics, outline, thread_programs_for,
};
use tilec_ir::thread::{Memory, ParamAccess};
use tilec_ir::{Target, ThreadProgram};
use tilec_runtime::cuda::{CompileSettings, compile_ptx, compute_cache_disabled};

use crate::cache::{
    Cache, CacheEntry, CacheRequest, InstanceEntry, InstanceRequest, LoweredLaunch, Request,
    encode_entry,
};
use crate::remote::{RemoteCache, RemoteMode};
use crate::tiers::{CacheStats, Wanted};
use crate::tuned::apply_tuned;
use crate::workspace::{InstanceSelection, Workspace, parse_target};
use crate::{Emit, Format, render};
use tilec_runtime::files::{Readers, write_atomically};
use tilec_runtime::tuned::TunedFor;

/// What `tilec build` was asked to do.
#[derive(Debug)]
pub(crate) struct BuildOptions {
    pub paths: Vec<PathBuf>,
    pub out: PathBuf,
    pub cache: PathBuf,
    /// `--kernel`, `--instance` and `--with` (one file only).
    pub selection: InstanceSelection,
    pub target: Option<String>,
    pub emit: Emit,
    pub format: Format,
    /// `--cache-remote-mode`: whether this build may write to the remote store.
    pub remote_mode: RemoteMode,
}

/// One launch to compile.
struct Unit {
    stem: String,
    cuda: String,
    request: CacheRequest,
    description: Value,
    /// The launch's entry when planning found it already (with its instance's lowering).
    found: Option<CacheEntry>,
    /// Whether planning looked the entry up already, found or not (it is not asked for again).
    looked_up: bool,
}

/// An instance and what became of it.
struct InstanceRecord {
    file: String,
    folder: PathBuf,
    kernel: String,
    index: u32,
    args: Value,
    diagnostics: Vec<Value>,
    units: Vec<usize>,
    /// The instance entry to store once the launches are built: the instance was lowered by this
    /// build.
    lowering: Option<InstanceRequest>,
}

/// How one unit was obtained.
enum Outcome {
    Built(CacheEntry),
    Cached(CacheEntry),
    Failed(String),
}

/// Builds every instance it can. The exit code is 0 when every instance was built, 1 when an
/// instance or a file failed (the outputs of the others are written all the same), and 2 when a
/// file could not be read (again after building the rest) or the build could not start (a bad
/// option, two files whose outputs would share a folder).
pub(crate) fn build(options: &BuildOptions) -> Result<ExitCode> {
    let started = Instant::now();
    let workspace = Workspace::load(&options.paths)?;
    let target = parse_target(options.target.as_deref())?
        .or(workspace.manifest_target)
        .unwrap_or_default();
    let _settings = workspace.apply_settings(target);
    let nvrtc = nvrtc_tag(options.emit)?;
    let cache = Cache::open(&options.cache)?;
    let url = crate::remote::configured_url(workspace.manifest_cache_remote.as_deref());
    let remote = crate::tiers::open_remote(url, options.remote_mode);
    let compile = nvrtc
        .is_some()
        .then(|| CompileSettings::for_arch(target.name()));
    let tiers = Tiers {
        local: &cache,
        remote: remote.as_ref(),
        report_wanted: compile.is_some() && compute_cache_disabled(),
    };
    let mut stats = CacheStats::for_remote(remote.as_ref());
    let plan = plan(&workspace, options, (target, &nvrtc), &tiers, &mut stats)?;
    refuse_shared_folders(&plan.instances, &options.out)?;
    let outcomes = obtain_all(&plan, &tiers, compile.as_ref(), options.format, &mut stats);
    crate::check::report_unreadable(&workspace);
    let mut summary = report_files(options, &plan.files)?;
    write_outputs(options, &plan, &outcomes, &mut summary)?;
    report_summary(options, &summary, &stats, &cache, started)?;
    Ok(if !workspace.unreadable.is_empty() {
        ExitCode::from(2)
    } else if summary.failed > 0 || summary.files_failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The NVRTC version, which keys the cache with the rest, or `None` when no PTX is wanted or NVRTC
/// is missing (`--emit ptx` makes that an error).
fn nvrtc_tag(emit: Emit) -> Result<Option<String>> {
    if emit == Emit::Cuda {
        return Ok(None);
    }
    match tilec_runtime::cuda::nvrtc_version() {
        Some((major, minor)) => Ok(Some(format!("nvrtc {major}.{minor}"))),
        None if emit == Emit::Ptx => {
            bail!(
                "--emit ptx needs NVRTC (libnvrtc.so, from the CUDA toolkit), which was not found"
            )
        }
        None => Ok(None),
    }
}

/// What phase 1 found: the instances and their launches, and the files that gave none.
#[derive(Default)]
struct Plan {
    instances: Vec<InstanceRecord>,
    units: Vec<Unit>,
    files: Vec<FileRecord>,
}

/// A file that imports TileLang but has no instance to build, and why.
struct FileRecord {
    file: String,
    /// The file's errors (a syntax error that hides its kernels); none when it simply defines no
    /// kernel, which is not an error.
    diagnostics: Vec<Value>,
}

/// The cache's tiers as a build reads them.
struct Tiers<'a> {
    local: &'a Cache,
    remote: Option<&'a RemoteCache>,
    /// Whether an entry without ptxas's report is to be rebuilt ([`lacks_wanted_report`]).
    report_wanted: bool,
}

/// An instance selected for the build, before it is lowered.
struct Selected<'db> {
    file: SourceFile,
    instance: Instance<'db>,
    record: InstanceRecord,
    request: InstanceRequest,
}

/// Phase 1: every selected instance, its lowering and launches from the cache or else lowered
/// now, and one unit per launch. A file without kernels, or whose kernels cannot be found for its
/// errors, is recorded and the others go on.
fn plan(
    workspace: &Workspace,
    options: &BuildOptions,
    (target, nvrtc): (Target, &Option<String>),
    tiers: &Tiers<'_>,
    stats: &mut CacheStats,
) -> Result<Plan> {
    let mut plan = Plan::default();
    let selected = select(workspace, options, target, &mut plan)?;
    let cached = cached_lowerings(&selected, (target, nvrtc), tiers, stats);
    let db = &workspace.db;
    for (selected, cached) in selected.into_iter().zip(cached) {
        let Selected {
            file,
            instance,
            mut record,
            request,
        } = selected;
        match cached {
            CachedLowering::Whole(units) => {
                stats.instance_hits += 1;
                for unit in units {
                    record.units.push(plan.units.len());
                    plan.units.push(unit);
                }
                plan.instances.push(record);
            }
            CachedLowering::Part(looked_up) => {
                record.lowering = Some(request);
                stats.lowered += usize::from(plan_instance(
                    db,
                    (file, instance),
                    record,
                    (target, nvrtc),
                    looked_up,
                    &mut plan,
                ));
            }
        }
    }
    Ok(plan)
}

/// Every instance the options select, with the request of its instance entry; the files that
/// give none are recorded in `plan`.
fn select<'db>(
    workspace: &'db Workspace,
    options: &BuildOptions,
    target: Target,
    plan: &mut Plan,
) -> Result<Vec<Selected<'db>>> {
    let db = &workspace.db;
    let selection = &options.selection;
    if !selection.with.is_empty() && workspace.files.len() != 1 {
        bail!("--with needs exactly one file");
    }
    let mut chosen = Vec::new();
    for &file in &workspace.files {
        if !outline(db, file).uses_tilelang {
            continue;
        }
        let selected = if selection.with.is_empty() {
            match selection.selected(db, file) {
                Ok(selected) => selected,
                // A folder build skips files without the requested kernel.
                Err(_) if selection.kernel.is_some() || selection.instance.is_some() => continue,
                Err(_) => {
                    plan.files.push(FileRecord {
                        file: file.path(db).display().to_string(),
                        diagnostics: file_errors(db, file),
                    });
                    continue;
                }
            }
        } else {
            vec![selection.pick(db, file)?]
        };
        let folder = output_folder(file.path(db), &options.paths);
        let inputs = file_inputs(workspace, file);
        for instance in selected {
            // A configuration `tilec tune` measured on a GPU of this architecture wins over the
            // call site's, unless the user named values with --with.
            let instance = if selection.with.is_empty() {
                apply_tuned(
                    db,
                    &options.cache,
                    file.path(db),
                    instance,
                    &TunedFor::Target(target),
                )
            } else {
                instance
            };
            chosen.push(Selected {
                file,
                instance,
                record: describe(db, file, instance, folder.clone()),
                request: instance_request(db, &inputs, instance, target),
            });
        }
    }
    Ok(chosen)
}

/// The request of an instance's entry: keyed by everything its lowering reads. The file's
/// [`file_inputs`] stand for its analysis and settings (the imported modules with the names they
/// are imported by, which decide where they resolve); the kernel, the instance and its arguments
/// (after `--with` and tuned values) for the instance; the target (in the request) for the rest.
fn instance_request(
    db: &dyn Db,
    file_inputs: &str,
    instance: Instance<'_>,
    target: Target,
) -> InstanceRequest {
    let index = instance.index(db).to_string();
    let args = format!("{:?}", instance.args(db));
    let kernel = instance.kernel(db).name(db);
    InstanceRequest::new(target.name(), &[file_inputs, kernel, &index, &args])
}

/// The digest of what every instance of `file` reads besides its own arguments: the file's text,
/// the workspace modules it imports with the names they are imported by, and the tilec.toml pass
/// configurations. Computed once per file.
fn file_inputs(workspace: &Workspace, file: SourceFile) -> String {
    let db = &workspace.db;
    let pass_configs = format!("{:?}", workspace.manifest_pass_configs);
    let imports = tilec_db::import_closure(db, file);
    let mut parts: Vec<&str> = vec![file.text(db).as_str(), pass_configs.as_str()];
    for (written, module) in &imports {
        parts.push(written);
        parts.push(module.text(db));
    }
    crate::cache::content_key(&parts)
}

/// What the cache holds of an instance's lowering.
enum CachedLowering {
    /// Its instance entry and the entries of all its launches: nothing to lower or compile.
    Whole(Vec<Unit>),
    /// Nothing, or an instance entry some of whose launch entries are missing: the instance is
    /// lowered, and what the launch look-ups gave is kept for its launches.
    Part(LaunchesLookedUp),
}

/// The launch entries looked up for an instance: those found, and the SHA-256 of the CUDA of
/// those that were not (to be compiled without being asked for again).
#[derive(Default)]
struct LaunchesLookedUp {
    found: Vec<CacheEntry>,
    missing: Vec<String>,
}

/// Looks each instance's entry up, then the launch entries of those found, in one batch per kind
/// (a remote store is asked concurrently).
fn cached_lowerings(
    selected: &[Selected<'_>],
    (target, nvrtc): (Target, &Option<String>),
    tiers: &Tiers<'_>,
    stats: &mut CacheStats,
) -> Vec<CachedLowering> {
    let stems: Vec<String> = selected
        .iter()
        .map(|s| format!("{}-{}", s.record.kernel, s.record.index))
        .collect();
    let wanted: Vec<Wanted<'_, InstanceRequest>> = selected
        .iter()
        .zip(&stems)
        .map(|(s, stem)| Wanted {
            stem,
            request: &s.request,
        })
        .collect();
    let (entries, found) = crate::tiers::look_up(
        &wanted,
        tiers.local,
        tiers.remote,
        |_| true,
        &mut stats.remote_down,
    );
    stats.bytes_down += found.bytes_down;
    // The launch entries every instance entry names, looked up together.
    let mut launches: Vec<(usize, String, LoweredLaunch, CacheRequest)> = Vec::new();
    for (position, entry) in entries.iter().enumerate() {
        let Some(InstanceEntry { launches: lowered }) = entry else {
            continue;
        };
        let count = lowered.len();
        for (launch, lowered) in lowered.iter().enumerate() {
            let stem = launch_stem(&selected[position].record, launch, count);
            let request =
                CacheRequest::for_source(target.name(), nvrtc.as_deref(), &lowered.source_sha256);
            launches.push((position, stem, lowered.clone(), request));
        }
    }
    let wanted: Vec<Wanted<'_, CacheRequest>> = launches
        .iter()
        .map(|(_, stem, _, request)| Wanted { stem, request })
        .collect();
    let launch_entries = look_up_launches(&wanted, tiers, stats);
    let mut units: Vec<Vec<Unit>> = selected.iter().map(|_| Vec::new()).collect();
    let mut whole: Vec<bool> = entries.iter().map(Option::is_some).collect();
    let mut part: Vec<LaunchesLookedUp> = selected
        .iter()
        .map(|_| LaunchesLookedUp::default())
        .collect();
    for ((position, stem, lowered, request), entry) in launches.into_iter().zip(launch_entries) {
        let Some(entry) = entry else {
            whole[position] = false;
            part[position].missing.push(lowered.source_sha256);
            continue;
        };
        part[position].found.push(entry.clone());
        units[position].push(Unit {
            stem,
            cuda: entry.cuda.clone(),
            request,
            description: lowered.description,
            found: Some(entry),
            looked_up: true,
        });
    }
    whole
        .into_iter()
        .zip(units)
        .zip(part)
        .map(|((whole, units), part)| {
            if whole {
                CachedLowering::Whole(units)
            } else {
                CachedLowering::Part(part)
            }
        })
        .collect()
}

/// The launch entries of `wanted` from the tiers (an entry lacking a ptxas report that can now be
/// had is rebuilt), their hits counted in the build's statistics.
fn look_up_launches(
    wanted: &[Wanted<'_, CacheRequest>],
    tiers: &Tiers<'_>,
    stats: &mut CacheStats,
) -> Vec<Option<CacheEntry>> {
    let (entries, found) = crate::tiers::look_up(
        wanted,
        tiers.local,
        tiers.remote,
        |entry| !lacks_wanted_report(entry, tiers.report_wanted),
        &mut stats.remote_down,
    );
    stats.local_hits += found.local_hits;
    stats.remote_hits += found.remote_hits;
    stats.bytes_down += found.bytes_down;
    entries
}

/// The name of a launch's output files: `kernel-index`, with `-launch` when there are several.
fn launch_stem(record: &InstanceRecord, launch: usize, launches: usize) -> String {
    if launches == 1 {
        format!("{}-{}", record.kernel, record.index)
    } else {
        format!("{}-{}-{launch}", record.kernel, record.index)
    }
}

/// One instance lowered into units, or recorded as failed with why; whether it lowered. A launch
/// whose CUDA was looked up already takes what that gave.
fn plan_instance(
    db: &dyn Db,
    (file, instance): (SourceFile, Instance<'_>),
    mut record: InstanceRecord,
    (target, nvrtc): (Target, &Option<String>),
    looked_up: LaunchesLookedUp,
    plan: &mut Plan,
) -> bool {
    // The programs and their CUDA, both lowered for the build's target (the configured one).
    let lowered = thread_programs_for(db, instance, target);
    let programs = match (lowered.as_ref(), cuda_source(db, instance, target)) {
        (Ok(programs), Some(sources)) => programs.iter().zip(sources.iter()),
        _ => {
            record.diagnostics = failure_diagnostics(db, file, instance);
            if record.diagnostics.is_empty() {
                // Every reason lacked a position; the instance still failed.
                record.diagnostics.push(json!({
                    "kind": "diagnostic",
                    "severity": "error",
                    "code": "cannot-lower",
                    "message": "the kernel could not be evaluated far enough to lower it",
                }));
            }
            plan.instances.push(record);
            return false;
        }
    };
    let launches = programs.len();
    for (launch, (program, cuda)) in programs.enumerate() {
        let request = CacheRequest::new(target.name(), nvrtc.as_deref(), cuda);
        let found = looked_up
            .found
            .iter()
            .find(|entry| &entry.cuda == cuda)
            .cloned();
        let missing = looked_up
            .missing
            .iter()
            .any(|sha| sha == request.source_sha256());
        record.units.push(plan.units.len());
        plan.units.push(Unit {
            stem: launch_stem(&record, launch, launches),
            cuda: cuda.clone(),
            request,
            description: launch_json(program),
            looked_up: found.is_some() || missing,
            found,
        });
    }
    plan.instances.push(record);
    true
}

/// The error diagnostics of a file, as the build reports them.
fn file_errors(db: &dyn Db, file: SourceFile) -> Vec<Value> {
    tilec_db::file_diagnostics(db, file)
        .iter()
        .filter(|d| d.severity.stops_analysis())
        .map(|d| render::diagnostic_json(db, file, d))
        .collect()
}

/// Refuses a build in which two source files would write into one output folder (`a/x.py` and
/// `b/x.py` built from the roots `a` and `b`), before anything is written: one file's outputs
/// would silently replace the other's.
fn refuse_shared_folders(instances: &[InstanceRecord], out: &Path) -> Result<()> {
    let mut owners: std::collections::BTreeMap<&Path, &str> = std::collections::BTreeMap::new();
    for record in instances {
        let owner = owners.entry(&record.folder).or_insert(&record.file);
        if *owner != record.file {
            bail!(
                "{} and {} would both write their outputs into {}; build them into separate \
                 --out folders, or build a folder that holds both (outputs keep the path below \
                 the folder built)",
                owner,
                record.file,
                out.join(&record.folder).display()
            );
        }
    }
    Ok(())
}

fn describe(
    db: &dyn Db,
    file: SourceFile,
    instance: Instance<'_>,
    folder: PathBuf,
) -> InstanceRecord {
    let args: serde_json::Map<String, Value> = instance
        .args(db)
        .iter()
        .map(|(name, value)| (name.clone(), render::const_json(value)))
        .collect();
    InstanceRecord {
        file: file.path(db).display().to_string(),
        folder,
        kernel: instance.kernel(db).name(db).clone(),
        index: instance.index(db),
        args: Value::Object(args),
        diagnostics: Vec::new(),
        units: Vec::new(),
        lowering: None,
    }
}

/// Why an instance cannot be built: its errors from `tilec check`, else the lowering's.
fn failure_diagnostics(db: &dyn Db, file: SourceFile, instance: Instance<'_>) -> Vec<Value> {
    let kernel = instance.kernel(db).name(db).clone();
    let mut problems: Vec<_> = tilec_db::file_diagnostics(db, file)
        .iter()
        .filter(|d| d.severity.stops_analysis())
        .filter(|d| d.kernel.as_deref() == Some(kernel.as_str()))
        .cloned()
        .collect();
    if problems.is_empty() {
        problems = lowering_diagnostics(db, instance);
    }
    problems
        .iter()
        .map(|d| render::diagnostic_json(db, file, d))
        .collect()
}

/// `OUT/<path relative to the root it was found under, without .py>/`.
fn output_folder(file: &Path, roots: &[PathBuf]) -> PathBuf {
    // Without paths the build covers the current folder, as the files were found.
    let current = [PathBuf::from(".")];
    let roots = if roots.is_empty() {
        &current[..]
    } else {
        roots
    };
    let relative = roots
        .iter()
        .filter(|root| root.is_dir())
        .find_map(|root| file.strip_prefix(root).ok())
        .or_else(|| file.file_name().map(Path::new))
        .unwrap_or(file);
    relative.with_extension("")
}

/// The launch geometry and parameters of a program, as the `.json` file describes them.
fn launch_json(program: &ThreadProgram) -> Value {
    let exprs = &program.exprs;
    // A constant extent is a number; a symbolic one is its formula over the scalar parameters.
    let extent = |e| match exprs.as_int(e) {
        Some(value) => json!(value),
        None => json!(exprs.display(e).to_string()),
    };
    let params: Vec<Value> = program
        .params
        .iter()
        .map(|param| {
            let buffer = program.buffer(param.buffer);
            let shape: Vec<Value> = buffer.shape.iter().map(|&e| extent(e)).collect();
            json!({
                "name": param.name,
                "dtype": buffer.dtype.to_string(),
                "shape": shape,
                "access": match param.access {
                    ParamAccess::Read => "read",
                    ParamAccess::Write => "write",
                    ParamAccess::ReadWrite => "read-write",
                },
            })
        })
        .collect();
    let scalars: Vec<&str> = program.scalars.iter().map(|s| s.name.as_str()).collect();
    let grid: Vec<Value> = program.grid.iter().map(|&e| extent(e)).collect();
    let shared_buffers = program
        .buffers
        .iter()
        .filter(|b| matches!(b.memory, Memory::Shared { .. }))
        .count();
    json!({
        "function": tilec_passes::cuda::kernel_symbol(&program.name),
        "grid": grid,
        "persistent": program.persistent.is_some(),
        "block": program.block,
        "shared_bytes": program.shared_bytes,
        "shared_buffers": shared_buffers,
        "params": params,
        "scalars": scalars,
    })
}

/// Phase 2: each unit not found while planning from the cache's tiers, or compiled (and stored
/// in both); then the instance entries of the instances this build lowered.
fn obtain_all(
    plan: &Plan,
    tiers: &Tiers<'_>,
    compile: Option<&CompileSettings>,
    format: Format,
    stats: &mut CacheStats,
) -> Vec<Outcome> {
    let units = &plan.units;
    let missing: Vec<usize> = (0..units.len()).filter(|&i| !units[i].looked_up).collect();
    let wanted: Vec<Wanted<'_, CacheRequest>> = missing
        .iter()
        .map(|&i| Wanted {
            stem: &units[i].stem,
            request: &units[i].request,
        })
        .collect();
    let fetched = look_up_launches(&wanted, tiers, stats);
    let mut entries: Vec<Option<CacheEntry>> = units.iter().map(|u| u.found.clone()).collect();
    for (&i, entry) in missing.iter().zip(fetched) {
        entries[i] = entry;
    }
    stats.saved_ms = entries.iter().flatten().filter_map(|e| e.compile_ms).sum();
    stats.misses = entries.iter().filter(|entry| entry.is_none()).count();
    let outcomes = compile_all(units, entries, tiers.local, compile, format);
    if compile.is_some() {
        stats.nvrtc_calls = outcomes
            .iter()
            .filter(|outcome| !matches!(outcome, Outcome::Cached(_)))
            .count();
    }
    let mut made: Vec<(String, Vec<u8>)> = units
        .iter()
        .zip(&outcomes)
        .filter_map(|(unit, outcome)| match outcome {
            Outcome::Built(entry) => {
                Some((unit.request.key.clone(), encode_entry(&unit.request, entry)))
            }
            Outcome::Cached(_) | Outcome::Failed(_) => None,
        })
        .collect();
    made.extend(store_lowerings(plan, &outcomes, tiers.local));
    crate::tiers::upload(&made, tiers.remote, stats);
    outcomes
}

/// Stores the instance entry of every instance this build lowered whose launches all have their
/// entries (one that failed to compile is lowered again next time), and returns the entries'
/// files for the remote store.
fn store_lowerings(plan: &Plan, outcomes: &[Outcome], local: &Cache) -> Vec<(String, Vec<u8>)> {
    let mut made = Vec::new();
    for record in &plan.instances {
        let Some(request) = &record.lowering else {
            continue;
        };
        let compiled = record
            .units
            .iter()
            .all(|&i| !matches!(outcomes[i], Outcome::Failed(_)));
        if record.units.is_empty() || !compiled {
            continue;
        }
        let entry = InstanceEntry {
            launches: record
                .units
                .iter()
                .map(|&i| LoweredLaunch {
                    source_sha256: plan.units[i].request.source_sha256().to_owned(),
                    description: plan.units[i].description.clone(),
                })
                .collect(),
        };
        if let Err(error) = local.put(request, &entry) {
            eprintln!(
                "warning: cannot store the lowering of {}#{} in the cache: {error:#}",
                record.kernel, record.index
            );
        }
        made.push((request.key().to_owned(), encode_entry(request, &entry)));
    }
    made
}

/// Each unit the cache did not have, compiled on a pool of worker threads. Progress goes to
/// stderr: on a terminal a line per launch as it finishes, with its registers and spills where
/// ptxas reported them (a long build never sits silent); nothing otherwise, since the per-instance
/// lines on stdout follow.
fn compile_all(
    units: &[Unit],
    found: Vec<Option<CacheEntry>>,
    cache: &Cache,
    compile: Option<&CompileSettings>,
    format: Format,
) -> Vec<Outcome> {
    let mut outcomes: Vec<Option<Outcome>> = found
        .into_iter()
        .map(|entry| entry.map(Outcome::Cached))
        .collect();
    let todo: Vec<usize> = (0..units.len())
        .filter(|&i| outcomes[i].is_none())
        .collect();
    let cached = units.len() - todo.len();
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(todo.len())
        .max(1);
    let next = AtomicUsize::new(0);
    let (sender, receiver) = mpsc::channel::<(usize, Outcome)>();
    let progress = format == Format::Human && std::io::stderr().is_terminal();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let sender = sender.clone();
            let (next, todo) = (&next, &todo);
            scope.spawn(move || {
                while let Some(&position) = todo.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if sender
                        .send((position, obtain(&units[position], cache, compile)))
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
        drop(sender);
        for (done, (position, outcome)) in receiver.iter().enumerate() {
            if progress {
                eprintln!(
                    "[{}/{}] {} {}",
                    cached + done + 1,
                    units.len(),
                    units[position].stem,
                    outcome_words(&outcome)
                );
            }
            outcomes[position] = Some(outcome);
        }
    });
    outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Outcome::Failed("the worker stopped".to_owned())))
        .collect()
}

/// What became of a unit, in words for its progress line: `built (168 registers, no spills)`.
fn outcome_words(outcome: &Outcome) -> String {
    let (status, entry) = match outcome {
        Outcome::Built(entry) => ("built", entry),
        Outcome::Cached(entry) => ("cached", entry),
        Outcome::Failed(why) => return format!("failed: {}", why.lines().next().unwrap_or("")),
    };
    match entry.ptxas.as_deref().and_then(resource_words) {
        Some(words) => format!("{status} ({words})"),
        None => status.to_owned(),
    }
}

/// Registers and spills of a ptxas report in words (`168 registers, no spills`), when it has them.
fn resource_words(ptxas: &str) -> Option<String> {
    let registers = registers_of(ptxas)?;
    Some(match spills_of(ptxas) {
        Some((0, 0)) => format!("{registers} registers, no spills"),
        Some((stores, loads)) => {
            format!("{registers} registers, spills: {stores} bytes stored, {loads} bytes loaded")
        }
        None => format!("{registers} registers"),
    })
}

/// The spill bytes (stores, loads) of the first "N bytes spill stores, M bytes spill loads" line.
fn spills_of(ptxas: &str) -> Option<(u64, u64)> {
    let number_before = |marker: &str| -> Option<u64> {
        let before = ptxas.split(marker).next()?;
        before.split_whitespace().last()?.parse().ok()
    };
    if !ptxas.contains(" bytes spill stores") {
        return None;
    }
    Some((
        number_before(" bytes spill stores")?,
        number_before(" bytes spill loads")?,
    ))
}

/// The first problem the CUDA printer found in a launch's thread program (it marks each with an
/// `#error` line, which NVRTC would stop at): a lowering bug, never the user's.
fn invalid_program(cuda: &str) -> Option<&str> {
    cuda.lines()
        .take_while(|line| line.starts_with("//") || line.starts_with("#error"))
        .find_map(|line| line.strip_prefix("#error \"tilec: invalid thread program: "))
        .map(|problem| problem.trim_end_matches('"'))
}

/// One unit the cache did not have: compiled, and stored in the local cache for next time. A
/// program the printer found invalid fails here, with or without NVRTC, rather than be written
/// as built CUDA that does not compile.
fn obtain(unit: &Unit, cache: &Cache, compile: Option<&CompileSettings>) -> Outcome {
    if let Some(problem) = invalid_program(&unit.cuda) {
        return Outcome::Failed(format!(
            "tilec generated an invalid thread program ({problem}): this is a bug in tilec, \
             please report it with the kernel"
        ));
    }
    let started = Instant::now();
    let entry = match compile {
        Some(settings) => match compile_ptx(&unit.cuda, settings) {
            Ok(compiled) => CacheEntry {
                cuda: unit.cuda.clone(),
                ptxas: compiled.ptxas_info(),
                ptx: Some(compiled.ptx),
                compile_ms: u64::try_from(started.elapsed().as_millis()).ok(),
            },
            Err(failure) => return Outcome::Failed(failure.to_string()),
        },
        None => CacheEntry {
            cuda: unit.cuda.clone(),
            ptx: None,
            ptxas: None,
            compile_ms: None,
        },
    };
    if let Err(error) = cache.put(&unit.request, &entry) {
        eprintln!(
            "warning: cannot store {} in the cache: {error:#}",
            unit.stem
        );
    }
    Outcome::Built(entry)
}

/// Whether a cached entry has PTX but no ptxas report while one can now be had. NVRTC (CUDA 13 on)
/// leaves ptxas's report out of its log when it takes the result from the CUDA compute cache,
/// which `tilec run` of the same kernel fills; with `CUDA_CACHE_DISABLE=1` it reports again, and
/// such an entry is rebuilt so that the report reaches the `.json`.
fn lacks_wanted_report(entry: &CacheEntry, report_wanted: bool) -> bool {
    report_wanted && entry.ptx.is_some() && entry.ptxas.is_none()
}

#[derive(Debug, Default)]
struct Summary {
    instances: usize,
    built: usize,
    cached: usize,
    failed: usize,
    /// Launches with PTX whose registers and spills ptxas did not report.
    unreported: usize,
    /// Files that import TileLang but define no kernel: nothing to build, not an error.
    files_skipped: usize,
    /// Files whose errors hide every kernel (a syntax error): nothing could be built from them.
    files_failed: usize,
}

/// The files that gave no instance, one line each (and their errors), before the instances.
fn report_files(options: &BuildOptions, files: &[FileRecord]) -> Result<Summary> {
    let mut summary = Summary::default();
    let mut out = std::io::stdout().lock();
    for record in files {
        let failed = !record.diagnostics.is_empty();
        let (status, reason) = if failed {
            summary.files_failed += 1;
            ("failed", "its errors leave no kernel to build")
        } else {
            summary.files_skipped += 1;
            ("skipped", "it defines no kernel")
        };
        match options.format {
            Format::Human => {
                writeln!(out, "{status:>7} {}: {reason}", record.file)?;
                print_diagnostics(&mut out, &record.file, &record.diagnostics)?;
            }
            Format::Json => {
                let line = json!({
                    "kind": "build-file",
                    "file": record.file,
                    "status": status,
                    "reason": reason,
                    "diagnostics": record.diagnostics,
                });
                writeln!(out, "{line}")?;
            }
        }
    }
    Ok(summary)
}

/// What became of one instance's outputs.
struct Written {
    status: &'static str,
    errors: Vec<String>,
    json: PathBuf,
    /// Registers and spills of each launch ptxas reported on, in words.
    resources: Vec<String>,
}

/// Phase 3: the `.cu`, `.ptx` and `.json` files of every instance, one line per instance. An
/// instance whose files cannot be written fails with why; the others are still written.
fn write_outputs(
    options: &BuildOptions,
    plan: &Plan,
    outcomes: &[Outcome],
    summary: &mut Summary,
) -> Result<()> {
    let mut out = std::io::stdout().lock();
    for record in &plan.instances {
        summary.instances += 1;
        let written = write_instance(options, record, &plan.units, outcomes, summary);
        match written.status {
            "failed" => summary.failed += 1,
            "built" => summary.built += 1,
            _ => summary.cached += 1,
        }
        print_instance(&mut out, options.format, record, &written)?;
    }
    Ok(())
}

/// Writes one instance's files; a file that cannot be written makes the instance fail.
fn write_instance(
    options: &BuildOptions,
    record: &InstanceRecord,
    units: &[Unit],
    outcomes: &[Outcome],
    summary: &mut Summary,
) -> Written {
    let folder = options.out.join(&record.folder);
    let json = folder.join(format!("{}-{}.json", record.kernel, record.index));
    let mut errors: Vec<String> = Vec::new();
    if let Err(error) = std::fs::create_dir_all(&folder) {
        errors.push(format!("cannot create {}: {error}", folder.display()));
        return Written {
            status: "failed",
            errors,
            json,
            resources: Vec::new(),
        };
    }
    let mut launches = Vec::new();
    let (mut built, mut failed) = (false, !record.diagnostics.is_empty());
    for &position in &record.units {
        let unit = &units[position];
        let (status, entry) = match &outcomes[position] {
            Outcome::Built(entry) => ("built", Some(entry)),
            Outcome::Cached(entry) => ("cached", Some(entry)),
            Outcome::Failed(why) => {
                errors.push(why.clone());
                ("failed", None)
            }
        };
        built |= status == "built";
        failed |= status == "failed";
        match write_launch(&folder, unit, status, entry, summary) {
            Ok(launch) => launches.push(launch),
            Err(error) => {
                errors.push(format!("{error:#}"));
                failed = true;
            }
        }
    }
    let status = if failed || !errors.is_empty() {
        "failed"
    } else if built {
        "built"
    } else {
        "cached"
    };
    let description = json!({
        "file": record.file,
        "kernel": record.kernel,
        "instance": record.index,
        "args": record.args,
        "status": status,
        "launches": launches,
        "diagnostics": record.diagnostics,
        "errors": errors,
    });
    if let Err(error) = write_output(&json, format!("{description:#}\n").as_bytes()) {
        errors.push(format!("{error:#}"));
        return Written {
            status: "failed",
            errors,
            json,
            resources: Vec::new(),
        };
    }
    let resources = record
        .units
        .iter()
        .filter_map(|&position| match &outcomes[position] {
            Outcome::Built(entry) | Outcome::Cached(entry) => entry.ptxas.as_deref(),
            Outcome::Failed(_) => None,
        })
        .filter_map(resource_words)
        .collect();
    Written {
        status,
        errors,
        json,
        resources,
    }
}

/// The `.cu` (and `.ptx`) of one launch, and its entry in the instance's description.
fn write_launch(
    folder: &Path,
    unit: &Unit,
    status: &str,
    entry: Option<&CacheEntry>,
    summary: &mut Summary,
) -> Result<Value> {
    let mut launch = unit.description.clone();
    launch["cache"] = json!(status);
    launch["key"] = json!(unit.request.key);
    let cu = folder.join(format!("{}.cu", unit.stem));
    write_output(&cu, unit.cuda.as_bytes())?;
    launch["cuda"] = json!(cu.display().to_string());
    if let Some(ptx) = entry.and_then(|e| e.ptx.as_ref()) {
        let path = folder.join(format!("{}.ptx", unit.stem));
        write_output(&path, ptx.as_bytes())?;
        launch["ptx"] = json!(path.display().to_string());
    }
    let ptxas = entry.and_then(|e| e.ptxas.as_deref());
    if entry.is_some_and(|e| e.ptx.is_some()) && ptxas.is_none() {
        summary.unreported += 1;
    }
    launch["registers"] = json!(ptxas.and_then(registers_of));
    launch["ptxas"] = json!(ptxas);
    Ok(launch)
}

/// Writes an output file atomically: a tool reading the output folder during a build sees the
/// previous file or the new one, never half of one, and a link at the name is replaced, not
/// written through.
fn write_output(path: &Path, contents: &[u8]) -> Result<()> {
    write_atomically(path, contents, Readers::Umask)
        .with_context(|| format!("cannot write {}", path.display()))
}

fn print_instance(
    out: &mut impl Write,
    format: Format,
    record: &InstanceRecord,
    written: &Written,
) -> Result<()> {
    let status = written.status;
    match format {
        Format::Human => {
            let resources = if written.resources.is_empty() {
                String::new()
            } else {
                format!(" ({})", written.resources.join("; "))
            };
            writeln!(
                out,
                "{status:>7} {} :: {}#{}{resources}",
                record.file, record.kernel, record.index
            )?;
            for error in &written.errors {
                writeln!(out, "        {error}")?;
            }
            // Say why in a line each: an instance made by --with has no other report.
            print_diagnostics(out, &record.file, &record.diagnostics)?;
        }
        Format::Json => {
            let line = json!({
                "kind": "build-instance",
                "file": record.file,
                "kernel": record.kernel,
                "instance": record.index,
                "status": status,
                "json": written.json.display().to_string(),
            });
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// One line per diagnostic: `file:line: severity[code]: message`.
fn print_diagnostics(out: &mut impl Write, file: &str, diagnostics: &[Value]) -> Result<()> {
    for diagnostic in diagnostics {
        let at = match diagnostic["line"].as_u64() {
            Some(line) => format!("{file}:{line}"),
            None => file.to_owned(),
        };
        writeln!(
            out,
            "        {at}: {}[{}]: {}",
            diagnostic["severity"].as_str().unwrap_or("error"),
            diagnostic["code"].as_str().unwrap_or("?"),
            diagnostic["message"].as_str().unwrap_or("")
        )?;
    }
    Ok(())
}

/// The register count of the first "Used N registers" line of a ptxas report.
fn registers_of(ptxas: &str) -> Option<u64> {
    let rest = ptxas.split("Used ").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

fn report_summary(
    options: &BuildOptions,
    summary: &Summary,
    stats: &CacheStats,
    cache: &Cache,
    started: Instant,
) -> Result<()> {
    if summary.unreported > 0 && options.format == Format::Human {
        eprintln!(
            "note: ptxas reported no registers or spills for {} launch(es): NVRTC took them from \
             the CUDA compute cache (a `tilec run` of the same kernel fills it); run again with \
             CUDA_CACHE_DISABLE=1 for the report",
            summary.unreported
        );
    }
    let mut out = std::io::stdout().lock();
    match options.format {
        Format::Human => {
            writeln!(
                out,
                "{} instance(s): {} built, {} from the cache ({}), {} failed{}, in {:.1} ms; outputs in {}",
                summary.instances,
                summary.built,
                summary.cached,
                cache.dir().display(),
                summary.failed,
                file_counts(summary),
                started.elapsed().as_secs_f64() * 1000.0,
                options.out.display(),
            )?;
            writeln!(out, "{}", stats.to_words())?;
        }
        Format::Json => writeln!(
            out,
            "{}",
            json!({
                "kind": "build-summary",
                "instances": summary.instances,
                "built": summary.built,
                "cached": summary.cached,
                "failed": summary.failed,
                "unreported_registers": summary.unreported,
                "files_skipped": summary.files_skipped,
                "files_failed": summary.files_failed,
                "cache": stats.to_json(),
                "ms": started.elapsed().as_secs_f64() * 1000.0,
            })
        )?,
    }
    Ok(())
}

/// `; 1 file(s) without kernels, 1 file(s) failed` where there are such files.
fn file_counts(summary: &Summary) -> String {
    let mut text = String::new();
    if summary.files_skipped > 0 {
        text += &format!("; {} file(s) without kernels", summary.files_skipped);
    }
    if summary.files_failed > 0 {
        text += &format!("; {} file(s) failed", summary.files_failed);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report as NVRTC 13's ptxas writes it for a warp-specialized kernel (measured on an H100).
    const REPORT: &str = "ptxas info    : 0 bytes gmem\n\
        ptxas info    : Compiling entry function 'flashattn' for 'sm_90a'\n\
        ptxas info    : Function properties for flashattn\n\
        ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
        ptxas info    : Used 168 registers, used 16 barriers\n\
        ptxas info    : Compile time = 338.528 ms";

    fn entry(ptx: Option<&str>, ptxas: Option<&str>) -> CacheEntry {
        CacheEntry {
            cuda: "extern \"C\" __global__ void k() {}".to_owned(),
            ptx: ptx.map(str::to_owned),
            ptxas: ptxas.map(str::to_owned),
            compile_ms: None,
        }
    }

    /// The printer's `#error` lines sit between the header comments and the prelude.
    #[test]
    fn an_invalid_program_is_found_in_the_header() {
        let cuda = "// Generated by tilec for sm_90: kernel `k`.\n// Launch: grid (1, 1, 1).\n\
                    #error \"tilec: invalid thread program: variable `v` is used where no statement \
                    binds it\"\n\n#include <x>\n";
        assert_eq!(
            invalid_program(cuda),
            Some("variable `v` is used where no statement binds it")
        );
        assert_eq!(
            invalid_program("// Generated\n\n#error \"tilec: invalid thread program: late\"\n"),
            None
        );
        assert_eq!(
            invalid_program("// Generated by tilec\n\nextern \"C\" {}"),
            None
        );
    }

    #[test]
    fn registers_come_from_the_used_line() {
        assert_eq!(registers_of(REPORT), Some(168));
        assert_eq!(registers_of("ptxas info    : 0 bytes gmem"), None);
    }

    /// The line a build prints per launch names registers and spills as ptxas reported them.
    #[test]
    fn registers_and_spills_in_words() {
        assert_eq!(spills_of(REPORT), Some((0, 0)));
        assert_eq!(
            resource_words(REPORT).as_deref(),
            Some("168 registers, no spills")
        );
        let spilling = REPORT.replace(
            "0 bytes spill stores, 0 bytes spill loads",
            "24 bytes spill stores, 16 bytes spill loads",
        );
        assert_eq!(
            resource_words(&spilling).as_deref(),
            Some("168 registers, spills: 24 bytes stored, 16 bytes loaded")
        );
        assert_eq!(resource_words("ptxas info    : 0 bytes gmem"), None);
        let built = Outcome::Built(entry(Some(".entry k"), Some(REPORT)));
        assert_eq!(outcome_words(&built), "built (168 registers, no spills)");
        assert_eq!(outcome_words(&Outcome::Cached(entry(None, None))), "cached");
    }

    #[test]
    fn an_entry_without_its_report_is_rebuilt_only_when_ptxas_would_report() {
        let unreported = entry(Some(".entry k"), None);
        assert!(lacks_wanted_report(&unreported, true));
        assert!(!lacks_wanted_report(&unreported, false));
        // An entry with its report, or one built without PTX (`--emit cuda`), is kept either way.
        assert!(!lacks_wanted_report(
            &entry(Some(".entry k"), Some(REPORT)),
            true
        ));
        assert!(!lacks_wanted_report(&entry(None, None), true));
    }
}
