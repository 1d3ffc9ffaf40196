# tilec-fuzz: run
# Tensors of 2^29 elements each: more than the CPU emulator runs (2^28 in all), refused with a
# message before anything is allocated.
import tilelang
import tilelang.language as T


@tilelang.jit
def copy(M=1 << 15, N=1 << 14, block=128):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float16"), B: T.Tensor((M, N), "float16")):
        with T.Kernel(N // block, M // block, threads=128) as (bx, by):
            for i, j in T.Parallel(block, block):
                B[by * block + i, bx * block + j] = A[by * block + i, bx * block + j]

    return main
