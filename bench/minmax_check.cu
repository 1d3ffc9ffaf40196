// What the GPU's fmaxf / fminf (max.f32 / min.f32) return for NaN operands and for zeros of both
// signs, which the emulator's BinaryOp::Max and BinaryOp::Min must reproduce (IEEE 754-2019's
// maximumNumber and minimumNumber: a NaN operand gives the other one, -0 is less than +0).
//
// Usage (on a GPU machine): nvcc -arch=sm_90 -o /tmp/minmax bench/minmax_check.cu && /tmp/minmax
#include <cmath>
#include <cstdio>

__global__ void minmax(const float* a, const float* b, float* out, int n) {
    int i = threadIdx.x;
    if (i < n) {
        out[2 * i] = fmaxf(a[i], b[i]);
        out[2 * i + 1] = fminf(a[i], b[i]);
    }
}

int main() {
    const float nan = std::nanf("");
    const float a[] = {0.0f, -0.0f, nan, 2.0f, nan, -INFINITY};
    const float b[] = {-0.0f, 0.0f, 2.0f, nan, nan, -3.5f};
    const int n = sizeof(a) / sizeof(a[0]);
    float *da, *db, *dout, out[2 * n];
    cudaMalloc(&da, sizeof(a));
    cudaMalloc(&db, sizeof(b));
    cudaMalloc(&dout, sizeof(out));
    cudaMemcpy(da, a, sizeof(a), cudaMemcpyHostToDevice);
    cudaMemcpy(db, b, sizeof(b), cudaMemcpyHostToDevice);
    minmax<<<1, 32>>>(da, db, dout, n);
    cudaMemcpy(out, dout, sizeof(out), cudaMemcpyDeviceToHost);
    for (int i = 0; i < n; ++i) {
        std::printf("max(%g, %g) = %g, min = %g\n", a[i], b[i], out[2 * i], out[2 * i + 1]);
    }
    return 0;
}
