#!/usr/bin/env bash
# The kernels of this session's language features on the GPU, each compared with the emulator on
# the same inputs (`tilec run --check`): packed 4-bit dequantization into a gemm operand, TVM IR
# helpers, bitwise functions, atomic_add returning the old value, XOR and mma swizzles, a run-time
# `while` around a TMA pipeline, and the real-world files they come from (Stream-K, DeepSeek-V3.2's
# top-k selector), and T.gemm on tf32, fp8 and 8-bit integer operands (mma.sync m16n8k8 and
# m16n8k32 on sm_80 code, wgmma k8/k32 for the K-major ones on sm_90), reductions from and into
# shared memory and with a kept dimension, and a launch whose padding is dropped to fit. Run on
# the device from the repository root with a stripped tilec in gpu-carry/tilec and the real-world
# files in gpu-carry/rw/.
set -u
tilec=${TILEC:-gpu-carry/tilec}
for kernel in four_bit atomic_extremes scans byte_view packed_dequant tirx_unpack bitwise_functions compaction xor_layout mma_swizzle \
    work_ranges shared_reductions kept_dimension_reductions padding_past_the_limit tir_functions shifted_read single_stage \
    grid_stride_histogram single_thread_prefix concurrent_roles role_barriers binary_search; do
    file=tests/fixtures/kernels/$kernel.py
    if [ "$kernel" = work_ranges ]; then
        # Ranges: block 0 takes row tiles 0..3, block 1 tile 3.
        python3 -c "import numpy as np; np.save('/tmp/ranges.npy', np.array([[0, 3], [3, 4]], dtype=np.int32))"
        "$tilec" run "$file" --device cuda --check --input Ranges=/tmp/ranges.npy \
            || echo "FAILED $kernel"
    else
        "$tilec" run "$file" --device cuda --check || echo "FAILED $kernel"
    fi
done
# Rows of a symbolic count: full tiles take the unguarded copies, the last tile the guarded ones.
"$tilec" run tests/fixtures/kernels/symbolic_rows.py --device cuda --check --with m=1001 \
    || echo "FAILED symbolic_rows"
# Strided tensors with padded rows (row stride 80 for rows of 64), passed as their storage.
"$tilec" run tests/fixtures/kernels/strided_rows.py --device cuda --check --with M=100 --with stride=80 \
    || echo "FAILED strided_rows"
# A copy of a run-time length (77 rows: two full blocks of 32 and a partial one).
python3 -c "import numpy as np; np.save('/tmp/lens.npy', np.array([77], dtype=np.int32))"
"$tilec" run tests/fixtures/kernels/run_time_length_copy.py --device cuda --check --input lens=/tmp/lens.npy \
    || echo "FAILED run_time_length_copy"
# The one-stage pipeline on cp.async too (sm_90 code issues TMA boxes).
"$tilec" run tests/fixtures/kernels/single_stage.py --device cuda --check --target sm_80 \
    || echo "FAILED single_stage on sm_80 code"
for instance in 0 1 2; do
    [ -f gpu-carry/rw/example_gemv.py ] || break
    "$tilec" run gpu-carry/rw/example_gemv.py --instance "$instance" --device cuda --check \
        || echo "FAILED gemv instance $instance"
done
if [ -f gpu-carry/rw/example_tilelang_gemm_streamk.py ]; then
    "$tilec" run gpu-carry/rw/example_tilelang_gemm_streamk.py --device cuda --check \
        --with M=256 --with N=1024 --with K=512 || echo "FAILED streamk"
fi
# tests/fixtures/kernels/gemm_dtypes.py: instances 0-4 (float32 as tf32, e4m3, e5m2, int8, uint8)
# with B stored K x N (mma.sync on both targets), 5-9 the same with B transposed (wgmma on sm_90
# for fp8 and the integers), 10-11 tfloat32 both ways (wgmma k8 for 11 on sm_90). fp8 has no mma.sync before sm_89, so sm_80 code runs the others only.
for target in sm_90 sm_80; do
    for instance in 0 1 2 3 4 5 6 7 8 9 10 11; do
        if [ "$target" = sm_80 ] && { [ "$instance" = 1 ] || [ "$instance" = 2 ] \
            || [ "$instance" = 6 ] || [ "$instance" = 7 ]; }; then
            continue
        fi
        "$tilec" run tests/fixtures/kernels/gemm_dtypes.py --instance "$instance" \
            --target "$target" --device cuda --check \
            || echo "FAILED gemm_dtypes instance $instance on $target"
    done
done
# float32 to fp8 on special values (tests/fixtures/kernels/fp8_conversions.py): sm_90 code converts
# with cvt.rn.satfinite, sm_80 code in software; both must equal the emulator bit for bit.
python3 bench/fp8_specials.py /tmp/fp8_specials.npy
for target in sm_90 sm_80; do
    "$tilec" run tests/fixtures/kernels/fp8_conversions.py --target "$target" --device cuda --check \
        --input x=/tmp/fp8_specials.npy || echo "FAILED fp8_conversions on $target"
done
