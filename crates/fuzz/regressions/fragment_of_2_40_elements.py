# tilec-fuzz: layout
import tilelang
import tilelang.language as T

@tilelang.jit
def k(M=128, blk=2**40):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            f = T.alloc_fragment((blk,), "float32")
            for i in T.Parallel(blk):
                f[i] = A[i % M]
            for i in T.Parallel(M):
                B[i] = f[i]
    return main
