# tilec-fuzz: check
# A keyword where a name belongs (`while` in a tuple target) makes the parser recover a `while`
# statement with an empty body inside driver code that runs: the loop must still count as work.
import tilelang
import tilelang.language as T


@tilelang.jit
def scale(M=128):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(M):
                B[i] = A[i] * 2.0

    return main


def launch(x):
    batch, while, dim = x.shape
    return scale(batch)


if __name__ == "__main__":
    launch(None)
