// Gamma, beta and Dirichlet variates with per-element parameters. The
// Marsaglia-Tsang routine and the counter mapping are in gamma.cuh; the NumPy
// twin is gpumcmc/random/_gamma.py.
//
//   gamma_draw<T, DYN>  element i: G(shape[i]) * scale[i], or log G + log
//                  scale[i] (scale may be null: then every element's scale, or
//                  log scale, is scale_value, passed by value); a thread takes a
//                  pair of elements, which share trial 0, and defers the general
//                  path and (unless most of the warp needs it) the boost to
//                  per-warp queues. A warp takes rounds of 32 pairs by a grid
//                  stride, or with DYN in chunks of `chunk` rounds from a
//                  counter `next` (two words, zero at launch and left at zero;
//                  see WorkChunks); both give the same draws. Blocks are whole
//                  warps
//   beta_draw<T>   element i: gamma elements 2i (a) and 2i + 1 (b), one pair, in
//                  log space, X = 1 / (1 + exp(log Gb - log Ga))
//   lse_rows<T>    rows of log-gammas normalised in place by their log-sum-exp:
//                  a Dirichlet draw is gamma_draw (log) followed by lse_rows
//   dirichlet_draw<T>  the same draws as that pair of kernels in one launch,
//                  a warp drawing and normalising a chunk of whole rows (the
//                  launcher takes it for many float32 rows)
//
// Parameters come as a pointer and a step (0 for one value shared by every
// element, 1 for one value per element), so scalar parameters cost no copy;
// the step only selects the index (no 64-bit multiply).
#include "gamma.cuh"
#include "status.cuh"
#include "warp_reduce.cuh"

#ifndef GPUMCMC_GAMMA_BLOCK
#define GPUMCMC_GAMMA_BLOCK 256
#endif

using namespace gpumcmc;

// Per-warp queues in shared memory. A warp takes 32 consecutive pairs (64
// elements) at a time and finishes at once the elements whose trial 0 the
// squeeze accepts (95% at shape 1, 99% at 2.5, 99.9% above 10; see gamma.cuh)
// and whose shape is at least 1.
// The others wait, each queue served 32 at a time so that its work runs with
// every lane busy instead of stalling every warp that meets it:
//   slow   the logarithmic test, another attempt, or an invalid shape: (i, x, u)
//          of trial 0. float32: the batch runs trial 0's logarithmic test, and
//          an element it rejects moves to the attempts queue; float64: the
//          batch finishes it by gamma_unboosted. One whose shape is below 1
//          then moves to the boost queue;
//   attempts (float32) rejected at trial 0: (i, a), finished by attempts 1,
//          2, ... (a Philox block and a Box-Muller pair each), which about
//          two lanes in three of a slow batch need: queued, they run with
//          every lane busy instead of idling the lanes whose trial 0 passed;
//   boost  accepted with shape below 1: (i, v) with v = G(a + 1) or its log,
//          finished by the boost (a Philox block, log U / a, exp), which would
//          otherwise run on the whole warp whenever any lane needs it. Where
//          more than GPUMCMC_GAMMA_BOOST_INLINE of the warp's 64 elements need
//          it at trial 0, the warp boosts them at once instead.
// The draws are those of gamma_from_trial0, whatever the order or path.
constexpr int GAMMA_WARPS = GPUMCMC_GAMMA_BLOCK / 32;
// Above this many boosted elements of its 64, a warp boosts at once (a Philox
// block per pair, every lane busy) instead of queueing them (a block each,
// 32 at a time). At most 64.
#ifndef GPUMCMC_GAMMA_BOOST_INLINE
#define GPUMCMC_GAMMA_BOOST_INLINE 40
#endif
static_assert(GPUMCMC_GAMMA_BOOST_INLINE >= 0 && GPUMCMC_GAMMA_BOOST_INLINE <= 64, "see GAMMA_BOOST_CAP");
// Queue capacities. Slow: < 32 waiting + 64 pushed by a round of pairs. Boost:
// < 32 waiting + at most GPUMCMC_GAMMA_BOOST_INLINE pushed by a round + at most
// 32 moved by one slow or attempts batch (the boost queue is served after
// each). Attempts: < 32 waiting + 32 moved by one slow batch (served after
// each). A lane with nothing to push writes its discard slot instead.
constexpr int GAMMA_SLOW_CAP = 96;
constexpr int GAMMA_BOOST_CAP = 32 + GPUMCMC_GAMMA_BOOST_INLINE + 32;
constexpr int GAMMA_ATTEMPT_CAP = 64;
// float64 keeps its attempts in the slow batch: the queues of a block already
// take 45 of the 48 KiB of static shared memory.
//
// Bad parameters. An invalid shape (not positive and finite) always fails
// trial 0's squeeze, so it reaches the slow queue, where it is noted in the
// status word (status.cuh); a scale array is checked where it is read. Good
// input costs nothing: the notes are on the paths of bad input only.

// A scale as the kernel reads it: positive and finite, or with log output its
// log, finite.
template <typename T>
__device__ __forceinline__ bool valid_scale(T s, bool lg) {
    return lg ? fabs(s) < fp_special<T>::inf() : (s > T(0)) & (s < fp_special<T>::inf());
}
template <typename T>
constexpr bool gamma_attempt_queue() {
    return sizeof(T) == 4;
}

// Queue entries, 16 bytes (a float64 slow entry 32), read and written as
// 16-byte words through 32-bit shared-memory addresses. A float32 boost entry
// carries the shape; a float64 one has no room, and the shape is read again.
// A float32 slow entry holds -x: box_muller_fast computes the normals as
// -r cos, -r sin, and the main loop then stores r cos as it is instead of
// negating it every round (the slow batch negates it back).
template <typename T>
struct alignas(16) SlowEntry {
    long long i;
    T x, u;
};
template <typename T>
struct alignas(16) BoostEntry {
    long long i;
    T v;
};
template <>
struct alignas(16) BoostEntry<float> {
    long long i;
    float v, a;
};
struct alignas(16) AttemptEntry {  // float32 only
    long long i;
    float a, unused;
};

__device__ __forceinline__ void sts128(unsigned int addr, uint4 v) {
    asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
                 : "memory");
}
__device__ __forceinline__ uint4 lds128(unsigned int addr) {
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(addr)
                 : "memory");
    return v;
}
__device__ __forceinline__ unsigned int lo32(double v) { return (unsigned int)__double_as_longlong(v); }
__device__ __forceinline__ unsigned int hi32(double v) { return (unsigned int)(__double_as_longlong(v) >> 32); }
__device__ __forceinline__ double as_double(unsigned int lo, unsigned int hi) {
    return __longlong_as_double(((long long)hi << 32) | lo);
}
__device__ __forceinline__ long long as_i64(unsigned int lo, unsigned int hi) {
    return (long long)(((unsigned long long)hi << 32) | lo);
}

__device__ __forceinline__ void put(unsigned int a, long long i, float x, float u) {
    sts128(a, make_uint4((unsigned)i, (unsigned)(i >> 32), __float_as_uint(x), __float_as_uint(u)));
}
__device__ __forceinline__ void put(unsigned int a, long long i, double x, double u) {
    sts128(a, make_uint4((unsigned)i, (unsigned)(i >> 32), lo32(x), hi32(x)));
    sts128(a + 16, make_uint4(lo32(u), hi32(u), 0u, 0u));
}
// A slow entry (i, x, u) as put() writes it: -x in float32 (see above).
__device__ __forceinline__ void put_slow(unsigned int a, long long i, float x, float u) { put(a, i, -x, u); }
__device__ __forceinline__ void put_slow(unsigned int a, long long i, double x, double u) { put(a, i, x, u); }
// A 16-byte entry of an index and two float32 values (both float32 kinds).
__device__ __forceinline__ void get(unsigned int a, long long& i, float& p, float& q) {
    const uint4 w = lds128(a);
    i = as_i64(w.x, w.y);
    p = __uint_as_float(w.z);
    q = __uint_as_float(w.w);
}
__device__ __forceinline__ void get(unsigned int a, SlowEntry<float>& e) {
    get(a, e.i, e.x, e.u);
    e.x = -e.x;
}
__device__ __forceinline__ void get(unsigned int a, SlowEntry<double>& e) {
    const uint4 w = lds128(a), z = lds128(a + 16);
    e.i = as_i64(w.x, w.y);
    e.x = as_double(w.z, w.w);
    e.u = as_double(z.x, z.y);
}
__device__ __forceinline__ void put_boost(unsigned int a, long long i, float v, float shape) { put(a, i, v, shape); }
__device__ __forceinline__ void put_boost(unsigned int a, long long i, double v, double) {
    sts128(a, make_uint4((unsigned)i, (unsigned)(i >> 32), lo32(v), hi32(v)));
}
__device__ __forceinline__ void get(unsigned int a, BoostEntry<float>& e) { get(a, e.i, e.v, e.a); }
__device__ __forceinline__ void get(unsigned int a, BoostEntry<double>& e) {
    const uint4 w = lds128(a);
    e.i = as_i64(w.x, w.y);
    e.v = as_double(w.z, w.w);
}

template <bool>
struct AttemptQueues {
    AttemptEntry attempt[GAMMA_WARPS][GAMMA_ATTEMPT_CAP];
};
template <>
struct AttemptQueues<false> {};

template <typename T>
struct GammaQueues : AttemptQueues<gamma_attempt_queue<T>()> {
    SlowEntry<T> slow[GAMMA_WARPS][GAMMA_SLOW_CAP];
    BoostEntry<T> boost[GAMMA_WARPS][GAMMA_BOOST_CAP];
    SlowEntry<T> discard[GAMMA_WARPS][32];  // every queue's (a slow entry is the largest)
};

template <typename T>
struct pair_of;
template <>
struct pair_of<float> {
    using type = float2;
};
template <>
struct pair_of<double> {
    using type = double2;
};
template <>
struct pair_of<int> {
    using type = int2;
};

template <typename A, typename B>
struct same_type {
    static constexpr bool value = false;
};
template <typename A>
struct same_type<A, A> {
    static constexpr bool value = true;
};

template <typename T>
__device__ __forceinline__ bool pair_aligned(const T* p) {
    return (reinterpret_cast<unsigned long long>(p) & (2 * sizeof(T) - 1)) == 0;
}

// Elements i0 (even) and i0 + 1 of a parameter given as (pointer, step);
// `vec`: the pointer is aligned for one load of both.
template <typename T>
__device__ __forceinline__ void load_pair(const T* __restrict__ p, long long step, long long i0, bool has1,
                                          bool vec, T& v0, T& v1) {
    if (!step) {
        v0 = v1 = p[0];
    } else if (vec && has1) {
        const auto v = *reinterpret_cast<const typename pair_of<T>::type*>(p + i0);
        v0 = v.x;
        v1 = v.y;
    } else {
        v0 = p[i0];
        v1 = has1 ? p[i0 + 1] : T(1);
    }
}

// v * s, or v + s with log_out (where the caller passes s = log(scale)).
template <typename T>
__device__ __forceinline__ T scaled(T v, T s, int log_out) {
    return log_out ? v + s : v * s;
}

// One warp's gamma elements in pairs, with its two queues: pairs<FULL,
// FAST>(base, n) draws the warp's 32 pairs from `base` among elements [0, n)
// (FULL: all 64 elements are below n, which drops the bounds checks; FAST:
// also per-element shapes and output aligned for pair loads and stores, no
// scale array and no trials: see fast()); flush() finishes whatever still
// waits in the queues. After flush() and a __syncwarp() every element the
// warp was given holds its final value.
//
// Shapes are stored as S: T itself, or int counts to which the warp adds
// `shape_add` (LDA's counts plus a prior), T(count) + shape_add rounded once
// as an elementwise add of the count array and the prior in T gives it.
template <typename T, typename S = T>
struct GammaWarp {
    using T2 = typename pair_of<T>::type;
    using S2 = typename pair_of<S>::type;
    static constexpr unsigned int SLOW_BYTES = sizeof(SlowEntry<T>), BOOST_BYTES = sizeof(BoostEntry<T>),
                                  ATTEMPT_BYTES = sizeof(AttemptEntry);
    static constexpr bool ATTEMPTS = gamma_attempt_queue<T>();
    const S* __restrict__ shape;
    long long shape_step;
    T shape_add;
    const T* __restrict__ scale;
    long long scale_step;
    T scale_value;
    T* __restrict__ out;
    int* __restrict__ trials;
    uint2 key;
    unsigned int off_lo, off_hi;
    int log_out;
    unsigned long long* status;  // null: no checks
    unsigned long long tag;
    bool want_log, vec_shape, vec_scale, vec_out;
    int lane;
    unsigned int lt;
    unsigned int qs, qb, qa = 0, qd;  // shared addresses of this warp's queues and of this lane's discard slot
    int n_slow = 0, n_boost = 0, n_attempt = 0;

    __device__ __forceinline__ GammaWarp(GammaQueues<T>& q, const S* shape_, long long shape_step_, const T* scale_,
                                         long long scale_step_, T scale_value_, T* out_, int* trials_, uint2 key_,
                                         unsigned int off_lo_, unsigned int off_hi_, int log_out_,
                                         unsigned long long* status_, unsigned long long tag_, T shape_add_ = T(0))
        : shape(shape_), shape_step(shape_step_), shape_add(shape_add_), scale(scale_), scale_step(scale_step_),
          scale_value(scale_value_), out(out_),
          trials(trials_), key(key_), off_lo(off_lo_), off_hi(off_hi_), log_out(log_out_), status(status_),
          tag(tag_) {
        lane = threadIdx.x & 31;
        lt = (1u << lane) - 1u;
        want_log = log_out != 0;
        vec_shape = pair_aligned(shape);
        vec_scale = pair_aligned(scale);
        vec_out = pair_aligned(out);
        qs = (unsigned int)__cvta_generic_to_shared(q.slow[threadIdx.x >> 5]);
        qb = (unsigned int)__cvta_generic_to_shared(q.boost[threadIdx.x >> 5]);
        if constexpr (ATTEMPTS) qa = (unsigned int)__cvta_generic_to_shared(q.attempt[threadIdx.x >> 5]);
        qd = (unsigned int)__cvta_generic_to_shared(&q.discard[threadIdx.x >> 5][lane]);
    }

    // Every lane of the warp has a whole pair, and the pair's shapes and output
    // are plain aligned pairs: one 8-byte (16-byte) load and store, the scale
    // scale_value.
    __device__ __forceinline__ bool fast() const {
        return shape_step != 0 && vec_shape && vec_out && scale == nullptr && trials == nullptr;
    }

    // A stored shape as the sampler takes it.
    __device__ __forceinline__ T shape_value(S x) const {
        if constexpr (same_type<S, T>::value) return x;
        else return T(x) + shape_add;
    }
    __device__ __forceinline__ T2 shape_pair(S2 v) const {
        if constexpr (same_type<S, T>::value) return v;
        else return T2{shape_value(v.x), shape_value(v.y)};
    }

    __device__ __forceinline__ T shape_of(long long i) const { return shape_value(shape[shape_step ? i : 0]); }

    // out[i] = v scaled by scale[i], or by scale_value where scale is null (see
    // scaled; a unit scale_value, 1 or 0, leaves v's bits as they are).
    __device__ __forceinline__ void store(T v, long long i) const {
        out[i] = scaled(v, scale != nullptr ? scale[scale_step ? i : 0] : scale_value, log_out);
    }

    __device__ __forceinline__ T boost_shape(const BoostEntry<float>& b) const { return b.a; }
    __device__ __forceinline__ T boost_shape(const BoostEntry<double>& b) const { return shape_of(b.i); }

    // Element i of shape a, on every lane of the warp (`has`: the lane has
    // one), with v = G(a') or its log from its accepted trial, or NaN and
    // trial -1: stored, or moved to the boost queue when its shape is below 1.
    __device__ __forceinline__ void finish(bool has, long long i, T v, T a, int trial) {
        const bool boost = has && trial >= 0 && a < T(1);
        if (has) {
            if (!boost) store(v, i);
            if (trials != nullptr) trials[i] = trial;
        }
        const unsigned int m = __ballot_sync(0xffffffffu, boost);
        put_boost(boost ? qb + (n_boost + __popc(m & lt)) * BOOST_BYTES : qd, i, v, a);
        n_boost += __popc(m);
    }

    // Slow entry e, on every lane of the warp (`has`: the lane has an entry):
    // as gamma_unboosted, then finish(); in float32 an element that trial 0's
    // logarithmic test rejects moves to the attempts queue instead.
    __device__ __forceinline__ void serve_slow(int e, bool has) {
        SlowEntry<T> s;
        get(qs + e * SLOW_BYTES, s);
        const T a = has ? shape_of(s.i) : T(1);
        if (has && !valid_shape(a)) status_note(status, tag, (unsigned long long)s.i, ST_PARAM);
        if constexpr (ATTEMPTS) {
            const bool valid = has && valid_shape(a);
            T d, c, v = T(1);
            mt_setup(a, a < T(1), d, c);
            const int trial = valid && mt_accept(s.x, s.u, d, c, v) ? 0 : -1;
            const bool again = valid && trial < 0;
            finish(has && !again, s.i, mt_result(d, v, trial, want_log), a, trial);
            const unsigned int m = __ballot_sync(0xffffffffu, again);
            put(again ? qa + (n_attempt + __popc(m & lt)) * ATTEMPT_BYTES : qd, s.i, a, T(0));
            n_attempt += __popc(m);
        } else {
            int trial = -1;
            T v = T(0);
            if (has) v = gamma_unboosted(a, (unsigned long long)s.i, s.x, s.u, key, off_lo, off_hi, want_log, trial);
            finish(has, s.i, v, a, trial);
        }
    }

    // Attempts entry e (float32), on every lane of the warp: attempts 1, 2, ...
    // until one is accepted, then finish().
    __device__ __forceinline__ void serve_attempt(int e, bool has) {
        long long i;
        T a, unused;
        get(qa + e * ATTEMPT_BYTES, i, a, unused);
        if (!has) a = T(1);
        T d, c, v = T(1);
        mt_setup(a, a < T(1), d, c);
        int trial = -1;
        if (has) trial = mt_attempts(d, c, (unsigned long long)i, key, off_lo, off_hi, v);
        finish(has, i, mt_result(d, v, trial, want_log), a, trial);
    }

    __device__ __forceinline__ void finish_boost(int e) const {
        BoostEntry<T> b;
        get(qb + e * BOOST_BYTES, b);
        const T ub = element_boost<T>((unsigned long long)b.i, key, off_lo, off_hi);
        store(boost_apply(b.v, boost_shape(b), ub, want_log), b.i);
    }

    // Trial 0's words of this lane's pair in the round at `base`.
    __device__ __forceinline__ Trial0Words<T> words(long long base) const {
        return trial0_words<T>((unsigned long long)(base + lane), key, off_lo, off_hi);
    }

    template <bool FULL, bool FAST, int LOG = -1, bool UNIT = false>
    __device__ __forceinline__ void pairs(long long base, long long n) {
        pairs<FULL, FAST, LOG, UNIT>(base, n, words(base));
    }

    // The round at `base`, given its trial-0 words tw (see words()). LOG: 0 or
    // 1 where the caller knows log_out at compile time, -1 where it does not.
    template <bool FULL, bool FAST, int LOG = -1, bool UNIT = false>
    __device__ __forceinline__ void pairs(long long base, long long n, const Trial0Words<T>& tw) {
        const long long p = base + lane;
        T2 a = {T(1), T(1)};
        if (FAST) a = shape_pair(reinterpret_cast<const S2*>(shape)[p]);
        pair_round<FULL, FAST, LOG, UNIT>(p, n, tw, a, reinterpret_cast<T2*>(out) + p);
    }

    // This lane's pair p of its round; in FAST rounds `a` holds the pair's
    // shapes and op points at its output (the loop loads the shapes a round
    // ahead and advances op itself rather than recomputing 64-bit addresses
    // every round); other rounds load their shapes here and ignore `a`.
    // UNIT (FAST rounds): scale_value is 1 (0 for log output), and the values
    // are stored as they are, bit for bit what scaling by it gives.
    template <bool FULL, bool FAST, int LOG, bool UNIT = false>
    __device__ __forceinline__ void pair_round(long long p, long long n, const Trial0Words<T>& tw, T2 a, T2* op) {
        static_assert(FULL || !FAST, "FAST pairs are whole");
        const bool lg = LOG < 0 ? want_log : LOG == 1;
        const long long i0 = 2 * p;
        const bool has0 = FULL || i0 < n, has1 = FULL || i0 + 1 < n;
        T a0 = T(1), a1 = T(1);
        if (FAST) {
            a0 = a.x;
            a1 = a.y;
        } else if (has0) {
            if constexpr (same_type<S, T>::value) {
                load_pair(shape, shape_step, i0, has1, vec_shape, a0, a1);
            } else {
                S s0, s1 = S(0);
                load_pair(shape, shape_step, i0, has1, vec_shape, s0, s1);
                a0 = shape_value(s0);
                a1 = has1 ? shape_value(s1) : T(1);
            }
        }
        T x0, u0, x1, u1, g0, g1;
        trial0_values(tw, x0, u0, x1, u1);
        const bool ok0 = trial0_squeeze(a0, x0, u0, g0) & has0;
        const bool ok1 = trial0_squeeze(a1, x1, u1, g1) & has1;
        // G(a') or log G(a'); where the squeeze failed or the lane has no
        // element, a placeholder that is never kept (log_pos of any bits is
        // some finite or NaN value, with no trap).
        T v0 = lg ? log_pos(g0) : g0;
        T v1 = lg ? log_pos(g1) : g1;
        const bool s0 = has0 & !ok0, s1 = has1 & !ok1;
        const bool b0 = ok0 & (a0 < T(1)), b1 = ok1 & (a1 < T(1));
        // The rest to the slow queue; a lane with nothing to push writes its
        // discard slot. (First: s0 and s1 are then dead before the boost's
        // branches, which would otherwise keep them in a register's bits.)
        const unsigned m0 = __ballot_sync(0xffffffffu, s0), m1 = __ballot_sync(0xffffffffu, s1);
        {
            const int slot = n_slow + __popc(m0 & lt) + __popc(m1 & lt);
            put_slow(s0 ? qs + slot * SLOW_BYTES : qd, i0, x0, u0);
            put_slow(s1 ? qs + (slot + s0) * SLOW_BYTES : qd, i0 | 1, x1, u1);
            n_slow += __popc(m0) + __popc(m1);
        }
        const unsigned c0 = __ballot_sync(0xffffffffu, b0), c1 = __ballot_sync(0xffffffffu, b1);
        const int nb = __popc(c0) + __popc(c1);
        if (nb > GPUMCMC_GAMMA_BOOST_INLINE) {
            // Most of the warp boosts: at once, one Philox block per pair.
            T ub0, ub1;
            pair_boost((unsigned long long)p, key, off_lo, off_hi, ub0, ub1);
            if (b0) v0 = boost_apply(v0, a0, ub0, lg);
            if (b1) v1 = boost_apply(v1, a1, ub1, lg);
        } else {
            // A few (or none): to the boost queue, served a Philox block per
            // element; a lane with nothing to push writes its discard slot.
            const int slot = n_boost + __popc(c0 & lt) + __popc(c1 & lt);
            put_boost(b0 ? qb + slot * BOOST_BYTES : qd, i0, v0, a0);
            put_boost(b1 ? qb + (slot + b0) * BOOST_BYTES : qd, i0 | 1, v1, a1);
            n_boost += nb;
        }
        // Both halves are stored at once: a half that still waits in a queue
        // stores a placeholder, which its queue entry overwrites later (after a
        // __syncwarp, which orders the two writes).
        if (FAST && UNIT) {
            *op = {v0, v1};
        } else if (FAST) {
            *op = {scaled(v0, scale_value, lg), scaled(v1, scale_value, lg)};
        } else if (has0) {
            T sc0 = scale_value, sc1 = scale_value;
            if (scale != nullptr) {
                load_pair(scale, scale_step, i0, has1, vec_scale, sc0, sc1);
                const bool bad0 = !valid_scale(sc0, lg), bad1 = has1 && !valid_scale(sc1, lg);
                if (bad0 | bad1) status_note(status, tag, (unsigned long long)(bad0 ? i0 : i0 + 1), ST_PARAM_B);
            }
            const T o0 = scaled(v0, sc0, lg), o1 = scaled(v1, sc1, lg);
            if (has1 && vec_out) {
                *reinterpret_cast<T2*>(out + i0) = {o0, o1};
            } else {
                out[i0] = o0;
                if (has1) out[i0 + 1] = o1;
            }
            if (trials != nullptr) {
                trials[i0] = 0;
                if (has1) trials[i0 + 1] = 0;
            }
        }
        __syncwarp();
        while (n_slow >= 32) {
            n_slow -= 32;
            serve_slow(n_slow + lane, true);
            __syncwarp();  // the entries are read, and those it moved seen by every lane
            serve_boosts();
            serve_attempts();
        }
        serve_boosts();
    }

    // Full batches of the attempts queue (float32), each followed by a
    // __syncwarp() and the boost queue's full batches.
    __device__ __forceinline__ void serve_attempts() {
        if constexpr (ATTEMPTS) {
            while (n_attempt >= 32) {
                n_attempt -= 32;
                serve_attempt(n_attempt + lane, true);
                __syncwarp();
                serve_boosts();
            }
        }
    }

    // Full batches of the boost queue, each followed by a __syncwarp(): its
    // slots are written again only after every lane has read its own.
    __device__ __forceinline__ void serve_boosts() {
        while (n_boost >= 32) {
            n_boost -= 32;
            finish_boost(n_boost + lane);
            __syncwarp();
        }
    }

    // Rounds of 32 whole pairs at base, base + stride, ... up to `last`
    // (inclusive) among elements [0, n), where fast() holds and log_out == LOG;
    // returns the first base past `last`. In float32 the loop computes each round's trial-0
    // Philox block one round ahead (the compiler places it at the end of the
    // round, after the queues are served): faster than at the start of its
    // own round; in float64, with twice the words to carry, slower (the
    // numbers: benchmarks/NOTES.md, "kernels_cu/gamma.cu"). The
    // loop counts its rounds down in 32 bits: with the last round as a 64-bit
    // bound, NVRTC recomputed that bound (two 64-bit minimums) every round.
    template <int LOG, bool UNIT>
    __device__ __forceinline__ long long fast_rounds(long long base, long long last, long long stride, long long n) {
        if (sizeof(T) == 4) {
            while (base <= last) {
                const long long left = (last - base) / stride + 1;
                unsigned int r = left < (1ll << 30) ? (unsigned int)left : (1u << 30);
                // The pair index and both pointers advance by the stride.
                long long p = base + lane;
                const S2* sp = reinterpret_cast<const S2*>(shape) + p;
                T2* op = reinterpret_cast<T2*>(out) + p;
                Trial0Words<T> next = trial0_words<T>((unsigned long long)p, key, off_lo, off_hi);
                S2 a_next = *sp;
                for (;;) {
                    const Trial0Words<T> cur = next;
                    const T2 a = shape_pair(a_next);
                    if (--r) {
                        next = trial0_words<T>((unsigned long long)(p + stride), key, off_lo, off_hi);
                        a_next = sp[stride];
                    }
                    pair_round<true, true, LOG, UNIT>(p, n, cur, a, op);
                    p += stride;
                    if (!r) break;
                    sp += stride;
                    op += stride;
                }
                base = p - lane;
            }
        } else {
            for (; base <= last; base += stride) pairs<true, true, LOG, UNIT>(base, n);
        }
        return base;
    }

    // Rounds of 32 whole pairs at base, base + stride, ... up to `last`
    // (inclusive), by fast_rounds where fast() holds; returns the first base
    // past `last`. With SPLIT a unit scale (the usual call) takes a copy of
    // the loop without the multiply per value: fewer cycles for the float32
    // counter kernel, the one large calls take (benchmarks/NOTES.md,
    // "kernels_cu/gamma.cu"); elsewhere the copy is not worth its compile time.
    template <bool SPLIT>
    __device__ __forceinline__ long long whole_rounds(long long base, long long last, long long stride, long long n) {
        if (!fast()) {
            for (; base <= last; base += stride) pairs<true, false>(base, n);
            return base;
        }
        if (log_out) {
            return SPLIT && scale_value == T(0) ? fast_rounds<1, SPLIT>(base, last, stride, n)
                                                : fast_rounds<1, false>(base, last, stride, n);
        }
        return SPLIT && scale_value == T(1) ? fast_rounds<0, SPLIT>(base, last, stride, n)
                                            : fast_rounds<0, false>(base, last, stride, n);
    }

    // Serve the part-full queues; the caller's __syncwarp() then orders these
    // stores before any lane's later reads or queue writes.
    __device__ __forceinline__ void flush() {
        __syncwarp();
        serve_slow(lane, lane < n_slow);
        n_slow = 0;
        __syncwarp();
        serve_boosts();
        serve_attempts();
        if constexpr (ATTEMPTS) {
            serve_attempt(lane, lane < n_attempt);
            n_attempt = 0;
            __syncwarp();
            serve_boosts();
        }
        if (lane < n_boost) finish_boost(lane);
        n_boost = 0;
    }
};

// Rounds (of 32 pairs) handed to a warp in chunks from the counter next[0]
// (zero at launch): each warp asks for its following chunk as it starts one,
// so that the answer is back when it is needed. Warps progress at different
// rates (the scheduler favours some, and the queues make rounds uneven), and
// with a fixed share of rounds (a grid stride) the first warps finished
// well before the last, and warps stood idle for a large share of the
// kernel's time, a share the counter cuts to a few per cent (the numbers:
// benchmarks/NOTES.md, "kernels_cu/gamma.cu"). Which warp
// draws an element does not change its value. The launcher takes the counter
// for large calls only, where the tail is worth it.
//
// The kernel leaves the counter as it found it, at zero, so that the next
// launch on the stream needs no memset: each warp, done asking, counts
// itself in next[1], and the last to do so zeroes both words. Every other
// warp's requests are complete by then (a fence orders each warp's last
// request before its count).
struct WorkChunks {
    unsigned long long* next;
    long long size, c;
    unsigned long long asked = 0;  // lane 0: the answer to the pending request
    bool lane0;

    __device__ __forceinline__ WorkChunks(unsigned long long* next_, long long size_) : next(next_), size(size_) {
        lane0 = (threadIdx.x & 31) == 0;
        ask();
        c = take();
    }
    __device__ __forceinline__ void ask() {
        if (lane0) asked = atomicAdd(next, (unsigned long long)size);
    }
    __device__ __forceinline__ long long take() {
        const long long got = (long long)__shfl_sync(0xffffffffu, asked, 0);
        ask();
        return got;
    }
    // The first round of the warp's current chunk; then advance().
    __device__ __forceinline__ long long first() const { return c; }
    __device__ __forceinline__ void advance() { c = take(); }
    // After the warp's last request: the last warp of the grid to get here
    // zeroes the counter for the next launch.
    __device__ __forceinline__ void done() const {
        if (lane0) {
            __threadfence();
            const unsigned long long warps = (unsigned long long)gridDim.x * ((blockDim.x + 31) >> 5);
            if (atomicAdd(next + 1, 1ull) == warps - 1) {
                next[0] = 0;
                next[1] = 0;
            }
        }
    }
};

// Blocks per SM that gamma_draw<float> is built to fit at least (the register
// budget): with the attempts queue and the grid stride, 3 blocks (76
// registers) ran as fast as 4 (64 registers, some spilled), without the
// spills (benchmarks/NOTES.md, "kernels_cu/gamma.cu"). With the counter NVRTC
// takes 60 registers on its own, and 4 blocks fit. float64 keeps the
// compiler's choice.
#ifndef GPUMCMC_GAMMA_MIN_BLOCKS
#define GPUMCMC_GAMMA_MIN_BLOCKS 3
#endif
// gamma_draw's work for one warp, whatever its shapes' storage.
template <bool DYN, typename T, typename S>
__device__ __forceinline__ void gamma_rounds(GammaWarp<T, S>& w, long long n, long long chunk,
                                             unsigned long long* __restrict__ next) {
    const long long n_pairs = (n + 1) >> 1;
    if (!DYN) {  // a grid stride: rounds at base, base + stride, ...
        const long long stride = (long long)gridDim.x * blockDim.x;
        const long long full_end = (n >> 1) - 32;  // a warp at base <= full_end has 32 whole pairs
        long long base = w.template whole_rounds<false>((long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31),
                                                        full_end, stride, n);
        for (; base < n_pairs; base += stride) w.template pairs<false, false>(base, n);
    } else {  // chunks of `chunk` rounds from the counter; round k is pairs [32 k, 32 k + 32)
        const long long n_rounds = (n_pairs + 31) >> 5, full_rounds = n >> 6;  // whole: all 64 elements below n
        WorkChunks work(next, chunk);
        for (; work.first() < n_rounds; work.advance()) {
            long long k = work.first();
            const long long end = min(k + chunk, n_rounds), full_end = min(end, full_rounds);
            if (k < full_end) {
                w.template whole_rounds<sizeof(T) == 4>(k << 5, (full_end - 1) << 5, 32, n);
                k = full_end;
            }
            for (; k < end; ++k) w.template pairs<false, false>(k << 5, n);
        }
        work.done();
    }
    w.flush();
}

template <typename T, bool DYN>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK, sizeof(T) == 4 ? GPUMCMC_GAMMA_MIN_BLOCKS : 1)
gamma_draw(const T* __restrict__ shape, long long shape_step, const T* __restrict__ scale,
           long long scale_step, T scale_value, T* __restrict__ out, long long n, unsigned int k0, unsigned int k1,
           unsigned int off_lo, unsigned int off_hi, const unsigned long long* __restrict__ off_dev, int log_out,
           int* __restrict__ trials, long long chunk, unsigned long long* __restrict__ next,
           unsigned long long* status, unsigned long long tag) {
    offset_from_device(off_dev, off_lo, off_hi);
    __shared__ GammaQueues<T> q;
    GammaWarp<T> w(q, shape, shape_step, scale, scale_step, scale_value, out, trials, make_uint2(k0, k1), off_lo,
                   off_hi, log_out, status, tag);
    gamma_rounds<DYN>(w, n, chunk, next);
}

// gamma_draw of shapes counts[i] + prior (unit scale, no trials): the draws of
// gamma_draw given the float array counts + prior, without that array's pass
// over memory. LDA's Dirichlet draws from their topic counts.
template <typename T, bool DYN>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK, sizeof(T) == 4 ? GPUMCMC_GAMMA_MIN_BLOCKS : 1)
gamma_counts_draw(const int* __restrict__ counts, T prior, T* __restrict__ out, long long n, unsigned int k0,
                  unsigned int k1, unsigned int off_lo, unsigned int off_hi,
                  const unsigned long long* __restrict__ off_dev, int log_out, long long chunk,
                  unsigned long long* __restrict__ next, unsigned long long* status, unsigned long long tag) {
    offset_from_device(off_dev, off_lo, off_hi);
    __shared__ GammaQueues<T> q;
    GammaWarp<T, int> w(q, counts, 1, nullptr, 0, log_out ? T(0) : T(1), out, nullptr, make_uint2(k0, k1), off_lo,
                        off_hi, log_out, status, tag, prior);
    gamma_rounds<DYN>(w, n, chunk, next);
}

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK)
beta_draw(const T* __restrict__ a, long long a_step, const T* __restrict__ b, long long b_step,
          T* __restrict__ out, long long n, unsigned int k0, unsigned int k1, unsigned int off_lo,
          unsigned int off_hi, const unsigned long long* __restrict__ off_dev, unsigned long long* status,
          unsigned long long tag) {
    offset_from_device(off_dev, off_lo, off_hi);
    const uint2 key = make_uint2(k0, k1);
    bool noted = false;  // elements come in increasing order: only a thread's first bad one can be the least
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        int trial;
        const unsigned long long e = 2ull * (unsigned long long)i;
        T xa, ua, xb, ub;
        pair_trial0((unsigned long long)i, key, off_lo, off_hi, xa, ua, xb, ub);
        const T pa = a[a_step ? i : 0], pb = b[b_step ? i : 0];
        const T la = gamma_from_trial0(pa, e, xa, ua, key, off_lo, off_hi, true, trial);
        const T lb = gamma_from_trial0(pb, e + 1, xb, ub, key, off_lo, off_hi, true, trial);
        out[i] = T(1) / (T(1) + exp(lb - la));
        if (!noted && !(valid_shape(pa) & valid_shape(pb))) {
            status_note(status, tag, (unsigned long long)i, valid_shape(pa) ? ST_PARAM_B : ST_PARAM);
            noted = true;
        }
    }
}

// Rows of K log-gammas, normalised in place: log_out gives (lg - m) - log(s),
// else exp(lg - m) / s, with m the row's maximum and s the sum of
// exp(lg - m) (relative to the maximum, not by subtracting a rounded
// log-sum-exp: at |log G| ~ 1e3, alpha ~ 1e-3, the rounding of m + log(s) in
// float32 is ~3e-5, which would scale the whole row). G lanes per row (G a
// power of two, at most 32): lane l of the group takes columns l, l + G, ...,
// so consecutive lanes read consecutive columns. float32 rows of at most
// G * LSE_REGS stay in registers (one read, one exp per element); others take two
// passes, the first keeping an online maximum and sum per lane. A NaN
// log-gamma makes its whole row NaN.
#ifndef GPUMCMC_LSE_REGS
#define GPUMCMC_LSE_REGS 8
#endif

// One row r of K log-gammas normalised by the G lanes of its group, of which
// this lane is number `sub`.
template <typename T>
__device__ __forceinline__ void lse_row(T* __restrict__ r, int K, int G, int sub, unsigned int mask, int log_out) {
    const T ninf = -fp_special<T>::inf();
    // float64 rows take the two passes: with 8 doubles per lane in registers
    // the kernel ran slower (occupancy) than rereading the row from cache.
    if (sizeof(T) == 4 && K <= G * GPUMCMC_LSE_REGS) {
        T v[GPUMCMC_LSE_REGS];
        T m = ninf;
#pragma unroll
        for (int j = 0; j < GPUMCMC_LSE_REGS; ++j) {
            const int k = sub + j * G;
            v[j] = k < K ? r[k] : ninf;
            m = fmax(m, v[j]);  // a NaN is caught by the sum below
        }
        const T mall = group_max(m, G, mask);
        T s = T(0);
#pragma unroll
        for (int j = 0; j < GPUMCMC_LSE_REGS; ++j) {
            const T e = exp(v[j] - mall);  // 0 for the padding (NaN only if the row is)
            s += e;
            if (!log_out) v[j] = e;
            else v[j] -= mall;
        }
        const T tot = group_sum(s, G, mask);
        const T ltot = log(tot);
#pragma unroll
        for (int j = 0; j < GPUMCMC_LSE_REGS; ++j) {
            const int k = sub + j * G;
            if (k < K) r[k] = log_out ? v[j] - ltot : v[j] / tot;
        }
        return;
    }
    T m = ninf, s = T(0);
    for (int k = sub; k < K; k += G) {
        const T lg = r[k];
        if (lg > m) {
            s = s * exp(m - lg) + T(1);
            m = lg;
        } else {
            s += exp(lg - m);  // also NaN: the row's sum becomes NaN
        }
    }
    const T mall = group_max(m, G, mask);
    s = (m == ninf) ? s * T(0) : s * exp(m - mall);  // a lane of NaNs alone keeps its NaN
    const T tot = group_sum(s, G, mask);
    const T ltot = log(tot);
    for (int k = sub; k < K; k += G) {
        const T lg = r[k];
        r[k] = log_out ? (lg - mall) - ltot : exp(lg - mall) / tot;
    }
}

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK)
lse_rows(T* __restrict__ x, long long n_rows, int K, int G, int log_out) {
    const unsigned int mask = group_mask(G);
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const int sub = (int)(tid & (G - 1));
    const long long groups = (long long)gridDim.x * blockDim.x / G;
    for (long long row = tid / G; row < n_rows; row += groups) lse_row(x + row * K, K, G, sub, mask, log_out);
}

// Blocks per SM that dirichlet_draw is built to fit: in float32, 4 blocks (64
// registers) ran clearly faster than 3 and than the compiler's own choice
// without a bound (76 registers, 3 blocks); in float64, 64 registers at 4
// blocks (as the compiler chose before the float32 attempts queue) ran faster
// than an explicit bound of 1 block (80 registers). The numbers:
// benchmarks/NOTES.md, "kernels_cu/gamma.cu".
#ifndef GPUMCMC_DIRICHLET_MIN_BLOCKS
#define GPUMCMC_DIRICHLET_MIN_BLOCKS 4
#endif

// Dirichlet rows in one pass: each warp takes chunks of R consecutive rows
// (R even when K is odd, so that a chunk starts on a whole pair), draws their
// log-gammas as gamma_draw does (the same pairs, so the same values), serves
// its queues, and normalises the chunk's rows as lse_rows does (G lanes per
// row) while they are still in cache: the same draws as gamma_draw (log)
// followed by lse_rows, with one launch and one trip to memory.
//
// Rows [row0, n_rows): row r draws gamma elements r K + k, so a launch from
// row0 > 0 gives rows row0.. the values that a launch over all the rows gives
// them (a shard of a larger batch draws its own rows with the counters of the
// whole). alpha and out point at row 0 (the caller shifts its pointers by
// -row0 K elements); row0 K must be even (a chunk starts on a whole pair).
template <typename T, typename S>
__device__ __forceinline__ void dirichlet_rows(GammaWarp<T, S>& w, T* __restrict__ out, long long n_rows,
                                               long long row0, int K, long long R, int G, int log_out) {
    const unsigned int mask = group_mask(G);
    const int sub = w.lane & (G - 1);
    const long long n_chunks = (n_rows - row0 + R - 1) / R;
    const long long n_warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long c = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; c < n_chunks; c += n_warps) {
        const long long r0 = row0 + c * R, r1 = min(r0 + R, n_rows);
        const long long e1 = r1 * K;  // elements [r0 K, e1); r0 K is even
        long long base = (r0 * K) >> 1;
        if (w.fast()) {
            base = w.template fast_rounds<1, true>(base, (e1 >> 1) - 32, 32, e1);
        } else {
            for (; base + 32 <= (e1 >> 1); base += 32) w.template pairs<true, false, 1>(base, e1);
        }
        for (; base < ((e1 + 1) >> 1); base += 32) w.template pairs<false, false, 1>(base, e1);
        w.flush();
        __syncwarp();  // every log-gamma of the chunk is in memory, seen by every lane
        for (long long row = r0 + w.lane / G; row < r1; row += 32 / G) lse_row(out + row * K, K, G, sub, mask, log_out);
        __syncwarp();  // the rows are read before the next chunk's queue entries are written
    }
}

template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK, GPUMCMC_DIRICHLET_MIN_BLOCKS)
dirichlet_draw(const T* __restrict__ alpha, T* __restrict__ out, long long n_rows, long long row0, int K, long long R,
               int G, unsigned int k0, unsigned int k1, unsigned int off_lo, unsigned int off_hi,
               const unsigned long long* __restrict__ off_dev, int log_out, unsigned long long* status,
               unsigned long long tag) {
    offset_from_device(off_dev, off_lo, off_hi);
    __shared__ GammaQueues<T> q;
    GammaWarp<T> w(q, alpha, 1, nullptr, 0, T(0), out, nullptr, make_uint2(k0, k1), off_lo, off_hi, 1, status, tag);
    dirichlet_rows(w, out, n_rows, row0, K, R, G, log_out);
}

// dirichlet_draw of the concentrations counts + prior (rows from row 0): its
// draws given the float array counts + prior, without that array's pass.
template <typename T>
__global__ void __launch_bounds__(GPUMCMC_GAMMA_BLOCK, GPUMCMC_DIRICHLET_MIN_BLOCKS)
dirichlet_counts_draw(const int* __restrict__ counts, T prior, T* __restrict__ out, long long n_rows, int K,
                      long long R, int G, unsigned int k0, unsigned int k1, unsigned int off_lo, unsigned int off_hi,
                      const unsigned long long* __restrict__ off_dev, int log_out, unsigned long long* status,
                      unsigned long long tag) {
    offset_from_device(off_dev, off_lo, off_hi);
    __shared__ GammaQueues<T> q;
    GammaWarp<T, int> w(q, counts, 1, nullptr, 0, T(0), out, nullptr, make_uint2(k0, k1), off_lo, off_hi, 1, status,
                        tag, prior);
    dirichlet_rows(w, out, n_rows, 0ll, K, R, G, log_out);
}

#ifndef __CUDACC_RTC__
// Offline builds (nvcc in CI) instantiate the templates so that their bodies
// are compiled; at run time NVRTC instantiates them through name_expressions.
#define GPUMCMC_GAMMA_INSTANTIATE_DYN(T, D)                                                                 \
    template __global__ void gamma_draw<T, D>(const T*, long long, const T*, long long, T, T*, long long,   \
                                              unsigned int, unsigned int, unsigned int, unsigned int,      \
                                              const unsigned long long*, int, int*, long long,             \
                                              unsigned long long*, unsigned long long*, unsigned long long); \
    template __global__ void gamma_counts_draw<T, D>(const int*, T, T*, long long, unsigned int, unsigned int, \
                                                     unsigned int, unsigned int, const unsigned long long*, int,   \
                                                     long long, unsigned long long*, unsigned long long*,        \
                                                     unsigned long long);
GPUMCMC_GAMMA_INSTANTIATE_DYN(float, false)
GPUMCMC_GAMMA_INSTANTIATE_DYN(float, true)
GPUMCMC_GAMMA_INSTANTIATE_DYN(double, false)
GPUMCMC_GAMMA_INSTANTIATE_DYN(double, true)
#undef GPUMCMC_GAMMA_INSTANTIATE_DYN
#define GPUMCMC_GAMMA_INSTANTIATE(T)                                                                       \
    template __global__ void beta_draw<T>(const T*, long long, const T*, long long, T*, long long,          \
                                          unsigned int, unsigned int, unsigned int, unsigned int,           \
                                          const unsigned long long*, unsigned long long*,                  \
                                          unsigned long long);                                             \
    template __global__ void lse_rows<T>(T*, long long, int, int, int);                                   \
    template __global__ void dirichlet_draw<T>(const T*, T*, long long, long long, int, long long, int,     \
                                               unsigned int, unsigned int, unsigned int, unsigned int,      \
                                               const unsigned long long*, int, unsigned long long*,         \
                                               unsigned long long);                                         \
    template __global__ void dirichlet_counts_draw<T>(const int*, T, T*, long long, int, long long, int,      \
                                                      unsigned int, unsigned int, unsigned int, unsigned int,   \
                                                      const unsigned long long*, int, unsigned long long*,      \
                                                      unsigned long long);
GPUMCMC_GAMMA_INSTANTIATE(float)
GPUMCMC_GAMMA_INSTANTIATE(double)
#undef GPUMCMC_GAMMA_INSTANTIATE
#endif
