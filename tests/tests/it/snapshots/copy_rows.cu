 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(128) copy_rows(
    const float* __restrict__ A,
    float* __restrict__ O) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    __align__(16) float Q[16];
    __align__(16) float A_vec[4];
    // T.Parallel(32, 16)
    {
        #pragma unroll
        for (int chunk = 0; chunk < 4; ++chunk) {
            *(uint4*)(A_vec + 0) = *(const uint4*)(A + tx % 32 * 16 + chunk * 4);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                Q[chunk * 4 + lane] = A_vec[lane];
            }
        }
    }
    // T.Parallel(32)
    {
        #pragma unroll
        for (int step = 0; step < 1; ++step) {
            if ((tx / 32) == 0) {
                for (int j = 0; j < 16; ++j) {
                    O[j + tx % 32 * 16] = Q[j];
                }
            }
        }
    }
}
