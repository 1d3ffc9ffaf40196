"""Writes the float32 inputs of `tests/fixtures/kernels/fp8_conversions.py` to the .npy file named
on the command line: the values where float-to-fp8 (and fp4) conversions differ if anything is off (zeros,
subnormals, ties to even, the largest finite values and just past them, infinities, NaN), then
random values over 2^-20..2^18. `bench/gpu_session_checks.sh` runs the kernel on them with
`tilec run --check`, which compares the GPU's conversions with the emulator's bit for bit.
"""

import sys

import numpy as np

SPECIALS = [
    0.0, -0.0, 1e-9, -1e-9, 2**-9, 2**-10, 3 * 2**-10, 2**-7, 2**-6, 2**-16, 2**-17, 3 * 2**-17,
    2**-14, 0.001, 0.1, 1.0, 1.0625, 1.125, 1.1875, -1.0625, 240, 248, 256, 440, 447, 448, 449,
    455, 456, 464, 465, 480, 500, 1e4, 57343, 57344, 59392, 61439, 61440, 65504, 65536, 1e6, 1e38,
    float("inf"), float("-inf"), float("nan"), -float("nan"), -448, -449, -464, -480, -57344,
    -61440, -65536, -1e6,
    # float4_e2m1fn's ties (to the even code) and its largest value, 6, and past it.
    0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.5, 6.0, 7.0, -0.25, -2.5, -5.0,
]


def main():
    rng = np.random.default_rng(5)
    rest = 1024 - len(SPECIALS)
    random = rng.standard_normal(rest) * np.exp2(rng.integers(-20, 18, rest))
    values = np.concatenate([np.array(SPECIALS, dtype=np.float32), random.astype(np.float32)])
    np.save(sys.argv[1], values)


if __name__ == "__main__":
    main()
