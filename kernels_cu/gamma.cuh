// Gamma variates by Marsaglia and Tsang ("A simple method for generating gamma
// variables", ACM TOMS 26(3), 2000) on Philox words drawn in registers, shared
// by the gamma, beta and Dirichlet kernels of gamma.cu.
//
// The NumPy twin is gpumcmc/random/_gamma.py: the same counters, the same words
// in the same roles and the same floating-point expressions, so that both sides
// accept the same trial (but for rounding right at the acceptance boundary);
// the values then differ only by the rounding of log, log1p, exp and sqrt, and
// in float32 of the kernel's approximate reciprocal square root (as rsqrtf,
// 2 ulp) and hardware sine and cosine (see box_muller_fast), which the twin
// evaluates exactly.
//
// Counters. Block j of index x is the Philox block at the 64-bit index
// idx = x + 2^40 j, i.e. ctr = (x_lo, x_hi | j << 8, off_lo, off_hi), at the
// call offset `off` (x < 2^40, j < 2^24). Elements (i the flat index of the
// output) come in pairs p = i >> 1, halves h = i & 1, that share trial 0:
//
//   trial 0 (one per element)   float:  block 0 of 2p: (z0, z1) = box_muller_fast(
//                                       u01_f32(w0), u01_f32(w1)); half h takes
//                                       (z_h, u01_f32(w2)) or (z_h, u01_f32(w3))
//                               double: block 0 of 2p: (z0, z1) = box_muller(
//                                       u01_f64(w0, w1), u01_f64(w2, w3)); block 0 of
//                                       2p + 1: u = u01_f64(w0, w1) or u01_f64(w2, w3)
//   boost uniform (shape < 1)   block 1 of 2p: float u01_f32(w0) or u01_f32(w1),
//                                       double u01_f64(w0, w1) or u01_f64(w2, w3)
//   attempt t >= 1 (two trials) float:  block 1 + t of i: trials 2t - 1 = (z0, u01_f32(w2))
//                                       and 2t = (z1, u01_f32(w3)), z from w0, w1 as above
//                               double: block 2t of i: the normals; block 2t + 1 of i:
//                                       the trials' uniforms u01_f64(w0, w1), u01_f64(w2, w3)
//
// One Box-Muller pair and one Philox block (two in float64) thus serve two
// elements in the common case. Trial 0 fails with probability 0.049 at shape
// 1 (0.003 at shape 10); each later attempt makes two trials, both failing
// with probability below 0.0025.
//
// Trial (x, u) with d = a' - 1/3, c = 1/sqrt(9 d) (a' = a, or a + 1 for a < 1):
//   v = 1 + c x; reject if v <= 0;
//   accept if u m < m - (c x^2)^2 / 12, m = min(v, 1)   (squeeze, no logarithm)
//   or if   log u < x^2 / 2 + d (log(v^3) - v^3 + 1)
//           (mt_log_term below, exact for large d and for v -> 0)
// The squeeze is tighter than Marsaglia and Tsang's u < 1 - 0.0331 x^4, and
// still inside the logarithmic test's region: with t = c x, the test's right
// side is d h(t), h(t) = 3 log(1 + t) - 3 t + 3 t^2 / 2 - t^3, and
// h(t) >= -3 t^4 / (4 min(1 + t, 1)) for t > -1 (for t >= 0 the difference
// has derivative 3 t^4 / (1 + t) >= 0 from 0 at t = 0; for t < 0 it has
// derivative 3 t^3 - 3 t^4 / (4 (1 + t)^2) < 0 down to 0 at t = 0), so with
// d = 1 / (9 c^2) the right side is at least -(c x^2)^2 / (12 m), and
// log u <= u - 1 does the rest. It leaves 2.2% of trials at the suite's shapes
// (log-uniform on [0.1, 100]) to the logarithm, against 8.3% for 0.0331 x^4
// (1.6% are rejected), 0.1% above shape 10.
// and then G(a') = d v^3 (v^3 >= ulp(1)^3, so its log is finite).
// Shape a < 1 uses the boost G(a) = G(a + 1) U^(1/a) in log space:
//   log G(a) = log G(a + 1) + log(U) / a,
// which stays finite for shapes down to 1e-6 and below, where G underflows;
// without log output, G(a) = G(a + 1) 2^(log(U) log2(e) / a).
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

// Natural log of a positive, normal, finite float (uniforms, gamma values),
// without logf's handling of zero, subnormals, infinity and NaN: about 15
// instructions against 28. x = 2^e m with m in [2/3, 4/3), f = m - 1, and
// log1p(f) = f + f^2 (-1/2 + f P(f)), P a degree-7 polynomial fitted to
// (log1p(f) - f + f^2 / 2) / f^3 on [-1/3, 1/3] (weighted minimax, fit error
// 0.08 ulp). Checked against float64 log on every float32 uniform
// (u01_f32's 2^23 values) and across [2^-120, 2^120]: at most 0.92 ulp, as
// logf's 1 ulp (tests/test_gamma.py runs the check on the GPU).
__device__ __forceinline__ float log_pos(float x) {
    const int ix = __float_as_int(x);
    const int e = (ix - 0x3f2aaaab) & (int)0xff800000;
    const float f = __int_as_float(ix - e) - 1.0f;
    float p = -0.1293291449546814f;
    p = fmaf(p, f, 0.14024879038333893f);
    p = fmaf(p, f, -0.12175694853067398f);
    p = fmaf(p, f, 0.13998347520828247f);
    p = fmaf(p, f, -0.16681037843227386f);
    p = fmaf(p, f, 0.20010817050933838f);
    p = fmaf(p, f, -0.24999786913394928f);
    p = fmaf(p, f, 0.3333320915699005f);
    p = fmaf(p, f, -0.5f);
    const float r = fmaf(f, f * p, f);
    // e / 2^23 is the exponent; e times (log 2 rounded to float) / 2^23, both
    // exact products, gives the same fma as (e / 2^23) times log 2.
    return fmaf((float)e, 0x1.62e430p-24f, r);
}
__device__ __forceinline__ double log_pos(double x) { return log(x); }

// sqrtf for a positive normal float x in [2^-101, 2^128): the compiler's fast
// path for sqrt.rn.f32 (an approximate reciprocal square root and one Newton
// step with fused multiply-adds, correctly rounded in that range), without
// its range test and branch to the slow path for other arguments, which
// would end the basic block in the middle of the gamma kernel's main loop.
__device__ __forceinline__ float sqrt_pos(float x) {
    float r, e, s;
    asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    s = x * r;
    const float h = r * 0.5f;
    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(e) : "f"(-s), "f"(s), "f"(x));
    asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(s) : "f"(e), "f"(h), "f"(s));
    return s;
}

// box_muller for float32 uniforms with the angle from the hardware sine and
// cosine: z0 = r cos(2 pi u2), z1 = r sin(2 pi u2) as box_muller, written as
// -r cos(theta), -r sin(theta) with theta = 2 pi (u2 - 1/2) in [-pi, pi], where
// __sincosf has an absolute error below 2^-21.4; with the rounding of theta,
// |dz| < 6e-7 r. The radius uses the accurate log_pos and sqrt (u1 is at most
// 1 - 2^-24, so -2 log u1 >= 1.1e-7 is in sqrt_pos's range). sincospif costs
// about 35 instructions against 3 here, a sixth of the float32 gamma kernel's
// work per element.
__device__ __forceinline__ void box_muller_fast(float u1, float u2, float& z0, float& z1) {
    const float r = sqrt_pos(-2.0f * log_pos(u1));
    float s, c;
    __sincosf(6.28318530717958648f * (u2 - 0.5f), &s, &c);
    z0 = -r * c;
    z1 = -r * s;
}

// Philox block j of index i: idx = i + 2^40 j.
__device__ __forceinline__ uint4 gamma_block(unsigned long long i, unsigned int j, uint2 key,
                                             unsigned int off_lo, unsigned int off_hi) {
    return philox4x32_10(
        make_uint4((unsigned int)i, (unsigned int)(i >> 32) | (j << 8), off_lo, off_hi), key);
}

// The Marsaglia-Tsang tests and values below leave the compiler nothing to
// fuse: every product that feeds an addition is either an explicit fma or
// kept apart by add_rn. Left to itself the compiler fused 1 + c * x in one
// kernel and not in another, and the same element then had values a last
// bit apart in gamma_draw's two schedules.
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }

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
        float p = fmaf(s2, 1.0f / 11, 1.0f / 9);
        p = fmaf(s2, p, 1.0f / 7);
        p = fmaf(s2, p, 1.0f / 5);
        p = fmaf(s2, p, 1.0f / 3);
        return s * fmaf(2.0f * s2, p, -y);
    }
    return fmaf(3.0f, log1pf(cx), -y);
}

__device__ __forceinline__ double mt_log_term(double cx, double y) {
    if (fabs(y) < 0.25) {
        const double s = y / (2.0 + y);
        const double s2 = s * s;
        double p = 1.0 / 21;
#pragma unroll
        for (int k = 19; k >= 3; k -= 2) p = fma(s2, p, 1.0 / k);
        return s * fma(2.0 * s2, p, -y);
    }
    return fma(3.0, log1p(cx), -y);
}

// The squeeze of a Marsaglia-Tsang trial (x, u): v = 1 + c x > 0 and
// u m < m - (c x^2)^2 / 12 with m = min(v, 1) (see the top of this file).
// Sets v, rounded as 1 + (c x rounded), as the twin computes it.
template <typename T>
__device__ __forceinline__ bool mt_squeeze(T x, T u, T c, T& v) {
    const T cx = c * x;
    v = add_rn(T(1), cx);
    const T m = v < T(1) ? v : T(1);
    const T q = cx * x;
    // & rather than &&: both sides are evaluated, and the compiler keeps the
    // result in a predicate instead of computing it under one and then
    // materialising a bool (a dozen instructions per pair in gamma_draw).
    return (v > T(0)) & (u * m < fma(T(-1.0 / 12.0), q * q, m));
}

// One Marsaglia-Tsang trial; returns whether it is accepted, and v = 1 + c x
// (G = mt_value(d, v)).
template <typename T>
__device__ __forceinline__ bool mt_accept(T x, T u, T d, T c, T& v) {
    if (mt_squeeze(x, u, c, v)) return true;
    if (!(v > T(0))) return false;
    const T cx = c * x;
    const T y = cx * fma(cx, T(3) + cx, T(3));  // v^3 - 1 without cancellation
    return log_pos(u) < fma(d, mt_log_term(cx, y), T(0.5) * (x * x));
}

// G(a') = d v^3 of an accepted trial: >= d ulp(1)^3 > 0, never underflows.
template <typename T>
__device__ __forceinline__ T mt_value(T d, T v) {
    return d * (v * v * v);
}

// d = a' - 1/3 and c = 1 / sqrt(9 d) for shape a (a' = a + 1 below 1).
template <typename T>
__device__ __forceinline__ void mt_setup(T a, bool boost, T& d, T& c) {
    d = (boost ? a + T(1) : a) - T(1.0 / 3.0);
    if constexpr (sizeof(T) == 4) {
        // rsqrtf (2 ulp, against about 16 instructions for 1 / sqrtf) without
        // its scaling of subnormal arguments: 9 d >= 6 here.
        asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(c) : "f"(9.0f * d));
    } else {
        c = 1.0 / sqrt(9.0 * d);
    }
}

// G(a) = G(a + 1) U^(1/a) for shape a < 1, or its log, from v = G(a + 1)
// (want_log false) or v = log G(a + 1) (want_log true). G takes U^(1/a) as
// 2^(log(U) log2(e) / a): exp2f is one hardware instruction where expf is
// about ten (argument reduction in two parts), with the same 2 ulp bound;
// the product by log2(e) adds half an ulp to the exponent's rounding.
template <typename T>
__device__ __forceinline__ T boost_apply(T v, T a, T ub, bool want_log) {
    const T lu = log_pos(ub);
    return want_log ? v + lu / a : v * exp2(lu * T(1.4426950408889634) / a);
}

// The Philox words of trial 0 of the pair p (one block for float, two for
// double), apart from their use: a loop may compute a round's words one
// round ahead.
template <typename T>
struct Trial0Words {
    uint4 w;
};
template <>
struct Trial0Words<double> {
    uint4 w, v;
};

template <typename T>
__device__ __forceinline__ Trial0Words<T> trial0_words(unsigned long long p, uint2 key, unsigned int off_lo,
                                                       unsigned int off_hi) {
    Trial0Words<T> t;
    t.w = gamma_block(2 * p, 0u, key, off_lo, off_hi);
    if constexpr (sizeof(T) == 8) t.v = gamma_block(2 * p + 1, 0u, key, off_lo, off_hi);
    return t;
}

// Trial 0 of the pair p from its words: (x0, u0) for element 2p and (x1, u1)
// for element 2p + 1.
template <typename T>
__device__ __forceinline__ void trial0_values(const Trial0Words<T>& t, T& x0, T& u0, T& x1, T& u1) {
    const uint4 w = t.w;
    if constexpr (sizeof(T) == 4) {
        box_muller_fast(u01_f32(w.x), u01_f32(w.y), x0, x1);
        u0 = u01_f32(w.z);
        u1 = u01_f32(w.w);
    } else {
        box_muller(u01_f64(w.x, w.y), u01_f64(w.z, w.w), x0, x1);
        u0 = u01_f64(t.v.x, t.v.y);
        u1 = u01_f64(t.v.z, t.v.w);
    }
}

template <typename T>
__device__ __forceinline__ void pair_trial0(unsigned long long p, uint2 key, unsigned int off_lo,
                                            unsigned int off_hi, T& x0, T& u0, T& x1, T& u1) {
    trial0_values(trial0_words<T>(p, key, off_lo, off_hi), x0, u0, x1, u1);
}

// The boost uniforms of the pair p: b0 for element 2p, b1 for element 2p + 1.
template <typename T>
__device__ __forceinline__ void pair_boost(unsigned long long p, uint2 key, unsigned int off_lo,
                                           unsigned int off_hi, T& b0, T& b1) {
    const uint4 w = gamma_block(2 * p, 1u, key, off_lo, off_hi);
    if constexpr (sizeof(T) == 4) {
        b0 = u01_f32(w.x);
        b1 = u01_f32(w.y);
    } else {
        b0 = u01_f64(w.x, w.y);
        b1 = u01_f64(w.z, w.w);
    }
}

// The boost uniform of element i alone (its half of block 1 of its pair).
template <typename T>
__device__ __forceinline__ T element_boost(unsigned long long i, uint2 key, unsigned int off_lo,
                                           unsigned int off_hi) {
    T b0, b1;
    pair_boost(i >> 1, key, off_lo, off_hi, b0, b1);
    return (i & 1) ? b1 : b0;
}

// Whether a is a shape the sampler takes: positive and finite (false for NaN).
// float: one unsigned compare of the bits, 1 <= bits <= 0x7f7fffff (the
// positive finite floats, subnormals included as on the host), against two
// float compares and their conjunction.
__device__ __forceinline__ bool valid_shape(float a) { return __float_as_uint(a) - 1u < 0x7f7fffffu; }
__device__ __forceinline__ bool valid_shape(double a) {
    return (a > 0.0) & (a < fp_special<double>::inf());
}

// G(a') (want_log false) or log G(a') (want_log true) of the accepted trial's
// v, or NaN where no trial was accepted (trial < 0).
template <typename T>
__device__ __forceinline__ T mt_result(T d, T v, int trial, bool want_log) {
    if (trial < 0) return fp_special<T>::nan();
    const T g = mt_value(d, v);
    return want_log ? log_pos(g) : g;
}

// Trial 0 by the squeeze alone: true, with g = G(a'), where it accepts; false
// where the element needs gamma_unboosted (the logarithmic test, another
// attempt, or a shape that is not a positive finite number), and then g is
// meaningless. Written without branches: every lane of a warp runs it.
template <typename T>
__device__ __forceinline__ bool trial0_squeeze(T a, T x, T u, T& g) {
    const bool valid = valid_shape(a);
    T d, c, v;
    mt_setup(a, a < T(1), d, c);
    const bool ok = mt_squeeze(x, u, c, v) & valid;
    g = mt_value(d, v);
    return ok;
}

// Attempts t = 1, 2, ... of element i, two trials each, until one is
// accepted: returns its number (2t - 1 or 2t) and its v, or -1 when the
// attempts run out.
template <typename T>
__device__ __forceinline__ int mt_attempts(T d, T c, unsigned long long i, uint2 key, unsigned int off_lo,
                                           unsigned int off_hi, T& v) {
    for (unsigned int t = 1; t < GPUMCMC_GAMMA_MAX_ATTEMPTS; ++t) {
        T z0, z1, ua, ub;
        if constexpr (sizeof(T) == 4) {
            const uint4 w = gamma_block(i, 1u + t, key, off_lo, off_hi);
            box_muller_fast(u01_f32(w.x), u01_f32(w.y), z0, z1);
            ua = u01_f32(w.z);
            ub = u01_f32(w.w);
        } else {
            const uint4 w = gamma_block(i, 2u * t, key, off_lo, off_hi);
            box_muller(u01_f64(w.x, w.y), u01_f64(w.z, w.w), z0, z1);
            const uint4 w2 = gamma_block(i, 2u * t + 1u, key, off_lo, off_hi);
            ua = u01_f64(w2.x, w2.y);
            ub = u01_f64(w2.z, w2.w);
        }
        if (mt_accept(z0, ua, d, c, v)) return 2 * (int)t - 1;
        if (mt_accept(z1, ub, d, c, v)) return 2 * (int)t;
    }
    return -1;
}

// G(a') (want_log false) or log G(a') (want_log true) of element i from its
// trial 0 (x0, u0), before any boost, and the accepted trial. A shape that is
// not a positive finite number, or attempts running out, give NaN and trial -1.
template <typename T>
__device__ __forceinline__ T gamma_unboosted(T a, unsigned long long i, T x0, T u0, uint2 key,
                                             unsigned int off_lo, unsigned int off_hi, bool want_log, int& trial) {
    trial = -1;
    if (!valid_shape(a)) return fp_special<T>::nan();
    T d, c, v;
    mt_setup(a, a < T(1), d, c);
    trial = mt_accept(x0, u0, d, c, v) ? 0 : mt_attempts(d, c, i, key, off_lo, off_hi, v);
    return mt_result(d, v, trial, want_log);
}

// G(a) (want_log false) or log G(a) (want_log true) of element i from its
// trial 0 (x0, u0): gamma_unboosted, then the boost for a shape below 1.
template <typename T>
__device__ __forceinline__ T gamma_from_trial0(T a, unsigned long long i, T x0, T u0, uint2 key,
                                               unsigned int off_lo, unsigned int off_hi, bool want_log,
                                               int& trial) {
    const T v = gamma_unboosted(a, i, x0, u0, key, off_lo, off_hi, want_log, trial);
    if (trial >= 0 && a < T(1)) return boost_apply(v, a, element_boost<T>(i, key, off_lo, off_hi), want_log);
    return v;
}

}  // namespace gpumcmc
