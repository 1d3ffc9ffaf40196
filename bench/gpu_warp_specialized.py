"""TileLang's hand-written warp-specialized GEMMs (`examples/warp_specialize/`) on the GPU: tilec
and TileLang on the same inputs, both against torch, in one call (BENCHMARKS.md, "Hand-written
warp specialization").

Run on the device from the repository root:

    PYTHONPATH=$PWD/gpu-carry/site python3 bench/gpu_warp_specialized.py gpu-carry/rw/ws gpu-carry/tilec

The folder holds copies of TileLang's example files (git-ignored `gpu-carry/`). tilec reads each as
written, with the inputs from `--input`; TileLang compiles the same eager `@tilelang.jit` function
with the example's own tile sizes. Timings: CUDA events, median of 50 after at least 100 ms of
warm-up, as `tilec run --bench` measures.
"""

import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch

EXAMPLES = [
    ("example_warp_specialize_gemm_copy_0_gemm_1.py", "matmul_warp_specialize_copy_0_gemm_1"),
    ("example_warp_specialize_gemm_copy_1_gemm_0.py", "matmul_warp_specialize_copy_1_gemm_0"),
    ("example_warp_specialize_gemm_softpipe_stage2.py", "matmul"),
    ("example_warp_specialize_gemm_copy_gemm_0_1.py", "matmul_warp_specialize_copy_gemm_0_1"),
    ("example_warp_specialize_gemm_barrierpipe_stage2.py", "matmul"),
]
TILES = dict(block_M=128, block_N=128, block_K=64)


def median_ms(fn):
    fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    warm = 0.0
    runs = 0
    while warm < 100.0 or runs < 5:
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        warm += start.elapsed_time(end)
        runs += 1
    times = []
    for _ in range(50):
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def run_tilec(tilec, path, kernel, size, inputs, folder):
    args = [tilec, "run", path, "--kernel", kernel, "--device", "cuda", "--bench"]
    for name in ("M", "N", "K"):
        args += ["--with", f"{name}={size}"]
    for name, value in TILES.items():
        args += ["--with", f"{name}={value}"]
    for name, tensor in inputs.items():
        file = os.path.join(folder, f"{name}.npy")
        np.save(file, tensor.cpu().numpy())
        args += ["--input", f"{name}={file}"]
    saved = os.path.join(folder, "saved")
    args += ["--save", saved]
    result = subprocess.run(args, capture_output=True, text=True)
    print(result.stdout.strip())
    if result.returncode != 0:
        print(result.stderr.strip()[-3000:])
        return None, None
    match = re.search(r": ([0-9.]+) (ms|µs|s) ", result.stdout)
    scale = {"ms": 1.0, "µs": 1e-3, "s": 1e3}[match.group(2)] if match else None
    time_ms = float(match.group(1)) * scale if match else None
    out = np.load(os.path.join(saved, "out", "C.npy"))
    return torch.from_numpy(out.astype(np.float32)).cuda(), time_ms


def tilelang_function(path, name):
    try:
        import tilelang  # noqa: F401
    except ImportError as error:
        print(f"TileLang not importable: {error}")
        return None
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


def main():
    folder, tilec = sys.argv[1], sys.argv[2]
    rows = []
    for size in (1024, 4096):
        torch.manual_seed(0)
        a = torch.randn(size, size, dtype=torch.float16, device="cuda")
        b = torch.randn(size, size, dtype=torch.float16, device="cuda")
        expected = (a.float() @ b.float())
        torch_ms = median_ms(lambda: a @ b)
        for file, name in EXAMPLES:
            path = os.path.join(folder, file)
            row = dict(file=file, size=size, torch_ms=torch_ms)
            with tempfile.TemporaryDirectory() as scratch:
                out, ms = run_tilec(tilec, path, name, size, dict(A=a, B=b), scratch)
            if out is not None:
                row["tilec_ms"] = ms
                row["tilec_max_rel_err"] = float(((out - expected).abs() / (expected.abs() + 1)).max())
            function = tilelang_function(path, name)
            if function is not None:
                try:
                    result = function(a, b, **TILES)
                    row["tilelang_max_rel_err"] = float(
                        ((result.float() - expected).abs() / (expected.abs() + 1)).max()
                    )
                    row["tilelang_ms"] = median_ms(lambda: function(a, b, **TILES))
                    if out is not None:
                        row["tilec_vs_tilelang_max_diff"] = float((out - result.float()).abs().max())
                        if ms:
                            row["speed_tilec_over_tilelang"] = row["tilelang_ms"] / ms
                except Exception as error:  # TileLang's own failure is a result, not a crash
                    row["tilelang_error"] = str(error)[-500:]
            if ms:
                row["speed_tilec_over_torch"] = torch_ms / ms
            print(json.dumps(row))
            rows.append(row)
    print("SUMMARY " + json.dumps(rows))


if __name__ == "__main__":
    main()
