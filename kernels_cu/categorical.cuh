// Building blocks shared by the categorical kernels (categorical.cu and
// categorical_warp.cu): the sources of the weights, the row's uniform and the
// index store. The uniform of row r at call offset off is the Philox block with
// counter (r, off): u01_f32(w0) for float, u01_f64(w0, w1) for double, so every
// method draws with the same u. Twin: gpumcmc/discrete.py (row_uniforms).
#pragma once

#include "philox.cuh"

namespace gpumcmc {
namespace cat {

constexpr int W = 32;
constexpr unsigned FULL = 0xffffffffu;

enum { WEIGHTS = 0, LOGITS = 1, PRODUCTS = 2 };

__device__ __forceinline__ float row_uniform(float*, unsigned long long r, uint2 key, unsigned off_lo,
                                             unsigned off_hi) {
    return u01_f32(philox4x32_10(philox_counter(r, off_lo, off_hi), key).x);
}
__device__ __forceinline__ double row_uniform(double*, unsigned long long r, uint2 key, unsigned off_lo,
                                              unsigned off_hi) {
    const uint4 w = philox4x32_10(philox_counter(r, off_lo, off_hi), key);
    return u01_f64(w.x, w.y);
}

__device__ __forceinline__ float exp_t(float x) { return expf(x); }
__device__ __forceinline__ double exp_t(double x) { return exp(x); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float max_t(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ double max_t(double a, double b) { return fmax(a, b); }
__device__ __forceinline__ float neg_inf(float*) { return -__int_as_float(0x7f800000); }
__device__ __forceinline__ double neg_inf(double*) { return -__longlong_as_double(0x7ff0000000000000LL); }

__device__ __forceinline__ void store_index(void* out, int out64, long long r, long long idx) {
    if (out64) {
        static_cast<long long*>(out)[r] = idx;
    } else {
        static_cast<int*>(out)[r] = static_cast<int>(idx);
    }
}

}  // namespace cat
}  // namespace gpumcmc
