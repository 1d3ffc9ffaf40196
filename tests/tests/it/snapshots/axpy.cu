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
    __align__(16) float X_vec[4];
    __align__(16) float Y_vec[4];
    __align__(16) float Z_vec[4];
    // T.copy
    {
        #pragma unroll
        for (int chunk = 0; chunk < 2; ++chunk) {
            *(uint4*)(X_vec + 0) = *(const uint4*)(X + bx * 2048 + tx * 4 + chunk * 1024);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                x[chunk * 4 + lane] = X_vec[lane];
            }
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int chunk_1 = 0; chunk_1 < 2; ++chunk_1) {
            *(uint4*)(Y_vec + 0) = *(const uint4*)(Y + bx * 2048 + tx * 4 + chunk_1 * 1024);
            #pragma unroll
            for (int lane_1 = 0; lane_1 < 4; ++lane_1) {
                y[chunk_1 * 4 + lane_1] = Y_vec[lane_1];
            }
        }
    }
    // T.Parallel(2048)
    {
        #pragma unroll
        for (int step = 0; step < 8; ++step) {
            y[step / 4 * 4 + step % 4] = fmaf(x[step / 4 * 4 + step % 4], 2.0f, y[step / 4 * 4 + step % 4]);
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int chunk_2 = 0; chunk_2 < 2; ++chunk_2) {
            #pragma unroll
            for (int lane_2 = 0; lane_2 < 4; ++lane_2) {
                Z_vec[lane_2] = y[chunk_2 * 4 + lane_2];
            }
            *(uint4*)(Z + bx * 2048 + tx * 4 + chunk_2 * 1024) = *(const uint4*)(Z_vec + 0);
        }
    }
}
