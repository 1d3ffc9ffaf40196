 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(64) annotated(
    const float* __restrict__ A,
    float* __restrict__ B) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    __align__(16) float fragment[4];
    // T.Parallel(4, 16)
    {
        if (tx < 16) {
            #pragma unroll
            for (int step = 0; step < 4; ++step) {
                const int row = step;
                const int col = tx % 16;
                fragment[row] = A[row * 16 + col];
            }
        }
    }
    // T.Parallel(2, 2)
    {
        if (tx < 1) {
            #pragma unroll
            for (int step_1 = 0; step_1 < 4; ++step_1) {
                const int group = step_1 / 2;
                const int row_in_group = step_1 % 2;
                B[group * 2 + row_in_group] = fragment[group * 2 + row_in_group];
            }
        }
    }
}
