//! `tilec build` end to end, through the real binary over a temporary copy of some fixtures: a
//! second build is served from the cache, an edit rebuilds exactly the instances it changed, a
//! damaged cache entry is rebuilt, two builds sharing one cache at once both succeed, and an
//! instance that `--with` makes impossible fails with its diagnostic at the line it concerns. Also
//! `tilec bench`, which times the same pipeline per stage.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use sha2::Digest;

/// The fixtures copied into each test's folder (`tests/fixtures/kernels/`, written for the tests):
/// 7 instances that lower (pointwise_family.py has 5).
const FILES: [&str; 3] = ["softmax.py", "pointwise_family.py", "elementwise_add.py"];

/// A temporary folder with `kernels/` holding the copied files.
fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    let kernels = dir.path().join("kernels");
    std::fs::create_dir_all(&kernels).expect("kernels folder");
    for file in FILES {
        let source = crate::common::fixture(&format!("kernels/{file}"));
        std::fs::copy(&source, kernels.join(file))
            .unwrap_or_else(|error| panic!("cannot copy {}: {error}", source.display()));
    }
    dir
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
    let dir = setup();
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

/// A damaged launch entry is compiled again (its instance is lowered again to have its CUDA); a
/// damaged instance entry costs a lowering, and the launch entry it named is still used.
#[test]
fn a_damaged_cache_entry_is_reported_and_rebuilt() {
    let dir = setup();
    summary(&build(dir.path()));
    let cache = dir.path().join("cache");
    let truncate = |entry: &Path| {
        let bytes = std::fs::read(entry).expect("reads the entry");
        std::fs::write(entry, &bytes[..bytes.len() / 2]).expect("truncates it");
    };
    truncate(&entries_holding(&cache, "cuda")[0]);
    let output = build(dir.path());
    let rebuilt = summary(&output);
    assert_eq!(counts(&rebuilt), [7, 1, 6, 0]);
    assert_eq!(rebuilt["cache"]["lowered"], 1, "{rebuilt}");
    assert_eq!(rebuilt["cache"]["instance_hits"], 6, "{rebuilt}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(stderr.matches("corrupt cache entry").count(), 1, "{stderr}");
    truncate(&entries_holding(&cache, "launches")[0]);
    let output = build(dir.path());
    let relowered = summary(&output);
    assert_eq!(counts(&relowered), [7, 0, 7, 0], "nothing compiled");
    assert_eq!(relowered["cache"]["lowered"], 1, "{relowered}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("corrupt cache entry"), "{stderr}");
    let repaired = summary(&build(dir.path()));
    assert_eq!(counts(&repaired), [7, 0, 7, 0], "repaired");
    assert_eq!(repaired["cache"]["lowered"], 0, "{repaired}");
}

/// An unchanged instance is neither lowered nor compiled again; an edit to a module lowers again
/// exactly the instances of the files that import it (their CUDA is unchanged here, so nothing
/// is compiled), and `--with` values make an instance of their own.
#[test]
fn an_unchanged_instance_is_not_lowered_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let helper = "BLOCK = 128\n";
    let user = r#"import tilelang
import tilelang.language as T
from sizes import BLOCK


@tilelang.jit
def scale(N, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, BLOCK), threads=BLOCK) as bx:
            for i in T.Parallel(BLOCK):
                B[bx * BLOCK + i] = A[bx * BLOCK + i] * 2.0

    return main


scale(4096)
"#;
    write_tree(
        dir.path(),
        &[
            ("k/sizes.py", helper),
            ("k/user.py", user),
            ("k/other.py", &kernel(64)),
        ],
    );
    let args = build_args(&["k"], &["--format", "json"]);
    let cold = summary(&tilec(dir.path(), &args));
    assert_eq!(counts(&cold), [2, 2, 0, 0], "{cold}");
    assert_eq!(cold["cache"]["lowered"], 2, "{cold}");
    let warm = summary(&tilec(dir.path(), &args));
    assert_eq!(counts(&warm), [2, 0, 2, 0], "{warm}");
    assert_eq!(warm["cache"]["lowered"], 0, "{warm}");
    assert_eq!(warm["cache"]["instance_hits"], 2, "{warm}");
    // A comment in the module changes no CUDA, but what the importer's analysis reads.
    write_tree(
        dir.path(),
        &[("k/sizes.py", "# the block size\nBLOCK = 128\n")],
    );
    let edited = summary(&tilec(dir.path(), &args));
    assert_eq!(counts(&edited), [2, 0, 2, 0], "{edited}");
    assert_eq!(edited["cache"]["lowered"], 1, "{edited}");
    assert_eq!(edited["cache"]["instance_hits"], 1, "{edited}");
    let with = build_args(&["k/user.py"], &["--format", "json", "--with", "N=8192"]);
    let sized = summary(&tilec(dir.path(), &with));
    assert_eq!(sized["cache"]["lowered"], 1, "another instance: {sized}");
    let again = summary(&tilec(dir.path(), &with));
    assert_eq!(again["cache"]["lowered"], 0, "{again}");
}

#[test]
fn two_builds_sharing_a_cache_at_once_both_succeed() {
    let dir = setup();
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
    let dir = setup();
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
        diagnostic["line"], 12,
        "at `x = T.alloc_fragment(...)`: {record:#}"
    );
}

/// The cache entries under `cache` whose payload has `field`: `cuda` for launch entries,
/// `launches` for instance entries.
fn entries_holding(cache: &Path, field: &str) -> Vec<PathBuf> {
    walk_files(cache)
        .into_iter()
        .filter(|path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let payload = text.split_once('\n').map_or("", |(_, payload)| payload);
            serde_json::from_str::<Value>(payload).is_ok_and(|value| value.get(field).is_some())
        })
        .collect()
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

/// A kernel that lowers, with `threads` threads per block.
fn kernel(threads: u32) -> String {
    format!(
        r#"import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def double(N, block=128, threads={threads}):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0

    return main


def main():
    double(1024)
"#
    )
}

/// A kernel `tilec check` accepts but tilec cannot lower: a float64 `T.gemm` (no tensor-core form
/// takes fp64 operands).
const UNLOWERABLE: &str = include_str!("fixtures/unlowerable.py");

/// Writes `files` (path, text) under `dir`, creating folders as needed.
fn write_tree(dir: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = dir.join(path);
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("creates the folder");
        std::fs::write(path, text).expect("writes a file");
    }
}

/// Runs `tilec ARGS` in `dir`, killing it (and failing) if it runs past 60 s: a walk that loops
/// or a read that blocks must fail the test, not hang it.
fn tilec(dir: &Path, args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tilec starts");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().expect("polls tilec").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("tilec {args:?} did not finish in 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().expect("tilec finishes")
}

/// The JSON lines of a `--format json` run.
fn json_lines(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}

fn build_args<'a>(paths: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["build"];
    args.extend(paths);
    args.extend(["--out", "out", "--cache", "cache", "--emit", "cuda"]);
    args.extend(extra);
    args
}

/// One good file, one that only imports TileLang, one that cannot be lowered and one whose syntax
/// error hides its kernels: the good file's outputs are written, the failed instance gets its
/// description with the reason, each of the others is reported, and the exit code is 1.
#[test]
fn a_folder_build_writes_the_good_files_and_reports_the_others() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_tree(
        dir.path(),
        &[
            ("k/good.py", &kernel(128)),
            ("k/empty.py", "import tilelang\n"),
            ("k/nolower.py", UNLOWERABLE),
            (
                "k/broken.py",
                "import tilelang\nimport tilelang.language as T\ndef f(:\n",
            ),
        ],
    );
    let output = tilec(dir.path(), &build_args(&["k"], &["--format", "json"]));
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let lines = json_lines(&output);
    let files: Vec<(&str, &str)> = lines
        .iter()
        .filter(|line| line["kind"] == "build-file")
        .map(|line| {
            (
                line["file"].as_str().unwrap_or(""),
                line["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        files,
        [("k/broken.py", "failed"), ("k/empty.py", "skipped")]
    );
    let broken = &lines[0]["diagnostics"][0];
    assert_eq!(
        (&broken["code"], &broken["line"]),
        (&json!("parse-error"), &json!(3))
    );
    let last = lines.last().expect("a summary");
    assert_eq!(
        (&last["instances"], &last["built"], &last["failed"]),
        (&json!(2), &json!(1), &json!(1)),
        "{last}"
    );
    assert_eq!(
        (&last["files_skipped"], &last["files_failed"]),
        (&json!(1), &json!(1))
    );
    let out = dir.path().join("out");
    let written: Vec<PathBuf> = walk_files(&out)
        .into_iter()
        .map(|path| path.strip_prefix(&out).expect("under out").to_owned())
        .collect();
    assert_eq!(
        written,
        [
            PathBuf::from("good/double-0.cu"),
            PathBuf::from("good/double-0.json"),
            PathBuf::from("nolower/mm-0.json"),
        ]
    );
    let failed: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("nolower/mm-0.json")).expect("reads"),
    )
    .expect("JSON");
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["diagnostics"][0]["code"], "cannot-lower");
}

/// A file that cannot be read (not UTF-8) is named, the other files are built or checked, and
/// the exit code is 2.
#[test]
fn an_unreadable_file_is_reported_and_the_others_still_built() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_tree(dir.path(), &[("k/good.py", &kernel(128))]);
    std::fs::write(dir.path().join("k/binary.py"), b"\xff\xfe\x00").expect("writes");
    let output = tilec(dir.path(), &build_args(&["k"], &[]));
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("error: cannot read k/binary.py: stream did not contain valid UTF-8"),
        "{stderr}"
    );
    assert!(dir.path().join("out/good/double-0.cu").is_file());
    let output = tilec(dir.path(), &["check", "k"]);
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("checked 1 file(s), 1 kernel instance(s)"),
        "{stdout}"
    );
}

/// Two roots holding `x.py` would write into the same `out/x/`: the build refuses before writing
/// anything, naming both files.
#[test]
fn two_roots_with_the_same_file_name_are_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_tree(
        dir.path(),
        &[("a/x.py", &kernel(128)), ("b/x.py", &kernel(64))],
    );
    let output = tilec(dir.path(), &build_args(&["a", "b"], &[]));
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("error: a/x.py and b/x.py would both write their outputs into out/x;"),
        "{stderr}"
    );
    assert!(!dir.path().join("out").exists(), "nothing is written");
    // Built from their common folder, each keeps its own path.
    let output = tilec(dir.path(), &build_args(&["."], &[]));
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(dir.path().join("out/a/x/double-0.cu").is_file());
    assert!(dir.path().join("out/b/x/double-0.cu").is_file());
}

/// A folder linked to its parent twice, two folders linked to each other, a FIFO and a socket named
/// `*.py`: `check` and `build` each finish, and see the one real kernel file once.
#[cfg(unix)]
#[test]
fn link_loops_are_walked_once_and_special_files_are_skipped() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("temp dir");
    write_tree(dir.path(), &[("k/a/good.py", &kernel(128))]);
    let k = dir.path().join("k");
    symlink("..", k.join("a/up")).expect("links");
    symlink("..", k.join("a/up2")).expect("links");
    std::fs::create_dir_all(k.join("b")).expect("creates");
    std::fs::create_dir_all(k.join("c")).expect("creates");
    symlink("../c", k.join("b/to_c")).expect("links");
    symlink("../b", k.join("c/to_b")).expect("links");
    let fifo = k.join("pipe.py");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    let _socket = std::os::unix::net::UnixListener::bind(k.join("socket.py")).expect("binds");

    let output = tilec(dir.path(), &["check", "k", "--format", "json"]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let instances: Vec<Value> = json_lines(&output)
        .into_iter()
        .filter(|line| line["kind"] == "instance")
        .collect();
    assert_eq!(instances.len(), 1, "{instances:#?}");
    assert_eq!(instances[0]["file"], "k/a/good.py");

    let output = tilec(dir.path(), &build_args(&["k"], &["--format", "json"]));
    let summary = summary(&output);
    assert_eq!(counts(&summary), [1, 1, 0, 0]);
    assert!(dir.path().join("out/a/good/double-0.cu").is_file());
}

/// An output file is replaced, not written through: a link planted at an output's name leaves its
/// target alone.
#[cfg(unix)]
#[test]
fn an_output_replaces_a_link_at_its_name() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_tree(
        dir.path(),
        &[("k/good.py", &kernel(128)), ("victim.txt", "keep")],
    );
    std::fs::create_dir_all(dir.path().join("out/good")).expect("creates");
    let cu = dir.path().join("out/good/double-0.cu");
    std::os::unix::fs::symlink(dir.path().join("victim.txt"), &cu).expect("links");
    let output = tilec(dir.path(), &build_args(&["k"], &["--format", "json"]));
    assert_eq!(counts(&summary(&output)), [1, 1, 0, 0]);
    let victim = std::fs::read_to_string(dir.path().join("victim.txt")).expect("reads");
    assert_eq!(victim, "keep");
    let metadata = std::fs::symlink_metadata(&cu).expect("the output exists");
    assert!(metadata.is_file(), "{metadata:?}");
    let text = std::fs::read_to_string(&cu).expect("reads");
    assert!(text.contains("__global__"), "{text}");
}

/// Replaces the payload of the cache entry `path` with `edit` of it, keeping the header's key and
/// format and making the checksum match: a well-formed entry that answers something else.
fn plant(path: &Path, edit: impl Fn(&mut Value)) {
    let text = std::fs::read_to_string(path).expect("reads the entry");
    let (header, payload) = text.split_once('\n').expect("a header line");
    let fields: Vec<&str> = header.split(' ').collect();
    let mut payload: Value = serde_json::from_str(payload).expect("a JSON payload");
    edit(&mut payload);
    let payload = payload.to_string();
    let checksum: String = sha2::Sha256::digest(payload.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let planted = format!(
        "{} {} {} {checksum}\n{payload}",
        fields[0], fields[1], fields[2]
    );
    std::fs::write(path, planted).expect("plants the entry");
}

/// Two entries planted under the keys of a `--emit cuda` build, with valid checksums: one with
/// another kernel's source and PTX, one with the right source plus PTX. Neither is used: each is
/// reported, rebuilt and replaced, and no `.ptx` is written.
#[test]
fn a_planted_cache_entry_is_reported_ignored_and_rebuilt() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_tree(
        dir.path(),
        &[("k/one.py", &kernel(128)), ("k/two.py", &kernel(64))],
    );
    let args = build_args(&["k"], &["--format", "json"]);
    assert_eq!(counts(&summary(&tilec(dir.path(), &args))), [2, 2, 0, 0]);
    let entries = entries_holding(&dir.path().join("cache"), "cuda");
    assert_eq!(entries.len(), 2, "{entries:?}");
    plant(&entries[0], |payload| {
        payload["cuda"] = json!("extern \"C\" __global__ void planted() {}");
        payload["ptx"] = json!(".visible .entry planted()");
    });
    plant(&entries[1], |payload| {
        payload["ptx"] = json!(".visible .entry planted()");
    });
    let output = tilec(dir.path(), &args);
    assert_eq!(counts(&summary(&output)), [2, 2, 0, 0], "both rebuilt");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("does not match what was asked for"))
        .collect();
    assert_eq!(warnings.len(), 2, "{stderr}");
    assert!(
        stderr.contains("its CUDA source is not the one asked for"),
        "{stderr}"
    );
    assert!(
        stderr.contains("it holds PTX, but no compiler was asked for"),
        "{stderr}"
    );
    let outputs = walk_files(&dir.path().join("out"));
    assert!(
        !outputs
            .iter()
            .any(|path| path.extension().is_some_and(|e| e == "ptx")),
        "{outputs:?}"
    );
    assert_eq!(
        counts(&summary(&tilec(dir.path(), &args))),
        [2, 0, 2, 0],
        "repaired"
    );
    // An instance entry planted for other inputs is refused the same way, and costs a lowering.
    let lowerings = entries_holding(&dir.path().join("cache"), "launches");
    assert_eq!(lowerings.len(), 2, "{lowerings:?}");
    plant(&lowerings[0], |payload| {
        payload["request"]["inputs_sha256"] = json!("0".repeat(64));
    });
    let output = tilec(dir.path(), &args);
    let relowered = summary(&output);
    assert_eq!(counts(&relowered), [2, 0, 2, 0], "{relowered}");
    assert_eq!(relowered["cache"]["lowered"], 1, "{relowered}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("recorded inputs_sha256"), "{stderr}");
}

/// The cache folder's permissions decide who may read its entries, not the writer's umask: in a
/// cache folder of mode 0o750 every shard folder is 0o750 and every entry 0o640.
#[cfg(unix)]
#[test]
fn cache_entries_are_readable_by_whoever_may_read_the_cache_folder() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    write_tree(dir.path(), &[("k/one.py", &kernel(128))]);
    let cache = dir.path().join("cache");
    std::fs::create_dir(&cache).expect("creates");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let output = tilec(dir.path(), &build_args(&["k"], &["--format", "json"]));
    assert_eq!(counts(&summary(&output)), [1, 1, 0, 0]);
    let mode = |path: &Path| {
        std::fs::metadata(path)
            .expect("exists")
            .permissions()
            .mode()
            & 0o777
    };
    let entries = walk_files(&cache);
    assert_eq!(
        entries.len(),
        2,
        "a launch entry and an instance entry: {entries:?}"
    );
    for entry in &entries {
        assert_eq!(mode(entry), 0o640, "{}", entry.display());
        let shard = entry.parent().expect("a shard folder");
        assert_eq!(mode(shard), 0o750, "{}", shard.display());
    }
}

/// A tilec.toml above the workspace root does not apply: run from `project/` outside any
/// repository, the malformed tilec.toml one folder up is not read, while one inside a repository
/// root above the current folder is.
#[test]
fn a_tilec_toml_above_the_workspace_root_is_not_read() {
    let dir = tempfile::tempdir().expect("temp dir");
    write_tree(
        dir.path(),
        &[
            ("tilec.toml", "this is not [toml"),
            ("project/good.py", &kernel(128)),
            ("repo/tilec.toml", "this is not [toml"),
            ("repo/kernels/good.py", &kernel(128)),
        ],
    );
    std::fs::create_dir(dir.path().join("repo/.git")).expect("creates .git");
    let output = tilec(&dir.path().join("project"), &["check", "."]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let output = tilec(&dir.path().join("repo/kernels"), &["check", "."]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("config-error"), "{stdout}");
}
