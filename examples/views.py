"""Buffers seen through T.reshape and T.view: one storage, several shapes, one layout (tilec layout shows the reshaped formulas)."""
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def doubled_row_sums(M, N, block_M, threads=128):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            flat = T.alloc_fragment((block_M * N,), "float32")
            rows = T.reshape(flat, (block_M, N))
            sums = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], rows)
            for k in T.Parallel(block_M * N):
                flat[k] = flat[k] * 2.0
            T.reduce_sum(rows, sums, dim=1)
            T.copy(sums, Y[bx * block_M])

    return main


@tilelang.jit(out_idx=[1])
def tiles_through_views(M, N, block_M, threads=128):
    @T.prim_func
    def main(A: T.Tensor((M * N,), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            grid = T.view(A, (M, N))
            tile = T.alloc_shared((block_M, N), "float32")
            line = T.reshape(tile, (block_M * N,))
            T.copy(grid[bx * block_M, 0], tile)
            for k in T.Parallel(block_M * N):
                line[k] = line[k] + 1.0
            T.copy(tile, B[bx * block_M, 0])

    return main


def main():
    doubled_row_sums(256, 64, 4)
    tiles_through_views(256, 64, 8)
