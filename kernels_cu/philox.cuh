// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
// SC'11; the Random123 reference constants) and the conversions of its words to
// uniforms and normals that every gpumcmc kernel uses.
//
// The NumPy twin is gpumcmc/random/_philox.py. Both sides must produce the same
// bits: change one, change the other, and run tests/test_philox.py on a GPU.
//
// Counter layout used by the library (see gpumcmc/random/_philox.py):
//   ctr = (idx_lo, idx_hi, off_lo, off_hi), key = (k0, k1)
// where `off` is the generator's call offset (one per public call, never reused)
// and `idx` is a 64-bit index owned by the caller (a block of elements for
// fills, or (element, attempt) for rejection samplers).
#pragma once

#define GPUMCMC_PHILOX_M0 0xD2511F53u
#define GPUMCMC_PHILOX_M1 0xCD9E8D57u
#define GPUMCMC_PHILOX_W0 0x9E3779B9u
#define GPUMCMC_PHILOX_W1 0xBB67AE85u

namespace gpumcmc {

__device__ __forceinline__ uint4 philox4x32_10(uint4 c, uint2 k) {
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k.x += GPUMCMC_PHILOX_W0;
            k.y += GPUMCMC_PHILOX_W1;
        }
        const unsigned int hi0 = __umulhi(GPUMCMC_PHILOX_M0, c.x);
        const unsigned int lo0 = GPUMCMC_PHILOX_M0 * c.x;
        const unsigned int hi1 = __umulhi(GPUMCMC_PHILOX_M1, c.z);
        const unsigned int lo1 = GPUMCMC_PHILOX_M1 * c.z;
        c = make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    }
    return c;
}

// The counter for 64-bit index `idx` at call offset `off`.
__device__ __forceinline__ uint4 philox_counter(unsigned long long idx, unsigned int off_lo,
                                                unsigned int off_hi) {
    return make_uint4((unsigned int)idx, (unsigned int)(idx >> 32), off_lo, off_hi);
}

// The call offset of a launch that a CUDA graph may replay: the offset passed
// by value plus, where `off_dev` is not null, the 64-bit value it points to,
// which the graph advances between replays (see gpumcmc/sampling/_graph.py).
// Kernels call it once, on entry, on their by-value offset.
__device__ __forceinline__ void offset_from_device(const unsigned long long* off_dev, unsigned int& off_lo,
                                                   unsigned int& off_hi) {
    if (off_dev != nullptr) {
        const unsigned long long o = ((((unsigned long long)off_hi) << 32) | off_lo) + *off_dev;
        off_lo = (unsigned int)o;
        off_hi = (unsigned int)(o >> 32);
    }
}

// float32 uniform strictly inside (0, 1): the top 23 bits of w, plus a half
// step. Values are (m + 0.5) * 2^-23 for m in [0, 2^23), so the CPU twin gives
// the same bits. Smallest 2^-24, largest 1 - 2^-24. Computed as
// (1 + m 2^-23) - (1 - 2^-24): the first term is m under the exponent of 1
// (no conversion), and the difference is exact (Sterbenz).
__device__ __forceinline__ float u01_f32(unsigned int w) {
    return __uint_as_float((w >> 9) | 0x3f800000u) - 0.999999940395355225f;  // 1 - 2^-24
}

// float64 uniform strictly inside (0, 1) from two words: 52 bits
// (a << 20 | b >> 12), plus a half step, times 2^-52. Exact in float64.
__device__ __forceinline__ double u01_f64(unsigned int a, unsigned int b) {
    const unsigned long long m = (static_cast<unsigned long long>(a) << 20) | (b >> 12);
    return (static_cast<double>(m) + 0.5) * 2.220446049250313e-16;  // 2^-52
}

// float64 uniform from one word at 32-bit resolution: (w + 0.5) * 2^-32.
// Used where a float32 result is computed internally in float64.
__device__ __forceinline__ double u01_f64_from32(unsigned int w) {
    return (static_cast<double>(w) + 0.5) * 2.3283064365386963e-10;  // 2^-32
}

// Box-Muller on two uniforms in (0, 1): z0 = r cos(2 pi u2), z1 = r sin(2 pi u2).
__device__ __forceinline__ void box_muller(double u1, double u2, double& z0, double& z1) {
    const double r = sqrt(-2.0 * log(u1));
    double s, c;
    sincospi(2.0 * u2, &s, &c);
    z0 = r * c;
    z1 = r * s;
}

__device__ __forceinline__ void box_muller(float u1, float u2, float& z0, float& z1) {
    const float r = sqrtf(-2.0f * logf(u1));
    float s, c;
    sincospif(2.0f * u2, &s, &c);
    z0 = r * c;
    z1 = r * s;
}

}  // namespace gpumcmc
