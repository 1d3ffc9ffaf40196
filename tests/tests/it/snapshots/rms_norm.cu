 -----------------------------------------------------------------

extern "C" __global__ void __launch_bounds__(128) rms_norm(
    const float* __restrict__ X,
    float* __restrict__ Y) {
    const int tx = threadIdx.x;
    const int bx = blockIdx.x;
    const int by = blockIdx.y;
    const int bz = blockIdx.z;
    extern __shared__ __align__(16) unsigned char tl_smem[];
    __align__(16) float x[64];
    __align__(16) float sq[64];
    __align__(16) float ssum[4];
    __align__(16) float X_vec[4];
    __align__(16) float partial[4];
    __align__(16) float pairs[8];
    float* reduce_workspace = (float*)(tl_smem + 0);
    __align__(16) float Y_vec[4];
    // T.copy
    {
        #pragma unroll
        for (int chunk = 0; chunk < 16; ++chunk) {
            *(uint4*)(X_vec + 0) = *(const uint4*)(X + bx * 8192 + tx * 4 + chunk / 4 * 2048 + chunk % 4 * 512);
            #pragma unroll
            for (int lane = 0; lane < 4; ++lane) {
                x[chunk / 4 * 16 + chunk % 4 * 4 + lane] = X_vec[lane];
            }
        }
    }
    // T.Parallel(4, 2048)
    {
        #pragma unroll
        for (int step = 0; step < 64; ++step) {
            sq[step / 16 * 16 + step % 4 + step / 4 % 4 * 4] = __fmul_rn(x[step / 16 * 16 + step % 4 + step / 4 % 4 * 4], x[step / 16 * 16 + step % 4 + step / 4 % 4 * 4]);
        }
    }
    // T.reduce_sum
    {
        pairs[0] = sq[0] + sq[1];
        pairs[1] = sq[2] + sq[3];
        pairs[2] = sq[4] + sq[5];
        pairs[3] = sq[6] + sq[7];
        pairs[4] = sq[8] + sq[9];
        pairs[5] = sq[10] + sq[11];
        pairs[6] = sq[12] + sq[13];
        pairs[7] = sq[14] + sq[15];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[2] = pairs[4] + pairs[5];
        pairs[3] = pairs[6] + pairs[7];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[0] = pairs[0] + pairs[1];
        partial[0] = 0.0f + pairs[0];
        pairs[0] = sq[16] + sq[17];
        pairs[1] = sq[18] + sq[19];
        pairs[2] = sq[20] + sq[21];
        pairs[3] = sq[22] + sq[23];
        pairs[4] = sq[24] + sq[25];
        pairs[5] = sq[26] + sq[27];
        pairs[6] = sq[28] + sq[29];
        pairs[7] = sq[30] + sq[31];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[2] = pairs[4] + pairs[5];
        pairs[3] = pairs[6] + pairs[7];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[0] = pairs[0] + pairs[1];
        partial[1] = 0.0f + pairs[0];
        pairs[0] = sq[32] + sq[33];
        pairs[1] = sq[34] + sq[35];
        pairs[2] = sq[36] + sq[37];
        pairs[3] = sq[38] + sq[39];
        pairs[4] = sq[40] + sq[41];
        pairs[5] = sq[42] + sq[43];
        pairs[6] = sq[44] + sq[45];
        pairs[7] = sq[46] + sq[47];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[2] = pairs[4] + pairs[5];
        pairs[3] = pairs[6] + pairs[7];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[0] = pairs[0] + pairs[1];
        partial[2] = 0.0f + pairs[0];
        pairs[0] = sq[48] + sq[49];
        pairs[1] = sq[50] + sq[51];
        pairs[2] = sq[52] + sq[53];
        pairs[3] = sq[54] + sq[55];
        pairs[4] = sq[56] + sq[57];
        pairs[5] = sq[58] + sq[59];
        pairs[6] = sq[60] + sq[61];
        pairs[7] = sq[62] + sq[63];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[2] = pairs[4] + pairs[5];
        pairs[3] = pairs[6] + pairs[7];
        pairs[0] = pairs[0] + pairs[1];
        pairs[1] = pairs[2] + pairs[3];
        pairs[0] = pairs[0] + pairs[1];
        partial[3] = 0.0f + pairs[0];
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 16, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 16, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 16, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 16, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 8, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 8, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 8, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 8, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 4, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 4, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 4, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 4, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 2, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 2, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 2, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 2, 32);
        partial[0] = partial[0] + __shfl_xor_sync(0xffffffffu, partial[0], 1, 32);
        partial[1] = partial[1] + __shfl_xor_sync(0xffffffffu, partial[1], 1, 32);
        partial[2] = partial[2] + __shfl_xor_sync(0xffffffffu, partial[2], 1, 32);
        partial[3] = partial[3] + __shfl_xor_sync(0xffffffffu, partial[3], 1, 32);
        reduce_workspace[tx] = partial[0];
        reduce_workspace[tx + 128] = partial[1];
        reduce_workspace[tx + 256] = partial[2];
        reduce_workspace[tx + 384] = partial[3];
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
        ssum[0] = partial[0];
        ssum[1] = partial[1];
        ssum[2] = partial[2];
        ssum[3] = partial[3];
    }
    // T.Parallel(4)
    {
        #pragma unroll
        for (int step_1 = 0; step_1 < 4; ++step_1) {
            ssum[step_1] = rsqrtf(tl_div(ssum[step_1], 2048.0f) + 0x1.0c6f7ap-20f);
        }
    }
    // T.Parallel(4, 2048)
    {
        #pragma unroll
        for (int step_2 = 0; step_2 < 64; ++step_2) {
            x[step_2 / 16 * 16 + step_2 % 4 + step_2 / 4 % 4 * 4] = __fmul_rn(x[step_2 / 16 * 16 + step_2 % 4 + step_2 / 4 % 4 * 4], ssum[step_2 / 16]);
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int chunk_1 = 0; chunk_1 < 16; ++chunk_1) {
            #pragma unroll
            for (int lane_1 = 0; lane_1 < 4; ++lane_1) {
                Y_vec[lane_1] = x[chunk_1 / 4 * 16 + chunk_1 % 4 * 4 + lane_1];
            }
            *(uint4*)(Y + bx * 8192 + tx * 4 + chunk_1 / 4 * 2048 + chunk_1 % 4 * 512) = *(const uint4*)(Y_vec + 0);
        }
    }
}
