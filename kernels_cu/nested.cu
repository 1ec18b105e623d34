// Nested sampling: the sinusoid-atoms likelihood of Henderson's tutorial for a
// whole batch of parameter points in one launch.
//
//   ssq[p] += sum_i (sum_j A_pj cos(2 pi f_pj t_i) + B_pj sin(2 pi f_pj t_i) - y_i)^2
//
// Grid: blockIdx.x walks chunks of the data (grid-stride over chunks of
// blockDim.x * GPUMCMC_NESTED_ITEMS points), blockIdx.y walks the parameter
// points (grid-stride). Each block sums its chunk in double, reduces in shared
// memory and adds its partial sum to ssq[p] with one atomicAdd, so ssq must
// be zeroed before the launch. The phase is computed with sincospi(2 f t).
// No random numbers. Twin: SinusoidModel.loglike's array expression in
// gpumcmc/nested.py.
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

#ifndef __CUDACC_RTC__
template __global__ void sinusoid_ssq<float>(const float*, const float*, const float*, long long, int, long long,
                                             double*);
template __global__ void sinusoid_ssq<double>(const double*, const double*, const double*, long long, int,
                                              long long, double*);
#endif
