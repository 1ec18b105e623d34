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
// (chain, unit, step), whatever the launch shape. Twin: gpumcmc/models/rbm/ops.py.
//
// `out` may be `pre` (in place): each element is read and written by one thread.
#include "philox.cuh"
#include "warp_reduce.cuh"

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

// ---------------------------------------------------------------------------
// One epoch of persistent contrastive divergence for a small RBM, in one block.
//
// scikit-learn's schedule (pcd_epoch_step in
// gpumcmc/models/rbm/algorithm.py) takes one minibatch of `batch` rows at a
// time and updates the weights after each, so the minibatches depend on each
// other and a small model (the 8 x 8 digits: 64 x 256 weights) gives a GPU
// little work per minibatch: launched as separate matrix products and
// elementwise kernels it is bound by launch and host overhead
// (benchmarks/NOTES.md, under kernels_cu/rbm.cu). Here one block of 1024
// threads keeps W, the biases and the persistent chains in shared memory and
// runs every minibatch of an epoch in turn, with the same arithmetic and the
// same random words as the unfused path:
//   h_pos = sigmoid(v_pos W + c)
//   v_neg ~ Bernoulli(sigmoid(h_chain W^T + b))   words: call offset off0 + 2 t
//   h_neg = sigmoid(v_neg W + c), h_chain ~ Bernoulli(h_neg)   offset off0 + 2 t + 1
//   W += lr (v_pos^T h_pos - v_neg^T h_neg); b, c likewise; lr = rate / rows
// for minibatch t of the epoch (element e = r * cols + u takes word e % 4 of
// Philox call e / 4, as rbm_bernoulli). Only the order of the sums differs
// from cuBLAS, so a draw can differ only where a uniform falls within
// rounding of its probability.
//
// Shared memory (elements of T): W nv*nh, b nv, c nh, h_chain chains*nh,
// v_neg chains*nv, h_neg chains*nh, v_pos chains*nv, h_pos chains*nh.
template <typename T>
__device__ __forceinline__ T rbm_sigmoid(T x) {
    return T(0.5) * (tanh(T(0.5) * x) + T(1));
}

// The four words of Philox call g at a 64-bit call offset.
__device__ __forceinline__ void rbm_words(unsigned long long g, unsigned long long off, uint2 key,
                                          unsigned int w[4]) {
    const uint4 r = philox4x32_10(philox_counter(g, (unsigned int)off, (unsigned int)(off >> 32)), key);
    w[0] = r.x; w[1] = r.y; w[2] = r.z; w[3] = r.w;
}

template <typename T>
__global__ void __launch_bounds__(1024)
rbm_pcd_epoch(const T* __restrict__ X, const long long* __restrict__ edges, int n_batches, int nv, int nh,
              int chains, T* W, T* b, T* c, T* h_chain, double rate, unsigned int k0, unsigned int k1,
              unsigned long long off0) {
    extern __shared__ __align__(16) unsigned char rbm_smem[];
    T* sW = reinterpret_cast<T*>(rbm_smem);
    T* sb = sW + nv * nh;
    T* sc = sb + nv;
    T* sh = sc + nh;
    T* svn = sh + chains * nh;
    T* shn = svn + chains * nv;
    T* svp = shn + chains * nh;
    T* shp = svp + chains * nv;
    const int tid = threadIdx.x, nthr = blockDim.x;
    const int lane = tid & 31, warp = tid >> 5, nwarp = nthr >> 5;
    const uint2 key = make_uint2(k0, k1);
    for (int k = tid; k < nv * nh; k += nthr) sW[k] = W[k];
    for (int k = tid; k < nv; k += nthr) sb[k] = b[k];
    for (int k = tid; k < nh; k += nthr) sc[k] = c[k];
    for (int k = tid; k < chains * nh; k += nthr) sh[k] = h_chain[k];
    __syncthreads();
    for (int t = 0; t < n_batches; ++t) {
        const long long s = edges[t];
        const int rows = (int)(edges[t + 1] - s);
        const unsigned long long off = off0 + 2ull * (unsigned long long)t;
        for (int k = tid; k < rows * nv; k += nthr) svp[k] = X[s * nv + k];
        __syncthreads();
        // h_pos: a thread per (row, hidden unit); consecutive threads read consecutive W columns.
        for (int k = tid; k < rows * nh; k += nthr) {
            const int r = k / nh, u = k - r * nh;
            T a = T(0);
            for (int i = 0; i < nv; ++i) a += svp[r * nv + i] * sW[i * nh + u];
            shp[k] = rbm_sigmoid<T>(a + sc[u]);
        }
        // v_neg: a warp per group of 4 elements (one Philox call), lanes split the sum over hidden units.
        {
            const int n = chains * nv, groups = (n + 3) / 4;
            for (int g = warp; g < groups; g += nwarp) {
                unsigned int w[4];
                rbm_words(g, off, key, w);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int e = 4 * g + q;
                    if (e >= n) break;
                    const int r = e / nv, i = e - r * nv;
                    T a = T(0);
                    for (int u = lane; u < nh; u += 32) a += sh[r * nh + u] * sW[i * nh + u];
                    a = gpumcmc::warp_sum(a);
                    if (lane == 0) svn[e] = rbm_draw<T>(a + sb[i], w[q]);
                }
            }
        }
        __syncthreads();
        // h_neg and the new chain states: a thread per Philox call of 4 elements.
        {
            const int n = chains * nh, groups = (n + 3) / 4;
            for (int g = tid; g < groups; g += nthr) {
                unsigned int w[4];
                rbm_words(g, off + 1ull, key, w);
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    const int e = 4 * g + q;
                    if (e >= n) break;
                    const int r = e / nh, u = e - r * nh;
                    T a = T(0);
                    for (int i = 0; i < nv; ++i) a += svn[r * nv + i] * sW[i * nh + u];
                    a += sc[u];
                    shn[e] = rbm_sigmoid<T>(a);
                    sh[e] = rbm_draw<T>(a, w[q]);
                }
            }
        }
        __syncthreads();
        // The update, as W += lr * (v_pos^T h_pos - v_neg^T h_neg).
        const T lr = (T)(rate / (double)rows);
        for (int k = tid; k < nv * nh; k += nthr) {
            const int i = k / nh, u = k - i * nh;
            T pos = T(0), neg = T(0);
            for (int r = 0; r < rows; ++r) pos += svp[r * nv + i] * shp[r * nh + u];
            for (int r = 0; r < chains; ++r) neg += svn[r * nv + i] * shn[r * nh + u];
            sW[k] += lr * (pos - neg);
        }
        for (int u = tid; u < nh; u += nthr) {
            T pos = T(0), neg = T(0);
            for (int r = 0; r < rows; ++r) pos += shp[r * nh + u];
            for (int r = 0; r < chains; ++r) neg += shn[r * nh + u];
            sc[u] += lr * (pos - neg);
        }
        for (int i = tid; i < nv; i += nthr) {
            T pos = T(0), neg = T(0);
            for (int r = 0; r < rows; ++r) pos += svp[r * nv + i];
            for (int r = 0; r < chains; ++r) neg += svn[r * nv + i];
            sb[i] += lr * (pos - neg);
        }
        __syncthreads();
    }
    for (int k = tid; k < nv * nh; k += nthr) W[k] = sW[k];
    for (int k = tid; k < nv; k += nthr) b[k] = sb[k];
    for (int k = tid; k < nh; k += nthr) c[k] = sc[k];
    for (int k = tid; k < chains * nh; k += nthr) h_chain[k] = sh[k];
}

#ifndef __CUDACC_RTC__
template __global__ void rbm_bernoulli<float>(const float*, const float*, float*, long long, long long, unsigned int,
                                              unsigned int, unsigned int, unsigned int);
template __global__ void rbm_bernoulli<double>(const double*, const double*, double*, long long, long long,
                                               unsigned int, unsigned int, unsigned int, unsigned int);
template __global__ void rbm_pcd_epoch<float>(const float*, const long long*, int, int, int, int, float*, float*,
                                               float*, float*, double, unsigned int, unsigned int,
                                               unsigned long long);
template __global__ void rbm_pcd_epoch<double>(const double*, const long long*, int, int, int, int, double*, double*,
                                                double*, double*, double, unsigned int, unsigned int,
                                                unsigned long long);
#endif
