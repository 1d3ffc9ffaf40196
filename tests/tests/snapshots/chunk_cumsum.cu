 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(128) chunk_cumsum(
    const float* __restrict__ X,
    float* __restrict__ Y) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    extern __shared__ __align__(16) unsigned char tl_smem[];
    float* x = (float*)(tl_smem + 0);
    float acc[1];
    // T.copy
    {
        #pragma unroll
        for (int step = 0; step < 16; ++step) {
            const int i = tx / 16 + step / 4 * 8;
            const int j = tx % 16 * 4 + step % 4;
            x[i * 64 + j] = X[bx * 2048 + i * 64 + j];
        }
    }
    __syncthreads();
    // T.cumsum
    {
        for (int line_round = 0; line_round < 1; ++line_round) {
            if ((tx + line_round * 128) < 32) {
                acc[0] = 0.0f;
                for (int k = 0; k < 64; ++k) {
                    acc[0] = acc[0] + x[tx % 32 * 64 + k];
                    x[tx % 32 * 64 + k] = acc[0];
                }
            }
        }
    }
    __syncthreads();
    // T.copy
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 16; ++step_1) {
            const int i_1 = tx / 16 + step_1 / 4 * 8;
            const int j_1 = tx % 16 * 4 + step_1 % 4;
            Y[bx * 2048 + i_1 * 64 + j_1] = x[i_1 * 64 + j_1];
        }
    }
}
