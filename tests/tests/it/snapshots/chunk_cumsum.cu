 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(128) chunk_cumsum(
    const float* __restrict__ X,
    float* __restrict__ Y) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    extern __shared__ __align__(16) unsigned char tl_smem[];
    float* x = (float*)(tl_smem + 0);
    __align__(16) float X_vec[4];
    __align__(16) float x_vec[4];
    float acc[1];
    __align__(16) float x_vec_1[4];
    __align__(16) float Y_vec[4];
    // T.copy
    {
        #pragma unroll
        for (int chunk = 0; chunk < 4; ++chunk) {
            *(uint4*)(X_vec + 0) = *(const uint4*)(X + bx * 2048 + tx / 16 * 64 + tx % 16 * 4 + chunk * 512);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                x_vec[lane] = X_vec[lane];
            }
            *(uint4*)(x + tx / 16 * 64 + tx % 16 * 4 + chunk * 512) = *(const uint4*)(x_vec + 0);
        }
    }
    __syncthreads();
    // T.cumsum
    {
        for (int line_round = 0; line_round < 1; ++line_round) {
            if ((tx + line_round * 128) < 32) {
                acc[0] = 0.0f;
                for (int k = 0; k < 64; ++k) {
                    acc[0] = acc[0] + x[tx * 64 + line_round * 8192 + k];
                    x[tx * 64 + line_round * 8192 + k] = acc[0];
                }
            }
        }
    }
    __syncthreads();
    // T.copy
    {
        #pragma unroll
        for (int chunk_1 = 0; chunk_1 < 4; ++chunk_1) {
            *(uint4*)(x_vec_1 + 0) = *(const uint4*)(x + tx / 16 * 64 + tx % 16 * 4 + chunk_1 * 512);
            #pragma unroll
            for (int lane_1 = 0; lane_1 < 4; ++lane_1) {
                Y_vec[lane_1] = x_vec_1[lane_1];
            }
            *(uint4*)(Y + bx * 2048 + tx / 16 * 64 + tx % 16 * 4 + chunk_1 * 512) = *(const uint4*)(Y_vec + 0);
        }
    }
}
