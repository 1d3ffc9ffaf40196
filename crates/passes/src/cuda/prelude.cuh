// ---- tilec prelude ----------------------------------------------------------------------------
// Element types and helpers that every kernel tilec prints relies on. The translation unit includes
// no header at all: everything below is built from what NVRTC declares by itself (threadIdx,
// atomicCAS, __uint_as_float, the math functions), so the same text compiles wherever NVRTC runs.

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "tilec kernels need sm_80 or newer: bfloat16 rounding uses cvt.rn.bf16.f32"
#endif

// 16-bit and 8-bit floats are kept in memory as their bit patterns. Kernels compute on them as
// float: a load widens exactly, and every arithmetic result is rounded back to the element type at
// once, so a float variable always holds a value of the type and results match the CPU emulator.
struct tl_half {
    unsigned short bits;
};
struct tl_bfloat16 {
    unsigned short bits;
};
struct tl_fp8_e4m3 {
    unsigned char bits;
};
struct tl_fp8_e5m2 {
    unsigned char bits;
};
// TensorFloat-32 is kept as the float32 word holding it: 10 fraction bits, float32's exponent.
struct tl_tfloat32 {
    unsigned int bits;
};
// A 4-bit float (float4_e2m1fn) in a register: its code in the low four bits of a byte. In memory
// two share a byte (see tl_load_e2m1 / tl_store_nibble below).
struct tl_fp4_e2m1 {
    unsigned char bits;
};

// Infinities and NaN by bit pattern, because a literal such as 1e39f would only warn.
__device__ __forceinline__ float tl_float_inf() { return __uint_as_float(0x7f800000u); }
__device__ __forceinline__ float tl_float_nan() { return __uint_as_float(0x7fc00000u); }
__device__ __forceinline__ double tl_double_inf() { return __longlong_as_double(0x7ff0000000000000ll); }
__device__ __forceinline__ double tl_double_nan() { return __longlong_as_double(0x7ff8000000000000ll); }

// fp16 conversions with the PTX instructions cuda_fp16.h uses (round to nearest even).
__device__ __forceinline__ float tl_half_to_float(tl_half x) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
    return f;
}
__device__ __forceinline__ tl_half tl_float_to_half(float f) {
    tl_half x;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(x.bits) : "f"(f));
    return x;
}

// bfloat16 is the upper half of a float, so widening is a shift; narrowing needs sm_80's cvt.
__device__ __forceinline__ float tl_bfloat16_to_float(tl_bfloat16 x) {
    return __uint_as_float((unsigned int)x.bits << 16);
}
__device__ __forceinline__ tl_bfloat16 tl_float_to_bfloat16(float f) {
    tl_bfloat16 x;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(x.bits) : "f"(f));
    return x;
}

// A TF32 word is a float32 word, so widening is free; narrowing rounds to nearest with ties away
// from zero, with the instruction tensor-core code converts operands with (sm_80).
__device__ __forceinline__ float tl_tfloat32_to_float(tl_tfloat32 x) { return __uint_as_float(x.bits); }
__device__ __forceinline__ tl_tfloat32 tl_float_to_tfloat32(float f) {
    tl_tfloat32 x;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(x.bits) : "f"(f));
    return x;
}

// float4_e2m1fn in software: values +-{0, 0.5, 1, 1.5, 2, 3, 4, 6}, no infinities or NaN. Narrowing
// rounds to nearest even (the ties 0.25, 0.75, ... 5 go to the code with a clear last bit),
// saturates at 6 and turns NaN into +0, as the emulator does.
__device__ __forceinline__ float tl_e2m1_to_float(tl_fp4_e2m1 x) {
    unsigned int exponent = (x.bits >> 1) & 3u;
    float mantissa = (x.bits & 1u) ? 0.5f : 0.0f;
    float magnitude = exponent == 0u ? mantissa : (1.0f + mantissa) * (float)(1u << (exponent - 1u));
    return (x.bits & 8u) ? -magnitude : magnitude;
}
__device__ __forceinline__ tl_fp4_e2m1 tl_float_to_e2m1(float f) {
    tl_fp4_e2m1 x;
    float a = fabsf(f);
    unsigned int code = a <= 0.25f ? 0u
                      : a < 0.75f  ? 1u
                      : a <= 1.25f ? 2u
                      : a < 1.75f  ? 3u
                      : a <= 2.5f  ? 4u
                      : a < 3.5f   ? 5u
                      : a <= 5.0f  ? 6u
                                   : 7u;
    if (f != f) {
        x.bits = 0;
        return x;
    }
    x.bits = (unsigned char)(code | ((__float_as_uint(f) >> 28) & 8u));
    return x;
}

// fp8 in software, because sm_80 has no fp8 conversions. e4m3 is the "fn" variant (no
// infinities, S.1111.111 is NaN); e5m2 is IEEE-like. Narrowing rounds to nearest even, saturates
// at the largest finite value (infinities included) and turns NaN into 0x7f, as the emulator does.
__device__ __forceinline__ float tl_e4m3_to_float(tl_fp8_e4m3 x) {
    unsigned int sign = (x.bits & 0x80u) << 24;
    unsigned int exponent = (x.bits >> 3) & 0xfu;
    unsigned int mantissa = x.bits & 0x7u;
    if (exponent == 0xfu && mantissa == 0x7u) {
        return __uint_as_float(sign | 0x7fc00000u);
    }
    if (exponent == 0u) {
        return __uint_as_float(sign | __float_as_uint((float)mantissa * 0.001953125f));
    }
    return __uint_as_float(sign | ((exponent + 120u) << 23) | (mantissa << 20));
}
__device__ __forceinline__ float tl_e5m2_to_float(tl_fp8_e5m2 x) {
    // An e5m2 code is the upper byte of the fp16 code of the same value.
    tl_half h;
    h.bits = (unsigned short)(x.bits << 8);
    return tl_half_to_float(h);
}
// The code of the finite 8-bit float nearest to `magnitude` (ties to the even code), for a format
// with `mantissa_bits` fraction bits whose smallest normal value has float exponent field
// `min_normal_field`. Subnormals share the quantum of the smallest normals, so one formula covers
// both, and a mantissa that rounds up to the next power of two carries into the exponent.
__device__ __forceinline__ unsigned int tl_fp8_code(float magnitude, unsigned int mantissa_bits,
                                                    unsigned int min_normal_field) {
    unsigned int field = __float_as_uint(magnitude) >> 23;
    if (field < min_normal_field) {
        field = min_normal_field;
    }
    float quantum = __uint_as_float((field - mantissa_bits) << 23);
    unsigned int steps = (unsigned int)rintf(magnitude / quantum);
    return ((field - min_normal_field + 1u) << mantissa_bits) + steps - (1u << mantissa_bits);
}
__device__ __forceinline__ tl_fp8_e4m3 tl_float_to_e4m3(float f) {
    tl_fp8_e4m3 x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    // sm_89 and newer convert in one instruction with the same rounding, saturation and NaN as
    // the code below (`satfinite`: infinities to the largest finite value, NaN to 0x7f); `f`
    // goes to the low byte of the pair.
    unsigned short pair;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(f));
    x.bits = (unsigned char)(pair & 0xffu);
    return x;
#else
    float magnitude = fabsf(f);
    unsigned int sign = (__float_as_uint(f) >> 24) & 0x80u;
    if (magnitude != magnitude) {
        x.bits = 0x7fu;
    } else if (magnitude >= 448.0f) {
        x.bits = (unsigned char)(sign | 0x7eu);
    } else {
        x.bits = (unsigned char)(sign | tl_fp8_code(magnitude, 3u, 121u));
    }
    return x;
#endif
}
__device__ __forceinline__ tl_fp8_e5m2 tl_float_to_e5m2(float f) {
    tl_fp8_e5m2 x;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    unsigned short pair;
    asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(pair) : "f"(0.0f), "f"(f));
    x.bits = (unsigned char)(pair & 0xffu);
    return x;
#else
    float magnitude = fabsf(f);
    unsigned int sign = (__float_as_uint(f) >> 24) & 0x80u;
    if (magnitude != magnitude) {
        x.bits = 0x7fu;
    } else if (magnitude >= 57344.0f) {
        x.bits = (unsigned char)(sign | 0x7bu);
    } else {
        x.bits = (unsigned char)(sign | tl_fp8_code(magnitude, 2u, 113u));
    }
    return x;
#endif
}

// 2^x on the special-function unit: exp2f's accuracy (2 ulp), with subnormal inputs read as zero
// and results below 2^-126 flushed to zero (the emulator flushes them too).
__device__ __forceinline__ float tl_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// tilec's float division: b's correctly rounded reciprocal r (the compiler computes it once for
// all the quotients of one divisor, a softmax's or a norm's row), the first quotient q = a r, and
// one Markstein correction q - (b q - a) r. Where |a| and |b| lie in [2^-60, 2^60] this is IEEE
// division bit for bit: bench/division_check.cu checks every pair of significands on a GPU and
// gives the scaling argument for the rest of the range. Where the correction is NaN (a zero or
// infinite operand) q is already the IEEE result; the sign is always q's, which is the IEEE sign
// even where a zero correction would flip a zero quotient's. So zeros, infinities and NaN come out
// as IEEE division has them. Only near the ends of the exponent range may it differ: subnormal
// operands or quotients and quotients near overflow in the last place, and a divisor below 2^-128,
// whose reciprocal overflows, gives an infinite quotient. The emulator computes the same formula,
// so it matches the GPU either way. What this saves over `a / b` is the reciprocal on the
// special-function unit and the range check that `a / b` repeats for every quotient.
__device__ __forceinline__ float tl_div(float a, float b) {
    const float r = __frcp_rn(b);
    const float q = __fmul_rn(a, r);
    const float corrected = fmaf(-fmaf(b, q, -a), r, q);
    return corrected != corrected ? q : copysignf(corrected, q);
}

// A float rounded to the nearest value of a narrower type, still as a float.
__device__ __forceinline__ float tl_round_f16(float f) { return tl_half_to_float(tl_float_to_half(f)); }
__device__ __forceinline__ float tl_round_bf16(float f) {
    return tl_bfloat16_to_float(tl_float_to_bfloat16(f));
}
__device__ __forceinline__ float tl_round_e4m3(float f) { return tl_e4m3_to_float(tl_float_to_e4m3(f)); }
__device__ __forceinline__ float tl_round_e5m2(float f) { return tl_e5m2_to_float(tl_float_to_e5m2(f)); }
__device__ __forceinline__ float tl_round_tf32(float f) { return tl_tfloat32_to_float(tl_float_to_tfloat32(f)); }
__device__ __forceinline__ float tl_round_e2m1(float f) { return tl_e2m1_to_float(tl_float_to_e2m1(f)); }

// Narrowing a double: a float with rounding to odd (truncate toward zero, then set the last bit if
// anything was cut off) keeps enough information that rounding it again to nearest even, to any
// type at least two bits narrower than float, gives the correctly rounded double; rounding the
// double to the nearest float first would round twice. The truncation is derived from the
// round-to-nearest conversion: step back toward zero where that rounded away from it.
__device__ __forceinline__ float tl_double_to_float_odd(double d) {
    float f = (float)d;
    double back = (double)f;
    if (back == d || d != d) {
        return f;
    }
    unsigned int bits = __float_as_uint(f);
    if (fabs(back) > fabs(d)) {
        bits -= 1u;
    }
    return __uint_as_float(bits | 1u);
}
__device__ __forceinline__ tl_half tl_float_to_half(double d) { return tl_float_to_half(tl_double_to_float_odd(d)); }
__device__ __forceinline__ tl_bfloat16 tl_float_to_bfloat16(double d) {
    return tl_float_to_bfloat16(tl_double_to_float_odd(d));
}
__device__ __forceinline__ tl_fp8_e4m3 tl_float_to_e4m3(double d) { return tl_float_to_e4m3(tl_double_to_float_odd(d)); }
__device__ __forceinline__ tl_fp8_e5m2 tl_float_to_e5m2(double d) { return tl_float_to_e5m2(tl_double_to_float_odd(d)); }
__device__ __forceinline__ float tl_round_f16(double d) { return tl_round_f16(tl_double_to_float_odd(d)); }
__device__ __forceinline__ float tl_round_bf16(double d) { return tl_round_bf16(tl_double_to_float_odd(d)); }
__device__ __forceinline__ float tl_round_e4m3(double d) { return tl_round_e4m3(tl_double_to_float_odd(d)); }
__device__ __forceinline__ float tl_round_e5m2(double d) { return tl_round_e5m2(tl_double_to_float_odd(d)); }
__device__ __forceinline__ tl_tfloat32 tl_float_to_tfloat32(double d) {
    return tl_float_to_tfloat32(tl_double_to_float_odd(d));
}
__device__ __forceinline__ float tl_round_tf32(double d) { return tl_round_tf32(tl_double_to_float_odd(d)); }
__device__ __forceinline__ tl_fp4_e2m1 tl_float_to_e2m1(double d) { return tl_float_to_e2m1(tl_double_to_float_odd(d)); }
__device__ __forceinline__ float tl_round_e2m1(double d) { return tl_round_e2m1(tl_double_to_float_odd(d)); }

// 4-bit integers are computed in int and kept in a byte each in registers; results wrap into their
// range, as C's conversion to a narrower type does for the others.
__device__ __forceinline__ signed char tl_wrap_s4(int v) { return (signed char)((int)((unsigned int)v << 28) >> 28); }
__device__ __forceinline__ unsigned char tl_wrap_u4(int v) { return (unsigned char)(v & 15); }

// 4-bit elements in global and shared memory pack two a byte, the element of even index in the low
// nibble (torch's and TileLang's order). A store replaces its nibble in the aligned 32-bit word
// atomically, because the other element of its byte may be stored by another thread at the same time.
__device__ __forceinline__ unsigned int tl_nibble(const unsigned char* p, long long i) {
    return ((unsigned int)p[i >> 1] >> ((unsigned int)(i & 1) * 4u)) & 15u;
}
__device__ __forceinline__ signed char tl_load_s4(const unsigned char* p, long long i) { return tl_wrap_s4((int)tl_nibble(p, i)); }
__device__ __forceinline__ unsigned char tl_load_u4(const unsigned char* p, long long i) { return (unsigned char)tl_nibble(p, i); }
__device__ __forceinline__ tl_fp4_e2m1 tl_load_e2m1(const unsigned char* p, long long i) {
    tl_fp4_e2m1 x;
    x.bits = (unsigned char)tl_nibble(p, i);
    return x;
}
__device__ __forceinline__ signed char tl_s4_from_code(unsigned int code) { return tl_wrap_s4((int)code); }
__device__ __forceinline__ unsigned char tl_u4_from_code(unsigned int code) { return (unsigned char)code; }
__device__ __forceinline__ tl_fp4_e2m1 tl_e2m1_from_code(unsigned int code) {
    tl_fp4_e2m1 x;
    x.bits = (unsigned char)code;
    return x;
}
__device__ __forceinline__ void tl_store_nibble(unsigned char* p, long long i, unsigned int code) {
    unsigned long long byte = (unsigned long long)(p + (i >> 1));
    unsigned int* word = (unsigned int*)(byte & ~3ull);
    unsigned int shift = (unsigned int)(byte & 3ull) * 8u + (unsigned int)(i & 1) * 4u;
    atomicAnd(word, ~(15u << shift));
    atomicOr(word, (code & 15u) << shift);
}

// Float to 64-bit integer, truncating toward zero and saturating as Rust's `as` does, NaN giving 0:
// the conversion instructions saturate but turn NaN into the most negative value.
__device__ __forceinline__ long long tl_to_int64(float x) { return x != x ? 0ll : __float2ll_rz(x); }
__device__ __forceinline__ long long tl_to_int64(double x) { return x != x ? 0ll : __double2ll_rz(x); }
__device__ __forceinline__ unsigned long long tl_to_uint64(float x) { return x != x ? 0ull : __float2ull_rz(x); }
__device__ __forceinline__ unsigned long long tl_to_uint64(double x) { return x != x ? 0ull : __double2ull_rz(x); }

// Integer helpers with Python's semantics: division rounds toward negative infinity and the
// remainder takes the divisor's sign. The printer names the type where the operands may differ.
template <typename T>
__device__ __forceinline__ T tl_floordiv(T a, T b) {
    T q = a / b;
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T>
__device__ __forceinline__ T tl_floormod(T a, T b) {
    T r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
// Float floor modulo as TVM and the emulator define it, in double: a - floor(a / b) * b, with the
// product rounded on its own (a fused multiply-add would round once and differ).
__device__ __forceinline__ double tl_floormod(double a, double b) {
    return a - __dmul_rn(floor(a / b), b);
}
template <typename T>
__device__ __forceinline__ T tl_min(T a, T b) {
    return b < a ? b : a;
}
template <typename T>
__device__ __forceinline__ T tl_max(T a, T b) {
    return a < b ? b : a;
}
template <typename T>
__device__ __forceinline__ T tl_abs(T a) {
    return a < 0 ? -a : a;
}
// Integer power by squaring, wrapping like every other integer operation. A negative exponent
// gives the truncated quotient 1 / base**-exponent, which is 0 unless |base| is 1.
template <typename T>
__device__ __forceinline__ T tl_ipow(T base, T exponent) {
    if (exponent < 0) {
        return base == 1 ? 1 : (base == -1 ? ((exponent & 1) ? -1 : 1) : 0);
    }
    unsigned long long result = 1ull;
    unsigned long long factor = (unsigned long long)base;
    for (unsigned long long e = (unsigned long long)exponent; e != 0ull; e >>= 1) {
        if (e & 1ull) {
            result *= factor;
        }
        factor *= factor;
    }
    return (T)result;
}

// Atomic read-modify-write where the hardware has no instruction: a compare-and-swap loop that
// retries until no other thread changed the word in between. The operations combine the current
// element with the operand as a value of the compute type; each returns the element it replaced,
// as the hardware atomics do.
struct tl_op_add {
    template <typename T>
    __device__ __forceinline__ T operator()(T a, T b) const {
        return a + b;
    }
};
struct tl_op_max {
    __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
    __device__ __forceinline__ double operator()(double a, double b) const { return fmax(a, b); }
    template <typename T>
    __device__ __forceinline__ T operator()(T a, T b) const {
        return a < b ? b : a;
    }
};
struct tl_op_min {
    __device__ __forceinline__ float operator()(float a, float b) const { return fminf(a, b); }
    __device__ __forceinline__ double operator()(double a, double b) const { return fmin(a, b); }
    template <typename T>
    __device__ __forceinline__ T operator()(T a, T b) const {
        return b < a ? b : a;
    }
};
template <typename Op>
__device__ __forceinline__ float tl_atomic_cas_f32(float* address, float value, Op op) {
    unsigned int* word = (unsigned int*)address;
    unsigned int old = *word;
    unsigned int assumed;
    do {
        assumed = old;
        old = atomicCAS(word, assumed, __float_as_uint(op(__uint_as_float(assumed), value)));
    } while (old != assumed);
    return __uint_as_float(old);
}
template <typename Op>
__device__ __forceinline__ double tl_atomic_cas_f64(double* address, double value, Op op) {
    unsigned long long* word = (unsigned long long*)address;
    unsigned long long old = *word;
    unsigned long long assumed;
    do {
        assumed = old;
        double updated = op(__longlong_as_double((long long)assumed), value);
        old = atomicCAS(word, assumed, (unsigned long long)__double_as_longlong(updated));
    } while (old != assumed);
    return __longlong_as_double((long long)old);
}

// Elements of one or two bytes are updated through the aligned 32-bit word that holds them. These
// overloads move between an element, its bits and its compute type.
__device__ __forceinline__ float tl_widen(tl_half x) { return tl_half_to_float(x); }
__device__ __forceinline__ float tl_widen(tl_bfloat16 x) { return tl_bfloat16_to_float(x); }
__device__ __forceinline__ float tl_widen(tl_fp8_e4m3 x) { return tl_e4m3_to_float(x); }
__device__ __forceinline__ float tl_widen(tl_fp8_e5m2 x) { return tl_e5m2_to_float(x); }
__device__ __forceinline__ float tl_widen(tl_tfloat32 x) { return tl_tfloat32_to_float(x); }
__device__ __forceinline__ float tl_widen(tl_fp4_e2m1 x) { return tl_e2m1_to_float(x); }
template <typename T>
__device__ __forceinline__ T tl_widen(T x) {
    return x;
}
__device__ __forceinline__ tl_half tl_narrow(float v, tl_half*) { return tl_float_to_half(v); }
__device__ __forceinline__ tl_bfloat16 tl_narrow(float v, tl_bfloat16*) { return tl_float_to_bfloat16(v); }
__device__ __forceinline__ tl_fp8_e4m3 tl_narrow(float v, tl_fp8_e4m3*) { return tl_float_to_e4m3(v); }
__device__ __forceinline__ tl_fp8_e5m2 tl_narrow(float v, tl_fp8_e5m2*) { return tl_float_to_e5m2(v); }
__device__ __forceinline__ tl_tfloat32 tl_narrow(float v, tl_tfloat32*) { return tl_float_to_tfloat32(v); }
__device__ __forceinline__ tl_fp4_e2m1 tl_narrow(float v, tl_fp4_e2m1*) { return tl_float_to_e2m1(v); }
template <typename V, typename T>
__device__ __forceinline__ T tl_narrow(V v, T*) {
    return (T)v;
}
__device__ __forceinline__ unsigned int tl_bits(tl_half x) { return x.bits; }
__device__ __forceinline__ unsigned int tl_bits(tl_bfloat16 x) { return x.bits; }
__device__ __forceinline__ unsigned int tl_bits(tl_fp8_e4m3 x) { return x.bits; }
__device__ __forceinline__ unsigned int tl_bits(tl_fp8_e5m2 x) { return x.bits; }
__device__ __forceinline__ unsigned int tl_bits(tl_tfloat32 x) { return x.bits; }
__device__ __forceinline__ unsigned int tl_bits(tl_fp4_e2m1 x) { return x.bits; }
template <typename T>
__device__ __forceinline__ unsigned int tl_bits(T x) {
    return (unsigned int)x;
}
template <typename T>
__device__ __forceinline__ T tl_from_bits(unsigned int bits, T*) {
    T x;
    x.bits = bits;
    return x;
}
__device__ __forceinline__ bool tl_from_bits(unsigned int bits, bool*) { return bits != 0u; }
__device__ __forceinline__ signed char tl_from_bits(unsigned int bits, signed char*) { return (signed char)bits; }
__device__ __forceinline__ unsigned char tl_from_bits(unsigned int bits, unsigned char*) {
    return (unsigned char)bits;
}
__device__ __forceinline__ short tl_from_bits(unsigned int bits, short*) { return (short)bits; }
__device__ __forceinline__ unsigned short tl_from_bits(unsigned int bits, unsigned short*) {
    return (unsigned short)bits;
}
template <typename T, typename V, typename Op>
__device__ __forceinline__ T tl_atomic_cas_small(T* address, V value, Op op) {
    unsigned long long at = (unsigned long long)address;
    unsigned int* word = (unsigned int*)(at & ~3ull);
    unsigned int shift = (unsigned int)(at & 3ull) * 8u;
    unsigned int mask = (sizeof(T) == 1 ? 0xffu : 0xffffu) << shift;
    unsigned int old = *word;
    unsigned int assumed;
    do {
        assumed = old;
        T element = tl_from_bits((assumed & mask) >> shift, address);
        T updated = tl_narrow(op((V)tl_widen(element), value), address);
        old = atomicCAS(word, assumed, (assumed & ~mask) | ((tl_bits(updated) << shift) & mask));
    } while (old != assumed);
    return tl_from_bits((old & mask) >> shift, address);
}
// ---- asynchronous copies and tensor cores (sm_80) ----------------------------------------------
// The thread program's cp.async, ldmatrix and mma.sync statements, one inline PTX instruction each.
// Register arrays are passed by pointer to their first element; after unrolling every index is a
// constant, so the arrays stay in registers. ldmatrix takes a 32-bit shared-window address that
// the kernel computes as one converted base plus a byte offset: the constant part of the offset
// then folds into the instruction's immediate, and no 64-bit pointer is kept per operand.
__device__ __forceinline__ unsigned int tl_shared_address(const void* p) {
    unsigned int address;
    asm("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }" : "=r"(address) : "l"(p));
    return address;
}
template <int Bytes>
__device__ __forceinline__ void tl_cp_async(void* shared, const void* global) {
    unsigned int s = tl_shared_address(shared);
    if (Bytes == 16) {
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(global) : "memory");
    } else {
        asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(s), "l"(global), "n"(Bytes)
                     : "memory");
    }
}
__device__ __forceinline__ void tl_cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int Pending>
__device__ __forceinline__ void tl_cp_async_wait() {
    asm volatile("cp.async.wait_group %0;" ::"n"(Pending) : "memory");
}
__device__ __forceinline__ void tl_ldmatrix_x1(void* dst, unsigned int src) {
    unsigned int* d = (unsigned int*)dst;
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];" : "=r"(d[0]) : "r"(src));
}
__device__ __forceinline__ void tl_ldmatrix_x1_trans(void* dst, unsigned int src) {
    unsigned int* d = (unsigned int*)dst;
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];"
                 : "=r"(d[0])
                 : "r"(src));
}
__device__ __forceinline__ void tl_ldmatrix_x2(void* dst, unsigned int src) {
    unsigned int* d = (unsigned int*)dst;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(src));
}
__device__ __forceinline__ void tl_ldmatrix_x2_trans(void* dst, unsigned int src) {
    unsigned int* d = (unsigned int*)dst;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
                 : "=r"(d[0]), "=r"(d[1])
                 : "r"(src));
}
__device__ __forceinline__ void tl_ldmatrix_x4(void* dst, unsigned int src) {
    unsigned int* d = (unsigned int*)dst;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(src));
}
__device__ __forceinline__ void tl_ldmatrix_x4_trans(void* dst, unsigned int src) {
    unsigned int* d = (unsigned int*)dst;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
                 : "r"(src));
}
__device__ __forceinline__ void tl_mma_m16n8k16_f16(float* c, const void* a, const void* b) {
    const unsigned int* x = (const unsigned int*)a;
    const unsigned int* y = (const unsigned int*)b;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]), "r"(y[1]));
}
__device__ __forceinline__ void tl_mma_m16n8k16_bf16(float* c, const void* a, const void* b) {
    const unsigned int* x = (const unsigned int*)a;
    const unsigned int* y = (const unsigned int*)b;
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]), "r"(y[1]));
}
// tf32 (m16n8k8): each float32 is rounded to tf32 first (cvt.rna, to nearest, ties away from
// zero), as the emulator does, rather than leaving the instruction to drop its low bits.
__device__ __forceinline__ unsigned int tl_tf32_bits(unsigned int word) {
    unsigned int rounded;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(rounded) : "f"(__uint_as_float(word)));
    return rounded;
}
__device__ __forceinline__ void tl_mma_m16n8k8_tf32(float* c, const void* a, const void* b) {
    const unsigned int* x = (const unsigned int*)a;
    const unsigned int* y = (const unsigned int*)b;
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(tl_tf32_bits(x[0])), "r"(tl_tf32_bits(x[1])), "r"(tl_tf32_bits(x[2])),
          "r"(tl_tf32_bits(x[3])), "r"(tl_tf32_bits(y[0])), "r"(tl_tf32_bits(y[1])));
}
// m16n8k32 on 8-bit operands: four A words and two B words of four elements each; fp8 (sm_89 and
// newer) accumulates in float32, s8/u8 in int32 (wrapping).
#define TL_MMA_M16N8K32(NAME, C_TYPE, C_OUT, TYPES)                                              \
    __device__ __forceinline__ void NAME(C_TYPE* c, const void* a, const void* b) {              \
        const unsigned int* x = (const unsigned int*)a;                                          \
        const unsigned int* y = (const unsigned int*)b;                                          \
        asm volatile("mma.sync.aligned.m16n8k32.row.col." TYPES                                  \
                     " {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"          \
                     : C_OUT(c[0]), C_OUT(c[1]), C_OUT(c[2]), C_OUT(c[3])                        \
                     : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]), "r"(y[1]));        \
    }
TL_MMA_M16N8K32(tl_mma_m16n8k32_e4m3_e4m3, float, "+f", "f32.e4m3.e4m3.f32")
TL_MMA_M16N8K32(tl_mma_m16n8k32_e4m3_e5m2, float, "+f", "f32.e4m3.e5m2.f32")
TL_MMA_M16N8K32(tl_mma_m16n8k32_e5m2_e4m3, float, "+f", "f32.e5m2.e4m3.f32")
TL_MMA_M16N8K32(tl_mma_m16n8k32_e5m2_e5m2, float, "+f", "f32.e5m2.e5m2.f32")
TL_MMA_M16N8K32(tl_mma_m16n8k32_s8_s8, int, "+r", "s32.s8.s8.s32")
TL_MMA_M16N8K32(tl_mma_m16n8k32_s8_u8, int, "+r", "s32.s8.u8.s32")
TL_MMA_M16N8K32(tl_mma_m16n8k32_u8_s8, int, "+r", "s32.u8.s8.s32")
TL_MMA_M16N8K32(tl_mma_m16n8k32_u8_u8, int, "+r", "s32.u8.u8.s32")
#undef TL_MMA_M16N8K32
// ---- warpgroup matrix multiply (sm_90a) -------------------------------------------------------
// The thread program's wgmma fences and groups; the wgmma instructions themselves are generated
// per shape in front of the kernel. A descriptor packs a shared address with the byte offsets of
// its canonical layout (PTX ISA, "Matrix Descriptor Format"): bits 0-13 the address / 16, 16-29 the
// leading-dimension offset / 16, 32-45 the stride-dimension offset / 16, 62-63 the swizzle.
__device__ __forceinline__ unsigned long long tl_wgmma_descriptor(
    const void* p, unsigned int leading, unsigned int stride, unsigned int layout_type) {
    unsigned long long address = tl_shared_address(p);
    return ((address & 0x3FFFF) >> 4) | ((unsigned long long)((leading & 0x3FFFF) >> 4) << 16) |
           ((unsigned long long)((stride & 0x3FFFF) >> 4) << 32) |
           ((unsigned long long)layout_type << 62);
}
__device__ __forceinline__ void tl_wgmma_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void tl_wgmma_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int Pending>
__device__ __forceinline__ void tl_wgmma_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(Pending) : "memory");
#endif
}
// After a wait, each accumulator register passes through an empty asm that claims to change it:
// the compiler may not move a read of it above the wait, which it cannot see writes it.
template <int Count>
__device__ __forceinline__ void tl_fence_registers(float* r) {
#pragma unroll
    for (int i = 0; i < Count; ++i) {
        asm volatile("" : "+f"(r[i])::"memory");
    }
}
template <int Count>
__device__ __forceinline__ void tl_fence_registers(int* r) {
#pragma unroll
    for (int i = 0; i < Count; ++i) {
        asm volatile("" : "+r"(r[i])::"memory");
    }
}
__device__ __forceinline__ void tl_fence_proxy_async() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
// ---- end of the tilec prelude -----------------------------------------------------------------
