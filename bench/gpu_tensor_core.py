"""Runs tilec's tensor-core corpus kernels (GEMM, split-K, FlashAttention) on the GPU at their corpus
sizes, checks each against torch and times both in the same process.

Usage (on a GPU machine, from the repository root, with a release `tilec` built):
    python3 bench/gpu_tensor_core.py [--tilec target/release/tilec] [--corpus ../shared/corpus] [--out DIR]
        [--only LABELS] [--target sm_80|sm_90] [--rounds N]

For every instance: `tilec run FILE --kernel K --instance I --device cuda --bench --save DIR`, then
torch computes the reference from the saved inputs (fp32 matmul, SDPA in fp32), the relative error
||out - ref|| / ||ref|| must be below 1e-2, and the torch equivalent (cuBLAS fp16 GEMM, SDPA) is timed
with CUDA events (median of 50 after a warm-up of at least 100 ms). Split-K accumulates into its input, so it is checked
on a single launch and timed in a second run. Prints one Markdown row per instance, then the ptxas
register and spill report of every instance (`tilec build --emit ptx`).
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys

import numpy as np
import torch

from gpu_check import median_ms, run_time_ms


def load(dir, name, dtype=None):
    t = torch.from_numpy(np.load(os.path.join(dir, name + ".npy"))).cuda()
    return t if dtype is None else t.to(dtype)


def sdpa(q, k, v, causal):
    """Attention over BSHD tensors, as the corpus kernel computes it."""
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal)
    return out.transpose(1, 2)


def gemm_case(a_t=False, b_t=False):
    def reference(t):
        a, b = t["A"].float(), t["B"].float()
        return (a.t() if a_t else a) @ (b.t() if b_t else b)
    def torch_op(t):
        a, b = t["A"], t["B"]
        return (a.t() if a_t else a) @ (b.t() if b_t else b)
    return reference, torch_op


def flops_gemm(t):
    m, k = t["A"].shape
    return 2.0 * m * k * t["B"].shape[1 if t["B"].shape[0] == k else 0]


def flops_attention(causal):
    def flops(t):
        b, s, h, d = t["Q"].shape
        total = 4.0 * b * h * s * s * d
        return total / 2 if causal else total
    return flops


# (label, file (in the corpus, or examples/...), kernel, instance, reference(t), output name, torch op(t),
# flops(t), accumulates)
CASES = [
    ("gemm 1024^3 128x128x32", "gemm.py", "matmul", 0, *gemm_case(), "C", flops_gemm, False),
    ("gemm 8192^3 128x256x64 s3 t256", "gemm.py", "matmul", 1, *gemm_case(), "C", flops_gemm, False),
    ("gemm 8192^3 128x256x64 s3 t256 FullRow", "examples/hopper_gemm.py", "hopper_gemm", 0, *gemm_case(), "C",
     flops_gemm, False),
    ("gemm_eager relu 2048x1024x512", "gemm_eager.py", "matmul_relu", 0,
     lambda t: torch.relu(t["A"].float() @ t["B"].float().t()), lambda t: torch.relu(t["A"] @ t["B"].t()),
     "C", flops_gemm, False),
    ("split-K 1024x1024x8192 k4", "gemm_splitk_atomic.py", "matmul_splitk", 0,
     lambda t: t["C"].double() + (t["A"].double() @ t["B"].double()),
     lambda t: t["A"] @ t["B"], "C", flops_gemm, True),
    ("flash attention causal b1 h8 s1024 d64", "flash_attention_fwd.py", "flashattn", 0,
     lambda t: sdpa(t["Q"].float(), t["K"].float(), t["V"].float(), True),
     lambda t: sdpa(t["Q"], t["K"], t["V"], True), "Output", flops_attention(True), False),
    ("flash attention b8 h16 s4096 d128", "flash_attention_fwd.py", "flashattn", 1,
     lambda t: sdpa(t["Q"].float(), t["K"].float(), t["V"].float(), False),
     lambda t: sdpa(t["Q"], t["K"], t["V"], False), "Output", flops_attention(False), False),
]


def source_path(args, file):
    """A corpus file by name, or one of the repository's examples by its path."""
    return file if file.startswith("examples/") else os.path.join(args.corpus, file)


def run_tilec(args, file, kernel, instance, save, bench):
    command = [args.tilec, "run", source_path(args, file), "--kernel", kernel,
               "--instance", str(instance), "--device", "cuda", "--save", save]
    if args.target:
        command += ["--target", args.target]
    if bench:
        command.append("--bench")
    run = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
    if run.returncode != 0:
        raise RuntimeError((run.stderr or run.stdout).strip()[:600])
    return run_time_ms(run.stdout.strip().splitlines()[0])


def report_registers(args):
    """Registers and spills of every case's instances, from the ptxas report that `tilec build
    --emit ptx` keeps in each instance's .json (present where ptxas ran, i.e. on a GPU machine)."""
    target = args.target or "sm_90"
    print(f"\nptxas ({target}, from the .json of tilec build --emit ptx):")
    out = os.path.join(args.out, "ptx")
    for file in sorted({case[1] for case in CASES}):
        # The `tilec run`s above filled the CUDA compute cache, from which NVRTC would take these
        # kernels without ptxas's report; with the cache off ptxas runs and reports.
        build = subprocess.run([args.tilec, "build", source_path(args, file), "--emit", "ptx",
                                "--target", target, "--out", out],
                               capture_output=True, text=True, timeout=args.timeout,
                               env={**os.environ, "CUDA_CACHE_DISABLE": "1"})
        if build.returncode != 0:
            print(f"  {file}: build failed: {(build.stderr or build.stdout).strip()[:300]}")
            continue
        folder = os.path.join(out, os.path.splitext(os.path.basename(file))[0])
        for name in sorted(n for n in os.listdir(folder) if n.endswith(".json")):
            with open(os.path.join(folder, name)) as f:
                record = json.load(f)
            for launch in record.get("launches", []):
                ptxas = " ".join((launch.get("ptxas") or "").split())
                spills = re.findall(r"\d+ bytes spill stores, \d+ bytes spill loads", ptxas)
                print(f"  {file} {record['kernel']}#{record['instance']}: "
                      f"{launch.get('registers')} registers, {spills[0] if spills else 'spills: not reported'}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tilec", default="target/release/tilec")
    parser.add_argument("--corpus", default="../shared/corpus")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/tilec-gpu"))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per run")
    parser.add_argument("--only", default=None, help="comma-separated substrings of case labels")
    parser.add_argument("--target", default=None,
                        help="code path: sm_80 (mma.sync, cp.async) or sm_90 (default: the GPU's)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time tilec and torch this many times, alternating; a row then gives "
                             "the median times and the median (min-max) of the per-round ratios")
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print("| instance | tilec | TFLOP/s | torch | torch TFLOP/s | ratio (torch/tilec time) | rel. error |")
    print("|---|---|---|---|---|---|---|")
    failures = 0
    for label, file, kernel, instance, reference, torch_op, output, flops, accumulates in CASES:
        if args.only and not any(part in label for part in args.only.split(",")):
            continue
        save = os.path.join(args.out, f"{kernel}-{instance}")
        try:
            ms = run_tilec(args, file, kernel, instance, save, bench=not accumulates)
            t = {name.removesuffix(".npy"): load(os.path.join(save, "in"), name.removesuffix(".npy"))
                 for name in os.listdir(os.path.join(save, "in"))}
            out = load(os.path.join(save, "out"), output, torch.float64)
            ref = reference(t).double()
            error = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
            if accumulates:
                ms = run_tilec(args, file, kernel, instance, save + "-bench", bench=True)
        except (RuntimeError, subprocess.TimeoutExpired) as failure:
            failures += 1
            print(f"| {label} | FAILED: {failure} |", flush=True)
            continue
        times = [(ms, median_ms(lambda: torch_op(t)))]
        try:
            for _ in range(args.rounds - 1):
                again = run_tilec(args, file, kernel, instance, save + "-bench", bench=True)
                times.append((again, median_ms(lambda: torch_op(t))))
        except (RuntimeError, subprocess.TimeoutExpired) as failure:
            failures += 1
            print(f"| {label} | FAILED in a later round: {failure} |", flush=True)
            continue
        ms = statistics.median(tilec for tilec, _ in times)
        torch_ms = statistics.median(torch for _, torch in times)
        ratios = sorted(torch / tilec for tilec, torch in times)
        ratio = f"{statistics.median(ratios):.2f}"
        if len(ratios) > 1:
            ratio += f" ({ratios[0]:.2f}-{ratios[-1]:.2f}, {len(ratios)} rounds)"
        work = flops(t)
        ok = "ok" if error < 1e-2 else "WRONG"
        failures += ok != "ok"
        print(f"| {label} | {ms:.4f} ms | {work / ms / 1e9:.1f} | {torch_ms:.4f} ms | "
              f"{work / torch_ms / 1e9:.1f} | {ratio} | {error:.2e} {ok} |", flush=True)
        shutil.rmtree(save, ignore_errors=True)
        shutil.rmtree(save + "-bench", ignore_errors=True)
        del t
        torch.cuda.empty_cache()
    report_registers(args)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
