// Gamma, beta, Dirichlet and exponential variates with per-element parameters.
// The Marsaglia-Tsang routine and the counter mapping are in gamma.cuh; the
// NumPy twin is gpumcmc/random/_gamma.py.
//
//   gamma_draw<T>       element i: G(shape[i]) * scale[i], or log G + log scale[i];
//                       the common case at once, the rest through per-warp queues
//   beta_draw<T>        element i: gamma elements 2i (a) and 2i + 1 (b), in log space,
//                       X = 1 / (1 + exp(log Gb - log Ga))
//   dirichlet_rows<T>   row r of K: gamma elements r K + k (log space), then
//                       log-sum-exp over the row; G lanes per row, log-gammas in shared memory
//   dirichlet_rows_big<T> the same for rows too long for shared memory, through the
//                       output (two passes)
//
// Parameters come as a pointer and a step (0 for one value shared by every
// element, 1 for one value per element), so scalar parameters cost no copy;
// the step only selects the index (no 64-bit multiply).
#include "gamma.cuh"

#ifndef GPUMCMC_GAMMA_BLOCK
#define GPUMCMC_GAMMA_BLOCK 256
#endif

using namespace gpumcmc;

// Per-warp queues of deferred elements in shared memory. A warp takes 32
// consecutive elements at a time and finishes at once those whose trial 0 the
// squeeze accepts (about 92% at every shape) and that need no boost. The
// others wait: boosted elements (shape < 1) with their G(a + 1) and boost
// uniform, the rest (another trial, the logarithmic test, or an invalid shape)
// as bare indices for gamma_variate. A queue is served 32 entries at a time,
// so the costly paths run with every lane busy instead of stalling the warps
// that meet them once; the draws are those of gamma_variate, whatever the order.
constexpr int GAMMA_WARPS = GPUMCMC_GAMMA_BLOCK / 32;
constexpr int GAMMA_QCAP = 64;  // < 32 waiting + 32 pushed

template <typename T>
struct GammaQueues {
    long long slow[GAMMA_WARPS][GAMMA_QCAP];
    long long boost[GAMMA_WARPS][GAMMA_QCAP];
    T boost_g[GAMMA_WARPS][GAMMA_QCAP];
    float boost_u[GAMMA_WARPS][GAMMA_QCAP];  // float32 boost uniforms (float64 draws its own)
};

// Appends this lane's entry (if `push`) after the `count` waiting ones;
// returns the slot, and advances `count` (warp-uniform) by the warp's pushes.
__device__ __forceinline__ int queue_push(bool push, int& count) {
    const unsigned m = __ballot_sync(0xffffffffu, push);
    const int slot = count + __popc(m & ((1u << (threadIdx.x & 31)) - 1u));
    count += __popc(m);
    return slot;
}

template <typename T>
__device__ __forceinline__ void gamma_store(T g, long long i, const T* __restrict__ scale, long long scale_step,
                                            T* __restrict__ out, int log_out, int* __restrict__ trials, int trial) {
    // With log_out the caller passes log(scale).
    const T s = scale[scale_step ? i : 0];
    out[i] = log_out ? g + s : g * s;
    if (trials != nullptr) trials[i] = trial;
}

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK)
gamma_draw(const T* __restrict__ shape, long long shape_step, const T* __restrict__ scale,
           long long scale_step, T* __restrict__ out, long long n, unsigned int k0, unsigned int k1,
           unsigned int off_lo, unsigned int off_hi, int log_out, int* __restrict__ trials) {
    __shared__ GammaQueues<T> q;
    const uint2 key = make_uint2(k0, k1);
    const int lane = threadIdx.x & 31;
    const int wq = threadIdx.x >> 5;
    const bool want_log = log_out != 0;
    int n_slow = 0, n_boost = 0;

    auto finish_slow = [&](long long i) {
        int trial;
        const T g = gamma_variate(shape[shape_step ? i : 0], (unsigned long long)i, key, off_lo, off_hi, want_log,
                                  trial);
        gamma_store(g, i, scale, scale_step, out, log_out, trials, trial);
    };
    auto finish_boost = [&](long long i, T g, float ub32) {
        const T a = shape[shape_step ? i : 0];
        T ub;
        if constexpr (sizeof(T) == 4) {
            ub = ub32;
        } else {
            ub = boost_uniform_f64((unsigned long long)i, key, off_lo, off_hi);
        }
        gamma_store(boost_finish(g, a, ub, want_log), i, scale, scale_step, out, log_out, trials, 0);
    };

    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < n; base += stride) {
        const long long i = base + lane;
        bool slow = false, boosted = false;
        T g = T(0), ub = T(0);
        if (i < n) {
            const T a = shape[shape_step ? i : 0];
            slow = !(a > T(0)) || !isfinite(a);
            if (!slow) {
                const bool boost = a < T(1);
                T d, c, cx;
                mt_setup(a, boost, d, c);
                slow = !gamma_trial0_squeeze(d, c, (unsigned long long)i, key, off_lo, off_hi, cx, ub);
                if (!slow) {
                    g = mt_value(d, cx);
                    boosted = boost;
                    if (!boost) gamma_store(want_log ? log(g) : g, i, scale, scale_step, out, log_out, trials, 0);
                }
            }
        }
        const int s_slot = queue_push(slow, n_slow);
        if (slow) q.slow[wq][s_slot] = i;
        const int b_slot = queue_push(boosted, n_boost);
        if (boosted) {
            q.boost[wq][b_slot] = i;
            q.boost_g[wq][b_slot] = g;
            q.boost_u[wq][b_slot] = (float)ub;
        }
        __syncwarp();
        if (n_boost >= 32) {
            const int e = n_boost - 32 + lane;
            const long long j = q.boost[wq][e];
            const T gj = q.boost_g[wq][e];
            const float uj = q.boost_u[wq][e];
            n_boost -= 32;
            __syncwarp();
            finish_boost(j, gj, uj);
        }
        if (n_slow >= 32) {
            const long long j = q.slow[wq][n_slow - 32 + lane];
            n_slow -= 32;
            __syncwarp();
            finish_slow(j);
        }
    }
    __syncwarp();
    if (lane < n_boost) finish_boost(q.boost[wq][lane], q.boost_g[wq][lane], q.boost_u[wq][lane]);
    if (lane < n_slow) finish_slow(q.slow[wq][lane]);
}

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK)
beta_draw(const T* __restrict__ a, long long a_step, const T* __restrict__ b, long long b_step,
          T* __restrict__ out, long long n, unsigned int k0, unsigned int k1, unsigned int off_lo,
          unsigned int off_hi) {
    const uint2 key = make_uint2(k0, k1);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int trial;
        const unsigned long long e = 2ull * (unsigned long long)i;
        const T la = gamma_variate(a[a_step ? i : 0], e, key, off_lo, off_hi, true, trial);
        const T lb = gamma_variate(b[b_step ? i : 0], e + 1, key, off_lo, off_hi, true, trial);
        out[i] = T(1) / (T(1) + exp(lb - la));
    }
}

// Butterfly reductions over the G lanes of a row (G a power of two <= 32);
// `mask` holds exactly those lanes.
template <typename T>
__device__ __forceinline__ T group_max(T v, int G, unsigned int mask) {
    for (int o = G >> 1; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(mask, v, o));
    return v;
}

template <typename T>
__device__ __forceinline__ T group_sum(T v, int G, unsigned int mask) {
    for (int o = G >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o);
    return v;
}

__device__ __forceinline__ unsigned int group_mask(int G) {
    const int lane = threadIdx.x & 31;
    return G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
}

// One row of K = alpha's last axis per group of G lanes (G a power of two,
// at most 32): lane l of the group takes columns l, l + G, l + 2G, ... of the
// row, so consecutive lanes read and write consecutive columns and consecutive
// groups consecutive rows (coalesced). Each lane keeps its R = ceil(K / G)
// log-gammas in shared memory (blockDim.x * R values, a column per thread: no
// bank conflicts), the row's maximum and sum of exponentials are reduced by
// shuffles, and the output is written once: no n x K intermediate in global
// memory. Launch with blockDim.x * R * sizeof(T) bytes of dynamic shared memory.
template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK)
dirichlet_rows(const T* __restrict__ alpha, T* __restrict__ out, long long n_rows, int K, int G,
               unsigned int k0, unsigned int k1, unsigned int off_lo, unsigned int off_hi, int log_out) {
    extern __shared__ unsigned char dirichlet_smem[];
    T* lg = reinterpret_cast<T*>(dirichlet_smem) + threadIdx.x;  // lg[r * blockDim.x]
    const uint2 key = make_uint2(k0, k1);
    const unsigned int mask = group_mask(G);
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int sub = (int)(tid & (G - 1));
    const long long groups = (long long)gridDim.x * blockDim.x / G;
    const int step = blockDim.x;
    for (long long row = tid / G; row < n_rows; row += groups) {
        const long long base = row * K;
        T m = -fp_special<T>::inf();
        for (int k = sub, r = 0; k < K; k += G, r += step) {
            int trial;
            const T v = gamma_variate(alpha[base + k], (unsigned long long)(base + k), key, off_lo, off_hi,
                                      true, trial);
            lg[r] = v;
            m = fmax(m, v);  // a NaN log-gamma is caught by the sum below
        }
        m = group_max(m, G, mask);
        T s = T(0);
        for (int k = sub, r = 0; k < K; k += G, r += step) s += exp(lg[r] - m);
        // Normalise relative to the row maximum, not by subtracting the
        // log-sum-exp: at |log G| ~ 1e3 (alpha ~ 1e-3) the rounding of
        // m + log(s) in float32 is ~3e-5, which would scale the whole row.
        const T tot = group_sum(s, G, mask);
        const T ltot = log(tot);
        for (int k = sub, r = 0; k < K; k += G, r += step) {
            out[base + k] = log_out ? (lg[r] - m) - ltot : exp(lg[r] - m) / tot;
        }
    }
}

// Rows too long for shared memory: one warp per row; the first pass writes log G to
// the output and keeps an online log-sum-exp (running max and sum) per lane,
// the second rewrites the output normalised. The output is the only buffer.
template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK)
dirichlet_rows_big(const T* __restrict__ alpha, T* __restrict__ out, long long n_rows, int K,
                   unsigned int k0, unsigned int k1, unsigned int off_lo, unsigned int off_hi, int log_out) {
    const uint2 key = make_uint2(k0, k1);
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int lane = (int)(tid & 31);
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    for (long long row = tid / 32; row < n_rows; row += warps) {
        const long long base = row * K;
        T m = -fp_special<T>::inf(), s = T(0);
        for (int k = lane; k < K; k += 32) {
            int trial;
            const T lg = gamma_variate(alpha[base + k], (unsigned long long)(base + k), key, off_lo, off_hi,
                                       true, trial);
            out[base + k] = lg;
            if (lg > m) {
                s = s * exp(m - lg) + T(1);
                m = lg;
            } else {
                s += exp(lg - m);  // also NaN: the row's sum becomes NaN
            }
        }
        const T mall = group_max(m, 32, 0xffffffffu);
        s = (m == -fp_special<T>::inf()) ? T(0) : s * exp(m - mall);
        const T tot = group_sum(s, 32, 0xffffffffu);
        const T ltot = log(tot);
        for (int k = lane; k < K; k += 32) {
            const T lg = out[base + k];
            out[base + k] = log_out ? (lg - mall) - ltot : exp(lg - mall) / tot;
        }
    }
}

#ifndef __CUDACC_RTC__
// Offline builds (nvcc in CI) instantiate the templates so that their bodies
// are compiled; at run time NVRTC instantiates them through name_expressions.
#define GPUMCMC_GAMMA_INSTANTIATE(T)                                                                       \
    template __global__ void gamma_draw<T>(const T*, long long, const T*, long long, T*, long long,         \
                                           unsigned int, unsigned int, unsigned int, unsigned int, int, int*); \
    template __global__ void beta_draw<T>(const T*, long long, const T*, long long, T*, long long,          \
                                          unsigned int, unsigned int, unsigned int, unsigned int);          \
    template __global__ void dirichlet_rows<T>(const T*, T*, long long, int, int, unsigned int, unsigned int,  \
                                               unsigned int, unsigned int, int);                             \
    template __global__ void dirichlet_rows_big<T>(const T*, T*, long long, int, unsigned int, unsigned int, \
                                                   unsigned int, unsigned int, int);
GPUMCMC_GAMMA_INSTANTIATE(float)
GPUMCMC_GAMMA_INSTANTIATE(double)
#undef GPUMCMC_GAMMA_INSTANTIATE
#endif
