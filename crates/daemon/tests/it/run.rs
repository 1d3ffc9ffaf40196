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

/// A gather whose row indices are read from a tensor: the indices come from `--input`, the
/// result is checked against the gather computed here from the saved input.
const GATHER: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def gather_rows(M, N, R):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Rows: T.Tensor((R,), "int32"), Y: T.Tensor((R, N), "float32")):
        with T.Kernel(R, threads=32) as bx:
            for j in T.Parallel(N):
                Y[bx, j] = X[Rows[bx], j]

    return main


gather_rows(64, 32, 4)
"#;

#[test]
fn input_reads_a_tensor_parameter_from_a_npy_file() {
    use tilec_runtime::HostTensor;
    use tilec_runtime::npy::{read_npy, write_npy};

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("gather.py");
    std::fs::write(&path, GATHER).expect("writes the kernel");
    let rows = HostTensor {
        dtype: tilec_ir::DType::Int32,
        shape: vec![4],
        values: vec![63.0, 0.0, 17.0, 17.0],
    };
    let rows_path = dir.path().join("rows.npy");
    write_npy(&rows_path, &rows).expect("writes the indices");
    let saved = dir.path().join("saved");
    let run = |input: &str| {
        Command::new(env!("CARGO_BIN_EXE_tilec"))
            .args(["run", "--device", "cpu", "--input", input, "--save"])
            .arg(&saved)
            .arg(&path)
            .output()
            .expect("tilec runs")
    };
    let output = run(&format!("Rows={}", rows_path.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let x = read_npy(&saved.join("in/X.npy")).expect("saved X");
    let y = read_npy(&saved.join("out/Y.npy")).expect("saved Y");
    // The row indices are the small whole floats written above.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let expected: Vec<f64> = rows
        .values
        .iter()
        .flat_map(|&r| x.values[r as usize * 32..(r as usize + 1) * 32].to_vec())
        .collect();
    assert_eq!(y.values, expected);

    // A name that is no parameter, and a file of another shape, say so.
    let output = run(&format!("Indices={}", rows_path.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains(
            "--input Indices: the kernel has no tensor parameter `Indices` (it has X, Rows, Y)"
        ),
        "{stderr}"
    );
    let output = run(&format!("X={}", rows_path.display()));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("has shape [4], the parameter [64, 32]"),
        "{stderr}"
    );
}

/// A kernel whose input has 2^26 elements: filling it takes about a second, longer than the
/// emulator budget below.
const LARGE_INPUT: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def first(M=8192, N=8192):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=32):
            B[0] = A[0, 0]

    return main


first()
"#;

/// The emulator's time budget covers filling the inputs (found by the fuzzer: a kernel at its
/// real sizes spent many seconds there, past any budget).
#[test]
fn the_emulator_budget_covers_filling_the_inputs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("large.py");
    std::fs::write(&path, LARGE_INPUT).expect("writes the kernel");
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .args(["run", "--device", "cpu", "--emulator-budget", "0.001"])
        .arg(&path)
        .output()
        .expect("tilec runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "emulator: stopped after its time budget of 0.001 s while filling the inputs (not \
             finished, not necessarily wrong); pass smaller sizes with --with"
        ),
        "{stderr}"
    );
}
