// Fused GLM log-likelihood and gradient for a batch of chains, one pass over X.
//
// X is row-major (N, K); beta is (B, K); y, weights, offset are (N,) (weights
// and offset may be null). Each block takes a tile of GLM_TILE rows: a thread
// per row computes eta = offset + X[i,:] . beta[b,:] for every chain b, the
// row's log-likelihood and its derivative r = d loglik / d eta, and keeps r in
// shared memory; then the block reads the same rows of X again (from L1/L2)
// to add the tile's share of g[b,k] = sum_i r[b,i] X[i,k] to its own running
// sums in shared memory. Each block adds its sums to the double accumulators
// f (B,) and g (B, K) once, with atomics.
// family: 0 bernoulli (logit), 1 poisson (log), 2 gaussian (identity).

#ifndef GLM_TILE
#define GLM_TILE 128
#endif
#ifndef GLM_BCHUNK
#define GLM_BCHUNK 8
#endif

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

template <typename T>
__global__ void glm_fg(const T* __restrict__ X, const T* __restrict__ y, const T* __restrict__ w,
                       const T* __restrict__ off, const T* __restrict__ beta, long long N, int K, int B,
                       int bc, int family, double sigma, double* __restrict__ f, double* __restrict__ g) {
    // g_s: this block's running gradient for a chunk of bc <= GLM_BCHUNK chains (bc * K doubles), each
    // entry owned by one thread, so tiles add to it without atomics; one atomic per entry per block.
    extern __shared__ double g_s[];
    __shared__ double r_s[GLM_BCHUNK][GLM_TILE];
    __shared__ double l_s[GLM_BCHUNK][GLM_TILE];
    const long long n_tiles = (N + GLM_TILE - 1) / GLM_TILE;
    for (int b0 = 0; b0 < B; b0 += bc) {
        const int nb = min(bc, B - b0);
        const int work = nb * K;
        for (int j = threadIdx.x; j < work; j += blockDim.x) g_s[j] = 0.0;
        double facc = 0.0;
        __syncthreads();
        for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
            const long long row0 = tile * (long long)GLM_TILE;
            const int rows = (int)min((long long)GLM_TILE, N - row0);
            for (int t = threadIdx.x; t < GLM_TILE; t += blockDim.x) {
                const long long i = row0 + t;
                for (int bb = 0; bb < nb; ++bb) {
                    double r = 0.0, ll = 0.0;
                    if (t < rows) {
                        const T* xi = X + i * (long long)K;
                        const T* bt = beta + (long long)(b0 + bb) * K;
                        double eta = off ? (double)off[i] : 0.0;
                        for (int k = 0; k < K; ++k) eta += (double)xi[k] * (double)bt[k];
                        ll = glm_row<T>(family, eta, (double)y[i], sigma, &r);
                        const double wi = w ? (double)w[i] : 1.0;
                        r *= wi;
                        ll *= wi;
                    }
                    r_s[bb][t] = r;
                    l_s[bb][t] = ll;
                }
            }
            __syncthreads();
            for (int j = threadIdx.x; j < work; j += blockDim.x) {
                const int bb = j / K, k = j - bb * K;
                double acc = 0.0;
                for (int t = 0; t < rows; ++t) acc += r_s[bb][t] * (double)X[(row0 + t) * (long long)K + k];
                g_s[j] += acc;
            }
            if (threadIdx.x < nb)
                for (int t = 0; t < rows; ++t) facc += l_s[threadIdx.x][t];
            __syncthreads();
        }
        for (int j = threadIdx.x; j < work; j += blockDim.x) atomicAdd(&g[(long long)b0 * K + j], g_s[j]);
        if (threadIdx.x < nb) atomicAdd(&f[b0 + threadIdx.x], facc);
        __syncthreads();
    }
}

#ifndef __CUDACC_RTC__
template __global__ void glm_fg<float>(const float*, const float*, const float*, const float*, const float*,
                                       long long, int, int, int, int, double, double*, double*);
template __global__ void glm_fg<double>(const double*, const double*, const double*, const double*,
                                        const double*, long long, int, int, int, int, double, double*, double*);
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
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
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
