"""Row softmax in eager style: the row length is a compile-time const, bound by `.compile(...)` or by
an instance in tilec.toml."""
import tilelang
import tilelang.language as T


@tilelang.jit
def row_softmax(X, rows_per_block: int = 4, threads: int = 128):
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float16)
    Y = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(M, rows_per_block), threads=threads) as bx:
        x = T.alloc_fragment((rows_per_block, N), T.float32)
        row_max = T.alloc_fragment((rows_per_block,), T.float32)
        row_sum = T.alloc_fragment((rows_per_block,), T.float32)
        T.copy(X[bx * rows_per_block, 0], x)
        T.reduce_max(x, row_max, dim=1)
        for i, j in T.Parallel(rows_per_block, N):
            x[i, j] = T.exp2((x[i, j] - row_max[i]) * 1.4426950408889634)
        T.reduce_sum(x, row_sum, dim=1)
        for i, j in T.Parallel(rows_per_block, N):
            x[i, j] = x[i, j] / row_sum[i]
        T.copy(x, Y[bx * rows_per_block, 0])
    return Y


if __name__ == "__main__":
    kernel = row_softmax.compile(M=8192, N=1024)
