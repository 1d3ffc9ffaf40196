"""Run-time scalars: values read from tensors (or a `T.alloc_var`) used as indices, slice bounds,
loop extents and `T.ceildiv` arguments. `tilec ir` shows where each is named (`let Rows_i0 =
Rows[bx]`); `tilec run --input Rows=rows.npy` gives real indices instead of random ones."""
import tilelang
import tilelang.language as T


@tilelang.jit
def gather_rows(M, N, R, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Rows: T.Tensor((R,), "int32"), Y: T.Tensor((R, N), dtype)):
        with T.Kernel(R, threads=32) as bx:
            row = Rows[bx]
            for j in T.Parallel(N):
                Y[bx, j] = X[row, j]

    return main


@tilelang.jit
def copy_segments(M, N, G, block=16, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Offsets: T.Tensor((G,), "int32"), Y: T.Tensor((G * block, N), dtype)):
        with T.Kernel(G, threads=64) as bx:
            start = Offsets[bx]
            s = T.alloc_shared((block, N), dtype)
            T.copy(X[start:start + block, :], s)
            T.copy(s, Y[bx * block:(bx + 1) * block, :])

    return main


@tilelang.jit
def prefix_rows(M, N, G, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Counts: T.Tensor((G,), "int32"), Y: T.Tensor((G, N), dtype), Z: T.Tensor((G, N), dtype)):
        with T.Kernel(G, threads=32) as bx:
            for j in T.Parallel(N):
                Y[bx, j] = 0.0
                Z[bx, j] = 0.0
            for k in T.serial(Counts[bx]):
                for j in T.Parallel(N):
                    Y[bx, j] += X[k, j]
            for k in T.serial(T.ceildiv(Counts[bx], 2)):
                for j in T.Parallel(N):
                    Z[bx, j] += X[2 * k, j]

    return main


@tilelang.jit
def var_index(M, N, R, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Rows: T.Tensor((R,), "int32"), Y: T.Tensor((R, N), dtype)):
        with T.Kernel(R, threads=32) as bx:
            r = T.alloc_var("int32")
            r = Rows[bx]
            for j in T.Parallel(N):
                Y[bx, j] = X[r, j]
            r = r + 1
            for j in T.Parallel(N):
                Y[bx, j] = Y[bx, j] + X[r, j]

    return main


@tilelang.jit
def count_positive(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), C: T.Tensor((M,), "int32"), D: T.Tensor((M,), "int32")):
        with T.Kernel(M, threads=32) as bx:
            n = T.alloc_var("int32")
            m = T.alloc_var("int32")
            T.clear(n)
            T.fill(m, 3)
            for j in T.serial(N):
                if X[bx, j] > 0:
                    n = n + 1
                    m = m + 1
            C[bx] = n
            D[bx] = m

    return main


@tilelang.jit
def half_sum(M, N):
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float16")):
        with T.Kernel(M, threads=32) as bx:
            acc = T.alloc_var("float32")
            T.clear(acc)
            for j in T.serial(N):
                acc = acc + X[bx, j].astype("float16").astype(X.dtype)
            Y[bx] = acc.astype(Y[0].dtype)

    return main


gather_rows(64, 32, 16)
copy_segments(256, 32, 8)
prefix_rows(16, 32, 8)
var_index(64, 32, 16)
count_positive(8, 32)
half_sum(8, 32)
