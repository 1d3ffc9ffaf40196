//! `tilec-fuzz`: mutates seed files and runs `tilec` commands on the mutants, failing on any
//! panic, abort or hang (see the library's documentation). Usage:
//!
//! ```text
//! tilec-fuzz --tilec target/release/tilec --seeds ../shared/corpus --seeds ../shared/realworld \
//!     --check 3000 --layout 300 --build 300 --run 200 --seed 1
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use tilec_fuzz::mutate::{Edit, mutate};
use tilec_fuzz::target::{Limits, Outcome, REGRESSION_MARKER, Report, Subcommand, run_tilec};

#[derive(Debug, Parser)]
#[command(about = "Mutation fuzzing of the tilec command line: fails on any panic, abort or hang")]
struct Cli {
    /// The tilec binary to run (a release build: a debug build is ten times slower).
    #[arg(long)]
    tilec: PathBuf,
    /// Folders (searched recursively) or files of seed `.py` files.
    #[arg(long = "seeds", required = true)]
    seeds: Vec<PathBuf>,
    /// Mutants through `tilec check`.
    #[arg(long, default_value_t = 3000)]
    check: usize,
    /// Mutants through `tilec layout`.
    #[arg(long, default_value_t = 300)]
    layout: usize,
    /// Mutants through `tilec build --emit cuda`.
    #[arg(long, default_value_t = 300)]
    build: usize,
    /// Mutants through `tilec run --device cpu`.
    #[arg(long, default_value_t = 200)]
    run: usize,
    /// The run's seed: the same seed gives the same mutants.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Commands run at once (default: the number of cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Seconds one command may take before it counts as a hang.
    #[arg(long, default_value_t = 20.0)]
    time_limit: f64,
    /// Seconds the emulator may run one `run` mutant (the rest of the time limit is analysis).
    #[arg(long, default_value_t = 2.0)]
    emulator_budget: f64,
    /// Address space per command, in MiB; an allocation past it aborts the command.
    #[arg(long, default_value_t = 4096)]
    memory_limit: u64,
    /// Where failing mutants are written, as regression files (`# tilec-fuzz: <command>` first).
    #[arg(long, default_value = "target/fuzz-failures")]
    failures: PathBuf,
}

/// One mutant to run: which command, and its index among that command's mutants.
#[derive(Clone, Copy, Debug)]
struct Job {
    command: Subcommand,
    index: usize,
}

/// Outcomes per command, and the failures.
#[derive(Debug, Default)]
struct Tally {
    counts: Vec<(Subcommand, &'static str, usize)>,
    slowest: Vec<(Subcommand, Duration)>,
    failures: Vec<String>,
}

impl Tally {
    fn add(&mut self, command: Subcommand, report: &Report) {
        let kind = report.outcome.kind();
        match self
            .counts
            .iter_mut()
            .find(|(c, k, _)| *c == command && *k == kind)
        {
            Some((_, _, count)) => *count += 1,
            None => self.counts.push((command, kind, 1)),
        }
        match self.slowest.iter_mut().find(|(c, _)| *c == command) {
            Some((_, slowest)) => *slowest = (*slowest).max(report.elapsed),
            None => self.slowest.push((command, report.elapsed)),
        }
    }
}

fn main() -> ExitCode {
    match fuzz(&Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(error) => {
            eprintln!("tilec-fuzz: {error:#}");
            ExitCode::from(2)
        }
    }
}

/// Runs every mutant; `Ok(false)` when any failed.
fn fuzz(cli: &Cli) -> Result<bool> {
    let tilec = std::fs::canonicalize(&cli.tilec)
        .with_context(|| format!("the tilec binary {}", cli.tilec.display()))?;
    let seeds = read_seeds(&cli.seeds)?;
    if seeds.is_empty() {
        bail!("no seed .py files under {:?}", cli.seeds);
    }
    let jobs = plan(cli);
    let workers = cli
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, std::num::NonZero::get));
    let limits = Limits {
        time: Duration::from_secs_f64(cli.time_limit),
        memory_mib: cli.memory_limit,
        emulator_budget: Duration::from_secs_f64(cli.emulator_budget),
    };
    eprintln!(
        "tilec-fuzz: {} mutants of {} seed files (seed {}), {workers} at a time, {}s and {} MiB each",
        jobs.len(),
        seeds.len(),
        cli.seed,
        cli.time_limit,
        cli.memory_limit
    );
    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let tally = Mutex::new(Tally::default());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let failure = run_job(cli, &tilec, &seeds, *job, &limits, &tally);
                    if let Err(error) = failure {
                        eprintln!("tilec-fuzz: {error:#}");
                    }
                    let done = next.load(Ordering::Relaxed);
                    if done.is_multiple_of(500) {
                        eprintln!("  {done} of {} ({:.0?})", jobs.len(), started.elapsed());
                    }
                }
            });
        }
    });
    let tally = tally
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    print_summary(&tally, started.elapsed());
    Ok(tally.failures.is_empty())
}

/// Every job, interleaved so that a short run still reaches every command.
fn plan(cli: &Cli) -> Vec<Job> {
    let wanted = [
        (Subcommand::Check, cli.check),
        (Subcommand::Layout, cli.layout),
        (Subcommand::Build, cli.build),
        (Subcommand::Run, cli.run),
    ];
    let most = wanted.iter().map(|(_, n)| *n).max().unwrap_or(0);
    let mut jobs = Vec::new();
    for index in 0..most {
        for (command, count) in wanted {
            if index < count {
                jobs.push(Job { command, index });
            }
        }
    }
    jobs
}

/// Every `.py` file under the seed paths with its text, in a stable order; large files are left
/// out (a mutant of a 5,000-line file tests the same code as one of a 300-line file, slower).
fn read_seeds(paths: &[PathBuf]) -> Result<Vec<(PathBuf, String)>> {
    let mut files = Vec::new();
    for path in paths {
        collect_py(path, &mut files)
            .with_context(|| format!("reading seeds under {}", path.display()))?;
    }
    files.sort();
    files.dedup();
    Ok(files
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            (text.len() <= 64 * 1024).then_some((path, text))
        })
        .collect())
}

fn collect_py(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let metadata = std::fs::symlink_metadata(path)?;
    if metadata.is_dir() {
        for entry in std::fs::read_dir(path)? {
            collect_py(&entry?.path(), out)?;
        }
    } else if metadata.is_file() && path.extension().is_some_and(|e| e == "py") {
        out.push(path.to_owned());
    }
    Ok(())
}

/// The generator of one mutant: a function of the run's seed, the command and the index.
fn job_rng(seed: u64, job: Job) -> fastrand::Rng {
    let command = Subcommand::ALL
        .iter()
        .position(|c| *c == job.command)
        .unwrap_or(0) as u64;
    let mixed = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(command.wrapping_mul(0xC2B2_AE3D_27D4_EB4F))
        .wrapping_add(job.index as u64);
    fastrand::Rng::with_seed(mixed)
}

/// Makes and runs one mutant, recording the outcome; a failure is written out as a regression.
fn run_job(
    cli: &Cli,
    tilec: &Path,
    seeds: &[(PathBuf, String)],
    job: Job,
    limits: &Limits,
    tally: &Mutex<Tally>,
) -> Result<()> {
    let mut rng = job_rng(cli.seed, job);
    let (seed_path, seed_text) = &seeds[rng.usize(0..seeds.len())];
    let (_, donor) = &seeds[rng.usize(0..seeds.len())];
    let (mutant, edits) = mutate(seed_text, donor, &mut rng);
    let scratch = tempfile::tempdir().context("a scratch folder")?;
    let file_name = seed_path.file_name().unwrap_or_default();
    let file = scratch.path().join(file_name);
    std::fs::write(&file, &mutant)?;
    let args = job.command.args(&file, scratch.path(), limits);
    let report = run_tilec(tilec, &args, limits, scratch.path());
    let mut tally = tally
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    tally.add(job.command, &report);
    if report.outcome.is_failure() {
        let name = format!("{}-{}-{}", job.command.name(), cli.seed, job.index);
        let described = describe_failure(&name, seed_path, &edits, &report);
        eprintln!("{described}");
        write_failure(&cli.failures, &name, job.command, &mutant, &described)?;
        tally.failures.push(name);
    }
    Ok(())
}

fn describe_failure(name: &str, seed: &Path, edits: &[Edit], report: &Report) -> String {
    let edits: Vec<&str> = edits.iter().map(|edit| edit.name()).collect();
    let outcome = match &report.outcome {
        Outcome::Normal(code) => format!("exit {code}"),
        Outcome::Panic(message) => format!("panic: {message}"),
        Outcome::Signal(message) => format!("killed: {message}"),
        Outcome::Hang => format!("hang: still running after {:.1?}", report.elapsed),
        Outcome::Unexpected(code) => format!("unexpected exit status {code}"),
    };
    format!(
        "FAILED {name}: {outcome}\n  seed file {} with {}\n{}",
        seed.display(),
        edits.join(", "),
        report
            .stderr_tail
            .lines()
            .map(|line| format!("    {line}\n"))
            .collect::<String>()
    )
}

fn write_failure(
    dir: &Path,
    name: &str,
    command: Subcommand,
    mutant: &str,
    described: &str,
) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let header = format!("{REGRESSION_MARKER}{}\n", command.name());
    std::fs::write(dir.join(format!("{name}.py")), header + mutant)?;
    std::fs::write(dir.join(format!("{name}.txt")), described)?;
    Ok(())
}

fn print_summary(tally: &Tally, elapsed: Duration) {
    println!("tilec-fuzz summary ({:.1?}):", elapsed);
    for command in Subcommand::ALL {
        let counts: Vec<String> = tally
            .counts
            .iter()
            .filter(|(c, ..)| *c == command)
            .map(|(_, kind, count)| format!("{count} {kind}"))
            .collect();
        if counts.is_empty() {
            continue;
        }
        let slowest = tally
            .slowest
            .iter()
            .find(|(c, _)| *c == command)
            .map_or(Duration::ZERO, |(_, d)| *d);
        println!(
            "  {:<7} {} (slowest {:.2?})",
            command.name(),
            counts.join(", "),
            slowest
        );
    }
    if tally.failures.is_empty() {
        println!("  no panics, aborts or hangs");
    } else {
        println!(
            "  {} failures: {}",
            tally.failures.len(),
            tally.failures.join(" ")
        );
    }
}
