 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(128) row_reduce(
    const float* __restrict__ X,
    float* __restrict__ RowSum,
    float* __restrict__ RowMax) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    extern __shared__ __align__(16) unsigned char tl_smem[];
    __align__(16) float x[32];
    __align__(16) float s[8];
    __align__(16) float m[8];
    __align__(16) float X_vec[4];
    __align__(16) float partial[8];
    __align__(8) float pairs[2];
    float* reduce_workspace = (float*)(tl_smem + 0);
    __align__(16) float partial_1[8];
    __align__(8) float pairs_1[2];
    float* reduce_workspace_1 = (float*)(tl_smem + 4096);
    // T.copy
    {
        #pragma unroll
        for (int chunk = 0; chunk < 8; ++chunk) {
            *(uint4*)(X_vec + 0) = *(const uint4*)(X + bx * 4096 + tx * 4 + chunk * 512);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                x[chunk * 4 + lane] = X_vec[lane];
            }
        }
    }
    // T.reduce_sum
    {
        pairs[0] = x[0] + x[1];
        pairs[1] = x[2] + x[3];
        pairs[0] = pairs[0] + pairs[1];
        partial[0] = 0.0f + pairs[0];
        pairs[0] = x[4] + x[5];
        pairs[1] = x[6] + x[7];
        pairs[0] = pairs[0] + pairs[1];
        partial[1] = 0.0f + pairs[0];
        pairs[0] = x[8] + x[9];
        pairs[1] = x[10] + x[11];
        pairs[0] = pairs[0] + pairs[1];
        partial[2] = 0.0f + pairs[0];
        pairs[0] = x[12] + x[13];
        pairs[1] = x[14] + x[15];
        pairs[0] = pairs[0] + pairs[1];
        partial[3] = 0.0f + pairs[0];
        pairs[0] = x[16] + x[17];
        pairs[1] = x[18] + x[19];
        pairs[0] = pairs[0] + pairs[1];
        partial[4] = 0.0f + pairs[0];
        pairs[0] = x[20] + x[21];
        pairs[1] = x[22] + x[23];
        pairs[0] = pairs[0] + pairs[1];
        partial[5] = 0.0f + pairs[0];
        pairs[0] = x[24] + x[25];
        pairs[1] = x[26] + x[27];
        pairs[0] = pairs[0] + pairs[1];
        partial[6] = 0.0f + pairs[0];
        pairs[0] = x[28] + x[29];
        pairs[1] = x[30] + x[31];
        pairs[0] = pairs[0] + pairs[1];
        partial[7] = 0.0f + pairs[0];
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 16, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 16, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 16, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 16, 32);
        partial[4] = partial[4] + __shfl_xor_sync(0xffffffffu, partial[4], 16, 32);
        partial[5] = partial[5] + __shfl_xor_sync(0xffffffffu, partial[5], 16, 32);
        partial[6] = partial[6] + __shfl_xor_sync(0xffffffffu, partial[6], 16, 32);
        partial[7] = partial[7] + __shfl_xor_sync(0xffffffffu, partial[7], 16, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 8, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 8, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 8, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 8, 32);
        partial[4] = partial[4] + __shfl_xor_sync(0xffffffffu, partial[4], 8, 32);
        partial[5] = partial[5] + __shfl_xor_sync(0xffffffffu, partial[5], 8, 32);
        partial[6] = partial[6] + __shfl_xor_sync(0xffffffffu, partial[6], 8, 32);
        partial[7] = partial[7] + __shfl_xor_sync(0xffffffffu, partial[7], 8, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 4, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 4, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 4, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 4, 32);
        partial[4] = partial[4] + __shfl_xor_sync(0xffffffffu, partial[4], 4, 32);
        partial[5] = partial[5] + __shfl_xor_sync(0xffffffffu, partial[5], 4, 32);
        partial[6] = partial[6] + __shfl_xor_sync(0xffffffffu, partial[6], 4, 32);
        partial[7] = partial[7] + __shfl_xor_sync(0xffffffffu, partial[7], 4, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 2, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 2, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 2, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 2, 32);
        partial[4] = partial[4] + __shfl_xor_sync(0xffffffffu, partial[4], 2, 32);
        partial[5] = partial[5] + __shfl_xor_sync(0xffffffffu, partial[5], 2, 32);
        partial[6] = partial[6] + __shfl_xor_sync(0xffffffffu, partial[6], 2, 32);
        partial[7] = partial[7] + __shfl_xor_sync(0xffffffffu, partial[7], 2, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 1, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 1, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 1, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 1, 32);
        partial[4] = partial[4] + __shfl_xor_sync(0xffffffffu, partial[4], 1, 32);
        partial[5] = partial[5] + __shfl_xor_sync(0xffffffffu, partial[5], 1, 32);
        partial[6] = partial[6] + __shfl_xor_sync(0xffffffffu, partial[6], 1, 32);
        partial[7] = partial[7] + __shfl_xor_sync(0xffffffffu, partial[7], 1, 32);
        reduce_workspace[tx] = partial[0];
        reduce_workspace[tx + 128] = partial[1];
        reduce_workspace[tx + 256] = partial[2];
        reduce_workspace[tx + 384] = partial[3];
        reduce_workspace[tx + 512] = partial[4];
        reduce_workspace[tx + 640] = partial[5];
        reduce_workspace[tx + 768] = partial[6];
        reduce_workspace[tx + 896] = partial[7];
        __syncthreads();
        partial[0] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32];
        partial[0] = partial[0] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 32];
        partial[0] = partial[0] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 64];
        partial[0] = partial[0] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 96];
        partial[1] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 128];
        partial[1] = partial[1] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 160];
        partial[1] = partial[1] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 192];
        partial[1] = partial[1] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 224];
        partial[2] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 256];
        partial[2] = partial[2] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 288];
        partial[2] = partial[2] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 320];
        partial[2] = partial[2] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 352];
        partial[3] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 384];
        partial[3] = partial[3] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 416];
        partial[3] = partial[3] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 448];
        partial[3] = partial[3] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 480];
        partial[4] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 512];
        partial[4] = partial[4] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 544];
        partial[4] = partial[4] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 576];
        partial[4] = partial[4] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 608];
        partial[5] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 640];
        partial[5] = partial[5] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 672];
        partial[5] = partial[5] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 704];
        partial[5] = partial[5] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 736];
        partial[6] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 768];
        partial[6] = partial[6] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 800];
        partial[6] = partial[6] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 832];
        partial[6] = partial[6] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 864];
        partial[7] = reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 896];
        partial[7] = partial[7] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 928];
        partial[7] = partial[7] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 960];
        partial[7] = partial[7] + reduce_workspace[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 992];
        s[0] = partial[0];
        s[1] = partial[1];
        s[2] = partial[2];
        s[3] = partial[3];
        s[4] = partial[4];
        s[5] = partial[5];
        s[6] = partial[6];
        s[7] = partial[7];
    }
    // T.reduce_max
    {
        pairs_1[0] = fmaxf(x[0], x[1]);
        pairs_1[1] = fmaxf(x[2], x[3]);
        pairs_1[0] = fmaxf(pairs_1[0], pairs_1[1]);
        partial_1[0] = fmaxf(-tl_float_inf(), pairs_1[0]);
        pairs_1[0] = fmaxf(x[4], x[5]);
        pairs_1[1] = fmaxf(x[6], x[7]);
        pairs_1[0] = fmaxf(pairs_1[0], pairs_1[1]);
        partial_1[1] = fmaxf(-tl_float_inf(), pairs_1[0]);
        pairs_1[0] = fmaxf(x[8], x[9]);
        pairs_1[1] = fmaxf(x[10], x[11]);
        pairs_1[0] = fmaxf(pairs_1[0], pairs_1[1]);
        partial_1[2] = fmaxf(-tl_float_inf(), pairs_1[0]);
        pairs_1[0] = fmaxf(x[12], x[13]);
        pairs_1[1] = fmaxf(x[14], x[15]);
        pairs_1[0] = fmaxf(pairs_1[0], pairs_1[1]);
        partial_1[3] = fmaxf(-tl_float_inf(), pairs_1[0]);
        pairs_1[0] = fmaxf(x[16], x[17]);
        pairs_1[1] = fmaxf(x[18], x[19]);
        pairs_1[0] = fmaxf(pairs_1[0], pairs_1[1]);
        partial_1[4] = fmaxf(-tl_float_inf(), pairs_1[0]);
        pairs_1[0] = fmaxf(x[20], x[21]);
        pairs_1[1] = fmaxf(x[22], x[23]);
        pairs_1[0] = fmaxf(pairs_1[0], pairs_1[1]);
        partial_1[5] = fmaxf(-tl_float_inf(), pairs_1[0]);
        pairs_1[0] = fmaxf(x[24], x[25]);
        pairs_1[1] = fmaxf(x[26], x[27]);
        pairs_1[0] = fmaxf(pairs_1[0], pairs_1[1]);
        partial_1[6] = fmaxf(-tl_float_inf(), pairs_1[0]);
        pairs_1[0] = fmaxf(x[28], x[29]);
        pairs_1[1] = fmaxf(x[30], x[31]);
        pairs_1[0] = fmaxf(pairs_1[0], pairs_1[1]);
        partial_1[7] = fmaxf(-tl_float_inf(), pairs_1[0]);
        partial_1[0] = fmaxf(partial_1[0], __shfl_xor_sync(0xffffffffu, partial_1[0], 16, 32));
        partial_1[1] = fmaxf(partial_1[1], __shfl_xor_sync(0xffffffffu, partial_1[1], 16, 32));
        partial_1[2] = fmaxf(partial_1[2], __shfl_xor_sync(0xffffffffu, partial_1[2], 16, 32));
        partial_1[3] = fmaxf(partial_1[3], __shfl_xor_sync(0xffffffffu, partial_1[3], 16, 32));
        partial_1[4] = fmaxf(partial_1[4], __shfl_xor_sync(0xffffffffu, partial_1[4], 16, 32));
        partial_1[5] = fmaxf(partial_1[5], __shfl_xor_sync(0xffffffffu, partial_1[5], 16, 32));
        partial_1[6] = fmaxf(partial_1[6], __shfl_xor_sync(0xffffffffu, partial_1[6], 16, 32));
        partial_1[7] = fmaxf(partial_1[7], __shfl_xor_sync(0xffffffffu, partial_1[7], 16, 32));
        partial_1[0] = fmaxf(partial_1[0], __shfl_xor_sync(0xffffffffu, partial_1[0], 8, 32));
        partial_1[1] = fmaxf(partial_1[1], __shfl_xor_sync(0xffffffffu, partial_1[1], 8, 32));
        partial_1[2] = fmaxf(partial_1[2], __shfl_xor_sync(0xffffffffu, partial_1[2], 8, 32));
        partial_1[3] = fmaxf(partial_1[3], __shfl_xor_sync(0xffffffffu, partial_1[3], 8, 32));
        partial_1[4] = fmaxf(partial_1[4], __shfl_xor_sync(0xffffffffu, partial_1[4], 8, 32));
        partial_1[5] = fmaxf(partial_1[5], __shfl_xor_sync(0xffffffffu, partial_1[5], 8, 32));
        partial_1[6] = fmaxf(partial_1[6], __shfl_xor_sync(0xffffffffu, partial_1[6], 8, 32));
        partial_1[7] = fmaxf(partial_1[7], __shfl_xor_sync(0xffffffffu, partial_1[7], 8, 32));
        partial_1[0] = fmaxf(partial_1[0], __shfl_xor_sync(0xffffffffu, partial_1[0], 4, 32));
        partial_1[1] = fmaxf(partial_1[1], __shfl_xor_sync(0xffffffffu, partial_1[1], 4, 32));
        partial_1[2] = fmaxf(partial_1[2], __shfl_xor_sync(0xffffffffu, partial_1[2], 4, 32));
        partial_1[3] = fmaxf(partial_1[3], __shfl_xor_sync(0xffffffffu, partial_1[3], 4, 32));
        partial_1[4] = fmaxf(partial_1[4], __shfl_xor_sync(0xffffffffu, partial_1[4], 4, 32));
        partial_1[5] = fmaxf(partial_1[5], __shfl_xor_sync(0xffffffffu, partial_1[5], 4, 32));
        partial_1[6] = fmaxf(partial_1[6], __shfl_xor_sync(0xffffffffu, partial_1[6], 4, 32));
        partial_1[7] = fmaxf(partial_1[7], __shfl_xor_sync(0xffffffffu, partial_1[7], 4, 32));
        partial_1[0] = fmaxf(partial_1[0], __shfl_xor_sync(0xffffffffu, partial_1[0], 2, 32));
        partial_1[1] = fmaxf(partial_1[1], __shfl_xor_sync(0xffffffffu, partial_1[1], 2, 32));
        partial_1[2] = fmaxf(partial_1[2], __shfl_xor_sync(0xffffffffu, partial_1[2], 2, 32));
        partial_1[3] = fmaxf(partial_1[3], __shfl_xor_sync(0xffffffffu, partial_1[3], 2, 32));
        partial_1[4] = fmaxf(partial_1[4], __shfl_xor_sync(0xffffffffu, partial_1[4], 2, 32));
        partial_1[5] = fmaxf(partial_1[5], __shfl_xor_sync(0xffffffffu, partial_1[5], 2, 32));
        partial_1[6] = fmaxf(partial_1[6], __shfl_xor_sync(0xffffffffu, partial_1[6], 2, 32));
        partial_1[7] = fmaxf(partial_1[7], __shfl_xor_sync(0xffffffffu, partial_1[7], 2, 32));
        partial_1[0] = fmaxf(partial_1[0], __shfl_xor_sync(0xffffffffu, partial_1[0], 1, 32));
        partial_1[1] = fmaxf(partial_1[1], __shfl_xor_sync(0xffffffffu, partial_1[1], 1, 32));
        partial_1[2] = fmaxf(partial_1[2], __shfl_xor_sync(0xffffffffu, partial_1[2], 1, 32));
        partial_1[3] = fmaxf(partial_1[3], __shfl_xor_sync(0xffffffffu, partial_1[3], 1, 32));
        partial_1[4] = fmaxf(partial_1[4], __shfl_xor_sync(0xffffffffu, partial_1[4], 1, 32));
        partial_1[5] = fmaxf(partial_1[5], __shfl_xor_sync(0xffffffffu, partial_1[5], 1, 32));
        partial_1[6] = fmaxf(partial_1[6], __shfl_xor_sync(0xffffffffu, partial_1[6], 1, 32));
        partial_1[7] = fmaxf(partial_1[7], __shfl_xor_sync(0xffffffffu, partial_1[7], 1, 32));
        reduce_workspace_1[tx] = partial_1[0];
        reduce_workspace_1[tx + 128] = partial_1[1];
        reduce_workspace_1[tx + 256] = partial_1[2];
        reduce_workspace_1[tx + 384] = partial_1[3];
        reduce_workspace_1[tx + 512] = partial_1[4];
        reduce_workspace_1[tx + 640] = partial_1[5];
        reduce_workspace_1[tx + 768] = partial_1[6];
        reduce_workspace_1[tx + 896] = partial_1[7];
        __syncthreads();
        partial_1[0] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32];
        partial_1[0] = fmaxf(partial_1[0], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 32]);
        partial_1[0] = fmaxf(partial_1[0], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 64]);
        partial_1[0] = fmaxf(partial_1[0], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 96]);
        partial_1[1] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 128];
        partial_1[1] = fmaxf(partial_1[1], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 160]);
        partial_1[1] = fmaxf(partial_1[1], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 192]);
        partial_1[1] = fmaxf(partial_1[1], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 224]);
        partial_1[2] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 256];
        partial_1[2] = fmaxf(partial_1[2], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 288]);
        partial_1[2] = fmaxf(partial_1[2], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 320]);
        partial_1[2] = fmaxf(partial_1[2], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 352]);
        partial_1[3] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 384];
        partial_1[3] = fmaxf(partial_1[3], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 416]);
        partial_1[3] = fmaxf(partial_1[3], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 448]);
        partial_1[3] = fmaxf(partial_1[3], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 480]);
        partial_1[4] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 512];
        partial_1[4] = fmaxf(partial_1[4], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 544]);
        partial_1[4] = fmaxf(partial_1[4], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 576]);
        partial_1[4] = fmaxf(partial_1[4], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 608]);
        partial_1[5] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 640];
        partial_1[5] = fmaxf(partial_1[5], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 672]);
        partial_1[5] = fmaxf(partial_1[5], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 704]);
        partial_1[5] = fmaxf(partial_1[5], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 736]);
        partial_1[6] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 768];
        partial_1[6] = fmaxf(partial_1[6], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 800]);
        partial_1[6] = fmaxf(partial_1[6], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 832]);
        partial_1[6] = fmaxf(partial_1[6], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 864]);
        partial_1[7] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 896];
        partial_1[7] = fmaxf(partial_1[7], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 928]);
        partial_1[7] = fmaxf(partial_1[7], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 960]);
        partial_1[7] = fmaxf(partial_1[7], reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 992]);
        m[0] = partial_1[0];
        m[1] = partial_1[1];
        m[2] = partial_1[2];
        m[3] = partial_1[3];
        m[4] = partial_1[4];
        m[5] = partial_1[5];
        m[6] = partial_1[6];
        m[7] = partial_1[7];
    }
    // T.copy
    {
        #pragma unroll
        for (int step = 0; step < 1; ++step) {
            if ((tx / 8) == 0) {
                RowSum[bx * 8 + tx % 8] = s[tx % 8];
            }
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 1; ++step_1) {
            if ((tx / 8) == 0) {
                RowMax[bx * 8 + tx % 8] = m[tx % 8];
            }
        }
    }
}
