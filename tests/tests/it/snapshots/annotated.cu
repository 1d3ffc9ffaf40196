 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(64) annotated(
    const float* __restrict__ A,
    float* __restrict__ B) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    __align__(16) float fragment[4];
    __align__(8) float B_vec[2];
    // T.Parallel(4, 16)
    {
        if (tx < 16) {
            #pragma unroll
            for (int step = 0; step < 4; ++step) {
                fragment[step] = A[tx % 16 + step * 16];
            }
        }
    }
    // T.Parallel(2, 2)
    {
        if (tx < 1) {
            #pragma unroll
            for (int chunk = 0; chunk < 2; ++chunk) {
                #pragma unroll
                for (int lane = 0; lane < 2; ++lane) {
                    B_vec[lane] = fragment[chunk * 2 + lane];
                }
                *(uint2*)(B + chunk * 2) = *(const uint2*)(B_vec + 0);
            }
        }
    }
}
