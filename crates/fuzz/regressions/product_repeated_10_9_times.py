# tilec-fuzz: check
import itertools

import tilelang
import tilelang.language as T

configs = list(itertools.product([64, 128], repeat=10**9))
ones = list(itertools.product([1], repeat=10**9))


@tilelang.jit
def k(M=128):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(M):
                B[i] = A[i]

    return main


k()
