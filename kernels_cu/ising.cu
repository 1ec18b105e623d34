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
// per site), and a site turns up iff a 32-bit uniform integer U < T: no float
// conversion, no exp in the sweep.
//
// Random numbers ("batch RNG" of section 4.3.1, drawn in registers), 8 spins
// per Philox call: U = A 2^16 + B is compared in two halves. A, 16 bits, is
// half of a Philox word; only when A equals T's high half (probability 2^-16)
// is B, the low 16 bits, needed, and it comes from a second call. Since A and
// B are independent and uniform, P(U < T) = T / 2^32 exactly, as with one
// 32-bit word per spin, for half the Philox work.
// Layout: for colour c, site (i, j) has half-row index k = j / 2 and flat
// half-index f = i * Wh + k (Wh = ceil(W / 2)). Its A is half f % 2 (0: the
// low 16 bits) of word (f / 2) % 4 of the Philox call with counter index
// P = (chain * 2 + c) * G + f / 8 (G = ceil(L Wh / 8)) at the sweep's call
// offset; its B is the same half of the same word of the call with index
// P | 2^63. 3-D: rows r = d L + i take the place of i, and
// G = ceil(D L Wh / 8). Both kernels below use this layout, so the multispin
// and byte paths draw the same numbers for the same site and give identical
// states for one seed. Twin: gpumcmc/models/ising.py.
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
// The rare path of the multispin sweep (each site ties with probability
// 2^-16): redraw the two calls of the word and their low-half partners, and
// settle every nibble whose high half equals its threshold's. Out of line, so
// that it costs the common path no registers.
__device__ __noinline__ u64 settle_ties(u64 idx0, u64 sum, u64 word, const u32* thi, const u32* tlo, uint2 key,
                                       u32 off_lo, u32 off_hi) {
    for (int q = 0; q < 2; ++q) {
        const u64 idx = idx0 + q;
        const uint4 r = philox4x32_10(philox_counter(idx, off_lo, off_hi), key);
        const uint4 r2 = philox4x32_10(philox_counter(idx | (1ull << 63), off_lo, off_hi), key);
        const u32 w[4] = {r.x, r.y, r.z, r.w}, v[4] = {r2.x, r2.y, r2.z, r2.w};
#pragma unroll
        for (int b = 0; b < 8; ++b) {
            const int sh = 32 * q + 4 * b;
            const u32 n = (u32)(sum >> sh) & 15u;
            const u32 a = (b & 1) ? w[b >> 1] >> 16 : w[b >> 1] & 0xffffu;
            if (a == thi[n]) {
                const u32 lo = (b & 1) ? v[b >> 1] >> 16 : v[b >> 1] & 0xffffu;
                word = (word & ~(1ull << sh)) | ((u64)(lo < tlo[n] ? 1u : 0u) << sh);
            }
        }
    }
    return word;
}

#ifndef ISING_MIN_BLOCKS
#define ISING_MIN_BLOCKS 4  // blocks per SM the multispin sweep is compiled for (at most 64 registers)
#endif

template <bool OBS>
__global__ void __launch_bounds__(ISING_BLOCK, ISING_MIN_BLOCKS)
ising_multispin(u64* __restrict__ packed, const u32* __restrict__ thr, long long rows, long long words,
                int colour, u32 k0, u32 k1, u32 off_lo, u32 off_hi, u64* __restrict__ counts) {
    __shared__ u32 thi[5], tlo[5];  // high and low 16 bits of the thresholds
    if (threadIdx.x < 5) {
        thi[threadIdx.x] = thr[threadIdx.x] >> 16;
        tlo[threadIdx.x] = thr[threadIdx.x] & 0xffffu;
    }
    __syncthreads();
    const long long chain = blockIdx.y;
    const long long per = rows * words;  // words of one colour of one chain
    u64* __restrict__ mine = packed + (chain * 2 + colour) * per;
    const u64* __restrict__ other = packed + (chain * 2 + (1 - colour)) * per;
    const u64 gbase = (u64)(chain * 2 + colour) * (u64)(per * 2);  // 2 calls of 8 spins per word
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
        bool tie = false;
#pragma unroll
        for (int q = 0; q < 2; ++q) {  // nibbles 8q .. 8q + 7: half q of the word
            const uint4 r = philox4x32_10(philox_counter(gbase + (u64)x * 2 + q, off_lo, off_hi), key);
            const u32 w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
            for (int b = 0; b < 8; ++b) {  // compile-time after unrolling
                const int sh = 4 * b;
                const u32 a = (b & 1) ? w[b >> 1] >> 16 : w[b >> 1] & 0xffffu;
                const u32 th = thi[(half[q] >> sh) & 15u];
                out[q] |= (a < th ? 1u : 0u) << sh;
                tie |= a == th;
            }
        }
        u64 word = ((u64)out[1] << 32) | out[0];
        if (tie) word = settle_ties(gbase + (u64)x * 2, sum, word, thi, tlo, key, off_lo, off_hi);  // rare
        mine[x] = word;
        if (OBS) {
            int bw = 0;
#pragma unroll
            for (int b = 0; b < 16; ++b) {
                const int n = (int)((half[b >> 3] >> (4 * (b & 7))) & 15u);
                bw += (word >> (4 * b)) & 1u ? (2 * n - 4) : (4 - 2 * n);
            }
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
    const long long G = (R * Wh + 7) / 8;
    const u64 gbase = (u64)(chain * 2 + colour) * (u64)G;
    const uint2 key = make_uint2(k0, k1);
    long long up = 0, bond = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const bool small = 8 * (G + stride) < 0xffffffffLL;
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < G; g += stride) {
        const uint4 r = philox4x32_10(philox_counter(gbase + (u64)g, off_lo, off_hi), key);
        const u32 w[4] = {r.x, r.y, r.z, r.w};
        uint4 r2;
        bool have_low = false;
#pragma unroll
        for (int e = 0; e < 8; ++e) {
            const long long f = 8 * g + e;
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
            const u32 T = thr[site * thr_stride + idx];
            const u32 a = (e & 1) ? w[e >> 1] >> 16 : w[e >> 1] & 0xffffu;
            bool turn_up = a < (T >> 16);
            if (a == (T >> 16)) {  // rare: the low 16 bits settle it
                if (!have_low) {
                    r2 = philox4x32_10(philox_counter((gbase + (u64)g) | (1ull << 63), off_lo, off_hi), key);
                    have_low = true;
                }
                const u32 v2[4] = {r2.x, r2.y, r2.z, r2.w};
                const u32 lo = (e & 1) ? v2[e >> 1] >> 16 : v2[e >> 1] & 0xffffu;
                turn_up = lo < (T & 0xffffu);
            }
            const int v = turn_up ? 1 : -1;
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
