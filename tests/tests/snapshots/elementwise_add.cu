 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256) elementwise_add(
    const tl_half* __restrict__ A,
    const tl_half* __restrict__ B,
    tl_half* __restrict__ C) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    // T.Parallel(128, 256)
    {
        for (int step = 0; step < 128; ++step) {
            const int i = tx / 32 + step / 8 * 8;
            const int j = tx % 32 * 8 + step % 8;
            C[bx * 256 + by * 524288 + i * 4096 + j] = tl_float_to_half(tl_half_to_float(A[bx * 256 + by * 524288 + i * 4096 + j]) + tl_half_to_float(B[bx * 256 + by * 524288 + i * 4096 + j]));
        }
    }
}
