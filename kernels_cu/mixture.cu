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
#ifndef MIX_ROWS
#define MIX_ROWS 2  // data points per thread: each component value read from shared memory serves all
#endif
#define MIX_QP (((MIX_Q) + 3) / 4 * 4)
#ifndef MIX_STATS_ROWS
#define MIX_STATS_ROWS 2048  // sorted rows per block of the statistics kernel
#endif
#ifndef MIX_STATS_STAGE
#define MIX_STATS_STAGE 64  // rows staged in shared memory at a time by the statistics kernel
#endif
#ifndef MIX_STATS_BLOCK
#define MIX_STATS_BLOCK 128  // at least 1 + P + P(P+1)/2 threads (Python sets it)
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
    // Tile rows padded to a multiple of 4 values and 16-byte aligned, so that
    // the broadcast loads of one component's values can be vectorised.
    __shared__ __align__(16) T tile[MIX_TILE * MIX_QP];
    const long long chain = blockIdx.y;
    const T* pc = params + chain * (long long)K * MIX_Q;
    const long long K4 = (K + 3) / 4;
    const uint2 key = make_uint2(k0, k1);
    const T NEG_INF = neg_inf<T>();
    const long long stride = (long long)gridDim.x * blockDim.x * MIX_ROWS;

    for (long long base = (long long)blockIdx.x * blockDim.x * MIX_ROWS; base < m; base += stride) {
        // Thread rows: base + threadIdx.x + rr * blockDim.x, rr < MIX_ROWS.
        long long gi[MIX_ROWS];
        bool act[MIX_ROWS];
        T xr[MIX_ROWS][MIX_P];
        T best[MIX_ROWS], mx[MIX_ROWS], s[MIX_ROWS];
        int best_j[MIX_ROWS];
        unsigned long long ctr0[MIX_ROWS];
        uint4 words[MIX_ROWS];
        bool any = false;
#pragma unroll
        for (int rr = 0; rr < MIX_ROWS; ++rr) {
            const long long i = base + threadIdx.x + (long long)rr * blockDim.x;
            act[rr] = i < m;
            any |= act[rr];
            gi[rr] = start + (act[rr] ? i : 0);
#pragma unroll
            for (int c = 0; c < MIX_P; ++c) xr[rr][c] = act[rr] ? x[gi[rr] * MIX_P + c] : T(0);
            best[rr] = NEG_INF;
            best_j[rr] = 0;
            mx[rr] = NEG_INF;
            s[rr] = T(0);
            ctr0[rr] = (unsigned long long)(chain * n_total + gi[rr]) * (unsigned long long)K4;
            words[rr] = make_uint4(0u, 0u, 0u, 0u);
        }

        for (int j0 = 0; j0 < K; j0 += MIX_TILE) {
            const int nt = min(MIX_TILE, K - j0);
            __syncthreads();
            for (int t = threadIdx.x; t < nt * MIX_Q; t += blockDim.x) {
                const int jj = t / MIX_Q;
                tile[jj * MIX_QP + (t - jj * MIX_Q)] = pc[(long long)j0 * MIX_Q + t];
            }
            __syncthreads();
            if (!any) continue;
            for (int jj = 0; jj < nt; ++jj) {
                const int j = j0 + jj;
                const T* pj = tile + jj * MIX_QP;
                T q[MIX_ROWS];
#pragma unroll
                for (int rr = 0; rr < MIX_ROWS; ++rr) q[rr] = T(0);
                int o = 1 + MIX_P;
#pragma unroll
                for (int r = 0; r < MIX_P; ++r) {
                    T y[MIX_ROWS];
                    const T br = pj[1 + r];
#pragma unroll
                    for (int rr = 0; rr < MIX_ROWS; ++rr) y[rr] = -br;
#pragma unroll
                    for (int c = 0; c <= r; ++c) {
                        const T u = pj[o + c];
#pragma unroll
                        for (int rr = 0; rr < MIX_ROWS; ++rr) y[rr] = fma(u, xr[rr][c], y[rr]);
                    }
                    o += r + 1;
#pragma unroll
                    for (int rr = 0; rr < MIX_ROWS; ++rr) q[rr] = fma(y[rr], y[rr], q[rr]);
                }
                const T cj = pj[0];
#pragma unroll
                for (int rr = 0; rr < MIX_ROWS; ++rr) {
                    const T l = cj - T(0.5) * q[rr];
                    if (mode == MIX_RESP && act[rr])
                        resp[(chain * K + j) * m + (gi[rr] - start)] = l;
                    if (l > mx[rr]) {  // online log-sum-exp (skips -inf logits of cut-back components)
                        s[rr] = s[rr] * exp_(mx[rr] - l) + T(1);
                        mx[rr] = l;
                    } else if (l > NEG_INF) {
                        s[rr] += exp_(l - mx[rr]);
                    }
                    T score = l;
                    if (mode == MIX_SAMPLE) {
                        if ((j & 3) == 0)
                            words[rr] = gpumcmc::philox4x32_10(
                                gpumcmc::philox_counter(ctr0[rr] + (unsigned long long)(j >> 2), off_lo, off_hi), key);
                        const unsigned int w = (j & 3) == 0 ? words[rr].x : (j & 3) == 1 ? words[rr].y
                                             : (j & 3) == 2 ? words[rr].z : words[rr].w;
                        const T u = (T)gpumcmc::u01_f32(w);
                        score = l - log_(-log_(u));
                    }
                    if (score > best[rr]) {
                        best[rr] = score;
                        best_j[rr] = j;
                    }
                }
            }
        }
#pragma unroll
        for (int rr = 0; rr < MIX_ROWS; ++rr) {
            if (!act[rr]) continue;
            const T total = mx[rr] + log_(s[rr]);
            if (z != nullptr) z[chain * n_total + gi[rr]] = best_j[rr];
            if (lse != nullptr) lse[chain * n_total + gi[rr]] = total;
            if (mode == MIX_RESP) {
                for (int j = 0; j < K; ++j) {
                    T* r = resp + (chain * K + j) * m + (gi[rr] - start);
                    *r = exp_(*r - total);
                }
            }
        }
    }
}

// Sufficient statistics from indicators sorted by component, deterministically
// (no floating-point atomics, so a run repeats bit for bit).
//
// `order` (chains, n) lists the rows by component (a stable sort of z), `zs`
// (chains, n) the sorted components, and `offsets` (chains, K + 1) the first
// sorted position of each component. Tile t of MIX_STATS_ROWS sorted positions
// is one block; its threads own the E = 1 + P + P(P+1)/2 entries
// [1, x_a, x_a x_b (a <= b, row-major)] and add them up over the tile's rows,
// writing one partial sum per (tile t, component j) into slot t + j of
// `partial` (chains, n_tiles + K, E); slots are unique because t and j never
// both stay put between consecutive (tile, component) pairs.
template <typename T>
__global__ void __launch_bounds__(MIX_STATS_BLOCK) mixture_stats_partial(
    const T* __restrict__ x, long long n, const int* __restrict__ order, const int* __restrict__ zs, int K,
    long long n_tiles, double* __restrict__ partial) {
    const long long chain = blockIdx.y;
    const int e = threadIdx.x;
    const int E = 1 + MIX_P + MIX_P * (MIX_P + 1) / 2;
    // entry e -> (a, b): e = 0 count, 1..P linear, then the packed lower triangle.
    int a = -1, b = -1;
    if (e >= 1 && e <= MIX_P) {
        a = e - 1;
    } else if (e > MIX_P && e < E) {
        int t = e - 1 - MIX_P, r = 0;
        while (t > r) { t -= r + 1; ++r; }
        a = r;
        b = t;
    }
    const int* ord = order + chain * n;
    const int* zc = zs + chain * n;
    double* out = partial + chain * (n_tiles + K) * (long long)E;
    // Rows are staged through shared memory MIX_STATS_STAGE at a time, loaded by all threads at
    // once, so that the gathers of x rows overlap instead of each thread waiting on every row.
    __shared__ T xs[MIX_STATS_STAGE * MIX_P];
    __shared__ int zsh[MIX_STATS_STAGE];
    for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const long long r0 = tile * MIX_STATS_ROWS;
        const long long r1 = min(n, r0 + MIX_STATS_ROWS);
        int cur = zc[r0];
        double acc = 0.0;
        for (long long q0 = r0; q0 < r1; q0 += MIX_STATS_STAGE) {
            const int cnt = (int)min((long long)MIX_STATS_STAGE, r1 - q0);
            __syncthreads();
            for (int t = threadIdx.x; t < cnt * MIX_P; t += blockDim.x) {
                const int row = t / MIX_P;
                xs[t] = x[(long long)ord[q0 + row] * MIX_P + (t - row * MIX_P)];
            }
            for (int t = threadIdx.x; t < cnt; t += blockDim.x) zsh[t] = zc[q0 + t];
            __syncthreads();
            for (int rr = 0; rr < cnt; ++rr) {
                const int j = zsh[rr];
                if (j != cur) {  // uniform across the block: every thread reads the same row
                    if (e < E) out[(tile + cur) * E + e] = acc;
                    acc = 0.0;
                    cur = j;
                }
                double v = 1.0;  // products in double: exact for float32 data
                if (a >= 0) v = (double)xs[rr * MIX_P + a];
                if (b >= 0) v *= (double)xs[rr * MIX_P + b];
                acc += v;
            }
        }
        if (e < E) out[(tile + cur) * E + e] = acc;
    }
}

// Sum each component's partial sums in tile order: out (chains, K, E).
extern "C" __global__ void mixture_stats_reduce(const double* __restrict__ partial, const long long* __restrict__ offsets,
                                     int K, int E, long long n_tiles, double* __restrict__ out) {
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < (long long)K * E;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long chain = blockIdx.y;
        const int j = (int)(idx / E);
        const int e = (int)(idx - (long long)j * E);
        const long long* off = offsets + chain * (K + 1);
        const long long lo = off[j], hi = off[j + 1];
        double acc = 0.0;
        if (hi > lo) {
            const long long t0 = lo / MIX_STATS_ROWS, t1 = (hi - 1) / MIX_STATS_ROWS;
            const double* pc = partial + chain * (n_tiles + K) * (long long)E;
            for (long long t = t0; t <= t1; ++t) acc += pc[(t + j) * E + e];
        }
        out[(chain * K + j) * (long long)E + e] = acc;
    }
}

#ifndef __CUDACC_RTC__
template __global__ void mixture_logits<float>(const float*, long long, long long, long long, const float*, int, int,
                                               int*, float*, float*, unsigned int, unsigned int, unsigned int,
                                               unsigned int);
template __global__ void mixture_logits<double>(const double*, long long, long long, long long, const double*, int,
                                                int, int*, double*, double*, unsigned int, unsigned int,
                                                unsigned int, unsigned int);
template __global__ void mixture_stats_partial<float>(const float*, long long, const int*, const int*, int, long long,
                                                      double*);
template __global__ void mixture_stats_partial<double>(const double*, long long, const int*, const int*, int,
                                                       long long, double*);
#endif
