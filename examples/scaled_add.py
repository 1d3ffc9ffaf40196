"""Element-wise `alpha * x + y` over 2-D tiles, with a helper function and a module-level constant that
the kernel closes over; its instances come from tilec.toml."""
import tilelang
import tilelang.language as T

VECTOR_BYTES = 16


def tile_width(dtype_bytes, threads):
    # Each thread handles one 16-byte vector per row of the tile.
    return VECTOR_BYTES // dtype_bytes * threads // 8


@tilelang.jit(out_idx=[2])
def scaled_add(M, N, alpha, block_M=64, threads=256, dtype="float16"):
    block_N = tile_width(2, threads)

    @T.prim_func
    def kernel(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype), Z: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            for i, j in T.Parallel(block_M, block_N):
                row = by * block_M + i
                col = bx * block_N + j
                Z[row, col] = X[row, col] * alpha + Y[row, col]

    return kernel
