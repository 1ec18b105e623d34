// Gaussian-mixture configuration kernel: for every data point, the logits
//   l_ij = log pi_j + log N(x_i | mu_j, Sigma_j)
//        = c_j - ||U_j x_i - b_j||^2 / 2,
// with U_j = L_j^{-1} the inverse Cholesky factor of Sigma_j, b_j = U_j mu_j and
// c_j = log pi_j - sum_r log L_j[r, r] - P/2 log(2 pi), computed in registers
// one component at a time, never storing the n x K matrix (except in mode
// RESP, where the caller asks for a chunk of responsibilities).
//
// The NumPy twin is gpumcmc/models/mixture.py (_logits_twin, _assign_twin).
//
// Component parameters, per chain c and component j, packed in Q = 1 + P +
// P(P+1)/2 values: [c_j, b_j[0..P-1], U_j row-major lower triangle
// (row r holds U[r, 0..r])]. Threads of a block read one tile of MIX_TILE
// components from shared memory (a broadcast: every thread reads the same
// address), each thread keeps its data point's P coordinates in registers.
//
// Modes:
//   SAMPLE (0): z_i = argmax_j (l_ij + g_ij), g_ij standard Gumbel from Philox:
//               counter index (chain * n_total + i) * ceil(K/4) + j/4, word j%4,
//               keyed by the global data index i, so chunked and unchunked
//               runs give the same draws; lse_i = logsumexp_j l_ij if lse given.
//   ARGMAX (1): z_i = argmax_j l_ij, lse_i as above.
//   RESP   (2): resp[(chain * K + j) * m + (i - start)] = exp(l_ij - lse_i)
//               (K x m per chain, coalesced along the chunk), lse_i.
#include "philox.cuh"

#ifndef MIX_P
#define MIX_P 14
#endif
#define MIX_Q (1 + MIX_P + MIX_P * (MIX_P + 1) / 2)
#ifndef MIX_TILE
#define MIX_TILE 16
#endif
#ifndef MIX_BLOCK
#define MIX_BLOCK 256
#endif

#define MIX_SAMPLE 0
#define MIX_ARGMAX 1
#define MIX_RESP 2

namespace {

template <typename T>
__device__ __forceinline__ T neg_inf();
template <>
__device__ __forceinline__ float neg_inf<float>() { return -__int_as_float(0x7f800000); }
template <>
__device__ __forceinline__ double neg_inf<double>() { return -__longlong_as_double(0x7ff0000000000000LL); }

__device__ __forceinline__ float log_(float x) { return logf(x); }
__device__ __forceinline__ double log_(double x) { return log(x); }
__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }

}  // namespace

template <typename T>
__global__ void __launch_bounds__(MIX_BLOCK) mixture_logits(
    const T* __restrict__ x,       // (n_total, P) data, row-major
    long long n_total,             // rows of x (the counter range per chain)
    long long start,               // first row of this chunk
    long long m,                   // rows in this chunk
    const T* __restrict__ params,  // (chains, K, Q)
    int K,
    int mode,
    int* __restrict__ z,           // (chains, n_total) or null
    T* __restrict__ lse,           // (chains, n_total) or null
    T* __restrict__ resp,          // (chains, K, m) or null (mode RESP)
    unsigned int k0, unsigned int k1, unsigned int off_lo, unsigned int off_hi) {
    __shared__ T tile[MIX_TILE * MIX_Q];
    const long long chain = blockIdx.y;
    const T* pc = params + chain * (long long)K * MIX_Q;
    const long long K4 = (K + 3) / 4;
    const uint2 key = make_uint2(k0, k1);
    const T NEG_INF = neg_inf<T>();

    for (long long base = (long long)blockIdx.x * blockDim.x; base < m; base += (long long)gridDim.x * blockDim.x) {
        const long long i = base + threadIdx.x;  // row within the chunk
        const bool active = i < m;
        const long long gi = start + (active ? i : 0);  // global data index
        T xr[MIX_P];
#pragma unroll
        for (int c = 0; c < MIX_P; ++c) xr[c] = active ? x[gi * MIX_P + c] : T(0);

        T best = NEG_INF;   // largest score (logit + Gumbel, or logit)
        int best_j = 0;
        T mx = NEG_INF;     // running max of logits
        T s = T(0);         // running sum of exp(l - mx)
        const unsigned long long ctr0 = (unsigned long long)(chain * n_total + gi) * (unsigned long long)K4;
        uint4 words = make_uint4(0u, 0u, 0u, 0u);

        for (int j0 = 0; j0 < K; j0 += MIX_TILE) {
            const int nt = min(MIX_TILE, K - j0);
            __syncthreads();
            for (int t = threadIdx.x; t < nt * MIX_Q; t += blockDim.x) tile[t] = pc[(long long)j0 * MIX_Q + t];
            __syncthreads();
            if (!active) continue;
            for (int jj = 0; jj < nt; ++jj) {
                const int j = j0 + jj;
                const T* pj = tile + jj * MIX_Q;
                T q = T(0);
                int o = 1 + MIX_P;
#pragma unroll
                for (int r = 0; r < MIX_P; ++r) {
                    T y = -pj[1 + r];
#pragma unroll
                    for (int c = 0; c <= r; ++c) y = fma(pj[o + c], xr[c], y);
                    o += r + 1;
                    q = fma(y, y, q);
                }
                const T l = pj[0] - T(0.5) * q;
                if (mode == MIX_RESP) resp[(chain * K + j) * m + i] = l;
                if (l > mx) {  // online log-sum-exp (skips -inf logits of cut-back components)
                    s = s * exp_(mx - l) + T(1);
                    mx = l;
                } else if (l > NEG_INF) {
                    s += exp_(l - mx);
                }
                T score = l;
                if (mode == MIX_SAMPLE) {
                    if ((j & 3) == 0) words = gpumcmc::philox4x32_10(
                        gpumcmc::philox_counter(ctr0 + (unsigned long long)(j >> 2), off_lo, off_hi), key);
                    const unsigned int w = (j & 3) == 0 ? words.x : (j & 3) == 1 ? words.y : (j & 3) == 2 ? words.z : words.w;
                    const T u = (T)gpumcmc::u01_f32(w);
                    score = l - log_(-log_(u));
                }
                if (score > best) {
                    best = score;
                    best_j = j;
                }
            }
        }
        if (!active) continue;
        const T total = mx + log_(s);
        if (z != nullptr) z[chain * n_total + gi] = best_j;
        if (lse != nullptr) lse[chain * n_total + gi] = total;
        if (mode == MIX_RESP) {
            for (int j = 0; j < K; ++j) {
                T* r = resp + (chain * K + j) * m + i;
                *r = exp_(*r - total);
            }
        }
    }
}

#ifndef __CUDACC_RTC__
template __global__ void mixture_logits<float>(const float*, long long, long long, long long, const float*, int, int,
                                               int*, float*, float*, unsigned int, unsigned int, unsigned int,
                                               unsigned int);
template __global__ void mixture_logits<double>(const double*, long long, long long, long long, const double*, int,
                                                int, int*, double*, double*, unsigned int, unsigned int,
                                                unsigned int, unsigned int);
#endif
