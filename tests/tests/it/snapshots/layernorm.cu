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
    __align__(8) tl_bfloat16 X_vec[4];
    __align__(8) tl_bfloat16 W_vec[4];
    __align__(8) tl_bfloat16 Bias_vec[4];
    __align__(8) float partial[2];
    __align__(16) float pairs[4];
    float* reduce_workspace = (float*)(tl_smem + 0);
    __align__(8) float partial_1[2];
    __align__(16) float pairs_1[4];
    float* reduce_workspace_1 = (float*)(tl_smem + 1024);
    __align__(8) tl_bfloat16 Y_vec[4];
    // T.copy
    {
        #pragma unroll
        for (int chunk = 0; chunk < 4; ++chunk) {
            *(uint2*)(X_vec + 0) = *(const uint2*)(X + bx * 2048 + tx * 4 + chunk / 2 * 1024 + chunk % 2 * 512);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                x[chunk / 2 * 8 + chunk % 2 * 4 + lane] = tl_bfloat16_to_float(X_vec[lane]);
            }
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int chunk_1 = 0; chunk_1 < 2; ++chunk_1) {
            *(uint2*)(W_vec + 0) = *(const uint2*)(W + tx * 4 + chunk_1 * 512);
            #pragma unroll
            for (int lane_1 = 0; lane_1 < 4; ++lane_1) {
                w[chunk_1 * 4 + lane_1] = tl_bfloat16_to_float(W_vec[lane_1]);
            }
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int chunk_2 = 0; chunk_2 < 2; ++chunk_2) {
            *(uint2*)(Bias_vec + 0) = *(const uint2*)(Bias + tx * 4 + chunk_2 * 512);
            #pragma unroll
            for (int lane_2 = 0; lane_2 < 4; ++lane_2) {
                b[chunk_2 * 4 + lane_2] = tl_bfloat16_to_float(Bias_vec[lane_2]);
            }
        }
    }
    // T.reduce_sum
    {
        pairs[0] = x[0] + x[1];
        pairs[1] = x[2] + x[3];
        pairs[2] = x[4] + x[5];
        pairs[3] = x[6] + x[7];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[0] = pairs[0] + pairs[1];
        partial[0] = 0.0f + pairs[0];
        pairs[0] = x[8] + x[9];
        pairs[1] = x[10] + x[11];
        pairs[2] = x[12] + x[13];
        pairs[3] = x[14] + x[15];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[0] = pairs[0] + pairs[1];
        partial[1] = 0.0f + pairs[0];
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
        for (int step = 0; step < 2; ++step) {
            mean[step] = __fmul_rn(mean[step], 0.0009765625f);
        }
    }
    // T.Parallel(2, 1024)
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 16; ++step_1) {
            x[step_1 / 8 * 8 + step_1 % 4 + step_1 / 4 % 2 * 4] = x[step_1 / 8 * 8 + step_1 % 4 + step_1 / 4 % 2 * 4] - mean[step_1 / 8];
            sq[step_1 / 8 * 8 + step_1 % 4 + step_1 / 4 % 2 * 4] = __fmul_rn(x[step_1 / 8 * 8 + step_1 % 4 + step_1 / 4 % 2 * 4], x[step_1 / 8 * 8 + step_1 % 4 + step_1 / 4 % 2 * 4]);
        }
    }
    // T.reduce_sum
    {
        pairs_1[0] = sq[0] + sq[1];
        pairs_1[1] = sq[2] + sq[3];
        pairs_1[2] = sq[4] + sq[5];
        pairs_1[3] = sq[6] + sq[7];
        pairs_1[0] = pairs_1[0] + pairs_1[1];
        pairs_1[1] = pairs_1[2] + pairs_1[3];
        pairs_1[0] = pairs_1[0] + pairs_1[1];
        partial_1[0] = 0.0f + pairs_1[0];
        pairs_1[0] = sq[8] + sq[9];
        pairs_1[1] = sq[10] + sq[11];
        pairs_1[2] = sq[12] + sq[13];
        pairs_1[3] = sq[14] + sq[15];
        pairs_1[0] = pairs_1[0] + pairs_1[1];
        pairs_1[1] = pairs_1[2] + pairs_1[3];
        pairs_1[0] = pairs_1[0] + pairs_1[1];
        partial_1[1] = 0.0f + pairs_1[0];
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
        for (int step_2 = 0; step_2 < 2; ++step_2) {
            rstd[step_2] = rsqrtf(fmaf(rstd[step_2], 0.0009765625f, 0x1.4f8b58p-17f));
        }
    }
    // T.Parallel(2, 1024)
    {
        #pragma unroll
        for (int chunk_3 = 0; chunk_3 < 4; ++chunk_3) {
            #pragma unroll
            for (int lane_3 = 0; lane_3 < 4; ++lane_3) {
                Y_vec[lane_3] = tl_float_to_bfloat16(fmaf(__fmul_rn(x[chunk_3 / 2 * 8 + chunk_3 % 2 * 4 + lane_3], rstd[chunk_3 / 2]), w[chunk_3 % 2 * 4 + lane_3], b[chunk_3 % 2 * 4 + lane_3]));
            }
            *(uint2*)(Y + bx * 2048 + tx * 4 + chunk_3 / 2 * 1024 + chunk_3 % 2 * 512) = *(const uint2*)(Y_vec + 0);
        }
    }
}
