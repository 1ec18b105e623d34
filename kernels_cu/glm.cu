// Fused GLM log-likelihood and gradient for a batch of chains, one pass over X.
//
// X is row-major (N, K); beta is (B, K); y, weights, offset are (N,) (weights
// and offset may be null). Each block takes a tile of GLM_TILE rows: a thread
// per row computes eta = offset + X[i,:] . beta[b,:] for every chain b, the
// row's log-likelihood and its derivative r = d loglik / d eta, and keeps r in
// shared memory; then the block reads the same rows of X again (from L1/L2)
// to form the tile's share of g[b,k] = sum_i r[b,i] X[i,k]. Partial sums go to
// double accumulators f (B,) and g (B, K) with atomics.
// family: 0 bernoulli (logit), 1 poisson (log), 2 gaussian (identity).

#ifndef GLM_TILE
#define GLM_TILE 128
#endif
#ifndef GLM_BCHUNK
#define GLM_BCHUNK 16
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
                       int family, double sigma, double* __restrict__ f, double* __restrict__ g) {
    __shared__ double r_s[GLM_BCHUNK][GLM_TILE];
    __shared__ double f_s[GLM_BCHUNK];
    const long long n_tiles = (N + GLM_TILE - 1) / GLM_TILE;
    for (long long tile = blockIdx.x; tile < n_tiles; tile += gridDim.x) {
        const long long row0 = tile * (long long)GLM_TILE;
        const int rows = (int)min((long long)GLM_TILE, N - row0);
        for (int b0 = 0; b0 < B; b0 += GLM_BCHUNK) {
            const int nb = min(GLM_BCHUNK, B - b0);
            if (threadIdx.x < GLM_BCHUNK) f_s[threadIdx.x] = 0.0;
            __syncthreads();
            for (int t = threadIdx.x; t < GLM_TILE; t += blockDim.x) {
                const long long i = row0 + t;
                for (int bb = 0; bb < nb; ++bb) {
                    double r = 0.0;
                    if (t < rows) {
                        const T* xi = X + i * (long long)K;
                        const T* bt = beta + (long long)(b0 + bb) * K;
                        double eta = off ? (double)off[i] : 0.0;
                        for (int k = 0; k < K; ++k) eta += (double)xi[k] * (double)bt[k];
                        double ll = glm_row<T>(family, eta, (double)y[i], sigma, &r);
                        double wi = w ? (double)w[i] : 1.0;
                        r *= wi;
                        atomicAdd(&f_s[bb], wi * ll);
                    }
                    r_s[bb][t] = r;
                }
            }
            __syncthreads();
            const int work = nb * K;
            for (int j = threadIdx.x; j < work; j += blockDim.x) {
                const int bb = j / K, k = j - bb * K;
                double acc = 0.0;
                for (int t = 0; t < rows; ++t) acc += r_s[bb][t] * (double)X[(row0 + t) * (long long)K + k];
                atomicAdd(&g[(long long)(b0 + bb) * K + k], acc);
            }
            if (threadIdx.x < nb) atomicAdd(&f[b0 + threadIdx.x], f_s[threadIdx.x]);
            __syncthreads();
        }
    }
}

#ifndef __CUDACC_RTC__
template __global__ void glm_fg<float>(const float*, const float*, const float*, const float*, const float*,
                                       long long, int, int, int, double, double*, double*);
template __global__ void glm_fg<double>(const double*, const double*, const double*, const double*,
                                        const double*, long long, int, int, int, double, double*, double*);
#endif
