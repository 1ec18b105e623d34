// Reductions across the lanes of a warp by butterfly (__shfl_xor_sync)
// shuffles: every lane of the group ends with the result. Shared by the
// kernels that reduce per warp (gamma.cu's row normalisation, ising.cu's
// block counts, rbm.cu's dot products).
#pragma once

namespace gpumcmc {

// The sum over all 32 lanes (every lane must call it).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The sum and the maximum over the G lanes of a group (G a power of two
// <= 32, groups aligned to G lanes); `mask` holds exactly those lanes
// (group_mask gives it).
template <typename T>
__device__ __forceinline__ T group_sum(T v, int G, unsigned int mask) {
    for (int o = G >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(mask, v, o);
    return v;
}

template <typename T>
__device__ __forceinline__ T group_max(T v, int G, unsigned int mask) {
    for (int o = G >> 1; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(mask, v, o));
    return v;
}

__device__ __forceinline__ unsigned int group_mask(int G) {
    const int lane = threadIdx.x & 31;
    return G == 32 ? 0xffffffffu : ((1u << G) - 1u) << (lane & ~(G - 1));
}

}  // namespace gpumcmc
