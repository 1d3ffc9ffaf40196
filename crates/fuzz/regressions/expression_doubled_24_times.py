# tilec-fuzz: build
import tilelang
import tilelang.language as T

@tilelang.jit
def k(M=128):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(M):
                v = A[i]
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                v = v + v
                B[i] = v
    return main
