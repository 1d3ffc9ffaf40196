//! `tilec tune`: the hardware model's ranking of the corpus gemm (a conformance test) and of the softmax
//! fixture of `tests/fixtures/kernels/` (`--recommend`, exact tables), the refusal to measure without a GPU,
//! `--gpus` lists refused before anything runs, measuring on one GPU and on two (skipped where the
//! host has fewer), and a tuned configuration from the tuning cache reaching `tilec build`.

use std::path::Path;
use std::process::{Command, Output};

use expect_test::expect;
use tilec_ir::ConstValue;
use tilec_runtime::tuned::{TunedInstance, TunedRecord, TunedStore};

use crate::common::{corpus_file, fixture};

fn tilec(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tilec"))
        .args(args)
        .output()
        .expect("runs tilec")
}

/// Stdout without the line that reports how long the analysis took.
fn stable_stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "tilec failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .map(|line| match line.split_once(" configurations in ") {
            Some((head, tail)) => {
                let rest = tail.split_once(": ").map_or("", |(_, rest)| rest);
                format!("{head} configurations: {rest}")
            }
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn recommend_ranks_the_large_gemm_by_the_h200_model() {
    let Some(file) = corpus_file("gemm.py") else {
        return;
    };
    let path = file.to_string_lossy();
    let output = tilec(&[
        "tune",
        &path,
        "--instance",
        "1",
        "--recommend",
        "--top",
        "4",
    ]);
    expect![[r#"
        matmul instance 1 (M=8192, N=8192, K=8192, dtype="float16", accum_dtype="float32") on the H200 model
        tunable: block_M (tile size, now 128), block_N (tile size, now 256), block_K (tile size, now 64), num_stages (pipeline stages, now 3), threads (threads, now 256)
        analysed 132 configurations: 62 ranked, 70 rejected by tilec's analyses

        #  block_M  block_N  block_K  num_stages  threads  estimate  bound         tensor    shared    L2        DRAM     latency  per SM                                     waves
        1  128      256      64       3           256      2.035 ms  tensor cores  1.970 ms  1.412 ms  929.9 µs  94.7 µs  0.0 µs   1 blk (shared memory), 8 warps, ~184 regs  16 (97%)
        2  128      256      64       4           256      2.035 ms  tensor cores  1.970 ms  1.412 ms  929.9 µs  94.7 µs  0.0 µs   1 blk (shared memory), 8 warps, ~184 regs  16 (97%)
        3  128      256      64       2           256      2.035 ms  tensor cores  1.970 ms  1.412 ms  929.9 µs  94.7 µs  0.0 µs   1 blk (registers), 8 warps, ~184 regs      16 (97%)
        4  128      256      32       3           256      2.035 ms  tensor cores  1.970 ms  1.412 ms  929.9 µs  94.7 µs  0.0 µs   1 blk (registers), 8 warps, ~184 regs      16 (97%)
        (estimates within 1% are ties, ordered by how little they change the current values)

        now: block_M=128 block_N=256 block_K=64 num_stages=3 threads=256 at 2.035 ms; recommended: block_M=128 block_N=256 block_K=64 num_stages=3 threads=256 at 2.035 ms (1.00x by the model)

        rejected (first 5 of 70):
          block_M=64 block_N=256 block_K=32 num_stages=3 threads=64: register-pressure: the fragments live here need an estimated 256 registers per thread, more than the 255 a thread can have: the compiler will spill to slow local memory (`C_local`, 64×256 float32 over 64 threads, alone takes 256)
          block_M=64 block_N=256 block_K=64 num_stages=3 threads=64: register-pressure: the fragments live here need an estimated 256 registers per thread, more than the 255 a thread can have: the compiler will spill to slow local memory (`C_local`, 64×256 float32 over 64 threads, alone takes 256)
          block_M=64 block_N=256 block_K=128 num_stages=3 threads=64: shared-memory-capacity: this kernel needs at least 240 KiB of shared memory: 2 buffer(s) are live at the same time, and one block can use at most 227 KiB on sm_90 (`A_shared` alone is 48 KiB)
          block_M=64 block_N=256 block_K=128 num_stages=3 threads=128: shared-memory-capacity: this kernel needs at least 240 KiB of shared memory: 2 buffer(s) are live at the same time, and one block can use at most 227 KiB on sm_90 (`A_shared` alone is 48 KiB)
          block_M=64 block_N=256 block_K=128 num_stages=3 threads=256: shared-memory-capacity: this kernel needs at least 240 KiB of shared memory: 2 buffer(s) are live at the same time, and one block can use at most 227 KiB on sm_90 (`A_shared` alone is 48 KiB)"#]]
    .assert_eq(&stable_stdout(&output));
}

#[test]
fn recommend_finds_the_memory_bound_softmax_on_both_models() {
    let file = fixture("kernels/softmax.py");
    let path = file.to_string_lossy();
    let h200 = stable_stdout(&tilec(&["tune", &path, "--recommend", "--top", "3"]));
    expect![[r#"
        softmax instance 0 (M=16384, N=4096, dtype="float16", accum_dtype="float32") on the H200 model
        tunable: block_M (tile size, now 2), threads (threads, now 256)
        analysed 16 configurations: 13 ranked, 3 rejected by tilec's analyses

        #        block_M  threads  estimate  bound          tensor  shared  L2       DRAM     latency  per SM                                  waves
        1        1        128      69.7 µs   device memory  0.0 µs  0.0 µs  19.2 µs  63.1 µs  1.6 µs   8 blk (registers), 32 warps, ~57 regs   16 (97%)
        2        1        64       70.2 µs   device memory  0.0 µs  0.0 µs  19.2 µs  63.1 µs  1.0 µs   10 blk (registers), 20 warps, ~89 regs  13 (95%)
        3        1        256      70.6 µs   device memory  0.0 µs  0.0 µs  19.2 µs  63.1 µs  4.0 µs   5 blk (registers), 40 warps, ~41 regs   25 (99%)
        5 (now)  2        256      71.3 µs   device memory  0.0 µs  0.0 µs  19.2 µs  63.1 µs  3.2 µs   4 blk (registers), 32 warps, ~58 regs   16 (97%)
        (estimates within 1% are ties, ordered by how little they change the current values)

        now: block_M=2 threads=256 at 71.3 µs; recommended: block_M=1 threads=128 at 69.7 µs (1.02x by the model)

        rejected (first 5 of 3):
          block_M=4 threads=64: register-pressure: the fragments live here need an estimated 260 registers per thread, more than the 255 a thread can have: the compiler will spill to slow local memory (`x`, 4×4096 float32 over 64 threads, alone takes 256)
          block_M=8 threads=64: register-pressure: the fragments live here need an estimated 520 registers per thread, more than the 255 a thread can have: the compiler will spill to slow local memory (`x`, 8×4096 float32 over 64 threads, alone takes 512)
          block_M=8 threads=128: register-pressure: the fragments live here need an estimated 264 registers per thread, more than the 255 a thread can have: the compiler will spill to slow local memory (`x`, 8×4096 float32 over 128 threads, alone takes 256)"#]]
    .assert_eq(&h200);
    let a100 = stable_stdout(&tilec(&[
        "tune",
        &path,
        "--recommend",
        "--top",
        "1",
        "--gpu",
        "a100",
    ]));
    let first_row = a100
        .lines()
        .find(|line| line.starts_with("1 "))
        .unwrap_or_default();
    assert!(a100.contains("on the A100-SXM4 model"), "{a100}");
    assert!(first_row.contains("device memory"), "{first_row}");
}

#[test]
fn measuring_needs_a_gpu_and_says_what_works_without_one() {
    let file = fixture("kernels/softmax.py");
    if tilec_runtime::CudaDevice::open().is_ok() {
        eprintln!("skipped: this machine has a GPU, so `tilec tune` would measure");
        return;
    }
    let output = tilec(&["tune", &file.to_string_lossy()]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no GPU to measure on") && stderr.contains("tilec tune --recommend"),
        "{stderr}"
    );
}

#[test]
fn naming_a_gpu_without_one_is_the_same_refusal() {
    let file = fixture("kernels/softmax.py");
    if tilec_runtime::CudaDevice::count().is_ok() {
        eprintln!("skipped: this machine has a GPU, so `tilec tune --gpus 0` would measure");
        return;
    }
    let output = tilec(&["tune", &file.to_string_lossy(), "--gpus", "0"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no GPU to measure on") && stderr.contains("tilec tune --recommend"),
        "{stderr}"
    );
}

#[test]
fn malformed_gpu_lists_are_refused_before_anything_runs() {
    let file = fixture("kernels/softmax.py");
    let path = file.to_string_lossy();
    let cases = [
        ("0,0", "GPU 0 is named twice"),
        ("", "an empty GPU number"),
        ("0,,1", "an empty GPU number"),
        ("one", "`one` is not a GPU number"),
    ];
    for (list, expected) in cases {
        let output = tilec(&["tune", &path, "--gpus", list]);
        assert_eq!(output.status.code(), Some(2), "--gpus {list:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "--gpus {list:?}: {stderr}");
    }
    let output = tilec(&["tune", &path, "--recommend", "--gpus", "0"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn a_gpu_the_host_lacks_is_refused_with_the_list_of_its_gpus() {
    let Ok(count) = tilec_runtime::CudaDevice::count() else {
        eprintln!("skipped: no GPU here, so there is no list of GPUs to check against");
        return;
    };
    let file = fixture("kernels/softmax.py");
    let missing = count.to_string();
    let output = tilec(&["tune", &file.to_string_lossy(), "--gpus", &missing]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!("no GPU {count}: this host has {count} (0: ")),
        "{stderr}"
    );
}

/// Measures the softmax fixture's top 3 on the GPUs `gpus` names, storing into a fresh cache;
/// returns stdout.
fn measure_softmax(gpus: &str) -> String {
    let file = fixture("kernels/softmax.py");
    let cache = tempfile::tempdir().expect("temp folder");
    let output = tilec(&[
        "tune",
        &file.to_string_lossy(),
        "--top",
        "3",
        "--gpus",
        gpus,
        "--cache",
        &cache.path().to_string_lossy(),
    ]);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("stored in "), "{stdout}");
    stdout
}

#[test]
fn measuring_on_one_gpu_names_it_and_compares_with_the_current_configuration() {
    if let Err(why) = tilec_runtime::CudaDevice::count() {
        eprintln!("skipped: no GPU to measure on ({why})");
        return;
    }
    let stdout = measure_softmax("0");
    assert!(
        stdout.contains("block_M=2 threads=256: ")
            && stdout.contains(" on GPU 0 (correct; the current configuration, the baseline)"),
        "{stdout}"
    );
    assert!(stdout.contains("candidates on 1 GPU (0) in "), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|line| line.starts_with("winner: ") && line.contains(" on GPU 0")),
        "{stdout}"
    );
}

#[test]
fn measuring_on_two_gpus_spreads_the_candidates_and_names_each_gpu() {
    match tilec_runtime::CudaDevice::count() {
        Ok(count) if count >= 2 => {}
        Ok(count) => {
            eprintln!("skipped: this host has {count} GPU, and the test needs two");
            return;
        }
        Err(why) => {
            eprintln!("skipped: no GPU to measure on ({why})");
            return;
        }
    }
    let stdout = measure_softmax("0,1");
    for gpu in ["0", "1"] {
        assert!(
            stdout.contains(&format!(
                " on GPU {gpu} (correct; the current configuration, the baseline there)"
            )),
            "GPU {gpu} measures the baseline: {stdout}"
        );
    }
    assert!(
        stdout.contains("candidates on 2 GPUs (0, 1) in "),
        "{stdout}"
    );
    assert!(
        stdout.contains("(NVRTC, once; loaded on 2 GPUs)"),
        "{stdout}"
    );
}

#[test]
fn an_unknown_hardware_model_is_an_error_that_lists_the_known_ones() {
    let file = fixture("kernels/softmax.py");
    let output = tilec(&[
        "tune",
        &file.to_string_lossy(),
        "--recommend",
        "--gpu",
        "v100",
    ]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no hardware model named `v100` (known: H200, H100-SXM, A100-SXM4)"),
        "{stderr}"
    );
}

#[test]
fn a_tuned_configuration_in_the_cache_is_what_build_compiles() {
    let source = fixture("kernels/softmax.py");
    let folder = tempfile::tempdir().expect("temp folder");
    let file = folder.path().join("softmax.py");
    std::fs::copy(&source, &file).expect("copies the kernel");
    let cache = folder.path().join("cache");
    let args = [
        ("M".to_owned(), ConstValue::Int(16384)),
        ("N".to_owned(), ConstValue::Int(4096)),
        ("block_M".to_owned(), ConstValue::Int(2)),
    ];
    let winner = vec![("block_M".to_owned(), 1), ("threads".to_owned(), 128)];
    TunedStore::new(&cache)
        .put(
            &TunedInstance {
                file: &file,
                kernel: "softmax",
                args: &args,
            },
            &TunedRecord {
                device: "NVIDIA H200".to_owned(),
                arch: "sm_90".to_owned(),
                winner: winner.clone(),
                median_ms: 0.0737,
                measured: vec![(winner, 0.0737)],
            },
        )
        .expect("stores the record");
    let out = folder.path().join("out");
    let output = tilec(&[
        "build",
        &file.to_string_lossy(),
        "--emit",
        "cuda",
        "--out",
        &out.to_string_lossy(),
        "--cache",
        &cache.to_string_lossy(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("measured fastest on NVIDIA H200: block_M=1 threads=128"),
        "{stderr}"
    );
    let description = std::fs::read_to_string(out.join("softmax-0.json"))
        .or_else(|_| std::fs::read_to_string(out.join("softmax/softmax-0.json")))
        .expect("the build wrote the instance's JSON");
    let json: serde_json::Value = serde_json::from_str(&description).expect("JSON");
    assert_eq!(json["args"]["block_M"], 1);
    assert_eq!(json["args"]["threads"], 128);
    assert_eq!(json["launches"][0]["block"][0], 128);
    assert_eq!(json["launches"][0]["grid"][0], 16384);
}

#[test]
fn an_autotune_decorator_gives_the_candidates() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/autotuned_gemm.py");
    let output = tilec(&["tune", &file.to_string_lossy(), "--recommend", "--top", "2"]);
    let text = stable_stdout(&output);
    let head: Vec<&str> = text.lines().take(7).collect();
    expect![[r#"
        matmul instance 0 (M=4096, N=4096, K=4096, threads=256) on the H200 model
        tunable: block_M (tile size, now 128), block_N (tile size, now 128), block_K (tile size, now 32), num_stages (pipeline stages, now 3)
        candidates: the 16 configurations of the kernel's @autotune decorator
        analysed 16 configurations: 16 ranked, 0 rejected by tilec's analyses

        #        block_M  block_N  block_K  num_stages  estimate  bound          tensor    shared    L2        DRAM     latency  per SM                                     waves
        1        128      256      32       3           257.0 µs  tensor cores   246.3 µs  176.5 µs  117.4 µs  23.7 µs  0.0 µs   1 blk (registers), 8 warps, ~184 regs      4 (97%)"#]]
    .assert_eq(&head.join("\n"));
}
