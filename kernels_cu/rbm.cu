// The fused half of a block-Gibbs step of a restricted Boltzmann machine:
// given the pre-activations A = X W (computed by cuBLAS through CuPy's
// matmul), draw out[r, u] = 1 if U < sigmoid(A[r, u] + bias[u]) else 0, for
// every chain r and unit u, in one pass: the bias, the sigmoid and the
// Bernoulli draw never touch memory between them.
//
// Random numbers: element e = r * cols + u takes word e % 4 of the Philox
// call with counter index e / 4 at the half-step's call offset (one offset per
// half-step), turned into a float32 uniform (u01_f32) for float and into a
// float64 one at 32-bit resolution (u01_f64_from32) for double: keyed by
// (chain, unit, step), whatever the launch shape. Twin: gpumcmc/models/rbm.py.
//
// `out` may be `pre` (in place): each element is read and written by one thread.
#include "philox.cuh"

#ifndef RBM_BLOCK
#define RBM_BLOCK 256
#endif

using namespace gpumcmc;

template <typename T>
__device__ __forceinline__ T rbm_draw(T x, unsigned int w) {
    if constexpr (sizeof(T) == 4) {
        return u01_f32(w) * (1.0f + __expf(-x)) < 1.0f ? 1.0f : 0.0f;  // u < 1 / (1 + e^-x)
    } else {
        return u01_f64_from32(w) * (1.0 + exp(-x)) < 1.0 ? 1.0 : 0.0;
    }
}

template <typename T>
__global__ void __launch_bounds__(RBM_BLOCK)
rbm_bernoulli(const T* pre, const T* __restrict__ bias, T* out, long long rows, long long cols,
              unsigned int k0, unsigned int k1, unsigned int off_lo, unsigned int off_hi) {
    const long long n = rows * cols;
    const long long nb = (n + 3) / 4;
    const uint2 key = make_uint2(k0, k1);
    const long long stride = (long long)gridDim.x * blockDim.x;
    const bool small = n + 4 * stride < 0xffffffffLL;  // 32-bit modulo (64-bit costs ~70 instructions)
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += stride) {
        const uint4 r = philox4x32_10(philox_counter(b, off_lo, off_hi), key);
        const unsigned int w[4] = {r.x, r.y, r.z, r.w};
        long long u = small ? (long long)((unsigned int)(4 * b) % (unsigned int)cols) : (4 * b) % cols;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const long long e = 4 * b + q;
            if (e >= n) break;
            out[e] = rbm_draw<T>(pre[e] + bias[u], w[q]);
            if (++u == cols) u = 0;
        }
    }
}

#ifndef __CUDACC_RTC__
template __global__ void rbm_bernoulli<float>(const float*, const float*, float*, long long, long long, unsigned int,
                                              unsigned int, unsigned int, unsigned int);
template __global__ void rbm_bernoulli<double>(const double*, const double*, double*, long long, long long,
                                               unsigned int, unsigned int, unsigned int, unsigned int);
#endif
