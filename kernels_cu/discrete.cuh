// Building blocks shared by the categorical kernels (discrete.cu and
// discrete_warp.cu): the sources of the weights, the row's uniform and the
// index store. The uniform of row r at call offset off is the Philox block with
// counter (r, off) (a part of a larger call: (row_counter(r), off), below):
// u01_f32(w0) for float, u01_f64(w0, w1) for double, so every method draws
// with the same u. Twin: gpumcmc/discrete.py (row_uniforms, counter_uniforms).
#pragma once

#include "philox.cuh"
#include "status.cuh"

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

// The Philox counter of token t of a call: cbase + t, or cbase + cidx[t] where
// the call names each token's counter (a part of a larger call: token t then
// draws with the uniform of token cbase + cidx[t] of it). cbase = 0 and no
// cidx: the counter is t.
__device__ __forceinline__ unsigned long long row_counter(long long t, long long cbase,
                                                          const long long* __restrict__ cidx) {
    return (unsigned long long)(cbase + (cidx != nullptr ? cidx[t] : t));
}

__device__ __forceinline__ float exp_t(float x) { return expf(x); }
__device__ __forceinline__ double exp_t(double x) { return exp(x); }
__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float max_t(float a, float b) { return fmaxf(a, b); }
__device__ __forceinline__ float min_t(float a, float b) { return fminf(a, b); }
__device__ __forceinline__ double min_t(double a, double b) { return fmin(a, b); }
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

// Why a row has no index, or holds a negative weight: a StatusCode, or 0 when
// it is fine. One thread rescans the row (pa: weights, logits or the theta
// row; pb: the phi row), so it runs only for rows already seen to be bad.
template <typename T, int SRC>
__device__ unsigned row_code(const T* pa, const T* pb, int K) {
    bool nan = false, inf = false, neg = false, neg_b = false;
    T total = T(0), top = neg_inf((T*)nullptr);
    for (int k = 0; k < K; ++k) {
        const T x = pa[k];
        if constexpr (SRC == LOGITS) {
            nan |= x != x;
            inf |= x == -neg_inf((T*)nullptr);
            top = max_t(top, x);
        } else {
            T w = x;
            if constexpr (SRC == PRODUCTS) {
                const T y = pb[k];
                neg |= x < T(0);
                neg_b |= y < T(0);
                w = mul_rn(x, y);
            } else {
                neg |= x < T(0);
            }
            nan |= w != w;
            inf |= w == -neg_inf((T*)nullptr);
            total += w;
        }
    }
    if (nan) return ST_NAN;
    if (inf) return ST_INF;
    if (neg) return ST_NEG;
    if (neg_b) return ST_NEG_B;
    if constexpr (SRC == LOGITS) {
        return top == neg_inf((T*)nullptr) ? ST_ZERO : 0u;
    } else {
        if (!(total > T(0))) return ST_ZERO;
        if (total == -neg_inf((T*)nullptr)) return ST_OVERFLOW;
        return 0u;
    }
}

// Note row r (flat) of a draw that found no index, or that met a negative
// weight (`neg`): rescans it for the reason. `oob`: a products index out of
// range (rows_idx / cols_idx say which). Call on the bad path only.
template <typename T, int SRC>
__device__ __forceinline__ void note_row(unsigned long long* status, unsigned long long tag, long long r, bool found,
                                         const T* pa, const T* pb, int K, bool oob, const int* rows_idx,
                                         long long n_a) {
    unsigned code;
    if (oob) {
        code = (unsigned long long)rows_idx[r] >= (unsigned long long)n_a ? ST_ROWS : ST_COLS;
    } else {
        code = row_code<T, SRC>(pa, pb, K);
        if (code == 0u && !found) code = ST_TINY;
    }
    if (code != 0u) status_note(status, tag, (unsigned long long)r, code);
}

// Log-likelihood sums of the draws (categorical_products' log_total, LDA's
// monitor): a thread adds log(max(total, 1e-300)) of each row it draws into a
// double in a register, for the group r / ll_group of the row (the rows of one
// chain), and writes to ll[group] with an atomicAdd when its group changes
// (rows come in increasing order, so at most once per group boundary) and at
// the end, where the lanes of a warp that share a group add once through their
// leader (the kernels' LL = true instantiations). The sum's order
// of additions (and so its last bits) varies from run to run; the draws do not
// depend on it. Twin: gpumcmc/discrete.py (_log_totals).
struct LogSum {
    double acc = 0.0;
    long long group = -1;
};

__device__ __forceinline__ double log_total(double total) { return log(fmax(total, 1e-300)); }

__device__ __forceinline__ void ll_add(double* __restrict__ ll, long long ll_group, LogSum& s, long long r,
                                       double total) {
    const long long g = r / ll_group;
    if (g != s.group) {
        if (s.group >= 0) atomicAdd(ll + s.group, s.acc);
        s.acc = 0.0;
        s.group = g;
    }
    s.acc += log_total(total);
}

// Every lane of the warp must call it (converged).
__device__ __forceinline__ void ll_flush(double* __restrict__ ll, const LogSum& s, int lane) {
    const unsigned peers = __match_any_sync(FULL, (unsigned long long)s.group);
    double sum = 0.0;
#pragma unroll
    for (int j = 0; j < W; ++j) {
        const double v = __shfl_sync(FULL, s.acc, j);
        if ((peers >> j) & 1u) sum += v;
    }
    if (s.group >= 0 && lane == __ffs(peers) - 1) atomicAdd(ll + s.group, sum);
}

}  // namespace cat
}  // namespace gpumcmc
