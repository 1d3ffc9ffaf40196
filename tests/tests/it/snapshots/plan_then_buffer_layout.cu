 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(64) plan_then_buffer_layout(
    const float* __restrict__ A,
    float* __restrict__ B) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    float fragment[1];
    // T.Parallel(4, 16)
    {
        #pragma unroll
        for (int step = 0; step < 1; ++step) {
            fragment[0] = A[tx / 16 * 16 + tx % 16];
        }
    }
    // T.Parallel(2, 2)
    {
        for (int group = 0; group < 2; ++group) {
            for (int row_in_group = 0; row_in_group < 2; ++row_in_group) {
                for (int rep = 0; rep < 1; ++rep) {
                    if ((group * 32 + row_in_group * 16) == tx) {
                        B[group * 2 + row_in_group] = fragment[0];
                    }
                }
            }
        }
    }
}
