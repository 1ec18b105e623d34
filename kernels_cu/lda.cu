// The kernels of the uncollapsed LDA sweep. Launched by gpumcmc/models/lda/ops.py (beside their NumPy
// twins); the sweep that runs them is gpumcmc/models/lda/algorithm.py.
//
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
// Twin: gpumcmc/models/lda/ops.py (counts_twin).

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
//                     exp(x - m_t) over the tile's rows (online, one pass),
//                     and with counts cnt their sum n_t over the tile
//   lda_col_combine   per column: m = max_t m_t, s = sum_t s_t exp(m_t - m)
//                     (a lane with no tile, m_t = -inf, adds s_t = 0), and
//                     n = sum_t n_t
//   lda_col_normalise out = exp(x - m) / s, and sum_out = sum_in + keep * q:
//                     q = out, or with counts the posterior mean given them,
//                     (cnt + prior) / (n + V prior) (den = n + vprior), the
//                     running sum in the same pass
//
// Twin: gpumcmc/models/lda/ops.py (dirichlet_columns, _accumulate_mean): the same
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
                                 T* __restrict__ pm, T* __restrict__ ps, const int* __restrict__ cnt,
                                 long long* __restrict__ pn) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= K) return;
    const long long r0 = (long long)blockIdx.y * rows_per_tile;
    const long long r1 = min(V, r0 + rows_per_tile);
    T m = lda_neg_inf<T>(), s = 0;
    long long n = 0;
    for (long long r = r0; r < r1; ++r) {
        const T v = x[r * K + c];
        if (cnt) n += cnt[r * K + c];
        if (v > m) {
            s = s * exp(m - v) + T(1);
            m = v;
        } else {
            s += exp(v - m);
        }
    }
    pm[(long long)blockIdx.y * K + c] = m;
    ps[(long long)blockIdx.y * K + c] = s;
    if (cnt) pn[(long long)blockIdx.y * K + c] = n;
}

// A block of 32 x 32 threads combines 32 columns: lane y takes every 32nd
// tile, then the 32 lanes of a column merge through shared memory.
template <typename T>
__global__ void __launch_bounds__(1024) lda_col_combine(T* __restrict__ pm, T* __restrict__ ps, int tiles, int K,
                                                        long long* __restrict__ pn) {
    __shared__ T sm[32][33], ss[32][33];
    __shared__ long long sn[32][33];
    const int c = blockIdx.x * 32 + threadIdx.x;
    T m = lda_neg_inf<T>(), s = 0;
    long long n = 0;
    if (c < K) {
        for (int t = threadIdx.y; t < tiles; t += 32) {
            const T mt = pm[(long long)t * K + c], st = ps[(long long)t * K + c];
            if (pn) n += pn[(long long)t * K + c];
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
    sn[threadIdx.y][threadIdx.x] = n;
    __syncthreads();
    if (threadIdx.y == 0 && c < K) {
        T mm = lda_neg_inf<T>();
        for (int y = 0; y < 32; ++y) mm = max(mm, sm[y][threadIdx.x]);
        T tot = 0;
        long long nn = 0;
        for (int y = 0; y < 32; ++y) {
            tot += ss[y][threadIdx.x] * exp(sm[y][threadIdx.x] - mm);
            nn += sn[y][threadIdx.x];
        }
        pm[c] = mm;   // the column's maximum, sum and count go to the first tile's slots
        ps[c] = tot;
        if (pn) pn[c] = nn;
    }
}

// A thread a column (x: columns, coalesced along a row; y: rows, strided), its
// max, sum and mean's denominator held in registers; n = V K.
template <typename T>
__global__ void lda_col_normalise(const T* __restrict__ x, const T* __restrict__ m, const T* __restrict__ s,
                                  T* __restrict__ out, const T* __restrict__ sum_in, T* __restrict__ sum_out,
                                  const T* __restrict__ keep, long long n, int K, const int* __restrict__ cnt,
                                  const long long* __restrict__ pn, T prior, T vprior) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= K) return;
    const long long V = n / K;
    const T mc = m[c], sc = s[c];
    const T k = sum_in ? *keep : T(0);
    const T den = (sum_in && cnt) ? T(pn[c]) + vprior : T(1);
#pragma unroll 4
    for (long long r = blockIdx.y; r < V; r += gridDim.y) {
        const long long i = r * K + c;
        const T p = exp(x[i] - mc) / sc;
        out[i] = p;
        if (sum_in) {
            // the twin's (T(cnt) + prior) / (T(n) + vprior), each operation rounded once (IEEE division:
            // no fast-math), and keep * q exact (keep is 0 or 1), so the sums equal the twin's bit for bit
            const T q = cnt ? (T(cnt[i]) + prior) / den : p;
            sum_out[i] = sum_in[i] + k * q;
        }
    }
}

#ifndef __CUDACC_RTC__
template __global__ void lda_col_partials<float>(const float*, long long, int, long long, float*, float*, const int*,
                                                 long long*);
template __global__ void lda_col_partials<double>(const double*, long long, int, long long, double*, double*,
                                                  const int*, long long*);
template __global__ void lda_col_combine<float>(float*, float*, int, int, long long*);
template __global__ void lda_col_combine<double>(double*, double*, int, int, long long*);
template __global__ void lda_col_normalise<float>(const float*, const float*, const float*, float*, const float*,
                                                  float*, const float*, long long, int, const int*,
                                                  const long long*, float, float);
template __global__ void lda_col_normalise<double>(const double*, const double*, const double*, double*,
                                                   const double*, double*, const double*, long long, int,
                                                   const int*, const long long*, double, double);
#endif

// theta's running sum of its posterior mean given the document counts: a warp
// a row of n (rows x K int32), sum_out = sum_in + keep * (n + prior) / (N + kprior),
// N the row's count (its tokens), kprior = K prior rounded in T on the host:
// the twin's roundings (ops._accumulate_mean), in one pass over n and the sum
// (the row is read twice, the second time from cache).
template <typename T>
__global__ void lda_row_means(const int* __restrict__ n, const T* __restrict__ sum_in, T* __restrict__ sum_out,
                              const T* __restrict__ keep, long long rows, int K, T prior, T kprior) {
    const int lane = threadIdx.x & 31;
    const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    const T k = *keep;
    for (long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
        const int* row = n + r * K;
        long long tot = 0;
        for (int j = lane; j < K; j += 32) tot += row[j];
        for (int o = 16; o; o >>= 1) tot += __shfl_xor_sync(0xffffffffu, tot, o);
        const T den = T(tot) + kprior;
        for (int j = lane; j < K; j += 32) {
            const long long i = r * K + j;
            sum_out[i] = sum_in[i] + k * ((T(row[j]) + prior) / den);
        }
    }
}

#ifndef __CUDACC_RTC__
template __global__ void lda_row_means<float>(const int*, const float*, float*, const float*, long long, int, float,
                                              float);
template __global__ void lda_row_means<double>(const int*, const double*, double*, const double*, long long, int,
                                               double, double);
#endif

// ---------------------------------------------------------------------------
// The z-draw of a sweep fused with the counts: for every token t of chain c,
//
//   z ~ Cat(theta[c, d_t, :] * phi[w_t, c, :])
//
// by the rule of gpumcmc.categorical_products (the smallest k whose prefix
// sum of the products exceeds u * total, u from the Philox block with counter
// (c * T + t, off)), and z adds one to n_dk[c, d_t, z] and n_wk[w_t, c, z] at
// once: the tokens are read once per sweep and z is never stored (unless
// zout is given, for tests).
//
// A shard of a larger token stream (the documents split over devices) keys
// its tokens as the whole stream does: counter (c * n_all + g_t, off), where
// g_t is token t's index in the whole stream. Its tokens are a contiguous
// block of that stream but for a head and a tail (the tiles of documents
// that it shares with its neighbours, whose tokens interleave with theirs):
// g_t = gidx[t] for the n_head first tokens, gidx[n_head + t - (n - n_tail)]
// for the n_tail last ones, and base + t between. One device: n_all = n,
// base = 0, no head or tail.
//
// Layouts: theta (C, M, K); phi (V, C, K), so that the Dirichlet over words
// normalises the columns of a (V, C K) array; n_dk like theta, n_wk like phi.
//
// A warp takes a run of consecutive tokens (in token_order: sorted by word
// within tiles of documents). The word's phi row goes to the warp's slice of
// shared memory when the word changes. The document's theta row is read
// either densely, or, where the row has few non-zero entries (nnz[row] <=
// K / 2: with small priors most entries of theta underflow to exactly zero,
// about 90% of them at alpha = 1/1024 in float32), from its compacted list
// of (topic, value) pairs made by lda_theta_compact. A zero entry adds
// exactly nothing to a prefix sum and is never drawn, so both forms give the
// same index. Lane l owns entries [l n, (l + 1) n) of the row (n = ceil(len /
// 32)), adds its products left to right, and a warp scan of the lane sums
// gives the prefixes; the search takes the first lane whose inclusive prefix
// exceeds the target (only lanes with a positive sum), else the last
// positive one, then walks that lane's entries, again taking only positive
// products and the last positive one if rounding leaves none above the
// target. A zero product is never drawn, and a token with a positive total
// always gets a topic; a token without one gets -1 and is not counted.
//
// Counts: every 32 tokens, lane i holds token i's keys; lanes that share a
// cell add once through their leader (__match_any_sync), as lda_counts does.
//
// Log-likelihood (ll != nullptr): ll[c] += sum over chain c's tokens of
// log(max(total, 1e-300)), total = sum_k theta[c, d_t, k] phi[w_t, c, k] as
// the draw formed it, i.e. the log-likelihood of the theta and phi the sweep
// draws from (a warp sum, a block sum and one double atomicAdd per block; the
// order of the atomics varies the last bits from run to run). The draws do not
// depend on it.
//
// Twin: gpumcmc/models/lda/ops.py (zdraw_counts on NumPy: categorical_products
// with method "prefix", then counts_twin). The prefix sums are added in
// another order than NumPy's cumsum, so where one lies within rounding of
// u * total the index may differ by one positive neighbour, as for the
// "warp" method.
#include "discrete.cuh"

#ifndef GPUMCMC_LDA_ZWARPS
#define GPUMCMC_LDA_ZWARPS 4
#endif

template <typename T>
__global__ void lda_theta_compact(const T* __restrict__ theta, long long n_rows, int K, int* __restrict__ nnz,
                                  int* __restrict__ sidx, T* __restrict__ sval) {
    const int lane = threadIdx.x & 31;
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    for (long long row = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; row < n_rows; row += warps) {
        const T* src = theta + row * K;
        int* di = sidx + row * K;
        T* dv = sval + row * K;
        int base = 0;
        for (int k0 = 0; k0 < K; k0 += 32) {
            const int k = k0 + lane;
            const T v = k < K ? src[k] : T(0);
            const bool nz = v != T(0);
            const unsigned b = __ballot_sync(0xffffffffu, nz);
            if (nz) {
                const int pos = base + __popc(b & ((1u << lane) - 1u));
                di[pos] = k;
                dv[pos] = v;
            }
            base += __popc(b);
        }
        if (lane == 0) nnz[row] = base;
    }
}

// The shared-memory copy of a phi row has one padding word after every 32:
// element k sits at k + k / 32, so that lanes reading their own runs of
// consecutive topics (lane l from l n on) fall in distinct banks for n a
// power of two.
__device__ __forceinline__ int lda_pad(int k) { return k + (k >> 5); }

template <typename T>
__device__ __forceinline__ void lda_load_row(T* __restrict__ dst, const T* __restrict__ src, int K, int lane) {
    if (sizeof(T) == 4 && (K & 3) == 0 && (((unsigned long long)src) & 15) == 0) {
        const float4* s4 = reinterpret_cast<const float4*>(src);
        for (int j = lane; j < K / 4; j += 32) {
            const float4 q = s4[j];
            const int k = lda_pad(4 * j);   // the 4 elements lie in one group of 32
            dst[k] = (T)q.x;
            dst[k + 1] = (T)q.y;
            dst[k + 2] = (T)q.z;
            dst[k + 3] = (T)q.w;
        }
    } else {
        for (int j = lane; j < K; j += 32) dst[lda_pad(j)] = src[j];
    }
}

// The second bound keeps float32's registers at the 48 it used before the log-likelihood sum (10 blocks of
// 4 warps per SM; ptxas -v for sm_90 reports no spills), which the sum's code would otherwise raise to 56.
template <typename T>
__global__ void __launch_bounds__(32 * GPUMCMC_LDA_ZWARPS, sizeof(T) == 4 ? 10 : 9)
lda_zdraw(const T* __restrict__ theta, const T* __restrict__ phi, const int* __restrict__ rows,
          const int* __restrict__ cols, const int* __restrict__ nnz, const int* __restrict__ sidx,
          const T* __restrict__ sval, int* __restrict__ ndk, int* __restrict__ nwk, long long* __restrict__ zout,
          long long n, int M, int C, int K, unsigned int k0, unsigned int k1, unsigned int off_lo,
          unsigned int off_hi, const unsigned long long* __restrict__ off_dev, long long n_all, long long base,
          const long long* __restrict__ gidx, long long n_head, long long n_tail, double* __restrict__ ll) {
    gpumcmc::offset_from_device(off_dev, off_lo, off_hi);
    extern __shared__ __align__(16) unsigned char lda_smem[];
    using gpumcmc::cat::FULL;
    const int lane = threadIdx.x & 31;
    const int wib = threadIdx.x >> 5;
    T* ph = reinterpret_cast<T*>(lda_smem) + (long long)wib * (lda_pad(K) + 1);
    const int c = blockIdx.y;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    const long long per = (n + warps - 1) / warps;
    const long long r_begin = warp * per;
    const long long r_end = r_begin + per < n ? r_begin + per : n;
    const uint2 key = make_uint2(k0, k1);
    const long long row0 = (long long)c * M;   // chain c's first theta row

    int prev_w = -1;
    T u_b = T(0);
    int d_b = 0, w_b = 0;
    long long myz = -1;
    double ll_acc = 0.0;   // with ll: the sum of the log totals of the tokens this lane held in its batches
    T mytot = T(0);        // and the total of token `lane` of the current batch
    for (long long r = r_begin; r < r_end; ++r) {
        const int i = (int)((r - r_begin) & 31);
        if (i == 0) {
            const long long rr = r + lane < r_end ? r + lane : r_end - 1;
            const long long g = rr < n_head ? gidx[rr]
                                : rr >= n - n_tail ? gidx[n_head + rr - (n - n_tail)] : base + rr;
            u_b = gpumcmc::cat::row_uniform((T*)nullptr, (unsigned long long)((long long)c * n_all + g), key, off_lo,
                                           off_hi);
            d_b = rows[rr];
            w_b = cols[rr];
            myz = -1;
        }
        const T u = __shfl_sync(FULL, u_b, i);
        const int d = __shfl_sync(FULL, d_b, i);
        const int w = __shfl_sync(FULL, w_b, i);
        if (w != prev_w) {
            __syncwarp();
            lda_load_row<T>(ph, phi + ((long long)w * C + c) * K, K, lane);
            __syncwarp();
            prev_w = w;
        }
        const long long row = row0 + d;
        const int len = nnz ? nnz[row] : K;
        const bool sparse = nnz && 2 * len <= K;
        const int L = sparse ? len : K;
        const int per_lane = (L + 31) / 32;
        const int e0 = lane * per_lane;
        const int e1 = min(L, e0 + per_lane);
        const int* ix = sidx + row * K;
        const T* vs = sparse ? sval + row * K : theta + row * K;
        T s = T(0);
#pragma unroll 4
        for (int e = e0; e < e1; ++e) {
            const int k = sparse ? ix[e] : e;
            s += gpumcmc::cat::mul_rn(vs[e], ph[lda_pad(k)]);
        }
        T incl = s;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const T t = __shfl_up_sync(FULL, incl, o);
            if (lane >= o) incl += t;
        }
        const T total = __shfl_sync(FULL, incl, 31);
        const T target = u * total;
        int z = -1;
        if (total > target) {  // a positive, finite total (u < 1); the same in every lane
            const unsigned hit = __ballot_sync(FULL, s > T(0) && incl > target);
            const unsigned pos = __ballot_sync(FULL, s > T(0));
            const int ls = hit ? __ffs(hit) - 1 : 31 - __clz(pos);
            T p = __shfl_up_sync(FULL, incl, 1);
            if (lane == 0) p = T(0);
            int sel = -1;
            if (lane == ls) {
                int last = -1;
                for (int e = e0; e < e1; ++e) {
                    const int k = sparse ? ix[e] : e;
                    const T wgt = gpumcmc::cat::mul_rn(vs[e], ph[lda_pad(k)]);
                    p += wgt;
                    if (wgt > T(0)) {
                        if (sel < 0 && p > target) sel = k;
                        last = k;
                    }
                }
                if (sel < 0) sel = last;
            }
            z = __shfl_sync(FULL, sel, ls);
        }
        if (lane == i) {
            myz = z;
            mytot = total;
        }
        if (zout && lane == 0) zout[(long long)c * n + r] = z;
        if (i == 31 || r + 1 == r_end) {
            // The batch's counts: lane j < i + 1 holds token j's topic (and total).
            if (ll != nullptr && lane <= i) ll_acc += gpumcmc::cat::log_total((double)mytot);
            const bool has = lane <= i && myz >= 0;
            const unsigned long long none = ~0ull - (unsigned long long)lane;  // distinct, never a real key
            const unsigned long long dkey = has ? (unsigned long long)((row0 + d_b) * K + myz) : none;
            const unsigned long long wkey = has ? (unsigned long long)(((long long)w_b * C + c) * K + myz) : none;
            const unsigned dp = __match_any_sync(FULL, dkey);
            if (has && lane == __ffs(dp) - 1) atomicAdd(ndk + dkey, __popc(dp));
            const unsigned wp = __match_any_sync(FULL, wkey);
            if (has && lane == __ffs(wp) - 1) atomicAdd(nwk + wkey, __popc(wp));
        }
    }
    if (ll != nullptr) {  // every token of the block is chain c's: a warp sum, a block sum, one atomic
        __shared__ double lda_ll_part[GPUMCMC_LDA_ZWARPS];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) ll_acc += __shfl_xor_sync(FULL, ll_acc, o);
        if (lane == 0) lda_ll_part[wib] = ll_acc;
        __syncthreads();
        if (threadIdx.x == 0) {
            double sum = 0.0;
            for (int w = 0; w < (int)(blockDim.x >> 5); ++w) sum += lda_ll_part[w];
            atomicAdd(ll + c, sum);
        }
    }
}

#ifndef __CUDACC_RTC__
template __global__ void lda_theta_compact<float>(const float*, long long, int, int*, int*, float*);
template __global__ void lda_theta_compact<double>(const double*, long long, int, int*, int*, double*);
template __global__ void lda_zdraw<float>(const float*, const float*, const int*, const int*, const int*, const int*,
                                          const float*, int*, int*, long long*, long long, int, int, int,
                                          unsigned int, unsigned int, unsigned int, unsigned int,
                                          const unsigned long long*, long long, long long, const long long*,
                                          long long, long long, double*);
template __global__ void lda_zdraw<double>(const double*, const double*, const int*, const int*, const int*,
                                           const int*, const double*, int*, int*, long long*, long long, int, int,
                                           int, unsigned int, unsigned int, unsigned int, unsigned int,
                                           const unsigned long long*, long long, long long, const long long*,
                                           long long, long long, double*);
#endif
