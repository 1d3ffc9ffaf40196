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
    __align__(16) float partial[8];
    float* reduce_workspace = (float*)(tl_smem + 0);
    __align__(16) float partial_1[8];
    float* reduce_workspace_1 = (float*)(tl_smem + 4096);
    // T.copy
    {
        #pragma unroll
        for (int step = 0; step < 32; ++step) {
            const int i = step / 4;
            const int j = tx * 4 + step % 4;
            x[i * 4 + j % 4] = X[bx * 4096 + i * 512 + j];
        }
    }
    // T.reduce_sum
    {
        partial[0] = 0.0f;
        partial[0] = partial[0] + x[0];
        partial[0] = partial[0] + x[1];
        partial[0] = partial[0] + x[2];
        partial[0] = partial[0] + x[3];
        partial[1] = 0.0f;
        partial[1] = partial[1] + x[4];
        partial[1] = partial[1] + x[5];
        partial[1] = partial[1] + x[6];
        partial[1] = partial[1] + x[7];
        partial[2] = 0.0f;
        partial[2] = partial[2] + x[8];
        partial[2] = partial[2] + x[9];
        partial[2] = partial[2] + x[10];
        partial[2] = partial[2] + x[11];
        partial[3] = 0.0f;
        partial[3] = partial[3] + x[12];
        partial[3] = partial[3] + x[13];
        partial[3] = partial[3] + x[14];
        partial[3] = partial[3] + x[15];
        partial[4] = 0.0f;
        partial[4] = partial[4] + x[16];
        partial[4] = partial[4] + x[17];
        partial[4] = partial[4] + x[18];
        partial[4] = partial[4] + x[19];
        partial[5] = 0.0f;
        partial[5] = partial[5] + x[20];
        partial[5] = partial[5] + x[21];
        partial[5] = partial[5] + x[22];
        partial[5] = partial[5] + x[23];
        partial[6] = 0.0f;
        partial[6] = partial[6] + x[24];
        partial[6] = partial[6] + x[25];
        partial[6] = partial[6] + x[26];
        partial[6] = partial[6] + x[27];
        partial[7] = 0.0f;
        partial[7] = partial[7] + x[28];
        partial[7] = partial[7] + x[29];
        partial[7] = partial[7] + x[30];
        partial[7] = partial[7] + x[31];
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
        partial_1[0] = -tl_float_inf();
        partial_1[0] = (partial_1[0] > x[0]) ? partial_1[0] : x[0];
        partial_1[0] = (partial_1[0] > x[1]) ? partial_1[0] : x[1];
        partial_1[0] = (partial_1[0] > x[2]) ? partial_1[0] : x[2];
        partial_1[0] = (partial_1[0] > x[3]) ? partial_1[0] : x[3];
        partial_1[1] = -tl_float_inf();
        partial_1[1] = (partial_1[1] > x[4]) ? partial_1[1] : x[4];
        partial_1[1] = (partial_1[1] > x[5]) ? partial_1[1] : x[5];
        partial_1[1] = (partial_1[1] > x[6]) ? partial_1[1] : x[6];
        partial_1[1] = (partial_1[1] > x[7]) ? partial_1[1] : x[7];
        partial_1[2] = -tl_float_inf();
        partial_1[2] = (partial_1[2] > x[8]) ? partial_1[2] : x[8];
        partial_1[2] = (partial_1[2] > x[9]) ? partial_1[2] : x[9];
        partial_1[2] = (partial_1[2] > x[10]) ? partial_1[2] : x[10];
        partial_1[2] = (partial_1[2] > x[11]) ? partial_1[2] : x[11];
        partial_1[3] = -tl_float_inf();
        partial_1[3] = (partial_1[3] > x[12]) ? partial_1[3] : x[12];
        partial_1[3] = (partial_1[3] > x[13]) ? partial_1[3] : x[13];
        partial_1[3] = (partial_1[3] > x[14]) ? partial_1[3] : x[14];
        partial_1[3] = (partial_1[3] > x[15]) ? partial_1[3] : x[15];
        partial_1[4] = -tl_float_inf();
        partial_1[4] = (partial_1[4] > x[16]) ? partial_1[4] : x[16];
        partial_1[4] = (partial_1[4] > x[17]) ? partial_1[4] : x[17];
        partial_1[4] = (partial_1[4] > x[18]) ? partial_1[4] : x[18];
        partial_1[4] = (partial_1[4] > x[19]) ? partial_1[4] : x[19];
        partial_1[5] = -tl_float_inf();
        partial_1[5] = (partial_1[5] > x[20]) ? partial_1[5] : x[20];
        partial_1[5] = (partial_1[5] > x[21]) ? partial_1[5] : x[21];
        partial_1[5] = (partial_1[5] > x[22]) ? partial_1[5] : x[22];
        partial_1[5] = (partial_1[5] > x[23]) ? partial_1[5] : x[23];
        partial_1[6] = -tl_float_inf();
        partial_1[6] = (partial_1[6] > x[24]) ? partial_1[6] : x[24];
        partial_1[6] = (partial_1[6] > x[25]) ? partial_1[6] : x[25];
        partial_1[6] = (partial_1[6] > x[26]) ? partial_1[6] : x[26];
        partial_1[6] = (partial_1[6] > x[27]) ? partial_1[6] : x[27];
        partial_1[7] = -tl_float_inf();
        partial_1[7] = (partial_1[7] > x[28]) ? partial_1[7] : x[28];
        partial_1[7] = (partial_1[7] > x[29]) ? partial_1[7] : x[29];
        partial_1[7] = (partial_1[7] > x[30]) ? partial_1[7] : x[30];
        partial_1[7] = (partial_1[7] > x[31]) ? partial_1[7] : x[31];
        const float v458 = __shfl_xor_sync(0xffffffffu, partial_1[0], 16, 32);
        partial_1[0] = (partial_1[0] > v458) ? partial_1[0] : v458;
        const float v462 = __shfl_xor_sync(0xffffffffu, partial_1[1], 16, 32);
        partial_1[1] = (partial_1[1] > v462) ? partial_1[1] : v462;
        const float v466 = __shfl_xor_sync(0xffffffffu, partial_1[2], 16, 32);
        partial_1[2] = (partial_1[2] > v466) ? partial_1[2] : v466;
        const float v470 = __shfl_xor_sync(0xffffffffu, partial_1[3], 16, 32);
        partial_1[3] = (partial_1[3] > v470) ? partial_1[3] : v470;
        const float v474 = __shfl_xor_sync(0xffffffffu, partial_1[4], 16, 32);
        partial_1[4] = (partial_1[4] > v474) ? partial_1[4] : v474;
        const float v478 = __shfl_xor_sync(0xffffffffu, partial_1[5], 16, 32);
        partial_1[5] = (partial_1[5] > v478) ? partial_1[5] : v478;
        const float v482 = __shfl_xor_sync(0xffffffffu, partial_1[6], 16, 32);
        partial_1[6] = (partial_1[6] > v482) ? partial_1[6] : v482;
        const float v486 = __shfl_xor_sync(0xffffffffu, partial_1[7], 16, 32);
        partial_1[7] = (partial_1[7] > v486) ? partial_1[7] : v486;
        const float v490 = __shfl_xor_sync(0xffffffffu, partial_1[0], 8, 32);
        partial_1[0] = (partial_1[0] > v490) ? partial_1[0] : v490;
        const float v494 = __shfl_xor_sync(0xffffffffu, partial_1[1], 8, 32);
        partial_1[1] = (partial_1[1] > v494) ? partial_1[1] : v494;
        const float v498 = __shfl_xor_sync(0xffffffffu, partial_1[2], 8, 32);
        partial_1[2] = (partial_1[2] > v498) ? partial_1[2] : v498;
        const float v502 = __shfl_xor_sync(0xffffffffu, partial_1[3], 8, 32);
        partial_1[3] = (partial_1[3] > v502) ? partial_1[3] : v502;
        const float v506 = __shfl_xor_sync(0xffffffffu, partial_1[4], 8, 32);
        partial_1[4] = (partial_1[4] > v506) ? partial_1[4] : v506;
        const float v510 = __shfl_xor_sync(0xffffffffu, partial_1[5], 8, 32);
        partial_1[5] = (partial_1[5] > v510) ? partial_1[5] : v510;
        const float v514 = __shfl_xor_sync(0xffffffffu, partial_1[6], 8, 32);
        partial_1[6] = (partial_1[6] > v514) ? partial_1[6] : v514;
        const float v518 = __shfl_xor_sync(0xffffffffu, partial_1[7], 8, 32);
        partial_1[7] = (partial_1[7] > v518) ? partial_1[7] : v518;
        const float v522 = __shfl_xor_sync(0xffffffffu, partial_1[0], 4, 32);
        partial_1[0] = (partial_1[0] > v522) ? partial_1[0] : v522;
        const float v526 = __shfl_xor_sync(0xffffffffu, partial_1[1], 4, 32);
        partial_1[1] = (partial_1[1] > v526) ? partial_1[1] : v526;
        const float v530 = __shfl_xor_sync(0xffffffffu, partial_1[2], 4, 32);
        partial_1[2] = (partial_1[2] > v530) ? partial_1[2] : v530;
        const float v534 = __shfl_xor_sync(0xffffffffu, partial_1[3], 4, 32);
        partial_1[3] = (partial_1[3] > v534) ? partial_1[3] : v534;
        const float v538 = __shfl_xor_sync(0xffffffffu, partial_1[4], 4, 32);
        partial_1[4] = (partial_1[4] > v538) ? partial_1[4] : v538;
        const float v542 = __shfl_xor_sync(0xffffffffu, partial_1[5], 4, 32);
        partial_1[5] = (partial_1[5] > v542) ? partial_1[5] : v542;
        const float v546 = __shfl_xor_sync(0xffffffffu, partial_1[6], 4, 32);
        partial_1[6] = (partial_1[6] > v546) ? partial_1[6] : v546;
        const float v550 = __shfl_xor_sync(0xffffffffu, partial_1[7], 4, 32);
        partial_1[7] = (partial_1[7] > v550) ? partial_1[7] : v550;
        const float v554 = __shfl_xor_sync(0xffffffffu, partial_1[0], 2, 32);
        partial_1[0] = (partial_1[0] > v554) ? partial_1[0] : v554;
        const float v558 = __shfl_xor_sync(0xffffffffu, partial_1[1], 2, 32);
        partial_1[1] = (partial_1[1] > v558) ? partial_1[1] : v558;
        const float v562 = __shfl_xor_sync(0xffffffffu, partial_1[2], 2, 32);
        partial_1[2] = (partial_1[2] > v562) ? partial_1[2] : v562;
        const float v566 = __shfl_xor_sync(0xffffffffu, partial_1[3], 2, 32);
        partial_1[3] = (partial_1[3] > v566) ? partial_1[3] : v566;
        const float v570 = __shfl_xor_sync(0xffffffffu, partial_1[4], 2, 32);
        partial_1[4] = (partial_1[4] > v570) ? partial_1[4] : v570;
        const float v574 = __shfl_xor_sync(0xffffffffu, partial_1[5], 2, 32);
        partial_1[5] = (partial_1[5] > v574) ? partial_1[5] : v574;
        const float v578 = __shfl_xor_sync(0xffffffffu, partial_1[6], 2, 32);
        partial_1[6] = (partial_1[6] > v578) ? partial_1[6] : v578;
        const float v582 = __shfl_xor_sync(0xffffffffu, partial_1[7], 2, 32);
        partial_1[7] = (partial_1[7] > v582) ? partial_1[7] : v582;
        const float v586 = __shfl_xor_sync(0xffffffffu, partial_1[0], 1, 32);
        partial_1[0] = (partial_1[0] > v586) ? partial_1[0] : v586;
        const float v590 = __shfl_xor_sync(0xffffffffu, partial_1[1], 1, 32);
        partial_1[1] = (partial_1[1] > v590) ? partial_1[1] : v590;
        const float v594 = __shfl_xor_sync(0xffffffffu, partial_1[2], 1, 32);
        partial_1[2] = (partial_1[2] > v594) ? partial_1[2] : v594;
        const float v598 = __shfl_xor_sync(0xffffffffu, partial_1[3], 1, 32);
        partial_1[3] = (partial_1[3] > v598) ? partial_1[3] : v598;
        const float v602 = __shfl_xor_sync(0xffffffffu, partial_1[4], 1, 32);
        partial_1[4] = (partial_1[4] > v602) ? partial_1[4] : v602;
        const float v606 = __shfl_xor_sync(0xffffffffu, partial_1[5], 1, 32);
        partial_1[5] = (partial_1[5] > v606) ? partial_1[5] : v606;
        const float v610 = __shfl_xor_sync(0xffffffffu, partial_1[6], 1, 32);
        partial_1[6] = (partial_1[6] > v610) ? partial_1[6] : v610;
        const float v614 = __shfl_xor_sync(0xffffffffu, partial_1[7], 1, 32);
        partial_1[7] = (partial_1[7] > v614) ? partial_1[7] : v614;
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
        partial_1[0] = (partial_1[0] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 32]) ? partial_1[0] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 32];
        partial_1[0] = (partial_1[0] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 64]) ? partial_1[0] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 64];
        partial_1[0] = (partial_1[0] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 96]) ? partial_1[0] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 96];
        partial_1[1] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 128];
        partial_1[1] = (partial_1[1] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 160]) ? partial_1[1] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 160];
        partial_1[1] = (partial_1[1] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 192]) ? partial_1[1] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 192];
        partial_1[1] = (partial_1[1] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 224]) ? partial_1[1] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 224];
        partial_1[2] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 256];
        partial_1[2] = (partial_1[2] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 288]) ? partial_1[2] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 288];
        partial_1[2] = (partial_1[2] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 320]) ? partial_1[2] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 320];
        partial_1[2] = (partial_1[2] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 352]) ? partial_1[2] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 352];
        partial_1[3] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 384];
        partial_1[3] = (partial_1[3] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 416]) ? partial_1[3] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 416];
        partial_1[3] = (partial_1[3] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 448]) ? partial_1[3] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 448];
        partial_1[3] = (partial_1[3] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 480]) ? partial_1[3] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 480];
        partial_1[4] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 512];
        partial_1[4] = (partial_1[4] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 544]) ? partial_1[4] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 544];
        partial_1[4] = (partial_1[4] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 576]) ? partial_1[4] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 576];
        partial_1[4] = (partial_1[4] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 608]) ? partial_1[4] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 608];
        partial_1[5] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 640];
        partial_1[5] = (partial_1[5] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 672]) ? partial_1[5] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 672];
        partial_1[5] = (partial_1[5] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 704]) ? partial_1[5] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 704];
        partial_1[5] = (partial_1[5] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 736]) ? partial_1[5] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 736];
        partial_1[6] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 768];
        partial_1[6] = (partial_1[6] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 800]) ? partial_1[6] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 800];
        partial_1[6] = (partial_1[6] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 832]) ? partial_1[6] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 832];
        partial_1[6] = (partial_1[6] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 864]) ? partial_1[6] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 864];
        partial_1[7] = reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 896];
        partial_1[7] = (partial_1[7] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 928]) ? partial_1[7] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 928];
        partial_1[7] = (partial_1[7] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 960]) ? partial_1[7] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 960];
        partial_1[7] = (partial_1[7] > reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 992]) ? partial_1[7] : reduce_workspace_1[tx - tx / 64 * 64 - tx / 32 % 2 * 32 + 992];
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
        for (int step_1 = 0; step_1 < 1; ++step_1) {
            const int i_1 = tx % 8;
            const int rep = tx / 8;
            if (rep == 0) {
                RowSum[bx * 8 + i_1] = s[i_1];
            }
        }
    }
    // T.copy
    {
        #pragma unroll
        for (int step_2 = 0; step_2 < 1; ++step_2) {
            const int i_2 = tx % 8;
            const int rep_1 = tx / 8;
            if (rep_1 == 0) {
                RowMax[bx * 8 + i_2] = m[i_2];
            }
        }
    }
}
