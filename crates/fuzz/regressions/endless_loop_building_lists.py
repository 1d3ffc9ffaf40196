# tilec-fuzz: check
import tilelang.language as T
import tilelang
while True:
    x = [0] * (1 << 20)

@tilelang.jit
def k(M=128):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(M):
                v = A[i]
                B[i] = v
    return main
