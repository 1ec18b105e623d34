// SAME-replicated chromatic Gibbs for discrete Bayesian networks with missing
// cells (Seita, Chen & Canny): the sweep of one colour group, the
// sufficient-statistic counts, and the normalisation of the CPT draws.
//
// Layout, shared with the launchers and NumPy twin in gpumcmc/models/bayesnet/ops.py:
//   Z       uint8 (m, n, V): the case matrix of a batch, one copy per SAME
//           replica; cell (r, i, v) holds the state of node v in case i of
//           replica r (observed cells are the same in every replica).
//   tab     float64 (2, C): every CPT, as log-probabilities (row 0, tab[c]) and
//           as probabilities (row 1, tab[C + c]), one table after the other:
//           node v's table starts at toff[v] and has card[v] cells per row;
//           the row of a case is sum_p Z[p] * par_stride[p] over v's parents p
//           (the last parent varies fastest).
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
// Random numbers: one Philox call gives the 32-bit words of four cells. Cell j
// of the colour group has the number pos = cell0 + j in the batch's list of
// all missing cells; in replica r it draws from word (pos >> 5) & 3 of the
// Philox call with index (r * ceil(Mtot / 128) + (pos >> 7)) * 32 + (pos & 31)
// at the sweep's call offset, u = u01_f64_from32 of that word. A warp takes a
// chunk of 128 numbers (pos >> 7), lane l the numbers l, l + 32, l + 64 and
// l + 96 of it: one Philox call a lane, consecutive cells in consecutive lanes.
// The draws depend neither on the launch shape nor on the devices' shares. off_dev (null but in a CUDA
// graph's capture) points at a value added to the call offset, as philox.cuh's offset_from_device says.
//
// The conditional of a cell given its Markov blanket, for k < K, as a
// product of table entries (probabilities), no exponential:
//   p[k] = pc[v's row, k] * (over children c, in ch order) pc[c's row with v = k, Z[c]]
// each product rounded on its own (__dmul_rn: no fused multiply-add), cum[k] =
// p[0] + ... + p[k] (in order), and the draw is the number of k with cum[k] <
// u * cum[K - 1] (at most K - 1); u has 32 bits, so each state's probability
// is resolved to 2^-32. Every entry is at most 1, so a p[k] whose products
// left the normal range is below 2^-1022: where cum[K - 1] >= BN_TINY =
// 2^-960, such a p[k] is below 2^-62 of the total and off by less than 2^-110
// of it, and the others are exact to a few ulp. Below BN_TINY (a product
// underflowed, or every state is impossible) the cell is drawn again in log
// space, with the same u:
//   lp[k] = logc[v's row, k] + (over children) logc[...], p[k] = exp(lp[k] - max lp).
// The NumPy twin makes the same operations in the same order: the product
// path has no transcendental function, so its draws are the kernel's bit for
// bit; in log space a last-bit difference of exp can move a draw when u falls
// within ~1e-16 of a boundary.
//
// A cell whose every state has probability 0 (cases impossible under fixed
// CPTs with zeros) keeps its value and sets *bad.
#include "philox.cuh"

#ifndef BN_BLOCK
#define BN_BLOCK 256
#endif

// Sweep: the least number of blocks of BN_BLOCK threads a SM should hold (__launch_bounds__'s second
// argument); 0 leaves the registers to the compiler (64 for up to 4 states: 4 blocks of 256 a SM).
#ifndef BN_MIN_BLOCKS
#define BN_MIN_BLOCKS 0
#endif
// Sweep: a lane takes its four cells BN_GROUP at a time (1, 2 or 4); BN_GROUP cells of one node, in an
// instantiation of at most BN_GROUP_KMAX states, read the node's parent and child lists once for all of
// them (bn_products_group), at the cost of BN_GROUP rows of KMAX doubles in registers. The same draws
// with any setting.
#ifndef BN_GROUP
#define BN_GROUP 1
#endif
#ifndef BN_GROUP_KMAX
#define BN_GROUP_KMAX 4
#endif
static_assert(BN_GROUP == 1 || BN_GROUP == 2 || BN_GROUP == 4, "BN_GROUP takes 1, 2 or 4 cells at a time");
// Sweep: 1 = a lane reads the node and case of its four cells before drawing the first, so that their loads
// are in flight together rather than one cell's after the one before (with BN_GROUP == 1); 2 = and asks for
// the four cases' rows of Z to be brought towards L1 then. The same draws.
#ifndef BN_PREFETCH
#define BN_PREFETCH 2
#endif

#if BN_MIN_BLOCKS > 0
#define BN_SWEEP_BOUNDS __launch_bounds__(BN_BLOCK, BN_MIN_BLOCKS)
#else
#define BN_SWEEP_BOUNDS __launch_bounds__(BN_BLOCK)
#endif

// Counts: 1 = lanes of a warp that add to the same cell add once, through
// their leader (__match_any_sync); 0 = one atomic per lane.
#ifndef BN_AGG
#define BN_AGG 1
#endif

#ifndef BN_COUNT_BLOCK
#define BN_COUNT_BLOCK 256
#endif

// Counts: rows a thread takes at a time (their nodes' parents read once for all).
#ifndef BN_COUNT_ROWS
#define BN_COUNT_ROWS 4
#endif

using namespace gpumcmc;

// Below this sum of the products a cell is drawn in log space (see the top).
#define BN_TINY 0x1p-960

// Row index of node f's CPT for the case at z.
__device__ __forceinline__ int bn_row(const unsigned char* __restrict__ z, int f, const int* __restrict__ par_ptr,
                                      const int* __restrict__ par, const int* __restrict__ par_stride) {
    int row = 0;
    const int q1 = par_ptr[f + 1];
    for (int q = par_ptr[f]; q < q1; ++q) row += (int)z[par[q]] * par_stride[q];
    return row;
}

// The conditional of the cell of node v (K states) in the case at z as the cumulative sums p[0 .. K - 1]
// of the products of the probabilities pc (see the top); returns their total.
template <int KMAX>
__device__ __forceinline__ double bn_products(double (&p)[KMAX], const unsigned char* __restrict__ z, int v, int K,
                                              const double* __restrict__ pc, const int* __restrict__ card,
                                              const int* __restrict__ toff, const int* __restrict__ par_ptr,
                                              const int* __restrict__ par, const int* __restrict__ par_stride,
                                              const int* __restrict__ ch_ptr, const int* __restrict__ ch,
                                              const int* __restrict__ ch_stride) {
    // table indices fit in 32 bits: the host refuses networks of 2^31 CPT cells or more
    const double* tv = pc + (toff[v] + bn_row(z, v, par_ptr, par, par_stride) * K);
#pragma unroll
    for (int k = 0; k < KMAX; ++k)
        if (k < K) p[k] = tv[k];
    const int xv = z[v];
    const int c1 = ch_ptr[v + 1];
    for (int q = ch_ptr[v]; q < c1; ++q) {
        const int c = ch[q];
        const int s = ch_stride[q];
        const int Kc = card[c];
        const int base = bn_row(z, c, par_ptr, par, par_stride) - xv * s;
        const double* tc = pc + (toff[c] + z[c]);
#pragma unroll
        for (int k = 0; k < KMAX; ++k)
            if (k < K) p[k] = __dmul_rn(p[k], tc[(base + k * s) * Kc]);
    }
    double cum = 0.0;
#pragma unroll
    for (int k = 0; k < KMAX; ++k)
        if (k < K) {
            cum = __dadd_rn(cum, p[k]);
            p[k] = cum;
        }
    return cum;
}

#ifdef BN_NET_CASES
// bn_products with the network written in (gpumcmc/models/bayesnet/ops.py, _net_cases): BN_NET_CASES holds one
// `case v:` a node, with its number of states, table offsets, parents, children and strides as constants, and
// the same operations in the same order as bn_products (so the same values); no index array is read. Nodes of
// more than KMAX states are left out of the instantiation (if constexpr): no cell of theirs reaches it.
template <int KMAX>
__device__ __forceinline__ double bn_products_net(double (&p)[KMAX], const unsigned char* __restrict__ z, int v,
                                                  const double* __restrict__ pc) {
    double cum = 0.0;
    switch (v) {
        BN_NET_CASES
        default:
            break;
    }
    return cum;
}
#endif

// lp[k] of the cell of node v in the case at z: the log-probabilities logc of v's row and of its children's,
// added in the children's order (see the top).
__device__ __forceinline__ double bn_log_term(const unsigned char* __restrict__ z, int v, int K, int k,
                                              const double* __restrict__ logc, const int* __restrict__ card,
                                              const int* __restrict__ toff, const int* __restrict__ par_ptr,
                                              const int* __restrict__ par, const int* __restrict__ par_stride,
                                              const int* __restrict__ ch_ptr, const int* __restrict__ ch,
                                              const int* __restrict__ ch_stride) {
    double lp = logc[toff[v] + bn_row(z, v, par_ptr, par, par_stride) * K + k];
    const int xv = z[v];
    const int c1 = ch_ptr[v + 1];
    for (int q = ch_ptr[v]; q < c1; ++q) {
        const int c = ch[q];
        const int s = ch_stride[q];
        const int base = bn_row(z, c, par_ptr, par, par_stride) - xv * s;
        lp = __dadd_rn(lp, logc[toff[c] + z[c] + (base + k * s) * card[c]]);
    }
    return lp;
}

// The draw of a cell in log space (where its products fell below BN_TINY): p[k] = exp(lp[k] - max lp), and the
// number of their cumulative sums below u * their total, at most K - 1; or -1 where every state is impossible
// (or NaN). Each lp[k] is computed again at each of the three passes (the same operations, so the same
// value), which keeps this rare path free of an array.
__device__ __forceinline__ int bn_draw_logs(const unsigned char* __restrict__ z, int v, int K, unsigned int word,
                                            const double* __restrict__ logc, const int* __restrict__ card,
                                            const int* __restrict__ toff, const int* __restrict__ par_ptr,
                                            const int* __restrict__ par, const int* __restrict__ par_stride,
                                            const int* __restrict__ ch_ptr, const int* __restrict__ ch,
                                            const int* __restrict__ ch_stride) {
#define BN_LP(k) bn_log_term(z, v, K, (k), logc, card, toff, par_ptr, par, par_stride, ch_ptr, ch, ch_stride)
    double mx = BN_LP(0);
    for (int k = 1; k < K; ++k) {  // the maximum in order, as the twin takes it
        const double l = BN_LP(k);
        if (l > mx) mx = l;
    }
    if (!(mx > -1.0e308)) return -1;
    double cum = 0.0;
    for (int k = 0; k < K; ++k) cum = __dadd_rn(cum, exp(__dsub_rn(BN_LP(k), mx)));
    const double target = __dmul_rn(u01_f64_from32(word), cum);
    double run = 0.0;
    int draw = 0;
    for (int k = 0; k < K; ++k) {
        run = __dadd_rn(run, exp(__dsub_rn(BN_LP(k), mx)));
        if (run < target) ++draw;
    }
#undef BN_LP
    return min(draw, K - 1);
}

// bn_products for G cells of a lane that share node v (z[u] their cases): the node's and its children's
// parent lists are read once for the G. The same operations per cell as bn_products, so the same values.
template <int KMAX, int G>
__device__ __forceinline__ void bn_products_group(double (&p)[G][KMAX], double (&cum)[G], unsigned char* const (&z)[G],
                                             int v, int K, const double* __restrict__ pc,
                                             const int* __restrict__ card, const int* __restrict__ toff,
                                             const int* __restrict__ par_ptr, const int* __restrict__ par,
                                             const int* __restrict__ par_stride, const int* __restrict__ ch_ptr,
                                             const int* __restrict__ ch, const int* __restrict__ ch_stride) {
    int row[G];
#pragma unroll
    for (int u = 0; u < G; ++u) row[u] = 0;
    const int q1 = par_ptr[v + 1];
    for (int q = par_ptr[v]; q < q1; ++q) {
        const int pq = par[q], sq = par_stride[q];
#pragma unroll
        for (int u = 0; u < G; ++u) row[u] += (int)z[u][pq] * sq;
    }
    const int tv = toff[v];
    int xv[G];
#pragma unroll
    for (int u = 0; u < G; ++u) {
        xv[u] = z[u][v];
#pragma unroll
        for (int k = 0; k < KMAX; ++k)
            if (k < K) p[u][k] = pc[tv + row[u] * K + k];
    }
    const int c1 = ch_ptr[v + 1];
    for (int q = ch_ptr[v]; q < c1; ++q) {
        const int c = ch[q];
        const int s = ch_stride[q];
        const int Kc = card[c];
        const int tc = toff[c];
        int base[G];
#pragma unroll
        for (int u = 0; u < G; ++u) base[u] = 0;
        const int r1 = par_ptr[c + 1];
        for (int qq = par_ptr[c]; qq < r1; ++qq) {
            const int pq = par[qq], sq = par_stride[qq];
#pragma unroll
            for (int u = 0; u < G; ++u) base[u] += (int)z[u][pq] * sq;
        }
#pragma unroll
        for (int u = 0; u < G; ++u) {
            const double* t = pc + (tc + z[u][c]);
            const int b = base[u] - xv[u] * s;
#pragma unroll
            for (int k = 0; k < KMAX; ++k)
                if (k < K) p[u][k] = __dmul_rn(p[u][k], t[(b + k * s) * Kc]);
        }
    }
#pragma unroll
    for (int u = 0; u < G; ++u) {
        double run = 0.0;
#pragma unroll
        for (int k = 0; k < KMAX; ++k)
            if (k < K) {
                run = __dadd_rn(run, p[u][k]);
                p[u][k] = run;
            }
        cum[u] = run;
    }
}

// The number of cumulative sums p[k] below u * cum, at most K - 1: the draw.
template <int KMAX>
__device__ __forceinline__ int bn_pick(const double (&p)[KMAX], int K, double cum, unsigned int word) {
    const double target = __dmul_rn(u01_f64_from32(word), cum);
    int draw = 0;
#pragma unroll
    for (int k = 0; k < KMAX; ++k)
        if (k < K && p[k] < target) ++draw;
    return min(draw, K - 1);
}

// One colour group's missing cells in replica blockIdx.y (see the top): Mc >= 1 cells, numbered
// cell0 .. cell0 + Mc - 1 in the batch of Mtot cells.
template <int KMAX>
__global__ void BN_SWEEP_BOUNDS bn_sweep(
    unsigned char* __restrict__ Z, long long n, int V, const int* __restrict__ cell_case,
    const int* __restrict__ cell_node, long long Mc, long long cell0, long long Mtot,
    const double* __restrict__ tab, int C, const int* __restrict__ card, const int* __restrict__ toff,
    const int* __restrict__ par_ptr, const int* __restrict__ par, const int* __restrict__ par_stride,
    const int* __restrict__ ch_ptr, const int* __restrict__ ch, const int* __restrict__ ch_stride,
    unsigned int k0, unsigned int k1, unsigned int off_lo, unsigned int off_hi,
    const unsigned long long* __restrict__ off_dev, int* __restrict__ bad) {
    offset_from_device(off_dev, off_lo, off_hi);  // a sweep replayed from a CUDA graph (sampling/_graph.py)
    const double* __restrict__ pc = tab + C;
    const unsigned long long r = blockIdx.y;
    const unsigned long long chunks = ((unsigned long long)Mtot + 127) >> 7;  // per replica
    const int lane = threadIdx.x & 31;
    const long long last = (cell0 + Mc - 1) >> 7;
    const long long warps = (long long)gridDim.x * (blockDim.x >> 5);
    for (long long w = (cell0 >> 7) + (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5); w <= last;
         w += warps) {
        const uint4 x = philox4x32_10(philox_counter((r * chunks + (unsigned long long)w) * 32ull + lane, off_lo,
                                                     off_hi),
                                      make_uint2(k0, k1));
        unsigned int redo = 0;  // the cells whose products fell below BN_TINY
        const long long j0 = w * 128 + lane - cell0;  // the lane's first cell; the others at j0 + 32, + 64, + 96
#if BN_PREFETCH && BN_GROUP == 1
        int pre_v[4], pre_case[4];
#pragma unroll
        for (int h = 0; h < 4; ++h) {
            const long long j = j0 + h * 32;
            const bool in = j >= 0 && j < Mc;
            pre_v[h] = in ? cell_node[j] : 0;
            pre_case[h] = in ? cell_case[j] : 0;
        }
#if BN_PREFETCH >= 2  // and the cases' rows of Z towards L1 (their first and last bytes' lines)
#pragma unroll
        for (int h = 0; h < 4; ++h) {
            const unsigned char* zr = Z + (r * (unsigned long long)n + (unsigned long long)pre_case[h]) * V;
            asm volatile("prefetch.global.L1 [%0];" ::"l"(zr));
            asm volatile("prefetch.global.L1 [%0];" ::"l"(zr + V - 1));
        }
#endif
#endif
#pragma unroll 1
        for (int g = 0; g < 4; g += BN_GROUP) {  // the lane's cells h = g .. g + BN_GROUP - 1
            bool grouped = false;
#if BN_GROUP > 1
            const long long jg = j0 + 32 * g;
            if (KMAX <= BN_GROUP_KMAX && jg >= 0 && jg + 32 * (BN_GROUP - 1) < Mc) {
                const int v = cell_node[jg];
                bool same = true;
#pragma unroll
                for (int u = 1; u < BN_GROUP; ++u) same = same && cell_node[jg + 32 * u] == v;
                if (same) {
                    unsigned char* z[BN_GROUP];
#pragma unroll
                    for (int u = 0; u < BN_GROUP; ++u)
                        z[u] = Z + (r * (unsigned long long)n + (unsigned long long)cell_case[jg + 32 * u]) * V;
                    const int K = card[v];
                    double p[BN_GROUP][KMAX], cum[BN_GROUP];
                    bn_products_group<KMAX, BN_GROUP>(p, cum, z, v, K, pc, card, toff, par_ptr, par, par_stride,
                                                      ch_ptr, ch, ch_stride);
#pragma unroll
                    for (int u = 0; u < BN_GROUP; ++u) {
                        const int h = g + u;
                        if (cum[u] >= BN_TINY)
                            z[u][v] = (unsigned char)bn_pick<KMAX>(p[u], K, cum[u],
                                                                   h == 0 ? x.x : h == 1 ? x.y : h == 2 ? x.z : x.w);
                        else
                            redo |= 1u << h;
                    }
                    grouped = true;
                }
            }
#endif
            if (grouped) continue;
#pragma unroll 1
            for (int h = g; h < g + BN_GROUP; ++h) {
                const long long j = j0 + h * 32;
                if (j < 0 || j >= Mc) continue;
#if BN_PREFETCH && BN_GROUP == 1
                const int v = h == 0 ? pre_v[0] : h == 1 ? pre_v[1] : h == 2 ? pre_v[2] : pre_v[3];
                const int cs = h == 0 ? pre_case[0] : h == 1 ? pre_case[1] : h == 2 ? pre_case[2] : pre_case[3];
#else
                const int v = cell_node[j];
                const int cs = cell_case[j];
#endif
                unsigned char* z = Z + (r * (unsigned long long)n + (unsigned long long)cs) * V;
                const int K = card[v];
                double p[KMAX];
#ifdef BN_NET_CASES
                const double cum = bn_products_net<KMAX>(p, z, v, pc);
#else
                const double cum = bn_products<KMAX>(p, z, v, K, pc, card, toff, par_ptr, par, par_stride, ch_ptr,
                                                     ch, ch_stride);
#endif
                if (cum >= BN_TINY)
                    z[v] = (unsigned char)bn_pick<KMAX>(p, K, cum, h == 0 ? x.x : h == 1 ? x.y : h == 2 ? x.z : x.w);
                else
                    redo |= 1u << h;
            }
        }
        while (redo) {  // in log space (rare: the cells of one colour do not read each other, so order is free)
            const int h = __ffs(redo) - 1;
            redo &= redo - 1;
            const long long j = j0 + h * 32;
            const int v = cell_node[j];
            unsigned char* z = Z + (r * (unsigned long long)n + (unsigned long long)cell_case[j]) * V;
            const int draw = bn_draw_logs(z, v, card[v], h == 0 ? x.x : h == 1 ? x.y : h == 2 ? x.z : x.w, tab, card,
                                          toff, par_ptr, par, par_stride, ch_ptr, ch, ch_stride);
            if (draw < 0)  // every state impossible (or NaN): keep the value, report
                *bad = 1;
            else
                z[v] = (unsigned char)draw;
        }
    }
}

// Adds 1 to h[cell[u]] for each row u that is in: lanes of a warp that add to the same cell add once, through
// their leader (BN_AGG), or each lane adds its own.
__device__ __forceinline__ void bn_count_add(int* h, const bool (&in)[BN_COUNT_ROWS], const int (&cell)[BN_COUNT_ROWS]) {
#pragma unroll
    for (int u = 0; u < BN_COUNT_ROWS; ++u) {
        if (!in[u]) continue;
        const int c = cell[u];
#if BN_AGG
        const unsigned int active = __activemask();
        const unsigned int peers = __match_any_sync(active, c);
        if ((threadIdx.x & 31) == (unsigned int)(__ffs(peers) - 1)) atomicAdd(h + c, __popc(peers));
#else
        atomicAdd(h + c, 1);
#endif
    }
}

// counts[toff[v] + row * card[v] + Z[v]] += 1 for every node v of every row
// (replica, case) of Z[:rows]. counts must be zeroed first. With
// use_shared, the block counts into shared memory (C ints) and adds its
// non-zero cells to counts at the end; without (tables too large for shared
// memory), straight into counts. A thread takes BN_COUNT_ROWS rows at a time
// (rows t, t + stride, ...: each of them coalesced over the warp) and reads
// each node's parents once for all of them.
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
#ifdef BN_NET_REG_COUNT
    // A small network's BN_NET_REG_C cells counted in registers (ops.py, _net_reg_count): a thread adds each
    // of its rows to r[cell] by unrolled compare-adds, with no atomic, and the warp's sums go to h once a cell.
    // The same counts as the atomics below.
    static_assert(BN_COUNT_BLOCK % 32 == 0, "the warps' sums below take whole warps");
    int r[BN_NET_REG_C];
#pragma unroll
    for (int c = 0; c < BN_NET_REG_C; ++c) r[c] = 0;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < rows; t += BN_COUNT_ROWS * stride) {
        const unsigned char* z[BN_COUNT_ROWS];
        int in[BN_COUNT_ROWS];
#pragma unroll
        for (int u = 0; u < BN_COUNT_ROWS; ++u) {
            in[u] = t + u * stride < rows;
            z[u] = Z + (unsigned long long)(in[u] ? t + u * stride : t) * V;  // a row past the end reads row t
        }
        BN_NET_REG_COUNT
    }
#pragma unroll
    for (int c = 0; c < BN_NET_REG_C; ++c) {
        int sum = r[c];
        for (int o = 16; o; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if ((threadIdx.x & 31) == 0 && sum) atomicAdd(h + c, sum);
    }
#else
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < rows; t += BN_COUNT_ROWS * stride) {
        const unsigned char* z[BN_COUNT_ROWS];
        bool in[BN_COUNT_ROWS];
#pragma unroll
        for (int u = 0; u < BN_COUNT_ROWS; ++u) {
            in[u] = t + u * stride < rows;
            z[u] = Z + (unsigned long long)(in[u] ? t + u * stride : t) * V;  // a row past the end reads row t
        }
#ifdef BN_NET_COUNT
        BN_NET_COUNT  // every node's cells with the network written in (ops.py, _net_count)
#else
        for (int v = 0; v < V; ++v) {
            int cell[BN_COUNT_ROWS];
#pragma unroll
            for (int u = 0; u < BN_COUNT_ROWS; ++u) cell[u] = 0;
            const int q1 = par_ptr[v + 1];
            for (int q = par_ptr[v]; q < q1; ++q) {
                const int pq = par[q], sq = par_stride[q];
#pragma unroll
                for (int u = 0; u < BN_COUNT_ROWS; ++u) cell[u] += (int)z[u][pq] * sq;
            }
            const int K = card[v], base = toff[v];
#pragma unroll
            for (int u = 0; u < BN_COUNT_ROWS; ++u) cell[u] = base + cell[u] * K + z[u][v];
            bn_count_add(h, in, cell);
        }
#endif
    }
#endif  // BN_NET_REG_COUNT
    if (use_shared) {
        __syncthreads();
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            if (hist[c]) atomicAdd(counts + c, hist[c]);
    }
}

// Row-wise log-normalisation of log-gammas into the tables out (2, C), C =
// row_ptr[R]: for the row of cells [row_ptr[q], row_ptr[q + 1]), out[c] = x[c]
// - (max + log(sum exp(x - max))), the maximum and the sum taken in order (as
// the twin does), and out[C + c] = exp(out[c]). x may be out's first row (each
// thread reads its row before writing it).
extern "C" __global__ void bn_normalise(const double* x, double* out, const int* __restrict__ row_ptr, int R) {
    const int C = row_ptr[R];
    const int stride = gridDim.x * blockDim.x;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < R; q += stride) {
        const int a = row_ptr[q], b = row_ptr[q + 1];
        double mx = x[a];
        for (int c = a + 1; c < b; ++c)
            if (x[c] > mx) mx = x[c];
        double s = 0.0;
        for (int c = a; c < b; ++c) s += exp(x[c] - mx);
        const double l = mx + log(s);
        for (int c = a; c < b; ++c) {
            const double o = x[c] - l;
            out[c] = o;
            out[C + c] = exp(o);
        }
    }
}

#ifndef __CUDACC_RTC__
#define BN_INST(K)                                                                                                   \
    template __global__ void bn_sweep<K>(unsigned char*, long long, int, const int*, const int*, long long,         \
                                         long long, long long, const double*, int, const int*, const int*,          \
                                         const int*, const int*, const int*, const int*, const int*, const int*,    \
                                         unsigned int, unsigned int, unsigned int, unsigned int,                  \
                                         const unsigned long long*, int*);
BN_INST(4)
BN_INST(16)
BN_INST(64)
BN_INST(256)
#endif
