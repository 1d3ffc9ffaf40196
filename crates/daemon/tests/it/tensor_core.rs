//! The tensor-core kernels run end to end on the CPU emulator, through the real binary
//! (`tilec run --device cpu --save`), at small sizes, and their outputs are compared with a reference
//! computed here in f64 from the saved inputs: the repository's examples/tiled_gemm.py and
//! examples/hopper_gemm.py (pipelined, three stages; in every clone), and from the corpus beside the
//! clone (a conformance suite, skipped with one line where it is missing) gemm_eager.py (B
//! transposed, ReLU epilogue), gemm_splitk_atomic.py (atomic adds from the accumulator) and both
//! instances of flash_attention_fwd.py (causal mask, online softmax, a fragment as the A operand of
//! the second gemm). Every check runs on every code-generation path ([`PATHS`]): sm_80 lowers the
//! gemms to ldmatrix and mma.sync over a cp.async pipeline; sm_90 to wgmma with shared-memory
//! descriptors (A from registers in attention's second gemm) over a warp-specialized TMA pipeline
//! (a producer warpgroup, full and empty mbarriers), a single-role TMA pipeline or a cp.async one.
//! The emulator executes ldmatrix, mma.sync and wgmma with PTX's lane ownership, reads wgmma's
//! shared operands through the descriptor's addressing and swizzle, runs the producer and consumer
//! roles concurrently, and lands cp.async and TMA copies only at their waits, so a wrong layout, a
//! wrong descriptor or box, a missing wait, a wrong parity or a missing barrier fails here.

use std::path::{Path, PathBuf};
use std::process::Command;

use tilec_runtime::npy::read_npy;
use tilec_runtime::tensor::HostTensor;

use crate::common::corpus_file;

/// One code-generation path: a target and the pass config (set to true) that selects it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CodePath {
    pub(crate) target: &'static str,
    pub(crate) pass_config: Option<&'static str>,
}

impl std::fmt::Display for CodePath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.pass_config {
            Some(config) => write!(f, "{}, {config}", self.target),
            None => write!(f, "{}", self.target),
        }
    }
}

/// sm_90's default path: wgmma, TMA, warp specialization, persistent launches.
const SM90: CodePath = CodePath {
    target: "sm_90",
    pass_config: None,
};

/// Every code-generation path of the tensor-core kernels: mma.sync with cp.async (sm_80); on sm_90
/// wgmma with a warp-specialized TMA pipeline (the default, attention on FlashAttention-3's
/// schedule, gemm launches persistent with their stores staged through shared memory), the same
/// with attention's loop kept as written (`tilec.disable_gemm_overlap`), with gemm stores straight
/// from registers (`tilec.disable_epilogue_staging`), with one block per tile
/// (`tilec.disable_persistent`), with a single-role TMA pipeline, and with cp.async; and
/// mma.sync in the warp-specialized TMA pipeline (`tl.disable_wgmma`).
/// [`every_path_generates_its_own_code`] proves each one is taken.
const PATHS: [CodePath; 8] = [
    CodePath {
        target: "sm_80",
        pass_config: None,
    },
    SM90,
    CodePath {
        target: "sm_90",
        pass_config: Some("tilec.disable_gemm_overlap"),
    },
    CodePath {
        target: "sm_90",
        pass_config: Some("tilec.disable_epilogue_staging"),
    },
    CodePath {
        target: "sm_90",
        pass_config: Some("tilec.disable_persistent"),
    },
    CodePath {
        target: "sm_90",
        pass_config: Some("tl.disable_warp_specialized"),
    },
    CodePath {
        target: "sm_90",
        pass_config: Some("tl.disable_tma_lower"),
    },
    CodePath {
        target: "sm_90",
        pass_config: Some("tl.disable_wgmma"),
    },
];

/// Runs one instance on the emulator on `path` with `--with` overrides; returns the saved inputs
/// and outputs. A pass config is set through a `tilec.toml` beside a copy of the file.
fn run_saved(
    file: &Path,
    (instance, path): (usize, CodePath),
    with: &[&str],
    dir: &Path,
) -> (Saved, Saved) {
    let source = source_on_path(file, path, dir);
    let target = path.target;
    let mut command = Command::new(env!("CARGO_BIN_EXE_tilec"));
    command
        .arg("run")
        .arg(&source)
        .args([
            "--device",
            "cpu",
            "--target",
            target,
            "--instance",
            &instance.to_string(),
            "--save",
        ])
        .arg(dir.join("saved"));
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
    (
        Saved(dir.join("saved").join("in")),
        Saved(dir.join("saved").join("out")),
    )
}

/// The kernel file to give tilec for `path`: the corpus file itself, or a copy in a project under
/// `dir` whose `tilec.toml` sets the path's pass config.
fn source_on_path(file: &Path, path: CodePath, dir: &Path) -> PathBuf {
    let Some(config) = path.pass_config else {
        return file.to_path_buf();
    };
    let project = dir.join("project");
    std::fs::create_dir_all(&project).expect("creates the project folder");
    let name = file.file_name().expect("a file name");
    std::fs::copy(file, project.join(name)).expect("copies the kernel");
    let manifest = format!("[pass_configs]\n\"{config}\" = true\n");
    std::fs::write(project.join("tilec.toml"), manifest).expect("writes tilec.toml");
    project.join(name)
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

/// examples/tiled_gemm.py (in the repository) at instance `instance` with the overrides `with`, on
/// every path, against `A @ B` in f64. Its instance 0 is a 128x128x32 tile on 128 threads over three
/// stages, its instance 1 a 128x256 tile on 256 threads; `block_K=64` makes the latter the
/// 128x256x64 tile whose fp16 rows are 128 bytes.
fn check_gemm(instance: usize, with: &[&str], what: &str) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/tiled_gemm.py");
    for path in PATHS {
        let dir = tempfile::tempdir().expect("temp dir");
        let (inputs, outputs) = run_saved(&file, (instance, path), with, dir.path());
        let want = matmul(&inputs.tensor("A"), &inputs.tensor("B"), false);
        // C is fp16: half an ulp of rounding, relative 2^-11.
        let what = format!("{what} ({path})");
        assert_close(&what, &outputs.tensor("C").values, &want, 1e-3, 1e-3);
    }
}

#[test]
fn pipelined_gemm_matches_f64() {
    check_gemm(0, &["M=256", "N=128", "K=160"], "gemm C");
}

#[test]
fn gemm_with_partial_tiles_matches_f64() {
    // M and N are not multiples of the 128x128 tile: the last blocks' stores (staged through
    // shared memory by default) are cut at the edges, and TMA pads the loads with zeros.
    check_gemm(0, &["M=200", "N=136", "K=96"], "partial-tile gemm C");
}

#[test]
fn persistent_gemm_walks_several_tiles_per_block() {
    // 4 x 2 tiles of 128x256 on the emulator's three blocks: blocks 0 and 1 take three tiles,
    // block 2 two, and with two k steps over three stages each tile starts at another stage and
    // barrier parity than the last, which the pipeline carries over from round to round.
    check_gemm(
        1,
        &["M=512", "N=512", "K=128", "block_K=64"],
        "persistent gemm C",
    );
}

#[test]
fn wide_pipelined_gemm_matches_f64() {
    // Instance 1's 128x256x64 tile with 256 threads: two warpgroups side by side along N on
    // wgmma, 128-byte swizzles on both operands.
    check_gemm(1, &["M=128", "N=256", "K=192", "block_K=64"], "wide gemm C");
}

/// examples/hopper_gemm.py stacks the warps along M (`FullRow`): on sm_90 each consumer
/// warpgroup owns 64 whole rows on m64n256k16, and its store is staged through shared memory.
#[test]
fn full_row_wgmma_gemm_matches_f64() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/hopper_gemm.py");
    let path = SM90;
    let with = ["M=128", "N=256", "K=192"];
    let cuda = built_cuda_with(&file, ("hopper_gemm", 0), path, &with);
    assert!(cuda.contains("tl_wgmma_m64n256k16") && cuda.contains("acc_staged -> C"));
    let dir = tempfile::tempdir().expect("temp dir");
    let (inputs, outputs) = run_saved(&file, (0, path), &with, dir.path());
    let want = matmul(&inputs.tensor("A"), &inputs.tensor("B"), false);
    assert_close(
        "FullRow gemm C",
        &outputs.tensor("C").values,
        &want,
        1e-3,
        1e-3,
    );
}

#[test]
fn gemm_with_transposed_b_and_relu_matches_f64() {
    let Some(file) = corpus_file("gemm_eager.py") else {
        return;
    };
    for path in PATHS {
        let dir = tempfile::tempdir().expect("temp dir");
        let with = ["M=128", "N=256", "K=96"];
        let (inputs, outputs) = run_saved(&file, (0, path), &with, dir.path());
        let want: Vec<f64> = matmul(&inputs.tensor("A"), &inputs.tensor("B"), true)
            .into_iter()
            .map(|x| x.max(0.0))
            .collect();
        let what = format!("gemm_eager C ({path})");
        assert_close(&what, &outputs.tensor("C").values, &want, 1e-3, 1e-3);
    }
}

#[test]
fn split_k_gemm_adds_into_c() {
    let Some(file) = corpus_file("gemm_splitk_atomic.py") else {
        return;
    };
    for path in PATHS {
        let dir = tempfile::tempdir().expect("temp dir");
        let with = ["M=128", "N=128", "K=256", "split_k=2"];
        let (inputs, outputs) = run_saved(&file, (0, path), &with, dir.path());
        let product = matmul(&inputs.tensor("A"), &inputs.tensor("B"), false);
        let start = inputs.tensor("C");
        let want: Vec<f64> = product
            .iter()
            .zip(&start.values)
            .map(|(p, c)| p + c)
            .collect();
        // fp32 accumulation of 256 products, then one atomic add per split.
        let what = format!("split-K C ({path})");
        assert_close(&what, &outputs.tensor("C").values, &want, 1e-5, 1e-4);
    }
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

/// Runs an attention instance of `file` in the emulator and compares its output with f64.
fn assert_attention_matches(
    file: &Path,
    (instance, path): (usize, CodePath),
    with: &[&str],
    causal: bool,
    what: &str,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let (inputs, outputs) = run_saved(file, (instance, path), with, dir.path());
    let want = attention(
        &inputs.tensor("Q"),
        &inputs.tensor("K"),
        &inputs.tensor("V"),
        causal,
    );
    // P is rounded to fp16 before the second gemm, and the output to fp16.
    assert_close(what, &outputs.tensor("Output").values, &want, 4e-3, 2e-3);
}

fn check_flash_attention(instance: usize, with: &[&str], causal: bool) {
    let Some(file) = corpus_file("flash_attention_fwd.py") else {
        return;
    };
    for path in PATHS {
        let what = format!("attention output ({path})");
        assert_attention_matches(&file, (instance, path), with, causal, &what);
    }
}

#[test]
fn causal_flash_attention_matches_f64() {
    check_flash_attention(0, &["batch=1", "heads=2", "seq_len=384", "dim=64"], true);
}

#[test]
fn flash_attention_matches_f64() {
    // Four key blocks: on sm_90 the rotated loop (FlashAttention-3's schedule) runs three times,
    // its two stages each refilled, so every turn, stage release and parity flip is exercised.
    check_flash_attention(1, &["batch=1", "heads=1", "seq_len=512", "dim=128"], false);
}

/// The statements that make the tensor-core path of printed CUDA: loops, copies, waits, barriers,
/// fences, ldmatrix, mma and wgmma (runs of one mma or wgmma form collapsed to a count), each with
/// its leading indentation.
fn tensor_core_skeleton(cuda: &str) -> String {
    let body = cuda.split("extern \"C\"").nth(1).unwrap_or_default();
    let mut lines: Vec<String> = Vec::new();
    let mut run: Option<(String, usize)> = None;
    for line in body.lines() {
        let trimmed = line.trim_start();
        let instruction = (trimmed.starts_with("tl_mma_m16n8k16")
            || trimmed.starts_with("tl_wgmma_m64"))
        .then(|| trimmed.split('(').next().unwrap_or(trimmed).to_owned());
        match (&mut run, instruction) {
            (Some((name, count)), Some(this)) if *name == this => {
                *count += 1;
                continue;
            }
            (_, next) => {
                if let Some((name, count)) = run.take() {
                    lines.push(format!("    ... {count} x {name}"));
                }
                if let Some(name) = next {
                    run = Some((name, 1));
                    continue;
                }
            }
        }
        let keep = [
            "for (",
            "tl_cp_async",
            "__syncthreads",
            "tl_ldmatrix",
            "tl_wgmma_fence",
            "tl_wgmma_commit",
            "tl_wgmma_wait",
            "tl_fence",
            "tl_mbarrier",
            "tl_tma_load",
            "tl_setmaxnreg",
            "tl_named_barrier",
            "if (tx",
            "producer_tx",
            "} else {",
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

/// The CUDA that `tilec build --emit cuda` prints for instance `instance` of gemm.py's `matmul`.
fn built_gemm(target: &'static str, instance: usize) -> Option<String> {
    let file = corpus_file("gemm.py")?;
    let path = CodePath {
        target,
        pass_config: None,
    };
    Some(built_cuda(&file, ("matmul", instance), path))
}

/// Asserts that every piece occurs in `cuda`, each after the one before it.
pub(crate) fn assert_in_order(cuda: &str, pieces: &[&str]) {
    let mut rest = cuda;
    for piece in pieces {
        let Some(at) = rest.find(piece) else {
            panic!("`{piece}` missing or out of order in:\n{cuda}");
        };
        rest = &rest[at + piece.len()..];
    }
}

/// The CUDA that `tilec build --emit cuda` prints for one instance of a kernel of `file` on `path`.
pub(crate) fn built_cuda(file: &Path, kernel_instance: (&str, usize), path: CodePath) -> String {
    built_cuda_with(file, kernel_instance, path, &[])
}

/// [`built_cuda`] with `--with` overrides.
fn built_cuda_with(
    file: &Path,
    (kernel, instance): (&str, usize),
    path: CodePath,
    with: &[&str],
) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = source_on_path(file, path, dir.path());
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .arg("build")
        .arg(&source)
        .args(with.iter().flat_map(|assignment| ["--with", assignment]))
        .args([
            "--emit",
            "cuda",
            "--target",
            path.target,
            "--kernel",
            kernel,
        ])
        .args(["--instance", &instance.to_string(), "--out"])
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
    let stem = file
        .file_stem()
        .and_then(|s| s.to_str())
        .expect("a file stem");
    let cu = dir
        .path()
        .join(format!("out/{stem}/{kernel}-{instance}.cu"));
    std::fs::read_to_string(cu).expect("the .cu")
}

/// The features of a kernel's printed CUDA that tell the paths apart, each a call in the kernel
/// body (the helpers' definitions are not counted).
fn path_features(cuda: &str) -> Vec<&'static str> {
    let body = cuda.split_once("__global__").map_or(cuda, |(_, body)| body);
    let features = [
        ("wgmma", "tl_wgmma_m64"),
        ("mma.sync", "tl_mma_"),
        ("cp.async", "tl_cp_async<"),
        ("TMA", "tl_tma_load_"),
        ("warp roles", "tl_setmaxnreg_inc<"),
        ("warpgroup turns", "// take the turn"),
        ("staged epilogue", "_staged -> "),
        ("persistent", "tile_stride = gridDim.x"),
    ];
    features
        .into_iter()
        .filter(|(_, call)| body.contains(call))
        .map(|(name, _)| name)
        .collect()
}

/// The pass configs of a project's tilec.toml reach the compiler: each path of [`PATHS`] prints
/// its own code for gemm.py's large instance and attention.
#[test]
fn every_path_generates_its_own_code() {
    let (Some(gemm), Some(attention)) = (
        corpus_file("gemm.py"),
        corpus_file("flash_attention_fwd.py"),
    ) else {
        return;
    };
    let mut table = String::new();
    for path in PATHS {
        let gemm = path_features(&built_cuda(&gemm, ("matmul", 1), path));
        let attention = path_features(&built_cuda(&attention, ("flashattn", 1), path));
        table.push_str(&format!(
            "{path}\n  gemm: {}\n  attention: {}\n",
            gemm.join(", "),
            attention.join(", ")
        ));
    }
    expect_test::expect![[r#"
        sm_80
          gemm: mma.sync, cp.async, staged epilogue
          attention: mma.sync, cp.async
        sm_90
          gemm: wgmma, TMA, warp roles, staged epilogue, persistent
          attention: wgmma, TMA, warp roles, warpgroup turns, persistent
        sm_90, tilec.disable_gemm_overlap
          gemm: wgmma, TMA, warp roles, staged epilogue, persistent
          attention: wgmma, TMA, warp roles, persistent
        sm_90, tilec.disable_epilogue_staging
          gemm: wgmma, TMA, warp roles, persistent
          attention: wgmma, TMA, warp roles, warpgroup turns, persistent
        sm_90, tilec.disable_persistent
          gemm: wgmma, TMA, warp roles, staged epilogue
          attention: wgmma, TMA, warp roles, warpgroup turns
        sm_90, tl.disable_warp_specialized
          gemm: wgmma, TMA, staged epilogue
          attention: wgmma, TMA
        sm_90, tl.disable_tma_lower
          gemm: wgmma, cp.async, staged epilogue
          attention: wgmma, cp.async
        sm_90, tl.disable_wgmma
          gemm: mma.sync, TMA, warp roles, staged epilogue, persistent
          attention: mma.sync, TMA, warp roles, persistent
    "#]]
    .assert_eq(&table);
}

/// A gemm's store is staged through shared memory only where the finished pipeline leaves room
/// for the padded tile: 128×128 fp16 with 16-byte row padding is 34 816 bytes, which three 16 KiB
/// stages hold and two do not. The tile reuses the pipeline's space from offset 0. (On sm_90 the
/// launch is made one block per tile for this; persistent launches are the next test's.)
#[test]
fn epilogue_is_staged_only_in_space_the_pipeline_frees() {
    let Some(file) = corpus_file("gemm.py") else {
        return;
    };
    for (target, pass_config) in [("sm_80", None), ("sm_90", Some("tilec.disable_persistent"))] {
        let path = CodePath {
            target,
            pass_config,
        };
        let three = built_cuda_with(&file, ("matmul", 0), path, &["num_stages=3"]);
        assert!(
            three.contains("tl_half* C_local_staged = (tl_half*)(tl_smem + 0);"),
            "{target}: three stages leave room for the staged store:\n{three}"
        );
        assert!(
            three.contains("C_local_staged + tx / 16 * 136"),
            "{target}: the staged tile's rows are 128 + 8 elements apart:\n{three}"
        );
        let two = built_cuda_with(&file, ("matmul", 0), path, &["num_stages=2"]);
        assert!(
            !two.contains("C_local_staged"),
            "{target}: two stages leave no room for the staged store:\n{two}"
        );
    }
}

/// On sm_90 a warp-specialized gemm launch (two consumer warpgroups: a kernel of one keeps a single
/// role, so that several of its blocks share a multiprocessor) is persistent: one block per
/// multiprocessor walks the tiles, and since its producer refills stages while the consumers
/// store, the staged store gets shared memory of its own, even where two stages would leave no
/// room. Attention on FlashAttention-3's schedule is persistent too; causal attention, whose
/// loop's trip count differs between tiles, keeps one block per tile.
#[test]
fn gemm_launches_are_persistent_with_a_staging_tile_of_their_own() {
    let (Some(gemm), Some(attention)) = (
        corpus_file("gemm.py"),
        corpus_file("flash_attention_fwd.py"),
    ) else {
        return;
    };
    let path = SM90;
    let one_warpgroup = built_cuda_with(&gemm, ("matmul", 0), path, &["num_stages=2"]);
    assert!(
        one_warpgroup.contains(
            "// Launch: grid (8, 8, 1), block (128, 1, 1), 32784 bytes of dynamic shared memory."
        ) && one_warpgroup.contains(
            "128 threads are one consumer warpgroup, which a producer warpgroup would hold to one \
             block per multiprocessor"
        ),
        "{one_warpgroup}"
    );
    let two = built_cuda_with(&gemm, ("matmul", 0), path, &["num_stages=2", "threads=256"]);
    let header = "// Launch: persistent: one block per multiprocessor walking the tiles of \
        grid (8, 8, 1), block (384, 1, 1), 67616 bytes of dynamic shared memory.";
    assert!(two.contains(header), "{two}");
    // The padded 128x136 tile (34 816 bytes), then two 8 KiB stages of A and of B, then the
    // mbarriers: nothing shares space.
    for placed in [
        "C_local_staged = (tl_half*)(tl_smem + 0);",
        "A_shared = (tl_half*)(tl_smem + 34816);",
        "B_shared = (tl_half*)(tl_smem + 51200);",
        "full_barrier = (unsigned long long*)(tl_smem + 67584);",
    ] {
        assert!(two.contains(placed), "{placed}:\n{two}");
    }
    // Each round walks one tile: its block indices come from the round, and the last of its 32
    // stages (stage 1 of 2) is released for the next tile.
    for per_tile in [
        "const int block_x = (tile_round * tile_stride + first_tile) % 8;",
        "tl_mbarrier_arrive(empty_barrier + 1);",
    ] {
        assert!(two.contains(per_tile), "{per_tile}:\n{two}");
    }
    for (instance, header) in [
        (0, "grid (8, 8, 1)"),
        (
            1,
            "persistent: one block per multiprocessor walking the tiles of grid (32, 16, 8)",
        ),
    ] {
        let cuda = built_cuda(&attention, ("flashattn", instance), path);
        assert!(
            cuda.contains(&format!("// Launch: {header}")),
            "attention {instance}:\n{cuda}"
        );
    }
}

/// Persistent attention loads the next tile's Q rows into registers while its last PV gemm runs,
/// between that gemm's commit and the wait for it, and the next round stores them into shared
/// memory; round 0 loads its own. The next tile's block indices replace the current ones.
#[test]
fn persistent_attention_loads_the_next_tiles_q_during_its_last_gemm() {
    let Some(attention) = corpus_file("flash_attention_fwd.py") else {
        return;
    };
    let path = SM90;
    let cuda = built_cuda(&attention, ("flashattn", 1), path);
    let own_tile = "Q + bx * 262144 + by * 128 + bz * 8388608 + tx / 16 * 2048 + tx % 16 * 8";
    let next_tile = "Q + tx / 16 * 2048 + tx % 16 * 8 + next_bx * 262144 + next_by * 128 \
        + next_bz * 8388608 + chunk * 32768";
    let in_order = [
        "__align__(16) tl_half Q_next[64];",
        "if (tile_round == 0) {",
        own_tile,
        "*(uint4*)(Q_vec + 0) = *(const uint4*)(Q_next + chunk * 8);",
        // The last PV gemm of the tile, after the rotated loop.
        "if (tx / 128 == 0) tl_named_barrier(2, 256); // the last turn handed on",
        "tl_wgmma_commit();",
        "// persistent: the next tile's inputs into registers while this tile's last gemm runs",
        "const int next_tile = (tile_round + 1) * tile_stride + first_tile;",
        "if (next_tile < 4096) {",
        "const int next_bx = next_tile % 32;",
        "const int next_by = next_tile / 32 % 16;",
        "const int next_bz = next_tile / 512;",
        next_tile,
        "tl_wgmma_wait<0>();",
        "tl_div(acc_o[",
    ];
    assert_in_order(&cuda, &in_order);
}

/// The emulator runs a persistent launch on three blocks: with eight tiles over a (2, 2, 2) grid,
/// block 0 walks tiles 0, 3 and 6, whose block indices differ in every axis from the tile before,
/// so every output row is right only if each round stores the Q rows its predecessor prefetched
/// for it.
#[test]
fn persistent_attention_matches_f64_across_rounds() {
    let Some(file) = corpus_file("flash_attention_fwd.py") else {
        return;
    };
    let path = SM90;
    let with = ["batch=2", "heads=2", "seq_len=256", "dim=128"];
    let cuda = built_cuda_with(&file, ("flashattn", 1), path, &with);
    assert!(
        cuda.contains("walking the tiles of grid (2, 2, 2)"),
        "{cuda}"
    );
    assert_attention_matches(
        &file,
        (1, path),
        &with,
        false,
        "persistent attention output",
    );
}

/// The output tile a fragment fills is stored with rows padded to 136 halfs, so the eight rows
/// a warp's accumulator store touches start in different banks (row-major 256-byte rows put
/// them all in the same ones), and the store's addresses stay affine in the thread index.
#[test]
fn attention_output_tile_rows_are_padded_against_bank_conflicts() {
    let Some(file) = corpus_file("flash_attention_fwd.py") else {
        return;
    };
    let path = SM90;
    let cuda = built_cuda(&file, ("flashattn", 1), path);
    let store = cuda
        .lines()
        .find(|line| line.contains("*(unsigned int*)(O_shared +"))
        .expect("the accumulator's store into O_shared")
        .trim();
    expect_test::expect!["*(unsigned int*)(O_shared + tx / 32 * 2176 + tx % 4 * 2 + tx / 4 % 8 * 136 + chunk_1 / 2 * 8 + chunk_1 % 2 * 1088) = *(const unsigned int*)(O_shared_vec + 0);"].assert_eq(store);

    // `tilec layout` reports the padded storage (127 rows of 136 halfs and one of 128), not the
    // tile's 32 KiB, and says why the rows are padded.
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .args(["layout", &file.to_string_lossy(), "--instance", "1"])
        .output()
        .expect("tilec layout");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .find(|line| line.contains("shared O_shared"))
        .unwrap_or_else(|| panic!("no O_shared line in:\n{stdout}"))
        .trim();
    expect_test::expect!["shared O_shared: 34.0 KiB, row-major 128 rows × 128 halfs, rows padded to 136 elements (exchanged with a fragment by the `T.copy`, so that its rows start in different banks)"].assert_eq(line);
}

/// With three stages, attention's K and V tiles, Q_shared and O_shared (192 + 32 + 34 KiB) do not
/// fit a block's 227 KiB, so the persistent launch lets O_shared reuse Q_shared's space (both
/// are overwritten whole at their first access in a tile, so neither carries anything into the
/// next) instead of falling back to one block per tile. The pipeline's stages keep space of
/// their own: the producer fills the next tile's while this tile's epilogue runs. The emulator's
/// race check then holds the sharing to its barriers, across rounds.
#[test]
fn persistent_attention_shares_q_and_o_space_only_when_it_must() {
    let Some(file) = corpus_file("flash_attention_fwd.py") else {
        return;
    };
    let path = SM90;
    let offset = |cuda: &str, buffer: &str| -> String {
        let declaration = format!("tl_half* {buffer} = (tl_half*)(tl_smem + ");
        let at = cuda.find(&declaration).expect("the declaration") + declaration.len();
        cuda[at..].split(')').next().unwrap_or_default().to_owned()
    };
    let small = ["batch=2", "heads=2", "seq_len=256", "dim=128"];
    let two_stages = built_cuda_with(&file, ("flashattn", 1), path, &small);
    assert_ne!(
        offset(&two_stages, "O_shared"),
        offset(&two_stages, "Q_shared")
    );
    let with = [
        "batch=2",
        "heads=2",
        "seq_len=256",
        "dim=128",
        "num_stages=3",
    ];
    let cuda = built_cuda_with(&file, ("flashattn", 1), path, &with);
    assert!(
        cuda.contains("walking the tiles of grid (2, 2, 2)"),
        "{cuda}"
    );
    assert!(
        cuda.contains("231504 bytes of dynamic shared memory"),
        "{cuda}"
    );
    assert_eq!(offset(&cuda, "O_shared"), offset(&cuda, "Q_shared"));
    for staged in ["K_shared", "V_shared"] {
        assert_ne!(offset(&cuda, staged), offset(&cuda, "O_shared"));
    }
    assert_attention_matches(
        &file,
        (1, path),
        &with,
        false,
        "three-stage persistent attention output",
    );
}

#[test]
fn pipelined_gemm_cuda_skeleton() {
    let Some(cuda) = built_gemm("sm_80", 0) else {
        return;
    };
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
            tl_cp_async_wait<1>();
            __syncthreads();
            tl_ldmatrix_x4(a_frag
            tl_ldmatrix_x4(a_frag
            tl_ldmatrix_x4(a_frag
            tl_ldmatrix_x4(a_frag
            tl_ldmatrix_x4_trans(b_frag
            tl_ldmatrix_x4_trans(b_frag
            tl_ldmatrix_x4_trans(b_frag
            tl_ldmatrix_x4_trans(b_frag
            for (int ko = 0; ko < 30; ++ko) {
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
                    tl_cp_async_wait<1>();
                    __syncthreads();
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
                    tl_cp_async_wait<1>();
                    __syncthreads();
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4(a_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
                    tl_ldmatrix_x4_trans(b_frag
        ... 32 x tl_mma_m16n8k16_f16
        __syncthreads();
        // T.copy(C_local -> C_local_staged): the gemm's store, staged through shared memory
            for (int chunk_2 = 0; chunk_2 < 64; ++chunk_2) {
                for (int lane = 0; lane < 2; ++lane) {
        __syncthreads();
        // T.copy(C_local_staged -> C): the staged store, in whole rows
            for (int chunk_3 = 0; chunk_3 < 16; ++chunk_3) {
                for (int lane_1 = 0; lane_1 < 8; ++lane_1) {"#]]
    .assert_eq(&tensor_core_skeleton(&cuda));
}

/// Attention on sm_90 gets FlashAttention-3's schedule: iteration 0's first gemm before the loop,
/// each iteration's first gemm issued with the previous one's second inside one turn, a wait for
/// all but the newest group before the softmax, the stage released after the second gemm retires,
/// and the last second gemm after the loop.
#[test]
fn overlapped_attention_cuda_skeleton() {
    let Some(file) = corpus_file("flash_attention_fwd.py") else {
        return;
    };
    let path = SM90;
    let cuda = built_cuda(&file, ("flashattn", 1), path);
    let skeleton = tensor_core_skeleton(&cuda);
    let consumer = skeleton
        .split_once("// T.Pipelined (consumer warpgroups)")
        .and_then(|(_, rest)| rest.split_once("} else {"))
        .map_or("", |(loop_, _)| loop_);
    expect_test::expect![[r#"
        , FlashAttention-3's schedule: iteration k's first gemm and k-1's second are issued together, the 2 warpgroups taking turns, and what does not need the second gemm runs while it does
                        tl_mbarrier_wait(full_barrier
                        // T.clear
                            for (int r_3 = 0; r_3 < 64; ++r_3) {
                        if (tx / 128 == 1) tl_named_barrier_arrive(2, 256); // the first turn goes to warpgroup 0
                        tl_named_barrier(2
                        // T.gemm 128x128x128 on wgmma m64n128k16, warpgroups 2x1, A from shared (128-byte swizzle, K-major), B from shared (128-byte swizzle, K-major)
                            tl_wgmma_fence();
        ... 8 x tl_wgmma_m64n128k16_f16_ss_t00
                            tl_wgmma_commit();
                        tl_named_barrier_arrive(2
                        tl_wgmma_wait<0>();
                        tl_fence_registers<64>(acc_s);
                        tl_fence_registers<64>(acc_o);
                        tl_mbarrier_arrive(empty_barrier
                        // T.copy
                            for (int step = 0; step < 2; ++step) {
                        // T.reduce_max
                        // T.Parallel(128)
                            for (int step_1 = 0; step_1 < 2; ++step_1) {
                        // T.Parallel(128, 128)
                            for (int step_2 = 0; step_2 < 64; ++step_2) {
                        // T.reduce_sum
                        // T.Parallel(128)
                            for (int step_3 = 0; step_3 < 2; ++step_3) {
                        // T.Parallel(128, 128)
                            for (int step_4 = 0; step_4 < 64; ++step_4) {
                        // T.copy
                            for (int step_5 = 0; step_5 < 64; ++step_5) {
                        for (int k = 0; k < 31; ++k) {
                            tl_mbarrier_wait(full_barrier
                            // T.clear
                                for (int r_3 = 0; r_3 < 64; ++r_3) {
                            tl_named_barrier(2
                            // T.gemm 128x128x128 on wgmma m64n128k16, warpgroups 2x1, A from shared (128-byte swizzle, K-major), B from shared (128-byte swizzle, K-major)
                                tl_wgmma_fence();
        ... 8 x tl_wgmma_m64n128k16_f16_ss_t00
                                tl_wgmma_commit();
                            tl_mbarrier_wait(late_full_barrier
                            // T.gemm 128x128x128 on wgmma m64n128k16, warpgroups 2x1, A from registers, B from shared (128-byte swizzle, MN-major)
                                tl_wgmma_fence();
        ... 8 x tl_wgmma_m64n128k16_f16_rs_t1
                                tl_wgmma_commit();
                            tl_named_barrier_arrive(2
                            tl_wgmma_wait<1>();
                            tl_fence_registers<64>(acc_s);
                            tl_fence_registers<64>(acc_o);
                            tl_mbarrier_arrive(empty_barrier
                            // T.copy
                                for (int step = 0; step < 2; ++step) {
                            // T.reduce_max
                            // T.Parallel(128)
                                for (int step_1 = 0; step_1 < 2; ++step_1) {
                            // T.Parallel(128, 128)
                                for (int step_2 = 0; step_2 < 64; ++step_2) {
                            // T.reduce_sum
                            // T.Parallel(128)
                                for (int step_3 = 0; step_3 < 2; ++step_3) {
                            tl_wgmma_wait<0>();
                            tl_fence_registers<64>(acc_s);
                            tl_fence_registers<64>(acc_o);
                            tl_mbarrier_arrive(late_empty_barrier
                            // T.Parallel(128, 128)
                                for (int step_4 = 0; step_4 < 64; ++step_4) {
                            // T.copy
                                for (int step_5 = 0; step_5 < 64; ++step_5) {
                        if (tx / 128 == 0) tl_named_barrier(2, 256); // the last turn handed on
                        tl_mbarrier_wait(late_full_barrier
                        // T.gemm 128x128x128 on wgmma m64n128k16, warpgroups 2x1, A from registers, B from shared (128-byte swizzle, MN-major)
                            tl_wgmma_fence();
        ... 8 x tl_wgmma_m64n128k16_f16_rs_t1
                            tl_wgmma_commit();
                        // persistent: the next tile's inputs into registers while this tile's last gemm runs
                                for (int chunk = 0; chunk < 8; ++chunk) {
                        tl_wgmma_wait<0>();
                        tl_fence_registers<64>(acc_s);
                        tl_fence_registers<64>(acc_o);
                        tl_mbarrier_arrive(late_empty_barrier
                    // T.Parallel(128, 128)
                        for (int step_6 = 0; step_6 < 64; ++step_6) {
                    // T.copy
                        for (int chunk_1 = 0; chunk_1 < 32; ++chunk_1) {
                            for (int lane_1 = 0; lane_1 < 2; ++lane_1) {
                    tl_named_barrier(1, 256);
                    // T.copy
                        for (int chunk_2 = 0; chunk_2 < 8; ++chunk_2) {
                            for (int lane_2 = 0; lane_2 < 8; ++lane_2) {
                    tl_named_barrier(1, 256);
    "#]].assert_eq(consumer);
}

#[test]
fn wgmma_gemm_cuda_skeleton() {
    let Some(cuda) = built_gemm("sm_90", 1) else {
        return;
    };
    expect_test::expect![[r#"
        // warp specialization: thread 0 initialises the pipeline's mbarriers
            if (tx == 0) {
                tl_mbarrier_init(full_barrier
                tl_mbarrier_init(full_barrier
                tl_mbarrier_init(full_barrier
                tl_mbarrier_init(empty_barrier
                tl_mbarrier_init(empty_barrier
                tl_mbarrier_init(empty_barrier
            tl_fence_proxy_async();
            __syncthreads();
        if (tx < 256) {
            tl_setmaxnreg_inc<232>();
            // persistent: this block's tiles, one per round, one block per multiprocessor
                for (int tile_round = 0; tile_round < tl_floordiv(-first_tile
                    // T.clear
                        for (int r = 0; r < 128; ++r) {
                    tl_fence_proxy_async();
                    tl_named_barrier(1, 256);
                    // T.Pipelined (consumer warpgroups): wait for the stage's TMA boxes, issue its wgmmas, wait for the previous iteration's and release its stage
                        for (int ko = 0; ko < 128; ++ko) {
                            tl_mbarrier_wait(full_barrier
                            // T.gemm 128x256x64 on wgmma m64n128k16, warpgroups 1x2, A from shared (128-byte swizzle, K-major), B from shared (128-byte swizzle, MN-major)
                                tl_wgmma_fence();
        ... 8 x tl_wgmma_m64n128k16_f16_ss_t01
                                tl_wgmma_commit();
                                tl_wgmma_wait<1>();
                                tl_fence_registers<128>(C_local);
                                tl_mbarrier_arrive(empty_barrier
                        tl_wgmma_wait<0>();
                        tl_fence_registers<128>(C_local);
                        tl_mbarrier_arrive(empty_barrier
                    // T.copy(C_local -> C_local_staged): the gemm's store, staged through shared memory
                        for (int chunk = 0; chunk < 64; ++chunk) {
                            for (int lane = 0; lane < 2; ++lane) {
                    tl_named_barrier(1, 256);
                    // T.copy(C_local_staged -> C): the staged store, in whole rows
                        for (int chunk_1 = 0; chunk_1 < 16; ++chunk_1) {
                            for (int lane_1 = 0; lane_1 < 8; ++lane_1) {
                    tl_named_barrier(1, 256);
        } else {
            tl_setmaxnreg_dec<40>();
            const int producer_tx = tx;
            if (tl_floormod(producer_tx, 128) == 0) {
                // persistent: this block's tiles, one per round, one block per multiprocessor
                    for (int tile_round = 0; tile_round < tl_floordiv(-first_tile
                        // T.Pipelined (producer): 5 TMA box(es) per stage, 3 stages ahead at most
                            for (int ko_load = 0; ko_load < 128; ++ko_load) {
                                tl_mbarrier_wait(empty_barrier
                                tl_mbarrier_arrive_expect_tx(full_barrier
                                // T.copy into `A_shared` (pipelined: 1 TMA box(es) into its stage)
                                    tl_tma_load_2d(A_shared
                                // T.copy into `B_shared` (pipelined: 4 TMA box(es) into its stage)
                                    tl_tma_load_2d(B_shared
                                    tl_tma_load_2d(B_shared
                                    tl_tma_load_2d(B_shared
                                    tl_tma_load_2d(B_shared"#]].assert_eq(&tensor_core_skeleton(&cuda));
}

/// A gemm whose A tile has a padded row-major layout (rows 40 elements apart): no wgmma descriptor
/// describes it, so on sm_90 the gemm falls back to mma.sync over wgmma's interleaved accumulator
/// layout, says so in its label, and still computes the product.
const PADDED_A_GEMM: &str = r#"
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def padded_gemm(M=128, N=128, K=64, block_M=128, block_N=128, block_K=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.annotate_layout({A_shared: T.Layout((block_M, block_K), lambda i, j: i * 40 + j)})
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=1):
                T.copy(A[by * block_M, ko * block_K], A_shared)
                T.copy(B[ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return main


padded_gemm()
"#;

#[test]
fn wgmma_falls_back_to_mma_sync_on_an_undescribable_layout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("padded_gemm.py");
    std::fs::write(&file, PADDED_A_GEMM).expect("writes the kernel");
    let (inputs, outputs) = run_saved(&file, (0, PATHS[1]), &[], &dir.path().join("run"));
    let want = matmul(&inputs.tensor("A"), &inputs.tensor("B"), false);
    assert_close(
        "padded gemm C",
        &outputs.tensor("C").values,
        &want,
        1e-5,
        1e-4,
    );
    let output = Command::new(env!("CARGO_BIN_EXE_tilec"))
        .arg("build")
        .arg(&file)
        .args(["--emit", "cuda", "--target", "sm_90", "--out"])
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
    let cuda = std::fs::read_to_string(dir.path().join("out/padded_gemm/padded_gemm-0.cu"))
        .expect("the .cu");
    let label = cuda
        .lines()
        .find(|line| line.contains("// T.gemm"))
        .expect("a gemm label")
        .trim();
    expect_test::expect!["// T.gemm 128x128x32 on mma.sync m16n8k16, warps 4x1 of 32x128 (not wgmma: no wgmma descriptor describes an operand's shared layout)"].assert_eq(label);
}

/// With `tilec.tma_store`, attention's output tile leaves O_shared as two TMA boxes stored by
/// thread 0 (O_shared, which a fragment fills, is then given the 128-byte swizzle instead of
/// padded rows, so that each 64-column half is one box of the output's tensor map), which then
/// waits until the boxes have been read; the result still matches f64 in the emulator, across
/// persistent rounds. The gemm's staged epilogue, whose rows are padded, keeps its threads'
/// stores.
#[test]
fn tma_store_writes_the_output_tile_from_one_thread() {
    let (Some(attention_file), Some(gemm)) = (
        corpus_file("flash_attention_fwd.py"),
        corpus_file("gemm.py"),
    ) else {
        return;
    };
    let path = CodePath {
        target: "sm_90",
        pass_config: Some("tilec.tma_store"),
    };
    let with = ["batch=2", "heads=2", "seq_len=256", "dim=128"];
    let cuda = built_cuda_with(&attention_file, ("flashattn", 1), path, &with);
    let in_order = [
        "const __grid_constant__ tl_tensor_map Output_tma",
        "// T.copy(O_shared -> Output): 2 TMA box(es) stored by thread 0",
        "if (tx == 0) {",
        "tl_tma_store_4d(&Output_tma, O_shared + 0, 0, by, bx * 128, bz);",
        "tl_tma_store_4d(&Output_tma, O_shared + 8192, 64, by, bx * 128, bz);",
        "tl_tma_store_wait();",
    ];
    assert_in_order(&cuda, &in_order);
    assert_attention_matches(
        &attention_file,
        (1, path),
        &with,
        false,
        "attention output stored by TMA",
    );

    let gemm_cuda = built_cuda(&gemm, ("matmul", 1), path);
    assert!(gemm_cuda.contains("C_local_staged"), "{gemm_cuda}");
    assert!(!gemm_cuda.contains("stored by thread 0"), "{gemm_cuda}");
}
