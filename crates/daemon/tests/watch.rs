//! `tilec watch` driven by real file writes in a temporary folder: a new file, an edit, a syntax
//! error and its fix, a rename and a delete each produce the events a user would expect, and the
//! session survives all of them.

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
        let mut child = Command::new(env!("CARGO_BIN_EXE_tilec"))
            .args(["watch", "--no-run", "--format", "json"])
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
