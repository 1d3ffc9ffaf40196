 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(128) gather_three(
    const float* __restrict__ A,
    float* __restrict__ B) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    if (tx == 0) {
        B[0] = A[0];
    }
    if (tx == 0) {
        B[1] = A[2];
    }
    if (tx == 0) {
        B[2] = A[4];
    }
}
