"""Symbolic sizes on the GPU (issue 30): a kernel compiled with symbolic sizes against the same
kernel compiled for the static size, at a tile-multiple size, and correct at a ragged one.

- GEMM: TileLang's `dynamic_shape/example_dynamic.py` (symbolic m, n, k) against
  `gemm/example_gemm.py` (static M, N, K), both 128×128×32 tiles, 3 stages, 128 threads, fp16, at
  8192³; then the symbolic kernel at 1000³ against torch's float32 product of the same inputs.
- Row softmax: `examples/row_softmax.py` as written (static M and N) against a copy whose row
  count is `T.dynamic("m")`, at 16384×4096; then the symbolic kernel at 1000×4096 against
  `torch.softmax`.

Timings are `tilec run --bench` (CUDA events, median of 50 after ≥ 100 ms of warm-up), the two
forms alternated over three rounds, medians reported. Run on the device from the repository root:

    python3 bench/gpu_symbolic.py gpu-carry/tilec gpu-carry/rw
"""

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROUNDS = 3


def tilec_run(tilec, path, args):
    result = subprocess.run([tilec, "run", path, "--device", "cuda", *args], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{path} {args}: {result.stderr.strip()[-800:]}")
    return result.stdout


def bench_ms(tilec, path, args):
    stdout = tilec_run(tilec, path, [*args, "--bench"])
    match = re.search(r": ([0-9.]+) (ms|µs|s) ", stdout)
    if not match:
        raise RuntimeError(f"no time in: {stdout[-400:]}")
    return float(match.group(1)) * {"ms": 1.0, "µs": 1e-3, "s": 1e3}[match.group(2)]


def with_sizes(sizes):
    return [arg for name, value in sizes.items() for arg in ("--with", f"{name}={value}")]


def compare_speed(tilec, static, symbolic):
    """Median times of the static and the symbolic form, alternated."""
    times = {"static": [], "symbolic": []}
    for _ in range(ROUNDS):
        for form, (path, args) in (("static", static), ("symbolic", symbolic)):
            times[form].append(bench_ms(tilec, path, args))
    row = {form: statistics.median(values) for form, values in times.items()}
    row["symbolic_over_static_time"] = row["symbolic"] / row["static"]
    row["all"] = times
    return row


def ragged(tilec, path, args, inputs, output, reference):
    """Runs the symbolic kernel on `inputs` and compares its `output` with `reference`."""
    with tempfile.TemporaryDirectory() as folder:
        input_args = []
        for name, tensor in inputs.items():
            file = os.path.join(folder, f"{name}.npy")
            np.save(file, tensor.float().cpu().numpy())
            input_args += ["--input", f"{name}={file}"]
        saved = os.path.join(folder, "saved")
        tilec_run(tilec, path, [*args, *input_args, "--save", saved])
        mine = torch.from_numpy(np.load(os.path.join(saved, "out", f"{output}.npy"))).float().cuda()
    expected = reference.float()
    difference = (mine - expected).abs()
    return dict(
        max_abs_error=float(difference.max()),
        relative_error=float((mine - expected).norm() / expected.norm()),
        shape=list(mine.shape),
    )


def symbolic_softmax(folder):
    """`examples/row_softmax.py` with its row count symbolic."""
    text = open("examples/row_softmax.py").read()
    text = text.replace('M, N = T.const("M, N")', 'M = T.dynamic("m")\n    N = T.const("N")')
    path = os.path.join(folder, "row_softmax_symbolic.py")
    with open(path, "w") as file:
        file.write(text)
    return path


def main():
    tilec, rw = sys.argv[1], sys.argv[2]
    rows = {}
    dynamic = os.path.join(rw, "dynamic_shape/example_dynamic.py")
    static_gemm = os.path.join(rw, "gemm/example_gemm.py")
    symbolic_args = ["--kernel", "matmul_dynamic_mnk", "--instance", "0"]
    rows["gemm 8192³"] = compare_speed(
        tilec,
        (static_gemm, ["--kernel", "matmul", *with_sizes(dict(M=8192, N=8192, K=8192))]),
        (dynamic, [*symbolic_args, *with_sizes(dict(m=8192, n=8192, k=8192))]),
    )
    print(json.dumps(rows["gemm 8192³"]), flush=True)
    generator = torch.Generator(device="cuda").manual_seed(40)
    a = torch.randn(1000, 1000, device="cuda", dtype=torch.float16, generator=generator)
    b = torch.randn(1000, 1000, device="cuda", dtype=torch.float16, generator=generator)
    rows["gemm 1000³ (symbolic) against torch"] = ragged(
        tilec,
        dynamic,
        [*symbolic_args, *with_sizes(dict(m=1000, n=1000, k=1000))],
        dict(A=a, B=b),
        "C",
        (a.float() @ b.float()).half(),
    )
    print(json.dumps(rows["gemm 1000³ (symbolic) against torch"]), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        softmax = symbolic_softmax(folder)
        rows["softmax 16384×4096"] = compare_speed(
            tilec,
            ("examples/row_softmax.py", with_sizes(dict(M=16384, N=4096))),
            (softmax, with_sizes(dict(m=16384, N=4096))),
        )
        print(json.dumps(rows["softmax 16384×4096"]), flush=True)
        x = torch.randn(1000, 4096, device="cuda", dtype=torch.float16, generator=generator)
        rows["softmax 1000×4096 (symbolic) against torch"] = ragged(
            tilec,
            softmax,
            with_sizes(dict(m=1000, N=4096)),
            dict(X=x),
            "Y",
            torch.softmax(x.float(), dim=1).half(),
        )
        print(json.dumps(rows["softmax 1000×4096 (symbolic) against torch"]), flush=True)
    print("SUMMARY " + json.dumps(rows))


if __name__ == "__main__":
    main()
