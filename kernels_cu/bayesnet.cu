// SAME-replicated chromatic Gibbs for discrete Bayesian networks with missing
// cells (Seita, Chen & Canny): the sweep of one colour group, the
// sufficient-statistic counts, and the normalisation of the CPT draws.
//
// Layout, shared with the launchers and NumPy twin in gpumcmc/models/bayesnet/ops.py:
//   Z       uint8 (m, n, V): the case matrix of a batch, one copy per SAME
//           replica; cell (r, i, v) holds the state of node v in case i of
//           replica r (observed cells are the same in every replica).
//   logc    float64 (C,): every CPT, as log-probabilities, one after the
//           other: node v's table starts at toff[v] and has card[v] cells per
//           row; the row of a case is sum_p Z[p] * par_stride[p] over v's
//           parents p (the last parent varies fastest).
//   par_ptr, par, par_stride: node v's parents are par[par_ptr[v] ..
//           par_ptr[v + 1]), with their strides in v's row index.
//   ch_ptr, ch, ch_stride: node v's children c, with v's stride in c's row
//           index.
//   cells   the missing cells of one colour group: cell_case[j], cell_node[j]
//           for j in [0, Mc), sorted by block of cases, then node (a warp
//           mostly works on one node, so the table reads are broadcasts and
//           the loops do not diverge; a device's share of whole blocks is one
//           range of j, so split cases keep the numbers of one device).
//
// Random numbers: cell j of the colour group, whose position in the batch's
// list of all missing cells is cell0 + j, draws in replica r from the Philox
// call with index r * Mtot + cell0 + j at the sweep's call offset; u is
// u01_f64 of its first two words. So the draws depend neither on the launch
// shape nor on the order in which the cells are visited.
//
// The conditional of a cell given its Markov blanket, for k < K:
//   lp[k] = logc[v's row, k] + sum over children c (in ch order) of
//           logc[c's row with v = k, Z[c]]
// then p[k] = exp(lp[k] - max lp), cum[k] = p[0] + ... + p[k] (in order),
// and the draw is the number of k with cum[k] < u * cum[K - 1] (at most K - 1).
// The twin makes the same double-precision operations in the same order, so
// it gives the same draws (up to a last-bit difference of exp, which moves a
// draw only when u falls within ~1e-16 of a boundary).
//
// A cell whose every state has probability 0 (cases impossible under fixed
// CPTs with zeros) keeps its value and sets *bad.
#include "philox.cuh"

#ifndef BN_BLOCK
#define BN_BLOCK 256
#endif

// Counts: 1 = lanes of a warp that add to the same cell add once, through
// their leader (__match_any_sync); 0 = one atomic per lane.
#ifndef BN_AGG
#define BN_AGG 1
#endif

#ifndef BN_COUNT_BLOCK
#define BN_COUNT_BLOCK 256
#endif

using namespace gpumcmc;

// Row index of node f's CPT for the case at z.
__device__ __forceinline__ int bn_row(const unsigned char* __restrict__ z, int f, const int* __restrict__ par_ptr,
                                      const int* __restrict__ par, const int* __restrict__ par_stride) {
    int row = 0;
    const int q1 = par_ptr[f + 1];
    for (int q = par_ptr[f]; q < q1; ++q) row += (int)z[par[q]] * par_stride[q];
    return row;
}

template <int KMAX>
__global__ void __launch_bounds__(BN_BLOCK) bn_sweep(
    unsigned char* __restrict__ Z, long long n, int V, const int* __restrict__ cell_case,
    const int* __restrict__ cell_node, long long Mc, long long cell0, long long Mtot,
    const double* __restrict__ logc, const int* __restrict__ card, const int* __restrict__ toff,
    const int* __restrict__ par_ptr, const int* __restrict__ par, const int* __restrict__ par_stride,
    const int* __restrict__ ch_ptr, const int* __restrict__ ch, const int* __restrict__ ch_stride,
    unsigned int k0, unsigned int k1, unsigned int off_lo, unsigned int off_hi, int* __restrict__ bad) {
    const long long r = blockIdx.y;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < Mc; j += stride) {
        const int i = cell_case[j];
        const int v = cell_node[j];
        unsigned char* z = Z + ((unsigned long long)r * (unsigned long long)n + (unsigned long long)i) * V;
        const int K = card[v];
        double lp[KMAX];
        // table indices fit in 32 bits: the host refuses networks of 2^31 CPT cells or more
        const double* tv = logc + (toff[v] + bn_row(z, v, par_ptr, par, par_stride) * K);
#pragma unroll
        for (int k = 0; k < KMAX; ++k)
            if (k < K) lp[k] = tv[k];
        const int xv = z[v];
        const int c1 = ch_ptr[v + 1];
        for (int q = ch_ptr[v]; q < c1; ++q) {
            const int c = ch[q];
            const int s = ch_stride[q];
            const int Kc = card[c];
            const int base = bn_row(z, c, par_ptr, par, par_stride) - xv * s;
            const double* tc = logc + (toff[c] + z[c]);
#pragma unroll
            for (int k = 0; k < KMAX; ++k)
                if (k < K) lp[k] += tc[(base + k * s) * Kc];
        }
        double mx = lp[0];
#pragma unroll
        for (int k = 1; k < KMAX; ++k)
            if (k < K && lp[k] > mx) mx = lp[k];
        if (!(mx > -1.0e308)) {  // every state impossible (or NaN): keep the value, report
            *bad = 1;
            continue;
        }
        double cum = 0.0;
#pragma unroll
        for (int k = 0; k < KMAX; ++k)
            if (k < K) {
                cum += exp(lp[k] - mx);
                lp[k] = cum;
            }
        const uint4 w = philox4x32_10(philox_counter((unsigned long long)r * (unsigned long long)Mtot +
                                                         (unsigned long long)(cell0 + j),
                                                     off_lo, off_hi),
                                      make_uint2(k0, k1));
        const double target = u01_f64(w.x, w.y) * cum;
        int draw = 0;
#pragma unroll
        for (int k = 0; k < KMAX; ++k)
            if (k < K && lp[k] < target) ++draw;
        z[v] = (unsigned char)min(draw, K - 1);
    }
}

// counts[toff[v] + row * card[v] + Z[v]] += 1 for every node v of every row
// (replica, case) of Z[:rows]. counts must be zeroed first. With
// use_shared, the block counts into shared memory (C ints) and adds its
// non-zero cells to counts at the end; without (tables too large for shared
// memory), straight into counts.
extern "C" __global__ void __launch_bounds__(BN_COUNT_BLOCK) bn_counts(
    const unsigned char* __restrict__ Z, long long rows, int V, const int* __restrict__ card,
    const int* __restrict__ toff, const int* __restrict__ par_ptr, const int* __restrict__ par,
    const int* __restrict__ par_stride, int* __restrict__ counts, int C, int use_shared) {
    extern __shared__ int hist[];
    int* h = use_shared ? hist : counts;
    if (use_shared) {
        for (int c = threadIdx.x; c < C; c += blockDim.x) hist[c] = 0;
        __syncthreads();
    }
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < rows; t += stride) {
        const unsigned char* z = Z + (unsigned long long)t * V;
        for (int v = 0; v < V; ++v) {
            const int cell = toff[v] + bn_row(z, v, par_ptr, par, par_stride) * card[v] + z[v];
#if BN_AGG
            const unsigned int active = __activemask();
            const unsigned int peers = __match_any_sync(active, cell);
            if ((threadIdx.x & 31) == (unsigned int)(__ffs(peers) - 1)) atomicAdd(h + cell, __popc(peers));
#else
            atomicAdd(h + cell, 1);
#endif
        }
    }
    if (use_shared) {
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            if (hist[c]) atomicAdd(counts + c, hist[c]);
    }
}

// Row-wise log-normalisation of log-gammas into log-probabilities: for the
// row of cells [row_ptr[q], row_ptr[q + 1]), out = x - (max + log(sum exp(x -
// max))), the maximum and the sum taken in order (as the twin does). out may
// be x itself (each thread reads its row before writing it).
extern "C" __global__ void bn_normalise(const double* x, double* out, const int* __restrict__ row_ptr, int R) {
    const int stride = gridDim.x * blockDim.x;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < R; q += stride) {
        const int a = row_ptr[q], b = row_ptr[q + 1];
        double mx = x[a];
        for (int c = a + 1; c < b; ++c)
            if (x[c] > mx) mx = x[c];
        double s = 0.0;
        for (int c = a; c < b; ++c) s += exp(x[c] - mx);
        const double l = mx + log(s);
        for (int c = a; c < b; ++c) out[c] = x[c] - l;
    }
}

#ifndef __CUDACC_RTC__
#define BN_INST(K)                                                                                                   \
    template __global__ void bn_sweep<K>(unsigned char*, long long, int, const int*, const int*, long long,         \
                                         long long, long long, const double*, const int*, const int*, const int*,   \
                                         const int*, const int*, const int*, const int*, const int*, unsigned int,  \
                                         unsigned int, unsigned int, unsigned int, int*);
BN_INST(4)
BN_INST(16)
BN_INST(64)
BN_INST(256)
#endif
