// Gaussian-mixture configuration kernel: for every data point, the logits
//   l_ij = log pi_j + log N(x_i | mu_j, Sigma_j)
//        = c_j - ||U_j x_i - b_j||^2 / 2,
// with U_j = L_j^{-1} the inverse Cholesky factor of Sigma_j, b_j = U_j mu_j and
// c_j = log pi_j - sum_r log L_j[r, r] - P/2 log(2 pi), computed in registers
// one component at a time, never storing the n x K matrix (except in mode
// RESP, where the caller asks for a chunk of responsibilities).
//
// The array-code twins are in gpumcmc/models/mixture/ops.py (_logits_twin, _assign_twin), beside the
// launchers; gpumcmc/models/mixture/algorithm.py is the sampler these kernels serve.
//
// Component parameters, per chain c and component j, packed in Q = 1 + P +
// P(P+1)/2 values: [c_j, b_j[0..P-1], U_j row-major lower triangle
// (row r holds U[r, 0..r])]. Threads of a block read one tile of MIX_TILE
// components from shared memory (a broadcast: every thread reads the same
// address), each thread keeps its data point's P coordinates in registers.
//
// Modes:
//   SAMPLE (0): z_i = argmax_j (l_ij + g_ij), g_ij standard Gumbel from Philox:
//               counter index (chain * ctr_rows + row0 + i) * ceil(K/4) + j/4,
//               word j%4, keyed by the global data index row0 + i, so chunked
//               and unchunked runs give the same draws, and so do runs with
//               the data split over devices (a shard of rows row0 .. row0 +
//               n_total - 1 of ctr_rows in all; one device: row0 = 0,
//               ctr_rows = n_total); lse_i = logsumexp_j l_ij if lse given.
//   ARGMAX (1): z_i = argmax_j l_ij, lse_i as above.
//   RESP   (2): resp[(chain * K + j) * m + (i - start)] = exp(l_ij - lse_i)
//               (K x m per chain, coalesced along the chunk), lse_i. With
//               resp_out given (float32 data), `resp` holds the logits as
//               scratch and the probabilities go to resp_out in float64, the
//               type of the weighted-statistics GEMM that follows (Bayesian EM),
//               so that no separate conversion pass reads them again; there the
//               rows come in blocks of mb, each block (chains, K, mb), so that
//               the GEMM runs as a batch over the blocks (mb = m: one block).
//
// The component kernels below (mixture_niw_posterior, mixture_gibbs_params) turn
// sufficient statistics and covariance draws into the next parameters: one
// thread per component.
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
#ifndef MIX_WU
#define MIX_WU 8  // components per row read at a time by the probability writes of mode RESP
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

#define MIX_TRI (MIX_P * (MIX_P + 1) / 2)
#ifndef MIX_COMP_THREADS
#define MIX_COMP_THREADS 16  // components per block of the component kernels, at most 32 (one warp; Python
#endif                       // sets it so that their shared memory stays within 40 KB)
#define MIX_COMP_STRIDE (2 * MIX_TRI + MIX_P)  // doubles of shared memory per component
#define MIX_LOG_2PI 1.8378770664093453

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

// Mode RESP: the probabilities exp(l_ij - tot[rr]) of components j_begin .. j_end - 1 of the chunk rows
// i0 + rr * rstep (rr < MIX_ROWS; rows >= m are skipped), from the logits that the same thread left in
// `resp`. The logits are read MIX_WU components of every row at a time, all loads before any store,
// so that enough of them are in flight to keep the memory busy.
template <typename T>
__device__ __forceinline__ void write_probs(T* __restrict__ resp, double* __restrict__ resp_out, long long chain,
                                            long long chains, int K, long long m, long long mb, long long i0,
                                            long long rstep, const T (&tot)[MIX_ROWS], int j_begin, int j_end) {
    long long lo[MIX_ROWS], ob[MIX_ROWS], os[MIX_ROWS];
    bool ok[MIX_ROWS];
#pragma unroll
    for (int rr = 0; rr < MIX_ROWS; ++rr) {
        long long ii = i0 + rr * rstep;
        ok[rr] = ii < m;
        ii = ok[rr] ? ii : 0;
        lo[rr] = chain * K * m + ii;  // logit of component j at lo + j m
        // resp_out: the m rows in blocks of mb rows, each block (chains, K, mb), then the remaining
        // m mod mb rows as (chains, K, m mod mb): one strided-batched GEMM per chunk sums the
        // statistics over the blocks with every output tile busy.
        ob[rr] = lo[rr];
        os[rr] = m;
        if (resp_out != nullptr) {
            const long long nbf = m / mb, blk = ii / mb;
            if (blk < nbf) {
                ob[rr] = (blk * chains + chain) * K * mb + (ii - blk * mb);
                os[rr] = mb;
            } else {
                os[rr] = m - nbf * mb;
                ob[rr] = nbf * chains * K * mb + chain * K * os[rr] + (ii - nbf * mb);
            }
        }
    }
    for (int j0 = j_begin; j0 < j_end; j0 += MIX_WU) {
        T v[MIX_ROWS][MIX_WU];
#pragma unroll
        for (int rr = 0; rr < MIX_ROWS; ++rr) {
#pragma unroll
            for (int u = 0; u < MIX_WU; ++u) {
                const int j = j0 + u;
                v[rr][u] = (ok[rr] && j < j_end) ? resp[lo[rr] + (long long)j * m] : T(0);
            }
        }
#pragma unroll
        for (int rr = 0; rr < MIX_ROWS; ++rr) {
#pragma unroll
            for (int u = 0; u < MIX_WU; ++u) {
                const int j = j0 + u;
                if (ok[rr] && j < j_end) {
                    const T r = exp_(v[rr][u] - tot[rr]);
                    if (resp_out != nullptr)
                        resp_out[ob[rr] + (long long)j * os[rr]] = (double)r;
                    else
                        resp[lo[rr] + (long long)j * m] = r;
                }
            }
        }
    }
}

}  // namespace

#ifndef MIX_MIN_BLOCKS
#define MIX_MIN_BLOCKS 1  // resident blocks per SM asked of the register allocator
#endif
// 1 = a tile of components is skipped where no row of the warp can take or feel any of them. A logit is at
// most c_j (the quadratic form is >= 0) and a score at most c_j + 16.64 (the largest Gumbel term of u01_f32's
// uniforms), so a row whose best score so far is above that cannot choose j (c_j in ARGMAX), and one whose
// running maximum exceeds c_j by more than exp's underflow (120 in float32, 800 in float64) would add exactly
// 0 to its log-sum-exp and get a probability of exactly 0 (mode RESP: its logits are written as -inf, which
// gives that 0). Where every row of the warp is such a row for the tile's largest c_j, the warp goes on to
// the next tile: the same indicators, log-sum-exps and probabilities bit for bit (for finite means and
// factors U_j: a NaN quadratic form would give a NaN probability in mode RESP where a left-out tile gives 0),
// with the work of the components far below the rows' own (and of pruned ones, c_j = -inf) left out.
#ifndef MIX_SKIP
#define MIX_SKIP 0  // the launcher (models/mixture/ops.py) asks for 1 in mode RESP, Bayesian EM's E-step
#endif
#if MIX_SKIP && defined(MIX_SKIP_TALLY)
__device__ unsigned long long mix_skip_tally;  // the tiles warps left out (the tests read it)
#endif

template <typename T>
__global__ void __launch_bounds__(MIX_BLOCK, MIX_MIN_BLOCKS) mixture_logits(
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
    double* __restrict__ resp_out, // float64 probabilities or null (mode RESP), in row blocks of mb (below)
    long long mb,                  // rows per block of resp_out (m: the plain (chains, K, m) layout)
    long long ctr_rows,            // rows of the whole data set (the Philox counter range per chain)
    long long row0,                // global index of row 0 of x (this shard's first row)
    unsigned int k0, unsigned int k1, unsigned int off_lo, unsigned int off_hi,
    const unsigned long long* __restrict__ off_dev) {  // null, or added to the offset (a graph replay)
    gpumcmc::offset_from_device(off_dev, off_lo, off_hi);
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
            ctr0[rr] = (unsigned long long)(chain * ctr_rows + row0 + gi[rr]) * (unsigned long long)K4;
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
#if MIX_SKIP
            {  // the tile left out where no row of the warp can choose or feel any of its components
                T cb = NEG_INF;
                for (int jj = 0; jj < nt; ++jj) {  // the largest c_j, or NaN where one is NaN (then unfelt fails)
                    const T c = tile[jj * MIX_QP];
                    cb = (c > cb || c != c) ? c : cb;
                }
                const T floor_ = sizeof(T) == 4 ? T(-120) : T(-800);
                // a score is l - log(-log u) <= c_j + 16.64 for u in [2^-24, 1 - 2^-24] (u01_f32); the margin
                // covers the rounding of the score's terms
                const T top = cb == NEG_INF ? cb : cb + T(18) + fabs(cb) * T(1e-6);
                bool skip = true;
#pragma unroll
                for (int rr = 0; rr < MIX_ROWS; ++rr) {
                    if (!act[rr]) continue;
                    // no indicator asked, or none of the tile can beat the row's best score so far (NaN: unknown)
                    const bool unchosen = z == nullptr || (mode == MIX_SAMPLE ? top : cb) <= best[rr];
                    // no log-sum-exp or probability asked, or the tile adds exactly 0 to them (every c_j = -inf: its
                    // logits are -inf, which is what a left-out tile writes in mode RESP)
                    const bool unfelt = (lse == nullptr && mode != MIX_RESP) || cb == NEG_INF || cb - mx[rr] < floor_;
                    skip = skip && unchosen && unfelt;
                }
                if (__all_sync(__activemask(), skip)) {
#ifdef MIX_SKIP_TALLY
                    if ((threadIdx.x & 31) == (unsigned)(__ffs(__activemask()) - 1)) atomicAdd(&mix_skip_tally, 1ull);
#endif
#pragma unroll
                    for (int rr = 0; rr < MIX_ROWS; ++rr) {
                        // the words the next tile's first component reads where it does not draw them itself
                        // (MIX_SKIP_BREAK_WORDS: left undrawn, for the test that shows this line matters)
#ifndef MIX_SKIP_BREAK_WORDS
                        if (mode == MIX_SAMPLE && ((j0 + nt) & 3) != 0)
#else
                        if (false)
#endif
                            words[rr] = gpumcmc::philox4x32_10(gpumcmc::philox_counter(
                                ctr0[rr] + (unsigned long long)((j0 + nt - 1) >> 2), off_lo, off_hi), key);
                        if (mode == MIX_RESP && act[rr])  // probabilities exp(l - lse) <= exp(c_j - max): exactly 0
                            for (int jj = 0; jj < nt; ++jj) resp[(chain * K + j0 + jj) * m + (gi[rr] - start)] = NEG_INF;
                    }
                    continue;
                }
            }
#endif
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
        T tot[MIX_ROWS];
#pragma unroll
        for (int rr = 0; rr < MIX_ROWS; ++rr) {
            tot[rr] = mx[rr] + log_(s[rr]);
            if (!act[rr]) continue;
            if (z != nullptr) z[chain * n_total + gi[rr]] = best_j[rr];
            if (lse != nullptr) lse[chain * n_total + gi[rr]] = tot[rr];
        }
        if (mode == MIX_RESP)
            write_probs(resp, resp_out, chain, (long long)gridDim.y, K, m, mb, base + threadIdx.x,
                        (long long)blockDim.x, tot, 0, K);
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

// ---------------------------------------------------------------------------
// Component updates. Twins: mixture/ops.py niw_posterior and _gibbs_params_twin.
//
// Matrices are packed lower triangles, row-major ((0,0), (1,0), (1,1), (2,0),
// ...), as in the kernel parameters and the statistics [n, s1, vech(s2)]. Each
// thread owns one component and keeps its matrices in its slice of shared
// memory (MIX_COMP_STRIDE doubles): at p = 14 that is 1.8 KB, which local
// memory would reserve for every resident thread of the device.
// ---------------------------------------------------------------------------

namespace {

__device__ __forceinline__ int tri_index(int r, int c) { return r * (r + 1) / 2 + c; }

// In place: A (packed symmetric matrix) -> the Cholesky factor of A + 1e-10 mean|diag A| I
// (the twin's _safe_cholesky). Returns sum_r log L_rr. A matrix that is not positive
// definite gives NaN, which the fit reports.
__device__ double safe_cholesky(double* A) {
    double scale = 0.0;
    for (int r = 0; r < MIX_P; ++r) scale += fabs(A[tri_index(r, r)]);
    const double jitter = 1e-10 * (scale / MIX_P);
    for (int r = 0; r < MIX_P; ++r) A[tri_index(r, r)] += jitter;
    double logdet = 0.0;
    for (int r = 0; r < MIX_P; ++r) {
        double* Lr = A + tri_index(r, 0);
        for (int c = 0; c <= r; ++c) {
            const double* Lc = A + tri_index(c, 0);
            double s = Lr[c];
            for (int t = 0; t < c; ++t) s -= Lr[t] * Lc[t];
            if (c < r) {
                Lr[c] = s / Lc[c];
            } else {
                Lr[r] = sqrt(s);
                logdet += log(Lr[r]);
            }
        }
    }
    return logdet;
}

// Kernel parameters [c, U mu, vech(U)] with U = L^-1 (forward substitution, column by column)
// and c = log pi - sum log L_rr - P/2 log(2 pi); U is written to the scratch `U`.
template <typename T>
__device__ void write_params(const double* L, double* U, const double* mu, double log_pi, double logdet,
                             T* out) {
    for (int c = 0; c < MIX_P; ++c) {
        U[tri_index(c, c)] = 1.0 / L[tri_index(c, c)];
        for (int r = c + 1; r < MIX_P; ++r) {
            double s = 0.0;
            for (int t = c; t < r; ++t) s += L[tri_index(r, t)] * U[tri_index(t, c)];
            U[tri_index(r, c)] = -s / L[tri_index(r, r)];
        }
    }
    out[0] = (T)(log_pi - logdet - 0.5 * MIX_P * MIX_LOG_2PI);
    for (int r = 0; r < MIX_P; ++r) {
        double b = 0.0;
        for (int t = 0; t <= r; ++t) b += U[tri_index(r, t)] * mu[t];
        out[1 + r] = (T)b;
    }
    for (int e = 0; e < MIX_TRI; ++e) out[1 + MIX_P + e] = (T)U[e];
}

// The NIW posterior of one component from its statistics sj = [n, s1, vech(s2)]: m_n
// into mn (P values), the return value kappa_n = kappa0 + n; posterior_scatter gives
// Psi_n[r, c] = Psi_0 + s2 + kappa0 m m^T - kappa_n m_n m_n^T at packed index e of (r, c).
// prior = [m (P), vech(Psi_0) (TRI)], Psi_0 symmetrised.
__device__ __forceinline__ double posterior_mean(const double* sj, const double* prior, double kappa0, double* mn) {
    const double kn = kappa0 + sj[0];
    for (int r = 0; r < MIX_P; ++r) mn[r] = (kappa0 * prior[r] + sj[1 + r]) / kn;
    return kn;
}

__device__ __forceinline__ double posterior_scatter(const double* sj, const double* prior, double kappa0, double kn,
                                                    const double* mn, int r, int c, int e) {
    return prior[MIX_P + e] + sj[1 + MIX_P + e] + kappa0 * (prior[r] * prior[c]) - kn * (mn[r] * mn[c]);
}

}  // namespace

// The NIW posterior (kappa_n, m_n, df_n, Psi_n) of every component, from the Gibbs
// statistics: one thread per (chain, component). The twin is niw_posterior.
extern "C" __global__ void mixture_niw_posterior(
    const double* __restrict__ stats,  // (n_comp, Q): [n_j, s1_j, vech(s2_j)]
    const double* __restrict__ prior,  // [m (P), vech(Psi_0) (TRI)]
    long long n_comp, double kappa0, double df0,
    double* __restrict__ kn_out,       // (n_comp,)
    double* __restrict__ mn_out,       // (n_comp, P)
    double* __restrict__ df_out,       // (n_comp,)
    double* __restrict__ psi_out) {    // (n_comp, P, P)
    const long long jc = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (jc >= n_comp) return;
    const double* sj = stats + jc * MIX_Q;
    double* mn = mn_out + jc * MIX_P;
    const double kn = posterior_mean(sj, prior, kappa0, mn);
    kn_out[jc] = kn;
    df_out[jc] = df0 + sj[0];
    double* ps = psi_out + jc * (MIX_P * MIX_P);
    for (int r = 0; r < MIX_P; ++r) {
        for (int c = 0; c <= r; ++c) {
            const double v = posterior_scatter(sj, prior, kappa0, kn, mn, r, c, tri_index(r, c));
            ps[r * MIX_P + c] = v;
            ps[c * MIX_P + r] = v;
        }
    }
}

// Gibbs: the kernel parameters of the drawn components, and their means
// mu = m_n + L eps / sqrt(kappa_n) with L the Cholesky factor of the drawn
// covariance (step 2 of the sweep). One thread per (chain, component), 1-D grid.
template <typename T>
__global__ void __launch_bounds__(MIX_COMP_THREADS) mixture_gibbs_params(
    const double* __restrict__ sigma,   // (n_comp, P, P) covariance draws
    const double* __restrict__ mn,      // (n_comp, P) posterior means
    const double* __restrict__ kn,      // (n_comp,) kappa_n
    const double* __restrict__ eps,     // (n_comp, P) standard normals
    const double* __restrict__ log_pi,  // (n_comp,)
    long long n_comp,
    double* __restrict__ mu_out,        // (n_comp, P)
    T* __restrict__ params) {           // (n_comp, Q)
    __shared__ double sm[MIX_COMP_THREADS * MIX_COMP_STRIDE];
    const long long jc = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (jc >= n_comp) return;
    double* A = sm + threadIdx.x * MIX_COMP_STRIDE;
    double* U = A + MIX_TRI;
    double* mu = U + MIX_TRI;
    const double* sg = sigma + jc * (MIX_P * MIX_P);
    for (int r = 0; r < MIX_P; ++r)
        for (int c = 0; c <= r; ++c) A[tri_index(r, c)] = sg[r * MIX_P + c];
    const double logdet = safe_cholesky(A);
    const double sq = sqrt(kn[jc]);
    for (int r = 0; r < MIX_P; ++r) {
        double y = 0.0;
        for (int t = 0; t <= r; ++t) y += A[tri_index(r, t)] * eps[jc * MIX_P + t];
        mu[r] = mn[jc * MIX_P + r] + y / sq;
        mu_out[jc * MIX_P + r] = mu[r];
    }
    write_params(A, U, mu, log_pi[jc], logdet, params + jc * MIX_Q);
}

#ifndef __CUDACC_RTC__
template __global__ void mixture_logits<float>(const float*, long long, long long, long long, const float*, int, int,
                                               int*, float*, float*, double*, long long, long long, long long, unsigned int,
                                               unsigned int, unsigned int, unsigned int, const unsigned long long*);
template __global__ void mixture_logits<double>(const double*, long long, long long, long long, const double*, int,
                                                int, int*, double*, double*, double*, long long, long long, long long, unsigned int,
                                                unsigned int, unsigned int, unsigned int, const unsigned long long*);
template __global__ void mixture_stats_partial<float>(const float*, long long, const int*, const int*, int, long long,
                                                      double*);
template __global__ void mixture_stats_partial<double>(const double*, long long, const int*, const int*, int,
                                                       long long, double*);
template __global__ void mixture_gibbs_params<float>(const double*, const double*, const double*, const double*,
                                                     const double*, long long, double*, float*);
template __global__ void mixture_gibbs_params<double>(const double*, const double*, const double*, const double*,
                                                      const double*, long long, double*, double*);
#endif
