"""tilec against TileLang 0.1.15 on TileLang's own example kernels, on the same inputs in one device
call (issue 32): outputs compared (bit-identical, or the relative error of the whole tensor) and
times of tilec, TileLang and torch where torch has the operation (CUDA events, median of 50 after
at least 100 ms of warm-up, as `tilec run --bench` measures: `gpu_check.median_ms`).

Run on the device from the repository root, with copies of the example files in FOLDER
(git-ignored `gpu-carry/`), a stripped tilec, and TileLang installed from wheels
(`../shared/reference/tilelang-on-device.md`):

    PYTHONPATH=$PWD/gpu-carry/site python3 bench/vs_tilelang.py FOLDER gpu-carry/tilec [FILE:KERNEL,...]

tilec reads each file as written, with the sizes of the case (`--with`) and the inputs saved here
(`--input`); TileLang runs the file's own `@tilelang.jit` function on the same tensors. One JSON
line per case, then a Markdown table for BENCHMARKS.md.
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

# The same warm-up and median `tilec run --bench` uses (the script's own folder is on sys.path).
from gpu_check import median_ms


def fp8(shape, seed):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    values = torch.randn(*shape, device="cuda", dtype=torch.float16, generator=generator)
    return values.to(torch.float8_e4m3fn)


def randn(shape, seed, dtype):
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", dtype=dtype, generator=generator)


def scaled_mm(inputs):
    """torch's fp8 gemm (cuBLASLt), C = A · Bᵀ in bfloat16, unit scales."""
    one = torch.ones((), device="cuda", dtype=torch.float32)
    return torch._scaled_mm(
        inputs["A"], inputs["B"].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16
    )


def per_token_reference(module):
    return lambda inputs: module.ref_program(inputs["X"])


E2M1_VALUES = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0]


def unpack_fp4(packed):
    """float4_e2m1fn values packed two a byte (torch's float4_e2m1fn_x2, the even element in the low
    nibble) as a float32 tensor of twice the last extent, as tilec saves them."""
    codes = packed.view(torch.uint8)
    low, high = codes & 15, codes >> 4
    pairs = torch.stack([low, high], dim=-1).reshape(*codes.shape[:-1], codes.shape[-1] * 2)
    table = torch.tensor(E2M1_VALUES, device=codes.device, dtype=torch.float32)
    return table[pairs.long()]


# Each case: the example file, its kernel, the sizes tilec is given, the inputs (by parameter
# name), how TileLang's function is called on them, the outputs compared (tilec's parameter names,
# in the order TileLang returns them), and torch's version of the operation where it has one.
CASES = [
    dict(
        family="gemm",
        file="example_tilelang_gemm_fp8.py",
        kernel="matmul",
        sizes=dict(M=4096, N=4096, K=4096),
        inputs=lambda: dict(A=fp8((4096, 4096), 1), B=fp8((4096, 4096), 2)),
        tilelang=lambda fn, inputs, T: fn(inputs["A"], inputs["B"], 128, 128, 64, T.float8_e4m3fn),
        outputs=["C"],
        torch=lambda module: scaled_mm,
    ),
    dict(
        family="quantize",
        file="example_per_token_cast_to_fp8.py",
        kernel="per_token_cast_to_fp8",
        sizes=dict(M=8192, N=8192),
        inputs=lambda: dict(X=randn((8192, 8192), 3, torch.float32)),
        tilelang=lambda fn, inputs, T: fn(inputs["X"], 8),
        outputs=["X_fp8", "X_amax"],
        torch=per_token_reference,
    ),
    dict(
        family="softmax",
        file="online_softmax.py",
        kernel="softmax_kernel",
        sizes=dict(),
        inputs=lambda: dict(X=randn((8192, 8192), 4, torch.float16)),
        tilelang=lambda fn, inputs, T: fn(inputs["X"]),
        outputs=["Y"],
        torch=lambda module: lambda inputs: inputs["X"].softmax(dim=1),
    ),
    dict(
        family="gemm",
        file="example_gemm.py",
        kernel="matmul",
        # The file's own configuration (128×128×32 tiles, 128 threads, 3 stages) at 8192³.
        sizes=dict(M=8192, N=8192, K=8192),
        inputs=lambda: dict(A=randn((8192, 8192), 7, torch.float16), B=randn((8192, 8192), 8, torch.float16)),
        tilelang=lambda fn, inputs, T: fn(inputs["A"], inputs["B"], 128, 128, 32),
        outputs=["C"],
        torch=lambda module: lambda inputs: inputs["A"] @ inputs["B"],
    ),
    dict(
        family="quantize",
        file="act_quant.py",
        kernel="fp8_quant_kernel",
        sizes=dict(M=8192, N=7168),
        inputs=lambda: dict(x=randn((8192, 7168), 5, torch.bfloat16)),
        # The instance tilec analyses is the file's call (`fp8_act_quant`: round_scale=False).
        tilelang=lambda fn, inputs, T: fn(inputs["x"], 128, False),
        outputs=["quant", "scale"],
        torch=lambda module: lambda inputs: module.fp8_act_quant_ref(inputs["x"], 128, False),
    ),
    dict(
        family="quantize",
        file="act_quant.py",
        kernel="fp4_quant_kernel",
        sizes=dict(M=8192, N=7168),
        inputs=lambda: dict(x=randn((8192, 7168), 6, torch.bfloat16)),
        tilelang=lambda fn, inputs, T: fn(inputs["x"]),
        # TileLang returns the fp4 tensor packed (float4_e2m1fn_x2); tilec saves it unpacked.
        convert=lambda outputs: [unpack_fp4(outputs[0]), outputs[1]],
        outputs=["quant", "scale"],
        torch=lambda module: lambda inputs: module.fp4_act_quant_ref(inputs["x"], 32),
    ),
]


# Kernels TileLang compiles once per configuration: the timed call must launch, not look up.
COMPILED = {}


def compiled(key, build):
    if key not in COMPILED:
        COMPILED[key] = build()
    return COMPILED[key]


def attention_reference(inputs):
    import torch.nn.functional as F

    return F.scaled_dot_product_attention(inputs["Q"], inputs["K"], inputs["V"])


ATTENTION = dict(batch=8, heads=32, seq_q=4096, seq_kv=4096, dim=64)
ATTENTION_SHAPE = (ATTENTION["batch"], ATTENTION["heads"], ATTENTION["seq_q"], ATTENTION["dim"])
# The configuration of the file's autotuner and regression benchmark.
ATTENTION_CONFIG = dict(block_M=128, block_N=128, num_stages=2, threads=256)
# The configuration the file's `main` checks and times without tuning: one stage, one warpgroup.
ATTENTION_MAIN_CONFIG = dict(block_M=64, block_N=64, num_stages=1, threads=128)
CONVOLUTION = dict(N=32, C=128, H=64, W=64, F=128, K=3, S=1, D=1, P=1)
CONVOLUTION_CONFIG = dict(block_M=64, block_N=128, block_K=32, num_stages=3, threads=256)
ELEMENTWISE_CONFIG = dict(block_M=32, block_N=32, threads=128)


def attention_case(config, key):
    """`example_mha_fwd_bhsd.py`'s `flashattn` at `config` (its tile sizes, stages and threads)."""
    return dict(
        family="attention",
        file="example_mha_fwd_bhsd.py",
        kernel="flashattn",
        sizes=dict(ATTENTION, is_causal="false", **config),
        inputs=lambda: {name: randn(ATTENTION_SHAPE, seed, torch.float16) for name, seed in (("Q", 11), ("K", 12), ("V", 13))},
        tilelang=lambda fn, inputs, T: compiled(
            key,
            lambda: fn(*ATTENTION.values(), False, **config),
        )(inputs["Q"], inputs["K"], inputs["V"]),
        outputs=["Output"],
        torch=lambda module: attention_reference,
    )


CASES += [
    attention_case(ATTENTION_CONFIG, "attention"),
    attention_case(ATTENTION_MAIN_CONFIG, "attention, one stage"),
    dict(
        family="norm",
        file="rms_norm.py",
        kernel="rms_norm",
        sizes=dict(M=16384, N=4096, blk_m=1),
        inputs=lambda: dict(A=randn((16384, 4096), 14, torch.float32)),
        tilelang=lambda fn, inputs, T: fn(inputs["A"], 1),
        outputs=["B"],
        torch=lambda module: lambda inputs: module.ref_program(inputs["A"]),
    ),
    dict(
        family="elementwise",
        file="example_elementwise_add.py",
        kernel="elementwise_add",
        sizes=dict(M=8192, N=8192, in_dtype='"float32"', out_dtype='"float32"', **ELEMENTWISE_CONFIG),
        inputs=lambda: dict(A=randn((8192, 8192), 15, torch.float32), B=randn((8192, 8192), 16, torch.float32)),
        tilelang=lambda fn, inputs, T: fn(
            inputs["A"], inputs["B"], in_dtype=T.float32, out_dtype=T.float32, **ELEMENTWISE_CONFIG
        ),
        outputs=["C"],
        torch=lambda module: lambda inputs: inputs["A"] + inputs["B"],
    ),
    dict(
        family="convolution",
        file="example_convolution.py",
        kernel="convolution",
        sizes=dict(CONVOLUTION, **CONVOLUTION_CONFIG),
        inputs=lambda: dict(
            data=randn((32, 64, 64, 128), 17, torch.float16), kernel=randn((3, 3, 128, 128), 18, torch.float16)
        ),
        tilelang=lambda fn, inputs, T: fn(inputs["data"], inputs["kernel"], 1, 1, 1, **CONVOLUTION_CONFIG),
        outputs=["out"],
        torch=lambda module: lambda inputs: module.ref_program(1, 1, 1)(inputs["data"], inputs["kernel"]),
    ),
]


MLA = dict(batch=16, heads=128, kv_head_num=1, seqlen_kv=8192, dim=512, pe_dim=64)
# The configuration of the file's own `main`: 64-key blocks, 64 heads a block, no split.
MLA_CONFIG = dict(block_N=64, block_H=64, num_split=1, softmax_scale=(512 + 64) ** -0.5)


# The paged decode of `deepseek_mla/example_mla_decode_paged.py` as its `main` runs it (64-token
# pages, 64-key blocks, 64 heads a block, no split, each sequence 2 tokens longer than the one
# before), with the pages of the cache in a shuffled order rather than its `main`'s identity table.
PAGED_BATCH, PAGE = 16, 64
PAGED_LENGTHS = [8192 + 2 * i for i in range(PAGED_BATCH)]
PAGED_PAD = -(-max(PAGED_LENGTHS) // 256) * 256
PAGED = dict(batch=PAGED_BATCH, h_q=128, h_kv=1, max_seqlen_pad=PAGED_PAD, dv=512, dpe=64)
PAGED_CONFIG = dict(block_N=64, block_H=64, num_split=1, block_size=PAGE, softmax_scale=576**-0.5)


def paged_inputs():
    b, h, pad = PAGED_BATCH, PAGED["h_q"], PAGED_PAD
    generator = torch.Generator().manual_seed(25)
    pages = torch.randperm(b * pad // PAGE, generator=generator).to(torch.int32).view(b, pad // PAGE)
    return dict(
        Q=randn((b, h, 512), 26, torch.float16),
        Q_pe=randn((b, h, 64), 27, torch.float16),
        KV=randn((b * pad, 1, 512), 28, torch.float16),
        K_pe=randn((b * pad, 1, 64), 29, torch.float16),
        block_table=pages.cuda(),
        cache_seqlens=torch.tensor(PAGED_LENGTHS, dtype=torch.int32, device="cuda"),
        glse=torch.zeros((b, h, 1), dtype=torch.float16, device="cuda"),
        Output_partial=torch.zeros((b, h, 1, 512), dtype=torch.float16, device="cuda"),
    )


def layer_norm_reference(inputs):
    import torch.nn.functional as F

    x = inputs["X"]
    return F.layer_norm(x, (x.shape[-1],), inputs["gamma"], inputs["beta"], 1e-5)


CASES += [
    dict(
        family="decode",
        file="example_mla_decode.py",
        kernel="flashattn",
        sizes=dict(MLA, **MLA_CONFIG),
        inputs=lambda: dict(
            Q=randn((16, 128, 512), 21, torch.float16),
            Q_pe=randn((16, 128, 64), 22, torch.float16),
            KV=randn((16, 8192, 1, 512), 23, torch.float16),
            K_pe=randn((16, 8192, 1, 64), 24, torch.float16),
        ),
        tilelang=lambda fn, inputs, T: compiled(
            "mla", lambda: fn(*MLA.values(), *MLA_CONFIG.values())
        )(inputs["Q"], inputs["Q_pe"], inputs["KV"], inputs["K_pe"]),
        outputs=["Output"],
        torch=lambda module: lambda inputs: module.ref_program(
            inputs["Q"], inputs["Q_pe"], inputs["KV"], inputs["K_pe"]
        ),
    ),
    dict(
        family="decode",
        file="example_mla_decode_paged.py",
        kernel="mla_decode_tilelang",
        sizes=dict(PAGED, **PAGED_CONFIG),
        inputs=paged_inputs,
        tilelang=lambda fn, inputs, T: compiled(
            "mla paged", lambda: fn(*PAGED.values(), *PAGED_CONFIG.values())
        )(*inputs.values()),
        outputs=["Output"],
        torch=None,
    ),
    dict(
        family="norm",
        file="layernorm.py",
        kernel="_layernorm_fwd",
        sizes=dict(N=16384, D=4096),
        inputs=lambda: dict(
            X=randn((16384, 4096), 25, torch.bfloat16),
            gamma=randn((4096,), 26, torch.bfloat16),
            beta=randn((4096,), 27, torch.bfloat16),
        ),
        tilelang=lambda fn, inputs, T: compiled("layernorm", lambda: fn(16384, 4096))(
            inputs["X"], inputs["gamma"], inputs["beta"]
        ),
        outputs=["Y", "Mean", "Rstd"],
        torch=lambda module: layer_norm_reference,
        # Which side is nearer the exact result where the two differ: float64 layer norm.
        exact=lambda inputs: [
            torch.nn.functional.layer_norm(
                inputs["X"].double(), (4096,), inputs["gamma"].double(), inputs["beta"].double(), 1e-5
            )
        ],
    ),
]


SCAN = dict(batch=4, seqlen=4096, chunk_size=256, ngroups=1, nheads=16, headdim=64, dstate=128)
# The configuration of the file's own `main`.
SCAN_CONFIG = dict(block_M=64, block_N=64, block_K=64, block_Dstate=128, num_stages=2, threads=128)


def scan_inputs():
    b, l, c, g, h, p, n = SCAN.values()
    chunks = l // c
    shapes = dict(
        cb=(b, chunks, g, c, c),
        x=(b, l, h, p),
        dt=(b, h, chunks, c),
        dA_cumsum=(b, h, chunks, c),
        C=(b, l, g, n),
        prev_states=(b, chunks, h, p, n),
        D=(h,),
    )
    return {name: randn(shape, 30 + k, torch.float16) for k, (name, shape) in enumerate(shapes.items())}


CASES += [
    dict(
        family="linear attention",
        file="example_mamba_chunk_scan.py",
        kernel="chunk_scan_fwd",
        sizes=dict(SCAN, **SCAN_CONFIG),
        inputs=scan_inputs,
        tilelang=lambda fn, inputs, T: compiled("scan", lambda: fn.compile(**SCAN, **SCAN_CONFIG))(
            *inputs.values()
        ),
        outputs=["Output"],
        torch=lambda module: lambda inputs: module.ref_program(*inputs.values()),
    ),
]


def load_module(path):
    spec = importlib.util.spec_from_file_location(os.path.basename(path)[:-3], path)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))
    spec.loader.exec_module(module)
    return module


def run_tilec(tilec, path, case, inputs, folder):
    args = [tilec, "run", path, "--kernel", case["kernel"], "--device", "cuda", "--bench"]
    for name, value in case["sizes"].items():
        args += ["--with", f"{name}={value}"]
    for name, tensor in inputs.items():
        file = os.path.join(folder, f"{name}.npy")
        np.save(file, tensor.float().cpu().numpy())
        args += ["--input", f"{name}={file}"]
    saved = os.path.join(folder, "saved")
    args += ["--save", saved]
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        return None, None, result.stderr.strip()[-1500:]
    match = re.search(r": ([0-9.]+) (ms|µs|s) ", result.stdout)
    time_ms = None
    if match:
        time_ms = float(match.group(1)) * {"ms": 1.0, "µs": 1e-3, "s": 1e3}[match.group(2)]
    outputs = [
        torch.from_numpy(np.load(os.path.join(saved, "out", f"{name}.npy")).astype(np.float32)).cuda()
        for name in case["outputs"]
    ]
    return outputs, time_ms, None


def compare(ours, theirs):
    """Bit-identical, or the relative error of the whole tensor and the largest difference."""
    theirs = theirs.float()
    if ours.shape != theirs.shape:
        return dict(shapes=[list(ours.shape), list(theirs.shape)])
    difference = ours - theirs
    norm = float(theirs.norm())
    return dict(
        identical=bool(torch.equal(ours, theirs)),
        relative_error=float(difference.norm()) / norm if norm else float(difference.norm()),
        max_abs_difference=float(difference.abs().max()),
        elements_differing=int((difference != 0).sum()),
    )


def run_case(case, folder, tilec):
    import tilelang.language as T

    path = os.path.join(folder, case["file"])
    row = dict(family=case["family"], file=case["file"], kernel=case["kernel"], sizes=case["sizes"])
    inputs = case["inputs"]()
    with tempfile.TemporaryDirectory() as scratch:
        ours, ours_ms, error = run_tilec(tilec, path, case, inputs, scratch)
    if error:
        row["tilec_error"] = error
    row["tilec_ms"] = ours_ms
    module = load_module(path)
    function = getattr(module, case["kernel"])
    try:
        result = case["tilelang"](function, inputs, T)
        theirs = list(result) if isinstance(result, (tuple, list)) else [result]
        if "convert" in case:
            theirs = case["convert"](theirs)
        row["tilelang_ms"] = median_ms(lambda: case["tilelang"](function, inputs, T))
        if ours is not None:
            row["outputs"] = {
                name: compare(mine, other) for name, mine, other in zip(case["outputs"], ours, theirs)
            }
        if ours is not None and "exact" in case:
            # Each side's error against a float64 result, for the outputs it covers.
            exact = case["exact"](inputs)
            row["against_float64"] = {
                name: dict(
                    tilec=float((mine.double() - ref).norm() / ref.norm()),
                    tilelang=float((other.double() - ref).norm() / ref.norm()),
                )
                for name, mine, other, ref in zip(case["outputs"], ours, theirs, exact)
            }
    except Exception as error:  # TileLang's own failure is a result, not a crash
        row["tilelang_error"] = str(error)[-800:]
    if case["torch"] is not None:
        try:
            reference = case["torch"](module)
            row["torch_ms"] = median_ms(lambda: reference(inputs))
        except Exception as error:
            row["torch_error"] = str(error)[-400:]
    if row.get("tilelang_ms") and ours_ms:
        row["tilec_over_tilelang"] = row["tilelang_ms"] / ours_ms
    if row.get("torch_ms") and ours_ms:
        row["tilec_over_torch"] = row["torch_ms"] / ours_ms
    return row


def table(rows):
    lines = [
        "| family | kernel | sizes | tilec ms | TileLang ms | torch ms | tilec / TileLang speed | outputs |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        outputs = "; ".join(
            f"{name}: " + ("identical" if c.get("identical") else f"rel {c.get('relative_error', 0):.1e}")
            for name, c in row.get("outputs", {}).items()
        ) or row.get("tilec_error", row.get("tilelang_error", ""))[:80]
        fmt = lambda v: f"{v:.4f}" if isinstance(v, float) else "–"  # noqa: E731
        ratio = row.get("tilec_over_tilelang")
        lines.append(
            f"| {row['family']} | {row['kernel']} | {row['sizes']} | {fmt(row.get('tilec_ms'))} | "
            f"{fmt(row.get('tilelang_ms'))} | {fmt(row.get('torch_ms'))} | "
            f"{f'{ratio:.2f}×' if ratio else '–'} | {outputs} |"
        )
    return "\n".join(lines)


def main():
    folder, tilec = sys.argv[1], sys.argv[2]
    # An optional third argument names the cases to run (`file:kernel`, comma-separated).
    only = set(sys.argv[3].split(",")) if len(sys.argv) > 3 else None
    rows = []
    for case in CASES:
        if only is not None and f"{case['file']}:{case['kernel']}" not in only:
            continue
        row = run_case(case, folder, tilec)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print(table(rows))


if __name__ == "__main__":
    main()
