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
    __align__(8) float partial[2];
    float* reduce_workspace = (float*)(tl_smem + 0);
    __align__(8) float partial_1[2];
    float* reduce_workspace_1 = (float*)(tl_smem + 2048);
    // T.copy
    {
        #pragma unroll
        for (int step = 0; step < 32; ++step) {
            const int i = step / 16;
            const int j = tx * 4 + step % 4 + step / 4 % 4 * 1024;
            x[i * 16 + j / 1024 * 4 + j % 4] = tl_half_to_float(X[bx * 8192 + i * 4096 + j]);
        }
    }
    // T.reduce_max
    {
        partial[0] = -tl_float_inf();
        partial[0] = (partial[0] > x[0]) ? partial[0] : x[0];
        partial[0] = (partial[0] > x[1]) ? partial[0] : x[1];
        partial[0] = (partial[0] > x[2]) ? partial[0] : x[2];
        partial[0] = (partial[0] > x[3]) ? partial[0] : x[3];
        partial[0] = (partial[0] > x[4]) ? partial[0] : x[4];
        partial[0] = (partial[0] > x[5]) ? partial[0] : x[5];
        partial[0] = (partial[0] > x[6]) ? partial[0] : x[6];
        partial[0] = (partial[0] > x[7]) ? partial[0] : x[7];
        partial[0] = (partial[0] > x[8]) ? partial[0] : x[8];
        partial[0] = (partial[0] > x[9]) ? partial[0] : x[9];
        partial[0] = (partial[0] > x[10]) ? partial[0] : x[10];
        partial[0] = (partial[0] > x[11]) ? partial[0] : x[11];
        partial[0] = (partial[0] > x[12]) ? partial[0] : x[12];
        partial[0] = (partial[0] > x[13]) ? partial[0] : x[13];
        partial[0] = (partial[0] > x[14]) ? partial[0] : x[14];
        partial[0] = (partial[0] > x[15]) ? partial[0] : x[15];
        partial[1] = -tl_float_inf();
        partial[1] = (partial[1] > x[16]) ? partial[1] : x[16];
        partial[1] = (partial[1] > x[17]) ? partial[1] : x[17];
        partial[1] = (partial[1] > x[18]) ? partial[1] : x[18];
        partial[1] = (partial[1] > x[19]) ? partial[1] : x[19];
        partial[1] = (partial[1] > x[20]) ? partial[1] : x[20];
        partial[1] = (partial[1] > x[21]) ? partial[1] : x[21];
        partial[1] = (partial[1] > x[22]) ? partial[1] : x[22];
        partial[1] = (partial[1] > x[23]) ? partial[1] : x[23];
        partial[1] = (partial[1] > x[24]) ? partial[1] : x[24];
        partial[1] = (partial[1] > x[25]) ? partial[1] : x[25];
        partial[1] = (partial[1] > x[26]) ? partial[1] : x[26];
        partial[1] = (partial[1] > x[27]) ? partial[1] : x[27];
        partial[1] = (partial[1] > x[28]) ? partial[1] : x[28];
        partial[1] = (partial[1] > x[29]) ? partial[1] : x[29];
        partial[1] = (partial[1] > x[30]) ? partial[1] : x[30];
        partial[1] = (partial[1] > x[31]) ? partial[1] : x[31];
        const float v133 = __shfl_xor_sync(0xffffffffu, partial[0], 16, 32);
        partial[0] = (partial[0] > v133) ? partial[0] : v133;
        const float v137 = __shfl_xor_sync(0xffffffffu, partial[1], 16, 32);
        partial[1] = (partial[1] > v137) ? partial[1] : v137;
        const float v141 = __shfl_xor_sync(0xffffffffu, partial[0], 8, 32);
        partial[0] = (partial[0] > v141) ? partial[0] : v141;
        const float v145 = __shfl_xor_sync(0xffffffffu, partial[1], 8, 32);
        partial[1] = (partial[1] > v145) ? partial[1] : v145;
        const float v149 = __shfl_xor_sync(0xffffffffu, partial[0], 4, 32);
        partial[0] = (partial[0] > v149) ? partial[0] : v149;
        const float v153 = __shfl_xor_sync(0xffffffffu, partial[1], 4, 32);
        partial[1] = (partial[1] > v153) ? partial[1] : v153;
        const float v157 = __shfl_xor_sync(0xffffffffu, partial[0], 2, 32);
        partial[0] = (partial[0] > v157) ? partial[0] : v157;
        const float v161 = __shfl_xor_sync(0xffffffffu, partial[1], 2, 32);
        partial[1] = (partial[1] > v161) ? partial[1] : v161;
        const float v165 = __shfl_xor_sync(0xffffffffu, partial[0], 1, 32);
        partial[0] = (partial[0] > v165) ? partial[0] : v165;
        const float v169 = __shfl_xor_sync(0xffffffffu, partial[1], 1, 32);
        partial[1] = (partial[1] > v169) ? partial[1] : v169;
        reduce_workspace[tx] = partial[0];
        reduce_workspace[tx + 256] = partial[1];
        __syncthreads();
        partial[0] = reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64];
        partial[0] = (partial[0] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 32]) ? partial[0] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 32];
        partial[0] = (partial[0] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 64]) ? partial[0] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 64];
        partial[0] = (partial[0] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 96]) ? partial[0] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 96];
        partial[0] = (partial[0] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 128]) ? partial[0] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 128];
        partial[0] = (partial[0] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 160]) ? partial[0] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 160];
        partial[0] = (partial[0] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 192]) ? partial[0] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 192];
        partial[0] = (partial[0] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 224]) ? partial[0] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 224];
        partial[1] = reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 256];
        partial[1] = (partial[1] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 288]) ? partial[1] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 288];
        partial[1] = (partial[1] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 320]) ? partial[1] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 320];
        partial[1] = (partial[1] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 352]) ? partial[1] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 352];
        partial[1] = (partial[1] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 384]) ? partial[1] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 384];
        partial[1] = (partial[1] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 416]) ? partial[1] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 416];
        partial[1] = (partial[1] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 448]) ? partial[1] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 448];
        partial[1] = (partial[1] > reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 480]) ? partial[1] : reduce_workspace[tx - tx / 128 * 128 - tx / 32 % 2 * 32 - tx / 64 % 2 * 64 + 480];
        row_max[0] = partial[0];
        row_max[1] = partial[1];
    }
    // T.Parallel(2, 4096)
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 32; ++step_1) {
            const int i_1 = step_1 / 16;
            const int j_1 = tx * 4 + step_1 % 4 + step_1 / 4 % 4 * 1024;
            x[i_1 * 16 + j_1 / 1024 * 4 + j_1 % 4] = expf(x[i_1 * 16 + j_1 / 1024 * 4 + j_1 % 4] - row_max[i_1]);
        }
    }
    // T.reduce_sum
    {
        partial_1[0] = 0.0f;
        partial_1[0] = partial_1[0] + x[0];
        partial_1[0] = partial_1[0] + x[1];
        partial_1[0] = partial_1[0] + x[2];
        partial_1[0] = partial_1[0] + x[3];
        partial_1[0] = partial_1[0] + x[4];
        partial_1[0] = partial_1[0] + x[5];
        partial_1[0] = partial_1[0] + x[6];
        partial_1[0] = partial_1[0] + x[7];
        partial_1[0] = partial_1[0] + x[8];
        partial_1[0] = partial_1[0] + x[9];
        partial_1[0] = partial_1[0] + x[10];
        partial_1[0] = partial_1[0] + x[11];
        partial_1[0] = partial_1[0] + x[12];
        partial_1[0] = partial_1[0] + x[13];
        partial_1[0] = partial_1[0] + x[14];
        partial_1[0] = partial_1[0] + x[15];
        partial_1[1] = 0.0f;
        partial_1[1] = partial_1[1] + x[16];
        partial_1[1] = partial_1[1] + x[17];
        partial_1[1] = partial_1[1] + x[18];
        partial_1[1] = partial_1[1] + x[19];
        partial_1[1] = partial_1[1] + x[20];
        partial_1[1] = partial_1[1] + x[21];
        partial_1[1] = partial_1[1] + x[22];
        partial_1[1] = partial_1[1] + x[23];
        partial_1[1] = partial_1[1] + x[24];
        partial_1[1] = partial_1[1] + x[25];
        partial_1[1] = partial_1[1] + x[26];
        partial_1[1] = partial_1[1] + x[27];
        partial_1[1] = partial_1[1] + x[28];
        partial_1[1] = partial_1[1] + x[29];
        partial_1[1] = partial_1[1] + x[30];
        partial_1[1] = partial_1[1] + x[31];
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
        for (int step_2 = 0; step_2 < 32; ++step_2) {
            const int i_2 = step_2 / 16;
            const int j_2 = tx * 4 + step_2 % 4 + step_2 / 4 % 4 * 1024;
            x[i_2 * 16 + j_2 / 1024 * 4 + j_2 % 4] = x[i_2 * 16 + j_2 / 1024 * 4 + j_2 % 4] / row_sum[i_2];
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_3 = 0; step_3 < 32; ++step_3) {
            const int i_3 = step_3 / 16;
            const int j_3 = tx * 4 + step_3 % 4 + step_3 / 4 % 4 * 1024;
            Y[bx * 8192 + i_3 * 4096 + j_3] = tl_float_to_half(x[i_3 * 16 + j_3 / 1024 * 4 + j_3 % 4]);
        }
    }
}
