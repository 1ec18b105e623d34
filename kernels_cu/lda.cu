// Topic counts of an uncollapsed LDA sweep, both tables in one pass over the
// token stream: n_dk[d * K + k] and n_wk[w * K + k] (word-major, the layout
// of phi itself: the Dirichlet over words normalises its columns, and no
// transpose is needed).
//
// Each token adds one to each table with a global atomic; the tables must
// be zeroed first. A token whose topic is outside [0, K) (the z-draw's -1 for
// a token with no positive weight, reported by its value check) adds nothing,
// so the tables are never written out of bounds. Counts are int32 (a (document, topic) or (word, topic)
// pair seen 2^31 times is out of reach for any corpus that fits in memory).
//
// Twin: gpumcmc/models/lda.py (counts_twin).

// Tokens in token_order run word by word, so neighbouring lanes often add to
// the same (topic, word) cell once topics have formed; with
// GPUMCMC_LDA_AGGREGATE (default 1) the lanes of a warp that share a cell
// add once, through their leader, with the count of lanes.
#ifndef GPUMCMC_LDA_AGGREGATE
#define GPUMCMC_LDA_AGGREGATE 1
#endif

#ifndef GPUMCMC_LDA_BLOCK
#define GPUMCMC_LDA_BLOCK 256
#endif

template <typename I>
__global__ void lda_counts(const I* __restrict__ rows, const I* __restrict__ cols, const long long* __restrict__ z,
                           int* __restrict__ ndk, int* __restrict__ nwk, long long T, int K) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < T; t += stride) {
        const long long k = z[t];
        if (k < 0 || k >= K) continue;
        const long long dkey = (long long)rows[t] * K + k;
        const long long key = (long long)cols[t] * K + k;
#if GPUMCMC_LDA_AGGREGATE
        const unsigned int active = __activemask();
        const unsigned int lane = threadIdx.x & 31;
        const unsigned int dpeers = __match_any_sync(active, (unsigned long long)dkey);
        if (lane == (unsigned int)(__ffs(dpeers) - 1)) atomicAdd(ndk + dkey, __popc(dpeers));
        const unsigned int peers = __match_any_sync(active, (unsigned long long)key);
        if (lane == (unsigned int)(__ffs(peers) - 1)) atomicAdd(nwk + key, __popc(peers));
#else
        atomicAdd(ndk + dkey, 1);
        atomicAdd(nwk + key, 1);
#endif
    }
}

#ifndef __CUDACC_RTC__
template __global__ void lda_counts<long long>(const long long*, const long long*, const long long*, int*, int*,
                                               long long, int);
template __global__ void lda_counts<int>(const int*, const int*, const long long*, int*, int*, long long, int);
#endif

// The Dirichlet over words, phi[:, k] ~ Dir(beta + n_wk[:, k]), normalises
// the columns of a (V, K) array of log-gammas. A column reduction in a
// generic library strides by K between neighbouring reads; here a thread
// owns a column within a tile of rows, so a warp reads 32 neighbouring
// columns of one row (one coalesced line) at each step.
//
//   lda_col_partials  per (tile, column): the maximum m_t and the sum of
//                     exp(x - m_t) over the tile's rows (online, one pass)
//   lda_col_combine   per column: m = max_t m_t, s = sum_t s_t exp(m_t - m)
//                     (a lane with no tile, m_t = -inf, adds s_t = 0)
//   lda_col_normalise out = exp(x - m) / s, and sum_out = sum_in + keep * out
//                     (the posterior-mean running sum, in the same pass)
//
// Twin: gpumcmc/models/lda.py (dirichlet_columns, _accumulate): the same
// formula, exp(x - max) over the column's sum; the sums differ from it only
// in the order of the additions.
template <typename T>
__device__ __forceinline__ T lda_neg_inf();
template <>
__device__ __forceinline__ float lda_neg_inf<float>() { return __int_as_float(0xff800000); }
template <>
__device__ __forceinline__ double lda_neg_inf<double>() { return __longlong_as_double(0xfff0000000000000ll); }

template <typename T>
__global__ void lda_col_partials(const T* __restrict__ x, long long V, int K, long long rows_per_tile,
                                 T* __restrict__ pm, T* __restrict__ ps) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= K) return;
    const long long r0 = (long long)blockIdx.y * rows_per_tile;
    const long long r1 = min(V, r0 + rows_per_tile);
    T m = lda_neg_inf<T>(), s = 0;
    for (long long r = r0; r < r1; ++r) {
        const T v = x[r * K + c];
        if (v > m) {
            s = s * exp(m - v) + T(1);
            m = v;
        } else {
            s += exp(v - m);
        }
    }
    pm[(long long)blockIdx.y * K + c] = m;
    ps[(long long)blockIdx.y * K + c] = s;
}

// A block of 32 x 32 threads combines 32 columns: lane y takes every 32nd
// tile, then the 32 lanes of a column merge through shared memory.
template <typename T>
__global__ void __launch_bounds__(1024) lda_col_combine(T* __restrict__ pm, T* __restrict__ ps, int tiles, int K) {
    __shared__ T sm[32][33], ss[32][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    T m = lda_neg_inf<T>(), s = 0;
    if (c < K) {
        for (int t = threadIdx.y; t < tiles; t += 32) {
            const T mt = pm[(long long)t * K + c], st = ps[(long long)t * K + c];
            if (mt > m) {
                s = s * exp(m - mt) + st;
                m = mt;
            } else {
                s += st * exp(mt - m);
            }
        }
    }
    sm[threadIdx.y][threadIdx.x] = m;
    ss[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && c < K) {
        T mm = lda_neg_inf<T>();
        for (int y = 0; y < 32; ++y) mm = max(mm, sm[y][threadIdx.x]);
        T tot = 0;
        for (int y = 0; y < 32; ++y) tot += ss[y][threadIdx.x] * exp(sm[y][threadIdx.x] - mm);
        pm[c] = mm;   // the column's maximum and sum go to the first tile's slots
        ps[c] = tot;
    }
}

template <typename T>
__global__ void lda_col_normalise(const T* __restrict__ x, const T* __restrict__ m, const T* __restrict__ s,
                                  T* __restrict__ out, const T* __restrict__ sum_in, T* __restrict__ sum_out,
                                  const T* __restrict__ keep, long long n, int K) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const T k = sum_in ? *keep : T(0);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int c = (int)(i % K);
        const T p = exp(x[i] - m[c]) / s[c];
        out[i] = p;
        if (sum_in) sum_out[i] = sum_in[i] + k * p;
    }
}

#ifndef __CUDACC_RTC__
template __global__ void lda_col_partials<float>(const float*, long long, int, long long, float*, float*);
template __global__ void lda_col_partials<double>(const double*, long long, int, long long, double*, double*);
template __global__ void lda_col_combine<float>(float*, float*, int, int);
template __global__ void lda_col_combine<double>(double*, double*, int, int);
template __global__ void lda_col_normalise<float>(const float*, const float*, const float*, float*, const float*,
                                                  float*, const float*, long long, int);
template __global__ void lda_col_normalise<double>(const double*, const double*, const double*, double*,
                                                   const double*, double*, const double*, long long, int);
#endif
