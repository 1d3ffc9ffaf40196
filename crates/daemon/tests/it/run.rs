//! `tilec run` end to end: one instance of a file whose other instances have errors runs (on the
//! CPU emulator when there is no GPU) while the bad one fails with its own diagnostic, and the
//! kernels of `tests/fixtures/kernels/` run on the emulator against values computed here (some
//! with the form of their CUDA checked too). Stands alone: everything it reads is in the repository.

use std::process::{Command, Output};

use crate::common::fixture;
use crate::tensor_core::{CodePath, assert_in_order, built_cuda};

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

/// Runs `tests/fixtures/kernels/<name>` on the emulator with `args` (after `run --device cpu`)
/// and `--save`; returns the folder it saved the inputs (`in/`) and outputs (`out/`) to.
fn emulate_saved(name: &str, args: &[std::ffi::OsString]) -> tempfile::TempDir {
    let file = fixture(&format!("kernels/{name}"));
    let saved = tempfile::tempdir().expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .args(["run", "--device", "cpu"])
        .args(args)
        .arg("--save")
        .arg(saved.path())
        .arg(&file)
        .output()
        .expect("tilec runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    saved
}

/// A tensor `emulate_saved` wrote (`in/X.npy`, `out/Y.npy`).
fn saved_tensor(saved: &tempfile::TempDir, name: &str) -> tilec_runtime::HostTensor {
    tilec_runtime::npy::read_npy(&saved.path().join(name)).expect("a saved tensor")
}

/// The value of the float4_e2m1fn nearest to `x`: ties to the even code, saturating at ±6. Written
/// here from the format's table, independently of tilec's own conversion.
fn nearest_e2m1(x: f64) -> f64 {
    const VALUES: [f64; 8] = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0];
    let magnitude = x.abs().min(6.0);
    let mut best = 0;
    for (code, value) in VALUES.iter().enumerate() {
        let (error, best_error) = ((value - magnitude).abs(), (VALUES[best] - magnitude).abs());
        if error < best_error || (error == best_error && code % 2 == 0) {
            best = code;
        }
    }
    VALUES[best].copysign(x)
}

/// `tests/fixtures/kernels/four_bit.py` on the emulator: float32 narrowed to fp4 (through a packed
/// shared tile) and to int4 with a wrapping addition, each output checked against values computed
/// here from the saved input.
#[test]
fn four_bit_dtypes_narrow_wrap_and_widen() {
    let saved = emulate_saved("four_bit.py", &[]);
    let read = |name: &str| saved_tensor(&saved, name);
    let (x, q, i, back) = (
        read("in/X.npy"),
        read("out/Q.npy"),
        read("out/I.npy"),
        read("out/Back.npy"),
    );
    assert_eq!(x.values.len(), 64 * 96);
    let mut wrapped = 0;
    for (k, &x) in x.values.iter().enumerate() {
        // The kernel computes in float32: `x * 6.5` rounds once to float32 before narrowing.
        #[allow(clippy::cast_possible_truncation)]
        let scaled = f64::from(x as f32 * 6.5);
        let expected_q = nearest_e2m1(scaled);
        // int4 of x * 8 truncates toward zero; adding 7 wraps past 7 into [-8, -1].
        let truncated = (x * 8.0).trunc();
        let expected_i = (truncated + 7.0 + 8.0).rem_euclid(16.0) - 8.0;
        wrapped += usize::from(truncated + 7.0 > 7.0);
        assert_eq!(q.values[k], expected_q, "Q[{k}] of x = {x}");
        assert_eq!(i.values[k], expected_i, "I[{k}] of x = {x}");
        assert_eq!(back.values[k], expected_q + expected_i, "Back[{k}]");
    }
    assert!(
        wrapped > 1000,
        "the inputs exercise the wrap ({wrapped} elements)"
    );
    assert!(q.values.contains(&6.0) && q.values.contains(&-6.0));
}

/// `tests/fixtures/kernels/atomic_extremes.py` on the emulator: every block's `T.atomic_max` of a
/// float column and `T.atomic_min` of an integer one land on the caller's values, and the
/// `return_prev=True` form updates its element; checked against values computed here.
#[test]
fn atomic_max_and_min_combine_with_the_caller_values() {
    let saved = emulate_saved("atomic_extremes.py", &[]);
    let read = |name: &str| saved_tensor(&saved, name);
    let x = read("in/X.npy");
    let (hi_in, lo_in, old_in) = (read("in/Hi.npy"), read("in/Lo.npy"), read("in/Old.npy"));
    let (hi, lo, old) = (read("out/Hi.npy"), read("out/Lo.npy"), read("out/Old.npy"));
    let (rows, columns) = (64, 128);
    for j in 0..columns {
        let column = (0..rows).map(|i| x.values[i * columns + j]);
        let largest = column.clone().fold(hi_in.values[j], f64::max);
        // The kernel scales in float32 and truncates toward zero.
        #[allow(clippy::cast_possible_truncation)]
        let smallest = column
            .map(|v| f64::from(v as f32 * 100.0).trunc())
            .fold(lo_in.values[j], f64::min);
        assert_eq!(hi.values[j], largest, "Hi[{j}]");
        assert_eq!(lo.values[j], smallest, "Lo[{j}]");
    }
    // Blocks 0..4 raise their element of Old to at least 1; the others keep theirs.
    for (b, (&after, &before)) in old.values.iter().zip(&old_in.values).enumerate() {
        let expected = if b < 4 { before.max(1.0) } else { before };
        assert_eq!(after, expected, "Old[{b}]");
    }
}

/// `tests/fixtures/kernels/scans.py` on the emulator: `T.cumsum`, `T.cummax` and a reversed
/// `T.cummax` along the rows of a shared tile, against scans computed here in float32.
#[test]
fn cumsum_and_cummax_scan_each_row() {
    let saved = emulate_saved("scans.py", &[]);
    let read = |name: &str| saved_tensor(&saved, name);
    let x = read("in/X.npy");
    let (sum, max, suffix) = (
        read("out/Sum.npy"),
        read("out/Max.npy"),
        read("out/SuffixMax.npy"),
    );
    let columns = 32;
    for (r, row) in x.values.chunks(columns).enumerate() {
        let (mut running_sum, mut running_max) = (0.0f32, f64::NEG_INFINITY);
        for (c, &v) in row.iter().enumerate() {
            // The kernel adds in float32; every input is a float32 value.
            #[allow(clippy::cast_possible_truncation)]
            let v32 = v as f32;
            running_sum += v32;
            running_max = running_max.max(v);
            let k = r * columns + c;
            assert_eq!(sum.values[k], f64::from(running_sum), "Sum[{r}, {c}]");
            assert_eq!(max.values[k], running_max, "Max[{r}, {c}]");
            let suffix_max = row[c..].iter().copied().fold(f64::NEG_INFINITY, f64::max);
            assert_eq!(suffix.values[k], suffix_max, "SuffixMax[{r}, {c}]");
        }
    }
}

/// `tests/fixtures/kernels/shifted_read.py` on the emulator: a load that leaves its tensor reads
/// zero and the store around it still runs (TileLang's safe-memory rule), for a tile shifted past
/// the end (fp16 copied as is) and one shifted before the start (widened, doubled, plus one). An
/// atomic minimum whose operand reads past the end is skipped there instead.
#[test]
fn loads_past_a_tensor_read_zero_and_the_store_still_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let low_path = dir.path().join("low.npy");
    let start = tilec_runtime::HostTensor {
        dtype: tilec_ir::DType::Float32,
        shape: vec![1],
        values: vec![100.0],
    };
    tilec_runtime::npy::write_npy(&low_path, &start).expect("writes the start value");
    let mut input = std::ffi::OsString::from("Low=");
    input.push(&low_path);
    let saved = emulate_saved("shifted_read.py", &["--input".into(), input]);
    let read = |name: &str| saved_tensor(&saved, name);
    let (x, ahead, behind) = (
        read("in/X.npy"),
        read("out/Ahead.npy"),
        read("out/Behind.npy"),
    );
    let (n, shift) = (256usize, 5usize);
    // |x| + 1 over the elements the loop reads inside X; a zero read past the end would give 1.
    let low = x.values[shift..]
        .iter()
        .map(|v| v.abs() + 1.0)
        .fold(100.0, f64::min);
    assert!(low > 1.0);
    assert_eq!(read("out/Low.npy").values, vec![low]);
    for k in 0..n {
        let forward = if k + shift < n {
            x.values[k + shift]
        } else {
            0.0
        };
        assert_eq!(ahead.values[k], forward, "Ahead[{k}]");
        let back = if k >= shift { x.values[k - shift] } else { 0.0 };
        // fp16 inputs doubled and incremented are exact in float32.
        assert_eq!(behind.values[k], back * 2.0 + 1.0, "Behind[{k}]");
    }
}

/// `tests/fixtures/kernels/single_stage.py` on the emulator, on both targets (TMA boxes on sm_90,
/// `cp.async` on sm_80): a one-stage pipeline whose copies of the next iteration are issued while
/// the current one still runs (each waited for before its first reader), with the last block's
/// rows past the end read as zeros. The result is the recurrence computed here in float32 from
/// the saved inputs; the emulator would report a read of a copy not yet complete, or a copy over
/// a buffer still being read.
#[test]
fn a_single_stage_pipeline_issues_each_copy_once_its_buffer_is_free() {
    for target in ["sm_90", "sm_80"] {
        let saved = emulate_saved("single_stage.py", &["--target".into(), target.into()]);
        let read = |name: &str| saved_tensor(&saved, name);
        let (a, b, out) = (read("in/A.npy"), read("in/B.npy"), read("out/Out.npy"));
        let (k_steps, rows) = (6, 75 * 4);
        assert_eq!(out.values.len(), rows);
        for element in 0..rows {
            let mut acc = 0.0f32;
            for k in 0..k_steps {
                // The inputs are float32, so these conversions are exact.
                #[allow(clippy::cast_possible_truncation)]
                let (x, y) = (
                    a.values[k * rows + element] as f32,
                    b.values[k * rows + element] as f32,
                );
                acc = (acc + x) * 0.5 + y;
            }
            assert_eq!(
                out.values[element],
                f64::from(acc),
                "{target}: Out element {element}"
            );
        }
    }
    // The schedule on sm_80: iteration 0's copies committed one group each, then in the loop
    // `a`'s wait leaves `b`'s group pending and `b`'s wait the next `a`, each copy of the next
    // iteration issued after a barrier that follows its buffer's last reader.
    let barrier = "__syncthreads();";
    assert_in_order(
        &fixture_cuda("single_stage", "sm_80"),
        &[
            "tl_cp_async<16>(a + ",
            "tl_cp_async_commit();",
            "tl_cp_async<16>(b + ",
            "tl_cp_async_commit();",
            "for (int k = 0; k < 6; ++k) {",
            "tl_cp_async_wait<1>();",
            barrier,
            "+ a_vec",
            barrier,
            "if ((k + 1) < 6) {",
            "tl_cp_async<16>(a + ",
            "tl_cp_async_commit();",
            "tl_cp_async_wait<1>();",
            barrier,
            "b_vec",
            barrier,
            "if ((k + 1) < 6) {",
            "tl_cp_async<16>(b + ",
            "tl_cp_async_commit();",
        ],
    );
    // On sm_90 each copy completes on its own mbarrier, whose phase of the iteration the readers
    // wait for.
    assert_in_order(
        &fixture_cuda("single_stage", "sm_90"),
        &[
            "tl_mbarrier_init(full_barrier + 0, 1);",
            "tl_mbarrier_init(full_barrier + 1, 1);",
            barrier,
            "tl_tma_load_3d(a + 0, &A_tma, full_barrier + 0, 0, bx * 32, 0);",
            "tl_tma_load_3d(b + 0, &B_tma, full_barrier + 1, 0, bx * 32, 0);",
            "for (int k = 0; k < 6; ++k) {",
            "tl_mbarrier_wait(full_barrier + 0, k % 2);",
            "+ a_vec",
            barrier,
            "if ((k + 1) < 6) {",
            "tl_tma_load_3d(a + 0, &A_tma, full_barrier + 0, 0, bx * 32, k + 1);",
            "tl_mbarrier_wait(full_barrier + 1, k % 2);",
            "b_vec",
            barrier,
            "if ((k + 1) < 6) {",
            "tl_tma_load_3d(b + 0, &B_tma, full_barrier + 1, 0, bx * 32, k + 1);",
        ],
    );
}

/// `tests/fixtures/kernels/symbolic_rows.py` on the emulator at m = 10 (two full tiles of four
/// rows and one of two): each guarded copy is versioned on the block's last row being inside `m`,
/// the full tiles taking the copy without row guards and the last tile the guarded one, and
/// every row is `2x + 1` of the input, computed here.
#[test]
fn full_tiles_of_a_symbolic_size_run_without_their_guards() {
    let saved = emulate_saved("symbolic_rows.py", &["--with".into(), "m=10".into()]);
    let (x, y) = (
        saved_tensor(&saved, "in/X.npy"),
        saved_tensor(&saved, "out/Y.npy"),
    );
    assert_eq!(y.shape, vec![10, 64]);
    for (element, (&input, &output)) in x.values.iter().zip(&y.values).enumerate() {
        // fp16 inputs doubled and incremented are exact in float32.
        assert_eq!(output, input * 2.0 + 1.0, "Y element {element}");
    }
    let guarded_row = "(((int)((long long)bx * 4 + tx / 16 + chunk * 2)) < m)";
    assert_in_order(
        &fixture_cuda("symbolic_rows", "sm_90"),
        &[
            "// T.copy",
            "(((int)((long long)bx * 4 + 3)) < m)) {",
            "for (int chunk = 0; chunk < 2; ++chunk) {",
            "} else {",
            "for (int chunk = 0; chunk < 2; ++chunk) {",
            guarded_row,
            "// T.Parallel(4, 64)",
            "// T.copy",
            "(((int)((long long)bx * 4 + 3)) < m)) {",
        ],
    );
}

/// The kernel of the CUDA `tilec build --emit cuda --target TARGET` prints for a fixture whose
/// kernel is named as its file, without the prelude (whose helpers would match pieces too early).
fn fixture_cuda(kernel: &str, target: &'static str) -> String {
    let file = fixture(&format!("kernels/{kernel}.py"));
    let path = CodePath {
        target,
        pass_config: None,
    };
    let cuda = built_cuda(&file, (kernel, 0), path);
    cuda.split_once("__global__")
        .map_or(String::new(), |(_, kernel)| kernel.to_owned())
}

/// `tests/fixtures/kernels/any_all.py` on the emulator, on masks written here: a row of zeros (no
/// element set), rows with some zeros, and rows without any.
#[test]
fn any_of_and_all_of_test_every_element() {
    use tilec_runtime::HostTensor;
    use tilec_runtime::npy::write_npy;

    let dir = tempfile::tempdir().expect("temp dir");
    let rows: [[f64; 4]; 6] = [
        [0.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 5.0],
        [3.0, 0.0, 1.0, 1.0],
        [1.0, 2.0, 3.0, 4.0],
        [-1.0, 1.0, -1.0, 1.0],
        [7.0, 7.0, 7.0, 0.0],
    ];
    let mask = HostTensor {
        dtype: tilec_ir::DType::Int32,
        shape: vec![6, 4],
        values: rows.iter().flatten().copied().collect(),
    };
    let mask_path = dir.path().join("mask.npy");
    write_npy(&mask_path, &mask).expect("writes the mask");
    let input = format!("Mask={}", mask_path.display());
    let saved = emulate_saved("any_all.py", &["--input".into(), input.into()]);
    let flags = saved_tensor(&saved, "out/Flags.npy");
    for (b, row) in rows.iter().enumerate() {
        let any = row.iter().any(|&v| v != 0.0);
        let all = row.iter().all(|&v| v != 0.0);
        assert_eq!(
            flags.values[2 * b..2 * b + 2],
            [f64::from(u8::from(any)), f64::from(u8::from(all))],
            "row {b}: {row:?}"
        );
    }
}

/// `tests/fixtures/kernels/byte_view.py`: a float32 view of a consumed float16 shared tile holds
/// sums of its pairs. The emulator's results match sums computed here, and the CUDA places the view
/// at its base's offset, the launch taking the base's (padded) bytes once.
#[test]
fn a_view_of_another_dtype_reuses_its_base_bytes() {
    let saved = emulate_saved("byte_view.py", &[]);
    let (x, y) = (
        saved_tensor(&saved, "in/X.npy"),
        saved_tensor(&saved, "out/Y.npy"),
    );
    // Pairs of float16 values add exactly in float32.
    let expected: Vec<f64> = x.values.chunks(2).map(|pair| pair[0] + pair[1]).collect();
    assert_eq!(y.values, expected);

    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/kernels/byte_view.py");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("cuda");
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .args(["build", "--emit", "cuda", "--out"])
        .arg(&out)
        .arg("--cache")
        .arg(dir.path().join("cache"))
        .arg(&file)
        .output()
        .expect("tilec builds");
    assert!(output.status.success());
    let cuda = std::fs::read_to_string(out.join("byte_view/pair_sums-0.cu")).expect("the CUDA");
    assert!(
        cuda.contains("tl_half* x_shared = (tl_half*)(tl_smem + 0);")
            && cuda.contains("float* y_shared = (float*)(tl_smem + 0);")
            && cuda.contains("2288 bytes of dynamic shared memory"),
        "{cuda}"
    );
}

/// A kernel whose blocks store to positions read from an index tensor: two blocks sent to one
/// position with different values race on the GPU (blocks run in no fixed order), which the
/// emulator warns about (the elements are undefined, and `--check` does not compare them);
/// distinct positions run without a warning.
const SCATTER_ROWS: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit
def scatter_rows(B=4, N=32):
    @T.prim_func
    def main(X: T.Tensor((B, N), "float32"), Pos: T.Tensor((B,), "int32"), Y: T.Tensor((B, N), "float32")):
        with T.Kernel(B, threads=32) as bx:
            for j in T.Parallel(N):
                Y[Pos[bx], j] = X[bx, j] + 1.0

    return main


scatter_rows()
"#;

#[test]
fn blocks_storing_different_values_to_one_element_are_reported_as_undefined() {
    use tilec_runtime::HostTensor;
    use tilec_runtime::npy::write_npy;

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("scatter.py");
    std::fs::write(&path, SCATTER_ROWS).expect("writes the kernel");
    let run = |positions: [f64; 4]| {
        let pos = HostTensor {
            dtype: tilec_ir::DType::Int32,
            shape: vec![4],
            values: positions.to_vec(),
        };
        let pos_path = dir.path().join("pos.npy");
        write_npy(&pos_path, &pos).expect("writes the positions");
        Command::new(env!("CARGO_BIN_EXE_tilec"))
            .args(["run", "--device", "cpu", "--input"])
            .arg(format!("Pos={}", pos_path.display()))
            .arg(&path)
            .output()
            .expect("tilec runs")
    };
    let output = run([3.0, 1.0, 0.0, 2.0]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(!stderr.contains("warning"), "{stderr}");
    // Blocks 1 and 2 both store row 1 (32 elements); X's values differ, so every element does.
    let output = run([3.0, 1.0, 1.0, 2.0]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "warning: emulator: 32 element(s) of `Y` were stored with different values by two \
             blocks (first `Y[32]`: "
        ),
        "{stderr}"
    );
}
