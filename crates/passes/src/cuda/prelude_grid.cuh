// ---- tilec prelude: grid barrier --------------------------------------------------------------
// T.sync_grid(): a barrier across all blocks of a grid, for kernels launched cooperatively (every
// block resident at once, which the launcher checks). One word counts arrivals: block (0, 0, 0)
// adds 2^31 - (blocks - 1) and every other block adds 1, so the word's top bit flips exactly when
// the last block arrives, and the low 31 bits are back where they started, ready for the next
// barrier and the next launch without a reset. The fences make each block's global writes before
// the barrier visible to every block after it.
__device__ unsigned int tl_grid_barrier_word;

__device__ __forceinline__ void tl_sync_grid() {
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0 && threadIdx.z == 0) {
        const unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
        const bool first = blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0;
        const unsigned int add = first ? 0x80000000u - (blocks - 1u) : 1u;
        __threadfence();
        const unsigned int before = atomicAdd(&tl_grid_barrier_word, add);
        volatile unsigned int* word = &tl_grid_barrier_word;
        while (((before ^ *word) & 0x80000000u) == 0u) {
        }
        __threadfence();
    }
    __syncthreads();
}
