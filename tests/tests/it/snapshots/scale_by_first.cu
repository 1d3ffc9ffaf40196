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
    __align__(16) float A_vec[4];
    __align__(16) float B_vec[4];
    // T.copy
    {
        #pragma unroll
        for (int step = 0; step < 1; ++step) {
            first[0] = A[0];
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int chunk = 0; chunk < 8; ++chunk) {
            *(uint4*)(A_vec + 0) = *(const uint4*)(A + bx * 64 + by * 65536 + tx / 16 * 1024 + tx % 16 * 4 + chunk * 8192);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                tile[chunk * 4 + lane] = A_vec[lane];
            }
        }
    }
    // T.Parallel(64, 64)
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 32; ++step_1) {
            tile[step_1 / 4 * 4 + step_1 % 4] = __fmul_rn(tile[step_1 / 4 * 4 + step_1 % 4], first[0]);
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int chunk_1 = 0; chunk_1 < 8; ++chunk_1) {
            #pragma unroll
            for (int lane_1 = 0; lane_1 < 4; ++lane_1) {
                B_vec[lane_1] = tile[chunk_1 * 4 + lane_1];
            }
            *(uint4*)(B + bx * 64 + by * 65536 + tx / 16 * 1024 + tx % 16 * 4 + chunk_1 * 8192) = *(const uint4*)(B_vec + 0);
        }
    }
}
