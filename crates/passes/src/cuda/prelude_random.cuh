// ---- tilec prelude: random numbers ------------------------------------------------------------
// curand's Philox4x32-10 generator (curandStatePhilox4_32_10_t), written out from the algorithm
// so that the translation unit still includes no header: the same counter and key, the same ten
// rounds, the same skip-ahead for a subsequence (the counter's upper 64 bits) and an offset (in
// numbers, four per counter step), and curand()'s order of handing out the four words of each
// block. The CPU emulator computes the same stream (crates/runtime/src/emulator/random.rs).
struct tl_philox {
    unsigned int counter[4];
    unsigned int key[2];
    unsigned int output[4];
    unsigned int next;
};

__device__ __forceinline__ void tl_philox_block(tl_philox* s) {
    unsigned int c0 = s->counter[0], c1 = s->counter[1], c2 = s->counter[2], c3 = s->counter[3];
    unsigned int k0 = s->key[0], k1 = s->key[1];
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        const unsigned int lo0 = 0xD2511F53u * c0, hi0 = __umulhi(0xD2511F53u, c0);
        const unsigned int lo1 = 0xCD9E8D57u * c2, hi1 = __umulhi(0xCD9E8D57u, c2);
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    s->output[0] = c0;
    s->output[1] = c1;
    s->output[2] = c2;
    s->output[3] = c3;
}

// Adds n to the counter's lower 64 bits, carrying into the upper ones as curand does.
__device__ __forceinline__ void tl_philox_skip(tl_philox* s, unsigned long long n) {
    const unsigned int lo = (unsigned int)n;
    unsigned int hi = (unsigned int)(n >> 32);
    s->counter[0] += lo;
    if (s->counter[0] < lo) hi++;
    s->counter[1] += hi;
    if (hi <= s->counter[1]) return;
    if (++s->counter[2]) return;
    ++s->counter[3];
}

__device__ __forceinline__ void tl_rng_init(tl_philox* s, unsigned long long seed,
                                            unsigned long long subsequence,
                                            unsigned long long offset) {
    s->counter[0] = 0u;
    s->counter[1] = 0u;
    s->counter[2] = (unsigned int)subsequence;
    s->counter[3] = (unsigned int)(subsequence >> 32);
    s->key[0] = (unsigned int)seed;
    s->key[1] = (unsigned int)(seed >> 32);
    s->next = (unsigned int)(offset & 3u);
    tl_philox_skip(s, offset / 4u);
    tl_philox_block(s);
}

__device__ __forceinline__ unsigned int tl_rng_rand(tl_philox* s) {
    const unsigned int value = s->output[s->next];
    if (++s->next == 4u) {
        tl_philox_skip(s, 1ull);
        tl_philox_block(s);
        s->next = 0u;
    }
    return value;
}

// curand_uniform: one 32-bit draw scaled into (0, 1].
__device__ __forceinline__ float tl_rng_uniform(tl_philox* s) {
    return (float)tl_rng_rand(s) * 2.3283064365386963e-10f + 1.1641532182693481e-10f;
}
