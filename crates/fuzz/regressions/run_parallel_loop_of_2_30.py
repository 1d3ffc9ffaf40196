# tilec-fuzz: run
import tilelang
import tilelang.language as T

@tilelang.jit
def k(M=1 << 30):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(M):
                B[i] = A[i] + 1.0
    return main
