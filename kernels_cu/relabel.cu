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
// Shared memory per warp: u, v, spc (double) and path, col4row, row4col, rem (int), SR, SC (bytes) of n
// entries each; the launcher passes lsa_shared_bytes(n).

#include <math_constants.h>

#define LSA_FULL 0xffffffffu
#define LSA_GROUP 8  // columns a lane loads at once

// The choice among equal path costs as one integer, larger first: a free column (a sink) before an
// assigned one; among free columns the later position of `rem`, among assigned ones the earlier.
__device__ __forceinline__ int lsa_tie_key(int free_col, int it) { return free_col ? (1 << 20) + it : (1 << 20) - 1 - it; }

// Is candidate (value a, key ka) chosen before (b, kb)? kb < 0: nothing chosen yet.
__device__ __forceinline__ bool lsa_before(double a, int ka, double b, int kb)
{
    return ka >= 0 && (kb < 0 || a < b || (a == b && ka > kb));
}

// perm[d, col4row[i]] = i for each of the D matrices cost[d] (n x n, row-major); status[0] = 1 where a
// matrix had no finite assignment (non-finite costs), and that matrix's perm is left unwritten.
extern "C" __global__ void __launch_bounds__(32) lsa_solve(const double* __restrict__ cost, int n,
                                                           long long* __restrict__ perm, int* __restrict__ status)
{
    extern __shared__ double lsa_smem[];
    double* u = lsa_smem;
    double* v = u + n;
    double* spc = v + n;
    int* path = reinterpret_cast<int*>(spc + n);
    int* col4row = path + n;
    int* row4col = col4row + n;
    int* rem = row4col + n;
    unsigned char* SR = reinterpret_cast<unsigned char*>(rem + n);
    unsigned char* SC = SR + n;
    const int lane = threadIdx.x;
    const double* C = cost + (long long)blockIdx.x * n * n;

    for (int t = lane; t < n; t += 32) {
        u[t] = 0.0; v[t] = 0.0; path[t] = -1; col4row[t] = -1; row4col[t] = -1;
    }
    __syncwarp();
    for (int cur = 0; cur < n; cur++) {
        for (int t = lane; t < n; t += 32) {
            rem[t] = n - t - 1; SR[t] = 0; SC[t] = 0; spc[t] = CUDART_INF;
        }
        __syncwarp();
        double minVal = 0.0;
        int i = cur, sink = -1, nrem = n;
        while (sink == -1) {
            if (lane == 0) SR[i] = 1;
            const double ui = u[i];
            const double* row = C + (long long)i * n;
            double bv = CUDART_INF;
            int bk = -1;  // the best candidate's tie key; its position in rem is recovered from the key
            for (int base = 0; base < nrem; base += 32 * LSA_GROUP) {
                // a group's loads first, so that their latencies overlap, then its updates
                int js[LSA_GROUP];
                double cs[LSA_GROUP], vs[LSA_GROUP];
#pragma unroll
                for (int g = 0; g < LSA_GROUP; g++) {
                    const int it = base + g * 32 + lane;
                    js[g] = it < nrem ? rem[it] : 0;
                }
#pragma unroll
                for (int g = 0; g < LSA_GROUP; g++) { cs[g] = __ldg(row + js[g]); vs[g] = v[js[g]]; }
#pragma unroll
                for (int g = 0; g < LSA_GROUP; g++) {
                    const int it = base + g * 32 + lane;
                    if (it < nrem) {
                        const int j = js[g];
                        const double r = __dsub_rn(__dsub_rn(__dadd_rn(minVal, cs[g]), ui), vs[g]);
                        double s = spc[j];
                        if (r < s) { path[j] = i; spc[j] = r; s = r; }
                        const int f = row4col[j] == -1;
                        // SciPy's scan takes a column only below the lowest so far, or equal to it and
                        // free: an infinite path cost only when free
                        const int key = lsa_tie_key(f, it);
                        if ((s < CUDART_INF || f) && lsa_before(s, key, bv, bk)) { bv = s; bk = key; }
                    }
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
            __syncwarp();  // every lane's spc and path writes seen before the next step reads them
            minVal = bv;
            const int j = rem[bi];
            const int rj = row4col[j];
            if (rj == -1) sink = j; else i = rj;
            __syncwarp();
            if (lane == 0) { SC[j] = 1; rem[bi] = rem[nrem - 1]; }
            nrem--;
            __syncwarp();
        }
        if (lane == 0) u[cur] = __dadd_rn(u[cur], minVal);
        for (int t = lane; t < n; t += 32) {
            if (SR[t] && t != cur) u[t] = __dadd_rn(u[t], __dsub_rn(minVal, spc[col4row[t]]));
            if (SC[t]) v[t] = __dsub_rn(v[t], __dsub_rn(minVal, spc[t]));
        }
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
        __syncwarp();
    }
    long long* out = perm + (long long)blockIdx.x * n;
    for (int t = lane; t < n; t += 32) out[col4row[t]] = t;
}

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
