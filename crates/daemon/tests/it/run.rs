//! `tilec run` on one instance of a file whose other instances have errors: the good instance
//! runs (on the CPU emulator when there is no GPU), and the bad one fails with its own diagnostic.
//! Stands alone: the kernel is written here.

use std::process::{Command, Output};

const SCALE: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def scale(N, threads):
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(1, threads=threads) as bx:
            for i in T.Parallel(N):
                B[i] = A[i] * 2.0

    return main


good = scale(256, 128)
bad = scale(256, 4096)
"#;

fn run(instance: &str) -> Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("scale.py");
    std::fs::write(&path, SCALE).expect("writes the kernel");
    Command::new(env!("CARGO_BIN_EXE_tilec"))
        .args(["run", "--device", "cpu", "--instance", instance])
        .arg(&path)
        .output()
        .expect("tilec runs")
}

#[test]
fn a_good_instance_runs_beside_a_sibling_with_errors() {
    let output = run("0");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("ran scale(N=256, threads=128)"),
        "{stdout}\n{stderr}"
    );
}

#[test]
fn check_says_which_instance_a_diagnostic_belongs_to() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("scale.py");
    std::fs::write(&path, SCALE).expect("writes the kernel");
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .arg("check")
        .arg(&path)
        .output()
        .expect("tilec runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("= note: in instance 1 (N=256, threads=4096) of `scale`"),
        "{stdout}"
    );
}

#[test]
fn the_bad_instance_fails_with_its_own_diagnostic() {
    let output = run("1");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("error[invalid-call]: a block has between 1 and 1024 threads")
            && stderr.contains("scale.py:10:26"),
        "{stderr}"
    );
}
