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
    float* reduce_workspace = (float*)(tl_smem + 0);
    __align__(8) float partial_1[2];
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
        const float v139 = __shfl_xor_sync(0xffffffffu, partial[0], 16, 32);
        partial[0] = (partial[0] > v139) ? partial[0] : v139;
        const float v143 = __shfl_xor_sync(0xffffffffu, partial[1], 16, 32);
        partial[1] = (partial[1] > v143) ? partial[1] : v143;
        const float v147 = __shfl_xor_sync(0xffffffffu, partial[0], 8, 32);
        partial[0] = (partial[0] > v147) ? partial[0] : v147;
        const float v151 = __shfl_xor_sync(0xffffffffu, partial[1], 8, 32);
        partial[1] = (partial[1] > v151) ? partial[1] : v151;
        const float v155 = __shfl_xor_sync(0xffffffffu, partial[0], 4, 32);
        partial[0] = (partial[0] > v155) ? partial[0] : v155;
        const float v159 = __shfl_xor_sync(0xffffffffu, partial[1], 4, 32);
        partial[1] = (partial[1] > v159) ? partial[1] : v159;
        const float v163 = __shfl_xor_sync(0xffffffffu, partial[0], 2, 32);
        partial[0] = (partial[0] > v163) ? partial[0] : v163;
        const float v167 = __shfl_xor_sync(0xffffffffu, partial[1], 2, 32);
        partial[1] = (partial[1] > v167) ? partial[1] : v167;
        const float v171 = __shfl_xor_sync(0xffffffffu, partial[0], 1, 32);
        partial[0] = (partial[0] > v171) ? partial[0] : v171;
        const float v175 = __shfl_xor_sync(0xffffffffu, partial[1], 1, 32);
        partial[1] = (partial[1] > v175) ? partial[1] : v175;
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
        for (int step = 0; step < 32; ++step) {
            x[step / 16 * 16 + step % 4 + step / 4 % 4 * 4] = expf(x[step / 16 * 16 + step % 4 + step / 4 % 4 * 4] - row_max[step / 16]);
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
        for (int step_1 = 0; step_1 < 32; ++step_1) {
            x[step_1 / 16 * 16 + step_1 % 4 + step_1 / 4 % 4 * 4] = x[step_1 / 16 * 16 + step_1 % 4 + step_1 / 4 % 4 * 4] / row_sum[step_1 / 16];
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
