// GLM kernels: the fused log-likelihood and gradient (glm_fg_rows, glm_fg_tiles, glm_fg_reduce,
// glm_fg_check), the slice-within-Gibbs coordinate updates (glm_slice_pass; glm_slice_segment for
// max_steps_out >= GLM_PMAX; glm_slice_shard_eval and glm_slice_decide for rows split over devices) and
// the hierarchical model's normal-inverse-Wishart draw (glm_niw). The launchers and their NumPy twins
// are gpumcmc/glm.py (f+g) and gpumcmc/models/glm/ (the samplers).
//
// f[b] = sum_i w_i loglik(y_i | eta_bi) and g[b, k] = sum_i w_i dloglik/deta(eta_bi) X[i, k] with
// eta_bi = offset_i + X[i, :] . beta[b, :], for a batch of B chains. X is row-major (N, K); beta is
// (B, K); y, weights, offset are (N,) (weights and offset may be null).
// family: 0 bernoulli (logit), 1 poisson (log), 2 gaussian (identity).

#include "status.cuh"
#include "warp_reduce.cuh"

#ifndef GLM_THREADS
#define GLM_THREADS 256  // threads per block of glm_fg_tiles (8 warps)
#endif
#ifndef GLM_VPT
#define GLM_VPT 8        // 16-byte loads each thread keeps in flight per tile: tiles of up to 32 KB
#endif
#ifndef GLM_SB
#define GLM_SB 8         // chains per pass over a tile in shared memory
#endif
#ifndef GLM_MIN_BLOCKS
#define GLM_MIN_BLOCKS 3 // blocks of glm_fg_tiles<float, KPL <= 4> resident per SM: 80 registers a thread
#endif
#define GLM_WARPS (GLM_THREADS / 32)
#define GLM_FULL 0xffffffffu

// The log-likelihood of one row and r = d loglik / d eta, in double, in forms that neither
// overflow nor lose the result for large |eta|.
template <typename T>
__device__ __forceinline__ double glm_row(int family, double eta, double y, double sigma, double* r) {
    if (family == 0) {
        // y*eta - softplus(eta); r = y - sigmoid(eta)
        double a = fabs(eta);
        double sp = fmax(eta, 0.0) + log1p(exp(-a));
        double e = exp(-a);
        double mu = eta >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
        *r = y - mu;
        return y * eta - sp;
    } else if (family == 1) {
        double m = exp(eta);
        *r = y - m;
        return y * eta - m - lgamma(y + 1.0);
    } else {
        double z = (y - eta) / sigma;
        *r = z / sigma;
        return -0.5 * z * z - log(sigma) - 0.91893853320467274178;
    }
}

// glm_row for the f+g kernels (loglik_and_grad; no sampler's draws): float data of the bernoulli family in
// float, the rest as glm_row. The softplus and the logistic in float are within a few ulps of the double ones,
// far below what float data hold, and take a fraction of the time: in glm_fg_rows the double exponential and
// logarithm of the row's thread held the block's barrier after phase 1. The log-likelihood is returned in
// double (the sums over rows stay double); r = y - sigmoid(eta) is formed from the complement that keeps a
// small difference (1 - sigmoid(eta) = e / (1 + e) for eta >= 0), not by a subtraction that would lose it.
#ifndef GLM_FG_FLOAT_ROW
#define GLM_FG_FLOAT_ROW 1  // 0: every row in double, as glm_row (the probes time both)
#endif
template <typename T>
__device__ __forceinline__ double glm_row_fg(int family, T oi, T dot, T y, T w, double sigma, T* r) {
    if constexpr (sizeof(T) == 4 && GLM_FG_FLOAT_ROW) {
        if (family == 0) {
            const float eta = oi + dot, a = fabsf(eta), e = expf(-a), inv = 1.0f / (1.0f + e);
            const float hi = eta >= 0.0f ? inv : e * inv, lo = eta >= 0.0f ? e * inv : inv;  // sigmoid, 1 - it
            *r = (y * lo - (1.0f - y) * hi) * w;
            // y eta - max(eta, 0) first (exact for y in {0, 1}), then the small softplus term: added to a large
            // eta first, log1p(e) would be rounded away (the whole log-likelihood of a row fitted well)
            return (double)((y * eta - fmaxf(eta, 0.0f)) - log1pf(e)) * (double)w;
        }
    }
    double rd;
    const double ll = glm_row<T>(family, (double)oi + (double)dot, (double)y, sigma, &rd) * (double)w;
    *r = (T)(rd * (double)w);
    return ll;
}

// Bad input, noted in the status word (status.cuh) with no pass of its own where the kernel allows.
// A NaN or inf in a row of X, in y, in the row's offset or weight, or in a chain's coefficients, makes
// that row's weighted log-likelihood not finite (0 * inf is NaN), and so every sum it enters. So
// glm_fg_rows tests each row only for a y outside the family's support (glm_y_outside: one or two
// comparisons) and, at its end, each block its log-likelihood sums; a block where either test fails
// writes the call's number to `flag` (null: no checks), and the call's glm_fg_reduce then, and only
// then, goes over the inputs once more (glm_note_inputs) and notes each bad row, or chain, in the
// status word. glm_fg_tiles makes no test: any code after its tile loop costs that loop registers it
// needs for the next tile in flight (spills, with nvcc 13.0 for sm_90). Its calls end with
// glm_fg_check instead, which reads f and y (1 / K of the bytes of X) and notes the same way. The
// codes are the GLM's own, turned into messages by gpumcmc/glm.py's _BadInput; the index is the row,
// or the chain for GLM_BAD_BETA. A row whose inputs are finite but whose log-likelihood overflows is
// not noted.
enum GlmBad : unsigned {
    GLM_BAD_X = 1,        // the row of X holds NaN or inf
    GLM_BAD_Y = 2,        // y is NaN or inf
    GLM_BAD_SUPPORT = 3,  // y is outside the family's support (bernoulli: 0/1; poisson: counts)
    GLM_BAD_BETA = 4,     // the chain's coefficients hold NaN or inf (index: the chain)
    GLM_BAD_OFFSET = 5,   // the row's offset is NaN or inf
    GLM_BAD_WEIGHT = 6,   // the row's weight is NaN or inf
};

__device__ __forceinline__ unsigned glm_y_bad(int family, double y) {
    if (!isfinite(y)) return GLM_BAD_Y;
    if (family == 0) return (y == 0.0 || y == 1.0) ? 0u : (unsigned)GLM_BAD_SUPPORT;
    if (family == 1) return (y >= 0.0 && y == floor(y)) ? 0u : (unsigned)GLM_BAD_SUPPORT;
    return 0u;
}

// A finite y outside the family's support (NaN and inf show in the log-likelihood).
template <typename T>
__device__ __forceinline__ bool glm_y_outside(int family, T y) {
    if (family == 0) return y * (T(1) - y) != T(0);
    if (family == 1) return y < T(0) || y != floor(y);
    return false;
}

// Every row of X (N x K) with y, w, off (w, off may be null), and every chain of beta (B x K): note
// each bad row with its lowest code and each chain with a coefficient that is not finite. A grid-stride
// loop over the whole grid: the path of bad input only.
template <typename T>
__device__ __noinline__ void glm_note_inputs(unsigned long long* status, unsigned long long tag, int family,
                                             const T* __restrict__ X, const T* __restrict__ y,
                                             const T* __restrict__ w, const T* __restrict__ off,
                                             const T* __restrict__ beta, long long N, int K, int B) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (long long i = first; i < N; i += stride) {
        bool xbad = false;
        for (int c = 0; c < K; ++c) xbad |= !isfinite((double)X[i * K + c]);
        unsigned code = xbad ? (unsigned)GLM_BAD_X : glm_y_bad(family, (double)y[i]);
        if (code == 0u && off && !isfinite((double)off[i])) code = GLM_BAD_OFFSET;
        if (code == 0u && w && !isfinite((double)w[i])) code = GLM_BAD_WEIGHT;
        if (code != 0u) gpumcmc::status_note(status, tag, (unsigned long long)i, code);
    }
    for (long long b = first; b < B; b += stride) {
        bool bad = false;
        for (int c = 0; c < K; ++c) bad |= !isfinite((double)beta[b * K + c]);
        if (bad) gpumcmc::status_note(status, tag, (unsigned long long)b, GLM_BAD_BETA);
    }
}

// ---------------------------------------------------------------------------
// glm_fg_tiles: X streamed once from global memory, coalesced, in 128-bit loads.
//
// A block takes tiles of R rows (R a multiple of 32, R * K * sizeof(T) <= GLM_THREADS * GLM_VPT * 16;
// the launcher picks R) in a grid-stride loop. A tile is contiguous in X (R * K elements starting on a
// row boundary), so the block reads it as a flat run of 16-byte vectors, thread t taking vectors t,
// t + GLM_THREADS, ...: every warp load is 512 consecutive bytes. The vectors wait in registers
// (GLM_VPT per thread) while the block works on the tile before, so a block always has its next tile
// in flight, and are then stored to shared memory (x_s, row-major, R x K), zeros past the end of X.
//
// In shared memory, a warp takes a group of 32 rows for one chain. Lane l holds beta[b, l + 32 m]
// (m < KPL, so K <= 32 KPL) in registers and reads the rows' columns l + 32 m: consecutive lanes,
// consecutive words, no bank conflicts for any K. The 32 rows' partial dot products are summed
// across lanes by recursive halving (31 shuffles), which leaves eta of row l in lane l. Lane l then
// evaluates row l's log-likelihood and r (in double; y, weight and offset read from global memory,
// 128 bytes a warp, issued before the dot products), and the warp goes over the 32 rows again, lane
// l adding X[i, l + 32 m] * r_i (r_i broadcast by a shuffle) to the gradient entries it owns. No
// block barrier separates these steps. The log-likelihood is summed over the warp by shuffles.
// Sums within a row and within a group are in T; across groups, tiles and blocks in double.
//
// Each (chain, group) writes its gradient and log-likelihood partials to shared memory; after a
// barrier, one thread per (chain, column) adds the tile's partials, in group order, to the block's
// double accumulators: in shared memory when B * (K + 1) doubles fit, else in the block's slice of
// `part`. Every entry has one owner, so there are no atomics, and the order of every sum is fixed by
// the launch shape: results repeat bit for bit. At the end the block writes its B x (K + 1)
// accumulators (K gradient entries, then f) to part[blockIdx.x], and glm_fg_reduce sums them.
//
// Chains are taken GLM_SB at a time over the tile in shared memory, so X is read from global memory
// once whatever B is. Shared memory, in bytes, as the launcher computes it:
//   x_s R*K*sizeof(T) | f partials 8*SBe*G | [accumulators 8*B*(K+1)] | g partials SBe*G*K*sizeof(T)
// with G = R / 32 <= 8 and SBe = min(B, GLM_SB): at most 40.5 KB without the accumulators.
// `vec` is 0 when X is not 16-byte aligned; the tile is then read element by element.

// 16 bytes of X from element e on, element by element (zeros past n_el): for an X that is not 16-byte
// aligned, and for the vector that straddles its end.
__device__ __forceinline__ uint4 glm_gather(const float* __restrict__ src, int e, int n_el) {
    float v[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = e + i < n_el ? src[e + i] : 0.0f;
    return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
}
__device__ __forceinline__ uint4 glm_gather(const double* __restrict__ src, int e, int n_el) {
    const double a = e < n_el ? src[e] : 0.0, b = e + 1 < n_el ? src[e + 1] : 0.0;
    return make_uint4((unsigned)__double2loint(a), (unsigned)__double2hiint(a), (unsigned)__double2loint(b),
                      (unsigned)__double2hiint(b));
}

template <typename T>
__device__ __forceinline__ void glm_prefetch(uint4 (&buf)[GLM_VPT], const T* __restrict__ X, long long tile, int R,
                                             int K, long long N, int vec) {
    constexpr int EV = 16 / (int)sizeof(T);
    const long long row0 = tile * (long long)R;
    const int rows = (int)min((long long)R, N - row0);
    const int n_el = rows * K;
    const T* src = X + row0 * (long long)K;
    const int nvec = vec ? n_el / EV : 0;  // whole 16-byte vectors in the tile
    const uint4* s4 = reinterpret_cast<const uint4*>(src) + threadIdx.x;
#pragma unroll
    for (int v = 0; v < GLM_VPT; ++v) {
        const int c = threadIdx.x + v * GLM_THREADS;
        if (c < nvec) buf[v] = __ldg(s4 + v * GLM_THREADS);
        else buf[v] = glm_gather(src, c * EV, n_el);
    }
}

// One 32-row group g of the tile (rows row0 + g * 32 ...) for one chain (coefficients bt): writes the
// group's gradient partials red[0 .. K) and its log-likelihood *fl. Called by a whole warp.
template <typename T, int KPL>
__device__ __forceinline__ void glm_group(const T* __restrict__ x_s, const T* __restrict__ y,
                                          const T* __restrict__ w, const T* __restrict__ off, long long row0,
                                          const T* __restrict__ bt, int K, int g, int rows, int family,
                                          double sigma, T* __restrict__ red, double* __restrict__ fl) {
    const int lane = threadIdx.x & 31;
    const T* xg = x_s + g * 32 * K;
    // Lane l's row: y, weight and offset, read here so that the loads are in flight during the dot
    // products (coalesced, 32 consecutive values a warp).
    const int mine = g * 32 + lane;  // this lane's row in the tile
    T yi = T(0), wi = T(1), oi = T(0);
    if (mine < rows) {
        yi = y[row0 + mine];
        if (w) wi = w[row0 + mine];
        if (off) oi = off[row0 + mine];
    }
    T bv[KPL];
#pragma unroll
    for (int m = 0; m < KPL; ++m) {
        const int c = lane + 32 * m;
        bv[m] = c < K ? bt[c] : T(0);
    }
    // Partial dot product of row t of the group over this lane's columns.
    auto part = [&](int t) {
        T s = T(0);
#pragma unroll
        for (int m = 0; m < KPL; ++m) {
            const int c = lane + 32 * m;
            if (c < K) s += xg[t * K + c] * bv[m];
        }
        return s;
    };
    // Recursive halving over lanes, rows taken in order: rows t and t + 2^L (L = 0..4) are combined by
    // the exchange at lane offset 2^L, in which a lane keeps the row whose bit L matches its own lane bit
    // L and adds its partner's partial of that row. Rows go in like the digits of a binary counter, so at
    // most one partial waits per level (5 registers, not 32), and after the 31 exchanges lane l holds the
    // full sum of row l.
    T lv[5];
    T dot = T(0);
#pragma unroll 4
    for (int t = 0; t < 32; ++t) {  // t is warp-uniform, so are the branches below
        T cur = part(t);
        bool carry = true;
#pragma unroll
        for (int L = 0; L < 5; ++L) {
            if (carry) {
                if ((t >> L) & 1) {
                    const bool hb = (lane >> L) & 1;
                    cur = (hb ? cur : lv[L]) + __shfl_xor_sync(GLM_FULL, hb ? lv[L] : cur, 1 << L);
                } else {
                    lv[L] = cur;
                    carry = false;
                }
            }
        }
        if (carry) dot = cur;  // t = 31: every level combined
    }

    double ll = 0.0;
    T r = T(0);
    if (mine < rows) ll = glm_row_fg<T>(family, oi, dot, yi, wi, sigma, &r);
    ll = gpumcmc::warp_sum(ll);

    // Rows past the end of X (last tile) are zeros in x_s and have r = 0.
    T gp[KPL];
#pragma unroll
    for (int m = 0; m < KPL; ++m) gp[m] = T(0);
#pragma unroll 4
    for (int tt = 0; tt < 32; ++tt) {
        const T rt = __shfl_sync(GLM_FULL, r, tt);
#pragma unroll
        for (int m = 0; m < KPL; ++m) {
            const int c = lane + 32 * m;
            if (c < K) gp[m] += xg[tt * K + c] * rt;
        }
    }
#pragma unroll
    for (int m = 0; m < KPL; ++m) {
        const int c = lane + 32 * m;
        if (c < K) red[c] = gp[m];
    }
    if (lane == 0) *fl = ll;
}

// Blocks per SM the compiler must fit. glm_fg_tiles<float, 1..4> fits three (80 registers a thread)
// without spilling, compiled by NVRTC or nvcc (CUDA 13.0, sm_90). At that cap the float64 and 8-column
// instantiations spill part of the prefetched tile to local memory right after its loads, which waits
// for them and loses the overlap with the tile before; they take two blocks (128 registers) and spill
// nothing. Two blocks still keep 64 KB of X in flight per SM.
template <typename T, int KPL>
struct glm_min_blocks {
    static constexpr int value = sizeof(T) == 4 && KPL <= 4 ? GLM_MIN_BLOCKS : 2;
};

template <typename T, int KPL>
__global__ void __launch_bounds__(GLM_THREADS, (glm_min_blocks<T, KPL>::value))
glm_fg_tiles(const T* __restrict__ X, const T* __restrict__ y, const T* __restrict__ w,
             const T* __restrict__ off, const T* __restrict__ beta, long long N, int K, int B, int R,
             int vec, int acc_shared, int family, double sigma, double* __restrict__ part) {
    constexpr int EV = 16 / (int)sizeof(T);
    extern __shared__ __align__(16) unsigned char glm_smem[];
    const int G = R / 32;
    const int SBe = min(B, GLM_SB);
    const int KA = K + 1;  // accumulators per chain: K gradient entries, then f
    T* x_s = reinterpret_cast<T*>(glm_smem);
    double* fred_s = reinterpret_cast<double*>(glm_smem + (size_t)R * K * sizeof(T));
    double* acc = fred_s + SBe * G;
    T* red_s = reinterpret_cast<T*>(acc + (acc_shared ? (size_t)B * KA : 0));
    if (!acc_shared) acc = part + (size_t)blockIdx.x * B * KA;
    const int tid = threadIdx.x, warp = tid >> 5;
    const long long n_tiles = (N + R - 1) / R;
    const int tile_el = R * K;
    for (int j = tid; j < B * KA; j += GLM_THREADS) acc[j] = 0.0;

    uint4 buf[GLM_VPT];
    long long tile = blockIdx.x;
    if (tile < n_tiles) glm_prefetch<T>(buf, X, tile, R, K, N, vec);
    for (; tile < n_tiles; tile += gridDim.x) {
        const long long row0 = tile * (long long)R;
        const int rows = (int)min((long long)R, N - row0);
        __syncthreads();  // the previous tile is done with x_s and the partials
#pragma unroll
        for (int v = 0; v < GLM_VPT; ++v) {
            const int e = (tid + v * GLM_THREADS) * EV;
            if (e < tile_el) *reinterpret_cast<uint4*>(x_s + e) = buf[v];
        }
        __syncthreads();
        if (tile + gridDim.x < n_tiles) glm_prefetch<T>(buf, X, tile + gridDim.x, R, K, N, vec);
        for (int b0 = 0; b0 < B; b0 += GLM_SB) {
            const int nb = min(GLM_SB, B - b0);
            if (b0 > 0) __syncthreads();  // the previous chunk's partials have been added up
            for (int item = warp; item < nb * G; item += GLM_WARPS) {
                const int bb = item / G, g = item - bb * G;
                glm_group<T, KPL>(x_s, y, w, off, row0, beta + (size_t)(b0 + bb) * K, K, g, rows, family, sigma,
                                  red_s + (size_t)item * K, fred_s + item);
            }
            __syncthreads();
            for (int j = tid; j < nb * KA; j += GLM_THREADS) {
                const int bb = j / KA, k = j - bb * KA;
                double s = 0.0;
                if (k < K)
                    for (int g = 0; g < G; ++g) s += (double)red_s[(size_t)(bb * G + g) * K + k];
                else
                    for (int g = 0; g < G; ++g) s += fred_s[bb * G + g];
                acc[(size_t)(b0 + bb) * KA + k] += s;
            }
        }
    }
    if (acc_shared) {
        __syncthreads();
        for (int j = tid; j < B * KA; j += GLM_THREADS) part[(size_t)blockIdx.x * B * KA + j] = acc[j];
    }
}

// f[b] and g[b, :] from the blocks' partials part (n_part, B, K + 1): one warp per output, a fixed
// order of summation. Where the call's kernels wrote its number `call` to `flag` (null: no checks), the
// whole grid first notes what is wrong with the inputs (glm_note_inputs; X, y, w, off and all B_all
// chains of beta, as the call was given them) in the status word.
template <typename T>
__global__ void glm_fg_reduce(const double* __restrict__ part, int n_part, int B, int K, T* __restrict__ f,
                              T* __restrict__ g, const unsigned long long* flag, unsigned long long call,
                              unsigned long long* status, unsigned long long tag, int family,
                              const T* __restrict__ X, const T* __restrict__ y, const T* __restrict__ w,
                              const T* __restrict__ off, const T* __restrict__ beta, long long N, int B_all) {
    if (flag != nullptr && *flag == call) glm_note_inputs<T>(status, tag, family, X, y, w, off, beta, N, K, B_all);
    const long long n_out = (long long)B * (K + 1);
    const long long o = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (o >= n_out) return;  // whole warps
    double s = 0.0;
    for (int j = lane; j < n_part; j += 32) s += part[(long long)j * n_out + o];
    s = gpumcmc::warp_sum(s);
    if (lane == 0) {
        const long long b = o / (K + 1), k = o - b * (K + 1);
        if (k < K) g[b * K + k] = (T)s;
        else f[b] = (T)s;
    }
}

// The checks of a call by glm_fg_tiles, after it (see glm_note_inputs): f (B,) as glm_fg_reduce wrote
// it, and y. A grid-stride loop; every thread reads all of f, so the grid agrees without a word.
template <typename T>
__global__ void glm_fg_check(const T* __restrict__ f, int B, unsigned long long* status, unsigned long long tag,
                             int family, const T* __restrict__ X, const T* __restrict__ y, const T* __restrict__ w,
                             const T* __restrict__ off, const T* __restrict__ beta, long long N, int K) {
    bool bad = false;
    for (int b = 0; b < B; ++b) bad |= !isfinite((double)f[b]);
    if (bad) {
        glm_note_inputs<T>(status, tag, family, X, y, w, off, beta, N, K, B);
        return;
    }
    if (family == 2) return;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += stride)
        if (glm_y_outside<T>(family, y[i])) gpumcmc::status_note(status, tag, (unsigned long long)i, GLM_BAD_SUPPORT);
}

// ---------------------------------------------------------------------------
// glm_fg_rows<T, NB>: the same sums with a thread per row, for up to NB <= 8 chains (the default kernel
// for them; NB = 1, 2, 4 or 8 fixes the accumulators each thread keeps in registers). X is streamed as in
// glm_fg_tiles (the same prefetch of R * K contiguous elements, 128-bit loads, the next tile in flight while
// the block works on this one) and stored in shared memory with an even row stride Kp = 2 mod 4 (K itself
// when K = 2 mod 4, as K = 50; else K + 1, K + 2 or K + 3), so that a warp's reads of two elements of 32
// consecutive rows fall in distinct banks; with Kp == K the tile is stored as it came, 16 bytes a thread.
//
// Phase 1: a thread per (chain, row) of the tile forms eta from the row in shared memory and the chain's
// coefficients (beta_s, read by all lanes at once), two elements a read, then the row's log-likelihood and
// r = w dloglik/deta in double. r (in T) goes to shared memory; the log-likelihood is added to the thread's
// own sum for its chain (a thread takes the same (chain, row) places of every tile), in double, in
// registers. No shuffles, no reductions across lanes.
// Phase 2: thread (sub, q), q < KH = ceil(K / 2), adds columns 2q and 2q + 1 of rows t0(sub) .. t1(sub) of
// the tile times r of each chain, reading both columns of a row at once and r of 16 bytes of rows at once,
// in T over the tile's rows and then into double accumulators it keeps over all its tiles.
// At the end the nsub = min(GLM_THREADS / KH, GLM_ROWS_MAX_SUB) threads of a column are summed in order, and the threads' sums of
// the log-likelihood by a fixed tree in each warp and then warp by warp, and the block writes part[blockIdx.x] (B x (K + 1)), which
// glm_fg_reduce adds up: no atomics, a fixed order, results that repeat bit for bit. (The order depends on
// the grid, and so on the GPU's SM count: the last bits of f and g can differ from one GPU model to another.)
//
// Shared memory, as the launcher computes it: x_s max(R*Kp*sizeof(T), 8*(nsub*B*(K+1) + GLM_WARPS*B))
// (rounded up to 16 bytes) | r_s B*R*sizeof(T) | beta_s B*K*sizeof(T).

#ifndef GLM_ROWS_MIN_BLOCKS
#define GLM_ROWS_MIN_BLOCKS 3
#endif
#ifndef GLM_ROWS_UNROLL
#define GLM_ROWS_UNROLL 8  // steps of the phases' inner loops unrolled: their shared-memory reads in flight together
#endif
constexpr int glm_rows_unroll = GLM_ROWS_UNROLL;  // (a pragma's argument is not macro-expanded)
#ifndef GLM_ROWS_MAX_SUB
#define GLM_ROWS_MAX_SUB 64  // row subsets of phase 2 at most (few columns: the end's sums must fit in shared memory)
#endif

// Shared memory serves a warp's read of 32 consecutive 4-byte words in one pass, and glm_fg_rows is bound by
// its instructions and those passes, not by its DRAM reads: so both phases read two elements of a row, and
// phase 2 16 bytes of r, at a time.
template <typename T> struct glm_vec2;
template <> struct glm_vec2<float> { typedef float2 type; };
template <> struct glm_vec2<double> { typedef double2 type; };
template <typename T> struct glm_vec16;
template <> struct glm_vec16<float> { typedef float4 type; static constexpr int n = 4; };
template <> struct glm_vec16<double> { typedef double2 type; static constexpr int n = 2; };

template <typename T>
__device__ __forceinline__ T glm_lane(const float4& v, int j) { return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w; }
template <typename T>
__device__ __forceinline__ T glm_lane(const double2& v, int j) { return j == 0 ? v.x : v.y; }

// Blocks per SM the compiler must fit: three for up to four chains (80 registers a thread, the most
// bytes in flight); two for eight chains, whose phase-2 sums need the registers (the timings of both
// choices are in benchmarks/NOTES.md).
template <int NB>
struct glm_rows_min_blocks {
    static constexpr int value = NB >= 8 ? (GLM_ROWS_MIN_BLOCKS < 2 ? GLM_ROWS_MIN_BLOCKS : 2) : GLM_ROWS_MIN_BLOCKS;
};

template <typename T, int NB>
__global__ void __launch_bounds__(GLM_THREADS, glm_rows_min_blocks<NB>::value)
glm_fg_rows(const T* __restrict__ X, const T* __restrict__ y, const T* __restrict__ w, const T* __restrict__ off,
            const T* __restrict__ beta, long long N, int K, int Kp, int B, int R, int xs_len, int vec, int family,
            double sigma, double* __restrict__ part, unsigned long long* flag, unsigned long long call) {
    constexpr int EV = 16 / (int)sizeof(T);
    typedef typename glm_vec2<T>::type T2;
    extern __shared__ __align__(16) unsigned char glm_smem[];
    T* x_s = reinterpret_cast<T*>(glm_smem);
    T* r_s = x_s + xs_len;
    T* beta_s = r_s + (size_t)B * R;
    double* red = reinterpret_cast<double*>(x_s);  // the end's sums over subsets, once x_s is done
    const int tid = threadIdx.x;
    for (int j = tid; j < B * K; j += GLM_THREADS) beta_s[j] = beta[j];
    const int KA = K + 1, KH = (K + 1) >> 1, nsub = min(GLM_THREADS / KH, GLM_ROWS_MAX_SUB);
    const int q = tid % KH, sub = tid / KH, c0 = 2 * q;
    const bool gact = sub < nsub, two = c0 + 1 < K;
    const int t0 = gact ? (sub * R) / nsub : 0, t1 = gact ? ((sub + 1) * R) / nsub : 0;
    double acc0[NB], acc1[NB], lla[NB];  // columns c0 and c0 + 1; this thread's rows' log-likelihood
#pragma unroll
    for (int b = 0; b < NB; ++b) acc0[b] = acc1[b] = lla[b] = 0.0;
    const long long n_tiles = (N + R - 1) / R;
    const int tile_el = R * K;
    const float invK = 1.0f / (float)K;
    bool suspect = false;  // the block met a y outside the support (see glm_note_inputs)
    uint4 buf[GLM_VPT];
    long long tile = blockIdx.x;
    if (tile < n_tiles) glm_prefetch<T>(buf, X, tile, R, K, N, vec);
    for (; tile < n_tiles; tile += gridDim.x) {
        const long long row0 = tile * (long long)R;
        const int rows = (int)min((long long)R, N - row0);
        __syncthreads();  // the previous tile's phase 2 is done with x_s and r_s
        if (Kp == K) {
#pragma unroll
            for (int v = 0; v < GLM_VPT; ++v) {
                const int e = (tid + v * GLM_THREADS) * EV;
                if (e < tile_el) *reinterpret_cast<uint4*>(x_s + e) = buf[v];
            }
        } else {
#pragma unroll
            for (int v = 0; v < GLM_VPT; ++v) {
                const int e = (tid + v * GLM_THREADS) * EV;
                if (e < tile_el) {
                    int row = (int)((float)e * invK);  // e < 2^24: exact but for the rounding of invK
                    if (row * K > e) --row;
                    else if ((row + 1) * K <= e) ++row;
                    int col = e - row * K;
                    const T* vals = reinterpret_cast<const T*>(&buf[v]);
#pragma unroll
                    for (int i = 0; i < EV; ++i) {
                        if (e + i < tile_el) x_s[row * Kp + col] = vals[i];
                        if (++col == K) { col = 0; ++row; }
                    }
                }
            }
        }
        __syncthreads();
        if (tile + gridDim.x < n_tiles) glm_prefetch<T>(buf, X, tile + gridDim.x, R, K, N, vec);
        for (int item = tid; item < B * R; item += GLM_THREADS) {
            const int b = item / R, t = item - b * R;
            T r = T(0);
            if (t < rows) {
                const long long i = row0 + t;
                const T yi = y[i];
                const T wi = w ? w[i] : T(1);
                const T oi = off ? off[i] : T(0);
                const T* xr = x_s + t * Kp;
                const T* bt = beta_s + b * K;
                T s0 = T(0), s1 = T(0);
                int c = 0;
                if ((K & 1) == 0) {  // beta rows start on pairs (the rows of x_s always do): read pairs
                    const T2* xr2 = reinterpret_cast<const T2*>(xr);
                    const T2* bt2 = reinterpret_cast<const T2*>(bt);
#pragma unroll glm_rows_unroll
                    for (; c + 1 < K; c += 2) {
                        const T2 xv = xr2[c >> 1], bv = bt2[c >> 1];
                        s0 += xv.x * bv.x;
                        s1 += xv.y * bv.y;
                    }
                } else {
                    for (; c + 1 < K; c += 2) {
                        s0 += xr[c] * bt[c];
                        s1 += xr[c + 1] * bt[c + 1];
                    }
                }
                if (c < K) s0 += xr[c] * bt[c];
                const double ll = glm_row_fg<T>(family, oi, s0 + s1, yi, wi, sigma, &r);
#pragma unroll
                for (int bb = 0; bb < NB; ++bb)
                    if (bb == b) lla[bb] += ll;
                suspect |= flag != nullptr && glm_y_outside<T>(family, yi);
            }
            r_s[item] = r;
        }
        __syncthreads();
        if (gact) {
            T pa[NB], pb[NB];
#pragma unroll
            for (int b = 0; b < NB; ++b) pa[b] = pb[b] = T(0);
            const T* xc = x_s + c0;
            int t = t0;
            // r of V rows a read (16 bytes: R is a multiple of 32, so b * R + t is aligned once t is); for up
            // to two chains (with more, the vectors of r add to the registers their sums already fill)
            if (NB <= 2) {
                typedef typename glm_vec16<T>::type TV;
                constexpr int V = glm_vec16<T>::n;
                for (; t < t1 && (t & (V - 1)); ++t) {
                    const T2 xv = *reinterpret_cast<const T2*>(xc + t * Kp);
#pragma unroll
                    for (int b = 0; b < NB; ++b)
                        if (b < B) { pa[b] += xv.x * r_s[b * R + t]; pb[b] += xv.y * r_s[b * R + t]; }
                }
#pragma unroll glm_rows_unroll
                for (; t + V <= t1; t += V) {
                    TV rv[NB];
#pragma unroll
                    for (int b = 0; b < NB; ++b)
                        if (b < B) rv[b] = *reinterpret_cast<const TV*>(r_s + b * R + t);
#pragma unroll
                    for (int j = 0; j < V; ++j) {
                        const T2 xv = *reinterpret_cast<const T2*>(xc + (t + j) * Kp);
#pragma unroll
                        for (int b = 0; b < NB; ++b)
                            if (b < B) {
                                const T rb = glm_lane<T>(rv[b], j);
                                pa[b] += xv.x * rb;
                                pb[b] += xv.y * rb;
                            }
                    }
                }
            }
            for (; t < t1; ++t) {
                const T2 xv = *reinterpret_cast<const T2*>(xc + t * Kp);
#pragma unroll
                for (int b = 0; b < NB; ++b)
                    if (b < B) { pa[b] += xv.x * r_s[b * R + t]; pb[b] += xv.y * r_s[b * R + t]; }
            }
#pragma unroll
            for (int b = 0; b < NB; ++b) {
                acc0[b] += (double)pa[b];
                acc1[b] += (double)pb[b];
            }
        }
    }
    __syncthreads();
    double* red_ll = red + (size_t)nsub * B * KA;
    if (gact) {
#pragma unroll
        for (int b = 0; b < NB; ++b)
            if (b < B) {
                red[((size_t)sub * B + b) * KA + c0] = acc0[b];
                if (two) red[((size_t)sub * B + b) * KA + c0 + 1] = acc1[b];
            }
    }
#pragma unroll
    for (int b = 0; b < NB; ++b) {  // each warp's sum by a fixed tree, then the warps' in order below
        double v = lla[b];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(GLM_FULL, v, o);
        if (b < B && (tid & 31) == 0) red_ll[(size_t)b * GLM_WARPS + (tid >> 5)] = v;
    }
    __syncthreads();
    for (int j = tid; j < B * KA; j += GLM_THREADS) {
        const int b = j / KA, c = j - b * KA;
        double s = 0.0;
        if (c < K) {
            for (int qq = 0; qq < nsub; ++qq) s += red[(size_t)qq * B * KA + j];
        } else {
            for (int wp = 0; wp < GLM_WARPS; ++wp) s += red_ll[(size_t)b * GLM_WARPS + wp];
            suspect |= flag != nullptr && !isfinite(s);
        }
        part[(size_t)blockIdx.x * B * KA + j] = s;
    }
    if (flag != nullptr && __syncthreads_or(suspect) && tid == 0) *flag = call;
}

#ifndef __CUDACC_RTC__
#define GLM_ROWS_INST(T, NB)                                                                                    \
    template __global__ void glm_fg_rows<T, NB>(const T*, const T*, const T*, const T*, const T*, long long, int, \
                                                int, int, int, int, int, int, double, double*,               \
                                                unsigned long long*, unsigned long long);
GLM_ROWS_INST(float, 1)
GLM_ROWS_INST(float, 2)
GLM_ROWS_INST(float, 4)
GLM_ROWS_INST(float, 8)
GLM_ROWS_INST(double, 1)
GLM_ROWS_INST(double, 2)
GLM_ROWS_INST(double, 4)
GLM_ROWS_INST(double, 8)
#endif

#ifndef __CUDACC_RTC__
#define GLM_FG_INST(T)                                                                                          \
    template __global__ void glm_fg_tiles<T, 1>(const T*, const T*, const T*, const T*, const T*, long long, int, \
                                                int, int, int, int, int, double, double*);                   \
    template __global__ void glm_fg_tiles<T, 2>(const T*, const T*, const T*, const T*, const T*, long long, int, \
                                                int, int, int, int, int, double, double*);                   \
    template __global__ void glm_fg_tiles<T, 4>(const T*, const T*, const T*, const T*, const T*, long long, int, \
                                                int, int, int, int, int, double, double*);                   \
    template __global__ void glm_fg_reduce<T>(const double*, int, int, int, T*, T*, const unsigned long long*,  \
                                              unsigned long long, unsigned long long*, unsigned long long, int, \
                                              const T*, const T*, const T*, const T*, const T*, long long, int); \
    template __global__ void glm_fg_check<T>(const T*, int, unsigned long long*, unsigned long long, int, const T*, \
                                             const T*, const T*, const T*, const T*, long long, int);
GLM_FG_INST(float)
GLM_FG_INST(double)
template __global__ void glm_fg_tiles<float, 8>(const float*, const float*, const float*, const float*, const float*,
                                                long long, int, int, int, int, int, int, double, double*);
#endif

// ---------------------------------------------------------------------------
// One univariate slice update of coordinate k for every (group, chain): block
// (blockIdx.x = group g, blockIdx.y = chain c) owns the rows [starts[g],
// ends[g]) and runs Neal's stepping-out and shrinkage to completion, each
// log-density a block reduction over its rows of
//     loglik(eta[c, i] + (x - x0) * xk[i]) - 0.5 pkk (x - muk)^2 - (x - muk) cpr
// (the differential update: X[:, k] and eta read, nothing of X beta rebuilt).
// The random numbers come in drawn by the caller, in the NumPy twin's order:
// e (C, G) exponentials, u (2, C, G) and us (S, C, G) uniforms. On exit the
// block writes xnew (C, G), ok (C, G) and moves eta of its rows by the step.

#ifndef GLM_MAX_WARPS
#define GLM_MAX_WARPS 32
#endif

template <typename T>
__device__ double glm_segment_logdens(const T* __restrict__ xk, const T* __restrict__ y,
                                      const T* __restrict__ lgy, const T* __restrict__ eta_c,
                                      long long s, long long e, double delta, int family, double sigma,
                                      double* red) {
    double acc = 0.0;
    for (long long i = s + threadIdx.x; i < e; i += blockDim.x) {
        double r;
        double et = (double)eta_c[i] + delta * (double)xk[i];
        // Terms constant in x (lgamma(y + 1), the gaussian normaliser) cancel against logy: left out.
        double ll;
        if (family == 0) ll = glm_row<T>(0, et, (double)y[i], sigma, &r);
        else if (family == 1) ll = (double)y[i] * et - exp(et);
        else { double z = ((double)y[i] - et) / sigma; ll = -0.5 * z * z; }
        acc += ll;
    }
    acc = gpumcmc::warp_sum(acc);  // lane 0's sum is the one used
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    __syncthreads();
    if (lane == 0) red[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double t = 0.0;
        for (int j = 0; j < nw; ++j) t += red[j];
        red[GLM_MAX_WARPS] = t;
    }
    __syncthreads();
    return red[GLM_MAX_WARPS];
}

template <typename T>
__global__ void glm_slice_segment(const T* __restrict__ xk, const T* __restrict__ y, const T* __restrict__ lgy,
                                  T* __restrict__ eta, const long long* __restrict__ starts,
                                  const long long* __restrict__ ends, const T* __restrict__ x0a,
                                  const T* __restrict__ wa, const T* __restrict__ cpr, const T* __restrict__ pkk,
                                  const T* __restrict__ muk, const T* __restrict__ ea, const T* __restrict__ ua,
                                  const T* __restrict__ usa, long long N, int G, int C, int max_out,
                                  int max_shrink, int family, double sigma, T* __restrict__ xnew_out,
                                  unsigned char* __restrict__ ok_out) {
    __shared__ double red[GLM_MAX_WARPS + 1];
    const int g = blockIdx.x, c = blockIdx.y;
    if (g >= G || c >= C) return;
    const long long cg = (long long)c * G + g, CG = (long long)C * G;
    const long long s = starts[g], e = ends[g];
    T* eta_c = eta + (long long)c * N;
    // The twin computes in the array dtype; candidates are formed in T here as there.
    const T x0 = x0a[cg], w = wa[cg];
    const double P = (double)pkk[c], m = (double)muk[c], cc = (double)cpr[cg];
#define GLM_F(x) (glm_segment_logdens<T>(xk, y, lgy, eta_c, s, e, (double)((T)((x) - x0)), family, sigma, red) \
                  - 0.5 * P * ((double)(x) - m) * ((double)(x) - m) - ((double)(x) - m) * cc)
    const double f0 = GLM_F(x0);
    const double logy = f0 - (double)ea[cg];
    T L = x0 - w * ua[cg];
    T R = L + w;
    int J = (int)floor((double)(max_out * ua[CG + cg]));
    int Jr = (max_out - 1) - J;
    // The twin evaluates both ends in each round and stops a side after its first miss.
    for (int st = 0; st < max_out; ++st) {
        bool aL = J > st, aR = Jr > st;
        if (!aL && !aR) break;
        if (aL) { if (GLM_F(L) > logy) L = L - w; else J = 0; }
        if (aR) { if (GLM_F(R) > logy) R = R + w; else Jr = 0; }
    }
    T xn = x0;
    bool done = false;
    for (int st = 0; st < max_shrink && !done; ++st) {
        T x1 = L + usa[(long long)st * CG + cg] * (R - L);
        if (GLM_F(x1) > logy) { xn = x1; done = true; }
        else if (x1 < x0) L = x1;
        else R = x1;
    }
#undef GLM_F
    const T delta = xn - x0;
    if (delta != (T)0)
        for (long long i = s + threadIdx.x; i < e; i += blockDim.x) eta_c[i] = eta_c[i] + delta * xk[i];
    if (threadIdx.x == 0) { xnew_out[cg] = xn; ok_out[cg] = done ? 1 : 0; }
}

#ifndef __CUDACC_RTC__
#define GLM_SEG_INST(T)                                                                                         \
    template __global__ void glm_slice_segment<T>(const T*, const T*, const T*, T*, const long long*,            \
                                                  const long long*, const T*, const T*, const T*, const T*,      \
                                                  const T*, const T*, const T*, const T*, long long, int, int,   \
                                                  int, int, int, double, T*, unsigned char*);
GLM_SEG_INST(float)
GLM_SEG_INST(double)
#endif

// ---------------------------------------------------------------------------
// glm_slice_pass: the same slice update with the rows of each (chain, group) split over many blocks.
//
// The grid is one-dimensional: block b takes chain c = b / n_chunks and chunk ch = b % n_chunks, a run
// of at most chunk_rows rows of one group (chunk_group[ch]; group g owns the chunks chunk_first[g] ..
// chunk_first[g + 1]). A block evaluates the log-likelihood of its rows at up to GLM_PMAX candidate
// values of the coordinate at once, reading X[:, k], y and eta once for all of them.
//
// The candidates are known before any is evaluated. In the first pass of coordinate k (first = 1):
// x0; every stepping-out point Neal's procedure may visit (J on the left, L0, L0 - w, ...; J_r on the
// right, R0, R0 + w, ...; J + J_r = max_out - 1 points); and the first d1 shrinkage proposals on the
// bracket (L0, R0), the bracket when neither side steps out (the common case with a tuned width).
// Shrinkage needs no tree: a rejected proposal x replaces L when x < x0 and R otherwise, so the
// sequence of proposals, given that all before were rejected, is fixed by the uniforms. When the
// stepping-out moves a side, or the d1 proposals are all rejected, the bracket and the count of
// proposals used are stored and the second pass (first = 0) evaluates the next GLM_PMAX proposals of
// every (chain, group) still open; the blocks of the others return at once. In the rare case that
// these are rejected too, the deciding block goes on alone over its group's rows.
//
// Each block writes its partial sums to part; the last block of a (chain, group) to finish (an atomic
// counter, reset by that block) adds them in chunk order, so the sums, and the draws, repeat bit for
// bit. It then takes Neal's decisions in the twin's order, writes beta, the tuned width (warm-up) and
// the step `dpend`, which the first pass of the next coordinate adds to eta (eta += dpend * X[:, k])
// while it reads eta: the differential update costs no pass of its own. The caller adds the last
// coordinate's step after the sweep. Candidates, widths and eta are formed with rounded operations
// (no fused multiply-add), as NumPy forms them.

#ifndef GLM_PMAX
#define GLM_PMAX 16
#endif
#define GLM_SLICE_WARPS 8  // at most 256 threads a block
// Rows of the block's scratch sums: a row per warp, or per GLM_PMAX threads in the chunk reduction.
#define GLM_WS_ROWS (256 / GLM_PMAX > GLM_SLICE_WARPS ? 256 / GLM_PMAX : GLM_SLICE_WARPS)

__device__ __forceinline__ float glm_add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double glm_add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float glm_sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double glm_sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float glm_mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double glm_mul(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float glm_exp(float a) { return expf(a); }
__device__ __forceinline__ double glm_exp(double a) { return exp(a); }
__device__ __forceinline__ float glm_log1p(float a) { return log1pf(a); }
__device__ __forceinline__ double glm_log1p(double a) { return log1p(a); }

// log p(y | eta) up to terms constant in eta, in the data's precision (as the NumPy twin computes it).
template <typename T>
__device__ __forceinline__ double glm_slice_ll(int family, T et, T y, double sigma) {
    if (family == 0) {
        const T sp = (et > T(0) ? et : T(0)) + glm_log1p(glm_exp(et > T(0) ? -et : et));
        return (double)(y * et - sp);
    } else if (family == 1) {
        return (double)(y * et - glm_exp(et));
    } else {
        const double z = ((double)y - (double)et) / sigma;
        return -0.5 * z * z;
    }
}

// The block's sums over rows r0, r0 + stride, ... < r1 of loglik at eta + pd[p] * xk, p < np, into
// tot[p]. With xprev, eta of each row is first moved by dprev * xprev and written back.
template <typename T>
__device__ void glm_slice_eval(const T* __restrict__ xk, const T* __restrict__ y, T* __restrict__ eta_c,
                               const T* __restrict__ xprev, T dprev, long long r0, long long r1,
                               const T* pd, int np, int family, double sigma,
                               double (*wsum)[GLM_PMAX], double* tot) {
    double acc[GLM_PMAX];
#pragma unroll
    for (int p = 0; p < GLM_PMAX; ++p) acc[p] = 0.0;
    for (long long i = r0 + threadIdx.x; i < r1; i += blockDim.x) {
        T e = eta_c[i];
        if (xprev) {
            e = glm_add(e, glm_mul(dprev, xprev[i]));
            eta_c[i] = e;
        }
        const T xi = xk[i], yi = y[i];
#pragma unroll
        for (int p = 0; p < GLM_PMAX; ++p)
            if (p < np) acc[p] += glm_slice_ll<T>(family, glm_add(e, glm_mul(pd[p], xi)), yi, sigma);
    }
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
#pragma unroll
    for (int p = 0; p < GLM_PMAX; ++p) {
        if (p < np) {
            double v = acc[p];
            v = gpumcmc::warp_sum(v);
            if (lane == 0) wsum[warp][p] = v;
        }
    }
    __syncthreads();
    if (threadIdx.x < np) {
        double t = 0.0;
        for (int j = 0; j < nw; ++j) t += wsum[j][threadIdx.x];
        tot[threadIdx.x] = t;
    }
    __syncthreads();
}

// The next proposals of shrinkage on (a, b) from proposal s on, all earlier ones rejected: pts[0 .. n).
// u[n * stride] is the uniform of proposal s + n.
template <typename T>
__device__ int glm_shrink_points(T a, T b, T x0, int s, int n_max, int max_shrink, const T* u,
                                 long long stride, T* pts) {
    int n = 0;
    for (; n < n_max && s + n < max_shrink; ++n) {
        const T x = glm_add(a, glm_mul(u[(long long)n * stride], glm_sub(b, a)));
        pts[n] = x;
        if (x < x0) a = x;
        else b = x;
    }
    return n;
}

// The first pass's bracket (L0, R0) and stepping-out budgets (J on the left, Jr on the right) of (chain,
// group) cg, from the uniforms ua (2 K, C, G), as the twin forms them.
template <typename T>
__device__ __forceinline__ void glm_first_bracket(const T* __restrict__ ua, int k, long long CG, long long cg, T x0,
                                                  T w, int max_out, T& L0, T& R0, int& J, int& Jr) {
    L0 = glm_sub(x0, glm_mul(w, ua[(long long)(2 * k) * CG + cg]));
    R0 = glm_add(L0, w);
    J = (int)floor((double)glm_mul((T)max_out, ua[(long long)(2 * k + 1) * CG + cg]));
    Jr = (max_out - 1) - J;
}

// A pass's candidates pts[0 .. np) and their offsets pd = pts - x0, formed by one thread; returns np. The
// first pass: x0, the J + Jr stepping-out points, then the first d1 shrinkage proposals on (L0, R0); a later
// pass: the next GLM_PMAX proposals from the stored bracket (stL, stR) and count s0. usv: the pass's uniforms.
template <typename T>
__device__ __forceinline__ int glm_pass_points(int first, T x0, T w, T L0, T R0, int J, int Jr, int max_out, int d1,
                                               int max_shrink, const T* __restrict__ stL, const T* __restrict__ stR,
                                               long long cg, int s0, const T* usv, T* pts, T* pd) {
    int np;
    if (first) {
        pts[0] = x0;
        T L = L0, R = R0;
        for (int j = 0; j < J; ++j) { pts[1 + j] = L; L = glm_sub(L, w); }
        for (int j = 0; j < Jr; ++j) { pts[1 + J + j] = R; R = glm_add(R, w); }
        np = max_out + glm_shrink_points<T>(L0, R0, x0, 0, d1, max_shrink, usv, 1, pts + max_out);
    } else {
        np = glm_shrink_points<T>(stL[cg], stR[cg], x0, s0, GLM_PMAX, max_shrink, usv, 1, pts);
    }
    for (int p = 0; p < np; ++p) pd[p] = glm_sub(pts[p], x0);
    return np;
}

// Rows of (chain, group) cg split over nch > 1 chunks: this block's sums tot[0 .. np) go to part, and the last
// block of cg to finish (an atomic counter, reset by that block) adds every chunk's sums into tot, in chunk
// order (a fixed order for a fixed block size). Returns false in the other blocks, which are then done.
__device__ __forceinline__ bool glm_chunk_total(double* __restrict__ part, int* __restrict__ counter, long long cg,
                                                int c, int ch, int cf, int nch, int n_chunks, int np,
                                                double (*wsum)[GLM_PMAX], double* tot, int* s_last) {
    double* mine = part + ((long long)c * n_chunks + ch) * GLM_PMAX;
    if (threadIdx.x < np) mine[threadIdx.x] = tot[threadIdx.x];
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const int done_before = atomicAdd(counter + cg, 1);
        *s_last = done_before == nch - 1;
        if (*s_last) counter[cg] = 0;  // ready for the next pass
    }
    __syncthreads();
    if (!*s_last) return false;
    __threadfence();
    // The chunks' sums, thread t taking candidate t % GLM_PMAX of chunks t / GLM_PMAX, t / GLM_PMAX + q,
    // ... (q = blockDim.x / GLM_PMAX), then those q partials in order: a fixed order for a fixed block.
    const int q = blockDim.x / GLM_PMAX, p = threadIdx.x % GLM_PMAX, r = threadIdx.x / GLM_PMAX;
    double* ws = &wsum[0][0];  // GLM_WS_ROWS >= q rows
    if (r < q) {
        double t = 0.0;
        if (p < np) {
            const double* pc = part + ((long long)c * n_chunks + cf) * GLM_PMAX + p;
            for (int j = r; j < nch; j += q) t += __ldcg(pc + (long long)j * GLM_PMAX);
        }
        ws[r * GLM_PMAX + p] = t;
    }
    __syncthreads();
    if (threadIdx.x < np) {
        double t = 0.0;
        for (int j = 0; j < q; ++j) t += ws[j * GLM_PMAX + threadIdx.x];
        tot[threadIdx.x] = t;
    }
    __syncthreads();
    return true;
}

// The prior's cross term sum_{j != k} (beta_j - mu_j) prec[k, j] of (chain c, group cg), summed by warp 0
// (its lanes return it; other threads return 0).
template <typename T>
__device__ __forceinline__ double glm_prior_cross(const T* __restrict__ beta, const T* __restrict__ mu,
                                                  const T* __restrict__ prec, long long cg, int c, int K, int k) {
    double cc = 0.0;
    if (threadIdx.x < 32) {
        for (int j = threadIdx.x; j < K; j += 32)
            if (j != k) cc += ((double)beta[cg * K + j] - (double)mu[(long long)c * K + j]) *
                              (double)prec[((long long)c * K + k) * K + j];
        cc = gpumcmc::warp_sum(cc);
    }
    return cc;
}

// One round of Neal's decisions for (chain, group) cg, by one thread, over the candidates pts[0 .. np) whose
// log-likelihood sums over the rows are tot[0 .. np); the prior adds -P (x - m)^2 / 2 - (x - m) cc. The
// first round sets the slice level logy (from the exponential eav), moves the bracket (a, b) by the
// stepping-out points in the slice and, when neither side moved, takes the shrinkage proposals; a later
// round starts (entry) from the stored state. Shrinkage that has neither accepted nor used max_shrink
// proposals either stores its state for the next pass (returns 0) or, with `alone`, forms its next
// GLM_PMAX proposals into pts and pd, their count in *np_next (returns 1). Otherwise beta, the step dpend,
// the tuned width (warm-up) and the fallback count are written and stDone set.
template <typename T>
__device__ __forceinline__ int glm_decide(int first, bool entry, bool alone, const T* pts, T* pd,
                                          const double* tot, int np, T x0, T w, int J, int Jr, double eav, double P,
                                          double m, double cc, int max_out, int max_shrink, double& logy, T& a,
                                          T& b, T& xn, int& s, bool& done, T* __restrict__ beta,
                                          T* __restrict__ width, const long long* __restrict__ iters,
                                          long long n_warmup, int c, long long cg, long long CG, int K, int k,
                                          const T* __restrict__ us, T* __restrict__ stL, T* __restrict__ stR,
                                          double* __restrict__ stLogy, int* __restrict__ stS,
                                          int* __restrict__ stDone, T* __restrict__ dpend, int* __restrict__ fb,
                                          T* pts_next, int* np_next) {
    auto fval = [&](int p) {
        const double z = (double)pts[p] - m;
        return tot[p] - 0.5 * P * z * z - z * cc;
    };
    int off = 0, nshr = np;
    if (first) {
        logy = fval(0) - eav;
        int nl = 0, nr = 0;
        for (int j = 0; j < J; ++j) { if (fval(1 + j) > logy) { a = glm_sub(a, w); ++nl; } else break; }
        for (int j = 0; j < Jr; ++j) { if (fval(1 + J + j) > logy) { b = glm_add(b, w); ++nr; } else break; }
        off = max_out;
        nshr = (nl == 0 && nr == 0) ? np - max_out : 0;  // proposals on (L0, R0) apply only then
    } else if (entry) {  // a later pass, on entry: the stored state
        a = stL[cg]; b = stR[cg]; s = stS[cg]; logy = stLogy[cg];
    }
    for (int j = 0; j < nshr; ++j) {
        const T x = pts[off + j];
        ++s;
        if (fval(off + j) > logy) { xn = x; done = true; break; }
        if (x < x0) a = x;
        else b = x;
    }
    int more = 0;
    if (!done && s < max_shrink) {
        if (!alone) {  // left to the next pass
            stL[cg] = a; stR[cg] = b; stS[cg] = s; stLogy[cg] = logy; stDone[cg] = 0;
        } else {       // rare: this block goes on alone over the group's rows
            const int n = glm_shrink_points<T>(a, b, x0, s, GLM_PMAX, max_shrink, us + (long long)s * CG + cg, CG,
                                               pts_next);
            for (int p = 0; p < n; ++p) pd[p] = glm_sub(pts_next[p], x0);
            *np_next = n;
            more = 1;
        }
    } else {
        beta[cg * K + k] = xn;
        const T delta = glm_sub(xn, x0);
        dpend[cg] = delta;
        if (iters[c] < n_warmup) {
            const T ad = delta < T(0) ? -delta : delta;
            width[cg * K + k] = glm_add(glm_mul((T)0.9, w),
                                        glm_mul((T)0.1, glm_add(glm_mul((T)3.0, ad), glm_mul((T)1e-3, w))));
        }
        if (!done) fb[cg] += 1;
        stDone[cg] = 1;
    }
    return more;
}

template <typename T>
__global__ void __launch_bounds__(256, 2)
glm_slice_pass(const T* __restrict__ Xt, const T* __restrict__ y, T* __restrict__ eta, T* __restrict__ beta,
               T* __restrict__ width, const T* __restrict__ mu, const T* __restrict__ prec,
               const T* __restrict__ ea, const T* __restrict__ ua, const T* __restrict__ usa,
               const long long* __restrict__ starts, const long long* __restrict__ ends,
               const int* __restrict__ chunk_group, const int* __restrict__ chunk_first,
               const long long* __restrict__ iters, double* __restrict__ part, int* __restrict__ counter,
               T* __restrict__ stL, T* __restrict__ stR, double* __restrict__ stLogy, int* __restrict__ stS,
               int* __restrict__ stDone, T* __restrict__ dpend, int* __restrict__ fb, long long N,
               long long chunk_rows, int n_chunks, int G, int C, int K, int k, int kprev, int first,
               int max_out, int max_shrink, int d1, long long n_warmup, int family, double sigma) {
    __shared__ T pts[GLM_PMAX];
    __shared__ T pd[GLM_PMAX];
    __shared__ double wsum[GLM_WS_ROWS][GLM_PMAX];
    __shared__ double tot[GLM_PMAX];
    __shared__ T usv[GLM_PMAX];
    __shared__ int s_np, s_last, s_more;
    const int c = blockIdx.x / n_chunks, ch = blockIdx.x - c * n_chunks;
    if (c >= C) return;
    const int g = chunk_group[ch];
    const long long cg = (long long)c * G + g, CG = (long long)C * G;
    if (!first && stDone[cg]) return;  // the first pass settled this (chain, group)
    const int cf = chunk_first[g], nch = chunk_first[g + 1] - cf;
    const long long gs = starts[g], ge = ends[g];
    const long long r0 = min(ge, gs + (long long)(ch - cf) * chunk_rows), r1 = min(ge, r0 + chunk_rows);
    T* eta_c = eta + (long long)c * N;
    const T* xk = Xt + (long long)k * N;
    const T x0 = beta[cg * K + k], w = width[cg * K + k];
    const T* us = usa + (long long)k * max_shrink * CG;
    // Loads issued together here rather than one after another where they are used: this pass's
    // shrinkage uniforms (into shared memory), and for the decision the slice level's exponential and
    // the prior's diagonal.
    const int s0 = first ? 0 : stS[cg];
    const int n_u = first ? d1 : GLM_PMAX;
    if (threadIdx.x < n_u && s0 + (int)threadIdx.x < max_shrink)
        usv[threadIdx.x] = us[(long long)(s0 + threadIdx.x) * CG + cg];
    const double eav = (first && threadIdx.x == 0) ? (double)ea[(long long)k * CG + cg] : 0.0;
    const double P = (double)prec[((long long)c * K + k) * K + k], m = (double)mu[(long long)c * K + k];
    __syncthreads();
    // First pass: the stepping-out points and bracket, as every block of this (chain, group) forms them.
    T L0 = x0, R0 = x0;
    int J = 0, Jr = 0;
    if (first) glm_first_bracket<T>(ua, k, CG, cg, x0, w, max_out, L0, R0, J, Jr);
    if (threadIdx.x == 0)
        s_np = glm_pass_points<T>(first, x0, w, L0, R0, J, Jr, max_out, d1, max_shrink, stL, stR, cg, s0, usv, pts,
                                  pd);
    __syncthreads();
    int np = s_np;
    const T* xprev = (first && kprev >= 0) ? Xt + (long long)kprev * N : nullptr;
    const T dprev = xprev ? dpend[cg] : T(0);
    glm_slice_eval<T>(xk, y, eta_c, xprev, dprev, r0, r1, pd, np, family, sigma, wsum, tot);
    if (nch > 1) {
        if (!glm_chunk_total(part, counter, cg, c, ch, cf, nch, n_chunks, np, wsum, tot, &s_last)) return;
    }
    // The deciding block: the prior's cross term by warp 0, then thread 0 follows Neal's procedure over
    // the evaluated candidates.
    const double cc = glm_prior_cross<T>(beta, mu, prec, cg, c, K, k);
    double logy = 0.0;
    T a = L0, b = R0, xn = x0;
    int s = 0;
    bool done = false, entry = true;
    for (;;) {
        if (threadIdx.x == 0) {
            s_more = glm_decide<T>(first, entry, !first, pts, pd, tot, np, x0, w, J, Jr, eav, P, m, cc, max_out,
                                   max_shrink, logy, a, b, xn, s, done, beta, width, iters, n_warmup, c, cg, CG, K,
                                   k, us, stL, stR, stLogy, stS, stDone, dpend, fb, pts, &s_np);
            first = 0;
            entry = false;
        }
        __syncthreads();
        if (!s_more) break;
        np = s_np;
        glm_slice_eval<T>(xk, y, eta_c, nullptr, T(0), gs, ge, pd, np, family, sigma, wsum, tot);
    }
}

#ifndef __CUDACC_RTC__
#define GLM_PASS_INST(T)                                                                                        \
    template __global__ void glm_slice_pass<T>(                                                                 \
        const T*, const T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*, const long long*,     \
        const long long*, const int*, const int*, const long long*, double*, int*, T*, T*, double*, int*, int*, \
        T*, int*, long long, long long, int, int, int, int, int, int, int, int, int, int, long long, int, double);
GLM_PASS_INST(float)
GLM_PASS_INST(double)
#endif

// ---------------------------------------------------------------------------
// The rows split over devices (gpumcmc.models.glm.sharded.make_sharded_step, launched by ops.py's
// _ShardedPasses): glm_slice_pass with its decision taken out into a launch of its own, so that the
// candidates' sums over the rows can be all-reduced between the two. Per coordinate and pass, on every device: glm_slice_shard_eval (each of the device's
// shards evaluates the pass's candidates over its rows, as glm_slice_pass does, and the last block of a
// (chain, group) writes the sums over its chunks to sums (C, G, GLM_PMAX), zeros past the candidates),
// the all-reduce of sums, then glm_slice_decide (Neal's decisions from the summed candidates, a block
// per (chain, group)). Every device holds the same state (beta, width, the pass state) and decides from
// the same sums, so all take the same decisions with no broadcast and no host synchronisation. The
// deciding block never goes on alone (it holds none of the other devices' rows): shrinkage still open
// after a pass is left to the next, and the caller launches enough passes for max_shrink proposals
// (1 + ceil(max_shrink / GLM_PMAX); a pass whose (chain, group)s are all settled returns at once).

template <typename T>
__global__ void __launch_bounds__(256, 2)
glm_slice_shard_eval(const T* __restrict__ Xt, const T* __restrict__ y, T* __restrict__ eta,
                     const T* __restrict__ beta, const T* __restrict__ width, const T* __restrict__ ua,
                     const T* __restrict__ usa, const long long* __restrict__ starts,
                     const long long* __restrict__ ends, const int* __restrict__ chunk_group,
                     const int* __restrict__ chunk_first, double* __restrict__ part, int* __restrict__ counter,
                     const T* __restrict__ stL, const T* __restrict__ stR, const int* __restrict__ stS,
                     const int* __restrict__ stDone, const T* __restrict__ dpend, double* __restrict__ sums,
                     long long N, long long chunk_rows, int n_chunks, int G, int C, int K, int k, int kprev,
                     int first, int max_out, int max_shrink, int d1, int family, double sigma) {
    __shared__ T pts[GLM_PMAX];
    __shared__ T pd[GLM_PMAX];
    __shared__ double wsum[GLM_WS_ROWS][GLM_PMAX];
    __shared__ double tot[GLM_PMAX];
    __shared__ T usv[GLM_PMAX];
    __shared__ int s_np, s_last;
    const int c = blockIdx.x / n_chunks, ch = blockIdx.x - c * n_chunks;
    if (c >= C) return;
    const int g = chunk_group[ch];
    const long long cg = (long long)c * G + g, CG = (long long)C * G;
    const int cf = chunk_first[g], nch = chunk_first[g + 1] - cf;
    if (!first && stDone[cg]) {  // settled by an earlier pass: zeros for the all-reduce
        if (ch == cf && threadIdx.x < GLM_PMAX) sums[cg * GLM_PMAX + threadIdx.x] = 0.0;
        return;
    }
    const long long gs = starts[g], ge = ends[g];
    const long long r0 = min(ge, gs + (long long)(ch - cf) * chunk_rows), r1 = min(ge, r0 + chunk_rows);
    T* eta_c = eta + (long long)c * N;
    const T* xk = Xt + (long long)k * N;
    const T x0 = beta[cg * K + k], w = width[cg * K + k];
    const T* us = usa + (long long)k * max_shrink * CG;
    const int s0 = first ? 0 : stS[cg];
    const int n_u = first ? d1 : GLM_PMAX;
    if (threadIdx.x < n_u && s0 + (int)threadIdx.x < max_shrink)
        usv[threadIdx.x] = us[(long long)(s0 + threadIdx.x) * CG + cg];
    __syncthreads();
    T L0 = x0, R0 = x0;
    int J = 0, Jr = 0;
    if (first) glm_first_bracket<T>(ua, k, CG, cg, x0, w, max_out, L0, R0, J, Jr);
    if (threadIdx.x == 0)
        s_np = glm_pass_points<T>(first, x0, w, L0, R0, J, Jr, max_out, d1, max_shrink, stL, stR, cg, s0, usv, pts,
                                  pd);
    __syncthreads();
    const int np = s_np;
    const T* xprev = (first && kprev >= 0) ? Xt + (long long)kprev * N : nullptr;
    const T dprev = xprev ? dpend[cg] : T(0);
    glm_slice_eval<T>(xk, y, eta_c, xprev, dprev, r0, r1, pd, np, family, sigma, wsum, tot);
    if (nch > 1) {
        if (!glm_chunk_total(part, counter, cg, c, ch, cf, nch, n_chunks, np, wsum, tot, &s_last)) return;
    }
    if (threadIdx.x < GLM_PMAX) sums[cg * GLM_PMAX + threadIdx.x] = (int)threadIdx.x < np ? tot[threadIdx.x] : 0.0;
}

// Neal's decisions of one pass from the all-reduced sums (C, G, GLM_PMAX): a block of 32 threads per
// (chain, group), the candidates formed again as glm_slice_shard_eval formed them.
template <typename T>
__global__ void __launch_bounds__(32)
glm_slice_decide(T* __restrict__ beta, T* __restrict__ width, const T* __restrict__ mu,
                 const T* __restrict__ prec, const T* __restrict__ ea, const T* __restrict__ ua,
                 const T* __restrict__ usa, const long long* __restrict__ iters, const double* __restrict__ sums,
                 T* __restrict__ stL, T* __restrict__ stR, double* __restrict__ stLogy, int* __restrict__ stS,
                 int* __restrict__ stDone, T* __restrict__ dpend, int* __restrict__ fb, int G, int C, int K, int k,
                 int first, int max_out, int max_shrink, int d1, long long n_warmup) {
    __shared__ T pts[GLM_PMAX];
    __shared__ T pd[GLM_PMAX];
    __shared__ double tot[GLM_PMAX];
    __shared__ T usv[GLM_PMAX];
    const long long CG = (long long)C * G, cg = blockIdx.x;
    if (cg >= CG) return;
    if (!first && stDone[cg]) return;
    const int c = (int)(cg / G);
    const T x0 = beta[cg * K + k], w = width[cg * K + k];
    const T* us = usa + (long long)k * max_shrink * CG;
    const int s0 = first ? 0 : stS[cg];
    const int n_u = first ? d1 : GLM_PMAX;
    for (int t = threadIdx.x; t < GLM_PMAX; t += blockDim.x) {
        if (t < n_u && s0 + t < max_shrink) usv[t] = us[(long long)(s0 + t) * CG + cg];
        tot[t] = sums[cg * GLM_PMAX + t];
    }
    T L0 = x0, R0 = x0;
    int J = 0, Jr = 0;
    if (first) glm_first_bracket<T>(ua, k, CG, cg, x0, w, max_out, L0, R0, J, Jr);
    const double cc = glm_prior_cross<T>(beta, mu, prec, cg, c, K, k);
    __syncthreads();
    if (threadIdx.x == 0) {
        const int np = glm_pass_points<T>(first, x0, w, L0, R0, J, Jr, max_out, d1, max_shrink, stL, stR, cg, s0,
                                          usv, pts, pd);
        const double eav = first ? (double)ea[(long long)k * CG + cg] : 0.0;
        const double P = (double)prec[((long long)c * K + k) * K + k], m = (double)mu[(long long)c * K + k];
        double logy = 0.0;
        T a = L0, b = R0, xn = x0;
        int s = 0, np_next = 0;
        bool done = false;
        glm_decide<T>(first, true, false, pts, pd, tot, np, x0, w, J, Jr, eav, P, m, cc, max_out, max_shrink, logy,
                      a, b, xn, s, done, beta, width, iters, n_warmup, c, cg, CG, K, k, us, stL, stR, stLogy, stS,
                      stDone, dpend, fb, pts, &np_next);
    }
}

#ifndef __CUDACC_RTC__
#define GLM_SHARD_INST(T)                                                                                       \
    template __global__ void glm_slice_shard_eval<T>(                                                           \
        const T*, const T*, T*, const T*, const T*, const T*, const T*, const long long*, const long long*,     \
        const int*, const int*, double*, int*, const T*, const T*, const int*, const int*, const T*, double*,   \
        long long, long long, int, int, int, int, int, int, int, int, int, int, int, double);                   \
    template __global__ void glm_slice_decide<T>(T*, T*, const T*, const T*, const T*, const T*, const T*,       \
                                                 const long long*, const double*, T*, T*, double*, int*, int*,   \
                                                 T*, int*, int, int, int, int, int, int, int, int, long long);
GLM_SHARD_INST(float)
GLM_SHARD_INST(double)
#endif

// ---------------------------------------------------------------------------
// glm_niw: the hierarchical model's draw of (mu, Sigma) | beta from the normal-inverse-Wishart
// conditional, one block per chain, all in double, with no host round trip (gpumcmc/models/glm/ops.py's
// _niw_twin is the same algorithm on the host). Given the chain's group coefficients beta (G x K):
//   bbar, S: the groups' mean and scatter, in one pass over beta shifted by its first group (chunks of
//     GLM_NIW_CH groups staged in shared memory; thread per (i >= j) entry),
//   psi = psi0 + S + kappa0 G / (kappa0 + G) bbar bbar^T and its lower Cholesky factor C,
//   A the Bartlett factor (A_ii = sqrt(2 gam_i), A_ij = zn_ij below the diagonal),
//   M = C A^-T (so that Sigma = M M^T ~ InvWishart(nu0 + G, psi)) and Nn = C^-T A (Sigma^-1 = Nn Nn^T),
//   mu = G bbar / (kappa0 + G) + M z / sqrt(kappa0 + G).
// Shared memory: 4 K^2 + K + GLM_NIW_CH K doubles (the launcher checks that this fits).

#ifndef GLM_NIW_CH
#define GLM_NIW_CH 16
#endif

template <typename T>
__global__ void glm_niw(const T* __restrict__ beta, const double* __restrict__ psi0, const double* __restrict__ gam,
                        const double* __restrict__ zn, const double* __restrict__ z, int G, int K, double kappa0,
                        T* __restrict__ mu_out, T* __restrict__ prec_out, T* __restrict__ sigma_out) {
    extern __shared__ double glm_niw_s[];
    const int KK = K * K;
    double* P = glm_niw_s;  // scatter, then psi, then its Cholesky factor (lower triangle)
    double* A = P + KK;
    double* M = A + KK;
    double* Nn = M + KK;
    double* dsum = Nn + KK;  // K: sums of beta - beta[0]
    double* buf = dsum + K;  // GLM_NIW_CH x K
    const int c = blockIdx.x, tid = threadIdx.x, nt = blockDim.x;
    const T* b = beta + (size_t)c * G * K;
    const int npair = K * (K + 1) / 2;
    for (int j = tid; j < KK; j += nt) P[j] = 0.0;
    for (int j = tid; j < K; j += nt) dsum[j] = 0.0;
    __syncthreads();
    for (int g0 = 0; g0 < G; g0 += GLM_NIW_CH) {
        const int ng = min(GLM_NIW_CH, G - g0);
        for (int j = tid; j < ng * K; j += nt) buf[j] = (double)b[(size_t)g0 * K + j] - (double)b[j % K];
        __syncthreads();
        for (int p = tid; p < npair + K; p += nt) {
            if (p < npair) {  // entry (i, j), i >= j, of the lower triangle, row by row
                int i = (int)((sqrt(8.0 * p + 1.0) - 1.0) * 0.5);
                if (i * (i + 1) / 2 > p) --i;
                else if ((i + 1) * (i + 2) / 2 <= p) ++i;
                const int j = p - i * (i + 1) / 2;
                double s = 0.0;
                for (int g = 0; g < ng; ++g) s += buf[g * K + i] * buf[g * K + j];
                P[i * K + j] += s;
            } else {
                const int k = p - npair;
                double s = 0.0;
                for (int g = 0; g < ng; ++g) s += buf[g * K + k];
                dsum[k] += s;
            }
        }
        __syncthreads();
    }
    const double kn = kappa0 + (double)G, coef = kappa0 * (double)G / kn;
    // psi (lower triangle); dsum becomes bbar after every thread has read dsum
    for (int p = tid; p < KK; p += nt) {
        const int i = p / K, j = p - i * K;
        if (j <= i) {
            const double di = dsum[i] / G, dj = dsum[j] / G;
            const double bi = (double)b[i] + di, bj = (double)b[j] + dj;
            const double S = P[p] - (double)G * di * dj;
            P[p] = 0.5 * (psi0[p] + psi0[j * K + i]) + S + coef * bi * bj;
        }
        // the Bartlett factor
        A[p] = j < i ? zn[(size_t)c * KK + p] : (j == i ? sqrt(2.0 * gam[(size_t)c * K + i]) : 0.0);
    }
    __syncthreads();
    for (int k = tid; k < K; k += nt) dsum[k] = (double)b[k] + dsum[k] / G;  // bbar
    // Cholesky of psi in place (lower), column by column
    for (int j = 0; j < K; ++j) {
        if (tid == 0) P[j * K + j] = sqrt(P[j * K + j]);
        __syncthreads();
        for (int i = j + 1 + tid; i < K; i += nt) P[i * K + j] /= P[j * K + j];
        __syncthreads();
        const int m = K - j - 1;
        for (int q = tid; q < m * m; q += nt) {
            const int i = j + 1 + q / m, k = j + 1 + q % m;
            if (k <= i) P[i * K + k] -= P[i * K + j] * P[k * K + j];
        }
        __syncthreads();
    }
    // M (row r: A m = C[r, :]^T, forward) and Nn (column j: C^T n = A[:, j], backward)
    for (int t = tid; t < 2 * K; t += nt) {
        if (t < K) {
            const int r = t;
            for (int i = 0; i < K; ++i) {
                double s = i <= r ? P[r * K + i] : 0.0;
                for (int l = 0; l < i; ++l) s -= A[i * K + l] * M[r * K + l];
                M[r * K + i] = s / A[i * K + i];
            }
        } else {
            const int j = t - K;
            for (int i = K - 1; i >= 0; --i) {
                double s = A[i * K + j];
                for (int l = i + 1; l < K; ++l) s -= P[l * K + i] * Nn[l * K + j];
                Nn[i * K + j] = s / P[i * K + i];
            }
        }
    }
    __syncthreads();
    const double rk = 1.0 / sqrt(kn);
    for (int p = tid; p < KK + K; p += nt) {
        if (p < KK) {
            const int i = p / K, j = p - i * K;
            if (j <= i) {
                double s = 0.0, q = 0.0;
                for (int l = 0; l < K; ++l) {
                    s += M[i * K + l] * M[j * K + l];
                    q += Nn[i * K + l] * Nn[j * K + l];
                }
                const size_t o = (size_t)c * KK;
                sigma_out[o + i * K + j] = (T)s;
                sigma_out[o + j * K + i] = (T)s;
                prec_out[o + i * K + j] = (T)q;
                prec_out[o + j * K + i] = (T)q;
            }
        } else {
            const int i = p - KK;
            double s = 0.0;
            for (int l = 0; l < K; ++l) s += M[i * K + l] * z[(size_t)c * K + l];
            mu_out[(size_t)c * K + i] = (T)((double)G / kn * dsum[i] + s * rk);
        }
    }
}

#ifndef __CUDACC_RTC__
template __global__ void glm_niw<float>(const float*, const double*, const double*, const double*, const double*, int,
                                        int, double, float*, float*, float*);
template __global__ void glm_niw<double>(const double*, const double*, const double*, const double*, const double*,
                                         int, int, double, double*, double*, double*);
#endif
