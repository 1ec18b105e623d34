// Nested sampling: the sinusoid-atoms likelihood of Henderson's tutorial for a
// whole batch of parameter points in one launch, its fused constrained step,
// and the run's per-iteration pieces (nested_progress, nested_argsort_rows).
// The partner of gpumcmc/models/nested/: ops.py launches each kernel beside
// its NumPy twin, algorithm.py is the iteration that uses them.
//
//   ssq[p] += sum_i (sum_j A_pj cos(2 pi f_pj t_i) + B_pj sin(2 pi f_pj t_i) - y_i)^2
//
// Grid: blockIdx.x walks chunks of the data (grid-stride over chunks of
// blockDim.x * GPUMCMC_NESTED_ITEMS points), blockIdx.y walks the parameter
// points (grid-stride). Each block sums its chunk in double, reduces in shared
// memory and adds its partial sum to ssq[p] with one atomicAdd, so ssq must
// be zeroed before the launch. The phase is computed with sincospi(2 f t).
// No random numbers. Twin: SinusoidModel.loglike's array expression over
// tiles (sinusoid_loglike_tiles in gpumcmc/models/nested/ops.py).
#ifndef GPUMCMC_NESTED_BLOCK
#define GPUMCMC_NESTED_BLOCK 256
#endif
#ifndef GPUMCMC_NESTED_ITEMS
#define GPUMCMC_NESTED_ITEMS 8
#endif
#ifndef GPUMCMC_NESTED_MAX_ATOMS
#define GPUMCMC_NESTED_MAX_ATOMS 32
#endif

template <typename T>
__device__ __forceinline__ void sincospi_t(T x, T* s, T* c);

template <>
__device__ __forceinline__ void sincospi_t<float>(float x, float* s, float* c) { sincospif(x, s, c); }

template <>
__device__ __forceinline__ void sincospi_t<double>(double x, double* s, double* c) { sincospi(x, s, c); }

// params: (n_points, n_atoms, 3) contiguous, (A, B, f) per atom.
template <typename T>
__global__ void __launch_bounds__(GPUMCMC_NESTED_BLOCK)
sinusoid_ssq(const T* __restrict__ params, const T* __restrict__ t, const T* __restrict__ y,
             long long n_points, int n_atoms, long long n_data, double* __restrict__ ssq) {
    __shared__ double part[GPUMCMC_NESTED_BLOCK];
    __shared__ T pa[GPUMCMC_NESTED_MAX_ATOMS], pb[GPUMCMC_NESTED_MAX_ATOMS], pf[GPUMCMC_NESTED_MAX_ATOMS];
    const long long chunk = (long long)blockDim.x * GPUMCMC_NESTED_ITEMS;
    const long long n_chunks = (n_data + chunk - 1) / chunk;
    const int J = n_atoms < GPUMCMC_NESTED_MAX_ATOMS ? n_atoms : GPUMCMC_NESTED_MAX_ATOMS;
    for (long long p = blockIdx.y; p < n_points; p += gridDim.y) {
        __syncthreads();  // the previous point's parameters and partial sums are no longer read
        for (int j = threadIdx.x; j < J; j += blockDim.x) {
            const long long base = (p * n_atoms + j) * 3;
            pa[j] = params[base];
            pb[j] = params[base + 1];
            pf[j] = (T)2 * params[base + 2];
        }
        __syncthreads();
        for (long long c = blockIdx.x; c < n_chunks; c += gridDim.x) {
            double acc = 0.0;
            const long long start = c * chunk;
            for (int k = 0; k < GPUMCMC_NESTED_ITEMS; ++k) {
                const long long i = start + (long long)k * blockDim.x + threadIdx.x;
                if (i < n_data) {
                    const T ti = t[i];
                    T m = (T)0;
                    for (int j = 0; j < J; ++j) {
                        T s, co;
                        sincospi_t<T>(pf[j] * ti, &s, &co);
                        m += pa[j] * co + pb[j] * s;
                    }
                    const double r = (double)m - (double)y[i];
                    acc += r * r;
                }
            }
            part[threadIdx.x] = acc;
            __syncthreads();
            for (int w = blockDim.x / 2; w > 0; w >>= 1) {
                if (threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
                __syncthreads();
            }
            if (threadIdx.x == 0) atomicAdd(&ssq[p], part[0]);
            __syncthreads();
        }
    }
}


// ---------------------------------------------------------------------------
// The fused constrained step: one block per walker runs all n_steps slices of
// its new point, proposals, prior transform and likelihood included, so an
// iteration of nested sampling is one launch whatever the number of shrinkage
// rounds. Twin: the generic slice path (_NestedSteps._slice_generic in
// gpumcmc/models/nested/algorithm.py) with SinusoidModel.loglike, which consumes the same directions and uniforms:
//
//   slice i:  lo = -unif[i][0][w], hi = lo + 1
//   round k:  t = lo + (hi - lo) * unif[i][k + 1][w];  x' = x + t * dirs[i][w]
//             accept if x' is inside the unit cube and logL(x') > lstar[w];
//             else shrink (lo = t if t < 0, hi = t otherwise) and go on;
//             after max_shrink misses the walker stays where it is.
//
// dirs: (n_steps, n_walkers, ndim) in the unit cube; unif: (n_steps,
// max_shrink + 1, n_walkers). u, v, logl are read as the starts and
// overwritten with the new points; nrej counts misses and neval the
// likelihood evaluations (proposals outside the cube are not evaluated).
// Block: any multiple of 32 up to 1024 threads; the data are read with a
// block-stride loop and the sum of squares is reduced in double.
#ifndef GPUMCMC_NESTED_MAX_DIM
#define GPUMCMC_NESTED_MAX_DIM (3 * GPUMCMC_NESTED_MAX_ATOMS)
#endif

__device__ __forceinline__ double warp_sum_d(double x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

template <typename T>
__global__ void __launch_bounds__(1024)
sinusoid_slice(double* __restrict__ u, double* __restrict__ v, double* __restrict__ logl,
               const double* __restrict__ lstar, const double* __restrict__ dirs, const double* __restrict__ unif,
               const T* __restrict__ t, const T* __restrict__ y, long long n_data, int n_walkers, int n_atoms,
               int n_steps, int max_shrink, double amin, double amax, double fmin, double fmax, int ordered,
               double lconst, double sigma2, int* __restrict__ nrej, int* __restrict__ neval) {
    __shared__ double x[GPUMCMC_NESTED_MAX_DIM], xv[GPUMCMC_NESTED_MAX_DIM];
    __shared__ double px[GPUMCMC_NESTED_MAX_DIM], pv[GPUMCMC_NESTED_MAX_DIM];
    __shared__ T pa[GPUMCMC_NESTED_MAX_ATOMS], pb[GPUMCMC_NESTED_MAX_ATOMS], pf[GPUMCMC_NESTED_MAX_ATOMS];
    __shared__ double red[32];
    __shared__ int s_inside, s_done;
    const int J = n_atoms < GPUMCMC_NESTED_MAX_ATOMS ? n_atoms : GPUMCMC_NESTED_MAX_ATOMS;
    const int d = 3 * J;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, n_warps = (blockDim.x + 31) >> 5;
    for (int w = blockIdx.x; w < n_walkers; w += gridDim.x) {
        __syncthreads();  // the previous walker's shared state is no longer read
        for (int j = tid; j < d; j += blockDim.x) {
            x[j] = u[(long long)w * d + j];
            xv[j] = v[(long long)w * d + j];
        }
        double cur = logl[w];  // meaningful in thread 0 only
        const double ls = lstar[w];
        int misses = 0, evals = 0;
        __syncthreads();
        for (int i = 0; i < n_steps; ++i) {
            const double* dir = dirs + ((long long)i * n_walkers + w) * d;
            const double* un = unif + (long long)i * (max_shrink + 1) * n_walkers + w;
            double lo = -un[0];
            double hi = 1.0 + lo;
            for (int k = 0; k < max_shrink; ++k) {
                double tt = 0.0;
                if (tid == 0) {
                    tt = lo + (hi - lo) * un[(long long)(k + 1) * n_walkers];
                    int inside = 1;
                    for (int j = 0; j < d; ++j) {
                        const double q = x[j] + tt * dir[j];
                        px[j] = q;
                        inside &= (q > 0.0) & (q < 1.0);
                    }
                    if (inside) {  // the prior transform of SinusoidModel.prior_transform
                        double s = 1.0;
                        for (int j = J - 1; j >= 0; --j) {
                            const double a = amin + (amax - amin) * px[3 * j];
                            const double b = amin + (amax - amin) * px[3 * j + 1];
                            double uf = px[3 * j + 2];
                            if (ordered && J > 1) {
                                s = (j == J - 1) ? pow(uf, 1.0 / J) : s * pow(uf, 1.0 / (j + 1));
                                uf = s;
                            }
                            const double f = fmin + (fmax - fmin) * uf;
                            pv[3 * j] = a;
                            pv[3 * j + 1] = b;
                            pv[3 * j + 2] = f;
                            pa[j] = (T)a;
                            pb[j] = (T)b;
                            pf[j] = (T)2 * (T)f;
                        }
                    }
                    s_inside = inside;
                }
                __syncthreads();  // A: the proposal is in shared memory
                const int inside = s_inside;
                double acc = 0.0;
                if (inside) {
                    for (long long n = tid; n < n_data; n += blockDim.x) {
                        const T ti = t[n];
                        T m = (T)0;
                        for (int j = 0; j < J; ++j) {
                            T sn, cs;
                            sincospi_t<T>(pf[j] * ti, &sn, &cs);
                            m += pa[j] * cs + pb[j] * sn;
                        }
                        const double r = (double)m - (double)y[n];
                        acc += r * r;
                    }
                    acc = warp_sum_d(acc);
                    if (lane == 0) red[warp] = acc;
                }
                __syncthreads();  // B: the partial sums are in shared memory
                if (tid == 0) {
                    int ok = 0;
                    if (inside) {
                        double ssq = 0.0;
                        for (int q = 0; q < n_warps; ++q) ssq += red[q];
                        const double ll = lconst - 0.5 * ssq / sigma2;
                        ++evals;
                        if (ll > ls) {
                            ok = 1;
                            cur = ll;
                            for (int j = 0; j < d; ++j) {
                                x[j] = px[j];
                                xv[j] = pv[j];
                            }
                        }
                    }
                    if (!ok) {
                        ++misses;
                        if (tt < 0.0) lo = tt; else hi = tt;
                    }
                    s_done = ok;
                }
                __syncthreads();  // C: the decision is in shared memory
                if (s_done) break;
            }
        }
        __syncthreads();
        for (int j = tid; j < d; j += blockDim.x) {
            u[(long long)w * d + j] = x[j];
            v[(long long)w * d + j] = xv[j];
        }
        if (tid == 0) {
            logl[w] = cur;
            nrej[w] = misses;
            neval[w] = evals;
        }
    }
}

// ---------------------------------------------------------------------------
// The run's bookkeeping after an iteration, in one launch: each run's evidence
// takes the R points just removed, and the stopping value of every run is
// reduced to its worst, written with the run's NaN/+inf flag into a slot of
// mapped host memory that the host reads check_lag iterations later (after an
// event, so no copy and no wait of its own). Twin: _NumpyProgress.push in
// gpumcmc/models/nested/ops.py:
//
//   lw_r    = dead[m][r] + (logx + offs[r])              (r < R)
//   logz[m] = logaddexp(logz[m], logsumexp_r lw_r)       (all -inf: unchanged)
//   out[0]  = max_m  logaddexp(logz[m], max_n live[m][n] + logx_next) - logz[m]
//   out[1]  = *fine (1 while no likelihood was NaN or +inf)
//
// One block; warp w takes runs w, w + n_warps, ... NaN propagates through the
// maxima as in NumPy's max.
__device__ __forceinline__ double nan_max(double a, double b) { return (a > b || a != a) ? a : b; }

// -inf without math headers (NVRTC defines no INFINITY)
__device__ __forceinline__ double nested_neg_inf() { return __longlong_as_double(0xfff0000000000000ll); }

__device__ __forceinline__ double log_add_exp(double x, double y) {  // NumPy's npy_logaddexp
    if (x == y) return x + 0.693147180559945309417232121458176568;
    const double d = x - y;
    if (d > 0) return x + log1p(exp(-d));
    if (d <= 0) return y + log1p(exp(d));
    return d;  // NaN
}

__device__ __forceinline__ double warp_max_nan(double x) {
    for (int o = 16; o > 0; o >>= 1) x = nan_max(x, __shfl_xor_sync(0xffffffffu, x, o));
    return x;
}

extern "C" __global__ void __launch_bounds__(1024)
nested_progress(const double* __restrict__ dead, const double* __restrict__ offs, const double* __restrict__ live,
                double* __restrict__ logz, const bool* __restrict__ fine, double logx, double logx_next,
                int n_runs, int n_dead, int n_live, double* __restrict__ out) {
    __shared__ double worst[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
    double mine = nested_neg_inf();  // this warp's worst stopping value
    for (int m = warp; m < n_runs; m += n_warps) {
        double mx = nested_neg_inf();
        for (int r = lane; r < n_dead; r += 32) mx = nan_max(mx, dead[(long long)m * n_dead + r] + (logx + offs[r]));
        mx = warp_max_nan(mx);
        const double shift = isfinite(mx) ? mx : 0.0;
        double sum = 0.0;
        for (int r = lane; r < n_dead; r += 32) sum += exp(dead[(long long)m * n_dead + r] + (logx + offs[r]) - shift);
        sum = warp_sum_d(sum);
        double top = nested_neg_inf();
        for (int n = lane; n < n_live; n += 32) top = nan_max(top, live[(long long)m * n_live + n]);
        top = warp_max_nan(top);
        if (lane == 0) {
            const double z = log_add_exp(logz[m], log(sum) + shift);
            logz[m] = z;
            mine = nan_max(mine, log_add_exp(z, top + logx_next) - z);
        }
    }
    if (lane == 0) worst[warp] = mine;
    __syncthreads();
    if (threadIdx.x == 0) {
        double w = nested_neg_inf();
        for (int q = 0; q < n_warps; ++q) w = nan_max(w, worst[q]);
        out[0] = w;
        out[1] = *fine ? 1.0 : 0.0;
    }
}

// ---------------------------------------------------------------------------
// The order of each run's live points by log-likelihood, in one launch with no
// wait: the rank of x[i] in its row is the number of x[j] before it, where
//   j is before i  <=>  x[j] < x[i], or x[j] == x[i] and j < i   (NaN last,
//                       NaNs among themselves by index)
// which is the order of cupy.argsort (a stable sort, NaN last), so
// order[m][rank(i)] = i is the same permutation. cupy.argsort sorts with
// Thrust's blocking policy, which waits for the stream to drain at each call.
// One block per row (grid-stride); the row is read through shared memory in
// tiles of blockDim.x values; O(n^2) comparisons per row.
extern "C" __global__ void __launch_bounds__(1024)
nested_argsort_rows(const double* __restrict__ x, int n_rows, int n, long long* __restrict__ order) {
    __shared__ double tile[1024];
    for (int m = blockIdx.x; m < n_rows; m += gridDim.x) {
        const double* row = x + (long long)m * n;
        for (int i0 = 0; i0 < n; i0 += blockDim.x) {
            const int i = i0 + threadIdx.x;
            const double xi = i < n ? row[i] : 0.0;
            const bool nan_i = xi != xi;
            int rank = 0;
            for (int j0 = 0; j0 < n; j0 += blockDim.x) {
                __syncthreads();  // the previous tile is no longer read
                if (j0 + (int)threadIdx.x < n) tile[threadIdx.x] = row[j0 + threadIdx.x];
                __syncthreads();
                const int jn = min((int)blockDim.x, n - j0);
                if (i < n) {
                    for (int jj = 0; jj < jn; ++jj) {
                        const double xj = tile[jj];
                        const int j = j0 + jj;
                        const bool nan_j = xj != xj;
                        rank += nan_i ? (!nan_j || j < i) : (!nan_j && (xj < xi || (xj == xi && j < i)));
                    }
                }
            }
            if (i < n) order[(long long)m * n + rank] = i;
        }
    }
}

// ---------------------------------------------------------------------------
// The shrinkage rounds of the generic slice step (_NestedSteps._slice_masked in
// gpumcmc/models/nested/algorithm.py), for a likelihood the host evaluates
// between launches: every walker keeps its own slice i and round k, so a
// walker that has found its point goes on to its next slice at once instead of
// waiting for the slowest walker of the slice (the rounds of a step are the
// most any walker needs in all, not the sum over slices of the most any walker
// needs in each). A walker's draws are those of the compacting loop
// (_slice_generic): the same directions and uniforms, in the same order:
//
//   slice i starts:  lo = -unif[i][0][w], hi = 1 + lo
//   round k:         t = lo + (hi - lo) * unif[i][k + 1][w];  x' = x + t * dirs[i][w]
//                    inside = every coordinate in (0, 1); the likelihood is
//                    evaluated at clip(x', 1e-12, 1 - 1e-12) (prior transform v')
//   after it:        l = inside ? pl : -inf;  accept if l > lstar[w]
//                    (x = x', v = v', logl = l, next slice); else nrej += 1,
//                    lo = t if t < 0, hi = t if t >= 0, and after max_shrink
//                    misses the next slice (the walker stays where it is).
//
// The arithmetic is written with __dadd_rn / __dsub_rn / __dmul_rn so that no
// multiply-add is contracted: every value is the NumPy expression's, bit for
// bit. A walker is active while slice[w] < n_steps; an inactive walker's row
// of uc is its current point (a valid point for the likelihood, whose value is
// not read) and nothing of its state changes. Twin: _NumpyOps.slice_start /
// slice_round in gpumcmc/models/nested/ops.py. One thread a walker
// (grid-stride).
__device__ __forceinline__ double nested_pos_inf() { return __longlong_as_double(0x7ff0000000000000ll); }

__device__ __forceinline__ double nested_clip(double q) {  // numpy.clip(q, 1e-12, 1 - 1e-12), NaN kept
    const double a = 1e-12, b = 1.0 - 1e-12;
    return q < a ? a : (q > b ? b : q);
}

// The proposal of walker w's current round into prop, uc, tt and inside.
__device__ __forceinline__ void nested_slice_propose(int w, const double* __restrict__ u,
                                                     const double* __restrict__ dirs,
                                                     const double* __restrict__ unif, const double* __restrict__ lo,
                                                     const double* __restrict__ hi, const int* __restrict__ slice,
                                                     const int* __restrict__ shrink, double* __restrict__ prop,
                                                     double* uc, double* __restrict__ tt,
                                                     int* __restrict__ inside, int n_walkers, int ndim, int n_steps,
                                                     int max_shrink) {
    const long long row = (long long)w * ndim;
    const int i = slice[w];
    if (i < n_steps) {
        const double un = unif[((long long)i * (max_shrink + 1) + shrink[w] + 1) * n_walkers + w];
        const double t = __dadd_rn(lo[w], __dmul_rn(__dsub_rn(hi[w], lo[w]), un));
        const double* dir = dirs + ((long long)i * n_walkers + w) * ndim;
        int in = 1;
        for (int j = 0; j < ndim; ++j) {
            const double q = __dadd_rn(u[row + j], __dmul_rn(t, dir[j]));
            prop[row + j] = q;
            uc[row + j] = nested_clip(q);
            in &= (q > 0.0) & (q < 1.0);
        }
        tt[w] = t;
        inside[w] = in;
    } else {
        for (int j = 0; j < ndim; ++j) {
            prop[row + j] = u[row + j];
            uc[row + j] = nested_clip(u[row + j]);
        }
        tt[w] = 0.0;
        inside[w] = 0;
    }
}

// A step's start: the walkers' states from their starts (u0, v0, l0), slice 0,
// and the first proposals.
extern "C" __global__ void __launch_bounds__(256)
nested_slice_start(const double* __restrict__ u0, const double* __restrict__ v0, const double* __restrict__ l0,
                   double* __restrict__ u, double* __restrict__ v, double* __restrict__ logl,
                   const double* __restrict__ dirs, const double* __restrict__ unif, double* __restrict__ prop,
                   double* __restrict__ uc, double* __restrict__ tt, int* __restrict__ inside,
                   double* __restrict__ lo, double* __restrict__ hi, int* __restrict__ slice,
                   int* __restrict__ shrink, double* __restrict__ nrej, int n_walkers, int ndim, int n_steps,
                   int max_shrink) {
    for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < n_walkers; w += gridDim.x * blockDim.x) {
        const long long row = (long long)w * ndim;
        for (int j = 0; j < ndim; ++j) {
            u[row + j] = u0[row + j];
            v[row + j] = v0[row + j];
        }
        logl[w] = l0[w];
        nrej[w] = 0.0;
        slice[w] = 0;
        shrink[w] = 0;
        const double a = -unif[w];
        lo[w] = a;
        hi[w] = __dadd_rn(1.0, a);
        nested_slice_propose(w, u, dirs, unif, lo, hi, slice, shrink, prop, uc, tt, inside, n_walkers, ndim,
                             n_steps, max_shrink);
    }
}

// A round: the likelihoods pl (n_walkers,) of the points v' = pv (n_walkers,
// ndim) the host evaluated at uc, taken by each active walker as above, then
// the next proposals (pv may be uc itself, for an identity prior transform:
// neither is __restrict__, and a walker reads its row of pv before it writes
// its row of uc). The evaluations of active walkers are added to *ncall;
// *fine turns false when an active walker's inside value is NaN or +inf.
// The last block to finish (sync: two zeroed counters, left zeroed) writes
// (ticket << 1) | (any walker still active) to *word, a word of mapped host
// memory that the host polls, so that it learns when a step is done without
// a wait of its own.
extern "C" __global__ void __launch_bounds__(256)
nested_slice_round(double* __restrict__ u, double* __restrict__ v, double* __restrict__ logl,
                   const double* __restrict__ lstar, const double* __restrict__ dirs,
                   const double* __restrict__ unif, const double* pv, const double* __restrict__ pl,
                   double* __restrict__ prop, double* uc, double* __restrict__ tt,
                   int* __restrict__ inside, double* __restrict__ lo, double* __restrict__ hi,
                   int* __restrict__ slice, int* __restrict__ shrink, double* __restrict__ nrej,
                   bool* __restrict__ fine, long long* __restrict__ ncall, unsigned int* __restrict__ sync,
                   unsigned long long* __restrict__ word, unsigned long long ticket, int n_walkers, int ndim,
                   int n_steps, int max_shrink) {
    __shared__ unsigned int s_eval;
    __shared__ bool s_last;
    if (threadIdx.x == 0) s_eval = 0u;
    __syncthreads();
    unsigned int evaluated = 0u;
    int live = 0, bad = 0;
    for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < n_walkers; w += gridDim.x * blockDim.x) {
        int i = slice[w];
        if (i < n_steps) {
            ++evaluated;
            const long long row = (long long)w * ndim;
            const double l = inside[w] ? pl[w] : -nested_pos_inf();
            bad |= !(l < nested_pos_inf());
            if (l > lstar[w]) {
                for (int j = 0; j < ndim; ++j) {
                    u[row + j] = prop[row + j];
                    v[row + j] = pv[row + j];
                }
                logl[w] = l;
                ++i;
            } else {
                const double t = tt[w];
                if (t < 0.0) lo[w] = t;
                else if (t >= 0.0) hi[w] = t;
                nrej[w] += 1.0;
                const int k = shrink[w] + 1;
                if (k < max_shrink) shrink[w] = k;
                else ++i;
            }
            if (i != slice[w]) {
                slice[w] = i;
                shrink[w] = 0;
                if (i < n_steps) {
                    const double a = -unif[(long long)i * (max_shrink + 1) * n_walkers + w];
                    lo[w] = a;
                    hi[w] = __dadd_rn(1.0, a);
                }
            }
            live |= i < n_steps;
        }
        nested_slice_propose(w, u, dirs, unif, lo, hi, slice, shrink, prop, uc, tt, inside, n_walkers, ndim,
                             n_steps, max_shrink);
    }
    if (evaluated) atomicAdd(&s_eval, evaluated);
    const int any_bad = __syncthreads_or(bad);
    const int any_live = __syncthreads_or(live);  // also orders s_eval's additions before its read
    if (threadIdx.x == 0) {
        if (any_bad) *fine = false;
        if (s_eval) atomicAdd(reinterpret_cast<unsigned long long*>(ncall), (unsigned long long)s_eval);
        if (any_live) atomicOr(&sync[1], 1u);
        __threadfence();  // this block's flag before its count
        s_last = atomicAdd(&sync[0], 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (s_last && threadIdx.x == 0) {  // every other block has added its flag
        const unsigned int a = atomicExch(&sync[1], 0u);
        atomicExch(&sync[0], 0u);
        *reinterpret_cast<volatile unsigned long long*>(word) = (ticket << 1) | (a ? 1ull : 0ull);
    }
}

#ifndef __CUDACC_RTC__
template __global__ void sinusoid_ssq<float>(const float*, const float*, const float*, long long, int, long long,
                                             double*);
template __global__ void sinusoid_ssq<double>(const double*, const double*, const double*, long long, int,
                                              long long, double*);
template __global__ void sinusoid_slice<float>(double*, double*, double*, const double*, const double*,
                                               const double*, const float*, const float*, long long, int, int,
                                               int, int, double, double, double, double, int, double, double, int*,
                                               int*);
template __global__ void sinusoid_slice<double>(double*, double*, double*, const double*, const double*,
                                                const double*, const double*, const double*, long long, int, int,
                                                int, int, double, double, double, double, int, double, double,
                                                int*, int*);
#endif
