// One draw per row from unnormalised discrete distributions: index = the
// smallest k with prefix[k] > u * total, where prefix are the partial sums of
// the row's weights as the method accumulates them and total is the last one.
// A zero weight leaves the prefix unchanged, so it is never drawn.
//
// Methods (Steele & Tristan, "Using butterfly-patterned partial sums to draw
// from discrete distributions", PPoPP 2017):
//   cat_prefix<T, SRC>        one thread per row (Alg. 1 with the search done
//                             by a second pass that rescans the row until the
//                             prefix exceeds u * total, so nothing is stored).
//   cat_warp<T, SRC, 1>       "transpose" (Alg. 4): a warp owns 32 rows (lane j
//                             owns row base + j); for each 32-wide block of
//                             columns the lanes load the block of every row with
//                             coalesced loads, transpose it in registers
//                             (31 shuffles and two barrel rotations) and add
//                             their own row's 32 values in column order.
//   cat_warp<T, SRC, 2>       "butterfly" (Alg. 7-10): the same coalesced loads,
//                             then 31 __shfl_xor steps build the butterfly-
//                             patterned partial sums (see butterfly_table) and
//                             leave each lane with its row's block total; the
//                             search rebuilds the prefix values it needs from a
//                             low and a high value (see butterfly_search).
//
// Both warp methods run in two passes. Pass 1 streams the rows once and stores
// the running prefix at each block end (32 rows x ceil(K/32) values, in shared
// memory when it fits, else in global scratch). Each lane then binary-searches
// its own column of block prefixes for the block holding u * total, and pass 2
// reloads just that block of every row (32 coalesced loads), transposes it
// (transpose) or builds its butterfly table in shared memory (butterfly), and
// finishes the search inside the block. The remnant K mod 32 sits in front:
// block 0 holds pad = 32 * ceil(K/32) - K zero weights, then the first columns.
// Master index: the 32 lanes loop over the warp's rows together (the loop index
// i names the row whose block every lane loads), so no lane idles, also in the
// last, partial group of rows, whose missing rows repeat the last row.
//
// Rounding: prefix and transpose accumulate each row left to right, so their
// prefix values are exactly NumPy's cumsum and they always agree. The
// butterfly adds pairs within a block (a balanced tree, ((a0+a1)+(a2+a3))...)
// and block totals left to right; where a prefix value lies within rounding of
// u * total it may pick a neighbouring index. It never picks a zero weight.
//
// Sources of the weights (SRC):
//   0 weights  a[r, k]                            (n, K) row-major
//   1 logits   exp(a[r, k] - max_k a[r, k])       computed on the fly
//   2 products a[rows[r], k] * b[cols[r], k]      theta (M, K), phi (V, K);
//              the product is rounded once (__fmul_rn), never fused into an FMA
//
// Random numbers: row r at call offset off uses the Philox block with counter
// (r, off): u = u01_f32(w0) for float, u01_f64(w0, w1) for double. Every method
// uses the same u for a row, whatever the launch shape. A part of a larger call
// (products) takes the counters cbase + r or cbase + cidx[r] of its rows in that
// call, and the butterfly puts each row in the lane that call gives it (its
// rounding depends on the lane), so the part draws what that call draws.
//
// Rows with no positive total (all zeros, NaN, inf or an overflowing sum), and
// products tokens with an index out of range, get index -1. With a status word
// (status.cuh) the kernels also note the first such row, or the first row with
// a negative weight, as they read it: the least weight each lane sees is kept
// alongside the sums, and only a bad row is read again, to name what is wrong.
// Products may also sum the log of each token's total into ll[t / ll_group]
// (see LogSum in discrete.cuh): the instantiations with LL = true, so that
// the others keep their registers; they ignore ll.
//
// Twin: gpumcmc/discrete.py and gpumcmc/_butterfly.py.
#include "discrete.cuh"

// Threads per block; gpumcmc/discrete.py passes its THREADS here.
#ifndef GPUMCMC_CAT_THREADS
#define GPUMCMC_CAT_THREADS 128
#endif
// Minimum resident blocks per SM asked of ptxas for the warp kernels; 0 asks
// nothing (its own choice, the fewest registers here: with 1 it takes more).
// With 128 threads, 6 caps registers at 80 and 8 at 64, where ptxas spills
// (sm_90, nvcc 13.0: the float32 butterfly on weights takes 92 uncapped).
#ifndef GPUMCMC_CAT_MIN_BLOCKS
#define GPUMCMC_CAT_MIN_BLOCKS 0
#endif
#if GPUMCMC_CAT_MIN_BLOCKS > 0
#define GPUMCMC_CAT_WARP_BOUNDS __launch_bounds__(GPUMCMC_CAT_THREADS, GPUMCMC_CAT_MIN_BLOCKS)
#else
#define GPUMCMC_CAT_WARP_BOUNDS __launch_bounds__(GPUMCMC_CAT_THREADS)
#endif

namespace gpumcmc {
namespace cat {

// Per-warp shared memory: a header (row offsets for products, row maxima for
// logits), then a region of T holding the block prefixes and, after the block
// search, the butterfly table. Keep in step with gpumcmc/discrete.py.
constexpr int HDR_BYTES = 2 * W * 8;
constexpr int TBL_STRIDE = W + 1;  // padded rows: the search's reads spread over banks

enum { PREFIX = 0, TRANSPOSE = 1, BUTTERFLY = 2 };

// ---------------------------------------------------------------------------
// prefix: one thread per row
// ---------------------------------------------------------------------------
template <typename T, int SRC>
__device__ __forceinline__ T weight_at(const T* pa, const T* pb, T m, int k) {
    if constexpr (SRC == WEIGHTS) {
        return pa[k];
    } else if constexpr (SRC == LOGITS) {
        return exp_t(pa[k] - m);
    } else {
        return mul_rn(pa[k], pb[k]);
    }
}

template <typename T, int SRC, bool LL>
__device__ void prefix_rows(const T* __restrict__ a, const T* __restrict__ b, const int* __restrict__ rows,
                            const int* __restrict__ cols, long long n, int K, void* __restrict__ out, int out64,
                            uint2 key, unsigned off_lo, unsigned off_hi, long long n_a, long long n_b,
                            unsigned long long* status, unsigned long long tag, long long cbase,
                            const long long* __restrict__ cidx, double* __restrict__ ll, long long ll_group) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    LogSum lsum;
    bool noted = false;  // rows come in increasing order: only a thread's first bad row can be the minimum
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += stride) {
        const T* pa;
        const T* pb = nullptr;
        bool oob = false;
        if constexpr (SRC == PRODUCTS) {
            const int ra = rows[r], rb = cols[r];
            oob = (unsigned long long)ra >= (unsigned long long)n_a || (unsigned long long)rb >= (unsigned long long)n_b;
            pa = a + (oob ? 0 : (long long)ra * K);
            pb = b + (oob ? 0 : (long long)rb * K);
        } else {
            pa = a + r * K;
        }
        T m = T(0);
        if constexpr (SRC == LOGITS) {
            m = neg_inf((T*)nullptr);
            for (int k = 0; k < K; ++k) m = max_t(m, pa[k]);
        }
        T total = T(0), lo = T(0);
        for (int k = 0; k < K; ++k) {
            const T w = weight_at<T, SRC>(pa, pb, m, k);
            total += w;
            if constexpr (SRC != LOGITS) lo = min_t(lo, w);  // a NaN is caught by the total
        }
        const T target = row_uniform((T*)nullptr, row_counter(r, cbase, cidx), key, off_lo, off_hi) * total;
        long long idx = -1;
        const bool found = total > target && !oob;
        if (found) {
            T p = T(0);
            for (int k = 0; k < K; ++k) {
                p += weight_at<T, SRC>(pa, pb, m, k);
                if (p > target) {
                    idx = k;
                    break;
                }
            }
        }
        store_index(out, out64, r, idx);
        if constexpr (LL) ll_add(ll, ll_group, lsum, r, oob ? 0.0 : (double)total);
        if (status != nullptr && !noted && (!found || lo < T(0))) {
            note_row<T, SRC>(status, tag, r, found, pa, pb, K, oob, rows, n_a);
            noted = true;
        }
    }
    if constexpr (LL) ll_flush(ll, lsum, threadIdx.x & (W - 1));
}

// ---------------------------------------------------------------------------
// warp building blocks
// ---------------------------------------------------------------------------

// v[k] <- v[(k + s) mod W] for a lane-dependent s in [0, W): a barrel shifter of
// log2(W) conditional static rotations, so every register index stays static.
template <typename T>
__device__ __forceinline__ void rotate(T (&v)[W], int s) {
#pragma unroll
    for (int bit = 1; bit < W; bit <<= 1) {
        const bool take = (s & bit) != 0;
        T t[W];
#pragma unroll
        for (int k = 0; k < W; ++k) t[k] = take ? v[(k + bit) & (W - 1)] : v[k];
#pragma unroll
        for (int k = 0; k < W; ++k) v[k] = t[k];
    }
}

// In: x[i] = element (row i, column lane). Out: x[c] = element (row lane, column c).
template <typename T>
__device__ __forceinline__ void warp_transpose(T (&x)[W], int lane) {
    rotate(x, lane);  // x[k] = (row lane + k, column lane), rows mod W
    T r[W];
    r[0] = x[0];
#pragma unroll
    for (int s = 1; s < W; ++s) {
        // Lane L sends (row L - s, column L); lane d receives from L = d + s: (row d, column d + s).
        r[s] = __shfl_sync(FULL, x[(W - s) & (W - 1)], (lane + s) & (W - 1));
    }
    rotate(r, (W - lane) & (W - 1));  // r[c] = (row lane, column c)
#pragma unroll
    for (int k = 0; k < W; ++k) x[k] = r[k];
}

struct AddOp {
    template <typename T>
    __device__ __forceinline__ T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
    template <typename T>
    __device__ __forceinline__ T operator()(T a, T b) const { return max_t(a, b); }
};

// The butterfly of Steele & Tristan. In: v[i] = element (row i, column lane).
// Stage m = 1, 2, 4, ..., W/2: before it, lane j holds for each row i with
// i = j (mod m) the sum over the m-column group containing column j. Each pair
// of slots (2t, 2t+1) holds rows of opposite bit m; the lane keeps the row whose
// bit m matches its own, sends the other to lane j ^ m (__shfl_xor) and adds
// what it receives: now it holds 2m-column sums for W/(2m) rows. After W-1
// shuffles in all, lane j holds row j's sum over all W columns. With TABLE, the
// kept value of each step (before the addition) is stored at table slot
// (W - W/m + t), column lane: the butterfly-patterned partial sums.
template <int M, bool TABLE, typename T, typename Op>
__device__ __forceinline__ void butterfly_stage(T (&v)[W], int lane, T* __restrict__ tbl, Op op) {
    const bool up = (lane & M) != 0;
#pragma unroll
    for (int t = 0; t < W / (2 * M); ++t) {
        const T keep = up ? v[2 * t + 1] : v[2 * t];
        const T send = up ? v[2 * t] : v[2 * t + 1];
        if constexpr (TABLE) tbl[(W - W / M + t) * TBL_STRIDE + lane] = keep;
        v[t] = op(keep, __shfl_xor_sync(FULL, send, M));
    }
    if constexpr (2 * M < W) butterfly_stage<2 * M, TABLE>(v, lane, tbl, op);
}

template <bool TABLE, typename T, typename Op>
__device__ __forceinline__ T butterfly(T (&v)[W], int lane, T* __restrict__ tbl, Op op) {
    butterfly_stage<1, TABLE>(v, lane, tbl, op);
    return v[0];
}

// The search of row `lane` inside a block whose butterfly table is `tbl`.
// Start: low = prefix before the block, high = prefix at its end (node = the
// whole block, q = 0). At level m (children of m columns), the table holds the
// left child's sum if bit m of the row is clear, else the right child's: mid =
// low + left or high - right. Go right iff target >= mid, except that a child
// whose weights are all zero (mask) is never entered: so a zero weight is never
// drawn, whatever the rounding. Returns the column in the block.
template <typename T>
__device__ __forceinline__ int butterfly_search(const T* __restrict__ tbl, int lane, unsigned mask, T low,
                                                T high, T target) {
    int q = 0;
#pragma unroll
    for (int m = W / 2; m >= 1; m >>= 1) {
        const int j = q * 2 * m + (lane & (2 * m - 1));
        const int s = (W - W / m) + lane / (2 * m);
        const T e = tbl[s * TBL_STRIDE + j];
        const T mid = (lane & m) ? high - e : low + e;
        const unsigned ones = (1u << m) - 1u;
        const bool left_nz = ((mask >> (q * 2 * m)) & ones) != 0u;
        const bool right_nz = ((mask >> (q * 2 * m + m)) & ones) != 0u;
        const bool right = !left_nz || (right_nz && !(target < mid));
        if (right) {
            low = mid;
            q = 2 * q + 1;
        } else {
            high = mid;
            q = 2 * q;
        }
    }
    return q;
}

// Loads of element (row i of the group, column c) for the three sources.
template <typename T, int SRC>
struct Rows {
    const T* __restrict__ a;
    const T* __restrict__ b;
    const long long* __restrict__ hdr;  // products: theta offsets [0, W), phi offsets [W, 2W)
    const T* __restrict__ mx;           // logits: row maxima [0, W)
    long long r0, last;                 // first row of the group, last row of the input
    int K;

    __device__ __forceinline__ long long row_offset(int i) const {
        const long long r = r0 + i;
        return (r < last ? r : last) * K;
    }
    __device__ __forceinline__ T operator()(int i, long long c) const {
        if constexpr (SRC == WEIGHTS) {
            return a[row_offset(i) + c];
        } else if constexpr (SRC == LOGITS) {
            return exp_t(a[row_offset(i) + c] - mx[i]);
        } else {
            return mul_rn(a[hdr[i] + c], b[hdr[W + i] + c]);
        }
    }
};

// Hides a value from the optimiser. Applied to K once per block of columns, it
// keeps the compiler from hoisting 32 row offsets out of the block loop (64
// registers); each load's address is then one IMAD.WIDE, with no chain between them.
__device__ __forceinline__ int opaque(int k) {
    asm volatile("" : "+r"(k));
    return k;
}

// Pass 1 loads: block `blk` of every row of the group, column c = blk*W + lane - pad
// (the same for all rows). Lanes left of the remnant (c < 0) hold zero weights.
// `rows_left` = rows of the group that exist; missing rows repeat the last one.
// For products, a row of theta or phi shared with the previous row is not reloaded.
template <typename T, int SRC>
__device__ __forceinline__ void load_block(T (&x)[W], const Rows<T, SRC>& rows, long long c, int rows_left) {
    if (c < 0) {
#pragma unroll
        for (int i = 0; i < W; ++i) x[i] = T(0);
        return;
    }
    if constexpr (SRC == PRODUCTS) {
        long long pa = -1, pb = -1;
        T va = T(0), vb = T(0);
#pragma unroll
        for (int i = 0; i < W; ++i) {
            const long long oa = rows.hdr[i], ob = rows.hdr[W + i];
            if (oa != pa) va = rows.a[oa + c];
            if (ob != pb) vb = rows.b[ob + c];
            pa = oa;
            pb = ob;
            x[i] = mul_rn(va, vb);
        }
    } else {
        const T* p = rows.a + rows.r0 * rows.K + c;
        const int k = opaque(rows.K);
#pragma unroll
        for (int i = 0; i < W; ++i) {
            const T v = p[(long long)(i < rows_left ? i : rows_left - 1) * k];
            if constexpr (SRC == LOGITS) {
                x[i] = exp_t(v - rows.mx[i]);
            } else {
                x[i] = v;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// transpose and butterfly: one warp per 32 rows
// ---------------------------------------------------------------------------
template <typename T, int SRC, int METHOD, bool LL>
__device__ void warp_rows(const T* __restrict__ a, const T* __restrict__ b, const int* __restrict__ rows_idx,
                          const int* __restrict__ cols_idx, long long n, int K, T* __restrict__ scratch,
                          int s_in_smem, int region_words, void* __restrict__ out, int out64, uint2 key,
                          unsigned off_lo, unsigned off_hi, long long n_a, long long n_b,
                          unsigned long long* status, unsigned long long tag, long long cbase,
                          const long long* __restrict__ cidx, double* __restrict__ ll, long long ll_group) {
    extern __shared__ __align__(16) unsigned char smem[];
    LogSum lsum;
    const int lane = threadIdx.x & (W - 1);
    const int wib = threadIdx.x / W;
    const int wpb = blockDim.x / W;
    unsigned char* wbase = smem + (size_t)wib * (HDR_BYTES + (size_t)region_words * sizeof(T));
    long long* hdr = reinterpret_cast<long long*>(wbase);
    T* region = reinterpret_cast<T*>(wbase + HDR_BYTES);

    const int NB = (K + W - 1) / W;
    const int pad = NB * W - K;
    // The butterfly's rounding depends on the lane that holds a row, so a part
    // of a larger call (products with a counter base) puts token t in lane
    // (cbase + t) mod W, as that call would: the groups start `shift` slots
    // before token 0. With cidx the caller lays the tokens out so (discrete.py).
    const int shift = (SRC == PRODUCTS && METHOD == BUTTERFLY && cidx == nullptr) ? (int)(cbase & (W - 1)) : 0;
    const long long n_groups = (n + shift + W - 1) / W;
    const long long wstride = (long long)gridDim.x * wpb;
    bool noted = false;  // warp-uniform: groups come in increasing order, so only the first bad one counts

    for (long long g = (long long)blockIdx.x * wpb + wib; g < n_groups; g += wstride) {
        const long long r0 = g * W - shift;  // negative in a shifted first group (products only)
        const long long r = r0 + lane;
        const bool valid = r >= 0 && r < n;
        const long long rc = r < 0 ? 0 : valid ? r : n - 1;
        const int rows_left = n - r0 < W ? (int)(n - r0) : W;
        T* S = s_in_smem ? region : scratch + g * (long long)NB * W;
        Rows<T, SRC> rows{a, b, hdr, reinterpret_cast<const T*>(hdr), r0, n - 1, K};

        bool oob = false;  // products: an index out of range (row 0 is read instead, and -1 stored)
        if constexpr (SRC == PRODUCTS) {
            const int ra = rows_idx[rc], rb = cols_idx[rc];
            oob = (unsigned long long)ra >= (unsigned long long)n_a || (unsigned long long)rb >= (unsigned long long)n_b;
            hdr[lane] = oob ? 0 : (long long)ra * K;
            hdr[W + lane] = oob ? 0 : (long long)rb * K;
            __syncwarp();
        }
        if constexpr (SRC == LOGITS) {
            // Pass 0: row maxima. Each lane keeps a running maximum per row
            // over its columns; one butterfly then gives lane j row j's maximum.
            T mx[W];
#pragma unroll
            for (int i = 0; i < W; ++i) mx[i] = neg_inf((T*)nullptr);
            for (int blk = 0; blk < NB; ++blk) {
                const long long c = (long long)blk * W + lane - pad;
                if (c >= 0) {
                    const T* p = a + r0 * K + c;
                    const int k = opaque(K);
#pragma unroll
                    for (int i = 0; i < W; ++i) mx[i] = max_t(mx[i], p[(long long)(i < rows_left ? i : rows_left - 1) * k]);
                }
            }
            const T m = butterfly<false>(mx, lane, (T*)nullptr, MaxOp());
            reinterpret_cast<T*>(hdr)[lane] = m;
            __syncwarp();
        }

        // Pass 1: stream the rows, store the running prefix at every block end.
        // least: the least weight this lane held (transpose: of its row; butterfly:
        // of its column in every row), to catch negative weights.
        T run = T(0), least = T(0);
        for (int blk = 0; blk < NB; ++blk) {
            T x[W];
            load_block(x, rows, (long long)blk * W + lane - pad, rows_left);
            if constexpr (METHOD == BUTTERFLY) {
                if constexpr (SRC != LOGITS) {
#pragma unroll
                    for (int i = 0; i < W; ++i) least = min_t(least, x[i]);
                }
                run += butterfly<false>(x, lane, (T*)nullptr, AddOp());
            } else {
                warp_transpose(x, lane);
#pragma unroll
                for (int k = 0; k < W; ++k) {
                    run += x[k];
                    if constexpr (SRC != LOGITS) least = min_t(least, x[k]);
                }
            }
            S[blk * W + lane] = run;
        }
        __syncwarp();

        const T total = run;
        const T target = row_uniform((T*)nullptr, row_counter(rc, cbase, cidx), key, off_lo, off_hi) * total;
        const bool found = total > target && !oob;
        // Smallest block whose end prefix exceeds the target.
        int lo = 0, hi = NB - 1;
        while (lo < hi) {
            const int mid = (lo + hi) >> 1;
            if (S[mid * W + lane] > target) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        const int bsel = lo;
        const T low = bsel > 0 ? S[(bsel - 1) * W + lane] : T(0);
        const T high = S[bsel * W + lane];
        __syncwarp();  // the butterfly table below overwrites the block prefixes

        // Pass 2: reload each row's chosen block (master index i: every lane
        // loads column lane of row i's block), then search inside it.
        T x[W];
#pragma unroll
        for (int i = 0; i < W; ++i) {
            const int bi = __shfl_sync(FULL, bsel, i);
            const long long c = (long long)bi * W + lane - pad;
            x[i] = c >= 0 ? rows(i, c) : T(0);
        }
        int col;
        if constexpr (METHOD == BUTTERFLY) {
            unsigned mask = 0u;
#pragma unroll
            for (int i = 0; i < W; ++i) {
                const unsigned bm = __ballot_sync(FULL, x[i] > T(0));
                if (lane == i) mask = bm;
            }
            butterfly<true>(x, lane, region, AddOp());
            __syncwarp();
            col = butterfly_search(region, lane, mask, low, high, target);
        } else {
            warp_transpose(x, lane);
            T p = low;
            col = W - 1;
            bool hit = false;
#pragma unroll
            for (int k = 0; k < W; ++k) {
                p += x[k];
                if (!hit && p > target) {
                    col = k;
                    hit = true;
                }
            }
        }
        if (valid) store_index(out, out64, r, found ? (long long)bsel * W + col - pad : -1LL);
        if constexpr (LL) {
            if (valid) ll_add(ll, ll_group, lsum, r, oob ? 0.0 : (double)total);
        }
        if (status != nullptr && !noted) {
            // A negative weight anywhere in the group sends every row to the rescan.
            const bool neg = SRC != LOGITS && __any_sync(FULL, least < T(0));
            const bool bad = valid && (!found || neg);
            if (__any_sync(FULL, bad)) {
                if (bad) {
                    const T* pa = SRC == PRODUCTS ? a + hdr[lane] : a + r * K;
                    const T* pb = SRC == PRODUCTS ? b + hdr[W + lane] : nullptr;
                    note_row<T, SRC>(status, tag, r, found, pa, pb, K, oob, rows_idx, n_a);
                }
                noted = true;
            }
        }
        __syncwarp();  // the next group reuses the header and the region
    }
    if constexpr (LL) ll_flush(ll, lsum, lane);
}

}  // namespace cat
}  // namespace gpumcmc

// One signature for every kernel of this file, so one launcher serves all:
//   a, b         weights / logits / theta, and phi (products; else unused)
//   rows, cols   products' row indices into a and b (int32; else unused)
//   n, K         rows to draw, categories per row
//   scratch      global block prefixes, ceil(n/32) * ceil(K/32) * 32 values,
//                when they do not fit in shared memory (s_in_smem == 0)
//   region_words per-warp shared region in elements of T (see HDR_BYTES)
//   out, out64   indices, int64 if out64 else int32
//   off_dev      null, or a device offset added to off (a graph replay; see philox.cuh)
//   n_a, n_b     products: rows of a and b; a token whose index is outside
//                them reads row 0 and gets -1 (else unused)
//   status, tag  the status word (null: no checks) and this call's tag; see
//                status.cuh. Bad rows are noted there as they are met.
//   cbase, cidx  row r draws with Philox counter cbase + r, or cbase + cidx[r]
//                (see row_counter in discrete.cuh); 0 and null for a whole call
template <typename T, int SRC, bool LL = false>
__global__ void __launch_bounds__(GPUMCMC_CAT_THREADS)
cat_prefix(const T* __restrict__ a, const T* __restrict__ b, const int* __restrict__ rows,
           const int* __restrict__ cols, long long n, int K, T* __restrict__ scratch, int s_in_smem,
           int region_words, void* __restrict__ out, int out64, unsigned int k0, unsigned int k1,
           unsigned int off_lo, unsigned int off_hi, const unsigned long long* __restrict__ off_dev, long long n_a,
           long long n_b, unsigned long long* status, unsigned long long tag, long long cbase,
           const long long* __restrict__ cidx, double* __restrict__ ll, long long ll_group) {
    gpumcmc::offset_from_device(off_dev, off_lo, off_hi);
    gpumcmc::cat::prefix_rows<T, SRC, LL>(a, b, rows, cols, n, K, out, out64, make_uint2(k0, k1), off_lo, off_hi, n_a,
                                      n_b, status, tag, cbase, cidx, ll, ll_group);
}

template <typename T, int SRC, int METHOD, bool LL = false>
__global__ void GPUMCMC_CAT_WARP_BOUNDS
cat_warp(const T* __restrict__ a, const T* __restrict__ b, const int* __restrict__ rows,
         const int* __restrict__ cols, long long n, int K, T* __restrict__ scratch, int s_in_smem,
         int region_words, void* __restrict__ out, int out64, unsigned int k0, unsigned int k1,
         unsigned int off_lo, unsigned int off_hi, const unsigned long long* __restrict__ off_dev, long long n_a,
         long long n_b, unsigned long long* status, unsigned long long tag, long long cbase,
         const long long* __restrict__ cidx, double* __restrict__ ll, long long ll_group) {
    gpumcmc::offset_from_device(off_dev, off_lo, off_hi);
    gpumcmc::cat::warp_rows<T, SRC, METHOD, LL>(a, b, rows, cols, n, K, scratch, s_in_smem, region_words, out, out64,
                                            make_uint2(k0, k1), off_lo, off_hi, n_a, n_b, status, tag, cbase, cidx,
                                            ll, ll_group);
}

#ifndef __CUDACC_RTC__
// Offline builds (nvcc in CI) instantiate the templates so that their bodies
// are compiled; at run time NVRTC instantiates them through name_expressions.
#define GPUMCMC_CAT_ARGS(T)                                                                               \
    const T*, const T*, const int*, const int*, long long, int, T*, int, int, void*, int, unsigned int, \
        unsigned int, unsigned int, unsigned int, const unsigned long long*, long long, long long,               \
        unsigned long long*, unsigned long long, long long, const long long*, double*, long long
#define GPUMCMC_CAT_INSTANTIATE(T, SRC)                                  \
    template __global__ void cat_prefix<T, SRC>(GPUMCMC_CAT_ARGS(T));    \
    template __global__ void cat_warp<T, SRC, 1>(GPUMCMC_CAT_ARGS(T));   \
    template __global__ void cat_warp<T, SRC, 2>(GPUMCMC_CAT_ARGS(T));
GPUMCMC_CAT_INSTANTIATE(float, 0)
GPUMCMC_CAT_INSTANTIATE(float, 1)
GPUMCMC_CAT_INSTANTIATE(float, 2)
GPUMCMC_CAT_INSTANTIATE(double, 0)
GPUMCMC_CAT_INSTANTIATE(double, 1)
GPUMCMC_CAT_INSTANTIATE(double, 2)
#define GPUMCMC_CAT_INSTANTIATE_LL(T)                                     \
    template __global__ void cat_prefix<T, 2, true>(GPUMCMC_CAT_ARGS(T));  \
    template __global__ void cat_warp<T, 2, 1, true>(GPUMCMC_CAT_ARGS(T)); \
    template __global__ void cat_warp<T, 2, 2, true>(GPUMCMC_CAT_ARGS(T));
GPUMCMC_CAT_INSTANTIATE_LL(float)
GPUMCMC_CAT_INSTANTIATE_LL(double)
#undef GPUMCMC_CAT_INSTANTIATE_LL
#undef GPUMCMC_CAT_INSTANTIATE
#undef GPUMCMC_CAT_ARGS
#endif
