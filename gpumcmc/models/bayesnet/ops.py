"""The CUDA launchers of kernels_cu/bayesnet.cu and their NumPy twin: ``sweep`` (one colour group's missing
cells in every replica), ``counts`` (the CPT cells' counts) and ``normalise`` (the CPT draw's row-wise
log-normalisation, and its exp). The twin keeps the kernels' counter layout and double-precision operations in
their order, so both give the same draws for a seed.

The CPTs travel as ``tables``, float64 (2, C): row 0 the log-probabilities, row 1 the probabilities. The
sweep multiplies probabilities (no exponential per cell, one Philox call for four cells) and falls back to log
space only where the products underflow (kernels_cu/bayesnet.cu says when).
"""
from __future__ import annotations

import functools

import numpy as np

from gpumcmc import _kernel_args, _loader
from gpumcmc._config import config

FILE = "bayesnet.cu"
_KMAX = (4, 16, 64, 256)  # instantiations of bn_sweep: the largest number of states they take
_TINY = 2.0**-960  # BN_TINY of bayesnet.cu: below this sum of the products a cell is drawn in log space


def _parents(plan, f):
    """Node f's parents as (column, stride) pairs."""
    return [(int(plan.par[q]), int(plan.par_stride[q])) for q in range(plan.par_ptr[f], plan.par_ptr[f + 1])]


def _row_code(plan, f, z="z") -> str:
    """C code of node f's CPT row for the case at ``z``: its parents' states times their strides, written in."""
    return " + ".join(f"(int){z}[{p}] * {st}" for p, st in _parents(plan, f)) or "0"


def _net_cases(plan) -> str:
    """The body of bayesnet.cu's ``BN_NET_CASES`` for ``plan``: one ``case v:`` a node, computing what
    ``bn_products`` computes for a cell of v (its table's row, each child's factor in the children's order,
    the cumulative sums) with the node's states, table offsets, parents, children and strides written in as
    constants, in the same operations and order, so the same values."""
    row = functools.partial(_row_code, plan)
    cases = []
    for v in range(plan.V):
        K = int(plan.card[v])
        body = [f"const double* tv = pc + ({int(plan.toff[v])} + ({row(v)}) * {K});"]
        body += [f"p[{k}] = tv[{k}];" for k in range(K)]
        kids = [(int(plan.ch[q]), int(plan.ch_stride[q])) for q in range(plan.ch_ptr[v], plan.ch_ptr[v + 1])]
        if kids:
            body.append(f"const int xv = z[{v}];")
        for c, st in kids:
            body.append(f"{{ const int base = ({row(c)}) - xv * {st}; "
                        f"const double* tc = pc + ({int(plan.toff[c])} + z[{c}]);")
            body += [f"p[{k}] = __dmul_rn(p[{k}], tc[(base + {k * st}) * {int(plan.card[c])}]);" for k in range(K)]
            body.append("}")
        body += [f"cum = __dadd_rn(cum, p[{k}]); p[{k}] = cum;" for k in range(K)]
        cases.append(f"case {v}: if constexpr ({K} <= KMAX) {{ {' '.join(body)} }} break;")
    return " ".join(cases)


def _net_count(plan) -> str:
    """The body of bayesnet.cu's ``BN_NET_COUNT`` for ``plan``: each node's CPT cell in each of a thread's
    rows, with the node's table offset, states, parents and strides written in, added by ``bn_count_add``."""
    out = []
    for v in range(plan.V):
        row = _row_code(plan, v, "z[u]")
        out.append(f"{{ int cell[BN_COUNT_ROWS]; _Pragma(\"unroll\") for (int u = 0; u < BN_COUNT_ROWS; ++u) "
                   f"cell[u] = {int(plan.toff[v])} + ({row}) * {int(plan.card[v])} + z[u][{v}]; "
                   f"bn_count_add(h, in, cell); }}")
    return " ".join(out)


def _net_reg_count(plan) -> str:
    """The body of bayesnet.cu's ``BN_NET_REG_COUNT`` for ``plan``: each node's CPT cell in each of a thread's
    rows (as :func:`_net_count` makes it) added to the thread's register counts ``r`` by one compare-add a cell
    of the node's table, so that no atomic is made per row."""
    out = []
    for v in range(plan.V):
        row = _row_code(plan, v, "z[u]")
        K, off = int(plan.card[v]), int(plan.toff[v])
        adds = " ".join(f"r[{off + j}] += in[u] & (c == {j});" for j in range(int(plan.toff[v + 1]) - off))
        out.append(f"_Pragma(\"unroll\") for (int u = 0; u < BN_COUNT_ROWS; ++u) {{ "
                   f"const int c = ({row}) * {K} + z[u][{v}]; {adds} }}")
    return " ".join(out)


def _net_prelude(plan) -> str:
    """The source prelude that specialises bayesnet.cu's sweep and counts to ``plan``'s network: ""
    where its code would pass ``config.bayesnet_specialise_chars``; the counts in registers where the network
    has at most ``config.bayesnet_register_cells`` CPT cells."""
    code, count = _net_cases(plan), _net_count(plan)
    if len(code) + len(count) > config.bayesnet_specialise_chars:
        return ""
    out = f"#define BN_NET_CASES {code}\n#define BN_NET_COUNT {count}\n"
    if plan.C <= config.bayesnet_register_cells:
        out += f"#define BN_NET_REG_C {int(plan.C)}\n#define BN_NET_REG_COUNT {_net_reg_count(plan)}\n"
    return out


def _row_of(rows, pars):
    """Row index (intp) of a CPT for every case in ``rows`` (..., columns): sum over the parents'
    (column, stride) of the column's state times the stride."""
    r = np.zeros(rows.shape[:-1], dtype=np.intp)
    for j, st in pars:
        r += rows[..., j].astype(np.intp, copy=False) * st
    return r


class _NumpyOps:
    """The NumPy twin of the kernels of bayesnet.cu."""

    def __init__(self, plan):
        self.plan = plan

    def _cells(self, b, c):
        """Colour ``c``'s missing cells of part ``b``, node by node: (v, their cases, their numbers in the
        whole batch (uint64), the columns of Z that v's Markov blanket reads, v's column among them, v's
        parents' (column, stride) and each child's (table offset, card, column, stride of v, parents'
        (column, stride))). Made once per upload of the part, as the GPU launches are."""
        cache = b.launches = b.launches if b.launches is not None else {}
        got = cache.get(("cells", c))
        if got is None:
            P, a, e, got = self.plan, int(b.gptr[c]), int(b.gptr[c + 1]), []
            nodes = b.node[a:e]
            for v in P.groups[c]:
                sel = np.flatnonzero(nodes == v)
                if not len(sel):
                    continue
                chs = [(int(P.ch[q]), int(P.ch_stride[q])) for q in range(P.ch_ptr[v], P.ch_ptr[v + 1])]
                cols = sorted({v, *(p for p, _ in _parents(P, v)), *(h for h, _ in chs),
                               *(p for h, _ in chs for p, _ in _parents(P, h))})
                at = {col: j for j, col in enumerate(cols)}
                kids = [(int(P.toff[h]), int(P.card[h]), at[h], s, [(at[p], st) for p, st in _parents(P, h)])
                        for h, s in chs]
                got.append((v, b.case[a + sel].astype(np.intp), (int(b.g0[c]) + sel).astype(np.uint64),
                            np.array(cols, dtype=np.intp), at[v], [(at[p], st) for p, st in _parents(P, v)], kids))
            cache[("cells", c)] = got
        return got

    def sweep(self, Z, m, b, c, tables, key, off, bad):
        """Draw every missing cell of colour group ``c`` in replicas 0..m-1 of ``Z`` (in place), from the
        CPTs ``tables`` (float64 (2, C): log-probabilities, probabilities)."""
        from gpumcmc.random._philox import Words, philox32

        P, chunks = self.plan, -(-int(b.Mtot) // 128)
        logc, pc = tables[0], tables[1]
        for v, cs, pos, cols, jv, vpars, kids in self._cells(b, c):
            # (m, Mv, the blanket's columns), gathered with take rather than fancy indexing, the faster of
            # the two here (benchmarks/NOTES.md)
            rows = np.take(np.take(Z[:m], cs, axis=1), cols, axis=2).astype(np.intp)
            K = int(P.card[v])
            tv = _row_of(rows, vpars)
            tv *= K
            tv += int(P.toff[v])
            xv = rows[..., jv]
            # each child's (table offset + its state, its row with v = 0, v's stride in it, its card)
            legs = [(toff + rows[..., jc], _row_of(rows, cpars) - xv * s, s, Kc) for toff, Kc, jc, s, cpars in kids]
            p = [pc.take(tv + k) for k in range(K)]
            for tc, base, s, Kc in legs:
                for k in range(K):
                    p[k] = p[k] * pc.take(tc + (base + k * s) * Kc)
            cum, cums = 0.0, []
            for k in range(K):
                cum = cum + p[k]
                cums.append(cum)
            ok = np.ones(cum.shape, dtype=bool)
            slow = ~(cum >= _TINY)  # NaN too
            if slow.any():  # in log space, the kernel's second pass
                at = np.nonzero(slow)
                lp = [logc.take(tv[at] + k) for k in range(K)]
                for tc, base, s, Kc in legs:
                    for k in range(K):
                        lp[k] = lp[k] + logc.take(tc[at] + (base[at] + k * s) * Kc)
                mx = lp[0]
                for k in range(1, K):
                    mx = np.where(lp[k] > mx, lp[k], mx)
                ok[at] = mx > -1.0e308
                low = 0.0
                with np.errstate(invalid="ignore"):
                    for k in range(K):
                        low = low + np.exp(lp[k] - mx)
                        cums[k][at] = low
                cum[at] = low
            # Philox counters (r ceil(Mtot / 128) + pos // 128) 32 + pos % 32, word (pos // 32) % 4
            idx = ((np.arange(m, dtype=np.uint64)[:, None] * np.uint64(chunks) + (pos >> np.uint64(7))[None])
                   * np.uint64(32) + (pos & np.uint64(31))[None]).ravel()
            n, hi = idx.size, idx >> np.uint64(32)
            c1 = int(hi[0]) if hi[0] == hi[-1] else hi.astype(np.uint32)
            words = philox32(idx.astype(np.uint32), c1, off & 0xFFFFFFFF, off >> 32, int(key[0]), int(key[1]),
                             Words(n), n)
            which = np.broadcast_to(((pos >> np.uint64(5)) & np.uint64(3)).astype(np.intp), (m, len(pos))).ravel()
            w = np.choose(which, words)
            u = (w.astype(np.float64) + 0.5) * 2.0**-32  # u01_f64_from32
            target = u.reshape(cum.shape) * cum
            draw = np.zeros(target.shape, dtype=np.intp)
            for ck in cums:
                draw += ck < target
            Z[:m, cs, v] = np.where(ok, np.minimum(draw, K - 1), xv)
            if not ok.all():
                bad[0] = 1

    def counts(self, Z, m, n):
        """Counts of every CPT cell over replicas 0..m-1 and every case (int64, length C)."""
        P = self.plan
        rows, out = Z[:m].reshape(-1, P.V), np.zeros(P.C, dtype=np.int64)
        for v in range(P.V):
            cell = P.toff[v] + _row_of(rows, _parents(P, v)) * int(P.card[v]) + rows[:, v]
            out += np.bincount(cell, minlength=P.C)
        return out

    def normalise(self, x, out=None):
        """The CPT tables from log-gammas ``x`` (C,): ``out`` (float64 (2, C), default a new array) gets the
        row-wise log-normalisation of x (max and sum in order, as the kernel) in row 0 and its exp in row 1.
        ``out[0]`` may be ``x`` itself."""
        P = self.plan
        start, lens = P.row_ptr[:-1], np.diff(P.row_ptr)
        mx = x[start].copy()
        for k in range(1, int(lens.max())):
            sel = lens > k
            xk = x[start[sel] + k]
            mx[sel] = np.where(xk > mx[sel], xk, mx[sel])
        s = np.zeros(len(start))
        for k in range(int(lens.max())):
            sel = lens > k
            s[sel] = s[sel] + np.exp(x[start[sel] + k] - mx[sel])
        out = np.empty((2, len(x))) if out is None else out
        np.subtract(x, np.repeat(mx + np.log(s), lens), out=out[0])
        np.exp(out[0], out=out[1])
        return out


class _GpuOps:
    """Launchers of the kernels of bayesnet.cu (same interface as :class:`_NumpyOps`)."""

    def __init__(self, plan):
        import cupy as cp

        self.plan, self.cp = plan, cp
        self.d = {k: cp.asarray(getattr(plan, k)) for k in
                  ("card", "toff", "par_ptr", "par", "par_stride", "ch_ptr", "ch", "ch_stride", "row_ptr")}
        # the sweep's instantiation per colour group: the smallest KMAX that holds its largest node
        self.kmax = [next(k for k in _KMAX if k >= int(plan.card[g].max())) for g in plan.groups]
        self.names = tuple(f"bn_sweep<{k}>" for k in sorted(set(self.kmax)))  # only these are compiled
        self._counts = self._net = None

    def _fn(self, name):
        prelude = ""
        if config.bayesnet_specialise:  # the network written into the sweep (bn_products_net), where not too long
            if self._net is None:
                self._net = _net_prelude(self.plan)
            prelude = self._net
        return _loader.get_function(FILE, name, self.names, config.bayesnet_defines, prelude=prelude)

    def _sweep_args(self, b, c, m):
        """The launch of colour ``c``'s sweep of part ``b`` with m replicas but for the per-call arguments:
        (launcher, grid, block, the other arguments by name), made once per upload of the part's cell lists.
        The arguments are packed into one buffer (:class:`gpumcmc._loader.PackedLaunch`): a sweep is a few
        launches a device and iteration, queued from one host thread for every device."""
        cache = b.launches = b.launches if b.launches is not None else {}
        got = cache.get((c, m))
        if got is None:
            a, e, P, d = int(b.gptr[c]), int(b.gptr[c + 1]), self.plan, self.d
            launch = _loader.packed_launcher(self._fn(f"bn_sweep<{self.kmax[c]}>"), FILE, "bn_sweep", "double")
            block = dict(config.bayesnet_defines).get("BN_BLOCK", 256)
            # a warp a chunk of 128 cell numbers (bayesnet.cu): the chunks that this range of cells touches
            warps = (int(b.g0[c]) + (e - a) - 1) // 128 - int(b.g0[c]) // 128 + 1
            gx = max(1, min(-(-warps * 32 // block), -(-_loader.sm_count() * 32 // m)))
            # the addresses of arrays the part (b.case_d, b.node_d) and these launchers (self.d) keep
            fixed = _kernel_args.part(
                FILE, "bn_sweep", n=int(b.n), V=int(P.V), cell_case=b.case_d[a:e].data.ptr,
                cell_node=b.node_d[a:e].data.ptr, Mc=e - a, cell0=int(b.g0[c]), Mtot=int(b.Mtot), C=int(P.C),
                **{k: d[k].data.ptr for k in ("card", "toff", "par_ptr", "par", "par_stride", "ch_ptr", "ch",
                                              "ch_stride")})
            got = cache[(c, m)] = (launch, (gx, m), block, fixed)
        return got

    def sweep(self, Z, m, b, c, tables, key, off, bad):
        if b.gptr[c] == b.gptr[c + 1]:
            return
        launch, grid, block, fixed = self._sweep_args(b, c, m)
        launch(grid, block, self.cp.cuda.get_current_stream().ptr,
               *_kernel_args.packed(FILE, "bn_sweep", Z=Z.data.ptr, tab=tables.data.ptr, k0=int(key[0]),
                                    k1=int(key[1]), off_lo=off & 0xFFFFFFFF, off_hi=off >> 32,
                                    off_dev=_loader.device_offset(), bad=bad.data.ptr, **fixed))

    def counts(self, Z, m, n):
        P, d, cp = self.plan, self.d, self.cp
        if self._counts is None:
            self._counts = cp.empty(P.C, dtype=cp.int32)
        out = self._counts  # one buffer, read (by the CPT draw or the all-reduce) before the next call
        out.data.memset_async(0, out.nbytes)
        fn = self._fn("bn_counts")
        shared = P.C <= config.bayesnet_shared_cells
        smem, rows = 4 * P.C if shared else 0, m * n
        block = dict(config.bayesnet_defines).get("BN_COUNT_BLOCK", 256)
        grid = max(1, min(-(-rows // block), _loader.sm_count() * _loader.resident_blocks(fn, block, smem)))
        _loader.packed_launcher(fn, FILE, "bn_counts", "double")(
            grid, block, cp.cuda.get_current_stream().ptr,
            *_kernel_args.packed(FILE, "bn_counts", Z=Z.data.ptr, rows=rows, V=int(P.V), card=d["card"].data.ptr,
                                 toff=d["toff"].data.ptr, par_ptr=d["par_ptr"].data.ptr, par=d["par"].data.ptr,
                                 par_stride=d["par_stride"].data.ptr, counts=out.data.ptr, C=int(P.C),
                                 use_shared=int(shared)),
            shared_mem=smem)
        return out

    def normalise(self, x, out=None):
        fn = self._fn("bn_normalise")
        R = len(self.plan.row_ptr) - 1
        out = self.cp.empty((2, self.plan.C)) if out is None else out
        _loader.launch(fn, R, _kernel_args.args(FILE, "bn_normalise", x=x, out=out, row_ptr=self.d["row_ptr"],
                                                R=_loader.i32(R)), block=128)
        return out
