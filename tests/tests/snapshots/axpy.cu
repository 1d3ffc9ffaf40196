 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256) axpy(
    const float* __restrict__ X,
    const float* __restrict__ Y,
    float* __restrict__ Z) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    __align__(16) float x[8];
    __align__(16) float y[8];
    // T.copy
    {
        #pragma unroll
        for (int step = 0; step < 8; ++step) {
            const int i = tx * 4 + step / 4 * 1024 + step % 4;
            x[i / 1024 * 4 + i % 4] = X[bx * 2048 + i];
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 8; ++step_1) {
            const int i_1 = tx * 4 + step_1 / 4 * 1024 + step_1 % 4;
            y[i_1 / 1024 * 4 + i_1 % 4] = Y[bx * 2048 + i_1];
        }
    }
    // T.Parallel(2048)
    {
        #pragma unroll
        for (int step_2 = 0; step_2 < 8; ++step_2) {
            const int i_2 = tx * 4 + step_2 / 4 * 1024 + step_2 % 4;
            y[i_2 / 1024 * 4 + i_2 % 4] = __fmul_rn(x[i_2 / 1024 * 4 + i_2 % 4], 2.0f) + y[i_2 / 1024 * 4 + i_2 % 4];
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_3 = 0; step_3 < 8; ++step_3) {
            const int i_3 = tx * 4 + step_3 / 4 * 1024 + step_3 % 4;
            Z[bx * 2048 + i_3] = y[i_3 / 1024 * 4 + i_3 % 4];
        }
    }
}
