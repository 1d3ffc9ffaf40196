 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(128) scale_by_first(
    const float* __restrict__ A,
    float* __restrict__ B) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    float first[1];
    __align__(16) float tile[32];
    // T.copy
    {
        #pragma unroll
        for (int step = 0; step < 1; ++step) {
            const int rep = tx;
            first[0] = A[0];
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 32; ++step_1) {
            const int i = tx / 16 + step_1 / 4 * 8;
            const int j = tx % 16 * 4 + step_1 % 4;
            tile[(i * 16 + j / 4) / 128 * 4 + j % 4] = A[bx * 64 + by * 65536 + i * 1024 + j];
        }
    }
    // T.Parallel(64, 64)
    {
        #pragma unroll
        for (int step_2 = 0; step_2 < 32; ++step_2) {
            const int i_1 = tx / 16 + step_2 / 4 * 8;
            const int j_1 = tx % 16 * 4 + step_2 % 4;
            tile[(i_1 * 16 + j_1 / 4) / 128 * 4 + j_1 % 4] = __fmul_rn(tile[(i_1 * 16 + j_1 / 4) / 128 * 4 + j_1 % 4], first[0]);
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_3 = 0; step_3 < 32; ++step_3) {
            const int i_2 = tx / 16 + step_3 / 4 * 8;
            const int j_2 = tx % 16 * 4 + step_3 % 4;
            B[bx * 64 + by * 65536 + i_2 * 1024 + j_2] = tile[(i_2 * 16 + j_2 / 4) / 128 * 4 + j_2 % 4];
        }
    }
}
