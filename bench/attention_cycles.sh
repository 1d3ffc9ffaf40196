#!/usr/bin/env bash
# Counts the cycles of the corpus attention kernel (instance 1: b8 h16 s4096 d128) for each given
# tilec binary and of torch's SDPA kernel on the same shape, with Nsight Compute and the clocks
# left alone. Elapsed cycles do not move with the clock the GPU happens to run at, so they
# compare kernels more steadily than times taken minutes apart (BENCHMARKS.md).
#
# Usage (on a GPU machine, from the repository root): bench/attention_cycles.sh CORPUS LABEL=BINARY[%CUDA]...
# where CUDA, when given, is a hand-edited kernel source that BINARY runs in place of its own.
set -euo pipefail
corpus=$1
shift
metrics=gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_active.avg
report() {
    # One line per profiled launch: label, duration, elapsed cycles, average active cycles.
    grep -E "gpu__time_duration|sm__cycles_elapsed.max|sm__cycles_active.avg" | awk -v label="$1" '
        /gpu__time_duration/ {t=$NF " " $(NF-1)} /sm__cycles_active/ {a=$NF}
        /sm__cycles_elapsed/ {gsub(",", "", $NF); gsub(",", "", a); printf "%s %s, %s cycles elapsed, %s active\n", label, t, $NF, a}'
}
for spec in "$@"; do
    label=${spec%%=*} binary=${spec#*=} source=()
    if [[ $binary == *%* ]]; then
        source=(--cuda-source "${binary#*%}")
        binary=${binary%%%*}
    fi
    ncu --clock-control none --metrics "$metrics" -k regex:flashattn --launch-skip 5 --launch-count 5 \
        "$binary" run "$corpus/flash_attention_fwd.py" --kernel flashattn --instance 1 --device cuda \
        --target sm_90 --bench "${source[@]}" 2>/dev/null | report "$label"
done
cat >/tmp/sdpa_repeat.py <<'PY'
import torch
q, k, v = (torch.randn(8, 16, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))
for _ in range(10):
    torch.nn.functional.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
ncu --clock-control none --metrics "$metrics" -k regex:'sdpa|fmha|flash' --launch-skip 5 --launch-count 5 \
    python3 /tmp/sdpa_repeat.py 2>/dev/null | report sdpa
