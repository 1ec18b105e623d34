// Heat-bath checkerboard sweeps of the 2-D Ising model (and, one byte per
// spin, the 3-D one; Mahani & Sharabiani, section 4.3): the sites of one colour of the checkerboard are independent
// given the other colour, so one launch updates all of them, for every chain
// (blockIdx.y is the chain).
//
// Heat bath: a site with neighbour sum S (sum of the +-1 neighbours, missing
// neighbours count 0) and field h turns up with probability
//     p = 1 / (1 + exp(-2 beta (J S + h))),
// whatever its old value. The host precomputes p as a 32-bit threshold
// T = round(p 2^32) for each S in -6..6 (and each site, when the field varies
// per site), and a site turns up iff its raw Philox word w < T: no float
// conversion, no exp in the sweep.
//
// Random numbers ("batch RNG" of section 4.3.1, drawn in registers): for
// colour c, site (i, j) has half-row index k = j / 2 and flat half-index
// f = i * Wh + k (Wh = ceil(W / 2)). Its uniform is word f % 4 of the Philox
// call with counter index (chain * 2 + c) * G + f / 4 (G = ceil(L Wh / 4)) at
// the sweep's call offset (3-D: rows r = d L + i take the place of i, and
// G = ceil(D L Wh / 4)). Both kernels below use this layout, so the
// multispin and byte paths draw the same word for the same site and give
// identical states for one seed. Twin: gpumcmc/models/ising.py.
//
// Observables without a second pass (the "differential update" of section
// 4.3.3 turned into a by-product of the sweep): each pass adds the number of
// up spins it wrote to counts[chain][0]; the second pass (c = 1) also adds
// sum_i s_i S_i over its sites, which, since every bond joins the two colours,
// is the whole bond sum sum_<ij> s_i s_j of the state after the sweep.
#include "philox.cuh"

#ifndef ISING_BLOCK
#define ISING_BLOCK 256
#endif

using namespace gpumcmc;
typedef unsigned long long u64;
typedef unsigned int u32;

// a / b for 0 <= a, 0 < b; 32-bit division (a few instructions, against ~70 for
// 64-bit) when the caller knows a < 2^32.
__device__ __forceinline__ long long div_index(long long a, long long b, bool small) {
    return small ? (long long)((u32)a / (u32)b) : a / b;
}

// Adds a and b of every thread of the block to out[0] and out[1]; every
// thread of the block must call it.
__device__ __forceinline__ void block_add2(long long a, long long b, u64* out) {
    __shared__ long long sa[ISING_BLOCK / 32], sb[ISING_BLOCK / 32];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        a += __shfl_down_sync(0xffffffffu, a, o);
        b += __shfl_down_sync(0xffffffffu, b, o);
    }
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) {
        sa[wid] = a;
        sb[wid] = b;
    }
    __syncthreads();
    if (wid == 0) {
        a = lane < (int)(blockDim.x >> 5) ? sa[lane] : 0;
        b = lane < (int)(blockDim.x >> 5) ? sb[lane] : 0;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            a += __shfl_down_sync(0xffffffffu, a, o);
            b += __shfl_down_sync(0xffffffffu, b, o);
        }
        if (lane == 0) {
            if (a) atomicAdd(out, (u64)a);
            if (b) atomicAdd(out + 1, (u64)b);
        }
    }
}

// Multispin coding (as in NVIDIA's ising-gpu): each colour is a half lattice
// of L rows by Wh = W / 2 sites, 16 sites per 64-bit word, 4 bits per site
// holding 1 (up) or 0 (down); site k of a half row is nibble k % 16 of word
// k / 16. Adding four neighbour words adds 16 neighbour counts at once
// (each at most 4, so no nibble overflows).
//
// packed: (chains, 2, rows, words) u64, colour c at [chain][c]; words = Wh/16.
// thr: 5 thresholds, by the number of up neighbours n (S = 2n - 4).
// Periodic boundaries; rows even, W a multiple of 32 (checked on the host).
template <bool OBS>
__global__ void __launch_bounds__(ISING_BLOCK)
ising_multispin(u64* __restrict__ packed, const u32* __restrict__ thr, long long rows, long long words,
                int colour, u32 k0, u32 k1, u32 off_lo, u32 off_hi, u64* __restrict__ counts) {
    __shared__ u32 t[5];
    if (threadIdx.x < 5) t[threadIdx.x] = thr[threadIdx.x];
    __syncthreads();
    const long long chain = blockIdx.y;
    const long long per = rows * words;  // words of one colour of one chain
    u64* __restrict__ mine = packed + (chain * 2 + colour) * per;
    const u64* __restrict__ other = packed + (chain * 2 + (1 - colour)) * per;
    const u64 gbase = (u64)(chain * 2 + colour) * (u64)(per * 4);
    const uint2 key = make_uint2(k0, k1);
    long long up = 0, bond = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const bool small = per + stride < 0xffffffffLL;
    for (long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x; x < per; x += stride) {
        const long long i = div_index(x, words, small);
        const long long m = x - i * words;
        const long long iu = i == 0 ? rows - 1 : i - 1;
        const long long id = i == rows - 1 ? 0 : i + 1;
        const u64 c = other[i * words + m];
        u64 side;
        if (((i + colour) & 1) == 0) {  // left neighbour: half-site k - 1 of the other colour
            const long long ml = m == 0 ? words - 1 : m - 1;
            side = (c << 4) | (other[i * words + ml] >> 60);
        } else {  // right neighbour: half-site k + 1
            const long long mr = m == words - 1 ? 0 : m + 1;
            side = (c >> 4) | (other[i * words + mr] << 60);
        }
        const u64 sum = c + side + other[iu * words + m] + other[id * words + m];
        // Nibbles 0-7 live in the low half, 8-15 in the high half: work on
        // 32-bit halves (a 64-bit shift or OR costs two instructions).
        const u32 half[2] = {(u32)sum, (u32)(sum >> 32)};
        u32 out[2] = {0u, 0u};
        int bw = 0;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const uint4 r = philox4x32_10(philox_counter(gbase + (u64)x * 4 + q, off_lo, off_hi), key);
            const u32 w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int b = 4 * q + e;  // compile-time after unrolling
                const int h = b >> 3, sh = 4 * (b & 7);
                const u32 n = (half[h] >> sh) & 15u;
                const u32 bit = w[e] < t[n] ? 1u : 0u;
                out[h] |= bit << sh;
                if (OBS) bw += bit ? (2 * (int)n - 4) : (4 - 2 * (int)n);
            }
        }
        const u64 word = ((u64)out[1] << 32) | out[0];
        mine[x] = word;
        if (OBS) {
            up += __popcll(word);
            bond += bw;
        }
    }
    if (OBS) block_add2(up, colour == 1 ? bond : 0, counts + 2 * chain);
}

// One byte per spin (+1 / -1), row-major (chains, D, L, W): D = 1 for the
// square lattice, D > 1 for the simple cubic one (6 neighbours). Any field per
// site. The colour of site (d, i, j) is (d + i + j) & 1; rows r = d L + i are
// laid out as in the 2-D case, with the row's parity (d + i) & 1.
// thr: 13 thresholds by S + 6 for each site, site (d, i, j) at
// thr + ((d L + i) W + j) * thr_stride (thr_stride = 0: one row for every
// site). periodic = 0: open boundaries (missing neighbours add 0 to S; any
// sides); 1: periodic (every side of more than one site even).
// by_pattern = 1 (couplings per bond, 2-D only): thr holds 16 thresholds per
// site, by the pattern of up neighbours (bit 0 up, 1 down, 2 left, 3 right);
// a missing neighbour reads as down and its coupling is 0 in the table.
template <bool OBS>
__global__ void __launch_bounds__(ISING_BLOCK)
ising_bytes(signed char* __restrict__ spins, const u32* __restrict__ thr, long long thr_stride, int by_pattern,
            long long D, long long L, long long W, int periodic, int colour, u32 k0, u32 k1, u32 off_lo,
            u32 off_hi, u64* __restrict__ counts) {
    const long long chain = blockIdx.y;
    const long long plane = L * W;
    signed char* __restrict__ s = spins + chain * D * plane;
    const long long R = D * L;
    const long long Wh = (W + 1) / 2;
    const long long G = (R * Wh + 3) / 4;
    const u64 gbase = (u64)(chain * 2 + colour) * (u64)G;
    const uint2 key = make_uint2(k0, k1);
    long long up = 0, bond = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const bool small = 4 * (G + stride) < 0xffffffffLL;
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < G; g += stride) {
        const uint4 r = philox4x32_10(philox_counter(gbase + (u64)g, off_lo, off_hi), key);
        const u32 w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const long long f = 4 * g + e;
            const long long row = div_index(f, Wh, small);
            if (row >= R) break;
            const long long d = D == 1 ? 0 : div_index(row, L, small);
            const long long i = row - d * L;
            const long long j = 2 * (f - row * Wh) + ((d + i + colour) & 1);
            if (j >= W) continue;
            const signed char* p = s + d * plane;
            int nu, nd, nl, nr, S;  // neighbour spins (0 where missing) and their sum
            if (periodic) {
                const long long iu = i == 0 ? L - 1 : i - 1, id = i == L - 1 ? 0 : i + 1;
                const long long jl = j == 0 ? W - 1 : j - 1, jr = j == W - 1 ? 0 : j + 1;
                nu = p[iu * W + j];
                nd = p[id * W + j];
                nl = p[i * W + jl];
                nr = p[i * W + jr];
                S = nu + nd + nl + nr;
                if (D > 1) {
                    const long long du = d == 0 ? D - 1 : d - 1, dd = d == D - 1 ? 0 : d + 1;
                    S += s[du * plane + i * W + j] + s[dd * plane + i * W + j];
                }
            } else {
                nu = i > 0 ? p[(i - 1) * W + j] : 0;
                nd = i < L - 1 ? p[(i + 1) * W + j] : 0;
                nl = j > 0 ? p[i * W + j - 1] : 0;
                nr = j < W - 1 ? p[i * W + j + 1] : 0;
                S = nu + nd + nl + nr;
                if (D > 1) S += (d > 0 ? s[(d - 1) * plane + i * W + j] : 0) +
                                (d < D - 1 ? s[(d + 1) * plane + i * W + j] : 0);
            }
            // by S + 6, or (couplings per bond, 2-D) by which of the up, down,
            // left and right neighbours are +1 (bits 0..3)
            const int idx = by_pattern ? (nu > 0) | (nd > 0) << 1 | (nl > 0) << 2 | (nr > 0) << 3 : S + 6;
            const long long site = row * W + j;
            const int v = w[e] < thr[site * thr_stride + idx] ? 1 : -1;
            s[site] = (signed char)v;
            if (OBS) {
                up += v > 0;
                bond += v * S;
            }
        }
    }
    if (OBS) block_add2(up, colour == 1 ? bond : 0, counts + 2 * chain);
}

#ifndef __CUDACC_RTC__
template __global__ void ising_multispin<true>(u64*, const u32*, long long, long long, int, u32, u32, u32, u32,
                                               u64*);
template __global__ void ising_multispin<false>(u64*, const u32*, long long, long long, int, u32, u32, u32, u32,
                                                u64*);
template __global__ void ising_bytes<true>(signed char*, const u32*, long long, int, long long, long long, long long,
                                           int, int, u32, u32, u32, u32, u64*);
template __global__ void ising_bytes<false>(signed char*, const u32*, long long, int, long long, long long, long long,
                                            int, int, u32, u32, u32, u32, u64*);
#endif
