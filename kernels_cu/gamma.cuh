// Gamma variates by Marsaglia and Tsang ("A simple method for generating gamma
// variables", ACM TOMS 26(3), 2000) on Philox words drawn in registers, shared
// by the gamma, beta and Dirichlet kernels of gamma.cu.
//
// The NumPy twin is gpumcmc/random/_gamma.py: the same counters, the same words
// in the same roles and the same floating-point expressions, so that both sides
// accept the same trial (but for rounding right at the acceptance boundary);
// the values then differ only by the rounding of log, log1p, exp and sqrt, and
// in float32 of the kernel's rsqrtf and hardware sine and cosine (see
// box_muller_fast), which the twin evaluates exactly.
//
// Counters. Element i (the flat index of the output, i < 2^40) uses Philox
// blocks j = 0, 1, 2, ... (j < 2^24) with the 64-bit index idx = i + 2^40 j,
// i.e. ctr = (i_lo, i_hi | j << 8, off_lo, off_hi), at the call offset `off`.
//
//   float,  attempt t:  block j = t
//     (z0, z1) = box_muller_fast(u01_f32(w0), u01_f32(w1)),
//     trial 2t = (z0, u01_f32(w2)), trial 2t+1 = (z1, u01_f32(w3)).
//     Boost uniform (shape < 1): u01_f32(b << 9) with the 23 bits
//     b = (w0 & 0x1ff) | (w1 & 0x1ff) << 9 | (w2 & 0x1f) << 18 of the accepted
//     attempt's block. u01_f32 reads only the top 23 bits of a word, so these
//     low bits are independent of every trial: the boost costs no Philox block.
//   double, attempt t:  blocks j = 1 + 2t and j = 2 + 2t
//     (z0, z1) = box_muller(u01_f64(w0, w1), u01_f64(w2, w3)) of the first,
//     trial 2t = (z0, u01_f64(w0', w1')), trial 2t+1 = (z1, u01_f64(w2', w3'))
//     of the second. Boost uniform: u01_f64(w0, w1) of block j = 0.
//
// Two trials per attempt: a trial fails with probability 0.049 at shape 1
// (0.003 at shape 10), and a warp loops until all its 32 elements accept, so
// one trial per attempt would send 1 - 0.951^32 = 80% of warps round the loop
// a second time; with two, 1 - (1 - 0.049^2)^32 = 7.4% of them at shape 1.
//
// Trial (x, u) with d = a' - 1/3, c = 1/sqrt(9 d) (a' = a, or a + 1 for a < 1):
//   v = 1 + c x; reject if v <= 0;
//   accept if u < 1 - 0.0331 x^4                  (squeeze, no logarithm)
//   or if   log u < x^2 / 2 + d (log(v^3) - v^3 + 1)
//           (mt_log_term below, exact for large d and for v -> 0)
// and then G(a') = d v^3 (v^3 >= ulp(1)^3, so its log is finite).
// Shape a < 1 uses the boost G(a) = G(a + 1) U^(1/a) in log space:
//   log G(a) = log G(a + 1) + log(U) / a,
// which stays finite for shapes down to 1e-6 and below, where G underflows;
// without log output, G(a) = G(a + 1) exp(log(U) / a).
#pragma once

#include "philox.cuh"

// Attempts per element before giving up with NaN. Each attempt fails with
// probability below 0.06^2 for valid shapes, so the cap is never reached; it
// only bounds the loop for shapes that validation was told not to check.
#ifndef GPUMCMC_GAMMA_MAX_ATTEMPTS
#define GPUMCMC_GAMMA_MAX_ATTEMPTS 4194304u
#endif

namespace gpumcmc {

// NaN and infinity without <cmath> (NVRTC has no NAN or INFINITY macros).
template <typename T>
struct fp_special;
template <>
struct fp_special<float> {
    __device__ static float nan() { return __int_as_float(0x7fffffff); }
    __device__ static float inf() { return __int_as_float(0x7f800000); }
};
template <>
struct fp_special<double> {
    __device__ static double nan() { return __longlong_as_double(0x7ff8000000000000ll); }
    __device__ static double inf() { return __longlong_as_double(0x7ff0000000000000ll); }
};

// box_muller for float32 uniforms with the angle from the hardware sine and
// cosine: z0 = r cos(2 pi u2), z1 = r sin(2 pi u2) as box_muller, written as
// -r cos(theta), -r sin(theta) with theta = 2 pi (u2 - 1/2) in [-pi, pi], where
// __sincosf has an absolute error below 2^-21.4; with the rounding of theta,
// |dz| < 6e-7 r. The radius uses the accurate logf and sqrtf. sincospif costs
// about 35 instructions against 3 here, a sixth of the float32 gamma kernel's
// work per element.
__device__ __forceinline__ void box_muller_fast(float u1, float u2, float& z0, float& z1) {
    const float r = sqrtf(-2.0f * logf(u1));
    float s, c;
    __sincosf(6.28318530717958648f * (u2 - 0.5f), &s, &c);
    z0 = -r * c;
    z1 = -r * s;
}

// Philox block j of element i: idx = i + 2^40 j.
__device__ __forceinline__ uint4 gamma_block(unsigned long long i, unsigned int j, uint2 key,
                                             unsigned int off_lo, unsigned int off_hi) {
    return philox4x32_10(
        make_uint4((unsigned int)i, (unsigned int)(i >> 32) | (j << 8), off_lo, off_hi), key);
}

// log(v^3) - v^3 + 1 = log1p(y) - y of the Marsaglia-Tsang test, from cx = v - 1
// and y = v^3 - 1. Below |y| = 1/4 it is -y s + 2 s^3 (1/3 + s^2/5 + ...) with
// s = y / (2 + y) (log1p(y) = 2 atanh(s)), which keeps full relative precision
// where log1p(y) - y would cancel: the test multiplies this by d, so an
// absolute error of eps * y would grow to eps * sqrt(d) * x. |s| <= 1/7, so
// s^2 <= 0.0205 and 5 (float) or 10 (double) terms suffice. Above, log(v^3)
// is taken as 3 log1p(cx), which stays accurate as v^3 -> 0 where 1 + y does not.
__device__ __forceinline__ float mt_log_term(float cx, float y) {
    if (fabsf(y) < 0.25f) {
        const float s = y / (2.0f + y);
        const float s2 = s * s;
        const float p = (1.0f / 3) + s2 * ((1.0f / 5) + s2 * ((1.0f / 7) + s2 * ((1.0f / 9) + s2 * (1.0f / 11))));
        return s * (2.0f * s2 * p - y);
    }
    return 3.0f * log1pf(cx) - y;
}

__device__ __forceinline__ double mt_log_term(double cx, double y) {
    if (fabs(y) < 0.25) {
        const double s = y / (2.0 + y);
        const double s2 = s * s;
        double p = 1.0 / 21;
        p = 1.0 / 19 + s2 * p;
        p = 1.0 / 17 + s2 * p;
        p = 1.0 / 15 + s2 * p;
        p = 1.0 / 13 + s2 * p;
        p = 1.0 / 11 + s2 * p;
        p = 1.0 / 9 + s2 * p;
        p = 1.0 / 7 + s2 * p;
        p = 1.0 / 5 + s2 * p;
        p = 1.0 / 3 + s2 * p;
        return s * (2.0 * s2 * p - y);
    }
    return 3.0 * log1p(cx) - y;
}

// The squeeze of a Marsaglia-Tsang trial (x, u): v = 1 + c x > 0 and
// u < 1 - 0.0331 x^4. Sets cx = c x.
template <typename T>
__device__ __forceinline__ bool mt_squeeze(T x, T u, T c, T& cx) {
    cx = c * x;
    const T x2 = x * x;
    return T(1) + cx > T(0) && u < T(1) - T(0.0331) * (x2 * x2);
}

// One Marsaglia-Tsang trial; returns whether it is accepted, and cx = c x
// (v = 1 + cx, G = mt_value(d, cx)).
template <typename T>
__device__ __forceinline__ bool mt_accept(T x, T u, T d, T c, T& cx) {
    if (mt_squeeze(x, u, c, cx)) return true;
    if (!(T(1) + cx > T(0))) return false;
    const T y = cx * (T(3) + cx * (T(3) + cx));  // v^3 - 1 without cancellation
    return log(u) < T(0.5) * (x * x) + d * mt_log_term(cx, y);
}

// G(a') = d v^3 with v = 1 + cx, of an accepted trial: >= d ulp(1)^3 > 0,
// never underflows.
template <typename T>
__device__ __forceinline__ T mt_value(T d, T cx) {
    const T v = T(1) + cx;
    return d * (v * v * v);
}

// d = a' - 1/3 and c = 1 / sqrt(9 d) for shape a (a' = a + 1 below 1).
template <typename T>
__device__ __forceinline__ void mt_setup(T a, bool boost, T& d, T& c) {
    d = (boost ? a + T(1) : a) - T(1.0 / 3.0);
    if constexpr (sizeof(T) == 4) {
        c = rsqrtf(9.0f * d);  // 2 ulp, against about 16 instructions for 1 / sqrtf
    } else {
        c = 1.0 / sqrt(9.0 * d);
    }
}

// The boost uniform of a float32 element: the 23 low bits of the accepted
// attempt's block that no trial reads.
__device__ __forceinline__ float boost_uniform_f32(uint4 w) {
    return u01_f32(((w.x & 0x1ffu) | ((w.y & 0x1ffu) << 9) | ((w.z & 0x1fu) << 18)) << 9);
}

// G(a) = G(a + 1) U^(1/a) for shape a < 1, or its log, from g = G(a + 1).
template <typename T>
__device__ __forceinline__ T boost_finish(T g, T a, T ub, bool want_log) {
    const T lu = log(ub) / a;
    return want_log ? log(g) + lu : g * exp(lu);
}

// The common case of gamma_variate without its loop: trial 0 accepted by the
// squeeze (about 92% of elements at any shape). Returns false where anything
// else is needed; otherwise cx of trial 0 and, for float32, the boost
// uniform, from which gamma_variate's value follows by the same expressions.
template <typename T>
__device__ __forceinline__ bool gamma_trial0_squeeze(T d, T c, unsigned long long i, uint2 key, unsigned int off_lo,
                                                     unsigned int off_hi, T& cx, T& ub) {
    T x, u;
    if constexpr (sizeof(T) == 4) {
        const uint4 w = gamma_block(i, 0u, key, off_lo, off_hi);
        float z1;
        box_muller_fast(u01_f32(w.x), u01_f32(w.y), x, z1);
        u = u01_f32(w.z);
        ub = boost_uniform_f32(w);
    } else {
        const uint4 w = gamma_block(i, 1u, key, off_lo, off_hi);
        double z1;
        box_muller(u01_f64(w.x, w.y), u01_f64(w.z, w.w), x, z1);
        const uint4 w2 = gamma_block(i, 2u, key, off_lo, off_hi);
        u = u01_f64(w2.x, w2.y);
        ub = T(0);
    }
    return mt_squeeze(x, u, c, cx);
}

// The float64 boost uniform: block 0 of the element.
__device__ __forceinline__ double boost_uniform_f64(unsigned long long i, uint2 key, unsigned int off_lo,
                                                    unsigned int off_hi) {
    const uint4 b = gamma_block(i, 0u, key, off_lo, off_hi);
    return u01_f64(b.x, b.y);
}

// G(a) (want_log false) or log G(a) (want_log true) for element i, and the
// accepted trial (2t or 2t + 1 for attempt t). A shape that is not a positive
// finite number, or attempts running out, give NaN and trial -1.
template <typename T>
__device__ __forceinline__ T gamma_variate(T a, unsigned long long i, uint2 key, unsigned int off_lo,
                                           unsigned int off_hi, bool want_log, int& trial) {
    trial = -1;
    if (!(a > T(0)) || !isfinite(a)) return fp_special<T>::nan();
    const bool boost = a < T(1);
    T d, c;
    mt_setup(a, boost, d, c);
    T cx, ub;
    for (unsigned int t = 0; t < GPUMCMC_GAMMA_MAX_ATTEMPTS; ++t) {
        if constexpr (sizeof(T) == 4) {
            const uint4 w = gamma_block(i, t, key, off_lo, off_hi);
            float z0, z1;
            box_muller_fast(u01_f32(w.x), u01_f32(w.y), z0, z1);
            if (mt_accept(z0, u01_f32(w.z), d, c, cx)) {
                trial = 2 * (int)t;
            } else if (mt_accept(z1, u01_f32(w.w), d, c, cx)) {
                trial = 2 * (int)t + 1;
            }
            if (trial >= 0) {
                ub = boost_uniform_f32(w);
                break;
            }
        } else {
            const uint4 w = gamma_block(i, 1u + 2u * t, key, off_lo, off_hi);
            double z0, z1;
            box_muller(u01_f64(w.x, w.y), u01_f64(w.z, w.w), z0, z1);
            const uint4 w2 = gamma_block(i, 2u + 2u * t, key, off_lo, off_hi);
            if (mt_accept(z0, u01_f64(w2.x, w2.y), d, c, cx)) {
                trial = 2 * (int)t;
            } else if (mt_accept(z1, u01_f64(w2.z, w2.w), d, c, cx)) {
                trial = 2 * (int)t + 1;
            }
            if (trial >= 0) break;
        }
    }
    if (trial < 0) return fp_special<T>::nan();
    const T g = mt_value(d, cx);
    if (boost) {
        if constexpr (sizeof(T) == 8) ub = boost_uniform_f64(i, key, off_lo, off_hi);
        return boost_finish(g, a, ub, want_log);
    }
    return want_log ? log(g) : g;
}

}  // namespace gpumcmc
