// Fills with uniform and standard normal variates, and the raw Philox
// primitive. Each thread takes one Philox block at a time (grid-stride), so
// element i always comes from block i / P whatever the launch shape.
//
//   dtype    uniform              normal
//   float    4 per block (u01_f32) 4 per block: two Box-Muller pairs on
//                                  32-bit uniforms, computed in float64
//   double   2 per block (u01_f64) 2 per block: one Box-Muller pair on
//                                  52-bit uniforms
//
// Twin: gpumcmc/random/_fill.py.
#include "philox.cuh"

#ifndef GPUMCMC_FILL_BLOCK
#define GPUMCMC_FILL_BLOCK 256
#endif

using namespace gpumcmc;

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_FILL_BLOCK)
fill_uniform(T* __restrict__ out, long long n, unsigned int k0, unsigned int k1,
             unsigned int off_lo, unsigned int off_hi) {
    constexpr int P = sizeof(T) == 4 ? 4 : 2;
    const long long nb = (n + P - 1) / P;
    const uint2 key = make_uint2(k0, k1);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += stride) {
        const uint4 w = philox4x32_10(philox_counter(b, off_lo, off_hi), key);
        const long long i = b * P;
        if constexpr (P == 4) {
            const float4 v = make_float4(u01_f32(w.x), u01_f32(w.y), u01_f32(w.z), u01_f32(w.w));
            if (i + 4 <= n) {
                reinterpret_cast<float4*>(out)[b] = v;
            } else {
                out[i] = v.x;
                if (i + 1 < n) out[i + 1] = v.y;
                if (i + 2 < n) out[i + 2] = v.z;
            }
        } else {
            const double2 v = make_double2(u01_f64(w.x, w.y), u01_f64(w.z, w.w));
            if (i + 2 <= n) {
                reinterpret_cast<double2*>(out)[b] = v;
            } else {
                out[i] = v.x;
            }
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_FILL_BLOCK)
fill_normal(T* __restrict__ out, long long n, unsigned int k0, unsigned int k1,
            unsigned int off_lo, unsigned int off_hi) {
    constexpr int P = sizeof(T) == 4 ? 4 : 2;
    const long long nb = (n + P - 1) / P;
    const uint2 key = make_uint2(k0, k1);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += stride) {
        const uint4 w = philox4x32_10(philox_counter(b, off_lo, off_hi), key);
        const long long i = b * P;
        if constexpr (P == 4) {
            // float64 inside, one rounding at the end: the CPU twin does the
            // same, so the two agree to within one float32 ulp.
            double z0, z1, z2, z3;
            box_muller(u01_f64_from32(w.x), u01_f64_from32(w.y), z0, z1);
            box_muller(u01_f64_from32(w.z), u01_f64_from32(w.w), z2, z3);
            const float4 v = make_float4((float)z0, (float)z1, (float)z2, (float)z3);
            if (i + 4 <= n) {
                reinterpret_cast<float4*>(out)[b] = v;
            } else {
                out[i] = v.x;
                if (i + 1 < n) out[i + 1] = v.y;
                if (i + 2 < n) out[i + 2] = v.z;
            }
        } else {
            double z0, z1;
            box_muller(u01_f64(w.x, w.y), u01_f64(w.z, w.w), z0, z1);
            if (i + 2 <= n) {
                reinterpret_cast<double2*>(out)[b] = make_double2(z0, z1);
            } else {
                out[i] = z0;
            }
        }
    }
}

// out[i, :] = philox4x32_10(ctr[i, :], key[i, :]) for n rows.
extern "C" __global__ void philox_words(const uint4* __restrict__ ctr, const uint2* __restrict__ key,
                                        uint4* __restrict__ out, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        out[i] = philox4x32_10(ctr[i], key[i]);
    }
}

#ifndef __CUDACC_RTC__
// Offline builds (nvcc in CI) instantiate the templates so that their bodies
// are compiled; at run time NVRTC instantiates them through name_expressions.
template __global__ void fill_uniform<float>(float*, long long, unsigned int, unsigned int, unsigned int, unsigned int);
template __global__ void fill_uniform<double>(double*, long long, unsigned int, unsigned int, unsigned int, unsigned int);
template __global__ void fill_normal<float>(float*, long long, unsigned int, unsigned int, unsigned int, unsigned int);
template __global__ void fill_normal<double>(double*, long long, unsigned int, unsigned int, unsigned int, unsigned int);
#endif
