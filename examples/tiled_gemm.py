"""A tiled fp16 GEMM with fp32 accumulation (classic style): the factory's arguments are the tile sizes,
and main() asks for two instances."""
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def tiled_gemm(M, N, K, block_M=128, block_N=128, block_K=32, num_stages=3, threads=128):
    dtype = "float16"
    accum_dtype = "float"
    assert K % block_K == 0, f"K={K} must be a multiple of block_K={block_K}"

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_tile = T.alloc_shared((block_M, block_K), dtype)
            B_tile = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(acc)
            for k in T.Pipelined(K // block_K, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_tile)
                T.copy(B[k * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return gemm


def main():
    square = tiled_gemm(2048, 2048, 2048)
    wide = tiled_gemm(1024, 4096, 512, block_N=256, threads=256)
    print(square, wide)


if __name__ == "__main__":
    main()
