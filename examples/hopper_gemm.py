"""The corpus GEMM's 8192^3 configuration (128x256x64 tile, 256 threads, 3 stages) with the warps
stacked along M (`policy=T.GemmWarpPolicy.FullRow`): on sm_90 each of the two consumer warpgroups
owns 64 whole rows and issues one m64n256k16 wgmma per k-step, instead of the default policy's
warpgroups side by side issuing two m64n128k16 each. Every wgmma reads its A and B operands from
shared memory, so the wider instruction reads fewer operand bytes per FLOP; on the H200 this tile
ran 1.62-1.69 ms against the default policy's 1.69-1.71 ms (BENCHMARKS.md)."""
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def hopper_gemm(M, N, K, block_M=128, block_N=256, block_K=64, num_stages=3, threads=256):
    dtype = "float16"
    accum_dtype = "float"

    @T.prim_func
    def gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_tile = T.alloc_shared((block_M, block_K), dtype)
            B_tile = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=10)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_tile)
                T.copy(B[k * block_K, bx * block_N], B_tile)
                T.gemm(A_tile, B_tile, acc, policy=T.GemmWarpPolicy.FullRow)
            T.copy(acc, C[by * block_M, bx * block_N])

    return gemm


def main():
    kernel = hopper_gemm(8192, 8192, 8192)
    print(kernel)


if __name__ == "__main__":
    main()
