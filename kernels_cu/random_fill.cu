// Fills with uniform and standard normal variates, and the raw Philox
// primitive. Each thread takes one Philox block at a time (grid-stride), so
// element i always comes from block i / P whatever the launch shape.
//
//   dtype    uniform              normal                        exponential
//   float    4 per block (u01_f32) 4 per block: two Box-Muller     4 per block: -log of
//                                  pairs on 32-bit uniforms,     32-bit uniforms, in
//                                  computed in float64           float64
//   double   2 per block (u01_f64) 2 per block: one Box-Muller   2 per block: -log of
//                                  pair on 52-bit uniforms       52-bit uniforms
//
// Twin: gpumcmc/random/_fill.py.
#include "philox.cuh"

#ifndef GPUMCMC_FILL_BLOCK
#define GPUMCMC_FILL_BLOCK 256
#endif

using namespace gpumcmc;

// Element i of a fill comes from Philox block i / P: `values(w)` turns the
// block's words into a float4 (float) or a double2 (double), stored with one
// 16-byte write where the block lies inside the output.
template <typename T, typename F>
__device__ __forceinline__ void fill_blocks(T* __restrict__ out, long long n, unsigned int k0, unsigned int k1,
                                            unsigned int off_lo, unsigned int off_hi, F values) {
    constexpr int P = sizeof(T) == 4 ? 4 : 2;
    const long long nb = (n + P - 1) / P;
    const uint2 key = make_uint2(k0, k1);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < nb; b += stride) {
        const auto v = values(philox4x32_10(philox_counter(b, off_lo, off_hi), key));
        const long long i = b * P;
        if constexpr (P == 4) {
            if (i + 4 <= n) {
                reinterpret_cast<float4*>(out)[b] = v;
            } else {
                out[i] = v.x;
                if (i + 1 < n) out[i + 1] = v.y;
                if (i + 2 < n) out[i + 2] = v.z;
            }
        } else {
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
fill_uniform(T* __restrict__ out, long long n, unsigned int k0, unsigned int k1,
             unsigned int off_lo, unsigned int off_hi, const unsigned long long* __restrict__ off_dev) {
    offset_from_device(off_dev, off_lo, off_hi);
    fill_blocks(out, n, k0, k1, off_lo, off_hi, [](uint4 w) {
        if constexpr (sizeof(T) == 4) {
            return make_float4(u01_f32(w.x), u01_f32(w.y), u01_f32(w.z), u01_f32(w.w));
        } else {
            return make_double2(u01_f64(w.x, w.y), u01_f64(w.z, w.w));
        }
    });
}

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_FILL_BLOCK)
fill_normal(T* __restrict__ out, long long n, unsigned int k0, unsigned int k1,
            unsigned int off_lo, unsigned int off_hi, const unsigned long long* __restrict__ off_dev) {
    offset_from_device(off_dev, off_lo, off_hi);
    fill_blocks(out, n, k0, k1, off_lo, off_hi, [](uint4 w) {
        if constexpr (sizeof(T) == 4) {
            // float64 inside, one rounding at the end: the CPU twin does the
            // same, so the two agree to within one float32 ulp.
            double z0, z1, z2, z3;
            box_muller(u01_f64_from32(w.x), u01_f64_from32(w.y), z0, z1);
            box_muller(u01_f64_from32(w.z), u01_f64_from32(w.w), z2, z3);
            return make_float4((float)z0, (float)z1, (float)z2, (float)z3);
        } else {
            double z0, z1;
            box_muller(u01_f64(w.x, w.y), u01_f64(w.z, w.w), z0, z1);
            return make_double2(z0, z1);
        }
    });
}

// Standard exponentials -log(u): float32 from 32-bit uniforms in float64,
// rounded once (as the normal fill); float64 from 52-bit uniforms.
template <typename T>
__global__ void __launch_bounds__(GPUMCMC_FILL_BLOCK)
fill_exponential(T* __restrict__ out, long long n, unsigned int k0, unsigned int k1,
                 unsigned int off_lo, unsigned int off_hi, const unsigned long long* __restrict__ off_dev) {
    offset_from_device(off_dev, off_lo, off_hi);
    fill_blocks(out, n, k0, k1, off_lo, off_hi, [](uint4 w) {
        if constexpr (sizeof(T) == 4) {
            return make_float4((float)-log(u01_f64_from32(w.x)), (float)-log(u01_f64_from32(w.y)),
                               (float)-log(u01_f64_from32(w.z)), (float)-log(u01_f64_from32(w.w)));
        } else {
            return make_double2(-log(u01_f64(w.x, w.y)), -log(u01_f64(w.z, w.w)));
        }
    });
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
template __global__ void fill_uniform<float>(float*, long long, unsigned int, unsigned int, unsigned int, unsigned int,
                                             const unsigned long long*);
template __global__ void fill_uniform<double>(double*, long long, unsigned int, unsigned int, unsigned int, unsigned int,
                                             const unsigned long long*);
template __global__ void fill_normal<float>(float*, long long, unsigned int, unsigned int, unsigned int, unsigned int,
                                             const unsigned long long*);
template __global__ void fill_normal<double>(double*, long long, unsigned int, unsigned int, unsigned int, unsigned int,
                                             const unsigned long long*);
template __global__ void fill_exponential<float>(float*, long long, unsigned int, unsigned int, unsigned int, unsigned int,
                                             const unsigned long long*);
template __global__ void fill_exponential<double>(double*, long long, unsigned int, unsigned int, unsigned int, unsigned int,
                                             const unsigned long long*);
#endif
