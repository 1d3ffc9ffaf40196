//! `tilec tune FILE --kernel K`: which block sizes, threads and stages to use.
//!
//! `--recommend` ranks the tunable configurations by the roofline estimate of a hardware model
//! (`tilec_ide::tune`), in milliseconds and without a GPU. Without it, the top candidates of that
//! ranking are compiled in parallel (NVRTC, once, then loaded on every GPU used), each is run on a
//! GPU on the same seeded inputs, checked against the reference configuration's output (computed
//! on the first GPU, itself checked against the emulator when the launch is small enough), and
//! timed (median of 50 after a warm-up of at least 5 launches and 100 ms). The GPUs (`--gpus`,
//! default every GPU of the host's first model, see `gpus`) measure in parallel, one worker each,
//! and a candidate is compared only with the current configuration measured on its own GPU
//! (`parallel`). The correct candidate with the best ratio is stored in the tuning cache, keyed by
//! file, kernel, arguments and device, where `tilec run` and `tilec build` find it.

mod gpus;
mod parallel;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use tilec_db::{Db, Instance, cuda_source, thread_programs_for};
use tilec_ide::tune::{
    CandidateSource, Config, RankedCandidate, Recommendation, recommend, with_args,
};
use tilec_ir::{Target, ThreadProgram};
use tilec_passes::hardware::GpuModel;
use tilec_passes::roofline::Estimate;
use tilec_runtime::{CudaDevice, HostTensor, Unavailable, compare, inputs, tolerance_in};

use crate::run::{
    CheckVerdict, SharedInputs, check_against_emulator, run_on_gpu, run_target, scalar_values,
};
use crate::tuned::tuned_instance;
use crate::workspace::{InstanceSelection, load_one};
use tilec_runtime::tuned::{TunedRecord, TunedStore};

pub(crate) use gpus::{GpuList, parse_gpu_list};
use parallel::{Event, Measurement, Plan};

/// What `tilec tune` was asked to do.
#[derive(Debug)]
pub(crate) struct TuneOptions {
    /// `--kernel`, `--instance` and `--with`.
    pub selection: InstanceSelection,
    /// Rank by the hardware model only; run nothing.
    pub recommend: bool,
    /// How many ranked configurations to print, or to measure.
    pub top: usize,
    /// The hardware model (`H200`, `H100-SXM`, `A100-SXM4`); default: the GPU found, else the
    /// target's.
    pub gpu: Option<String>,
    /// `--gpus`: the GPUs that measure; default every GPU of the host's first model.
    pub gpus: Option<GpuList>,
    pub target: Option<String>,
    pub cache: PathBuf,
    pub seed: u64,
}

pub(crate) fn run(path: &Path, options: &TuneOptions) -> Result<ExitCode> {
    let (workspace, file) = load_one(path)?;
    let db = &workspace.db;
    let devices = if options.recommend {
        Vec::new()
    } else {
        open_gpus(options.gpus.as_ref())?
    };
    // Candidates are lowered for the target they are measured (or modelled) on; every GPU chosen
    // is of the first one's model.
    let device = devices.first();
    let target = run_target(options.target.as_deref(), device, &workspace)?;
    let _settings = workspace.apply_settings(target);
    let instance = options.selection.pick(db, file)?;
    let gpu = hardware_model(options, device, target)?;
    let started = Instant::now();
    let recommendation = recommend(db, instance, &gpu);
    let elapsed = started.elapsed().as_secs_f64();
    let mut out = std::io::stdout().lock();
    print_header(&mut out, db, instance, &recommendation, elapsed)?;
    if recommendation.params.is_empty() {
        writeln!(
            out,
            "no tunable parameter: every integer argument changes a tensor's shape or nothing"
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    print_ranking(&mut out, &recommendation, options.top)?;
    if devices.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    measure(
        &mut out,
        db,
        path,
        instance,
        &recommendation,
        &devices,
        options,
    )
}

/// Opens the GPUs `requested` names (default: every GPU of the host's first model), each on a
/// thread of its own, since creating a GPU's context takes a good fraction of a second.
fn open_gpus(requested: Option<&GpuList>) -> Result<Vec<CudaDevice>> {
    let present = CudaDevice::list().map_err(|why| {
        anyhow::anyhow!(
            "no GPU to measure on ({why}); `tilec tune --recommend` ranks configurations without one"
        )
    })?;
    let choice = gpus::choose_gpus(requested.map(|list| list.0.as_slice()), &present)
        .map_err(anyhow::Error::msg)?;
    for note in &choice.notes {
        eprintln!("note: {note}");
    }
    std::thread::scope(|scope| {
        let opening: Vec<_> = choice
            .ordinals
            .iter()
            .map(|&ordinal| {
                (
                    ordinal,
                    scope.spawn(move || CudaDevice::open_ordinal(ordinal)),
                )
            })
            .collect();
        opening
            .into_iter()
            .map(|(ordinal, thread)| {
                let opened = thread.join().unwrap_or_else(|_| {
                    Err(Unavailable::Panicked(
                        "the thread opening it panicked".into(),
                    ))
                });
                opened.map_err(|why| {
                    anyhow::anyhow!(
                        "cannot measure on GPU {ordinal} ({why}); `--gpus` picks others, and \
                         `tilec tune --recommend` ranks configurations without a GPU"
                    )
                })
            })
            .collect()
    })
}

/// The model named by `--gpu`, else the one matching the GPU found, else the target's default.
fn hardware_model(
    options: &TuneOptions,
    device: Option<&CudaDevice>,
    target: Target,
) -> Result<GpuModel> {
    if let Some(name) = &options.gpu {
        return GpuModel::named(name).with_context(|| {
            let names: Vec<String> = GpuModel::all().into_iter().map(|g| g.name).collect();
            format!(
                "no hardware model named `{name}` (known: {})",
                names.join(", ")
            )
        });
    }
    if let Some(device) = device {
        let name = device.name().to_ascii_lowercase().replace(' ', "");
        let matching = GpuModel::all().into_iter().find(|gpu| {
            let model = gpu.name.to_ascii_lowercase();
            let family = model.split('-').next().unwrap_or(&model);
            name.contains(family)
        });
        if let Some(gpu) = matching {
            return Ok(gpu);
        }
    }
    GpuModel::default_for(target).with_context(|| format!("no hardware model for {target}"))
}

fn print_header(
    out: &mut impl Write,
    db: &dyn Db,
    instance: Instance<'_>,
    recommendation: &Recommendation,
    elapsed: f64,
) -> Result<()> {
    let kernel = instance.kernel(db).name(db);
    let args: Vec<String> = tilec_db::kernel_world(db, instance)
        .args
        .iter()
        .filter(|(name, _)| !recommendation.params.iter().any(|p| &p.name == name))
        .map(|(name, value)| format!("{name}={}", crate::render::const_json(value)))
        .collect();
    writeln!(
        out,
        "{kernel} instance {} ({}) on the {} model",
        instance.index(db),
        args.join(", "),
        recommendation.gpu
    )?;
    let params: Vec<String> = recommendation
        .params
        .iter()
        .map(|p| format!("{} ({}, now {})", p.name, p.role.name(), p.current))
        .collect();
    if !params.is_empty() {
        writeln!(out, "tunable: {}", params.join(", "))?;
    }
    match &recommendation.source {
        CandidateSource::Enumerated => {}
        CandidateSource::Autotune(count) => writeln!(
            out,
            "candidates: the {count} configurations of the kernel's @autotune decorator"
        )?,
        CandidateSource::AutotuneUnreadable(why) => writeln!(
            out,
            "note: {why}; ranking values around the current ones instead"
        )?,
    }
    writeln!(
        out,
        "analysed {} configurations in {:.0} ms: {} ranked, {} rejected by tilec's analyses",
        recommendation.analysed(),
        elapsed * 1e3,
        recommendation.ranked.len(),
        recommendation.rejected.len()
    )?;
    Ok(())
}

fn print_ranking(out: &mut impl Write, recommendation: &Recommendation, top: usize) -> Result<()> {
    writeln!(out)?;
    let mut header = vec!["#".to_owned()];
    header.extend(recommendation.params.iter().map(|p| p.name.clone()));
    header.extend(
        [
            "estimate", "bound", "tensor", "shared", "L2", "DRAM", "latency", "per SM", "waves",
        ]
        .map(str::to_owned),
    );
    let mut rows = vec![header];
    for (rank, candidate) in recommendation.ranked.iter().take(top).enumerate() {
        rows.push(row(&(rank + 1).to_string(), candidate));
    }
    if let Some(current) = recommendation.current() {
        let rank = recommendation
            .ranked
            .iter()
            .position(|c| c.config == current.config)
            .map_or(0, |p| p + 1);
        if rank > top {
            rows.push(row(&format!("{rank} (now)"), current));
        }
    }
    write_table(out, &rows)?;
    writeln!(
        out,
        "(estimates within {:.0}% are ties, ordered by how little they change the current values)",
        tilec_ide::tune::TIE * 100.0
    )?;
    if let Some(current) = recommendation.current()
        && let Some(best) = recommendation.ranked.first()
    {
        writeln!(
            out,
            "\nnow: {} at {}; recommended: {} at {} ({:.2}x by the model)",
            config_text(&current.config),
            ms(current.estimate.seconds),
            config_text(&best.config),
            ms(best.estimate.seconds),
            current.estimate.seconds / best.estimate.seconds.max(1e-12)
        )?;
    }
    if !recommendation.rejected.is_empty() {
        writeln!(
            out,
            "\nrejected (first 5 of {}):",
            recommendation.rejected.len()
        )?;
        for rejected in recommendation.rejected.iter().take(5) {
            writeln!(
                out,
                "  {}: {}",
                config_text(&rejected.config),
                rejected.reason
            )?;
        }
    }
    Ok(())
}

/// One table row: the configuration and the estimate's parts (of the first launch for the
/// per-launch columns, which is the only one for every corpus kernel).
fn row(rank: &str, candidate: &RankedCandidate) -> Vec<String> {
    let mut cells = vec![rank.to_owned()];
    cells.extend(candidate.config.iter().map(|(_, v)| v.to_string()));
    let estimate: &Estimate = &candidate.estimate;
    cells.push(ms(estimate.seconds));
    match (
        estimate.launches.first(),
        candidate.workload.launches.first(),
    ) {
        (Some(launch), Some(work)) => {
            cells.push(launch.bound.name().to_owned());
            cells.push(ms(launch.tensor_seconds));
            cells.push(ms(launch.shared_seconds));
            cells.push(ms(launch.l2_seconds));
            cells.push(ms(launch.dram_seconds));
            cells.push(ms(launch.latency_seconds));
            cells.push(format!(
                "{} blk ({}), {} warps, ~{} regs",
                launch.blocks_per_sm,
                launch.limited_by.name(),
                launch.warps_per_sm,
                work.registers_per_thread
            ));
            cells.push(format!(
                "{} ({:.0}%)",
                launch.waves,
                launch.wave_efficiency * 100.0
            ));
        }
        _ => cells.extend(std::iter::repeat_n(String::new(), 8)),
    }
    cells
}

fn write_table(out: &mut impl Write, rows: &[Vec<String>]) -> Result<()> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &width)| format!("{cell:<width$}"))
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())?;
    }
    Ok(())
}

pub(crate) fn config_text(config: &Config) -> String {
    let parts: Vec<String> = config.iter().map(|(n, v)| format!("{n}={v}")).collect();
    parts.join(" ")
}

fn ms(seconds: f64) -> String {
    if seconds < 1e-3 {
        format!("{:.1} µs", seconds * 1e6)
    } else {
        format!("{:.3} ms", seconds * 1e3)
    }
}

/// A configuration lowered and ready for the GPU.
struct Lowered {
    config: Config,
    programs: Vec<ThreadProgram>,
    /// Each program's CUDA, from the query that memoizes it.
    cuda: Arc<[String]>,
}

/// The measured half: compile the top candidates, run, check and time each on one of `devices`,
/// store the winner.
fn measure(
    out: &mut impl Write,
    db: &dyn Db,
    path: &Path,
    instance: Instance<'_>,
    recommendation: &Recommendation,
    devices: &[CudaDevice],
    options: &TuneOptions,
) -> Result<ExitCode> {
    let started = Instant::now();
    let lowered = lower_candidates(out, db, instance, recommendation, options.top)?;
    let (lowered, compile_seconds) = compile_all(out, devices, lowered)?;
    let (Some(first), Some(device)) = (lowered.first(), devices.first()) else {
        bail!("no candidate configuration could be lowered and compiled");
    };
    let scalars = scalar_values(db, with_args(db, instance, &first.config), &first.programs)?;
    let loaded = if devices.len() > 1 {
        format!(", once; loaded on {} GPUs", devices.len())
    } else {
        String::new()
    };
    writeln!(
        out,
        "\ncompiled {} candidates in parallel in {compile_seconds:.2} s (NVRTC{loaded})",
        lowered.len(),
    )?;
    let program = first.programs.first().context("no launch")?;
    let inputs =
        inputs::make_tensors(program, &scalars, options.seed, true).map_err(anyhow::Error::msg)?;
    let work = emulated_work(db, with_args(db, instance, &first.config));
    let reference = reference_output(out, device, first, &scalars, &inputs, work)?;
    let baseline = if first.config == recommendation.current_config() {
        "the current configuration"
    } else {
        "the reference configuration"
    };
    let candidates = Candidates {
        lowered: &lowered,
        scalars: &scalars,
        inputs: &inputs,
        reference: &reference,
    };
    let measurements = measure_candidates(out, devices, &candidates, baseline)?;
    let (ranked, unranked) = parallel::rank(&measurements);
    let ordinals: Vec<usize> = devices.iter().map(CudaDevice::ordinal).collect();
    note_unranked(out, &ordinals, &unranked, baseline)?;
    let Some(&best) = ranked.first() else {
        bail!("no candidate produced a correct result");
    };
    let winner = lowered.get(best.candidate).context("no such candidate")?;
    writeln!(
        out,
        "\nwinner: {} at {}{}{}; tuning took {:.1} s",
        config_text(&winner.config),
        ms(best.seconds.as_ref().map_or(0.0, |s| *s)),
        on_gpu(&ordinals, best.gpu),
        best.speedup().map_or(String::new(), |x| format!(
            " ({x:.2}x {baseline}{})",
            there(&ordinals)
        )),
        started.elapsed().as_secs_f64()
    )?;
    let record = tuned_record(device, &lowered, &ranked, &unranked, best);
    let written = TunedStore::new(&options.cache)
        .put(&tuned_instance(db, path, instance), &record)
        .map_err(anyhow::Error::msg)?;
    writeln!(
        out,
        "stored in {}; `tilec run` and `tilec build` use it",
        written.display()
    )?;
    Ok(ExitCode::SUCCESS)
}

/// The instance's own configuration, then the top `top` of the ranking, each lowered; one that
/// does not lower is reported and left out.
fn lower_candidates(
    out: &mut impl Write,
    db: &dyn Db,
    instance: Instance<'_>,
    recommendation: &Recommendation,
    top: usize,
) -> Result<Vec<Lowered>> {
    let mut configs: Vec<Config> = Vec::new();
    // The instance's own configuration goes first: it is the reference the others are checked
    // against, and the baseline each GPU compares its candidates with.
    if let Some(current) = recommendation.current() {
        configs.push(current.config.clone());
    }
    for candidate in recommendation.ranked.iter().take(top) {
        if !configs.contains(&candidate.config) {
            configs.push(candidate.config.clone());
        }
    }
    // Candidates are lowered and printed for the configured target, the one they run on.
    let target = tilec_db::target(db);
    let mut lowered = Vec::new();
    for config in configs {
        let candidate = with_args(db, instance, &config);
        match (
            thread_programs_for(db, candidate, target).as_ref(),
            cuda_source(db, candidate, target),
        ) {
            (Ok(programs), Some(cuda)) => lowered.push(Lowered {
                config,
                programs: programs.clone(),
                cuda: Arc::clone(cuda),
            }),
            _ => writeln!(
                out,
                "skipped {}: it does not lower yet",
                config_text(&config)
            )?,
        }
    }
    Ok(lowered)
}

/// What every GPU's worker measures with: the compiled candidates (the first is the reference and
/// the baseline), their scalar arguments, the seeded inputs and the reference's outputs.
struct Candidates<'a> {
    lowered: &'a [Lowered],
    scalars: &'a [i64],
    inputs: &'a [HostTensor],
    reference: &'a [HostTensor],
}

/// Checks and times every candidate on `devices`, one worker per GPU, each uploading the inputs
/// once and timing the baseline (candidate 0) first; prints each result as it comes and the
/// measuring phase's wall time.
fn measure_candidates(
    out: &mut impl Write,
    devices: &[CudaDevice],
    candidates: &Candidates<'_>,
    baseline: &str,
) -> Result<Vec<Measurement>> {
    let program = candidates
        .lowered
        .first()
        .and_then(|c| c.programs.first())
        .context("no launch")?;
    let ordinals: Vec<usize> = devices.iter().map(CudaDevice::ordinal).collect();
    let labels: Vec<String> = candidates
        .lowered
        .iter()
        .map(|c| config_text(&c.config))
        .collect();
    let started = Instant::now();
    let plan = Plan {
        candidates: candidates.lowered.len(),
        baseline: Some(0),
    };
    let measurements = parallel::measure_on_gpus(
        devices,
        plan,
        |device| SharedInputs::upload(device, program, candidates.inputs),
        |_, shared, k| {
            let candidate = candidates.lowered.get(k).context("no such candidate")?;
            check_and_time(shared, candidate, candidates.scalars, candidates.reference)
        },
        |event| report_event(out, (&ordinals, &labels), event, baseline),
    )?;
    let ordinals: Vec<String> = ordinals.iter().map(usize::to_string).collect();
    writeln!(
        out,
        "measured {} candidates on {} GPU{} ({}) in {:.1} s",
        candidates.lowered.len(),
        devices.len(),
        if devices.len() == 1 { "" } else { "s" },
        ordinals.join(", "),
        started.elapsed().as_secs_f64()
    )?;
    Ok(measurements)
}

/// Prints one worker's event: a candidate's time on its GPU and how it compares with the
/// baseline there, why it is not a candidate, or why a GPU measures nothing. `ordinals` are the
/// GPUs' numbers and `labels` the candidates' configurations, by the workers' indices.
fn report_event(
    out: &mut impl Write,
    (ordinals, labels): (&[usize], &[String]),
    event: &Event,
    baseline: &str,
) -> Result<()> {
    let measurement = match event {
        Event::Unusable { gpu, why } => {
            let others = if ordinals.len() > 1 {
                "the other GPUs measure without it"
            } else {
                "nothing is measured"
            };
            writeln!(
                out,
                "  GPU {}: {why}; {others}",
                gpu_ordinal(ordinals, *gpu)
            )?;
            return Ok(());
        }
        Event::Measured(measurement) => measurement,
    };
    let label = labels.get(measurement.candidate).map_or("", String::as_str);
    let on = on_gpu(ordinals, measurement.gpu);
    let seconds = match &measurement.seconds {
        Ok(seconds) => *seconds,
        Err(why) => {
            writeln!(out, "  {label}{on}: {why}; not a candidate")?;
            return Ok(());
        }
    };
    let comparison = match measurement.speedup() {
        _ if measurement.candidate == 0 => {
            format!("; {baseline}, the baseline{}", there(ordinals))
        }
        Some(x) => format!("; {x:.2}x {baseline}{}", there(ordinals)),
        None => String::new(),
    };
    writeln!(out, "  {label}: {}{on} (correct{comparison})", ms(seconds))?;
    Ok(())
}

/// Says which GPUs' figures the ranking leaves out: those of a GPU whose baseline failed, when
/// another GPU has one (see `parallel::rank`).
fn note_unranked(
    out: &mut impl Write,
    ordinals: &[usize],
    unranked: &[&Measurement],
    baseline: &str,
) -> Result<()> {
    let mut gpus: Vec<usize> = unranked.iter().map(|m| m.gpu).collect();
    gpus.sort_unstable();
    gpus.dedup();
    for gpu in gpus {
        writeln!(
            out,
            "note: {baseline} failed{}, so the candidates measured there compare with nothing \
             and are left out of the ranking",
            on_gpu(ordinals, gpu)
        )?;
    }
    Ok(())
}

/// ` on GPU 1`: where the `index`th GPU used (of those numbered `ordinals`) measured.
fn on_gpu(ordinals: &[usize], index: usize) -> String {
    format!(" on GPU {}", gpu_ordinal(ordinals, index))
}

/// The driver's number of the `index`th GPU used.
fn gpu_ordinal(ordinals: &[usize], index: usize) -> String {
    ordinals
        .get(index)
        .map_or_else(|| "?".to_owned(), usize::to_string)
}

/// ` there` after a comparison with the baseline when several GPUs measure: it was the baseline of
/// the candidate's own GPU. With one GPU there is only one.
fn there(ordinals: &[usize]) -> &'static str {
    if ordinals.len() > 1 { " there" } else { "" }
}

/// What the tuning cache keeps: the winner and every correct candidate's time on the GPU that
/// measured it, with the baseline's time on the winner's GPU (what the editor's lens compares the
/// winner with).
fn tuned_record(
    device: &CudaDevice,
    lowered: &[Lowered],
    ranked: &[&Measurement],
    unranked: &[&Measurement],
    best: &Measurement,
) -> TunedRecord {
    let measured = ranked
        .iter()
        .chain(unranked)
        .filter(|m| m.candidate != 0 || m.gpu == best.gpu)
        .filter_map(|m| {
            let seconds = m.seconds.as_ref().ok()?;
            Some((lowered.get(m.candidate)?.config.clone(), seconds * 1e3))
        })
        .collect();
    TunedRecord {
        device: device.name().to_owned(),
        arch: device.default_arch(),
        winner: lowered
            .get(best.candidate)
            .map(|c| c.config.clone())
            .unwrap_or_default(),
        median_ms: best.seconds.as_ref().map_or(0.0, |s| s * 1e3),
        measured,
    }
}

/// Compiles every candidate's launches on worker threads and loads them on every GPU (NVRTC runs
/// once per source, whatever the number of GPUs; each GPU's context loads the module itself, and
/// the device's module cache keeps it for the runs); returns the candidates that compiled and
/// loaded everywhere, and the wall time. One that NVRTC refuses, or a GPU cannot load, is reported
/// and dropped, not fatal.
fn compile_all(
    out: &mut impl Write,
    devices: &[CudaDevice],
    lowered: Vec<Lowered>,
) -> Result<(Vec<Lowered>, f64)> {
    let started = Instant::now();
    let failures: Vec<Option<(usize, String)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lowered
            .iter()
            .map(|candidate| scope.spawn(move || compile_everywhere(devices, candidate)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Some((0, "the compile thread panicked".into())))
            })
            .collect()
    });
    let ordinals: Vec<usize> = devices.iter().map(CudaDevice::ordinal).collect();
    let mut compiled = Vec::new();
    for (candidate, failure) in lowered.into_iter().zip(failures) {
        match failure {
            None => compiled.push(candidate),
            Some((0, why)) => writeln!(
                out,
                "  {}: NVRTC failed ({why}); dropped",
                config_text(&candidate.config)
            )?,
            Some((gpu, why)) => writeln!(
                out,
                "  {}: failed{} ({why}); dropped",
                config_text(&candidate.config),
                on_gpu(&ordinals, gpu)
            )?,
        }
    }
    Ok((compiled, started.elapsed().as_secs_f64()))
}

/// Compiles and loads `candidate`'s launches on each of `devices` in turn; the first failure, as
/// the index of the GPU and the message. NVRTC runs for the first GPU only: the others find the
/// compiled image in the process's cache.
fn compile_everywhere(devices: &[CudaDevice], candidate: &Lowered) -> Option<(usize, String)> {
    devices.iter().enumerate().find_map(|(index, device)| {
        let arch = device.default_arch();
        let mut launches = candidate.programs.iter().zip(candidate.cuda.iter());
        launches.find_map(|(program, source)| {
            device
                .compile(
                    source,
                    &tilec_passes::cuda::kernel_symbol(&program.name),
                    &arch,
                )
                .err()
                .map(|e| (index, e.message))
        })
    })
}

/// Operations (FLOPs, element operations and bytes) above which the reference is not emulated: the
/// emulator runs some 10^7 of them per second.
const EMULATOR_WORK_LIMIT: f64 = 2e8;

/// What emulating `instance` would cost, from its roofline workload (infinite when unknown).
fn emulated_work(db: &dyn Db, instance: Instance<'_>) -> f64 {
    match tilec_db::workload(db, instance).as_ref() {
        Ok(workload) => workload
            .launches
            .iter()
            .map(|l| l.blocks as f64 * (l.block_tensor_flops + l.block_simt_ops + l.block_bytes))
            .sum(),
        Err(_) => f64::INFINITY,
    }
}

/// The reference configuration's outputs, checked against the emulator when the launch is small.
fn reference_output(
    out: &mut impl Write,
    device: &CudaDevice,
    reference: &Lowered,
    scalars: &[i64],
    inputs: &[HostTensor],
    work: f64,
) -> Result<Vec<HostTensor>> {
    let mut tensors = inputs.to_vec();
    run_on_gpu(
        device,
        &reference.programs,
        &reference.cuda,
        scalars,
        &mut tensors,
        false,
        None,
    )?;
    let verdict = if work > EMULATOR_WORK_LIMIT {
        CheckVerdict::Skipped(format!(
            "about {work:.1e} operations, more than the {EMULATOR_WORK_LIMIT:.0e} the emulator does in seconds"
        ))
    } else {
        check_against_emulator(&reference.programs, scalars, inputs.to_vec(), &tensors)?
    };
    match verdict {
        CheckVerdict::Matches(_) => writeln!(
            out,
            "reference {}: matches the emulator",
            config_text(&reference.config)
        )?,
        CheckVerdict::Skipped(why) => writeln!(
            out,
            "reference {}: emulator check skipped ({why}); the others are checked against it",
            config_text(&reference.config)
        )?,
        CheckVerdict::Differs(lines) => {
            bail!(
                "the reference configuration differs from the emulator: {}",
                lines.join("; ")
            )
        }
    }
    Ok(tensors)
}

/// One launch on the seeded inputs compared with the reference, then the median of 50 timed
/// launches.
fn check_and_time(
    shared: &mut SharedInputs<'_>,
    candidate: &Lowered,
    scalars: &[i64],
    reference: &[HostTensor],
) -> Result<f64> {
    let (outputs, seconds) =
        shared.check_then_time(&candidate.programs, &candidate.cuda, scalars)?;
    if let Some(why) = differs(&candidate.programs, &outputs, reference) {
        bail!("WRONG RESULT ({why})");
    }
    Ok(seconds)
}

/// Why `actual`'s written tensors differ from `reference`'s, if they do.
fn differs(
    programs: &[ThreadProgram],
    actual: &[HostTensor],
    reference: &[HostTensor],
) -> Option<String> {
    let program = programs.first()?;
    for (param, (got, want)) in program.params.iter().zip(actual.iter().zip(reference)) {
        if param.access == tilec_ir::thread::ParamAccess::Read {
            continue;
        }
        let comparison = compare(got, want);
        if !comparison.passes(tolerance_in(program, got.dtype)) {
            return Some(format!("`{}`: {comparison}", param.name));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines of `events` as `report_event` prints them for GPUs numbered `ordinals`.
    fn lines(ordinals: &[usize], events: &[Event]) -> String {
        let labels = [
            "block_M=2 threads=256".to_owned(),
            "block_M=1 threads=128".to_owned(),
        ];
        let mut out = Vec::new();
        for event in events {
            report_event(
                &mut out,
                (ordinals, &labels),
                event,
                "the current configuration",
            )
            .expect("writes to memory");
        }
        String::from_utf8(out).expect("text")
    }

    fn measured(candidate: usize, gpu: usize, seconds: Result<f64, &str>) -> Event {
        let baseline_seconds = Some(if gpu == 0 { 2e-3 } else { 2.2e-3 });
        Event::Measured(Measurement {
            candidate,
            gpu,
            seconds: seconds.map_err(str::to_owned),
            baseline_seconds,
        })
    }

    #[test]
    fn one_gpu_lines_name_it_and_compare_with_the_current_configuration() {
        let text = lines(
            &[0],
            &[measured(0, 0, Ok(2e-3)), measured(1, 0, Ok(1.6e-3))],
        );
        let expected = [
            "  block_M=2 threads=256: 2.000 ms on GPU 0 (correct; the current configuration, \
             the baseline)",
            "  block_M=1 threads=128: 1.600 ms on GPU 0 (correct; 1.25x the current \
             configuration)",
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), expected);
    }

    #[test]
    fn lines_of_several_gpus_compare_with_the_baseline_of_their_own() {
        let text = lines(
            &[2, 5],
            &[
                measured(0, 1, Ok(2.2e-3)),
                measured(1, 1, Ok(2e-3)),
                measured(1, 0, Err("WRONG RESULT (`C`: 3 differ)")),
                Event::Unusable {
                    gpu: 0,
                    why: "out of memory".to_owned(),
                },
            ],
        );
        let expected = [
            "  block_M=2 threads=256: 2.200 ms on GPU 5 (correct; the current configuration, \
             the baseline there)",
            "  block_M=1 threads=128: 2.000 ms on GPU 5 (correct; 1.10x the current \
             configuration there)",
            "  block_M=1 threads=128 on GPU 2: WRONG RESULT (`C`: 3 differ); not a candidate",
            "  GPU 2: out of memory; the other GPUs measure without it",
        ];
        assert_eq!(text.lines().collect::<Vec<_>>(), expected);
    }
}
