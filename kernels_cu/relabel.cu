// Linear assignments of many square cost matrices at once, one warp each: the relabelling of mixture
// draws (gpumcmc/models/mixture/relabel.py, which builds the costs and holds the host path).
//
// The method is the shortest augmenting path of Crouse (2016), step for step as SciPy's
// linear_sum_assignment runs it (scipy/optimize/rectangular_lsap), so that a draw's permutation is the one
// SciPy returns for the same costs, near ties and exact ties included:
//   - rows are added in order; each searches a shortest path over the columns still unlabelled, kept in
//     the array `rem`, which starts in reverse order and loses the chosen position by a swap with its last;
//   - reduced costs are formed as ((minVal + c_ij) - u_i) - v_j, in that order, in float64;
//   - the column chosen at each step is the one of least path cost; among equal costs an unassigned column
//     (a sink) wins, the last such position of `rem`; with none, the first position.
// The warp shares a step's columns among its lanes and picks the column by a reduction whose order gives
// that same choice; the duals and the augmentation follow SciPy's loops.
//
// Shared memory per warp: u and the path costs (double), path, col4row, row4col and rem (int) and SR (a
// byte) of n entries each; the launcher passes _lsa_shared_bytes(n).

#include <math_constants.h>

#define LSA_FULL 0xffffffffu

// The choice among equal path costs as one integer, larger first: a free column (a sink) before an
// assigned one; among free columns the later position of `rem`, among assigned ones the earlier.
__device__ __forceinline__ int lsa_tie_key(int free_col, int it) { return free_col ? (1 << 20) + it : (1 << 20) - 1 - it; }

// Is candidate (value a, key ka) chosen before (b, kb)? kb < 0: nothing chosen yet.
__device__ __forceinline__ bool lsa_before(double a, int ka, double b, int kb)
{
    return ka >= 0 && (kb < 0 || a < b || (a == b && ka > kb));
}

// perm[d, col4row[i]] = i for each of the D matrices cost[d] (n x n, row-major, n <= 32 S); status[0] = 1
// where a matrix had no finite assignment (non-finite costs), and that matrix's perm is left unwritten.
//
// Column j belongs to lane j % 32, slot j / 32: its path cost, its dual v_j, whether it is still unlabelled
// (SciPy's `remaining`, the complement of SC) and its position in `rem` stay in that lane's registers, so
// that a step reads the cost row coalesced and touches shared memory only where a path improves. `rem`
// itself (position -> column) is kept in shared memory for the chosen position and the swap.
template <int S>
__global__ void __launch_bounds__(32) lsa_solve(const double* __restrict__ cost, int n,
                                                long long* __restrict__ perm, int* __restrict__ status)
{
    extern __shared__ double lsa_smem[];
    double* u = lsa_smem;
    double* spc_sh = u + n;  // the path costs, written at the end of a row's search for the duals of rows
    int* path = reinterpret_cast<int*>(spc_sh + n);
    int* col4row = path + n;
    int* row4col = col4row + n;
    int* rem = row4col + n;
    unsigned char* SR = reinterpret_cast<unsigned char*>(rem + n);
    const int lane = threadIdx.x;
    const double* C = cost + (long long)blockIdx.x * n * n;

    double spc[S], v[S];
    int pos[S];
    unsigned valid = 0, freecol = 0;  // bit s: column s * 32 + lane exists / has no row yet
#pragma unroll
    for (int s = 0; s < S; s++) {
        v[s] = 0.0;
        if (s * 32 + lane < n) valid |= 1u << s;
    }
    freecol = valid;
    for (int t = lane; t < n; t += 32) { u[t] = 0.0; path[t] = -1; col4row[t] = -1; row4col[t] = -1; }
    __syncwarp();
    for (int cur = 0; cur < n; cur++) {
        unsigned active = valid;  // bit s: column s * 32 + lane still unlabelled in this row's search
#pragma unroll
        for (int s = 0; s < S; s++) { spc[s] = CUDART_INF; pos[s] = n - 1 - (s * 32 + lane); }
        for (int t = lane; t < n; t += 32) { rem[t] = n - 1 - t; SR[t] = 0; }
        __syncwarp();
        double minVal = 0.0;
        int i = cur, sink = -1, nrem = n;
        while (sink == -1) {
            if (lane == 0) SR[i] = 1;
            const double ui = u[i];
            const double* row = C + (long long)i * n;
            double cs[S];
#pragma unroll
            for (int s = 0; s < S; s++) cs[s] = (active >> s) & 1u ? __ldg(row + s * 32 + lane) : 0.0;
            double bv = CUDART_INF;
            int bk = -1;
#pragma unroll
            for (int s = 0; s < S; s++) {
                if ((active >> s) & 1u) {
                    const double r = __dsub_rn(__dsub_rn(__dadd_rn(minVal, cs[s]), ui), v[s]);
                    if (r < spc[s]) { path[s * 32 + lane] = i; spc[s] = r; }
                    const int f = (freecol >> s) & 1u;
                    // SciPy's scan takes a column only below the lowest so far, or equal to it and free: an
                    // infinite path cost only when free
                    const int key = lsa_tie_key(f, pos[s]);
                    if ((spc[s] < CUDART_INF || f) && lsa_before(spc[s], key, bv, bk)) { bv = spc[s]; bk = key; }
                }
            }
            for (int o = 16; o; o >>= 1) {
                const double ov = __shfl_xor_sync(LSA_FULL, bv, o);
                const int ok = __shfl_xor_sync(LSA_FULL, bk, o);
                if (lsa_before(ov, ok, bv, bk)) { bv = ov; bk = ok; }
            }
            const int bi = bk < 0 ? -1 : (bk >= (1 << 20) ? bk - (1 << 20) : (1 << 20) - 1 - bk);
            if (bi < 0 || !(bv < CUDART_INF)) {  // no finite path: SciPy reports the matrix infeasible
                if (lane == 0) atomicExch(status, 1);
                return;
            }
            minVal = bv;
            __syncwarp();  // the path writes of every lane, and rem as it stands, before they are read
            const int j = rem[bi], moved = rem[nrem - 1];
            const int rj = row4col[j];
            if (rj == -1) sink = j; else i = rj;
            if ((j & 31) == lane) active &= ~(1u << (j >> 5));  // SC[j]: labelled
            if ((moved & 31) == lane) {  // the last position's column takes the chosen one's place
#pragma unroll
                for (int s = 0; s < S; s++) if (s == (moved >> 5)) pos[s] = bi;
            }
            __syncwarp();
            if (lane == 0) rem[bi] = moved;
            nrem--;
            __syncwarp();
        }
        // the duals, as SciPy updates them: rows of SR through their columns' path costs, columns of SC
#pragma unroll
        for (int s = 0; s < S; s++) {
            if ((valid >> s) & 1u) spc_sh[s * 32 + lane] = spc[s];
            if (((valid & ~active) >> s) & 1u) v[s] = __dsub_rn(v[s], __dsub_rn(minVal, spc[s]));
        }
        __syncwarp();
        if (lane == 0) u[cur] = __dadd_rn(u[cur], minVal);
        for (int t = lane; t < n; t += 32)
            if (SR[t] && t != cur) u[t] = __dadd_rn(u[t], __dsub_rn(minVal, spc_sh[col4row[t]]));
        __syncwarp();
        if (lane == 0) {  // augment along the path back to the current row
            int j = sink;
            while (true) {
                const int r = path[j];
                row4col[j] = r;
                const int prev = col4row[r];
                col4row[r] = j;
                j = prev;
                if (r == cur) break;
            }
        }
        if ((sink & 31) == lane) freecol &= ~(1u << (sink >> 5));
        __syncwarp();
    }
    long long* out = perm + (long long)blockIdx.x * n;
    for (int t = lane; t < n; t += 32) out[col4row[t]] = t;
}

template __global__ void lsa_solve<8>(const double*, int, long long*, int*);
template __global__ void lsa_solve<16>(const double*, int, long long*, int*);
template __global__ void lsa_solve<32>(const double*, int, long long*, int*);

// relabel_costs' matrices in one pass, the same bits as its array expression on CuPy:
//   cost[d, i, j] = sum_q ((means[d, i, q] - ref[j, q]) / scale[q])^2 + wc (sqrt w[d, i] - sqrt ref_w[j])^2
// with each operation rounded alone (no fused multiply-adds), the square as SQUARE, and the sum over q in the
// order of CuPy's reduction of a short contiguous axis (CUB's segmented sum: lanes q and q + 1 first, then
// pairs of pairs). weights null: no weight term. One thread per entry.
__device__ __forceinline__ double lsa_square(double x, int by_pow) { return by_pow ? pow(x, 2.0) : __dmul_rn(x, x); }

extern "C" __global__ void relabel_costs_fused(const double* __restrict__ means, const double* __restrict__ weights,
                                               const double* __restrict__ ref, const double* __restrict__ ref_w,
                                               const double* __restrict__ scale, double wc, int by_pow,
                                               long long D, int k, int p, double* __restrict__ cost)
{
    const long long total = D * k * k;
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total;
         t += (long long)gridDim.x * blockDim.x) {
        const int j = (int)(t % k);
        const long long di = t / k;  // d * k + i
        const double* x = means + di * p;
        const double* r = ref + (long long)j * p;
        double acc[64];
        for (int q = 0; q < p; q++) acc[q] = lsa_square(__ddiv_rn(__dsub_rn(x[q], r[q]), scale[q]), by_pow);
        for (int off = 1; off < p; off <<= 1)
            for (int q = 0; q + off < p; q += 2 * off) acc[q] = __dadd_rn(acc[q], acc[q + off]);
        double c = acc[0];
        if (weights) c = __dadd_rn(c, __dmul_rn(wc, lsa_square(__dsub_rn(sqrt(weights[di]), sqrt(ref_w[j])), by_pow)));
        cost[t] = c;
    }
}
