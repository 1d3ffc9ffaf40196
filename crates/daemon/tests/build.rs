//! `tilec build` end to end, through the real binary over a temporary copy of some corpus files: a
//! second build is served from the cache, an edit rebuilds exactly the instances it changed, a
//! damaged cache entry is rebuilt, two builds sharing one cache at once both succeed, and an
//! instance that `--with` makes impossible fails with its diagnostic at the line it concerns. Also
//! `tilec bench`, which times the same pipeline per stage.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The corpus files copied into each test's folder: 7 instances that lower (pointwise_family.py has 5).
const FILES: [&str; 3] = ["softmax.py", "pointwise_family.py", "elementwise_add.py"];

fn corpus() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpus");
    if dir.is_dir() {
        Some(dir)
    } else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "{} is missing, and CI must run every test: keep `shared/` beside the clone",
                dir.display()
            );
        }
        eprintln!(
            "skipped: no corpus at {} (CI has shared/ beside the clone)",
            dir.display()
        );
        None
    }
}

/// A temporary folder with `kernels/` holding the copied files.
fn setup() -> Option<tempfile::TempDir> {
    let corpus = corpus()?;
    let dir = tempfile::tempdir().expect("temp dir");
    let kernels = dir.path().join("kernels");
    std::fs::create_dir_all(&kernels).expect("kernels folder");
    for file in FILES {
        std::fs::copy(corpus.join(file), kernels.join(file)).expect("copies a corpus file");
    }
    Some(dir)
}

fn build_command(dir: &Path, out: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tilec"));
    command
        .current_dir(dir)
        .args([
            "build", "kernels", "--out", out, "--cache", "cache", "--emit", "cuda",
        ])
        .args(["--format", "json"]);
    command
}

/// The `build-summary` object of a finished build, after checking it succeeded.
fn summary(output: &Output) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "build failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last = stdout.lines().last().expect("a summary line");
    let value: Value = serde_json::from_str(last).expect("the summary is JSON");
    assert_eq!(value["kind"], "build-summary");
    // Launches whose PTX came without ptxas's report (NVRTC's compute-cache hits): none without
    // NVRTC, some number with it.
    assert!(value["unreported_registers"].is_u64(), "{value}");
    value
}

fn counts(value: &Value) -> [u64; 4] {
    ["instances", "built", "cached", "failed"].map(|key| value[key].as_u64().unwrap_or(u64::MAX))
}

fn build(dir: &Path) -> Output {
    build_command(dir, "out").output().expect("tilec runs")
}

#[test]
fn an_edit_rebuilds_exactly_the_instances_it_changed() {
    let Some(dir) = setup() else { return };
    assert_eq!(counts(&summary(&build(dir.path()))), [7, 7, 0, 0], "cold");
    assert_eq!(
        counts(&summary(&build(dir.path()))),
        [7, 0, 7, 0],
        "unchanged"
    );
    // Fewer threads change softmax's thread program only.
    let path = dir.path().join("kernels/softmax.py");
    let text = std::fs::read_to_string(&path).expect("reads");
    let edited = text.replace("threads=256", "threads=128");
    assert_ne!(edited, text, "the edit applies");
    std::fs::write(&path, edited).expect("writes");
    let output = build(dir.path());
    assert_eq!(counts(&summary(&output)), [7, 1, 6, 0], "after the edit");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let rebuilt: Vec<&str> = stdout
        .lines()
        .filter(|line| line.contains("\"status\":\"built\""))
        .collect();
    assert_eq!(rebuilt.len(), 1);
    assert!(
        rebuilt[0].contains("\"kernel\":\"softmax\""),
        "{}",
        rebuilt[0]
    );
    // Each instance has its source and description; the description names its launch geometry.
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/softmax/softmax-0.json")).expect("json"),
    )
    .expect("parses");
    assert_eq!(json["launches"][0]["block"][0], 128);
    assert_eq!(json["launches"][0]["grid"][0], 8192);
    assert_eq!(json["launches"][0]["persistent"], false);
    assert!(dir.path().join("out/softmax/softmax-0.cu").is_file());
}

#[test]
fn a_damaged_cache_entry_is_reported_and_rebuilt() {
    let Some(dir) = setup() else { return };
    summary(&build(dir.path()));
    let entry = walk_files(&dir.path().join("cache"))
        .into_iter()
        .next()
        .expect("the cache has entries");
    let bytes = std::fs::read(&entry).expect("reads the entry");
    std::fs::write(&entry, &bytes[..bytes.len() / 2]).expect("truncates it");
    let output = build(dir.path());
    assert_eq!(counts(&summary(&output)), [7, 1, 6, 0]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("corrupt cache entry"), "{stderr}");
    assert_eq!(
        counts(&summary(&build(dir.path()))),
        [7, 0, 7, 0],
        "repaired"
    );
}

#[test]
fn two_builds_sharing_a_cache_at_once_both_succeed() {
    let Some(dir) = setup() else { return };
    let start = |out| {
        build_command(dir.path(), out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starts")
    };
    let (first, second) = (start("out-a"), start("out-b"));
    let [first, second] = [first, second].map(|child| {
        let output = child.wait_with_output().expect("finishes");
        counts(&summary(&output))
    });
    // Each builds or reuses every instance; together they leave one whole entry per kernel.
    for result in [first, second] {
        assert_eq!(result[0], 7);
        assert_eq!(result[1] + result[2], 7);
        assert_eq!(result[3], 0);
    }
    assert_eq!(counts(&summary(&build(dir.path()))), [7, 0, 7, 0]);
}

/// `--with` can make an instance no block could hold. `tilec check` never sees that instance, so
/// the build says why itself, positioned at the allocation, and writes the diagnostic (with its
/// line) into the instance's JSON.
#[test]
fn an_instance_made_impossible_by_with_fails_with_its_diagnostic() {
    let Some(dir) = setup() else { return };
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .current_dir(dir.path())
        .args([
            "build",
            "kernels/softmax.py",
            "--out",
            "out",
            "--cache",
            "cache",
        ])
        .args(["--emit", "cuda", "--with", "N=4611686018427387904"])
        .output()
        .expect("tilec runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "the build must fail: {stdout}");
    let reason = stdout
        .lines()
        .find(|line| line.contains("error[register-pressure]"))
        .unwrap_or_else(|| panic!("a register-pressure error line: {stdout}"));
    assert!(
        reason.trim_start().starts_with("kernels/softmax.py:"),
        "positioned in the file: {reason}"
    );
    let json = walk_files(&dir.path().join("out"))
        .into_iter()
        .find(|path| path.extension().is_some_and(|e| e == "json"))
        .expect("the instance's JSON");
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("readable")).expect("JSON");
    let diagnostic = &record["diagnostics"][0];
    assert_eq!(diagnostic["code"], "register-pressure", "{record:#}");
    assert_eq!(
        diagnostic["line"], 11,
        "at `x = T.alloc_fragment(...)`: {record:#}"
    );
}

fn walk_files(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                found.push(path);
            }
        }
    }
    found.sort();
    found
}

/// `tilec bench` reports, per instance, each stage from source to CUDA: one row per file with its
/// instance count and four timings, the CUDA one covering a real lowering (not zero).
#[test]
fn bench_times_every_stage_from_source_to_cuda() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiled_gemm.py");
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .arg("bench")
        .arg(&example)
        .args(["--iterations", "1"])
        .output()
        .expect("runs tilec bench");
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    let header: Vec<&str> = lines.next().expect("a header").split_whitespace().collect();
    assert_eq!(
        header,
        [
            "file",
            "instances",
            "check",
            "µs/inst",
            "layouts",
            "µs/inst",
            "cuda",
            "µs/inst",
            "edit",
            "µs/inst"
        ]
    );
    let row: Vec<&str> = lines
        .find(|line| line.contains("tiled_gemm.py"))
        .expect("a row for the file")
        .split_whitespace()
        .collect();
    assert_eq!(row[1], "2", "{stdout}");
    let times: Vec<f64> = row[2..]
        .iter()
        .map(|value| value.parse().expect("a number"))
        .collect();
    assert_eq!(times.len(), 4, "{stdout}");
    assert!(times.iter().all(|&t| t > 0.0), "{stdout}");
}
