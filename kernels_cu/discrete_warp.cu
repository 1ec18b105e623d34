// The "warp" method of the categorical kernels: one warp per row, the row
// held in registers. A single pass over memory, with no shared memory and no
// second load of the chosen block, for rows up to 32 * NJ * V categories.
//
// Layout. The row is read as chunks of V consecutive elements (one vector
// load of 4, 2 or 1 elements; V divides K and the row start is aligned to it):
// lane l holds chunks c = 32 j + l for j < NJ, i.e. elements V c .. V c + V - 1.
// Every load instruction of the warp reads 32 V consecutive elements.
// Chunks past the row's end hold zero weights.
//
// Sums. Each lane adds its V weights of chunk j left to right (s_j). The
// warp's chunk totals C_j come from a reduce-scatter: log2(NJ) __shfl_xor
// steps, each of which halves the values a lane carries (it keeps the half
// its lane bit selects and sends the other), then log2(32 / NJ) plain xor
// steps; afterwards the G = 32 / NJ lanes l with l / G = j hold C_j. A scan
// over those groups gives the inclusive chunk prefixes, and the last one is
// the row's total.
//
// Search, for target = u * total (u the row's uniform; see discrete.cuh):
// the first chunk whose inclusive prefix exceeds the target, then inside it
// the first lane (a scan of the lanes' s_j), then inside that lane the first
// element. Each step takes only a positive chunk, lane or weight and, if
// rounding leaves none above the target, the last positive one: a zero weight
// is never drawn, and a row with a positive total always gets an index. The
// prefix values are added in another order than a left-to-right scan, so
// where one lies within rounding of the target the index may differ from
// "prefix" by one positive neighbour; elsewhere it is the same.
//
// Rows per warp. Warp w of the grid takes rows [w P, (w + 1) P), P = ceil(n /
// warps), one after another. For products, a theta or phi row equal to the
// previous token's stays in registers: tokens sorted by word (or by document)
// read each phi (theta) row once per run. Every 32 rows, lane l fetches the
// uniform and the row indices of row l of the batch; a shuffle hands them out.
//
// Products with LL = true: lane 0 adds the log of each row's total into
// ll[r / ll_group] (LogSum in discrete.cuh); LL = false ignores ll.
//
// Twin: the "prefix" twin of gpumcmc/discrete.py (cumsum and search).
#include "discrete.cuh"

#ifndef GPUMCMC_CAT_THREADS
#define GPUMCMC_CAT_THREADS 128
#endif

namespace gpumcmc {
namespace cat {

template <typename T, int V>
__device__ __forceinline__ void load_chunk(const T* __restrict__ p, T (&v)[V]) {
    if constexpr (V == 1) {
        v[0] = p[0];
    } else if constexpr (V == 2) {
        if constexpr (sizeof(T) == 4) {
            const float2 q = *reinterpret_cast<const float2*>(p);
            v[0] = q.x;
            v[1] = q.y;
        } else {
            const double2 q = *reinterpret_cast<const double2*>(p);
            v[0] = q.x;
            v[1] = q.y;
        }
    } else {
        static_assert(V == 4 && sizeof(T) == 4, "vectors of 4 are float32 only");
        const float4 q = *reinterpret_cast<const float4*>(p);
        v[0] = q.x;
        v[1] = q.y;
        v[2] = q.z;
        v[3] = q.w;
    }
}

// Lane `lane`'s chunks of the row at p (nchunks chunks of V); chunks past the
// end hold `fill`. All loads are issued before any is used.
template <typename T, int V, int NJ>
__device__ __forceinline__ void load_row(const T* __restrict__ p, int nchunks, int lane, T fill, T (&x)[NJ][V]) {
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        const int c = j * W + lane;
        if (c < nchunks) {
            load_chunk<T, V>(p + (long long)c * V, x[j]);
        } else {
#pragma unroll
            for (int q = 0; q < V; ++q) x[j][q] = fill;
        }
    }
}

template <typename T, int SRC>
__device__ __forceinline__ T row_weight(T xa, T xb, T m) {
    if constexpr (SRC == WEIGHTS) {
        return xa;
    } else if constexpr (SRC == LOGITS) {
        return exp_t(xa - m);
    } else {
        return mul_rn(xa, xb);
    }
}

// Reduce-scatter of NJ values per lane: step O pairs lane l with l ^ O; the
// lane keeps the half of its CNT values that bit O selects and adds the
// partner's copy of that half. After log2(NJ) steps (O = 16, 8, ..., 32 / NJ)
// v[0] of lane l holds chunk l / (32 / NJ) summed over the lanes that share
// l's low bits.
template <int CNT, int O, typename T, int NJ>
__device__ __forceinline__ void reduce_scatter(T (&v)[NJ], int lane) {
    if constexpr (CNT > 1) {
        const bool up = (lane & O) != 0;
#pragma unroll
        for (int t = 0; t < CNT / 2; ++t) {
            const T keep = up ? v[t + CNT / 2] : v[t];
            const T send = up ? v[t] : v[t + CNT / 2];
            v[t] = keep + __shfl_xor_sync(FULL, send, O);
        }
        reduce_scatter<CNT / 2, O / 2>(v, lane);
    }
}

// x[js][q] for a warp-uniform js, with static register indices.
template <typename T, int V, int NJ>
__device__ __forceinline__ T pick(const T (&x)[NJ][V], int js, int q) {
    T v = x[0][q];
#pragma unroll
    for (int j = 1; j < NJ; ++j) v = (j == js) ? x[j][q] : v;
    return v;
}

// Lane sums s of every chunk of one segment (32 NJ chunks), the chunk totals
// `chunk` (in the G lanes of each chunk), their inclusive prefixes `incl`
// within the segment, and the segment's total (every lane). `least` takes
// the minimum with every weight the lane adds (not for logits).
template <typename T, int SRC, int V, int NJ>
__device__ __forceinline__ T segment_sums(const T (&xa)[NJ][V], const T (&xb)[NJ][V], T m, int lane, T (&s)[NJ],
                                          T& chunk, T& incl, T& least) {
    constexpr int G = W / NJ;
    T v[NJ];
#pragma unroll
    for (int j = 0; j < NJ; ++j) {
        T acc = T(0);
#pragma unroll
        for (int q = 0; q < V; ++q) {
            const T w = row_weight<T, SRC>(xa[j][q], xb[j][q], m);
            acc += w;
            if constexpr (SRC != LOGITS) least = min_t(least, w);  // a NaN is caught by the total
        }
        s[j] = acc;
        v[j] = acc;
    }
    reduce_scatter<NJ, W / 2>(v, lane);
    chunk = v[0];
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) chunk += __shfl_xor_sync(FULL, chunk, o);
    incl = chunk;
#pragma unroll
    for (int d = G; d < W; d <<= 1) {
        const T t = __shfl_up_sync(FULL, incl, d);
        if (lane >= d) incl += t;
    }
    return __shfl_sync(FULL, incl, W - 1);
}

// The index inside a segment whose prefix before it is `sbase` (a segment with
// a positive total): first chunk, lane and element whose prefix exceeds the
// target, each restricted to positive ones, else the last positive one.
template <typename T, int SRC, int V, int NJ>
__device__ __forceinline__ int segment_search(const T (&xa)[NJ][V], const T (&xb)[NJ][V], T m, int lane,
                                              const T (&s)[NJ], T chunk, T incl, T sbase, T target) {
    constexpr int G = W / NJ;
    const T excl = __shfl_up_sync(FULL, incl, G);  // lanes < G: not used
    const bool rep = (lane & (G - 1)) == 0;
    const unsigned c_hit = __ballot_sync(FULL, rep && chunk > T(0) && sbase + incl > target);
    const unsigned c_pos = __ballot_sync(FULL, rep && chunk > T(0));
    const int jl = c_hit ? __ffs(c_hit) - 1 : 31 - __clz(c_pos);
    const int js = jl / G;
    const T cbase = __shfl_sync(FULL, excl, jl);
    const T base = js > 0 ? sbase + cbase : sbase;
    // The lanes of chunk js: inclusive prefixes from base.
    T sl = s[0];
#pragma unroll
    for (int j = 1; j < NJ; ++j) sl = (j == js) ? s[j] : sl;
    T li = sl;
#pragma unroll
    for (int d = 1; d < W; d <<= 1) {
        const T t = __shfl_up_sync(FULL, li, d);
        if (lane >= d) li += t;
    }
    const T inc = base + li;
    const unsigned l_hit = __ballot_sync(FULL, sl > T(0) && inc > target);
    const unsigned l_pos = __ballot_sync(FULL, sl > T(0));
    const int ls = l_hit ? __ffs(l_hit) - 1 : 31 - __clz(l_pos);
    T p = __shfl_up_sync(FULL, inc, 1);
    if (lane == 0) p = base;
    // Every lane walks its own V weights of chunk js; lane ls's answer is kept.
    int q_sel = -1, q_last = 0;
#pragma unroll
    for (int q = 0; q < V; ++q) {
        const T w = row_weight<T, SRC>(pick(xa, js, q), pick(xb, js, q), m);
        p += w;
        if (w > T(0)) {
            if (q_sel < 0 && p > target) q_sel = q;
            q_last = q;
        }
    }
    if (q_sel < 0) q_sel = q_last;
    q_sel = __shfl_sync(FULL, q_sel, ls);
    return (js * W + ls) * V + q_sel;
}

template <typename T, int SRC, int V, int NJ, bool LL>
__device__ void row_warp_draw(const T* __restrict__ a, const T* __restrict__ b, const int* __restrict__ rows_idx,
                              const int* __restrict__ cols_idx, long long n, int K, void* __restrict__ out,
                              int out64, uint2 key, unsigned off_lo, unsigned off_hi, long long n_a, long long n_b,
                              unsigned long long* status, unsigned long long tag, long long cbase,
                              const long long* __restrict__ cidx, double* __restrict__ ll, long long ll_group) {
    static_assert(NJ >= 1 && NJ <= W && (NJ & (NJ - 1)) == 0, "NJ must be a power of two <= 32");
    constexpr int SEG = W * NJ;  // chunks per segment
    const int lane = threadIdx.x & (W - 1);
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / W;
    const long long warps = (long long)gridDim.x * blockDim.x / W;
    const long long per = (n + warps - 1) / warps;
    const long long r_begin = warp * per;
    const long long r_end = r_begin + per < n ? r_begin + per : n;
    const int nchunks = K / V;
    const int nseg = (nchunks + SEG - 1) / SEG;
    const T fill = SRC == LOGITS ? neg_inf((T*)nullptr) : T(0);

    T xa[NJ][V], xb[NJ][V], s[NJ];
    long long prev_a = -1, prev_b = -1;
    T u_batch = T(0);
    int ra_batch = 0, rb_batch = 0;
    bool noted = false;  // warp-uniform: rows come in increasing order, so only the first bad one counts
    LogSum lsum;         // lane 0's sum of the rows' log totals (products, with ll)
    for (long long r = r_begin; r < r_end; ++r) {
        const int i = (int)((r - r_begin) & (W - 1));
        if (i == 0) {
            const long long rr = r + lane < r_end ? r + lane : r_end - 1;
            u_batch = row_uniform((T*)nullptr, row_counter(rr, cbase, cidx), key, off_lo, off_hi);
            if constexpr (SRC == PRODUCTS) {
                ra_batch = rows_idx[rr];
                rb_batch = cols_idx[rr];
                // An index out of range: -1, so that the token reads row 0 and gets -1.
                if ((unsigned long long)ra_batch >= (unsigned long long)n_a ||
                    (unsigned long long)rb_batch >= (unsigned long long)n_b) {
                    ra_batch = -1;
                }
            }
        }
        const T u = __shfl_sync(FULL, u_batch, i);
        long long oa, ob = 0;
        bool oob = false;
        if constexpr (SRC == PRODUCTS) {
            const int ra = __shfl_sync(FULL, ra_batch, i);
            oob = ra < 0;
            oa = oob ? 0 : (long long)ra * K;
            ob = oob ? 0 : (long long)__shfl_sync(FULL, rb_batch, i) * K;
        } else {
            oa = r * K;
        }
        const T* pa = a + oa;
        const T* pb = b + ob;
        // Segment `sg` of the row into xa (and xb); with one segment, rows
        // equal to the previous token's stay in registers.
        auto load = [&](int sg) {
            const int c0 = sg * SEG;
            if (nseg > 1 || oa != prev_a) load_row<T, V, NJ>(pa + (long long)c0 * V, nchunks - c0, lane, fill, xa);
            if constexpr (SRC == PRODUCTS) {
                if (nseg > 1 || ob != prev_b) load_row<T, V, NJ>(pb + (long long)c0 * V, nchunks - c0, lane, fill, xb);
            }
        };
        T m = T(0);
        if constexpr (SRC == LOGITS) {
            m = fill;
            for (int sg = 0; sg < nseg; ++sg) {
                load(sg);
#pragma unroll
                for (int j = 0; j < NJ; ++j) {
#pragma unroll
                    for (int q = 0; q < V; ++q) m = max_t(m, xa[j][q]);
                }
            }
#pragma unroll
            for (int o = W / 2; o > 0; o >>= 1) m = max_t(m, __shfl_xor_sync(FULL, m, o));
        }

        T chunk, incl, least = T(0);
        long long idx = -1;
        T row_total;
        if (nseg == 1) {
            if (SRC != LOGITS) load(0);
            prev_a = oa;
            prev_b = ob;
            const T total = segment_sums<T, SRC, V, NJ>(xa, xb, m, lane, s, chunk, incl, least);
            row_total = total;
            const T target = u * total;
            if (total > target && !oob) {  // a positive, finite total (u < 1); the same in every lane
                idx = segment_search<T, SRC, V, NJ>(xa, xb, m, lane, s, chunk, incl, T(0), target);
            }
        } else {
            // Long rows: the total segment by segment, then again up to the
            // segment whose end prefix exceeds the target, searched in registers.
            prev_a = prev_b = -1;
            T total = T(0);
            for (int sg = 0; sg < nseg; ++sg) {
                load(sg);
                total += segment_sums<T, SRC, V, NJ>(xa, xb, m, lane, s, chunk, incl, least);
            }
            row_total = total;
            const T target = u * total;
            if (total > target && !oob) {
                T cum = T(0), last_base = T(0);
                int last_pos = -1, chosen = -1;
                for (int sg = 0; sg < nseg && chosen < 0; ++sg) {
                    load(sg);
                    const T st = segment_sums<T, SRC, V, NJ>(xa, xb, m, lane, s, chunk, incl, least);
                    if (st > T(0)) {
                        last_pos = sg;
                        last_base = cum;
                        if (cum + st > target) chosen = sg;
                    }
                    if (chosen < 0) cum += st;
                }
                if (chosen < 0) {  // rounding left every segment end at or below the target
                    chosen = last_pos;
                    cum = last_base;
                    load(chosen);
                    segment_sums<T, SRC, V, NJ>(xa, xb, m, lane, s, chunk, incl, least);
                }
                idx = (long long)chosen * SEG * V +
                      segment_search<T, SRC, V, NJ>(xa, xb, m, lane, s, chunk, incl, cum, target);
            }
        }
        if (lane == 0) store_index(out, out64, r, idx);
        if constexpr (LL) {
            if (lane == 0) ll_add(ll, ll_group, lsum, r, oob ? 0.0 : (double)row_total);
        }
        if (status != nullptr && !noted) {
            const bool bad = idx < 0 || (SRC != LOGITS && __any_sync(FULL, least < T(0)));  // warp-uniform
            if (bad) {
                if (lane == 0) note_row<T, SRC>(status, tag, r, idx >= 0, pa, pb, K, oob, rows_idx, n_a);
                noted = true;
            }
        }
    }
    if constexpr (LL) ll_flush(ll, lsum, lane);
}

}  // namespace cat
}  // namespace gpumcmc

// The signature of discrete.cu's kernels without the scratch arguments
// (off_dev, n_a, n_b, status, tag, cbase and cidx as there; the row's lane
// does not change its draw here, so a part of a larger call needs only the
// counters).
template <typename T, int SRC, int V, int NJ, bool LL = false>
__global__ void __launch_bounds__(GPUMCMC_CAT_THREADS)
cat_row_warp(const T* __restrict__ a, const T* __restrict__ b, const int* __restrict__ rows,
         const int* __restrict__ cols, long long n, int K, void* __restrict__ out, int out64, unsigned int k0,
         unsigned int k1, unsigned int off_lo, unsigned int off_hi, const unsigned long long* __restrict__ off_dev,
         long long n_a, long long n_b, unsigned long long* status, unsigned long long tag, long long cbase,
         const long long* __restrict__ cidx, double* __restrict__ ll, long long ll_group) {
    gpumcmc::offset_from_device(off_dev, off_lo, off_hi);
    gpumcmc::cat::row_warp_draw<T, SRC, V, NJ, LL>(a, b, rows, cols, n, K, out, out64, make_uint2(k0, k1), off_lo,
                                           off_hi, n_a, n_b, status, tag, cbase, cidx, ll, ll_group);
}

#ifndef __CUDACC_RTC__
// Offline builds (nvcc in CI) instantiate the templates so that their bodies
// are compiled; at run time NVRTC instantiates them through name_expressions.
// Keep this list in step with _WARP_SHAPES in gpumcmc/discrete.py.
#define GPUMCMC_CATWARP_ARGS(T) \
    const T*, const T*, const int*, const int*, long long, int, void*, int, unsigned int, unsigned int, unsigned int, \
        unsigned int, const unsigned long long*, long long, long long, unsigned long long*, unsigned long long, \
        long long, const long long*, double*, long long
#define GPUMCMC_CATWARP_F32(SRC)                                               \
    template __global__ void cat_row_warp<float, SRC, 4, 2>(GPUMCMC_CATWARP_ARGS(float));  \
    template __global__ void cat_row_warp<float, SRC, 4, 8>(GPUMCMC_CATWARP_ARGS(float));  \
    template __global__ void cat_row_warp<float, SRC, 2, 16>(GPUMCMC_CATWARP_ARGS(float)); \
    template __global__ void cat_row_warp<float, SRC, 1, 32>(GPUMCMC_CATWARP_ARGS(float));
#define GPUMCMC_CATWARP_F64(SRC)                                                  \
    template __global__ void cat_row_warp<double, SRC, 2, 2>(GPUMCMC_CATWARP_ARGS(double)); \
    template __global__ void cat_row_warp<double, SRC, 2, 8>(GPUMCMC_CATWARP_ARGS(double)); \
    template __global__ void cat_row_warp<double, SRC, 1, 16>(GPUMCMC_CATWARP_ARGS(double));
GPUMCMC_CATWARP_F32(0)
GPUMCMC_CATWARP_F32(1)
GPUMCMC_CATWARP_F32(2)
GPUMCMC_CATWARP_F64(0)
GPUMCMC_CATWARP_F64(1)
GPUMCMC_CATWARP_F64(2)
template __global__ void cat_row_warp<float, 2, 4, 2, true>(GPUMCMC_CATWARP_ARGS(float));
template __global__ void cat_row_warp<float, 2, 4, 8, true>(GPUMCMC_CATWARP_ARGS(float));
template __global__ void cat_row_warp<float, 2, 2, 16, true>(GPUMCMC_CATWARP_ARGS(float));
template __global__ void cat_row_warp<float, 2, 1, 32, true>(GPUMCMC_CATWARP_ARGS(float));
template __global__ void cat_row_warp<double, 2, 2, 2, true>(GPUMCMC_CATWARP_ARGS(double));
template __global__ void cat_row_warp<double, 2, 2, 8, true>(GPUMCMC_CATWARP_ARGS(double));
template __global__ void cat_row_warp<double, 2, 1, 16, true>(GPUMCMC_CATWARP_ARGS(double));
#undef GPUMCMC_CATWARP_F32
#undef GPUMCMC_CATWARP_F64
#undef GPUMCMC_CATWARP_ARGS
#endif
