//! `tilec watch` driven by real file writes in a temporary folder: a new file, an edit, a syntax
//! error and its fix, a rename and a delete each produce the events a user would expect, and the
//! session survives all of them, as it survives a FIFO, a file without kernels, one that cannot be
//! lowered, its root deleted and created again, and a launch too long for the emulator.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

const KERNEL: &str = r#"import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def double(N, block=128, threads=128):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=threads) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0

    return main


def main():
    double(1024)
"#;

/// A running `tilec watch --no-run --format json` and its events.
struct Watch {
    child: Child,
    events: mpsc::Receiver<Value>,
}

impl Watch {
    fn start(dir: &Path) -> Watch {
        Watch::start_with(dir, &["--no-run"])
    }

    /// `tilec watch --format json OPTIONS DIR`.
    fn start_with(dir: &Path, options: &[&str]) -> Watch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tilec"))
            .args(["watch", "--format", "json"])
            .args(options)
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("tilec watch starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let (sender, events) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line)
                    && sender.send(value).is_err()
                {
                    break;
                }
            }
        });
        Watch { child, events }
    }

    /// The events up to the first that `wanted` accepts; fails after 20 s.
    fn until(&self, what: &str, wanted: impl Fn(&Value) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut seen = Vec::new();
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.events.recv_timeout(left) {
                Ok(event) => {
                    let done = wanted(&event);
                    seen.push(event);
                    if done {
                        return seen;
                    }
                }
                Err(_) => break,
            }
        }
        panic!("no event for {what}; saw {seen:#?}");
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is(kind: &str, file: &str) -> impl Fn(&Value) -> bool {
    move |event: &Value| {
        event["kind"] == kind && event["file"].as_str().is_some_and(|f| f.ends_with(file))
    }
}

#[test]
fn a_session_follows_creates_edits_errors_renames_and_deletes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let watch = Watch::start(dir.path());
    watch.until("the first idle", |e| e["kind"] == "idle" && e["files"] == 0);
    // Give the watcher a moment to be registered before the first write.
    std::thread::sleep(Duration::from_millis(200));

    let path = dir.path().join("double.py");
    std::fs::write(&path, KERNEL).expect("creates");
    let seen = watch.until("the new kernel", is("status", "double.py"));
    let status = seen.last().expect("a status");
    assert_eq!(
        (status["kernel"].as_str(), status["result"].as_str()),
        (Some("double"), Some("lowered"))
    );
    watch.until("idle after the create", |e| e["kind"] == "idle");

    std::fs::write(&path, KERNEL.replace("threads=128", "threads=64")).expect("edits");
    watch.until("the edited kernel", is("status", "double.py"));

    std::fs::write(&path, format!("{KERNEL}\nbroken = (\n")).expect("breaks");
    let seen = watch.until("the syntax error", is("checked", "double.py"));
    assert!(
        seen.iter()
            .any(|e| e["kind"] == "diagnostic" && e["code"] == "parse-error"),
        "{seen:#?}"
    );
    assert_eq!(seen.last().expect("checked")["errors"], 1);

    std::fs::write(&path, KERNEL).expect("fixes");
    let seen = watch.until("the fix", |e| {
        is("checked", "double.py")(e) && e["errors"] == 0
    });
    assert!(!seen.iter().any(|e| e["kind"] == "diagnostic"), "{seen:#?}");

    let renamed = dir.path().join("renamed.py");
    std::fs::rename(&path, &renamed).expect("renames");
    // The old name goes and the new one comes, in one batch or two.
    let mut seen = watch.until("the renamed file", is("status", "renamed.py"));
    if !seen.iter().any(is("removed", "double.py")) {
        seen.extend(watch.until("the old name", is("removed", "double.py")));
    }
    assert!(seen.iter().any(is("removed", "double.py")), "{seen:#?}");

    std::fs::remove_file(&renamed).expect("deletes");
    watch.until("the delete", is("removed", "renamed.py"));
}

/// A kernel that tilec checks but cannot lower (a float64 `T.gemm`: no tensor-core form takes
/// fp64 operands).
const UNLOWERABLE: &str = include_str!("fixtures/unlowerable.py");

/// A FIFO named `*.py` (which blocks whoever opens it), a file that only imports TileLang and a
/// kernel that cannot be lowered arrive in the watched folder: the session reports what applies
/// and goes on to report the next edit.
#[cfg(unix)]
#[test]
fn a_fifo_an_empty_file_and_an_unlowerable_kernel_do_not_stop_the_session() {
    let dir = tempfile::tempdir().expect("temp dir");
    let watch = Watch::start(dir.path());
    watch.until("the first idle", |e| e["kind"] == "idle");
    std::thread::sleep(Duration::from_millis(200));

    let made = Command::new("mkfifo")
        .arg(dir.path().join("pipe.py"))
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    std::fs::write(dir.path().join("empty.py"), "import tilelang\n").expect("writes");
    std::fs::write(dir.path().join("mm.py"), UNLOWERABLE).expect("writes");
    let seen = watch.until("the unlowerable kernel", is("checked", "mm.py"));
    assert_eq!(seen.last().expect("checked")["errors"], 0, "{seen:#?}");

    let path = dir.path().join("double.py");
    std::fs::write(&path, KERNEL).expect("creates");
    let seen = watch.until("the kernel after them", is("status", "double.py"));
    assert_eq!(seen.last().expect("a status")["result"], "lowered");
    assert!(
        !seen
            .iter()
            .any(|e| e["file"].as_str().is_some_and(|f| f.ends_with("pipe.py"))),
        "{seen:#?}"
    );
}

/// The watched folder is deleted (its files are reported removed) and created again: files
/// written into the new folder are watched as before.
#[test]
fn a_root_deleted_and_created_again_is_watched_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("kernels");
    std::fs::create_dir(&root).expect("creates the root");
    std::fs::write(root.join("double.py"), KERNEL).expect("writes");
    let watch = Watch::start(&root);
    watch.until("the first status", is("status", "double.py"));
    watch.until("the first idle", |e| e["kind"] == "idle");

    std::fs::remove_dir_all(&root).expect("deletes the root");
    watch.until("the deleted file", is("removed", "double.py"));
    std::fs::create_dir(&root).expect("creates the root again");
    std::thread::sleep(Duration::from_millis(600));
    std::fs::write(root.join("again.py"), KERNEL).expect("writes");
    watch.until("a file in the new root", is("status", "again.py"));
    std::fs::write(
        root.join("again.py"),
        KERNEL.replace("threads=128", "threads=64"),
    )
    .expect("edits");
    let seen = watch.until("an edit in the new root", is("status", "again.py"));
    assert_eq!(seen.last().expect("a status")["result"], "lowered");
}

/// A launch that would run for minutes on the CPU emulator is stopped at `--emulator-budget` and
/// reported as not run (on a GPU, the GPU runs it and the emulator's check is skipped).
#[test]
fn an_emulated_launch_past_its_budget_is_stopped_and_reported() {
    let dir = tempfile::tempdir().expect("temp dir");
    let slow = KERNEL
        .replace("def double(N, block=128, threads=128):", "def double(N, block=128, threads=128, reps=100000000):")
        .replace(
            "            for i in T.Parallel(block):\n                B[bx * block + i] = A[bx * block + i] * 2.0",
            "            acc = T.alloc_fragment((block,), \"float32\")\n            T.clear(acc)\n            for r in T.serial(reps):\n                for i in T.Parallel(block):\n                    acc[i] = acc[i] + A[bx * block + i]\n            for i in T.Parallel(block):\n                B[bx * block + i] = acc[i]",
        );
    assert!(slow.contains("T.serial(reps)"), "{slow}");
    std::fs::write(dir.path().join("slow.py"), slow).expect("writes");
    let started = Instant::now();
    let watch = Watch::start_with(dir.path(), &["--emulator-budget", "0.5"]);
    let seen = watch.until("the status", is("status", "slow.py"));
    let status = seen.last().expect("a status");
    let why = if status["device"] == "gpu" {
        assert_eq!(status["check"], "skipped", "{status:#}");
        &status["check_detail"]
    } else {
        assert_eq!(status["result"], "skipped", "{status:#}");
        &status["reason"]
    };
    assert!(
        why.as_str()
            .is_some_and(|why| why.contains("did not finish within its budget of 0.5 s")),
        "{status:#}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
    watch.until("idle after the stopped launch", |e| e["kind"] == "idle");
}

/// `KERNEL` and a second kernel beside it, so that an edit can reach one and not the other.
fn two_kernels() -> String {
    let triple = KERNEL
        .split("\n\ndef main():")
        .next()
        .unwrap_or(KERNEL)
        .replace("def double(", "def triple(")
        .replace("* 2.0", "* 3.0")
        .replace("import tilelang\nimport tilelang.language as T\n", "");
    KERNEL.replace(
        "\n\ndef main():\n    double(1024)\n",
        &format!("{triple}\n\ndef main():\n    double(1024)\n    triple(1024)\n"),
    )
}

/// The kernels given a status line for `file` in the report of one save: up to the idle after
/// the file is checked, and whatever follows within a moment (a save may arrive in two batches).
fn reported_kernels(watch: &Watch, file: &str) -> Vec<String> {
    let mut seen = watch.until("the file checked", is("checked", file));
    seen.extend(watch.until("idle after the report", |e| e["kind"] == "idle"));
    while let Ok(event) = watch.events.recv_timeout(Duration::from_millis(500)) {
        seen.push(event);
    }
    let mut kernels: Vec<String> = seen
        .iter()
        .filter(|e| is("status", file)(e))
        .map(|e| e["kernel"].as_str().unwrap_or_default().to_owned())
        .collect();
    kernels.sort();
    kernels
}

/// Each save reports exactly the instances whose CUDA changed: both at the start, then only the
/// kernel an edit reached, and none for comments (inside a kernel or not), which change no code.
#[test]
fn a_save_reports_exactly_the_instances_whose_cuda_changed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("two.py");
    let text = two_kernels();
    assert!(
        text.contains("def triple(") && text.contains("triple(1024)"),
        "{text}"
    );
    std::fs::write(&path, &text).expect("writes");
    let watch = Watch::start(dir.path());
    assert_eq!(reported_kernels(&watch, "two.py"), ["double", "triple"]);

    let text = text.replacen("* 2.0", "* 4.0", 1);
    std::fs::write(&path, &text).expect("edits double");
    assert_eq!(reported_kernels(&watch, "two.py"), ["double"]);

    let commented = format!(
        "# scaling kernels\n{}",
        text.replacen(
            "            for i in T.Parallel(block):",
            "            # one element per thread\n            for i in T.Parallel(block):",
            1,
        )
    );
    assert_ne!(commented, text);
    std::fs::write(&path, &commented).expect("adds comments");
    assert_eq!(reported_kernels(&watch, "two.py"), Vec::<String>::new());

    std::fs::write(&path, commented.replacen("* 3.0", "* 5.0", 1)).expect("edits triple");
    assert_eq!(reported_kernels(&watch, "two.py"), ["triple"]);
}
