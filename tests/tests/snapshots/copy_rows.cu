 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(128) copy_rows(
    const float* __restrict__ A,
    float* __restrict__ O) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    __align__(16) float Q[16];
    // T.Parallel(32, 16)
    {
        #pragma unroll
        for (int step = 0; step < 16; ++step) {
            const int i = tx % 32;
            const int j = step;
            const int rep = tx / 32;
            Q[j] = A[i * 16 + j];
        }
    }
    // T.Parallel(32)
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 1; ++step_1) {
            const int i_1 = tx % 32;
            const int rep_1 = tx / 32;
            for (int j_1 = 0; j_1 < 16; ++j_1) {
                if (rep_1 == 0) {
                    O[i_1 * 16 + j_1] = Q[j_1];
                }
            }
        }
    }
}
