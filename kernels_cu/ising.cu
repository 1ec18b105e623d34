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
// states for one seed. Twin: gpumcmc/models/ising/ops.py.
//
// Observables without a second pass (the "differential update" of section
// 4.3.3 turned into a by-product of the sweep): the byte kernel's passes each
// add the number of up spins they wrote to counts[chain][0]; the second pass
// (c = 1) also adds sum_i s_i S_i over its sites, which, since every bond joins
// the two colours, is the whole bond sum sum_<ij> s_i s_j of the state after
// the sweep. The multispin kernel counts everything in its second pass alone,
// whose threads read every word of the first colour once (as the word beside
// their own), so its first pass runs without observables. counts may point
// into a per-sweep slot of a longer buffer: the kernels only add to it.
#include "philox.cuh"
#include "warp_reduce.cuh"

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
    a = gpumcmc::warp_sum(a);
    b = gpumcmc::warp_sum(b);
    const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (lane == 0) {
        sa[wid] = a;
        sb[wid] = b;
    }
    __syncthreads();
    if (wid == 0) {
        a = lane < (int)(blockDim.x >> 5) ? sa[lane] : 0;
        b = lane < (int)(blockDim.x >> 5) ? sb[lane] : 0;
        a = gpumcmc::warp_sum(a);
        b = gpumcmc::warp_sum(b);
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

// Byte permutation with the PRMT sign mode: selector nibble i picks byte
// (nibble & 7) of {b, a} (a = bytes 0-3) for byte i of the result, and bit 3
// of the nibble fills that byte with the picked byte's top bit. (__byte_perm
// masks bit 3 off, at the cost of an extra instruction.) Only the low 16 bits
// of sel are read.
__device__ __forceinline__ u32 prmt(u32 a, u32 b, u32 sel) {
    u32 d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

// Adds the two 16-bit halves of a and b separately, modulo 2^16 (no carry from
// the low half into the high one): one instruction on sm_90 and later.
__device__ __forceinline__ u32 add16x2(u32 a, u32 b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    u32 d;
    asm("add.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
#else
    return ((a & 0x7fff7fffu) + (b & 0x7fff7fffu)) ^ ((a ^ b) & 0x80008000u);
#endif
}

// Per-block constants of the multispin fast path, written to shared memory by
// thread 0 and read from there (into uniform registers) before the loop, so
// that the compiler does not recompute them inside it.
//
// Philox: every call of the fast path has the counter (lo, hi, off_lo, off_hi)
// with only lo varying, so the parts of rounds 0-2 without lo are constants:
// with P:Q = M1 off_lo and A:B = M0 x1 (high:low words),
//   round 0 gives x1 = P ^ hi ^ k0, y1 = Q, z1 = hi(M0 lo) ^ (off_hi ^ k1), w1 = lo(M0 lo),
//   round 1 gives x2 = hi(M1 z1) ^ (Q ^ k0'), y2 = lo(M1 z1), z2 = w1 ^ (A ^ k1'), w2 = B,
//   round 2 uses w2 ^ k1'' = B ^ k1'',
// (k', k'': the round keys of rounds 1, 2); rounds 3-9 are the usual ones.
// Thresholds: nt[n] = 0xffff - thi[n] (n = 0..4), split into bytes so that
// PRMT can gather them by the neighbour counts of a sum word: byte n of
// {lb, la} is the low byte of nt[n], byte n of {hb, ha} its high byte.
struct MsConsts {
    u32 kx[10], ky[10];             // round keys: k0 + r W0, k1 + r W1
    u32 x1, z1k, y1k, z2k, w2k;     // x1, off_hi ^ k1, Q ^ k0', A ^ k1', B ^ k1''
    u32 la, lb, ha, hb;
};

__device__ __forceinline__ void ms_consts(MsConsts& c, uint2 key, u32 hi, u32 off_lo, u32 off_hi, const u32* thi) {
    for (int r = 0; r < 10; ++r) {
        c.kx[r] = key.x + (u32)r * GPUMCMC_PHILOX_W0;
        c.ky[r] = key.y + (u32)r * GPUMCMC_PHILOX_W1;
    }
    const u32 P = __umulhi(GPUMCMC_PHILOX_M1, off_lo), Q = GPUMCMC_PHILOX_M1 * off_lo;
    c.x1 = P ^ hi ^ c.kx[0];
    c.z1k = off_hi ^ c.ky[0];
    c.y1k = Q ^ c.kx[1];
    c.z2k = __umulhi(GPUMCMC_PHILOX_M0, c.x1) ^ c.ky[1];
    c.w2k = (GPUMCMC_PHILOX_M0 * c.x1) ^ c.ky[2];
    c.la = c.lb = c.ha = c.hb = 0u;
    for (int n = 0; n < 5; ++n) {
        const u32 nt = ~thi[n] & 0xffffu;
        if (n < 4) {
            c.la |= (nt & 0xffu) << (8 * n);
            c.ha |= (nt >> 8) << (8 * n);
        } else {
            c.lb = nt & 0xffu;
            c.hb = nt >> 8;
        }
    }
}

// philox4x32_10(make_uint4(lo, hi, off_lo, off_hi), key) for the hi, off and
// key that c was made with: the same ten rounds, the constant parts taken
// from c (see MsConsts).
__device__ __forceinline__ uint4 ms_philox(u32 lo, const MsConsts& c) {
    const u64 p = (u64)GPUMCMC_PHILOX_M0 * lo;  // round 0
    const u32 z1 = (u32)(p >> 32) ^ c.z1k, w1 = (u32)p;
    const u64 q = (u64)GPUMCMC_PHILOX_M1 * z1;  // round 1 (w2 = B, folded into w2k)
    uint4 s = make_uint4((u32)(q >> 32) ^ c.y1k, (u32)q, w1 ^ c.z2k, 0u);
    {  // round 2
        const u64 p0 = (u64)GPUMCMC_PHILOX_M0 * s.x, p1 = (u64)GPUMCMC_PHILOX_M1 * s.z;
        s = make_uint4((u32)(p1 >> 32) ^ s.y ^ c.kx[2], (u32)p1, (u32)(p0 >> 32) ^ c.w2k, (u32)p0);
    }
#pragma unroll
    for (int r = 3; r < 10; ++r) {
        const u64 p0 = (u64)GPUMCMC_PHILOX_M0 * s.x, p1 = (u64)GPUMCMC_PHILOX_M1 * s.z;
        s = make_uint4((u32)(p1 >> 32) ^ s.y ^ c.kx[r], (u32)p1, (u32)(p0 >> 32) ^ s.w ^ c.ky[r], (u32)p0);
    }
    return s;
}

// The heat-bath bits of the 8 sites of one 32-bit half of a word: h holds
// their neighbour counts n (nibbles, each 0..4), r the Philox call whose word
// b / 2 gives site b its 16-bit A (low half for even b). Returns bit 4b set iff
// A <= thi[n] of site b, and raises the 16-bit lanes of tmax to at least
// A + nt[n] mod 2^16 of each site.
//
// Why this is the multispin rule: with nt = 0xffff - thi, A + nt carries out of
// 16 bits iff A > thi, and A + nt = 0xffff (mod 2^16) iff A == thi. So a lane of
// tmax reaches 0xffff iff some site ties; the caller then settles the ties from
// the low halves, overwriting their bits, and every other site gets A <= thi,
// which there equals A < thi.
//
// How: PRMT with the counts as selector gathers the low and the high bytes of
// nt[n] for 4 sites at once, and a second PRMT pairs them up as the 16-bit
// lanes that match the two halves of each Philox word. s = A + nt per lane
// (no carry between lanes). The carry out of a lane's top bit is that bit of
// A where A and nt agree on it, else the complement of s's top bit (the carry
// into it), so one LOP3 of A, nt and s yields at bits 15 and 31 the flags
// "no carry" = A <= thi. PRMT with sign replication turns those bits into byte
// masks, and two more PRMTs sort them into even and odd sites; the last LOP3
// keeps bit 0 of each byte from the even sites and bit 4 from the odd ones.
// All of it is exact: checked against A <= thi and A == thi for every pair of
// 16-bit A and thi at each of the 8 site positions.
__device__ __forceinline__ u32 ms_half(u32 h, uint4 r, const MsConsts& c, u32& tmax) {
    const u32 h47 = __umulhi(h, 0x10000u);  // h >> 16, counts of sites 4-7 (on the multiply pipe)
    const u32 l03 = prmt(c.la, c.lb, h), h03 = prmt(c.ha, c.hb, h);
    const u32 l47 = prmt(c.la, c.lb, h47), h47b = prmt(c.ha, c.hb, h47);
    const u32 a[4] = {r.x, r.y, r.z, r.w};
    const u32 nt[4] = {prmt(l03, h03, 0x5140u), prmt(l03, h03, 0x7362u), prmt(l47, h47b, 0x5140u),
                       prmt(l47, h47b, 0x7362u)};
    u32 s[4], g[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        s[j] = add16x2(a[j], nt[j]);
        g[j] = ((a[j] ^ nt[j]) & s[j]) | (~a[j] & ~nt[j]);  // bits 15, 31: A <= thi of sites 2j, 2j + 1
    }
    tmax = __vimax3_u16x2(tmax, s[0], s[1]);
    tmax = __vimax3_u16x2(tmax, s[2], s[3]);
    const u32 x01 = prmt(g[0], g[1], 0xfbd9u);  // byte masks of sites 0, 2, 1, 3
    const u32 x23 = prmt(g[2], g[3], 0xfbd9u);  // of sites 4, 6, 5, 7
    const u32 even = prmt(x01, x23, 0x5410u), odd = prmt(x01, x23, 0x7632u);
    return (even & 0x01010101u) | (odd & 0x10101010u);
}

// One word of the new colour from its sum word (halves h0, h1) and the two
// Philox calls at index (hi, idx_lo) (sites 0-7) and (hi, idx_lo + 1) (sites
// 8-15), before the ties: sets tie when some site's A equals its threshold's
// high half; then the word must go through settle_ties.
__device__ __forceinline__ u64 ms_word(u32 h0, u32 h1, u32 idx_lo, const MsConsts& c, bool& tie) {
    const uint4 r0 = ms_philox(idx_lo, c), r1 = ms_philox(idx_lo + 1u, c);
    u32 tmax = 0u;
    const u32 lo = ms_half(h0, r0, c, tmax), hiw = ms_half(h1, r1, c, tmax);
    tie = tmax >= 0xffff0000u || (tmax << 16) >= 0xffff0000u;  // a lane at 0xffff
    return ((u64)hiw << 32) | lo;
}

// Nibble sums for the observables of a pair of words (32-bit halves w[0..3])
// with sum words s[0..3]: up += the up spins; when bonds, u += the sum over
// sites of u' = n for an up site and 7 - n for a down one, so that the pair's
// bond sum, sum over sites of (2 n - 4 for up, 4 - 2 n for down), is
// 2 u' + 6 up - 320. SWAR: u' = n ^ (7 where down) per nibble (n <= 4);
// adding each nibble pair of a half gives bytes <= 14, the four halves bytes
// <= 56, and the multiply by 0x01010101 adds the four bytes (<= 224) into the
// top one. The up count: the four halves add to nibbles <= 4, bytes <= 8.
__device__ __forceinline__ void ms_observe(const u32 w[4], const u32 s[4], bool bonds, u32& up, u32& u) {
    const u32 b = (w[0] + w[1]) + (w[2] + w[3]);
    up += (((b + (b >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
    if (bonds) {
        u32 v[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            const u32 x = s[k] ^ (~(w[k] * 15u) & 0x77777777u);
            v[k] = (x + (x >> 4)) & 0x0f0f0f0fu;
        }
        u += (((v[0] + v[1]) + (v[2] + v[3])) * 0x01010101u) >> 24;
    }
}

// The rare path of the fast loop, out of line: settles the ties of the pair
// of words stored at q0 (tie t0) and q1 (t1), whose Philox indices are
// (hi, x0), (hi, x1) and sum words s[0..1], s[2..3]; with OBS, returns the
// observables of the settled pair (up, u as in ms_observe).
template <bool OBS>
__device__ __noinline__ uint2 ms_settle_pair(u64* q0, u64* q1, bool t0, bool t1, u32 x0, u32 x1, u32 hi, u32 s0, u32 s1,
                                             u32 s2, u32 s3, const u32* thi, const u32* tlo, uint2 key, u32 off_lo,
                                             u32 off_hi, bool bonds) {
    if (t0) *q0 = settle_ties(((u64)hi << 32) | x0, ((u64)s1 << 32) | s0, *q0, thi, tlo, key, off_lo, off_hi);
    if (t1) *q1 = settle_ties(((u64)hi << 32) | x1, ((u64)s3 << 32) | s2, *q1, thi, tlo, key, off_lo, off_hi);
    uint2 r = make_uint2(0u, 0u);
    if (OBS) {
        const u64 w0 = *q0, w1 = *q1;
        const u32 w[4] = {(u32)w0, (u32)(w0 >> 32), (u32)w1, (u32)(w1 >> 32)}, s[4] = {s0, s1, s2, s3};
        ms_observe(w, s, bonds, r.x, r.y);
    }
    return r;
}

// The common case of the multispin sweep, on 32-bit offsets: each thread
// keeps one column m of words and walks row pairs (r0, r0 + 1), r0 = 2 p +
// colour, p += P, where P = stride / words. Row r0 takes its side neighbour on
// the left and row r0 + 1 on the right (for either colour), so the loop body
// has no branch on parity, and the two rows share their middle loads: 6 loads
// for 2 words. Word x of the colour (x = r words + m) draws the Philox calls
// (hi, glo + 2 x) and (hi, glo + 2 x + 1), as in the general loop: the caller
// makes sure that glo + 2 x never carries into the high word.
// With OBS (second colour only): adds to up the up spins of the words this
// thread wrote and of the first colour's words it read beside them, and to bond
// the bond sum of its sites (the 32-bit sums cannot wrap: a thread gets at
// most per / stride + 1 < 2^22 pairs).
template <bool OBS>
__device__ __forceinline__ void ms_rows(u64* __restrict__ mine, const u64* __restrict__ other, u32 per, u32 words,
                                        int colour, u32 tid, u32 stride, u32 glo, u32 hi, const MsConsts& c,
                                        uint2 key, u32 off_lo, u32 off_hi, const u32* thi, const u32* tlo,
                                        long long& up, long long& bond) {
    const u32 P = stride / words;  // >= 1 (caller)
    const u32 m = tid % words;
    const int dl = m == 0 ? (int)words - 1 : -1;         // left of row r0, from its middle word
    const int dr = m == words - 1 ? 1 - (int)words : 1;  // right of row r0 + 1
    const u32 end = per + (u32)colour * words;           // o0 < end <=> r0 < rows
    const u32 step = 2u * words * P;
    u32 o0 = tid < P * words ? (2u * (tid / words) + (u32)colour) * words + m : end;
    u32 x0 = glo + 2u * o0;  // low word of the Philox index of word o0
    const u64* p0 = other + o0;
    u32 n_up = 0u;  // up spins, both colours
    int n_bond = 0;  // bond sum: at most 128 in size per pair, over < 2^22 pairs
    for (; o0 < end; o0 += step, x0 += 2u * step, p0 += step) {
        // offsets from word o0 of row r0 to rows r0 - 1, r0 + 1, r0 + 2 (periodic)
        const int du = o0 < words ? (int)(per - words) : -(int)words;
        const int d1 = o0 >= per - words ? (int)words - (int)per : (int)words;
        const int d2 = o0 >= per - 2u * words ? 2 * (int)words - (int)per : 2 * (int)words;
        const u64* p1 = p0 + d1;
        const u64 c0 = p0[0], c1 = p1[0], a0 = p0[du], b1 = p0[d2], l0 = p0[dl], r1 = p1[dr];
        const u32 c0l = (u32)c0, c0h = (u32)(c0 >> 32), c1l = (u32)c1, c1h = (u32)(c1 >> 32);
        // neighbour sums in 32-bit halves (no nibble carries, so none across halves)
        const u32 s0l = c0l + (c0l << 4) + (u32)(l0 >> 60) + (u32)a0 + c1l;
        const u32 s0h = c0h + __funnelshift_l(c0l, c0h, 4) + (u32)(a0 >> 32) + c1h;
        const u32 s1l = c1l + __funnelshift_r(c1l, c1h, 4) + c0l + (u32)b1;
        const u32 s1h = c1h + (c1h >> 4) + ((u32)r1 << 28) + c0h + (u32)(b1 >> 32);
        if (OBS) {  // up spins of the first colour: c0 and c1 are its words at (r0, m) and (r0 + 1, m)
            const u32 oc = (c0l + c0h) + (c1l + c1h);  // nibbles <= 4
            n_up += (((oc + (oc >> 4)) & 0x0f0f0f0fu) * 0x01010101u) >> 24;
        }
        const u32 x1 = x0 + 2u * (u32)d1;
        bool t0, t1;
        const u64 w0 = ms_word(s0l, s0h, x0, c, t0), w1 = ms_word(s1l, s1h, x1, c, t1);
        u64* q0 = mine + o0;
        u64* q1 = q0 + d1;
        *q0 = w0;
        *q1 = w1;
        u32 p_up = 0u, p_u = 0u;  // the pair's up spins and u sum (ms_observe)
        if (t0 || t1) {  // rare
            const uint2 r = ms_settle_pair<OBS>(q0, q1, t0, t1, x0, x1, hi, s0l, s0h, s1l, s1h, thi, tlo, key, off_lo,
                                                off_hi, true);
            p_up = r.x;
            p_u = r.y;
        } else if (OBS) {
            const u32 w[4] = {(u32)w0, (u32)(w0 >> 32), (u32)w1, (u32)(w1 >> 32)};
            const u32 s[4] = {s0l, s0h, s1l, s1h};
            ms_observe(w, s, true, p_up, p_u);
        }
        if (OBS) {
            n_up += p_up;
            n_bond += 2 * (int)p_u + 6 * (int)p_up - 320;  // the pair's bond sum (ms_observe)
        }
    }
    if (OBS) {
        up += n_up;
        bond += n_bond;
    }
}

#ifndef ISING_MIN_BLOCKS
#define ISING_MIN_BLOCKS 4  // blocks per SM the multispin sweep is compiled for (at most 64 registers)
#endif
#ifndef ISING_MIN_BLOCKS_OBS
#define ISING_MIN_BLOCKS_OBS 3  // the same with observables (80 registers: at 64 its loop spills)
#endif

// OBS: launched for colour 1 only (after a colour-0 pass without it), adds the
// up spins of both colours and the bond sum of the state to counts[chain].
template <bool OBS>
__global__ void __launch_bounds__(ISING_BLOCK, OBS ? ISING_MIN_BLOCKS_OBS : ISING_MIN_BLOCKS)
ising_multispin(u64* __restrict__ packed, const u32* __restrict__ thr, long long rows, long long words,
                int colour, u32 k0, u32 k1, u32 off_lo, u32 off_hi, u64* __restrict__ counts) {
    __shared__ u32 thi[5], tlo[5];  // high and low 16 bits of the thresholds
    __shared__ MsConsts consts;
    const long long chain = blockIdx.y;
    const long long per = rows * words;  // words of one colour of one chain
    u64* __restrict__ mine = packed + (chain * 2 + colour) * per;
    const u64* __restrict__ other = packed + (chain * 2 + (1 - colour)) * per;
    const u64 gbase = (u64)(chain * 2 + colour) * (u64)(per * 2);  // 2 calls of 8 spins per word
    const uint2 key = make_uint2(k0, k1);
    long long up = 0, bond = 0;
    const long long stride = (long long)gridDim.x * blockDim.x;
    // The fast path (ms_rows): 32-bit offsets, and one high word of the
    // Philox index for the whole block; the same calls and the same states as
    // the general loop below. It takes every lattice of less than about 2^30
    // words (2^34 spins) per colour whose counter range does not straddle a
    // multiple of 2^32 (every power-of-two shape, and any shape for the first
    // chains).
    const bool fast =
        2 * per + 2 * stride < 0x7fffffffLL && words <= stride && (gbase >> 32) == ((gbase + 2 * per - 1) >> 32);
    if (threadIdx.x < 5) {
        thi[threadIdx.x] = thr[threadIdx.x] >> 16;
        tlo[threadIdx.x] = thr[threadIdx.x] & 0xffffu;
    }
    __syncthreads();
    if (fast && threadIdx.x == 0) ms_consts(consts, key, (u32)(gbase >> 32), off_lo, off_hi, thi);
    __syncthreads();
    if (fast) {
        const MsConsts c = consts;
        ms_rows<OBS>(mine, other, (u32)per, (u32)words, colour, blockIdx.x * blockDim.x + threadIdx.x, (u32)stride,
                     (u32)gbase, (u32)(gbase >> 32), c, key, off_lo, off_hi, thi, tlo, up, bond);
        if (OBS) block_add2(up, bond, counts + 2 * chain);
        return;
    }
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
            up += __popcll(word) + __popcll(c);  // c: the first colour's word at this position
            bond += bw;
        }
    }
    if (OBS) block_add2(up, bond, counts + 2 * chain);
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
