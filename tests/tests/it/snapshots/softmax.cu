 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(256) softmax(
    const tl_half* __restrict__ X,
    tl_half* __restrict__ Y) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    extern __shared__ __align__(16) unsigned char tl_smem[];
    __align__(16) float x[32];
    __align__(8) float row_max[2];
    __align__(8) float row_sum[2];
    __align__(8) tl_half X_vec[4];
    __align__(8) float partial[2];
    __align__(16) float pairs[8];
    float* reduce_workspace = (float*)(tl_smem + 0);
    __align__(8) float partial_1[2];
    __align__(16) float pairs_1[8];
    float* reduce_workspace_1 = (float*)(tl_smem + 2048);
    __align__(8) tl_half Y_vec[4];
    // T.copy
    {
        #pragma unroll
        for (int chunk = 0; chunk < 8; ++chunk) {
            *(uint2*)(X_vec + 0) = *(const uint2*)(X + bx * 8192 + tx * 4 + chunk / 4 * 4096 + chunk % 4 * 1024);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                x[chunk / 4 * 16 + chunk % 4 * 4 + lane] = tl_half_to_float(X_vec[lane]);
            }
        }
    }
    // T.reduce_max
    {
        pairs[0] = fmaxf(x[0], x[1]);
        pairs[1] = fmaxf(x[2], x[3]);
        pairs[2] = fmaxf(x[4], x[5]);
        pairs[3] = fmaxf(x[6], x[7]);
        pairs[4] = fmaxf(x[8], x[9]);
        pairs[5] = fmaxf(x[10], x[11]);
        pairs[6] = fmaxf(x[12], x[13]);
        pairs[7] = fmaxf(x[14], x[15]);
        pairs[0] = fmaxf(pairs[0], pairs[1]);
        pairs[1] = fmaxf(pairs[2], pairs[3]);
        pairs[2] = fmaxf(pairs[4], pairs[5]);
        pairs[3] = fmaxf(pairs[6], pairs[7]);
        pairs[0] = fmaxf(pairs[0], pairs[1]);
        pairs[1] = fmaxf(pairs[2], pairs[3]);
        pairs[0] = fmaxf(pairs[0], pairs[1]);
        partial[0] = fmaxf(-tl_float_inf(), pairs[0]);
        pairs[0] = fmaxf(x[16], x[17]);
        pairs[1] = fmaxf(x[18], x[19]);
        pairs[2] = fmaxf(x[20], x[21]);
        pairs[3] = fmaxf(x[22], x[23]);
        pairs[4] = fmaxf(x[24], x[25]);
        pairs[5] = fmaxf(x[26], x[27]);
        pairs[6] = fmaxf(x[28], x[29]);
        pairs[7] = fmaxf(x[30], x[31]);
        pairs[0] = fmaxf(pairs[0], pairs[1]);
        pairs[1] = fmaxf(pairs[2], pairs[3]);
        pairs[2] = fmaxf(pairs[4], pairs[5]);
        pairs[3] = fmaxf(pairs[6], pairs[7]);
        pairs[0] = fmaxf(pairs[0], pairs[1]);
        pairs[1] = fmaxf(pairs[2], pairs[3]);
        pairs[0] = fmaxf(pairs[0], pairs[1]);
        partial[1] = fmaxf(-tl_float_inf(), pairs[0]);
        partial[0] = fmaxf(partial[0], __shfl_xor_sync(0xffffffffu, partial[0], 16, 32));
        partial[1] = fmaxf(partial[1], __shfl_xor_sync(0xffffffffu, partial[1], 16, 32));
        partial[0] = fmaxf(partial[0], __shfl_xor_sync(0xffffffffu, partial[0], 8, 32));
        partial[1] = fmaxf(partial[1], __shfl_xor_sync(0xffffffffu, partial[1], 8, 32));
        partial[0] = fmaxf(partial[0], __shfl_xor_sync(0xffffffffu, partial[0], 4, 32));
        partial[1] = fmaxf(partial[1], __shfl_xor_sync(0xffffffffu, partial[1], 4, 32));
        partial[0] = fmaxf(partial[0], __shfl_xor_sync(0xffffffffu, partial[0], 2, 32));
        partial[1] = fmaxf(partial[1], __shfl_xor_sync(0xffffffffu, partial[1], 2, 32));
        partial[0] = fmaxf(partial[0], __shfl_xor_sync(0xffffffffu, partial[0], 1, 32));
        partial[1] = fmaxf(partial[1], __shfl_xor_sync(0xffffffffu, partial[1], 1, 32));
        reduce_workspace[tx] = partial[0];
        reduce_workspace[tx + 256] = partial[1];
        __syncthreads();
        partial[0] = reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64];
        partial[0] = fmaxf(partial[0], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 32]);
        partial[0] = fmaxf(partial[0], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 64]);
        partial[0] = fmaxf(partial[0], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 96]);
        partial[0] = fmaxf(partial[0], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 128]);
        partial[0] = fmaxf(partial[0], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 160]);
        partial[0] = fmaxf(partial[0], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 192]);
        partial[0] = fmaxf(partial[0], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 224]);
        partial[1] = reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 256];
        partial[1] = fmaxf(partial[1], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 288]);
        partial[1] = fmaxf(partial[1], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 320]);
        partial[1] = fmaxf(partial[1], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 352]);
        partial[1] = fmaxf(partial[1], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 384]);
        partial[1] = fmaxf(partial[1], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 416]);
        partial[1] = fmaxf(partial[1], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 448]);
        partial[1] = fmaxf(partial[1], reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 480]);
        row_max[0] = partial[0];
        row_max[1] = partial[1];
    }
    // T.Parallel(2, 4096)
    {
        #pragma unroll
        for (int step = 0; step < 32; ++step) {
            x[step / 16 * 16 + step % 4 + step / 4 % 4 * 4] = expf(x[step / 16 * 16 + step % 4 + step / 4 % 4 * 4] - row_max[step / 16]);
        }
    }
    // T.reduce_sum
    {
        pairs_1[0] = x[0] + x[1];
        pairs_1[1] = x[2] + x[3];
        pairs_1[2] = x[4] + x[5];
        pairs_1[3] = x[6] + x[7];
        pairs_1[4] = x[8] + x[9];
        pairs_1[5] = x[10] + x[11];
        pairs_1[6] = x[12] + x[13];
        pairs_1[7] = x[14] + x[15];
        pairs_1[0] = pairs_1[0] + pairs_1[1];
        pairs_1[1] = pairs_1[2] + pairs_1[3];
        pairs_1[2] = pairs_1[4] + pairs_1[5];
        pairs_1[3] = pairs_1[6] + pairs_1[7];
        pairs_1[0] = pairs_1[0] + pairs_1[1];
        pairs_1[1] = pairs_1[2] + pairs_1[3];
        pairs_1[0] = pairs_1[0] + pairs_1[1];
        partial_1[0] = 0.0f + pairs_1[0];
        pairs_1[0] = x[16] + x[17];
        pairs_1[1] = x[18] + x[19];
        pairs_1[2] = x[20] + x[21];
        pairs_1[3] = x[22] + x[23];
        pairs_1[4] = x[24] + x[25];
        pairs_1[5] = x[26] + x[27];
        pairs_1[6] = x[28] + x[29];
        pairs_1[7] = x[30] + x[31];
        pairs_1[0] = pairs_1[0] + pairs_1[1];
        pairs_1[1] = pairs_1[2] + pairs_1[3];
        pairs_1[2] = pairs_1[4] + pairs_1[5];
        pairs_1[3] = pairs_1[6] + pairs_1[7];
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
        reduce_workspace_1[tx + 256] = partial_1[1];
        __syncthreads();
        partial_1[0] = reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 32];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 64];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 96];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 128];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 160];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 192];
        partial_1[0] = partial_1[0] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 224];
        partial_1[1] = reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 256];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 288];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 320];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 352];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 384];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 416];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 448];
        partial_1[1] = partial_1[1] + reduce_workspace_1[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 480];
        row_sum[0] = partial_1[0];
        row_sum[1] = partial_1[1];
    }
    // T.Parallel(2, 4096)
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 32; ++step_1) {
            x[step_1 / 16 * 16 + step_1 % 4 + step_1 / 4 % 4 * 4] = tl_div(x[step_1 / 16 * 16 + step_1 % 4 + step_1 / 4 % 4 * 4], row_sum[step_1 / 16]);
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int chunk_1 = 0; chunk_1 < 8; ++chunk_1) {
            #pragma unroll
            for (int lane_1 = 0; lane_1 < 4; ++lane_1) {
                Y_vec[lane_1] = tl_float_to_half(x[chunk_1 / 4 * 16 + chunk_1 % 4 * 4 + lane_1]);
            }
            *(uint2*)(Y + bx * 8192 + tx * 4 + chunk_1 / 4 * 4096 + chunk_1 % 4 * 1024) = *(const uint2*)(Y_vec + 0);
        }
    }
}
