 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256) transpose(
    const float* __restrict__ A,
    float* __restrict__ B) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    extern __shared__ __align__(16) unsigned char tl_smem[];
    __align__(16) float out[16];
    float* tile = (float*)(tl_smem + 0);
    __align__(16) float A_vec[4];
    __align__(16) float tile_vec[4];
    // T.copy
    {
        #pragma unroll
        for (int chunk = 0; chunk < 4; ++chunk) {
            *(uint4*)(A_vec + 0) = *(const uint4*)(A + bx * 64 + by * 65536 + tx / 16 * 1024 + tx % 16 * 4 + chunk * 16384);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                tile_vec[lane] = A_vec[lane];
            }
            *(uint4*)(tile + tx / 16 * 64 + tx % 16 * 4 + chunk * 1024) = *(const uint4*)(tile_vec + 0);
        }
    }
    __syncthreads();
    // T.Parallel(64, 64)
    {
        #pragma unroll
        for (int step = 0; step < 16; ++step) {
            out[step] = tile[tx / 64 + tx % 64 * 64 + step * 4];
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 16; ++step_1) {
            B[bx * 131072 + by * 64 + tx / 64 * 2048 + tx % 64 + step_1 * 8192] = out[step_1];
        }
    }
}
