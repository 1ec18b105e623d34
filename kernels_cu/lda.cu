// Topic counts of an uncollapsed LDA sweep, both tables in one pass over the
// token stream: n_dk[d * K + k] and n_kw[k * V + w] (topic-major, so the
// Dirichlet over words draws rows of it without a transpose).
//
// Each token adds one to each table with a global atomic; the tables must
// be zeroed first. A token whose topic is outside [0, K) (the z-draw's -1 for
// a token with no positive weight, reported by its value check) adds nothing,
// so the tables are never written out of bounds. Counts are int32 (a (document, topic) or (topic, word)
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
                           int* __restrict__ ndk, int* __restrict__ nkw, long long T, int K, long long V) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < T; t += stride) {
        const long long k = z[t];
        if (k < 0 || k >= K) continue;
        atomicAdd(ndk + (long long)rows[t] * K + k, 1);
        const long long key = k * V + (long long)cols[t];
#if GPUMCMC_LDA_AGGREGATE
        const unsigned int peers = __match_any_sync(__activemask(), (unsigned long long)key);
        if ((threadIdx.x & 31) == (unsigned int)(__ffs(peers) - 1)) atomicAdd(nkw + key, __popc(peers));
#else
        atomicAdd(nkw + key, 1);
#endif
    }
}

#ifndef __CUDACC_RTC__
template __global__ void lda_counts<long long>(const long long*, const long long*, const long long*, int*, int*,
                                               long long, int, long long);
template __global__ void lda_counts<int>(const int*, const int*, const long long*, int*, int*, long long, int,
                                         long long);
#endif
