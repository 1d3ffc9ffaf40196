//! `tilec tune FILE --kernel K`: which block sizes, threads and stages to use.
//!
//! `--recommend` ranks the tunable configurations by the roofline estimate of a hardware model
//! (`tilec_ide::tune`), in milliseconds and without a GPU. Without it, the top candidates of that
//! ranking are compiled in parallel (NVRTC), each is run on the GPU on the same seeded inputs,
//! checked against the reference configuration's output (itself checked against the emulator when
//! the launch is small enough), and timed (median of 50 after a warm-up of at least 5 launches and 100 ms). The fastest correct
//! one is stored in the tuning cache, keyed by file, kernel, arguments and device, where `tilec
//! run` and `tilec build` find it.

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
use tilec_runtime::{CudaDevice, HostTensor, compare, inputs, tolerance_in};

use crate::run::{
    CheckVerdict, SharedInputs, check_against_emulator, run_on_gpu, run_target, scalar_values,
};
use crate::tuned::tuned_instance;
use crate::workspace::{InstanceSelection, load_one};
use tilec_runtime::tuned::{TunedRecord, TunedStore};

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
    pub target: Option<String>,
    pub cache: PathBuf,
    pub seed: u64,
}

pub(crate) fn run(path: &Path, options: &TuneOptions) -> Result<ExitCode> {
    let (workspace, file) = load_one(path)?;
    let db = &workspace.db;
    let device = if options.recommend {
        None
    } else {
        Some(CudaDevice::open().map_err(|why| {
            anyhow::anyhow!(
                "no GPU to measure on ({why}); `tilec tune --recommend` ranks configurations without one"
            )
        })?)
    };
    // Candidates are lowered for the target they are measured (or modelled) on.
    let target = run_target(options.target.as_deref(), device.as_ref(), &workspace)?;
    let _settings = workspace.apply_settings(target);
    let instance = options.selection.pick(db, file)?;
    let gpu = hardware_model(options, device.as_ref(), target)?;
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
    match device {
        None => Ok(ExitCode::SUCCESS),
        Some(device) => measure(
            &mut out,
            db,
            path,
            instance,
            &recommendation,
            &device,
            options,
        ),
    }
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

/// The measured half: compile the top candidates, run, check and time each, store the winner.
fn measure(
    out: &mut impl Write,
    db: &dyn Db,
    path: &Path,
    instance: Instance<'_>,
    recommendation: &Recommendation,
    device: &CudaDevice,
    options: &TuneOptions,
) -> Result<ExitCode> {
    let started = Instant::now();
    let mut configs: Vec<Config> = Vec::new();
    // The instance's own configuration goes first: it is the reference the others are checked
    // against, and the baseline the winner is compared with.
    if let Some(current) = recommendation.current() {
        configs.push(current.config.clone());
    }
    for candidate in recommendation.ranked.iter().take(options.top) {
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
    let (lowered, compile_seconds) = compile_all(out, device, lowered)?;
    let Some(first) = lowered.first() else {
        bail!("no candidate configuration could be lowered and compiled");
    };
    let scalars = scalar_values(db, with_args(db, instance, &first.config), &first.programs)?;
    writeln!(
        out,
        "\ncompiled {} candidates in parallel in {:.2} s (NVRTC)",
        lowered.len(),
        compile_seconds
    )?;
    let program = first.programs.first().context("no launch")?;
    let inputs =
        inputs::make_tensors(program, &scalars, options.seed, true).map_err(anyhow::Error::msg)?;
    let work = emulated_work(db, with_args(db, instance, &first.config));
    let reference = reference_output(out, device, first, &scalars, &inputs, work)?;
    let mut shared = SharedInputs::upload(device, program, &inputs)?;
    let mut results: Vec<(Config, f64)> = Vec::new();
    for candidate in &lowered {
        let label = config_text(&candidate.config);
        match check_and_time(&mut shared, candidate, &scalars, &reference) {
            Ok(seconds) => {
                writeln!(out, "  {label}: {} (correct)", ms(seconds))?;
                results.push((candidate.config.clone(), seconds));
            }
            Err(why) => writeln!(out, "  {label}: {why:#}; not a candidate")?,
        }
    }
    results.sort_by(|a, b| a.1.total_cmp(&b.1));
    let Some((winner, best)) = results.first().cloned() else {
        bail!("no candidate produced a correct result");
    };
    let baseline = results
        .iter()
        .find(|(config, _)| *config == recommendation.current_config())
        .map(|(_, s)| *s);
    writeln!(
        out,
        "\nwinner: {} at {}{}; tuning took {:.1} s",
        config_text(&winner),
        ms(best),
        baseline.map_or(String::new(), |b| format!(
            " ({:.2}x the current configuration)",
            b / best
        )),
        started.elapsed().as_secs_f64()
    )?;
    let record = TunedRecord {
        device: device.name().to_owned(),
        arch: device.default_arch(),
        winner: winner.clone(),
        median_ms: best * 1e3,
        measured: results.iter().map(|(c, s)| (c.clone(), s * 1e3)).collect(),
    };
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

/// Compiles every candidate's launches on worker threads (the module cache keeps the results for
/// the runs); returns the candidates that compiled and the wall time. One that NVRTC refuses is
/// reported and dropped, not fatal.
fn compile_all(
    out: &mut impl Write,
    device: &CudaDevice,
    lowered: Vec<Lowered>,
) -> Result<(Vec<Lowered>, f64)> {
    let started = Instant::now();
    let arch = device.default_arch();
    let failures: Vec<Option<String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lowered
            .iter()
            .map(|candidate| {
                let arch = &arch;
                scope.spawn(move || {
                    let mut launches = candidate.programs.iter().zip(candidate.cuda.iter());
                    launches.find_map(|(program, source)| {
                        device
                            .compile(
                                source,
                                &tilec_passes::cuda::kernel_symbol(&program.name),
                                arch,
                            )
                            .err()
                            .map(|e| e.message)
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Some("the compile thread panicked".into()))
            })
            .collect()
    });
    let mut compiled = Vec::new();
    for (candidate, failure) in lowered.into_iter().zip(failures) {
        match failure {
            None => compiled.push(candidate),
            Some(why) => writeln!(
                out,
                "  {}: NVRTC failed ({why}); dropped",
                config_text(&candidate.config)
            )?,
        }
    }
    Ok((compiled, started.elapsed().as_secs_f64()))
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
