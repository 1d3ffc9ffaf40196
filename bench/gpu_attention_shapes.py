"""Times the corpus attention kernel at other shapes or with other tilec binaries against SDPA on the
same inputs, alternating in one process, and checks each output against SDPA in fp32.

Usage (on a GPU machine, from the repository root):
    python3 bench/gpu_attention_shapes.py CORPUS ROUNDS LABEL=BINARY[@FOLDER][%CUDA][+CONFIG...][:NAME=VALUE,...] ...

Each LABEL runs `BINARY run FOLDER/flash_attention_fwd.py --instance 1 --with NAME=VALUE ... --bench`
(FOLDER defaults to CORPUS), with `--cuda-source CUDA` when given and with every `+CONFIG` pass
config set to true (in a copy of the file beside a tilec.toml), so one call compares shapes
(`s8192=tilec:batch=4,seq_len=8192`), edited kernels (`noq=tilec@variants/noq`), hand-edited CUDA
(`fast=tilec%variants/fast.cu`), pass configs (`tma=tilec+tilec.tma_store`) or builds. Fixing the number of tiles and varying the key blocks
per tile separates a kernel's per-tile cost from its per-key-block cost (BENCHMARKS.md).
"""
import os
import shutil
import statistics
import subprocess
import sys

import numpy as np
import torch

from gpu_check import median_ms, run_time_ms
from gpu_tensor_core import sdpa


def parse(spec, corpus):
    label, rest = spec.split("=", 1)
    binary, _, overrides = rest.partition(":")
    binary, *configs = binary.split("+")
    binary, _, cuda = binary.partition("%")
    binary, _, folder = binary.partition("@")
    withs = [arg for item in overrides.split(",") if item for arg in ("--with", item)]
    if cuda:
        withs += ["--cuda-source", cuda]
    folder = folder or corpus
    if configs:
        folder = with_pass_configs(folder, configs, f"/tmp/attention-shapes-project-{label}")
    return label, binary, withs, folder


def with_pass_configs(folder, configs, project):
    """A copy of FOLDER's attention file in PROJECT, beside a tilec.toml that sets CONFIGS."""
    os.makedirs(project, exist_ok=True)
    shutil.copy(f"{folder}/flash_attention_fwd.py", project)
    with open(f"{project}/tilec.toml", "w") as toml:
        toml.write("[pass_configs]\n" + "".join(f'"{config}" = true\n' for config in configs))
    return project


def run_tilec(binary, withs, folder, save):
    command = [binary, "run", f"{folder}/flash_attention_fwd.py", "--kernel", "flashattn", "--instance",
               "1", "--device", "cuda", "--bench", "--target", "sm_90", "--save", save] + withs
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        raise RuntimeError((run.stderr or run.stdout).strip()[-800:])
    return run_time_ms(run.stdout.strip().splitlines()[0])


def main():
    corpus, rounds = sys.argv[1], int(sys.argv[2])
    specs = [parse(spec, corpus) for spec in sys.argv[3:]]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}", flush=True)
    times = {label: [] for label, *_ in specs}
    for round_index in range(rounds):
        for label, binary, withs, folder in specs:
            save = f"/tmp/attention-shapes-{label}"
            ms = run_tilec(binary, withs, folder, save)
            load = lambda name: torch.from_numpy(np.load(f"{save}/in/{name}.npy")).cuda()
            q, k, v = load("Q"), load("K"), load("V")
            if round_index == 0:
                out = torch.from_numpy(np.load(f"{save}/out/Output.npy")).cuda().double()
                ref = sdpa(q.float(), k.float(), v.float(), False).double()
                error = ((out - ref).norm() / ref.norm()).item()
                print(f"{label}: shape {tuple(q.shape)}, rel. error {error:.2e}", flush=True)
            torch_ms = median_ms(lambda: sdpa(q, k, v, False))
            times[label].append((ms, torch_ms))
            print(f"round {round_index} {label}: tilec {ms:.4f} ms, SDPA {torch_ms:.4f} ms", flush=True)
            del q, k, v
            torch.cuda.empty_cache()
    for label, pairs in times.items():
        ratios = sorted(b / a for a, b in pairs)
        print(f"{label}: tilec {statistics.median(a for a, _ in pairs):.4f} ms, "
              f"SDPA {statistics.median(b for _, b in pairs):.4f} ms, "
              f"ratio {statistics.median(ratios):.3f} ({ratios[0]:.3f}-{ratios[-1]:.3f})")


if __name__ == "__main__":
    main()
