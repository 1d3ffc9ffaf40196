 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256) transpose(
    const float* __restrict__ A,
    float* __restrict__ B) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    extern __shared__ __align__(16) unsigned char tl_smem[];
    __align__(16) float out[16];
    float* tile = (float*)(tl_smem + 0);
    // T.copy
    {
        #pragma unroll
        for (int step = 0; step < 16; ++step) {
            const int i = tx / 16 + step / 4 * 16;
            const int j = tx % 16 * 4 + step % 4;
            tile[i * 64 + j] = A[bx * 64 + by * 65536 + i * 1024 + j];
        }
    }
    __syncthreads();
    // T.Parallel(64, 64)
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 16; ++step_1) {
            const int i_1 = tx / 64 + step_1 * 4;
            const int j_1 = tx % 64;
            out[(i_1 * 64 + j_1) / 256] = tile[i_1 + j_1 * 64];
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_2 = 0; step_2 < 16; ++step_2) {
            const int i_2 = tx / 64 + step_2 * 4;
            const int j_2 = tx % 64;
            B[bx * 131072 + by * 64 + i_2 * 2048 + j_2] = out[(i_2 * 64 + j_2) / 256];
        }
    }
}
