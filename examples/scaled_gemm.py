"""A gemm whose A operand is a fragment scaled row by row before the product (the shape of Mamba's
chunk scan): the fragment takes the register layout the gemm reads it in, and the row scale gets a
layout both loops agree with. `tilec layout examples/scaled_gemm.py` shows them."""
import tilelang
import tilelang.language as T


@tilelang.jit
def scaled_gemm(M=64, N=64, K=64, threads=128):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        B: T.Tensor((K, N), "float16"),
        S: T.Tensor((M,), "float32"),
        C: T.Tensor((M, N), "float32"),
    ):
        with T.Kernel(1, threads=threads):
            a_shared = T.alloc_shared((M, K), "float16")
            b_shared = T.alloc_shared((K, N), "float16")
            s_shared = T.alloc_shared((M,), "float32")
            a_local = T.alloc_fragment((M, K), "float16")
            s_local = T.alloc_fragment((M,), "float32")
            scale = T.alloc_fragment((M,), "float32")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(A, a_shared)
            T.copy(B, b_shared)
            T.copy(S, s_shared)
            T.copy(s_shared, s_local)
            T.clear(acc)
            for i in T.Parallel(M):
                scale[i] = s_local[i] * 2.0
            T.copy(a_shared, a_local)
            for i, j in T.Parallel(M, K):
                a_local[i, j] = a_local[i, j] * s_local[i]
            T.gemm(a_local, b_shared, acc)
            for i, j in T.Parallel(M, N):
                acc[i, j] *= scale[i]
            T.copy(acc, C)

    return main


scaled_gemm()
