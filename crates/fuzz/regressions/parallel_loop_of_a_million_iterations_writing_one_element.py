# tilec-fuzz: build
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def last(M=16, N=65536, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), Out: T.Tensor((1,), "float32")):
        with T.Kernel(1, threads=threads):
            b = T.alloc_fragment((1,), "float32")
            for i, j in T.Parallel(M, N):
                b[0] = A[i, j]
            T.copy(b, Out)

    return main


last()
