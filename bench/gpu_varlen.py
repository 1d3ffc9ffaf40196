"""TileLang's variable-length FlashAttention on the GPU: tilec and TileLang on the same inputs,
both against torch, in one call (BENCHMARKS.md, "Run-time scalars").

Run on the device from the repository root:

    PYTHONPATH=$PWD/gpu-carry/site python3 bench/gpu_varlen.py \
        gpu-carry/rw/example_mha_fwd_varlen.py gpu-carry/tilec

The kernel file is TileLang's `examples/flash_attention/example_mha_fwd_varlen.py` (copied into the
git-ignored `gpu-carry/` for the call). tilec reads it as written, with the sequence offsets from
`--input`; TileLang compiles the same factory at the configuration tilec uses (its `@autotune`
decorator is left out so that no search runs). Timings: CUDA events, median of 50 after at least
100 ms of warm-up, as `tilec run --bench` measures.
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

CONFIG = dict(block_M=64, block_N=64, num_stages=1, threads=128)


def sequences(batch, low, high, seed):
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high + 1, (batch,), generator=generator)
    offsets = torch.zeros(batch + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(lengths, 0)
    return offsets, int(lengths.max())


def reference(q, k, v, cu_q, cu_k):
    out = torch.empty_like(q, dtype=torch.float32)
    for b in range(len(cu_q) - 1):
        q0, q1, k0, k1 = int(cu_q[b]), int(cu_q[b + 1]), int(cu_k[b]), int(cu_k[b + 1])
        qs = q[q0:q1].float().transpose(0, 1)
        ks = k[k0:k1].float().transpose(0, 1)
        vs = v[k0:k1].float().transpose(0, 1)
        o = torch.nn.functional.scaled_dot_product_attention(qs, ks, vs)
        out[q0:q1] = o.transpose(0, 1)
    return out


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


def run_tilec(tilec, path, shapes, inputs, folder):
    args = [tilec, "run", path, "--kernel", "flashattn", "--device", "cuda", "--bench"]
    for name, value in {**shapes, **CONFIG}.items():
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
        print(result.stderr.strip())
        return None, None
    match = re.search(r": ([0-9.]+) (ms|µs|s) ", result.stdout)
    scale = {"ms": 1.0, "µs": 1e-3, "s": 1e3}[match.group(2)] if match else None
    time_ms = float(match.group(1)) * scale if match else None
    out = np.load(os.path.join(saved, "out", "Output_unpad.npy"))
    return torch.from_numpy(out.astype(np.float32)).cuda(), time_ms


def tilelang_kernel(path, shapes):
    try:
        import tilelang  # noqa: F401
    except ImportError as error:
        print(f"TileLang not importable: {error}")
        return None
    # TileLang reads a kernel's source back from its file, so the copy without the decorator (and
    # without the test helpers it imports) is written to a file of its own.
    text = open(path).read()
    text = re.sub(r"^@autotune\(.*\)\n", "\n", text, flags=re.MULTILINE)
    text = text.replace("from varlen_utils import", "# from varlen_utils import")
    copy = os.path.join(os.path.dirname(path), "varlen_without_autotune.py")
    with open(copy, "w") as file:
        file.write(text)
    spec = importlib.util.spec_from_file_location("varlen_without_autotune", copy)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.flashattn(
        shapes["batch_size"], shapes["UQ"], shapes["UKV"], shapes["heads"], shapes["dim"], False, **CONFIG
    )


def main():
    path, tilec = sys.argv[1], sys.argv[2]
    rows = []
    for batch, heads, dim, low, high in [(8, 16, 128, 512, 2048), (16, 32, 128, 256, 4096)]:
        cu_q, max_q = sequences(batch, low, high, 1)
        cu_k, _ = sequences(batch, low, high, 2)
        uq, ukv = int(cu_q[-1]), int(cu_k[-1])
        torch.manual_seed(0)
        q = torch.randn(uq, heads, dim, dtype=torch.float16, device="cuda")
        k = torch.randn(ukv, heads, dim, dtype=torch.float16, device="cuda")
        v = torch.randn(ukv, heads, dim, dtype=torch.float16, device="cuda")
        expected = reference(q, k, v, cu_q, cu_k)
        shapes = dict(batch_size=batch, UQ=uq, UKV=ukv, heads=heads, dim=dim, max_seqlen_q=max_q)
        inputs = dict(Q_unpad=q, K_unpad=k, V_unpad=v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
        row = dict(batch=batch, heads=heads, dim=dim, UQ=uq, UKV=ukv, max_seqlen_q=max_q)
        with tempfile.TemporaryDirectory() as folder:
            out, ms = run_tilec(tilec, path, shapes, inputs, folder)
        if out is not None:
            row["tilec_ms"] = ms
            row["tilec_max_err"] = float((out - expected).abs().max())
        kernel = tilelang_kernel(path, shapes)
        if kernel is not None:
            cu_q_gpu, cu_k_gpu = cu_q.cuda(), cu_k.cuda()
            result = kernel(q, k, v, cu_q_gpu, cu_k_gpu, max_q)
            row["tilelang_max_err"] = float((result.float() - expected).abs().max())
            row["tilelang_ms"] = median_ms(lambda: kernel(q, k, v, cu_q_gpu, cu_k_gpu, max_q))
            if out is not None:
                row["tilec_vs_tilelang_max_diff"] = float((out - result.float()).abs().max())
                if ms:
                    row["speed_tilec_over_tilelang"] = row["tilelang_ms"] / ms
        print(json.dumps(row))
        rows.append(row)
    print("SUMMARY " + json.dumps(rows))


if __name__ == "__main__":
    main()
