// The status word: kernels that read their input note the first bad value
// they meet, so that a call needs no extra pass over the data to check it.
//
// A word is one 64-bit value in mapped pinned memory (one per thread, device
// and stream; see gpumcmc/_status.py), ~0 while nothing is wrong:
//
//   bits 63..44  the call: the launch's `tag` (its number since the word was
//                last read), passed pre-shifted
//   bits 43..4   the first bad row or element of that call (clamped)
//   bits  3..0   what is wrong with it (StatusCode)
//
// Writers take the minimum (atomicMin), so the word ends up naming the
// earliest call that met bad input, its first bad row and, for that row, the
// lowest code. A null word (validation off) turns every note into nothing.
// Notes happen only on the path of bad input, once per warp: the lanes that
// reach status_note together agree on their minimum and one of them writes it.
#pragma once

namespace gpumcmc {

enum StatusCode : unsigned {
    ST_NAN = 1,       // a value is NaN
    ST_INF = 2,       // a value is +inf (weights: inf; logits: +inf)
    ST_NEG = 3,       // a weight (products: a theta value) is negative
    ST_NEG_B = 4,     // products: a phi value is negative
    ST_ZERO = 5,      // no positive weight (logits: all -inf)
    ST_OVERFLOW = 6,  // the weights are finite but their sum is not
    ST_ROWS = 7,      // products: rows[t] out of range
    ST_COLS = 8,      // products: cols[t] out of range
    ST_PARAM = 9,     // a shape (gamma), alpha (Dirichlet) or a (beta) is not positive and finite
    ST_PARAM_B = 10,  // a scale (gamma) or b (beta) is not positive and finite
    ST_TINY = 11,     // the weights' positive total is too small to scale by a uniform
};

constexpr int STATUS_CODE_BITS = 4;
constexpr unsigned long long STATUS_INDEX_MAX = (1ull << 40) - 1;

// The word's value for `index` and `code`, without the call's tag.
__device__ __forceinline__ unsigned long long status_value(unsigned long long index, unsigned code) {
    return ((index < STATUS_INDEX_MAX ? index : STATUS_INDEX_MAX) << STATUS_CODE_BITS) | code;
}

// Note `code` at `index` for the calling lane. Lanes that call it together
// (on a path of bad input) combine their values first: one atomic per warp.
__device__ __forceinline__ void status_note(unsigned long long* word, unsigned long long tag,
                                            unsigned long long index, unsigned code) {
    if (word == nullptr) return;
    const unsigned mask = __activemask();
    const unsigned long long v = tag | status_value(index, code);
    unsigned long long best = v;
    for (unsigned m = mask; m != 0u; m &= m - 1u) {
        const unsigned long long o = __shfl_sync(mask, v, __ffs(m) - 1);
        best = o < best ? o : best;
    }
    if ((int)(threadIdx.x & 31u) == __ffs(mask) - 1) atomicMin(word, best);
}

}  // namespace gpumcmc
