 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256) vector_add(
    const float* __restrict__ A,
    const float* __restrict__ B,
    float* __restrict__ C) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    // T.Parallel(1024)
    {
        #pragma unroll
        for (int step = 0; step < 4; ++step) {
            const int i = tx * 4 + step;
            C[bx * 1024 + i] = A[bx * 1024 + i] + B[bx * 1024 + i];
        }
    }
}
