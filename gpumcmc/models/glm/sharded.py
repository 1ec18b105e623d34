"""The Bayesian GLM's sweep with its rows, or its groups, split over devices, on the sampler protocol.

Both sweeps are :class:`gpumcmc.sampling.Collective` algorithms: their steps are written against
``reduce``, the all-reduce that :func:`gpumcmc.sampling.sharded` supplies.

``BayesianGLM(devices=...)`` splits the rows (:func:`over_rows` over :func:`row_parts`): per coordinate
and pass of the slice sampler, every shard's candidate log-likelihood sums over its rows (the local
part), their sum, and every device's decisions from it (the update), by :func:`_run_passes` on NumPy
(:func:`_twin_eval`, :func:`_twin_decide`) and on the GPUs (:class:`.ops._ShardedPasses`).

``HierarchicalGLM(devices=...)`` splits the groups (:func:`over_groups` over :func:`group_parts`): each
device sweeps whole groups by the single-device step, and the groups' coefficients are summed once a
sweep for the draw of ``mu, Sigma``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ... import _validate, backend as _backend
from ..._config import config
from ...glm import pointwise_loglik
from ...shards import Replica, balanced_cuts
from ...sampling import Collective
from .algorithm import SliceInfo, SliceState, _draw_hyper, _init_data, _init_state, _sweep_coefs, sweep_randoms
from .ops import _PMAX, _chunk_plan, _Passes, _prior_terms, _ShardedPasses, _tuned_width

__all__ = ["GroupPart", "ShardedGroupState", "ShardedSliceState", "allreduce_bytes", "group_bounds", "group_parts",
           "groups_allreduce_bytes", "over_groups", "over_rows", "row_parts", "shard_passes"]


class ShardedSliceState(NamedTuple):
    """The state of :func:`over_rows`: the global fields once, on local shard 0's device, and ``eta`` per shard."""

    beta: object    # (C, 1, K) coefficients, on local shard 0's device
    width: object   # (C, 1, K) slice step widths, on local shard 0's device
    eta: tuple      # per local shard, (C, N_i) linear predictor of its rows
    it: object      # (C,) iteration counter, on local shard 0's device


def shard_passes(max_shrink: int = 24) -> int:
    """Passes per coordinate of the sharded sweep: the first (``x0``, the stepping-out points and the
    first shrinkage proposals), then enough passes of ``_PMAX`` proposals for ``max_shrink`` of them
    (the first pass evaluates none when the bracket stepped out)."""
    return 1 + -(-int(max_shrink) // _PMAX)


def row_parts(X, y, shards, family="bernoulli", n_chains=4) -> list:
    """Each local shard's part of the rows for :func:`over_rows`, on its device: ``X`` (N, K) and ``y``
    (host arrays, or CuPy arrays on local shard 0's GPU) split by ``shards.bounds``, as :func:`.algorithm.init`
    holds one group's data (on the GPU with its split into chunks for ``n_chains`` chains)."""
    N, K = X.shape
    if N < shards.world:
        raise ValueError(f"{N} rows cannot be split over {shards.world} shards: use fewer devices.")
    parts, ys = shards.scatter(X), shards.scatter(y)
    data = []
    for i, yi in enumerate(ys):
        with shards.on(i):
            Xi, parts[i] = parts[i], None  # the row-major part is dropped once transposed
            data.append(_init_data(Xi, yi, family, n_chains, None, None)[0])
            del Xi
    return data


def _first_bracket(xp, x0, w, u, max_out):
    """(L0, R0, J, Jr) of the first pass, as glm_first_bracket forms them: the bracket of width w placed
    by u[0], and the stepping-out budgets split by u[1] (J to the left, Jr = max_out - 1 - J)."""
    L0 = x0 - w * u[0]
    J = xp.floor(max_out * u[1]).astype(np.int64)
    return L0, L0 + w, J, (max_out - 1) - J


def _pass_points(xp, first, x0, w, bracket, st, us, max_out, d1, max_shrink):
    """A pass's candidates (C, G, _PMAX) in the dtype of x0 and their count (C, G), as glm_pass_points
    forms them (unused slots hold x0). ``us`` (max_shrink, C, G): the coordinate's shrinkage uniforms."""
    C, G = x0.shape
    pts = xp.broadcast_to(x0[..., None], (C, G, _PMAX)).copy()
    if first:
        L0, R0, J, _ = bracket
        m = max_out
        if m > 1:
            Ls, Rs = [L0], [R0]
            for _ in range(m - 2):
                Ls.append(Ls[-1] - w)
                Rs.append(Rs[-1] + w)
            Ls, Rs = xp.stack(Ls, axis=-1), xp.stack(Rs, axis=-1)                # (C, G, m - 1)
            t = xp.arange(m - 1)
            right = xp.take_along_axis(Rs, xp.clip(t - J[..., None], 0, m - 2), axis=-1)
            pts[..., 1:m] = xp.where(t < J[..., None], Ls, right)
        a, b = L0, R0
        n = min(d1, max_shrink)
        for j in range(n):
            x = a + us[j] * (b - a)
            pts[..., m + j] = x
            lower = x < x0
            a, b = xp.where(lower, x, a), xp.where(lower, b, x)
        return pts, xp.full((C, G), m + n, dtype=np.int64)
    a, b, s0 = st["L"], st["R"], st["S"]
    for j in range(_PMAX):
        u = xp.take_along_axis(us, xp.minimum(s0 + j, max_shrink - 1)[None], axis=0)[0]
        x = a + u * (b - a)
        pts[..., j] = x
        lower = x < x0
        a, b = xp.where(lower, x, a), xp.where(lower, b, x)
    return pts, xp.clip(max_shrink - s0, 0, _PMAX)


def _twin_points(xp, dv, k, first, max_out, d1, max_shrink):
    """One pass's ``(x0, live, bracket, candidates, count)`` in the device state ``dv``, as both kernels
    of the pass form them."""
    x0, w = dv["beta"][:, :, k].copy(), dv["width"][:, :, k]
    live = xp.ones(x0.shape, dtype=bool) if first else ~dv["settled"]
    bracket = _first_bracket(xp, x0, w, dv["u"][k], max_out) if first else None
    pts, count = _pass_points(xp, first, x0, w, bracket, dv, dv["us"][k], max_out, d1, max_shrink)
    return x0, live, bracket, pts, count


def _twin_eval(xp, d, eta, k, x0, pts, count, live, family, sigma_noise):
    """The twin of glm_slice_shard_eval on one shard (one group): the log-likelihood sums over the
    shard's rows at every candidate, (C, 1, _PMAX) float64, zeros past each count and where not live.
    ``config.glm_shard_elements`` bounds the elements (chains x candidates x rows) evaluated together."""
    C = x0.shape[0]
    P = int(count[live].max()) if live.any() else 0
    out = xp.zeros((C, 1, _PMAX), dtype=np.float64)
    if P == 0:
        return out
    pd = (pts - x0[..., None])[:, 0, :P]                                        # (C, P)
    xk = d.Xt[k]
    step_p = max(1, config.glm_shard_elements // max(1, C * eta.shape[1]))
    for a in range(0, P, step_p):
        e = eta[:, None, :] + pd[:, a:min(P, a + step_p), None] * xk[None, None, :]    # (C, p, Ni)
        ll = pointwise_loglik(e, d.y, family, sigma_noise, xp, d.lgy)
        out[:, 0, a:min(P, a + step_p)] = ll.sum(axis=-1, dtype=np.float64)
    keep = (xp.arange(_PMAX) < count[..., None]) & live[..., None]
    return xp.where(keep, out, 0.0)


def _twin_decide(xp, dv, sums, k, first, points, max_out, max_shrink, n_warmup, e):
    """The twin of glm_slice_decide: Neal's decisions of one pass for every (chain, group) from the
    all-reduced sums (C, G, _PMAX) at the pass's ``points`` (:func:`_twin_points`), in the device state
    ``dv`` (beta, width, the pass state, dpend, fb). Returns the evaluations."""
    x0, live, bracket, pts, count = points
    beta, width = dv["beta"], dv["width"]
    w = width[:, :, k]
    C, G = x0.shape
    pkk, muk, c = _prior_terms(xp, beta, dv["mu"], dv["prec"], k)
    z = pts - muk[..., None]
    F = sums - 0.5 * pkk[..., None] * z * z - z * c[..., None]                  # as _make_target's target
    xn, done = x0, xp.zeros((C, G), dtype=bool)
    if first:
        L0, R0, J, Jr = bracket
        logy = F[..., 0] - e
        a, b = L0, R0
        goL, goR, stepped = live, live, xp.zeros((C, G), dtype=bool)
        for j in range(max_out - 1):
            goL = goL & (J > j) & (F[..., 1 + j] > logy)
            fR = xp.take_along_axis(F, xp.clip(1 + J + j, 0, _PMAX - 1)[..., None], axis=-1)[..., 0]
            goR = goR & (Jr > j) & (fR > logy)
            a, b = xp.where(goL, a - w, a), xp.where(goR, b + w, b)
            stepped = stepped | goL | goR
        off = max_out
        nshr = xp.where(stepped, 0, count - max_out)  # proposals on (L0, R0) apply only without a step
        s = xp.zeros((C, G), dtype=np.int64)
    else:
        a, b, s, logy = dv["L"], dv["R"], dv["S"], dv["logy"]
        off, nshr = 0, count
    for j in range(_PMAX - off):
        act = live & ~done & (nshr > j)
        x = pts[..., off + j]
        s = s + act
        ok = act & (F[..., off + j] > logy)
        xn = xp.where(ok, x, xn)
        done = done | ok
        rej = act & ~ok
        lower = x < x0
        a, b = xp.where(rej & lower, x, a), xp.where(rej & ~lower, x, b)
    still = live & ~done & (s < max_shrink)
    settle = live & ~still
    for key, v in (("L", a), ("R", b), ("S", s), ("logy", logy)):
        dv[key] = xp.where(still, v, dv[key])
    dv["settled"] = xp.where(live, ~still, dv["settled"])
    xn = xp.where(settle, xn, x0)
    delta = xn - x0
    beta[:, :, k] = xn
    dv["dpend"] = xp.where(settle, delta, dv["dpend"])
    width[:, :, k] = _tuned_width(xp, settle & (dv["it"] < n_warmup)[:, None], w, delta)
    dv["fb"] = dv["fb"] + (settle & ~done)
    return int(count[live].max()) if live.any() else 0


def over_rows(family, sigma_noise, n_warmup, max_steps_out=4, max_shrink=24) -> Collective:
    """The flat model's slice-within-Gibbs sweep with its rows split over the shards, as a
    :class:`gpumcmc.sampling.Collective` over :func:`row_parts`; ``sharded(over_rows(...), shards)`` runs it.

    ``init(rng, parts, shards, n_chains=4, prior_scale=2.5)`` gives the :class:`ShardedSliceState` of
    :func:`.algorithm.init` (``rng`` is not used) and makes what every sweep reuses.

    ``step(rng, state, parts, shards, reduce)`` is :func:`.algorithm.step` (one group) with its
    log-density evaluations split: per coordinate and pass every shard evaluates the pass's candidates
    over its rows (at most ``_PMAX``), ``reduce`` sums them (``chains x _PMAX`` float64 values), and every
    device takes Neal's decisions from them in its own copy of the state: the same inputs, so the same
    decisions, with no broadcast and no host synchronisation within the sweep. The GPU runs
    :func:`shard_passes` passes (3 for ``max_shrink=24``; one with nothing open returns at once), NumPy
    stops once every chain has settled. The random numbers are drawn on local shard 0 in the order of
    :func:`.algorithm.step` and copied to the other devices once a sweep.

    With one shard the draws equal ``devices=None`` (on the GPU, up to a coordinate that needs more than
    two passes of proposals, which ``glm_slice_pass`` finishes in one block); with several the sums add
    the same terms in another order, so a decision can differ where a candidate's log-density lies within
    rounding of the slice level.
    """
    m = int(max_steps_out)
    if not 1 <= m < _PMAX:
        raise ValueError(f"max_steps_out must be between 1 and {_PMAX - 1} with devices=, got {max_steps_out}.")
    if int(max_shrink) < 1:
        raise ValueError(f"max_shrink must be at least 1, got {max_shrink}.")
    max_shrink = int(max_shrink)
    n_pass = shard_passes(max_shrink)
    made: dict = {}  # what init makes for the steps: the prior's copies, the device copies, the passes

    def init_(rng, parts, shards, n_chains=4, prior_scale=2.5):
        xp = shards.xp
        K, dt = parts[0].Xt.shape[0], parts[0].Xt.dtype
        etas = []
        for i, d in enumerate(parts):
            with shards.on(i):
                etas.append(xp.zeros((n_chains, d.Xt.shape[1]), dtype=dt))
        with shards.on(0):
            st = _init_state(xp, n_chains, 1, K, 0, dt, prior_scale)
        d1 = max(1, min(config.glm_spec_shrink, _PMAX - m, max_shrink))
        dev_of, first_shard = _device_copies(shards)
        made.update(dev_of=dev_of, first_shard=first_shard, mu_r=Replica(shards, st.mu),
                    prec_r=Replica(shards, st.prec))
        if xp is np:
            made["passes"] = lambda dvs, etas: _twin_passes(shards, parts, dvs, etas, dev_of, first_shard, family,
                                                            sigma_noise, n_warmup, m, max_shrink, d1)
        else:
            made["passes"] = _ShardedPasses(shards, parts, dev_of, first_shard, (st.mu, st.prec), family,
                                            sigma_noise, n_warmup, m, max_shrink, d1)
        return ShardedSliceState(st.beta, st.width, tuple(etas), st.it)

    def step(rng, state, parts, shards, reduce):
        xp = shards.xp
        gpu = xp is not np
        C, G, K = state.beta.shape
        with shards.on(0):
            draws = sweep_randoms(rng, (C, G, K), state.beta.dtype, max_shrink)
        dvs = _device_states(shards, made["first_shard"], made["mu_r"], made["prec_r"], state, draws)
        etas = list(state.eta)
        if gpu:
            for i in range(len(parts)):
                with shards.on(i):
                    etas[i] = etas[i].copy()  # moved in place by the kernels
        evals = _run_passes(K, n_pass, made["passes"](dvs, etas), reduce)
        lls = []
        for i, d in enumerate(parts):
            dv = dvs[made["dev_of"][i]]
            with shards.on(i):
                if gpu:  # the last coordinate's step, as the twin adds it
                    etas[i] += dv["dpend"] * d.Xt[K - 1][None, :]
                else:
                    etas[i] = etas[i] + dv["dpend"] * d.Xt[K - 1][None, :]
                lls.append(xp.ascontiguousarray(
                    pointwise_loglik(etas[i], d.y, family, sigma_noise, xp, d.lgy).sum(axis=1, dtype=np.float64)))
        ll = reduce(lls)[0]
        with shards.on(0):
            dv = dvs[0]
            fallbacks = dv["fb"].sum(axis=1).astype(np.int64)
            new = ShardedSliceState(dv["beta"], dv["width"], tuple(etas), state.it + 1)
            info = SliceInfo(xp.full((C,), -1 if gpu else evals, dtype=np.int64), fallbacks, ll)
        return new, info

    return Collective(init_, step)


def _device_copies(shards):
    """One copy of the sweep's state per distinct device (shards of one GPU share it, and it is decided
    once there): ``(dev_of, first_shard)``, each local shard's copy and each copy's first local shard."""
    devs, dev_of = [], []
    for dev in shards.devices:
        if dev not in devs:
            devs.append(dev)
        dev_of.append(devs.index(dev))
    return dev_of, [dev_of.index(j) for j in range(len(devs))]


def _device_states(shards, first_shard, mu_r, prec_r, state, draws):
    """The sweep's state on each distinct device: beta and width (copies, moved in place), the
    prior, the iteration counter, the random numbers, the pass state (int32 flags and counts on the GPU)."""
    xp = shards.xp
    gpu = xp is not np
    C, G, K = state.beta.shape
    reps = [Replica(shards, a) for a in (state.beta, state.width, state.it) + draws]
    out = []
    for j, i in enumerate(first_shard):
        with shards.on(i):
            beta, width, it, e, u, us = (r(i) for r in reps)
            dt, count, flag = beta.dtype, np.int32 if gpu else np.int64, np.int32 if gpu else bool
            # (a copy for shard 0's device; the others' replicas are fresh copies already)
            dv = dict(beta=beta.copy() if j == 0 else beta, width=width.copy() if j == 0 else width,
                      mu=mu_r(i), prec=prec_r(i), it=it, e=e, u=u, us=us,
                      L=xp.zeros((C, G), dtype=dt), R=xp.zeros((C, G), dtype=dt), S=xp.zeros((C, G), dtype=count),
                      logy=xp.zeros((C, G), dtype=np.float64), settled=xp.zeros((C, G), dtype=flag),
                      dpend=xp.zeros((C, G), dtype=dt), fb=xp.zeros((C, G), dtype=count))
            if gpu:
                for name in ("e", "u", "us", "mu", "prec"):
                    dv[name] = xp.ascontiguousarray(dv[name])
            out.append(dv)
    return out


def _twin_passes(shards, data, dvs, etas, dev_of, first_shard, family, sigma_noise, n_warmup, m, max_shrink,
                 d1) -> _Passes:
    """The sweep's :class:`_Passes` on NumPy shards: the local part is each shard's :func:`_twin_eval`
    (after the previous coordinate's step of its ``eta``, which the kernels add in the first pass;
    ``etas`` is moved in place), the update each device's :func:`_twin_decide` at the same points, and
    a coordinate's passes stop once every chain has settled (free on NumPy; the GPU runs every pass)."""
    xp = shards.xp
    points = {}  # each device's candidates of the current pass

    def local(k, first):
        points.clear()
        sums = []
        for i in range(len(data)):
            if first and k > 0:  # the previous coordinate's step
                etas[i] = etas[i] + dvs[0]["dpend"] * data[i].Xt[k - 1][None, :]
            with shards.on(i):
                if dev_of[i] not in points:
                    points[dev_of[i]] = _twin_points(xp, dvs[dev_of[i]], k, first, m, d1, max_shrink)
                x0, live, _, pts, count = points[dev_of[i]]
                sums.append(_twin_eval(xp, data[i], etas[i], k, x0, pts, count, live, family, sigma_noise))
        return sums

    def update(k, first, sums):
        evals = 0
        for j, i in enumerate(first_shard):
            with shards.on(i):
                evals += _twin_decide(xp, dvs[j], sums[i], k, first, points[j], m, max_shrink, n_warmup,
                                      dvs[j]["e"][k])
        return evals

    return _Passes(local, update, lambda: bool(dvs[0]["settled"].all()), lambda: None)


def _run_passes(K, n_pass, passes: _Passes, reduce) -> int:
    """The sweep's passes, the same on NumPy and on the GPUs: per coordinate and pass (``first`` is 1 in
    a coordinate's first), every shard's local part, their sum over the shards (``reduce``) and every
    device's update. Returns the log-density evaluations (0 on the GPU, which does not count them)."""
    evals = 0
    try:
        for k in range(K):
            for p in range(n_pass):
                first = int(p == 0)
                sums = passes.local(k, first)
                reduce(sums)
                evals += passes.update(k, first, sums)
                if passes.settled():
                    break
    finally:
        passes.close()
    return evals


def allreduce_bytes(n_chains: int, K: int, max_shrink: int = 24) -> int:
    """Bytes all-reduced per sweep of ``BayesianGLM(devices=...)`` on the GPU with ``K`` coefficients
    (intercept included): per coordinate :func:`shard_passes` all-reduces of ``_PMAX`` float64 sums a
    chain, and the log-likelihood at the end."""
    return 8 * n_chains * (K * shard_passes(max_shrink) * _PMAX + 1)


class ShardedGroupState(NamedTuple):
    """The state of :func:`over_groups`: the global fields on local shard 0's device, the rest per shard."""

    beta: object    # (C, G, K) every group's coefficients, on local shard 0's device
    mu: object      # (C, K) the groups' mean, on local shard 0's device
    prec: object    # (C, K, K) its precision
    sigma: object   # (C, K, K) its covariance
    it: object      # (C,) iteration counter
    betas: tuple    # per local shard, (C, G, K) every group's coefficients on its device (the all-reduce's copy)
    eta: tuple      # per local shard, (C, N_i) linear predictor of its rows
    width: tuple    # per local shard, (C, G_i, K) its groups' slice step widths


def group_bounds(sizes, world: int) -> list:
    """``world`` contiguous ranges ``(g0, g1)`` of the groups, about equal in rows, each of at least one
    group (the same answer in every process, from the group sizes alone)."""
    G = len(sizes)
    if G < world:
        raise ValueError(f"{G} groups cannot be split over {world} shards (each holds whole groups): "
                         "use fewer devices.")
    cuts = balanced_cuts(sizes, world)
    return [(cuts[r], cuts[r + 1]) for r in range(world)]


class GroupPart(NamedTuple):
    """One local shard's part of the groups, for :func:`over_groups` (:func:`group_parts` makes them)."""

    data: object      # the shard's groups' data for the single-device sweep (.algorithm._Data), on its device
    groups: tuple     # (g0, g1): the shard holds groups g0 .. g1 - 1
    n_groups: int     # G, the groups of the whole data set


def group_parts(X, y, gid, shards, family="bernoulli", n_chains=4) -> list:
    """Each local shard's :class:`GroupPart` for :func:`over_groups`: its whole groups' rows, on its device.

    ``X`` (N, K), ``y`` (host arrays, or CuPy arrays on local shard 0's GPU) with their rows sorted by
    group, ``gid`` (N,) the group of each row, 0 to G - 1, on the host. Each shard holds whole groups
    (:func:`group_bounds`); on the GPU every shard splits its groups' rows into chunks as one device
    would split them all (for ``n_chains`` chains), so each group's sums are those of one device."""
    N, K = X.shape
    xp = shards.xp
    gid = np.asarray(_backend.to_host(gid), dtype=np.int64)
    G = int(gid[-1]) + 1 if N else 0
    sizes = np.bincount(gid, minlength=G)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    bounds = [group_bounds(sizes, shards.world)[r] for r in shards.ranks]
    shape = None
    if xp is not np:
        with shards.on(0):
            whole = _chunk_plan(xp, starts, ends, n_chains)
            shape = (whole.chunk_rows, whole.block)
    parts = []
    for i, (g0, g1) in enumerate(bounds):
        a, b = int(starts[g0]), int(ends[g1 - 1])
        with shards.on(i):
            # a copy made under the shard's device lands there (as Shards.scatter copies)
            Xi = np.ascontiguousarray(X[a:b]) if xp is np else xp.array(X[a:b], copy=True, order="C")
            yi = np.ascontiguousarray(y[a:b]) if xp is np else xp.array(y[a:b], copy=True, order="C")
            d, _ = _init_data(Xi, yi, family, n_chains, xp.asarray(gid[a:b] - g0), shape)
            del Xi
            parts.append(GroupPart(d, (g0, g1), G))
    return parts


def over_groups(family, sigma_noise, n_warmup, hyper, max_steps_out=4, max_shrink=24) -> Collective:
    """The hierarchical model's sweep with its groups split over the shards (each holds whole groups:
    their rows, coefficients, widths and eta), as a :class:`gpumcmc.sampling.Collective` over
    :func:`group_parts`; ``sharded(over_groups(...), shards)`` runs it.

    ``init(rng, parts, shards, n_chains=4, prior_scale=1.0)`` gives the :class:`ShardedGroupState` of
    :func:`.algorithm.init` (``rng`` is not used). ``step(rng, state, parts, shards, reduce)``: the random
    numbers of :func:`.algorithm.step` are drawn on local shard 0 for every group, so group g's numbers
    are those of one device whatever shard holds it; each shard sweeps its groups by the single-device
    kernels (a group's rows are all on one shard); ``reduce`` gathers every group's coefficients as the
    sum of (C, G, K) arrays holding zeros outside each shard's groups (exact), and ``mu, Sigma`` are
    drawn from them on local shard 0. On the GPU the draws equal ``devices=None`` bit for bit; on NumPy
    a group's sums come from a running sum over the shard's rows, so they equal up to its rounding.
    """
    if hyper is None:
        raise ValueError("the groups' coefficients need their hyperprior: pass a HyperPrior.")

    def init_(rng, parts, shards, n_chains=4, prior_scale=1.0):
        xp = shards.xp
        G = parts[0].n_groups
        K, dt = parts[0].data.Xt.shape[0], parts[0].data.Xt.dtype
        etas, widths, betas = [], [], []
        for i, part in enumerate(parts):
            g0, g1 = part.groups
            with shards.on(i):
                st = _init_state(xp, n_chains, g1 - g0, K, part.data.Xt.shape[1], dt, prior_scale)
                etas.append(st.eta)
                widths.append(st.width)
                betas.append(xp.zeros((n_chains, G, K), dtype=dt))
        with shards.on(0):
            st = _init_state(xp, n_chains, G, K, 0, dt, prior_scale)
        return ShardedGroupState(betas[0], st.mu, st.prec, st.sigma, st.it, tuple(betas), tuple(etas),
                                 tuple(widths))

    def step(rng, state, parts, shards, reduce):
        xp = shards.xp
        C, G, K = state.beta.shape
        with shards.on(0):
            draws = sweep_randoms(rng, (C, G, K), state.beta.dtype, max_shrink)
        reps = [Replica(shards, a) for a in (state.mu, state.prec, state.sigma, state.it) + draws]
        fulls, lls, fbs, etas, widths = [], [], [], [], []
        for i, part in enumerate(parts):
            g0, g1 = part.groups
            data = part.data
            with shards.on(i):
                mu, prec, sigma, it, e, u, us = (r(i) for r in reps)
                e, u, us = (xp.ascontiguousarray(a[..., g0:g1]) for a in (e, u, us))
                st = SliceState(xp.ascontiguousarray(state.betas[i][:, g0:g1]), state.eta[i], state.width[i], mu,
                                prec, sigma, it)
                beta_i, eta_i, width_i, fb, _ = _sweep_coefs(xp, st, data, family, sigma_noise, n_warmup,
                                                             max_steps_out, max_shrink, e, u, us)
                full = xp.zeros((C, G, K), dtype=state.beta.dtype)
                full[:, g0:g1] = beta_i
                fulls.append(full)
                fbs.append(xp.ascontiguousarray(fb, dtype=np.int64))
                etas.append(eta_i)
                widths.append(width_i)
                ll = pointwise_loglik(eta_i, data.y, family, sigma_noise, xp, data.lgy)
                lls.append(xp.ascontiguousarray(ll.sum(axis=1, dtype=np.float64)))
        reduce(fulls)
        reduce(lls)
        reduce(fbs)
        with shards.on(0):
            mu, prec, sigma = _draw_hyper(rng, fulls[0], hyper, xp)
            new = ShardedGroupState(fulls[0], mu, prec, sigma, state.it + 1, tuple(fulls), tuple(etas),
                                    tuple(widths))
            info = SliceInfo(xp.full((C,), -1, dtype=np.int64), fbs[0], lls[0])
        return new, info

    return Collective(init_, step)


def groups_allreduce_bytes(n_chains: int, G: int, K: int, itemsize: int = 4) -> int:
    """Bytes all-reduced per sweep of ``HierarchicalGLM(devices=...)``: every group's coefficients
    (``itemsize`` bytes each: 4 for float32), then the log-likelihood and the fallbacks (8 bytes a chain
    each)."""
    return n_chains * (G * K * itemsize + 16)


_ROWS = "gpumcmc.sampling.sharded(over_rows(family, sigma_noise, n_warmup, max_steps_out, max_shrink), shards)"
_GROUPS = ("gpumcmc.sampling.sharded(over_groups(family, sigma_noise, n_warmup, hyper, max_steps_out, max_shrink), "
           "shards)")
init_sharded = _validate.gone("gpumcmc.models.glm", "init_sharded", f"{_ROWS}.init(rng, row_parts(X, y, shards, "
                              "family, n_chains), n_chains, prior_scale)")
make_sharded_step = _validate.gone("gpumcmc.models.glm", "make_sharded_step", f"the step of {_ROWS}, after its init")
init_groups_sharded = _validate.gone("gpumcmc.models.glm", "init_groups_sharded", f"{_GROUPS}.init(rng, group_parts("
                                     "X, y, gid, shards, family, n_chains), n_chains, prior_scale)")
make_groups_sharded_step = _validate.gone("gpumcmc.models.glm", "make_groups_sharded_step",
                                          f"the step of {_GROUPS}, after its init")
