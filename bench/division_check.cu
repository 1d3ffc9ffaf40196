// Checks the quotient tilec's prelude computes for `a / b` in float (tl_div in prelude.cuh) against
// IEEE division (__fdiv_rn), bit for bit, on a GPU:
//
//   nvcc -O3 -arch=sm_90 bench/division_check.cu -o division_check && ./division_check [STRIDE]
//
// tl_div takes b's correctly rounded reciprocal r = RN(1/b), the first quotient q = RN(a r) and one
// Markstein correction RN(q - RN(b q - a) r) with q's sign, and returns q where that is NaN. When |a| and |b|
// both lie in [2^-60, 2^60], every intermediate value (r, q, the remainder and the result) is a
// normal float, so scaling a or b by a power of two scales each of them exactly: the result for
// a = ma 2^i, b = mb 2^j is 2^(i-j) times the result for the significands ma, mb in [1, 2), and so
// is the IEEE quotient. Both are odd in a and in b. Checking every pair of significands (2^46 pairs)
// therefore checks every pair of operands in the range. The remainder is a multiple of 2^-47 for
// significands, so at least 2^-107 in the range when not zero: scaled, it stays normal too.
//
// STRIDE (default 1) checks every STRIDE-th divisor only, for a quick run. The second part runs
// tl_div on random operand bits and on zeros, infinities and NaN, and counts the pairs that differ
// from IEEE division inside the range, for specials, and elsewhere (subnormals, huge and tiny
// values), where tl_div may differ and the emulator computes the same formula.
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ float fast_quotient(float a, float b, float r) {
    const float q = __fmul_rn(a, r);
    return fmaf(-fmaf(b, q, -a), r, q);
}

// The prelude's function, repeated here so that this file compiles on its own.
__device__ __forceinline__ float tl_div(float a, float b) {
    const float r = __frcp_rn(b);
    const float q = __fmul_rn(a, r);
    const float corrected = fmaf(-fmaf(b, q, -a), r, q);
    return corrected != corrected ? q : copysignf(corrected, q);
}

__device__ bool in_range(float x) { return fabsf(x) >= 0x1p-60f && fabsf(x) <= 0x1p60f; }
__device__ bool special(float x) { return x == 0.0f || isinf(x) || isnan(x); }

// One block per divisor significand: its threads walk all 2^23 dividend significands.
__global__ void check_significands(unsigned first, unsigned stride, unsigned long long* mismatches,
                                   unsigned* example) {
    const unsigned bits_b = 0x3f800000u | ((first + blockIdx.x) * stride);
    const float b = __uint_as_float(bits_b);
    const float r = __frcp_rn(b);
    unsigned bad = 0;
    for (unsigned m = threadIdx.x; m < (1u << 23); m += blockDim.x) {
        const float a = __uint_as_float(0x3f800000u | m);
        const unsigned got = __float_as_uint(fast_quotient(a, b, r));
        const unsigned want = __float_as_uint(__fdiv_rn(a, b));
        if (got != want) {
            ++bad;
            example[0] = 0x3f800000u | m;
            example[1] = bits_b;
        }
    }
    if (bad) atomicAdd(mismatches, (unsigned long long)bad);
}

__device__ unsigned mix(unsigned x) {
    x ^= x >> 16; x *= 0x7feb352du; x ^= x >> 15; x *= 0x846ca68bu; x ^= x >> 16;
    return x;
}

// tl_div on arbitrary bit patterns, every fourth operand replaced by a zero, infinity or NaN.
// NaN results match when both are NaN. Counts mismatches per class: [0] both operands in range,
// [1] an operand special and the other in range or special, [2] everything else.
__global__ void check_any_bits(unsigned seed, unsigned per_thread, unsigned long long* mismatches,
                               unsigned long long* pairs, unsigned* example) {
    const unsigned specials[4] = {0x00000000u, 0x80000000u, 0x7f800000u, 0x7fc00000u};
    const unsigned id = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned bad[3] = {0, 0, 0}, seen[3] = {0, 0, 0};
    for (unsigned i = 0; i < per_thread; ++i) {
        unsigned ba = mix(seed ^ mix(id * per_thread + i));
        unsigned bb = mix(ba ^ 0x9e3779b9u);
        if ((ba & 3u) == 0u) ba = specials[(ba >> 2) & 3u] | (ba & 0x80000000u);
        if ((bb & 3u) == 0u) bb = specials[(bb >> 2) & 3u] | (bb & 0x80000000u);
        const float a = __uint_as_float(ba), b = __uint_as_float(bb);
        const float got = tl_div(a, b), want = __fdiv_rn(a, b);
        const bool same = __float_as_uint(got) == __float_as_uint(want) || (got != got && want != want);
        const int cls = in_range(a) && in_range(b) ? 0
                        : (special(a) || in_range(a)) && (special(b) || in_range(b)) ? 1 : 2;
        ++seen[cls];
        if (!same) {
            ++bad[cls];
            if (cls < 2) {
                example[0] = ba;
                example[1] = bb;
            }
        }
    }
    for (int c = 0; c < 3; ++c) {
        if (bad[c]) atomicAdd(&mismatches[c], (unsigned long long)bad[c]);
        atomicAdd(&pairs[c], (unsigned long long)seen[c]);
    }
}

int main(int argc, char** argv) {
    const unsigned stride = argc > 1 ? (unsigned)atoi(argv[1]) : 1u;
    const unsigned divisors = (1u << 23) / stride;
    unsigned long long* mismatches;
    unsigned* example;
    cudaMallocManaged(&mismatches, sizeof(unsigned long long));
    cudaMallocManaged(&example, 2 * sizeof(unsigned));
    *mismatches = 0;
    cudaEvent_t start, stop;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    cudaEventRecord(start);
    const unsigned batch = 1u << 16;
    for (unsigned first = 0; first < divisors; first += batch) {
        const unsigned count = divisors - first < batch ? divisors - first : batch;
        check_significands<<<count, 1024>>>(first, stride, mismatches, example);
    }
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) {
        printf("CUDA error: %s\n", cudaGetErrorString(error));
        return 2;
    }
    const double checked = (double)divisors * (double)(1u << 23);
    printf("significands: %.4g pairs (%u divisors x 2^23 dividends), %llu mismatches, %.1f s, %.3g pairs/s\n",
           checked, divisors, *mismatches, ms / 1e3, checked / (ms / 1e3));
    if (*mismatches) printf("  example: a=0x%08x b=0x%08x\n", example[0], example[1]);
    const unsigned long long fast_bad = *mismatches;

    unsigned long long *classes, *pairs;
    cudaMallocManaged(&classes, 3 * sizeof(unsigned long long));
    cudaMallocManaged(&pairs, 3 * sizeof(unsigned long long));
    for (int c = 0; c < 3; ++c) classes[c] = pairs[c] = 0;
    const unsigned blocks = 4096, threads = 256, per_thread = 4096;
    check_any_bits<<<blocks, threads>>>(12345u, per_thread, classes, pairs, example);
    cudaDeviceSynchronize();
    const char* names[3] = {"both operands in range", "specials (zero, inf, NaN) with in-range or special",
                            "elsewhere (subnormal, huge or tiny)"};
    for (int c = 0; c < 3; ++c)
        printf("random bits, %s: %llu pairs, %llu differ from IEEE\n", names[c], pairs[c], classes[c]);
    if (classes[0] || classes[1]) printf("  example: a=0x%08x b=0x%08x\n", example[0], example[1]);
    const bool wrong = classes[0] || classes[1];
    return fast_bad || wrong ? 1 : 0;
}
