#!/usr/bin/env bash
# Profiles one launch of the corpus attention kernel (instance 1: b8 h16 s4096 d128) and torch's SDPA
# on the same shape with Nsight Compute, leaving the clocks alone, and writes text reports under OUT:
# the details page (throughput, warp states, occupancy) of both and the SASS source page of tilec's
# kernel with its warp-stall samples per instruction, to see where the kernel's warps wait.
#
# Usage (on a GPU machine, from the repository root): bench/ncu_attention.sh TILEC CORPUS OUT
set -euo pipefail
tilec=$1 corpus=$2 out=$3
ncu_flags=(--clock-control none --set full --import-source no)

ncu "${ncu_flags[@]}" -k regex:flashattn -c 1 -o "$out/tilec" -f \
    "$tilec" run "$corpus/flash_attention_fwd.py" --kernel flashattn --instance 1 --device cuda --target sm_90
ncu -i "$out/tilec.ncu-rep" --page details >"$out/tilec_details.txt"
ncu -i "$out/tilec.ncu-rep" --page source --print-source sass --csv >"$out/tilec_sass.csv"

cat >/tmp/sdpa_once.py <<'PY'
import torch
q, k, v = (torch.randn(8, 16, 4096, 128, device="cuda", dtype=torch.float16) for _ in range(3))
torch.cuda.synchronize()
for _ in range(2):
    torch.nn.functional.scaled_dot_product_attention(q, k, v)
torch.cuda.synchronize()
PY
ncu --clock-control none --metrics gpu__time_duration.sum python3 /tmp/sdpa_once.py >"$out/sdpa_kernels.txt"
ncu "${ncu_flags[@]}" -k regex:'fmha|flash|attn|sdpa|cudnn|sm90|xmma|cutlass' -c 1 -o "$out/sdpa" -f \
    python3 /tmp/sdpa_once.py
ncu -i "$out/sdpa.ncu-rep" --page details >"$out/sdpa_details.txt"
rm -f "$out"/*.ncu-rep
