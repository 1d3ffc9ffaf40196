//! Running one `tilec` command on one file in its own process, under a time and a memory limit,
//! and telling a normal end (success or a reported error) from a crash: a panic, an abort (an
//! allocation that failed under the memory limit, a stack overflow), a kill by a signal, or a hang
//! past the time limit.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use wait_timeout::ChildExt;

/// A command the fuzzer runs on a mutant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subcommand {
    Check,
    Layout,
    /// `build --emit cuda` into a scratch folder, with a scratch cache.
    Build,
    /// `run --device cpu` with an emulator budget below the time limit.
    Run,
}

impl Subcommand {
    pub const ALL: [Subcommand; 4] = [
        Subcommand::Check,
        Subcommand::Layout,
        Subcommand::Build,
        Subcommand::Run,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Subcommand::Check => "check",
            Subcommand::Layout => "layout",
            Subcommand::Build => "build",
            Subcommand::Run => "run",
        }
    }

    pub fn from_name(name: &str) -> Option<Subcommand> {
        Subcommand::ALL
            .into_iter()
            .find(|command| command.name() == name)
    }

    /// The arguments after `tilec` for `file`, with `scratch` for outputs and caches.
    pub fn args(self, file: &Path, scratch: &Path, limits: &Limits) -> Vec<String> {
        let file = file.display().to_string();
        let scratch_path = |name: &str| scratch.join(name).display().to_string();
        let mut args: Vec<String> = match self {
            Subcommand::Check => vec!["check".into()],
            Subcommand::Layout => vec!["layout".into()],
            Subcommand::Build => vec![
                "build".into(),
                "--emit".into(),
                "cuda".into(),
                "--out".into(),
                scratch_path("out"),
                "--cache".into(),
                scratch_path("cache"),
            ],
            Subcommand::Run => vec![
                "run".into(),
                "--device".into(),
                "cpu".into(),
                "--cache".into(),
                scratch_path("cache"),
                "--emulator-budget".into(),
                format!("{}", limits.emulator_budget.as_secs_f64()),
            ],
        };
        args.push("--".into());
        args.push(file);
        args
    }
}

/// The limits one command runs under.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub time: Duration,
    /// The address-space limit (`ulimit -v`), in MiB: an allocation past it fails, and Rust
    /// aborts, which the fuzzer reports as a memory abort.
    pub memory_mib: u64,
    /// How long `run` lets the emulator go (`--emulator-budget`): well under `time`, which must
    /// also hold the analysis before the launch.
    pub emulator_budget: Duration,
}

/// How a command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Exit status 0, 1 or 2 without a panic message: a result, or errors reported as such.
    Normal(i32),
    /// A panic: exit status 101, or a panic message on stderr.
    Panic(String),
    /// Killed by a signal: an abort (failed allocation, stack overflow) or a crash.
    Signal(String),
    /// Still running at the time limit (then killed).
    Hang,
    /// Another exit status.
    Unexpected(i32),
}

impl Outcome {
    pub fn is_failure(&self) -> bool {
        !matches!(self, Outcome::Normal(_))
    }

    /// A short name for tallies: `ok`, `panic`, `signal`, `hang`, `exit`.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Normal(_) => "ok",
            Outcome::Panic(_) => "panic",
            Outcome::Signal(_) => "signal",
            Outcome::Hang => "hang",
            Outcome::Unexpected(_) => "exit",
        }
    }
}

/// What one run gave: the outcome, the time it took and the end of its stderr.
#[derive(Clone, Debug)]
pub struct Report {
    pub outcome: Outcome,
    pub elapsed: Duration,
    pub stderr_tail: String,
}

/// Runs `tilec` with `args` under `limits`, with the memory limit applied by the shell (`ulimit -v`)
/// so that no unsafe code is needed here. stdout is discarded; stderr is kept for the report.
pub fn run_tilec(tilec: &Path, args: &[String], limits: &Limits, cwd: &Path) -> Report {
    let started = Instant::now();
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -v {} && exec \"$0\" \"$@\"",
            limits.memory_mib * 1024
        ))
        .arg(tilec)
        .args(args)
        .current_dir(cwd)
        // A crash should say where it happened, and nothing should reach for a GPU.
        .env("RUST_BACKTRACE", "1")
        .env("CUDA_VISIBLE_DEVICES", "")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            return Report {
                outcome: Outcome::Signal(format!("could not start: {error}")),
                elapsed: started.elapsed(),
                stderr_tail: String::new(),
            };
        }
    };
    // stderr is read on a thread, so that a command writing more than a pipe holds never blocks.
    let stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut stderr) = stderr {
            let _ = stderr.read_to_string(&mut text);
        }
        text
    });
    let status = child.wait_timeout(limits.time).ok().flatten();
    let hung = status.is_none();
    if hung {
        let _ = child.kill();
        let _ = child.wait();
    }
    let stderr = reader.join().unwrap_or_default();
    let outcome = match status {
        None => Outcome::Hang,
        Some(status) => classify(status, &stderr),
    };
    Report {
        outcome,
        elapsed: started.elapsed(),
        stderr_tail: tail(&stderr, 40),
    }
}

fn classify(status: std::process::ExitStatus, stderr: &str) -> Outcome {
    if let Some(at) = stderr.find("panicked at") {
        let line = stderr[at..].lines().take(2).collect::<Vec<_>>().join(" ");
        return Outcome::Panic(line);
    }
    match status.code() {
        Some(code @ 0..=2) => Outcome::Normal(code),
        Some(101) => Outcome::Panic("exit status 101".to_owned()),
        Some(code) => Outcome::Unexpected(code),
        None => {
            let reason = stderr
                .lines()
                .find(|line| line.contains("memory allocation") || line.contains("overflow"))
                .unwrap_or("killed by a signal");
            Outcome::Signal(signal_description(status, reason))
        }
    }
}

#[cfg(unix)]
fn signal_description(status: std::process::ExitStatus, reason: &str) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status.signal() {
        Some(signal) => format!("signal {signal}: {reason}"),
        None => reason.to_owned(),
    }
}

#[cfg(not(unix))]
fn signal_description(_status: std::process::ExitStatus, reason: &str) -> String {
    reason.to_owned()
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A regression input: a file that once crashed a command, with the command in its first line
/// (`# tilec-fuzz: run`), kept so that the crash stays fixed.
#[derive(Clone, Debug)]
pub struct Regression {
    pub path: PathBuf,
    pub command: Subcommand,
}

/// The first-line marker of a regression file.
pub const REGRESSION_MARKER: &str = "# tilec-fuzz: ";

/// The regression files in `dir`, sorted by name. A file without a valid marker is an error, so
/// that a regression is never silently skipped.
pub fn regressions(dir: &Path) -> Result<Vec<Regression>, String> {
    let entries = std::fs::read_dir(dir).map_err(|error| format!("{}: {error}", dir.display()))?;
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|extension| extension != "py") {
            continue;
        }
        let text = std::fs::read_to_string(&path)
            .map_err(|error| format!("{}: {error}", path.display()))?;
        let command = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix(REGRESSION_MARKER))
            .and_then(|name| Subcommand::from_name(name.trim()))
            .ok_or_else(|| {
                format!(
                    "{}: the first line must be `{REGRESSION_MARKER}<check|layout|build|run>`",
                    path.display()
                )
            })?;
        found.push(Regression { path, command });
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_comes_after_a_double_dash() {
        let limits = Limits {
            time: Duration::from_secs(10),
            memory_mib: 1024,
            emulator_budget: Duration::from_secs(2),
        };
        for command in Subcommand::ALL {
            let args = command.args(Path::new("--help.py"), Path::new("/tmp/s"), &limits);
            assert_eq!(
                &args[args.len() - 2..],
                ["--", "--help.py"],
                "{}",
                command.name()
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn outcomes_are_told_apart() {
        let limits = Limits {
            time: Duration::from_millis(500),
            memory_mib: 1024,
            emulator_budget: Duration::from_millis(100),
        };
        let cwd = std::env::temp_dir();
        let sh = |script: &str| {
            run_tilec(
                Path::new("/bin/sh"),
                &["-c".to_owned(), script.to_owned()],
                &limits,
                &cwd,
            )
            .outcome
        };
        assert_eq!(sh("exit 1"), Outcome::Normal(1));
        assert_eq!(sh("exit 101"), Outcome::Panic("exit status 101".to_owned()));
        assert!(matches!(
            sh("echo \"thread 'main' panicked at x.rs:1:1:\" >&2; exit 1"),
            Outcome::Panic(_)
        ));
        assert!(matches!(sh("kill -ABRT $$"), Outcome::Signal(_)));
        assert_eq!(sh("sleep 5"), Outcome::Hang);
        assert_eq!(sh("exit 7"), Outcome::Unexpected(7));
    }
}
