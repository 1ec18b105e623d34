// Gamma, beta and Dirichlet variates with per-element parameters. The
// Marsaglia-Tsang routine and the counter mapping are in gamma.cuh; the NumPy
// twin is gpumcmc/random/_gamma.py.
//
//   gamma_draw<T>  element i: G(shape[i]) * scale[i], or log G + log scale[i]
//                  (scale may be null: unit scale); a thread takes a pair of
//                  elements, which share trial 0, and defers the rare path to
//                  a per-warp queue
//   beta_draw<T>   element i: gamma elements 2i (a) and 2i + 1 (b), one pair, in
//                  log space, X = 1 / (1 + exp(log Gb - log Ga))
//   lse_rows<T>    rows of log-gammas normalised in place by their log-sum-exp:
//                  a Dirichlet draw is gamma_draw (log) followed by lse_rows
//
// Parameters come as a pointer and a step (0 for one value shared by every
// element, 1 for one value per element), so scalar parameters cost no copy;
// the step only selects the index (no 64-bit multiply).
#include "gamma.cuh"

#ifndef GPUMCMC_GAMMA_BLOCK
#define GPUMCMC_GAMMA_BLOCK 256
#endif

using namespace gpumcmc;

// Per-warp queue of deferred elements in shared memory. A warp takes 32
// consecutive pairs (64 elements) at a time and finishes at once the elements
// whose trial 0 the squeeze accepts (about 92% at every shape), boosted or
// not. The others (the logarithmic test, another attempt, or an invalid
// shape) wait with their trial 0 (i, x, u), and the queue is served 32 at a
// time by gamma_from_trial0, so that the costly path runs with every lane
// busy instead of stalling every warp that meets it. The draws are those of
// gamma_from_trial0, whatever the order.
constexpr int GAMMA_WARPS = GPUMCMC_GAMMA_BLOCK / 32;
constexpr int GAMMA_QCAP = 96;  // < 32 waiting + 64 pushed

template <typename T>
struct GammaQueue {
    long long i[GAMMA_WARPS][GAMMA_QCAP + 32];  // + a discard slot per lane
    T x[GAMMA_WARPS][GAMMA_QCAP + 32];
    T u[GAMMA_WARPS][GAMMA_QCAP + 32];
};

// out[i] = v * scale, or v + log(scale) with log_out (the caller passes log(scale)).
template <typename T>
__device__ __forceinline__ void gamma_store(T v, long long i, const T* __restrict__ scale, long long scale_step,
                                            T* __restrict__ out, int log_out, int* __restrict__ trials, int trial) {
    if (scale != nullptr) {
        const T s = scale[scale_step ? i : 0];
        v = log_out ? v + s : v * s;
    }
    out[i] = v;
    if (trials != nullptr) trials[i] = trial;
}

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK)
gamma_draw(const T* __restrict__ shape, long long shape_step, const T* __restrict__ scale,
           long long scale_step, T* __restrict__ out, long long n, unsigned int k0, unsigned int k1,
           unsigned int off_lo, unsigned int off_hi, int log_out, int* __restrict__ trials) {
    __shared__ GammaQueue<T> q;
    const uint2 key = make_uint2(k0, k1);
    const int lane = threadIdx.x & 31;
    const unsigned int lt = (1u << lane) - 1u;
    const int wq = threadIdx.x >> 5;
    const bool want_log = log_out != 0;
    long long* const qi = q.i[wq];
    T* const qx = q.x[wq];
    T* const qu = q.u[wq];
    int n_slow = 0;
    auto shape_of = [&](long long i) { return shape[shape_step ? i : 0]; };
    auto finish_slow = [&](int e) {
        const long long i = qi[e];
        int trial;
        const T g = gamma_from_trial0(shape_of(i), (unsigned long long)i, qx[e], qu[e], key, off_lo, off_hi,
                                      want_log, trial);
        gamma_store(g, i, scale, scale_step, out, log_out, trials, trial);
    };

    const long long n_pairs = (n + 1) >> 1;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31); base < n_pairs;
         base += stride) {
        const long long p = base + lane;
        const long long i0 = 2 * p;
        const bool has0 = p < n_pairs, has1 = i0 + 1 < n;
        const T a0 = has0 ? shape_of(i0) : T(1);
        const T a1 = has1 ? shape_of(i0 + 1) : T(1);
        T x0, u0, x1, u1, g0 = T(0), g1 = T(0);
        pair_trial0((unsigned long long)p, key, off_lo, off_hi, x0, u0, x1, u1);
        const bool ok0 = has0 && trial0_squeeze(a0, x0, u0, g0);
        const bool ok1 = has1 && trial0_squeeze(a1, x1, u1, g1);
        // G(a) or log G(a); shapes below 1 get the boost of their pair's block 1,
        // drawn by the whole warp when any of its lanes needs it.
        T v0 = want_log ? log(g0) : g0;
        T v1 = want_log ? log(g1) : g1;
        const bool b0 = ok0 && a0 < T(1), b1 = ok1 && a1 < T(1);
        if (__any_sync(0xffffffffu, b0 || b1)) {
            T ub0, ub1;
            pair_boost((unsigned long long)p, key, off_lo, off_hi, ub0, ub1);
            if (b0) v0 = boost_apply(v0, a0, ub0, want_log);
            if (b1) v1 = boost_apply(v1, a1, ub1, want_log);
        }
        if (ok0) gamma_store(v0, i0, scale, scale_step, out, log_out, trials, 0);
        if (ok1) gamma_store(v1, i0 + 1, scale, scale_step, out, log_out, trials, 0);
        // The rest to the queue; a lane with nothing to push writes its discard slot.
        const bool s0 = has0 && !ok0, s1 = has1 && !ok1;
        const unsigned m0 = __ballot_sync(0xffffffffu, s0), m1 = __ballot_sync(0xffffffffu, s1);
        const int slot = n_slow + __popc(m0 & lt) + __popc(m1 & lt);
        const int e0 = s0 ? slot : GAMMA_QCAP + lane;
        qi[e0] = i0;
        qx[e0] = x0;
        qu[e0] = u0;
        const int e1 = s1 ? slot + s0 : GAMMA_QCAP + lane;
        qi[e1] = i0 + 1;
        qx[e1] = x1;
        qu[e1] = u1;
        n_slow += __popc(m0) + __popc(m1);
        __syncwarp();
        while (n_slow >= 32) {
            n_slow -= 32;
            finish_slow(n_slow + lane);
        }
        __syncwarp();  // the served slots are written again only after every lane has read its own
    }
    __syncwarp();
    if (lane < n_slow) finish_slow(lane);
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
        T xa, ua, xb, ub;
        pair_trial0((unsigned long long)i, key, off_lo, off_hi, xa, ua, xb, ub);
        const T la = gamma_from_trial0(a[a_step ? i : 0], e, xa, ua, key, off_lo, off_hi, true, trial);
        const T lb = gamma_from_trial0(b[b_step ? i : 0], e + 1, xb, ub, key, off_lo, off_hi, true, trial);
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

// Rows of K log-gammas, normalised in place: log_out gives (lg - m) - log(s),
// else exp(lg - m) / s, with m the row's maximum and s the sum of
// exp(lg - m) (relative to the maximum, not by subtracting a rounded
// log-sum-exp: at |log G| ~ 1e3, alpha ~ 1e-3, the rounding of m + log(s) in
// float32 is ~3e-5, which would scale the whole row). G lanes per row (G a
// power of two, at most 32): lane l of the group takes columns l, l + G, ...,
// so consecutive lanes read consecutive columns. float32 rows of at most
// G * LSE_REGS stay in registers (one read, one exp per element); others take two
// passes, the first keeping an online maximum and sum per lane. A NaN
// log-gamma makes its whole row NaN.
#ifndef GPUMCMC_LSE_REGS
#define GPUMCMC_LSE_REGS 8
#endif

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK)
lse_rows(T* __restrict__ x, long long n_rows, int K, int G, int log_out) {
    const unsigned int mask = group_mask(G);
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int sub = (int)(tid & (G - 1));
    const long long groups = (long long)gridDim.x * blockDim.x / G;
    const T ninf = -fp_special<T>::inf();
    // float64 rows take the two passes: with 8 doubles per lane in registers
    // the kernel ran slower (occupancy) than rereading the row from cache.
    const bool in_regs = sizeof(T) == 4 && K <= G * GPUMCMC_LSE_REGS;
    for (long long row = tid / G; row < n_rows; row += groups) {
        T* r = x + row * K;
        if (in_regs) {
            T v[GPUMCMC_LSE_REGS];
            T m = ninf;
#pragma unroll
            for (int j = 0; j < GPUMCMC_LSE_REGS; ++j) {
                const int k = sub + j * G;
                v[j] = k < K ? r[k] : ninf;
                m = fmax(m, v[j]);  // a NaN is caught by the sum below
            }
            const T mall = group_max(m, G, mask);
            T s = T(0);
#pragma unroll
            for (int j = 0; j < GPUMCMC_LSE_REGS; ++j) {
                const T e = exp(v[j] - mall);  // 0 for the padding (NaN only if the row is)
                s += e;
                if (!log_out) v[j] = e;
                else v[j] -= mall;
            }
            const T tot = group_sum(s, G, mask);
            const T ltot = log(tot);
#pragma unroll
            for (int j = 0; j < GPUMCMC_LSE_REGS; ++j) {
                const int k = sub + j * G;
                if (k < K) r[k] = log_out ? v[j] - ltot : v[j] / tot;
            }
            continue;
        }
        T m = ninf, s = T(0);
        for (int k = sub; k < K; k += G) {
            const T lg = r[k];
            if (lg > m) {
                s = s * exp(m - lg) + T(1);
                m = lg;
            } else {
                s += exp(lg - m);  // also NaN: the row's sum becomes NaN
            }
        }
        const T mall = group_max(m, G, mask);
        s = (m == ninf) ? s * T(0) : s * exp(m - mall);  // a lane of NaNs alone keeps its NaN
        const T tot = group_sum(s, G, mask);
        const T ltot = log(tot);
        for (int k = sub; k < K; k += G) {
            const T lg = r[k];
            r[k] = log_out ? (lg - mall) - ltot : exp(lg - mall) / tot;
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
    template __global__ void lse_rows<T>(T*, long long, int, int, int);
GPUMCMC_GAMMA_INSTANTIATE(float)
GPUMCMC_GAMMA_INSTANTIATE(double)
#undef GPUMCMC_GAMMA_INSTANTIATE
#endif
