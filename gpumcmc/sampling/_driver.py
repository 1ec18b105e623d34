"""The run driver every model shares: iterations, burn-in, thinning, chains,
monitors, a progress bar, checkpoints, and draws stored as ``(chain, draw, ...)``.

A model supplies a functional kernel, in the style of BlackJAX::

    state = init(...)                         # a NamedTuple of arrays
    state, info = step(rng, state)            # one sweep, no host sync

and :func:`run` loops over it. Array fields of a state carry the chains as
their leading axis, so all chains advance in one launch; the model keys its
Philox counters by chain. The driver itself synchronises the GPU only where it
must read something: at a monitor, a checkpoint, and the end of the run. Those
are also the points where input errors recorded by the kernels in deferred
mode are raised (``gpumcmc.check()``).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import _validate
from .. import backend as _backend
from ..random._generator import Generator, default_rng
from ._tree import _fields

__all__ = ["Monitor", "Trace", "run"]

_CHECKPOINT_VERSION = 1


class Monitor(NamedTuple):
    """A figure computed from the state every ``every`` iterations and shown on the progress bar.

    ``fn(state)`` returns a number, or one number per chain (the bar shows
    their mean). It may synchronise the GPU: it runs only every ``every``
    iterations, and at the last.
    """

    name: str
    fn: Callable[[Any], Any]
    every: int = 10


class Trace:
    """What :func:`run` returns.

    Attributes
    ----------
    draws : dict of str -> numpy.ndarray
        Each value ``collect`` returned, stacked as ``(chain, draw, ...)``.
    stats : dict of str -> numpy.ndarray
        Per-chain fields of the step's ``Info`` at the kept iterations, ``(chain, draw, ...)``.
    monitors : dict of str -> (numpy.ndarray, numpy.ndarray)
        For each monitor, the iterations (counted from 1, burn-in included) and its values there.
    state
        The final state (on the backend it ran on).
    n_chains, n_iter, burn_in, thin, seconds
        The run's settings and its wall time (of this call: a resumed run
        counts only its own part).
    """

    def __init__(self, draws, stats, monitors, state, n_chains, n_iter, burn_in, thin, seconds):
        self.draws = draws
        self.stats = stats
        self.monitors = monitors
        self.state = state
        self.n_chains = n_chains
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.seconds = seconds

    def __repr__(self) -> str:
        names = ", ".join(f"{k}{tuple(v.shape)}" for k, v in self.draws.items())
        return (f"Trace(chains={self.n_chains}, n_iter={self.n_iter}, burn_in={self.burn_in}, thin={self.thin}, "
                f"draws=[{names}], seconds={self.seconds:.3g})")

    def to_arviz(self, coords=None, dims=None, sample_stats: bool = True):
        """The draws as an ArviZ data object (ArviZ is imported here, and only here)."""
        from ._arviz import to_arviz

        return to_arviz(self.draws, self.stats if sample_stats else None, coords=coords, dims=dims)


def _rebuild(template, values: dict, prefix: str = ""):
    """A state of the template's structure and backends, from host values keyed by path."""
    if isinstance(template, tuple) and hasattr(template, "_fields"):
        return type(template)(*(_rebuild(getattr(template, n), values, f"{prefix}{n}/") for n in template._fields))
    key = prefix.rstrip("/")
    v = values[key]
    if template is None:
        return None
    if _backend.is_cupy_array(template):
        return _backend.get_backend("cupy").asarray(v)
    if isinstance(template, np.ndarray):
        return np.asarray(v)
    if isinstance(template, (bool, int, float, complex, str, np.generic)):
        return type(template)(v.item() if isinstance(v, np.ndarray) else v)
    raise TypeError(f"Cannot restore a state field {key!r} of type {type(template).__name__} from a checkpoint.")


def _storable(value) -> bool:
    return value is None or _backend.is_cupy_array(value) or isinstance(
        value, (np.ndarray, np.generic, bool, int, float, complex, str))


def _chains_of(value) -> int | None:
    shape = getattr(value, "shape", ())
    return int(shape[0]) if len(shape) >= 1 else None


class _Store:
    """Kept draws, preallocated on the draws' own backend as (draw, chain, ...)."""

    def __init__(self, n_draws: int):
        self.n_draws = n_draws
        self.buffers: dict[str, Any] = {}

    def put(self, index: int, values: dict) -> None:
        for name, v in values.items():
            buf = self.buffers.get(name)
            if buf is None:
                xp = _backend.get_array_module(v)
                v = xp.asarray(v)
                buf = xp.empty((self.n_draws, *v.shape), dtype=v.dtype)
                self.buffers[name] = buf
            buf[index] = _backend.get_array_module(buf).asarray(v)

    def host(self, count: int) -> dict:
        """The first ``count`` draws as NumPy arrays (chain, draw, ...)."""
        out = {}
        for name, buf in self.buffers.items():
            a = _backend.to_host(buf[:count])
            out[name] = np.moveaxis(a, 0, 1) if a.ndim >= 2 else a
        return out

    def load(self, saved: dict, count: int, xp) -> None:
        """Refill from host arrays (chain, draw, ...) holding ``count`` draws, onto ``xp``."""
        for name, a in saved.items():
            a = np.moveaxis(a, 1, 0) if a.ndim >= 2 else a
            buf = xp.empty((self.n_draws, *a.shape[1:]), dtype=a.dtype)
            buf[:count] = xp.asarray(a[:count])
            self.buffers[name] = buf


def _info_stats(info) -> dict:
    """Fields of an Info tuple that are arrays (one value or row per chain)."""
    if info is None:
        return {}
    if not (isinstance(info, tuple) and hasattr(info, "_fields")):
        return {}
    out = {}
    for name in info._fields:
        v = getattr(info, name)
        if _backend.is_cupy_array(v) or isinstance(v, np.ndarray):
            if v.ndim >= 1:
                out[name] = v
    return out


def _deferred():
    mode = getattr(_validate, "deferred", None)
    return mode() if mode is not None else contextlib.nullcontext()


def _check() -> None:
    check = getattr(_validate, "check", None)
    if check is not None:
        check()


def _progress_bar(total: int, desc: str | None, enabled: bool, initial: int = 0):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is a dependency; keep running without a bar if it is broken
        return None
    return tqdm(total=total, initial=initial, desc=desc, unit="it", mininterval=0.25, dynamic_ncols=True)


def _save_checkpoint(path: Path, state, rng: Generator, done: int, kept: int, store: _Store,
                     stats: _Store, monitors: dict, config: dict) -> None:
    arrays = {}
    for key, value in _fields(state):
        if not _storable(value):
            raise TypeError(f"State field {key!r} ({type(value).__name__}) cannot be checkpointed; "
                            "use arrays, numbers or strings.")
        if value is None:
            continue
        arrays[f"state/{key}"] = _backend.to_host(value) if hasattr(value, "shape") else np.asarray(value)
    for name, a in store.host(kept).items():
        arrays[f"draws/{name}"] = a
    for name, a in stats.host(kept).items():
        arrays[f"stats/{name}"] = a
    for name, (its, vals) in monitors.items():
        arrays[f"monitor_it/{name}"] = np.asarray(its, dtype=np.int64)
        arrays[f"monitor_val/{name}"] = np.asarray(vals, dtype=np.float64)
    seq = rng._seed_seq
    meta = dict(config, version=_CHECKPOINT_VERSION, done=done, kept=kept, offset=rng.offset,
                key=list(rng.key), entropy=str(seq.entropy), spawn_key=list(seq.spawn_key))
    arrays["meta"] = np.asarray(repr(meta))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    os.replace(tmp, path)


def _load_checkpoint(path: Path):
    """``(meta, arrays)`` of a checkpoint; ValueError naming the file if it cannot be read whole."""
    import ast
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as z:
            meta = ast.literal_eval(str(z["meta"]))
            data = {k: z[k] for k in z.files if k != "meta"}
        if not isinstance(meta, dict):
            raise ValueError("its metadata is not a dictionary")
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError, SyntaxError) as e:
        # A truncated file (a full disk, a copy cut short) or another file at the path.
        raise ValueError(f"The checkpoint {path} is damaged or is not a gpumcmc checkpoint "
                         f"({type(e).__name__}: {e}); delete it, or pass resume=False, to start the run "
                         "afresh (it is rewritten at the next checkpoint).") from e
    return meta, data


def run(step: Callable, state, rng=None, n_iter: int = 1000, *, burn_in: int = 0, thin: int = 1,
        collect: Callable | None = None, monitors=(), progress: bool = True, desc: str | None = None,
        checkpoint=None, checkpoint_every: int = 100, resume: bool = True, n_chains: int | None = None,
        callback: Callable | None = None, graph: bool = False) -> Trace:
    """Run ``burn_in + n_iter`` iterations of ``state, info = step(rng, state)``.

    Parameters
    ----------
    step : callable
        ``step(rng, state) -> (state, info)``: one sweep of every chain. It
        must not synchronise the GPU; the driver runs it in deferred
        validation mode, so input errors found by kernels surface at the next
        monitor, checkpoint or the end of the run.
    state : NamedTuple
        The initial state; array fields lead with the chain axis.
    rng : int, numpy.random.SeedSequence, gpumcmc Generator or None
        The stream the steps draw from. A resumed run restores its position.
    n_iter : int
        Iterations after burn-in. Every ``thin``-th of them is kept: the
        run stores ``n_iter // thin`` draws per chain.
    burn_in : int
        Iterations run first and not kept.
    collect : callable, optional
        ``collect(state, info) -> dict`` of arrays (leading chain axis) to keep
        at each kept iteration. Kept on the device during the run and copied to
        the host at the end.
    monitors : sequence of Monitor
        Figures shown on the progress bar and returned in ``Trace.monitors``.
    progress : bool
        Show a tqdm progress bar (terminal or notebook).
    desc : str, optional
        The bar's label.
    checkpoint : path, optional
        Save the state, the kept draws and the generator's position there every
        ``checkpoint_every`` iterations (and at the end). If the file exists and
        ``resume`` is true, the run continues from it, and gives the same draws,
        bit for bit, as a run that was never interrupted.
    n_chains : int, optional
        The number of chains, for the record; read from the first array field
        of the state when not given.
    callback : callable, optional
        ``callback(iteration, state, info)`` after every iteration (it may
        synchronise; use monitors for periodic figures).
    graph : bool
        On the GPU, capture the sweep once as a CUDA graph and replay it
        (:func:`gpumcmc.sampling.graph_step`): one launch per sweep instead of
        one per kernel, for the same draws. The step must meet that
        function's conditions. No effect on NumPy.

    A step object with a ``monitored`` attribute has it set before each sweep
    (without ``graph``): True where a monitor reads the state after that sweep
    (every ``every``-th iteration and the last), False elsewhere, so a step can
    skip work that only its monitors need.

    Returns
    -------
    Trace

    Examples
    --------
    >>> import numpy as np
    >>> from typing import NamedTuple
    >>> import gpumcmc
    >>> from gpumcmc.sampling import run, Monitor
    >>> class S(NamedTuple):
    ...     x: np.ndarray            # (chain,) current value of each chain
    >>> def step(rng, s):            # an AR(1) chain, all chains at once
    ...     return S(0.5 * s.x + rng.normal(size=s.x.shape)), None
    >>> rng = gpumcmc.random.default_rng(1, backend="numpy")
    >>> tr = run(step, S(np.zeros(4)), rng, n_iter=200, burn_in=50, thin=2,
    ...          collect=lambda s, info: {"x": s.x}, progress=False,
    ...          monitors=[Monitor("mean", lambda s: float(s.x.mean()), every=50)])
    >>> tr.draws["x"].shape
    (4, 100)
    """
    n_iter = _validate.check_int(n_iter, "n_iter", 0)
    burn_in = _validate.check_int(burn_in, "burn_in", 0)
    thin = _validate.check_int(thin, "thin", 1)
    checkpoint_every = _validate.check_int(checkpoint_every, "checkpoint_every", 1)
    monitors = tuple(monitors)
    for m in monitors:
        if not isinstance(m, Monitor):
            raise TypeError("monitors must be gpumcmc.sampling.Monitor(name, fn, every) tuples.")
        _validate.check_int(m.every, f"Monitor {m.name!r} every", 1)
    if not callable(step):
        raise TypeError("step must be a callable step(rng, state) -> (state, info).")
    # A step with a ``monitored`` attribute is told before each eager sweep whether a monitor reads it.
    gate = not graph and hasattr(step, "monitored")
    if graph:
        from ._graph import graph_step

        step = graph_step(step)
    rng = default_rng(rng)
    if n_chains is None:
        n_chains = next((c for _, v in _fields(state) if (c := _chains_of(v)) is not None), 1)
    total = burn_in + n_iter
    n_draws = n_iter // thin
    store, stats = _Store(n_draws), _Store(n_draws)
    mon: dict[str, tuple[list, list]] = {m.name: ([], []) for m in monitors}
    config = dict(n_iter=n_iter, burn_in=burn_in, thin=thin, n_chains=n_chains)
    done = kept = 0

    path = Path(checkpoint) if checkpoint is not None else None
    if path is not None and resume and path.exists():
        meta, data = _load_checkpoint(path)
        if meta.get("version") != _CHECKPOINT_VERSION:
            raise ValueError(f"{path} was written by another version of gpumcmc; delete it or pass resume=False.")
        for k, v in config.items():
            if meta.get(k) != v:
                raise ValueError(f"{path} was saved with {k}={meta.get(k)}, this run has {k}={v}; "
                                 "use the same settings, or another checkpoint path, or resume=False.")
        if tuple(meta["key"]) != tuple(rng.key):
            raise ValueError(f"{path} was saved with another random_state/seed; pass the same seed to resume, "
                             "or use resume=False to start afresh.")
        state = _rebuild(state, {k[len("state/"):]: v for k, v in data.items() if k.startswith("state/")})
        done, kept = int(meta["done"]), int(meta["kept"])
        rng._offset = int(meta["offset"])
        xp = next((_backend.get_array_module(v) for _, v in _fields(state) if _backend.is_cupy_array(v)), np)
        store.load({k[len("draws/"):]: v for k, v in data.items() if k.startswith("draws/")}, kept, xp)
        stats.load({k[len("stats/"):]: v for k, v in data.items() if k.startswith("stats/")}, kept, xp)
        for m in monitors:
            if f"monitor_it/{m.name}" in data:
                mon[m.name] = (list(data[f"monitor_it/{m.name}"]), list(data[f"monitor_val/{m.name}"]))

    bar = _progress_bar(total, desc, progress, initial=done)
    t0 = time.perf_counter()
    info = None
    try:
        with _deferred():
            for it in range(done, total):
                if gate:
                    step.monitored = it + 1 == total or any((it + 1) % m.every == 0 for m in monitors)
                state, info = step(rng, state)
                i = it - burn_in
                if i >= 0 and (i + 1) % thin == 0 and kept < n_draws:
                    if collect is not None:
                        store.put(kept, collect(state, info))
                    stats.put(kept, _info_stats(info))
                    kept += 1
                last = it + 1 == total
                shown = {}
                for m in monitors:
                    if (it + 1) % m.every == 0 or last:
                        value = np.asarray(_backend.to_host(m.fn(state)), dtype=np.float64)
                        mon[m.name][0].append(it + 1)
                        mon[m.name][1].append(value)
                        shown[m.name] = float(np.mean(value))
                if shown:
                    _check()
                    if bar is not None:
                        bar.set_postfix({k: f"{v:.5g}" for k, v in shown.items()}, refresh=False)
                if callback is not None:
                    callback(it + 1, state, info)
                if path is not None and ((it + 1) % checkpoint_every == 0 or last):
                    _check()
                    _save_checkpoint(path, state, rng, it + 1, kept, store, stats, mon, config)
                if bar is not None:
                    bar.update(1)
            _check()
    finally:
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - t0
    monitors_out = {}
    for name, (its, vals) in mon.items():
        v = np.asarray(vals, dtype=np.float64)
        monitors_out[name] = (np.asarray(its, dtype=np.int64), v)
    return Trace(store.host(kept), stats.host(kept), monitors_out, state, n_chains, n_iter, burn_in, thin, seconds)
