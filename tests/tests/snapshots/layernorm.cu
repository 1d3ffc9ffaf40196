 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(128) layernorm(
    const tl_bfloat16* __restrict__ X,
    const tl_bfloat16* __restrict__ W,
    const tl_bfloat16* __restrict__ Bias,
    tl_bfloat16* __restrict__ Y) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    extern __shared__ __align__(16) unsigned char tl_smem[];
    __align__(16) float x[16];
    __align__(16) float sq[16];
    __align__(16) float w[8];
    __align__(16) float b[8];
    __align__(8) float mean[2];
    __align__(8) float rstd[2];
    __align__(8) float partial[2];
    float* reduce_workspace = (float*)(tl_smem + 0);
    __align__(8) float partial_1[2];
    float* reduce_workspace_1 = (float*)(tl_smem + 1024);
    // T.copy
    {
        #pragma unroll
        for (int step = 0; step < 16; ++step) {
            const int i = step / 8;
            const int j = tx * 4 + step % 4 + step / 4 % 2 * 512;
            x[i * 8 + j / 512 * 4 + j % 4] = tl_bfloat16_to_float(X[bx * 2048 + i * 1024 + j]);
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 8; ++step_1) {
            const int i_1 = tx * 4 + step_1 / 4 * 512 + step_1 % 4;
            w[i_1 / 512 * 4 + i_1 % 4] = tl_bfloat16_to_float(W[i_1]);
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_2 = 0; step_2 < 8; ++step_2) {
            const int i_2 = tx * 4 + step_2 / 4 * 512 + step_2 % 4;
            b[i_2 / 512 * 4 + i_2 % 4] = tl_bfloat16_to_float(Bias[i_2]);
        }
    }
    // T.reduce_sum
    {
        partial[0] = 0.0f;
        partial[0] = partial[0] + x[0];
        partial[0] = partial[0] + x[1];
        partial[0] = partial[0] + x[2];
        partial[0] = partial[0] + x[3];
        partial[0] = partial[0] + x[4];
        partial[0] = partial[0] + x[5];
        partial[0] = partial[0] + x[6];
        partial[0] = partial[0] + x[7];
        partial[1] = 0.0f;
        partial[1] = partial[1] + x[8];
        partial[1] = partial[1] + x[9];
        partial[1] = partial[1] + x[10];
        partial[1] = partial[1] + x[11];
        partial[1] = partial[1] + x[12];
        partial[1] = partial[1] + x[13];
        partial[1] = partial[1] + x[14];
        partial[1] = partial[1] + x[15];
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 16, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 16, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 8, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 8, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 4, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 4, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 2, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 2, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 1, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 1, 32);
        reduce_workspace[tx] = partial[0];
        reduce_workspace[tx + 128] = partial[1];
        __syncthreads();
        partial[0] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32];
        partial[0] = partial[0] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 32];
        partial[0] = partial[0] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 64];
        partial[0] = partial[0] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 96];
        partial[1] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 128];
        partial[1] = partial[1] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 160];
        partial[1] = partial[1] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 192];
        partial[1] = partial[1] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 224];
        mean[0] = partial[0];
        mean[1] = partial[1];
    }
    // T.Parallel(2)
    {
        #pragma unroll
        for (int step_3 = 0; step_3 < 2; ++step_3) {
            const int i_3 = step_3;
            const int rep = tx;
            mean[i_3] = __fmul_rn(mean[i_3], 0.0009765625f);
        }
    }
    // T.Parallel(2, 1024)
    {
        #pragma unroll
        for (int step_4 = 0; step_4 < 16; ++step_4) {
            const int i_4 = step_4 / 8;
            const int j_1 = tx * 4 + step_4 % 4 + step_4 / 4 % 2 * 512;
            x[i_4 * 8 + j_1 / 512 * 4 + j_1 % 4] = x[i_4 * 8 + j_1 / 512 * 4 + j_1 % 4] - mean[i_4];
            sq[i_4 * 8 + j_1 / 512 * 4 + j_1 % 4] = __fmul_rn(x[i_4 * 8 + j_1 / 512 * 4 + j_1 % 4], x[i_4 * 8 + j_1 / 512 * 4 + j_1 % 4]);
        }
    }
    // T.reduce_sum
    {
        partial_1[0] = 0.0f;
        partial_1[0] = partial_1[0] + sq[0];
        partial_1[0] = partial_1[0] + sq[1];
        partial_1[0] = partial_1[0] + sq[2];
        partial_1[0] = partial_1[0] + sq[3];
        partial_1[0] = partial_1[0] + sq[4];
        partial_1[0] = partial_1[0] + sq[5];
        partial_1[0] = partial_1[0] + sq[6];
        partial_1[0] = partial_1[0] + sq[7];
        partial_1[1] = 0.0f;
        partial_1[1] = partial_1[1] + sq[8];
        partial_1[1] = partial_1[1] + sq[9];
        partial_1[1] = partial_1[1] + sq[10];
        partial_1[1] = partial_1[1] + sq[11];
        partial_1[1] = partial_1[1] + sq[12];
        partial_1[1] = partial_1[1] + sq[13];
        partial_1[1] = partial_1[1] + sq[14];
        partial_1[1] = partial_1[1] + sq[15];
        partial_1[0] = partial_1[0] + __shfl_xor_sync(0xffffffffu, partial_1[0], 16, 32);
        partial_1[1] = partial_1[1] + __shfl_xor_sync(0xffffffffu, partial_1[1], 16, 32);
        partial_1[0] = partial_1[0] + __shfl_xor_sync(0xffffffffu, partial_1[0], 8, 32);
        partial_1[1] = partial_1[1] + __shfl_xor_sync(0xffffffffu, partial_1[1], 8, 32);
        partial_1[0] = partial_1[0] + __shfl_xor_sync(0xffffffffu, partial_1[0], 4, 32);
        partial_1[1] = partial_1[1] + __shfl_xor_sync(0xffffffffu, partial_1[1], 4, 32);
        partial_1[0] = partial_1[0] + __shfl_xor_sync(0xffffffffu, partial_1[0], 2, 32);
        partial_1[1] = partial_1[1] + __shfl_xor_sync(0xffffffffu, partial_1[1], 2, 32);
        partial_1[0] = partial_1[0] + __shfl_xor_sync(0xffffffffu, partial_1[0], 1, 32);
        partial_1[1] = partial_1[1] + __shfl_xor_sync(0xffffffffu, partial_1[1], 1, 32);
        reduce_workspace_1[tx] = partial_1[0];
        reduce_workspace_1[tx + 128] = partial_1[1];
        __syncthreads();
        partial_1[0] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 32];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 64];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 96];
        partial_1[1] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 128];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 160];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 192];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 224];
        rstd[0] = partial_1[0];
        rstd[1] = partial_1[1];
    }
    // T.Parallel(2)
    {
        #pragma unroll
        for (int step_5 = 0; step_5 < 2; ++step_5) {
            const int i_5 = step_5;
            const int rep_1 = tx;
            rstd[i_5] = rsqrtf(__fmul_rn(rstd[i_5], 0.0009765625f) + 0x1.4f8b58p-17f);
        }
    }
    // T.Parallel(2, 1024)
    {
        #pragma unroll
        for (int step_6 = 0; step_6 < 16; ++step_6) {
            const int i_6 = step_6 / 8;
            const int j_2 = tx * 4 + step_6 % 4 + step_6 / 4 % 2 * 512;
            Y[bx * 2048 + i_6 * 1024 + j_2] = tl_float_to_bfloat16(__fmul_rn(__fmul_rn(x[i_6 * 8 + j_2 / 512 * 4 + j_2 % 4], rstd[i_6]), w[j_2 / 512 * 4 + j_2 % 4]) + b[j_2 / 512 * 4 + j_2 % 4]);
        }
    }
}
