# tilec-fuzz: run
# 2^27 elements in all (1 GiB of values on the host): within the emulator's limit, but the
# fuzzer's memory limit may not hold them with the emulator's state; either it runs until its
# budget or it reports that memory is short, never an abort.
import tilelang
import tilelang.language as T


@tilelang.jit
def add(M=1 << 13, N=1 << 13, block=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(N // block, M // block, threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                B[by * block + i, bx * block + j] = A[by * block + i, bx * block + j] + 1.0

    return main
