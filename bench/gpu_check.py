"""Runs tilec's SIMT corpus kernels on the GPU, checks each against torch and times both.

Usage (on a GPU machine, from the repository root, with a release `tilec` built):
    python3 bench/gpu_check.py [--tilec target/release/tilec] [--corpus ../shared/corpus] [--out DIR]

For every kernel: `tilec run FILE --device cuda --bench --save DIR` (inputs and outputs as .npy),
then torch computes the reference from the saved inputs, the relative error
||out - ref|| / ||ref|| is checked against 1e-4 (fp32) or 1e-2 (fp16/bf16), and the torch
equivalent is timed with CUDA events (median of 50 after a warm-up of at least 5 calls and 100 ms, as `tilec run --bench`). Prints one Markdown row per
kernel: time, GB/s, torch time, ratio, error.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np
import torch


def run_time_ms(line):
    """The run time a `tilec run` line reports (`...: 1.974 ms (median of 50 launches), ...`), in ms."""
    time = re.search(r": ([0-9.]+) (µs|ms|s) \(", line)
    return float(time.group(1)) * {"µs": 1e-3, "ms": 1.0, "s": 1e3}[time.group(2)]


def median_ms(fn, warmup=5, iterations=50, warmup_seconds=0.1):
    """Median CUDA-event time of `fn` after at least `warmup` calls and `warmup_seconds` of GPU work,
    the same warm-up `tilec run --bench` does: a GPU that idled runs its first milliseconds slower."""
    started = time.perf_counter()
    done = 0
    while done < warmup or time.perf_counter() - started < warmup_seconds:
        fn()
        torch.cuda.synchronize()
        done += 1
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def copy_ceiling_gbs():
    """The device-to-device copy bandwidth, bytes read plus written: what a memory-bound kernel can reach."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), iterations=20)
    del src, dst
    return 2 * (1 << 30) / (ms * 1e-3) / 1e9


def load(dir, name, dtype):
    return torch.from_numpy(np.load(os.path.join(dir, name + ".npy"))).cuda().to(dtype)


def rms(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


# (file, kernel, --with overrides, torch dtype of the data, inputs, output, reference(inputs), torch op(inputs))
CASES = [
    ("elementwise_add.py", "elementwise_add_4096", ["M=4096", "N=4096", "block_M=128", "block_N=256", "threads=256"],
     torch.float16, ["A", "B"], "C", lambda a, b: a + b, lambda a, b: torch.add(a, b)),
    ("elementwise_add.py", "elementwise_add", ["M=16384", "N=16384", "block_M=128", "block_N=256", "threads=256"],
     torch.float16, ["A", "B"], "C", lambda a, b: a + b, lambda a, b: torch.add(a, b)),
    ("softmax.py", "softmax", ["M=16384", "N=4096", "block_M=2", "threads=256"],
     torch.float16, ["X"], "Y", lambda x: torch.softmax(x.float(), -1), lambda x: torch.softmax(x, -1)),
    ("rms_norm_eager.py", "rms_norm", ["M=16384", "N=4096"],
     torch.float32, ["X"], "Y", lambda x: rms(x.double()), lambda x: rms(x)),
    ("layernorm.py", "layernorm", ["M=16384", "N=4096"],
     torch.bfloat16, ["X", "W", "Bias"], "Y",
     lambda x, w, b: torch.nn.functional.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), 1e-5),
     lambda x, w, b: torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5)),
    ("vector_add_eager.py", "vector_add", [], torch.float32, ["A", "B"], "C", lambda a, b: a + b, lambda a, b: a + b),
    ("transpose_shared.py", "transpose", [], torch.float32, ["A"], "B", lambda a: a.t().contiguous(), lambda a: a.t().contiguous()),
    ("row_reduce.py", "row_reduce", [], torch.float32, ["X"], "RowSum", lambda x: x.double().sum(1), lambda x: x.sum(1)),
    ("cumsum.py", "chunk_cumsum", [], torch.float32, ["X"], "Y", lambda x: x.double().cumsum(1), lambda x: x.cumsum(1)),
    ("pointwise_family.py", "relu", [], torch.float32, ["X"], "Y", torch.relu, torch.relu),
    ("scalar_broadcast.py", "scale_by_first", [], torch.float32, ["A"], "B", lambda a: a * a[0, 0], lambda a: a * a[0, 0]),
    ("meta_list_unroll.py", "gather_three", [], torch.float32, ["A"], "B", lambda a: a[0:6:2], lambda a: a[0:6:2]),
    ("layout_sparse_thread_map.py", "plan_then_buffer_layout", [], torch.float32, ["A"], "B", lambda a: a[:, 0], lambda a: a[:, 0].contiguous()),
    ("layout_annotated.py", "annotated", [], torch.float32, ["A"], "B", lambda a: a[:, 0], lambda a: a[:, 0].contiguous()),
    ("layout_serial_inner_read.py", "copy_rows", [], torch.float32, ["A"], "O", lambda a: a, lambda a: a.clone()),
]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tilec", default="target/release/tilec")
    parser.add_argument("--corpus", default="../shared/corpus")
    parser.add_argument("--out", default=os.environ.get("OUT", "/tmp/tilec-gpu"))
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds per kernel")
    parser.add_argument("--only", default=None, help="comma-separated kernel names")
    args = parser.parse_args()
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    print(f"copy ceiling: {copy_ceiling_gbs():.0f} GB/s (device-to-device copy of 1 GiB, bytes read + written)", flush=True)
    print("| kernel | sizes | tilec | tilec GB/s | torch | ratio (torch/tilec time) | rel. error |")
    print("|---|---|---|---|---|---|---|")
    failures = 0
    for file, kernel, overrides, dtype, inputs, output, reference, torch_op in CASES:
        if args.only and kernel not in args.only.split(","):
            continue
        save = os.path.join(args.out, kernel)
        command = [args.tilec, "run", os.path.join(args.corpus, file), "--kernel", kernel.removesuffix("_4096"), "--device", "cuda", "--bench", "--save", save]
        for o in overrides:
            command += ["--with", o]
        try:
            run = subprocess.run(command, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            failures += 1
            print(f"| {kernel} | {' '.join(overrides)} | TIMEOUT after {args.timeout} s |", flush=True)
            continue
        if run.returncode != 0:
            failures += 1
            print(f"| {kernel} | {' '.join(overrides)} | FAILED: {(run.stderr or run.stdout).strip()[:400]} |", flush=True)
            continue
        line = run.stdout.strip().splitlines()[0]
        ms = run_time_ms(line)
        rate = re.search(r"([0-9.]+) (GB|MB)/s", line)
        gbs = f"{float(rate.group(1)) * (1.0 if rate.group(2) == 'GB' else 1e-3):.1f}"
        tensors = [load(os.path.join(save, "in"), name, dtype) for name in inputs]
        out = load(os.path.join(save, "out"), output, torch.float64)
        ref = reference(*tensors).double()
        error = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
        tolerance = 1e-4 if dtype == torch.float32 else 1e-2
        torch_ms = median_ms(lambda: torch_op(*tensors))
        ok = "ok" if error < tolerance else "WRONG"
        failures += ok != "ok"
        print(f"| {kernel} | {' '.join(overrides) or 'corpus'} | {ms:.4f} ms | {gbs} | {torch_ms:.4f} ms | {torch_ms / ms:.2f} | {error:.2e} {ok} |", flush=True)
        shutil.rmtree(save, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
