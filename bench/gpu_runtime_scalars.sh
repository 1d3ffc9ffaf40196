#!/usr/bin/env bash
# The run-time scalar and register-A-operand examples on the GPU, each compared with the emulator on
# the same inputs (`--check`), then TileLang's varlen FlashAttention against torch and TileLang
# (bench/gpu_varlen.py). Run on the device from the repository root, with a stripped tilec in
# gpu-carry/tilec, TileLang installed in gpu-carry/site and the real-world file in gpu-carry/rw/.
set -u
tilec=${TILEC:-gpu-carry/tilec}
for kernel in gather_rows copy_segments prefix_rows var_index count_positive half_sum; do
    "$tilec" run examples/runtime_scalars.py --kernel "$kernel" --device cuda --check \
        || echo "FAILED runtime_scalars.py $kernel"
done
"$tilec" run examples/scaled_gemm.py --device cuda --check || echo "FAILED scaled_gemm sm_90"
"$tilec" run examples/scaled_gemm.py --device cuda --check --target sm_80 \
    || echo "FAILED scaled_gemm sm_80"
PYTHONPATH=$PWD/gpu-carry/site python3 bench/gpu_varlen.py gpu-carry/rw/example_mha_fwd_varlen.py "$tilec"
