//! The tensor-core corpus kernels run end to end on the CPU emulator, through the real binary
//! (`tilec run --device cpu --save`), at small sizes, and their outputs are compared with a reference
//! computed here in f64 from the saved inputs: gemm.py (pipelined, three stages), gemm_eager.py (B
//! transposed, ReLU epilogue), gemm_splitk_atomic.py (atomic adds from the accumulator) and both
//! instances of flash_attention_fwd.py (causal mask, online softmax, a fragment as the A operand of
//! the second gemm). The emulator executes ldmatrix and mma.sync with PTX's lane ownership and lands
//! cp.async copies only at their wait, so a wrong layout, a missing wait or a missing barrier fails here.

use std::path::{Path, PathBuf};
use std::process::Command;

use tilec_runtime::npy::read_npy;
use tilec_runtime::tensor::HostTensor;

mod common;
use common::corpus_file;

/// Runs one instance on the emulator with `--with` overrides; returns the saved inputs and outputs.
fn run_saved(file: &Path, instance: usize, with: &[&str], dir: &Path) -> (Saved, Saved) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tilec"));
    command
        .arg("run")
        .arg(file)
        .args([
            "--device",
            "cpu",
            "--instance",
            &instance.to_string(),
            "--save",
        ])
        .arg(dir);
    for assignment in with {
        command.args(["--with", assignment]);
    }
    let output = command.output().expect("runs tilec");
    assert!(
        output.status.success(),
        "tilec run failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (Saved(dir.join("in")), Saved(dir.join("out")))
}

struct Saved(PathBuf);

impl Saved {
    fn tensor(&self, name: &str) -> HostTensor {
        read_npy(&self.0.join(format!("{name}.npy"))).expect("reads a saved tensor")
    }
}

/// `A @ B` in f64 with either operand stored transposed.
fn matmul(a: &HostTensor, b: &HostTensor, b_transposed: bool) -> Vec<f64> {
    let (m, k) = (a.shape[0], a.shape[1]);
    let n = if b_transposed { b.shape[0] } else { b.shape[1] };
    let mut out = vec![0.0; m * n];
    for i in 0..m {
        for j in 0..n {
            out[i * n + j] = (0..k)
                .map(|x| {
                    let b_value = if b_transposed {
                        b.values[j * k + x]
                    } else {
                        b.values[x * n + j]
                    };
                    a.values[i * k + x] * b_value
                })
                .sum();
        }
    }
    out
}

/// Every element within `relative * |reference| + absolute`; reports the worst one.
fn assert_close(what: &str, got: &[f64], want: &[f64], relative: f64, absolute: f64) {
    assert_eq!(got.len(), want.len(), "{what}: element count");
    let mut worst = (0.0, 0);
    for (k, (&g, &w)) in got.iter().zip(want).enumerate() {
        let excess = (g - w).abs() - (relative * w.abs() + absolute);
        assert!(!g.is_nan(), "{what}: element {k} is NaN");
        if excess > worst.0 {
            worst = (excess, k);
        }
    }
    let k = worst.1;
    assert!(
        worst.0 <= 0.0,
        "{what}: element {k} is {} but the reference is {}",
        got[k],
        want[k]
    );
}

#[test]
fn pipelined_gemm_matches_f64() {
    let Some(file) = corpus_file("gemm.py") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let (inputs, outputs) = run_saved(&file, 0, &["M=256", "N=128", "K=160"], dir.path());
    let want = matmul(&inputs.tensor("A"), &inputs.tensor("B"), false);
    // C is fp16: half an ulp of rounding, relative 2^-11.
    assert_close("gemm C", &outputs.tensor("C").values, &want, 1e-3, 1e-3);
}

#[test]
fn gemm_with_transposed_b_and_relu_matches_f64() {
    let Some(file) = corpus_file("gemm_eager.py") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let (inputs, outputs) = run_saved(&file, 0, &["M=128", "N=256", "K=96"], dir.path());
    let want: Vec<f64> = matmul(&inputs.tensor("A"), &inputs.tensor("B"), true)
        .into_iter()
        .map(|x| x.max(0.0))
        .collect();
    assert_close(
        "gemm_eager C",
        &outputs.tensor("C").values,
        &want,
        1e-3,
        1e-3,
    );
}

#[test]
fn split_k_gemm_adds_into_c() {
    let Some(file) = corpus_file("gemm_splitk_atomic.py") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let with = ["M=128", "N=128", "K=256", "split_k=2"];
    let (inputs, outputs) = run_saved(&file, 0, &with, dir.path());
    let product = matmul(&inputs.tensor("A"), &inputs.tensor("B"), false);
    let start = inputs.tensor("C");
    let want: Vec<f64> = product
        .iter()
        .zip(&start.values)
        .map(|(p, c)| p + c)
        .collect();
    // fp32 accumulation of 256 products, then one atomic add per split.
    assert_close("split-K C", &outputs.tensor("C").values, &want, 1e-5, 1e-4);
}

/// Attention over (batch, seq, heads, dim) tensors in f64.
fn attention(q: &HostTensor, k: &HostTensor, v: &HostTensor, causal: bool) -> Vec<f64> {
    let [batch, seq, heads, dim] = [q.shape[0], q.shape[1], q.shape[2], q.shape[3]];
    let at = |b: usize, s: usize, h: usize, x: usize| ((b * seq + s) * heads + h) * dim + x;
    let mut out = vec![0.0; q.values.len()];
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..seq {
                let keys = if causal { i + 1 } else { seq };
                let scores: Vec<f64> = (0..keys)
                    .map(|j| {
                        let dot: f64 = (0..dim)
                            .map(|x| q.values[at(b, i, h, x)] * k.values[at(b, j, h, x)])
                            .sum();
                        dot / (dim as f64).sqrt()
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let weights: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = weights.iter().sum();
                for x in 0..dim {
                    let sum: f64 = (0..keys)
                        .map(|j| weights[j] * v.values[at(b, j, h, x)])
                        .sum();
                    out[at(b, i, h, x)] = sum / total;
                }
            }
        }
    }
    out
}

fn check_flash_attention(instance: usize, with: &[&str], causal: bool) {
    let Some(file) = corpus_file("flash_attention_fwd.py") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let (inputs, outputs) = run_saved(&file, instance, with, dir.path());
    let want = attention(
        &inputs.tensor("Q"),
        &inputs.tensor("K"),
        &inputs.tensor("V"),
        causal,
    );
    // P is rounded to fp16 before the second gemm, and the output to fp16.
    assert_close(
        "attention output",
        &outputs.tensor("Output").values,
        &want,
        4e-3,
        2e-3,
    );
}

#[test]
fn causal_flash_attention_matches_f64() {
    check_flash_attention(0, &["batch=1", "heads=2", "seq_len=384", "dim=64"], true);
}

#[test]
fn flash_attention_matches_f64() {
    check_flash_attention(1, &["batch=1", "heads=1", "seq_len=256", "dim=128"], false);
}

/// The statements that make the tensor-core path of printed CUDA: loops, copies, waits, barriers,
/// ldmatrix and mma (runs of mma collapsed to a count), each with its leading indentation.
fn tensor_core_skeleton(cuda: &str) -> String {
    let body = cuda.split("extern \"C\"").nth(1).unwrap_or_default();
    let mut lines: Vec<String> = Vec::new();
    let mut mmas = 0;
    for line in body.lines() {
        let is_mma = line.contains("tl_mma_m16n8k16");
        if !is_mma && mmas > 0 {
            lines.push(format!("    ... {mmas} x tl_mma_m16n8k16_f16"));
            mmas = 0;
        }
        if is_mma {
            mmas += 1;
            continue;
        }
        let keep = [
            "for (",
            "tl_cp_async",
            "__syncthreads",
            "tl_ldmatrix",
            "// ",
        ]
        .iter()
        .any(|key| line.contains(key));
        if keep {
            // Addresses are long; the call and its destination say what is done.
            let short = line.split(" + ").next().unwrap_or(line);
            lines.push(short.trim_end().to_owned());
        }
    }
    // The kernel body's own indentation is not part of the picture (expect-test strips it too).
    let indent = lines
        .iter()
        .map(|line| line.len() - line.trim_start().len())
        .min()
        .unwrap_or(0);
    let lines: Vec<&str> = lines.iter().map(|line| &line[indent..]).collect();
    lines.join("\n")
}

#[test]
fn pipelined_gemm_cuda_skeleton() {
    let Some(file) = corpus_file("gemm.py") else {
        return;
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .arg("build")
        .arg(&file)
        .args(["--emit", "cuda", "--kernel", "matmul", "--out"])
        .arg(dir.path().join("out"))
        .arg("--cache")
        .arg(dir.path().join("cache"))
        .output()
        .expect("runs tilec");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let cuda = std::fs::read_to_string(dir.path().join("out/gemm/matmul-0.cu")).expect("the .cu");
    expect_test::expect![[r#"
        // T.clear
            for (int r = 0; r < 128; ++r) {
        // pipeline prologue: the first 2 stages
            for (int stage = 0; stage < 2; ++stage) {
                // T.copy (pipelined: cp.async into its stage)
                    for (int chunk = 0; chunk < 4; ++chunk) {
                        tl_cp_async<16>(A_shared
                // T.copy (pipelined: cp.async into its stage)
                    for (int chunk_1 = 0; chunk_1 < 4; ++chunk_1) {
                        tl_cp_async<16>(B_shared
                tl_cp_async_commit();
        // T.Pipelined: the iterations that issue a stage ahead, then the last ones
            for (int ko = 0; ko < 30; ++ko) {
                tl_cp_async_wait<1>();
                __syncthreads();
                // T.copy (pipelined: cp.async into its stage)
                    for (int chunk = 0; chunk < 4; ++chunk) {
                        tl_cp_async<16>(A_shared
                // T.copy (pipelined: cp.async into its stage)
                    for (int chunk_1 = 0; chunk_1 < 4; ++chunk_1) {
                        tl_cp_async<16>(B_shared
                tl_cp_async_commit();
                // T.gemm 128x128x32 on mma.sync m16n8k16, warps 2x2 of 64x64
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
        ... 32 x tl_mma_m16n8k16_f16
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
        ... 32 x tl_mma_m16n8k16_f16
            for (int t = 0; t < 2; ++t) {
                tl_cp_async_wait<1>();
                __syncthreads();
                tl_cp_async_commit();
                // T.gemm 128x128x32 on mma.sync m16n8k16, warps 2x2 of 64x64
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
        ... 32 x tl_mma_m16n8k16_f16
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
        ... 32 x tl_mma_m16n8k16_f16
        // T.copy
            for (int chunk_2 = 0; chunk_2 < 64; ++chunk_2) {
                for (int lane = 0; lane < 2; ++lane) {"#]]
    .assert_eq(&tensor_core_skeleton(&cuda));
}
