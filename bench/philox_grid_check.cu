// Checks two helpers of tilec's CUDA prelude on a GPU:
//
//   nvcc -O2 -arch=sm_90 -I crates/passes/src/cuda bench/philox_grid_check.cu -o philox_grid_check
//   ./philox_grid_check
//
// 1. The Philox4x32-10 generator (prelude_random.cuh: tl_rng_init, tl_rng_rand, tl_rng_uniform)
//    against curand's own curandStatePhilox4_32_10_t: 8192 threads, each 80 (seed, subsequence,
//    offset) triples (64-bit seeds, subsequences past 2^32 and 2^40, offsets past 2^34, offsets
//    not a multiple of 4), 37 draws each, mixing curand() and curand_uniform(); every word and
//    every float's bits must agree. The emulator computes the same stream (emulator/random.rs).
// 2. The grid barrier (prelude_grid.cuh: tl_sync_grid) under cudaLaunchCooperativeKernel with as
//    many blocks as the device holds at once: 200 rounds per launch, 3 launches in a row (the
//    barrier word is never reset), each block reading another block's value written before the
//    barrier.
#include <cstdio>
#include <curand_kernel.h>
#include "prelude_random.cuh"
#include "prelude_grid.cuh"

__global__ void compare(unsigned long long* mismatches, unsigned int* sample) {
    const unsigned int t = blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long seeds[4] = {0ull, 42ull, 123ull, 0x123456789abcdef0ull};
    const unsigned long long subs[4] = {0ull, t, 0xffffffffull + t, (1ull << 40) + 3 * t};
    const unsigned long long offs[5] = {0ull, 1ull, 6ull, 4ull * t + (t & 3), 0x3fffffffcull + t};
    unsigned long long bad = 0;
    for (int a = 0; a < 4; ++a)
        for (int b = 0; b < 4; ++b)
            for (int c = 0; c < 5; ++c) {
                curandStatePhilox4_32_10_t ref;
                curand_init(seeds[a], subs[b], offs[c], &ref);
                tl_philox mine;
                tl_rng_init(&mine, seeds[a], subs[b], offs[c]);
                for (int k = 0; k < 37; ++k) {
                    if (k % 3 == 2) {
                        float x = curand_uniform(&ref), y = tl_rng_uniform(&mine);
                        if (__float_as_uint(x) != __float_as_uint(y)) bad++;
                    } else {
                        unsigned int x = curand(&ref), y = tl_rng_rand(&mine);
                        if (x != y) bad++;
                        if (t == 0 && a == 0 && b == 0 && c == 0 && k < 2) sample[k] = x;
                    }
                }
            }
    atomicAdd(mismatches, bad);
}

__global__ void grid_barrier(unsigned int* data, unsigned int* errors, int rounds) {
    const unsigned int blocks = gridDim.x;
    for (int r = 0; r < rounds; ++r) {
        if (threadIdx.x == 0) data[blockIdx.x] = r * 100000 + blockIdx.x;
        tl_sync_grid();
        if (threadIdx.x == 0) {
            unsigned int other = (blockIdx.x + 1 + r) % blocks;
            if (data[other] != r * 100000 + other) atomicAdd(errors, 1u);
        }
        tl_sync_grid();
    }
}

int main() {
    unsigned long long* mismatches;
    unsigned int* sample;
    cudaMalloc(&mismatches, 8);
    cudaMalloc(&sample, 16);
    cudaMemset(mismatches, 0, 8);
    compare<<<64, 128>>>(mismatches, sample);
    unsigned long long host = 0;
    unsigned int s[4];
    cudaMemcpy(&host, mismatches, 8, cudaMemcpyDeviceToHost);
    cudaMemcpy(s, sample, 16, cudaMemcpyDeviceToHost);
    printf("philox: %llu mismatches over %d draws; curand(seed 0) starts %08x %08x\n", host,
           64 * 128 * 4 * 4 * 5 * 37, s[0], s[1]);

    int sms = 0, per_sm = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, grid_barrier, 256, 0);
    int blocks = sms * per_sm;
    unsigned int *data, *errors;
    cudaMalloc(&data, blocks * 4);
    cudaMalloc(&errors, 4);
    cudaMemset(errors, 0, 4);
    int rounds = 200;
    for (int launch = 0; launch < 3; ++launch) {
        void* args[] = {&data, &errors, &rounds};
        cudaError_t e = cudaLaunchCooperativeKernel((void*)grid_barrier, blocks, 256, args, 0, 0);
        if (e != cudaSuccess) printf("launch: %s\n", cudaGetErrorString(e));
    }
    cudaError_t e = cudaDeviceSynchronize();
    unsigned int errs = 0;
    cudaMemcpy(&errs, errors, 4, cudaMemcpyDeviceToHost);
    printf("grid barrier: %d blocks (%d per SM x %d SMs), 3 launches x %d rounds: %u errors (%s)\n",
           blocks, per_sm, sms, rounds, errs, cudaGetErrorString(e));
    return 0;
}
