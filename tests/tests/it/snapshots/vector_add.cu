 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256) vector_add(
    const float* __restrict__ A,
    const float* __restrict__ B,
    float* __restrict__ C) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    __align__(16) float A_vec[4];
    __align__(16) float B_vec[4];
    __align__(16) float C_vec[4];
    // T.Parallel(1024)
    {
        #pragma unroll
        for (int chunk = 0; chunk < 1; ++chunk) {
            *(uint4*)(A_vec + 0) = *(const uint4*)(A + bx * 1024 + tx * 4 + chunk * 4);
            *(uint4*)(B_vec + 0) = *(const uint4*)(B + bx * 1024 + tx * 4 + chunk * 4);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                C_vec[lane] = A_vec[lane] + B_vec[lane];
            }
            *(uint4*)(C + bx * 1024 + tx * 4 + chunk * 4) = *(const uint4*)(C_vec + 0);
        }
    }
}
