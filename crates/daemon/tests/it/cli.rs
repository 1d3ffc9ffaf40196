//! What a new user meets on the command line (issue 33): printing commands that end quietly into a
//! closed pipe and refuse what they cannot serve with exit code 1, `--with` and `--instance` that
//! say what the kernel has, `tilec run` that estimates an emulation before sitting through it, and
//! kernels named like C keywords that build and run.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A file of the repository's `examples/`.
fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn tilec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tilec"))
        .args(args)
        .output()
        .expect("tilec runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `tilec ir FILE | head`: the reader is gone before tilec writes; tilec ends with 0 and says
/// nothing (it panicked with "Broken pipe" and exit 101 before).
#[test]
fn a_closed_pipe_ends_the_printing_commands_quietly() {
    let file = example("tiled_gemm.py");
    for command in [["ir"], ["layout"]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tilec"))
            .args(command)
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tilec starts");
        drop(child.stdout.take());
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr is piped")
            .read_to_string(&mut stderr)
            .expect("reads stderr");
        let status = child.wait().expect("tilec ends");
        assert_eq!(status.code(), Some(0), "{command:?}: {stderr}");
        assert_eq!(stderr, "", "{command:?}");
    }
}

#[test]
fn ir_and_layout_refuse_a_folder_and_a_file_without_tilelang() {
    let folder = example("");
    let folder = folder.to_str().expect("a UTF-8 path");
    for command in ["ir", "layout"] {
        let output = tilec(&[command, folder]);
        assert_eq!(output.status.code(), Some(1), "{command}");
        assert!(
            text(&output.stderr).contains("is a folder; this command takes one `.py` file"),
            "{command}: {}",
            text(&output.stderr)
        );
        assert_eq!(text(&output.stdout), "", "{command}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let plain = dir.path().join("plain.py");
    std::fs::write(&plain, "print('hello')\n").expect("writes the file");
    let plain = plain.to_str().expect("a UTF-8 path");
    for command in ["ir", "layout"] {
        let output = tilec(&[command, plain]);
        assert_eq!(output.status.code(), Some(1), "{command}");
        assert!(
            text(&output.stderr).contains(
                "plain.py does not use TileLang (it imports neither `tilelang` nor \
                 `tilelang.language`)"
            ),
            "{command}: {}",
            text(&output.stderr)
        );
    }
}

#[test]
fn layout_names_the_fragments_when_the_buffer_is_not_one() {
    let file = example("tiled_gemm.py");
    let output = tilec(&[
        "layout",
        file.to_str().expect("a UTF-8 path"),
        "--buffer",
        "nope",
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "error: no fragment nope; fragments: acc\n"
    );
    assert_eq!(text(&output.stdout), "");
}

/// `tilec layout --with` lays out the instance the overrides make: a 64-row block of
/// `row_softmax` has other extents than the call site's.
#[test]
fn layout_takes_with() {
    let file = example("row_softmax.py");
    let file = file.to_str().expect("a UTF-8 path");
    let shape = |extra: &[&str]| {
        let mut args = vec!["layout", file, "--format", "json"];
        args.extend_from_slice(extra);
        let output = tilec(&args);
        assert!(output.status.success(), "{}", text(&output.stderr));
        let first: serde_json::Value = text(&output.stdout)
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .find(|record: &serde_json::Value| record["kind"] == "kernel")
            .expect("a kernel record");
        first["threads"].clone()
    };
    assert_eq!(shape(&[]), serde_json::json!(128));
    assert_eq!(shape(&["--with", "threads=256"]), serde_json::json!(256));
}

#[test]
fn with_refuses_names_the_kernel_lacks_and_values_that_do_not_parse() {
    let file = example("row_softmax.py");
    let file = file.to_str().expect("a UTF-8 path");
    let output = tilec(&["run", "--device", "cpu", file, "--with", "Q=4"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "error: --with Q: `row_softmax` has no argument `Q`; its arguments: M, N, \
         rows_per_block, threads\n"
    );
    let output = tilec(&["run", "--device", "cpu", file, "--with", "M=4x"]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        text(&output.stderr),
        "error: --with M=4x: `M` is an integer here (8192), and `4x` is not one\n"
    );
}

/// A dynamic size (`T.dynamic`, `T.symbolic`) is a name `--with` takes: `tilec run` asks for it
/// by that name, and must accept the answer (it refused it as an unknown argument before).
#[test]
fn with_binds_the_dynamic_sizes_run_asks_for() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("dynamic_scale.py");
    std::fs::write(
        &file,
        r#"import tilelang
import tilelang.language as T


@tilelang.jit
def scale(block=64):
    n = T.dynamic("n")

    @T.prim_func
    def main(x: T.Tensor((n,), "float32"), y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=64) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    y[bx * block + i] = x[bx * block + i] * 2.0

    return main


scale()
"#,
    )
    .expect("write the kernel");
    let file = file.to_str().expect("a UTF-8 path");
    let output = tilec(&["run", "--device", "cpu", file]);
    assert!(!output.status.success());
    assert!(
        text(&output.stderr)
            .contains("the dynamic dimension `n` needs a value: pass --with n=<int>"),
        "{}",
        text(&output.stderr)
    );
    let output = tilec(&["run", "--device", "cpu", file, "--with", "n=200"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("ran scale("),
        "{}",
        text(&output.stdout)
    );
}

#[test]
fn instance_past_the_last_says_how_many_there_are() {
    let file = example("tiled_gemm.py");
    let output = tilec(&[
        "run",
        "--device",
        "cpu",
        "--instance",
        "5",
        file.to_str().expect("a UTF-8 path"),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).ends_with("tiled_gemm.py: `tiled_gemm` has 2 instances (0 to 1)\n"),
        "{}",
        text(&output.stderr)
    );
}

/// A 4096×2048×2048 GEMM takes the emulator about a minute: `tilec run` says so at once and names
/// sizes that take seconds, instead of sitting silent.
#[test]
fn run_refuses_a_long_emulation_and_names_smaller_sizes() {
    let file = example("tiled_gemm.py");
    let output = tilec(&[
        "run",
        "--device",
        "cpu",
        "--instance",
        "0",
        "--with",
        "M=4096",
        file.to_str().expect("a UTF-8 path"),
    ]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "error: tiled_gemm(M=4096, N=2048, K=2048) would take the CPU emulator about 58 s"
        ) && stderr.contains(
            "(estimated); `--with M=1024 --with N=1024 --with K=1024` takes about 4 s (or pass \
             --force to wait, or --shrink to run at those sizes)"
        ),
        "{stderr}"
    );
    assert_eq!(text(&output.stdout), "");
}

/// `--shrink` runs the same GEMM at the sizes the refusal names, and says which: the integer
/// arguments that are problem dimensions are halved, the tile sizes of the kernel kept.
#[test]
fn run_shrinks_a_long_emulation_to_sizes_that_take_under_a_second() {
    let file = example("tiled_gemm.py");
    let output = tilec(&[
        "run",
        "--device",
        "cpu",
        "--instance",
        "0",
        "--shrink=0.5",
        file.to_str().expect("a UTF-8 path"),
    ]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(
            "note: emulating at smaller sizes (--shrink): --with M=256 --with N=512 --with K=512 \
             (estimated: under a second)"
        ),
        "{stderr}"
    );
    let stdout = text(&output.stdout);
    assert!(
        stdout.starts_with("ran tiled_gemm(M=256, N=512, K=512) on the CPU emulator:"),
        "{stdout}"
    );
}

/// A kernel over `T.dynamic` sizes needs values for them; `--shrink` gives them one that runs at
/// once and names it, where a plain run asks for `--with`.
#[test]
fn run_shrink_gives_dynamic_sizes_values() {
    let file = crate::common::fixture("kernels/dynamic_rows.py");
    let path = file.to_str().expect("a UTF-8 path");
    let plain = tilec(&["run", "--device", "cpu", path]);
    assert_eq!(plain.status.code(), Some(2));
    assert!(
        text(&plain.stderr)
            .contains("error: the dynamic dimension `M` needs a value: pass --with M=<int>"),
        "{}",
        text(&plain.stderr)
    );
    let output = tilec(&["run", "--device", "cpu", "--shrink", path]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("note: emulating at smaller sizes (--shrink): --with M=128 --with N=128"),
        "{stderr}"
    );
    assert!(
        text(&output.stdout).starts_with("ran scale_rows(M=128, N=128) on the CPU emulator:"),
        "{}",
        text(&output.stdout)
    );
}

/// The GPU-only flags say they do nothing on the emulator.
#[test]
fn bench_and_check_on_the_emulator_say_they_are_ignored() {
    let file = example("row_softmax.py");
    let output = tilec(&[
        "run",
        "--device",
        "cpu",
        "--bench",
        "--check",
        "--with",
        "M=64",
        file.to_str().expect("a UTF-8 path"),
    ]);
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("note: --bench is ignored on the CPU emulator (it times GPU launches)")
            && stderr.contains(
                "note: --check is ignored on the CPU emulator (it compares a GPU run with it)"
            ),
        "{stderr}"
    );
}

/// Kernels named `double` and `_layernorm_fwd`: the CUDA renames them (no `#error`), the build's
/// description names the C function, and the emulator runs them.
#[test]
fn kernels_named_like_c_keywords_build_and_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (python, c) in [("double", "v_double"), ("_layernorm_fwd", "layernorm_fwd")] {
        let source = format!(
            "import tilelang\nimport tilelang.language as T\n\n\n@tilelang.jit\ndef {python}(N):\n    \
             @T.prim_func\n    def main(A: T.Tensor((N,), \"float32\"), B: T.Tensor((N,), \"float32\")):\n        \
             with T.Kernel(1, threads=128) as bx:\n            for i in T.Parallel(N):\n                \
             B[i] = A[i] * 2.0\n\n    return main\n\n\n{python}(256)\n"
        );
        let path = dir.path().join(format!("{python}.py"));
        std::fs::write(&path, source).expect("writes the kernel");
        let path = path.to_str().expect("a UTF-8 path");
        let out = dir.path().join(format!("out-{python}"));
        let output = tilec(&[
            "build",
            path,
            "--emit",
            "cuda",
            "--out",
            out.to_str().expect("a UTF-8 path"),
            "--cache",
            dir.path().join("cache").to_str().expect("a UTF-8 path"),
        ]);
        assert!(output.status.success(), "{}", text(&output.stdout));
        let folder = std::fs::read_dir(&out)
            .expect("the output folder")
            .next()
            .expect("one folder per file")
            .expect("an entry")
            .path();
        let cuda =
            std::fs::read_to_string(folder.join(format!("{python}-0.cu"))).expect("the CUDA file");
        assert!(!cuda.contains("#error \"tilec: invalid"), "{cuda}");
        assert!(cuda.contains(&format!(") {c}(")), "{cuda}");
        let description = std::fs::read_to_string(folder.join(format!("{python}-0.json")))
            .expect("the description");
        assert!(
            description.contains(&format!("\"function\": \"{c}\"")),
            "{description}"
        );
        let output = tilec(&["run", "--device", "cpu", path]);
        assert!(
            output.status.success()
                && text(&output.stdout).contains(&format!("ran {python}(N=256)")),
            "{}{}",
            text(&output.stdout),
            text(&output.stderr)
        );
    }
}

/// The row maximum of a 128-row attention tile on 128 threads: each thread holds 4 of its rows.
/// Derived from the accumulator, whose rows sit at local positions 0, 1, 32 and 33, its index is
/// packed to 0..4 as TileLang packs it, and the launch is charged the 4 registers (the 34 of the
/// positions' range once inflated its total by 90 and made `register-pressure` fire).
#[test]
fn a_row_statistic_of_an_accumulator_is_packed_into_the_registers_a_thread_uses() {
    let Some(file) = crate::common::corpus_file("flash_attention_fwd.py") else {
        return;
    };
    let output = tilec(&[
        "layout",
        file.to_str().expect("a UTF-8 path"),
        "--instance",
        "0",
        "--with",
        "threads=128",
        "--format",
        "json",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let records: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .collect();
    let scores_max = records
        .iter()
        .find(|record| record["kind"] == "fragment" && record["buffer"] == "scores_max")
        .expect("a scores_max record");
    assert_eq!(
        scores_max["index"],
        serde_json::json!(["i // 64 * 2 + i % 16 // 8"])
    );
    assert_eq!(scores_max["registers_per_thread"], serde_json::json!(4));
    let kernel = records
        .iter()
        .find(|record| record["kind"] == "kernel")
        .expect("a kernel record");
    assert_eq!(
        kernel["fragment_registers_per_thread"],
        serde_json::json!(276)
    );
}

/// What tilec cannot analyse yet never looks like the kernel's error: its own severity and code,
/// once per cause, exit code 0 unless `--strict`; the human text names the instance it belongs to.
#[test]
fn not_analysed_is_not_an_error_unless_strict() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/diagnostics/not_analysed.py");
    let file = file.to_str().expect("a UTF-8 path");
    let output = tilec(&["check", file]);
    let stdout = text(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert_eq!(
        stdout.matches("note[not-analysed]: ").count(),
        1,
        "one diagnostic for the one cause:\n{stdout}"
    );
    assert!(
        stdout.contains(
            "note[not-analysed]: tilec cannot evaluate this dtype: it is a module function here"
        ) && stdout.contains("= note: in instance 0 (M=1024, N=256) of `quantize`")
            && stdout
                .contains("0 error(s), 0 warning(s), 1 construct(s) tilec cannot analyse yet in")
            && !stdout.contains("error["),
        "{stdout}"
    );
    assert_eq!(tilec(&["check", "--strict", file]).status.code(), Some(1));
    let output = tilec(&["check", "--format", "json", file]);
    let diagnostics: Vec<serde_json::Value> = text(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON line"))
        .filter(|record: &serde_json::Value| record["kind"] == "diagnostic")
        .collect();
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0]["severity"], "not-analysed");
    assert_eq!(diagnostics[0]["code"], "not-analysed");
    assert_eq!(diagnostics[0]["line"], 17);
}
