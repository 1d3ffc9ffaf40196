//! Lowering coverage on TileLang's own examples (`shared/realworld/tilelang-examples/`): every
//! in-scope instance that checks clean must lower to CUDA (`tilec build --emit cuda`) and run on
//! the CPU emulator at sizes that take about a second (`tilec run --device cpu --shrink`), within
//! a time budget per instance. The outcome of every such instance — emulated, with the smaller
//! sizes `--shrink` chose, or the reason it is not — is compared with
//! `tests/realworld/LOWERING.txt`, so a kernel that stops lowering or running fails the test, and
//! one that starts to shows in the diff. `TILEC_BLESS=1 cargo test -p tilec-daemon --test it
//! realworld_lowering` rewrites the file, to be committed after reading its diff.
//!
//! Instances with check errors (and those tilec cannot analyse yet) are the business of the
//! real-world check test (`tests/realworld/EXPECTED.toml`) and are not listed here.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `--shrink` aims under this many estimated seconds of emulation per instance.
const SHRINK_TO_SECONDS: &str = "0.5";

/// The emulator stops an instance after this many seconds (`--emulator-budget`), and the outcome
/// says so: an estimate that is far off, or sizes `--shrink` could not bring down, show as a
/// failure rather than as a slow test. The slowest instance that shrinks no further (a paged
/// decode kernel, estimated at 4 s) takes 9–13 s alone on the 2-core build machine, and more
/// beside the other tests: the budget leaves it room on a loaded machine.
const EMULATOR_BUDGET_SECONDS: &str = "40";

/// A `tilec run` that has not finished after this long is killed and reported (a hang).
const PROCESS_LIMIT: Duration = Duration::from_secs(120);

fn expectations_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/realworld/LOWERING.txt")
}

/// Each instance's outcome, by file (relative to the examples), kernel and instance index.
type Outcomes = BTreeMap<(String, String, u64), String>;

/// One instance the build reported: its file (relative to the examples), kernel and index.
#[derive(Clone, Debug)]
struct Built {
    file: String,
    kernel: String,
    instance: u64,
}

#[test]
fn every_clean_real_world_instance_lowers_and_runs_on_the_emulator() {
    let Some(dir) = tilec_tests::realworld_dir() else {
        return;
    };
    let scratch = tempfile::tempdir().expect("a scratch folder");
    let (built, not_lowered) = build_all(&dir, scratch.path());
    assert!(
        built.len() > 100,
        "only {} instances built: is the build broken?",
        built.len()
    );
    let mut outcomes: Outcomes = not_lowered;
    outcomes.extend(emulate_all(&dir, &built));
    let actual = render(&outcomes);
    let path = expectations_path();
    if std::env::var_os("TILEC_BLESS").is_some() {
        std::fs::write(&path, &actual).expect("the expectations file is writable");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_default();
    if expected != actual {
        let diff = tilec_tests::diff_lines(&expected, &actual);
        panic!(
            "the lowering coverage of the real-world examples changed ({} lines); read the diff, \
             then bless with TILEC_BLESS=1 cargo test -p tilec-daemon --test it \
             realworld_lowering:\n{}",
            diff.len(),
            diff.join("\n")
        );
    }
}

/// Builds every example into `scratch` and returns the in-scope instances that built, and the
/// outcome of each in-scope instance that checks clean but does not lower (`cannot-lower`).
fn build_all(dir: &Path, scratch: &Path) -> (Vec<Built>, Outcomes) {
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .arg("build")
        .arg(dir)
        .args(["--emit", "cuda", "--format", "json", "--out"])
        .arg(scratch.join("out"))
        .arg("--cache")
        .arg(scratch.join("cache"))
        .env("TILEC_CACHE_REMOTE", "")
        .output()
        .expect("tilec build runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut built = Vec::new();
    let mut not_lowered = BTreeMap::new();
    let clean = tilec_tests::realworld_clean_instances();
    for line in stdout.lines() {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            panic!("tilec build printed a line that is not JSON: {line}");
        };
        if record["kind"] != "build-instance" {
            continue;
        }
        let Some(file) = record["file"]
            .as_str()
            .and_then(|f| Path::new(f).strip_prefix(dir).ok())
            .map(|f| f.to_string_lossy().replace('\\', "/"))
        else {
            continue;
        };
        if tilec_tests::out_of_scope(&file).is_some() {
            continue;
        }
        let entry = Built {
            file,
            kernel: record["kernel"].as_str().unwrap_or_default().to_owned(),
            instance: record["instance"].as_u64().unwrap_or_default(),
        };
        match record["status"].as_str() {
            Some("built" | "cached") => built.push(entry),
            _ => {
                let key = (entry.file, entry.kernel, entry.instance);
                // A clean instance that does not lower for what tilec cannot analyse yet (a
                // tensor behind a pointer) says so, as a `cannot-lower` does.
                let why = cannot_lower(&record).or_else(|| {
                    clean
                        .contains(&key)
                        .then(|| not_analysed(&record))
                        .flatten()
                });
                if let Some(why) = why {
                    not_lowered.insert(key, why);
                }
            }
        }
    }
    (built, not_lowered)
}

/// Why a failed instance does not lower or build, when the reason is the lowering (`cannot-lower`)
/// or the build (an invalid program, a file it could not write) and not its check diagnostics.
fn cannot_lower(record: &Value) -> Option<String> {
    let description = std::fs::read_to_string(record["json"].as_str()?).ok()?;
    let description: Value = serde_json::from_str(&description).ok()?;
    if let Some(error) = description["errors"]
        .as_array()
        .and_then(|errors| errors.first())
        .and_then(Value::as_str)
    {
        return Some(format!("does not build: {}", first_clause(error)));
    }
    let diagnostics = description["diagnostics"].as_array()?;
    let lowering = diagnostics.iter().find(|d| d["code"] == "cannot-lower")?;
    let message = lowering["message"].as_str().unwrap_or_default();
    Some(format!("does not lower: {}", first_clause(message)))
}

/// The first `not-analysed` diagnostic of a failed build, as why it does not lower.
fn not_analysed(record: &Value) -> Option<String> {
    let description = std::fs::read_to_string(record["json"].as_str()?).ok()?;
    let description: Value = serde_json::from_str(&description).ok()?;
    let diagnostics = description["diagnostics"].as_array()?;
    let limit = diagnostics.iter().find(|d| d["code"] == "not-analysed")?;
    let message = limit["message"].as_str().unwrap_or_default();
    Some(format!(
        "does not lower (not analysed): {}",
        first_clause(message)
    ))
}

/// Runs every built instance on the emulator, on every core, and returns each one's outcome.
fn emulate_all(dir: &Path, built: &[Built]) -> Outcomes {
    let next = AtomicUsize::new(0);
    let outcomes = Mutex::new(BTreeMap::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                while let Some(job) = built.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let outcome = emulate(dir, job);
                    let key = (job.file.clone(), job.kernel.clone(), job.instance);
                    if let Ok(mut outcomes) = outcomes.lock() {
                        outcomes.insert(key, outcome);
                    }
                }
            });
        }
    });
    outcomes.into_inner().unwrap_or_default()
}

/// `tilec run --device cpu --shrink` on one instance: `emulated`, with the `--with` sizes it ran
/// at, or the first error it printed.
fn emulate(dir: &Path, job: &Built) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .arg("run")
        .arg(dir.join(&job.file))
        .args(["--device", "cpu", "--kernel", &job.kernel, "--instance"])
        .arg(job.instance.to_string())
        .arg(format!("--shrink={SHRINK_TO_SECONDS}"))
        .args(["--emulator-budget", EMULATOR_BUDGET_SECONDS])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tilec run starts");
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > PROCESS_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(error) => panic!("waiting for tilec run: {error}"),
        }
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    match status {
        None => format!("hangs: killed after {} s", PROCESS_LIMIT.as_secs()),
        Some(status) if status.success() => match shrunk_to(&stderr) {
            Some(sizes) => format!("emulated at {sizes}"),
            None => "emulated".to_owned(),
        },
        Some(_) => {
            let error = stderr
                .lines()
                .find(|line| line.starts_with("error"))
                .unwrap_or("failed without an error line");
            // Paths differ between machines; the table names files relative to the examples.
            let error = error.replace(&format!("{}/", dir.display()), "");
            // Where the budget ran out and after how long depend on the machine's speed.
            if error.contains("stopped after its time budget") {
                return format!("does not run within {EMULATOR_BUDGET_SECONDS} s");
            }
            format!("does not run: {}", first_clause(&error))
        }
    }
}

/// The `--with` flags of `--shrink`'s note, if it shrank the instance.
fn shrunk_to(stderr: &str) -> Option<&str> {
    let note = stderr
        .lines()
        .find_map(|line| line.strip_prefix("note: emulating at smaller sizes (--shrink): "))?;
    Some(note.split(" (estimated").next().unwrap_or(note))
}

/// A message up to its first `;` or newline: short enough to read in a table.
fn first_clause(message: &str) -> String {
    let end = message.find([';', '\n']).unwrap_or(message.len());
    message[..end].trim().to_owned()
}

fn render(outcomes: &Outcomes) -> String {
    let mut text = String::from(
        "# The lowering coverage of TileLang's examples: every in-scope instance that checks clean,\n\
         # built to CUDA and run on the CPU emulator at the sizes `tilec run --shrink` picks.\n\
         # Written by `TILEC_BLESS=1 cargo test -p tilec-daemon --test it realworld_lowering`.\n",
    );
    for ((file, kernel, instance), outcome) in outcomes {
        text.push_str(&format!("{file} {kernel}#{instance}: {outcome}\n"));
    }
    text
}
