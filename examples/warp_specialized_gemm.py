"""A gemm warp-specialized by hand, in FlashMLA's shape: warpgroup 1 loads every K tile by TMA and
warpgroup 0 multiplies every tile, each in a loop of its own; they meet only at two mbarriers,
`full` (the tiles have landed) and `empty` (the consumer is done with them). The accumulator is laid
out for the consumer's 128 threads (`tilec layout`), and `tilec run` on the CPU emulator checks the
protocol: drop a wait or an arrival and it names the race or the deadlock."""
import tilelang
import tilelang.language as T


@tilelang.jit
def warp_specialized_gemm(M=256, N=256, K=512, block_M=128, block_N=128, block_K=64):
    @T.prim_func
    def main(
        A: T.Tensor((M, K), "float16"),
        B: T.Tensor((K, N), "float16"),
        C: T.Tensor((M, N), "float16"),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=256) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), "float16")
            B_shared = T.alloc_shared((block_K, block_N), "float16")
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            full = T.alloc_barrier(arrive_count=128)
            empty = T.alloc_barrier(arrive_count=128)
            with T.ws(0):
                T.clear(C_local)
                for ko in T.serial(T.ceildiv(K, block_K)):
                    T.barrier_wait(full, ko % 2)
                    T.gemm(A_shared, B_shared, C_local)
                    T.barrier_arrive(empty)
                T.copy(C_local, C[by * block_M, bx * block_N])
            with T.ws(1):
                for ko in T.serial(T.ceildiv(K, block_K)):
                    T.barrier_wait(empty, (ko + 1) % 2)
                    T.tma_copy(A[by * block_M, ko * block_K], A_shared, barrier=full)
                    T.tma_copy(B[ko * block_K, bx * block_N], B_shared, barrier=full)
                    T.barrier_arrive(full)

    return main


warp_specialized_gemm()
