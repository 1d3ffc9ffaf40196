# tilec-fuzz: check
import tilelang
import tilelang.language as T
n = 0
while True:
    n = n + 1

@tilelang.jit
def k(M=128):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(M):
                B[i] = A[i] + undefined_thing
    return main
