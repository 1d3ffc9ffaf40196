 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256) elementwise_add(
    const tl_half* __restrict__ A,
    const tl_half* __restrict__ B,
    tl_half* __restrict__ C) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    __align__(16) tl_half A_vec[8];
    __align__(16) tl_half B_vec[8];
    __align__(16) tl_half C_vec[8];
    // T.Parallel(128, 256)
    {
        #pragma unroll
        for (int chunk = 0; chunk < 16; ++chunk) {
            *(uint4*)(A_vec + 0) = *(const uint4*)(A + bx * 256 + by * 524288 + tx / 32 * 4096 + tx % 32 * 8 + chunk * 32768);
            *(uint4*)(B_vec + 0) = *(const uint4*)(B + bx * 256 + by * 524288 + tx / 32 * 4096 + tx % 32 * 8 + chunk * 32768);
            #pragma unroll
            for (int lane = 0; lane < 8; ++lane) {
                C_vec[lane] = tl_float_to_half(tl_half_to_float(A_vec[lane]) + tl_half_to_float(B_vec[lane]));
            }
            *(uint4*)(C + bx * 256 + by * 524288 + tx / 32 * 4096 + tx % 32 * 8 + chunk * 32768) = *(const uint4*)(C_vec + 0);
        }
    }
}
