"""The run driver every model shares: iterations, burn-in, thinning, chains,
monitors, a progress bar, checkpoints, and draws stored as ``(chain, draw, ...)``.

A model supplies a functional kernel, in the style of BlackJAX::

    state = init(...)                         # a NamedTuple of arrays
    state, info = step(rng, state)            # one sweep, no host sync

and :func:`run` loops over it. Array fields of a state carry the chains as
their leading axis, so all chains advance in one launch; the model keys its
Philox counters by chain. The driver itself synchronises the GPU only where it
must read something: at a monitor, a checkpoint, a stop condition's read and
the end of the run. Monitors, checkpoints and the end are also the points where
input errors recorded by the kernels in deferred mode are raised
(``gpumcmc.check()``).

A run of unknown length (an optimiser's iterations until they converge, nested
sampling until the evidence left is small) passes a :class:`Stop`: its
condition is read on the host every ``every`` iterations, ``n_iter`` becomes an
upper bound (or None: no bound), and the kept draws go into a store that
grows by doubling on the draws' device.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np

from .. import _validate
from .. import backend as _backend
from ..random._generator import Generator, default_rng
from ._tree import _fields

__all__ = ["Monitor", "Stop", "Trace", "run"]

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


class Stop(NamedTuple):
    """When a run of unknown length ends: ``fn(state, info)`` read on the host every ``every`` iterations.

    ``fn`` returns True to end the run after that iteration. The driver calls it
    after every ``every``-th iteration (counted from 1, burn-in included) and
    after the last one ``n_iter`` allows, and at no other time: it is the one
    host read the condition adds, so it may synchronise the GPU (keep ``every``
    as large as the condition allows where it does). With a ``name``, ``fn``
    returns ``(stop, value)``: ``value`` (a number, or None for nothing to show
    yet) is shown on the progress bar under ``name`` and kept in
    ``Trace.monitors[name]`` at the iterations it was read.

    A condition with a memory of its own (the value read last time) starts
    afresh when a run resumes from a checkpoint; one that reads only the state
    resumes bit for bit.
    """

    fn: Callable[[Any, Any], Any]
    every: int = 1
    name: str | None = None


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
    iterations : int
        The iterations run, burn-in included (a resumed run counts those
        before the checkpoint too): ``burn_in + n_iter`` unless a
        :class:`Stop` ended the run earlier.
    stopped : bool
        Whether a :class:`Stop` condition held (at its last read, which may be
        the last iteration ``n_iter`` allows).
    """

    def __init__(self, draws, stats, monitors, state, n_chains, n_iter, burn_in, thin, seconds,
                 iterations=None, stopped=False):
        self.draws = draws
        self.stats = stats
        self.monitors = monitors
        self.state = state
        self.n_chains = n_chains
        self.n_iter = n_iter
        self.burn_in = burn_in
        self.thin = thin
        self.seconds = seconds
        self.iterations = burn_in + n_iter if iterations is None else iterations
        self.stopped = stopped

    def __repr__(self) -> str:
        names = ", ".join(f"{k}{tuple(v.shape)}" for k, v in self.draws.items())
        ran = f", iterations={self.iterations}, stopped={self.stopped}" if self.stopped else ""
        return (f"Trace(chains={self.n_chains}, n_iter={self.n_iter}, burn_in={self.burn_in}, thin={self.thin}{ran}, "
                f"draws=[{names}], seconds={self.seconds:.3g})")

    def to_arviz(self, coords=None, dims=None, sample_stats: bool = True):
        """The draws as an ArviZ data object (ArviZ is imported here, and only here)."""
        from ._arviz import to_arviz

        return to_arviz(self.draws, self.stats if sample_stats else None, coords=coords, dims=dims)


def _rebuild(template, values: dict, prefix: str = ""):
    """A state of the template's structure and backends, from host values keyed by path."""
    if isinstance(template, tuple) and hasattr(template, "_fields"):
        return type(template)(*(_rebuild(getattr(template, n), values, f"{prefix}{n}/") for n in template._fields))
    if isinstance(template, (tuple, list)):  # a plain sequence (per-shard arrays): walked as _state_leaves does
        return type(template)(_rebuild(item, values, f"{prefix}{i}/") for i, item in enumerate(template))
    if template is None:  # not stored (a None field or item)
        return None
    key = prefix.rstrip("/")
    v = values[key]
    if _backend.is_cupy_array(template):
        with template.device:   # each field back on its own GPU (a sharded state spans several)
            return _backend.get_backend("cupy").asarray(v)
    if isinstance(template, np.ndarray):
        return np.asarray(v)
    if isinstance(template, (bool, int, float, complex, str, np.generic)):
        return type(template)(v.item() if isinstance(v, np.ndarray) else v)
    raise TypeError(f"Cannot restore a state field {key!r} of type {type(template).__name__} from a checkpoint.")


def _storable(value) -> bool:
    return value is None or _backend.is_cupy_array(value) or isinstance(
        value, (np.ndarray, np.generic, bool, int, float, complex, str))


def _same_layout(v, buf) -> bool:
    """Whether ``v`` is one C-ordered row of the C-ordered ``buf`` (same dtype and shape), so that a
    copy of its bytes stores it."""
    return (v.dtype == buf.dtype and v.shape == buf.shape[1:] and v.flags.c_contiguous
            and buf.flags.c_contiguous)


def _chains_of(value) -> int | None:
    shape = getattr(value, "shape", ())
    return int(shape[0]) if len(shape) >= 1 else None


class _Store:
    """Kept draws on the draws' own backend, (draw, chain, ...) by name.

    ``n_draws`` known in advance (a run without a stop condition): each
    buffer is allocated whole at the first draw. ``grow``: a run whose length a
    stop condition decides, with ``n_draws`` an upper bound (None: none): the
    buffers start at ``_FIRST`` draws and double on the device when full (one
    copy of what is kept at each doubling, so each draw is copied about twice
    in all), never past ``n_draws``. ``by_reference``: the arrays themselves
    are held, without a copy per draw, and stacked when read; for arrays that
    no later step writes.
    """

    _FIRST = 64

    def __init__(self, n_draws: int | None, grow: bool = False, by_reference: bool = False):
        self.n_draws = n_draws
        self.grow = grow
        self.by_reference = by_reference
        self.buffers: dict[str, Any] = {}

    def _capacity(self, at_least: int) -> int:
        if not self.grow:
            return self.n_draws
        cap = max(self._FIRST, at_least)
        return cap if self.n_draws is None else min(cap, self.n_draws)

    def put(self, index: int, values: dict) -> None:
        for name, v in values.items():
            if self.by_reference:  # the array itself: no launch (a number becomes a NumPy array)
                self.buffers.setdefault(name, []).append(v if hasattr(v, "shape") else np.asarray(v))
                continue
            buf = self.buffers.get(name)
            if buf is None:
                xp = _backend.get_array_module(v)
                v = xp.asarray(v)
                buf = xp.empty((self._capacity(index + 1), *v.shape), dtype=v.dtype)
                self.buffers[name] = buf
            elif index >= buf.shape[0]:  # full: double (grow only), on the buffer's device
                old = buf
                buf = _backend.get_array_module(old).empty((self._capacity(2 * old.shape[0]), *old.shape[1:]),
                                                          dtype=old.dtype)
                buf[:index] = old[:index]
                self.buffers[name] = buf
            if _backend.is_cupy_array(v) and index < buf.shape[0] and _same_layout(v, buf):
                # one asynchronous copy of the bytes on the current stream, no kernel launch (the kept draw
                # of every iteration of a run)
                (buf.data + index * buf.strides[0]).copy_from_device_async(v.data, v.nbytes)
            else:
                buf[index] = _backend.get_array_module(buf).asarray(v)

    def layout(self) -> dict:
        """Each stored name's ``(shape of one draw, dtype)``, as :func:`_layout` gives them for a draw."""
        return {k: (tuple(b[0].shape), str(b[0].dtype)) if isinstance(b, list) else (tuple(b.shape[1:]), str(b.dtype))
                for k, b in self.buffers.items()}

    def _first(self, name: str, count: int):
        """The first ``count`` draws of ``name`` as one array (draw, chain, ...) on its backend."""
        buf = self.buffers[name]
        if not self.by_reference:
            return buf[:count]
        items = buf[:count]
        return _backend.get_array_module(items[0]).stack(items) if items else np.zeros((0,))

    def host(self, count: int) -> dict:
        """The first ``count`` draws as NumPy arrays (chain, draw, ...)."""
        out = {}
        for name in self.buffers:
            a = _backend.to_host(self._first(name, count))
            out[name] = np.moveaxis(a, 0, 1) if a.ndim >= 2 else a
        return out

    def load(self, saved: dict, count: int, xp) -> None:
        """Refill from host arrays (chain, draw, ...) holding ``count`` draws, onto ``xp``."""
        for name, a in saved.items():
            a = np.moveaxis(a, 1, 0) if a.ndim >= 2 else a
            if self.by_reference:
                block = xp.asarray(a[:count])
                self.buffers[name] = [block[i] for i in range(count)]
                continue
            buf = xp.empty((self._capacity(count), *a.shape[1:]), dtype=a.dtype)
            buf[:count] = xp.asarray(a[:count])
            self.buffers[name] = buf


def _layout(values: dict) -> dict:
    """Each collected value's ``(shape, dtype)``, as :class:`_Store` keeps it (a number as a NumPy array)."""
    return {k: (tuple(np.shape(v)), str(v.dtype if hasattr(v, "dtype") else np.asarray(v).dtype))
            for k, v in values.items()}


def _info_stats(info) -> dict:
    """Fields of an Info tuple that are arrays (one value or row per chain)."""
    if info is None:
        return {}
    if isinstance(info, dict):
        items = info.items()
    elif isinstance(info, tuple) and hasattr(info, "_fields"):
        items = ((name, getattr(info, name)) for name in info._fields)
    else:
        return {}
    out = {}
    for name, v in items:
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


def _end_bar_early(bar, done: int) -> None:
    """A run that its stop condition ended before ``n_iter``: the bar's total becomes the iterations done,
    so that it closes full (a notebook bar closed short of its total is drawn as failed, in red)."""
    bar.total = done
    widgets = getattr(getattr(bar, "container", None), "children", ())
    if len(widgets) == 3:  # tqdm.notebook: (label, bar, text); its bar's length is the widget's max
        widgets[1].max = done
    bar.refresh()


def _progress_bar(total: int, desc: str | None, enabled: bool, initial: int = 0):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm is a dependency; keep running without a bar if it is broken
        return None
    return tqdm(total=total, initial=initial, desc=desc, unit="it", mininterval=0.25, dynamic_ncols=True)


def _state_leaves(state):
    """(path, value) of every leaf a checkpoint stores: NamedTuple fields and the items of plain tuples and
    lists, nested."""
    return _fields(state, sequences=True)


def _save_checkpoint(path: Path, state, rng: Generator, done: int, kept: int, store: _Store,
                     stats: _Store, monitors: dict, config: dict, stopped: bool = False,
                     empty: tuple | None = None) -> None:
    """``empty``: where no draw is kept yet, the ``(draws, stats)`` of :func:`_no_draws`, saved so that a run
    resumed after its last iteration still gives each name's empty array."""
    arrays = {}
    for key, value in _state_leaves(state):
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
    if kept == 0 and empty is not None:
        for part, values in zip(("empty_draws", "empty_stats"), empty):
            for name, a in values.items():
                arrays[f"{part}/{name}"] = a
    for name, (its, vals) in monitors.items():
        arrays[f"monitor_it/{name}"] = np.asarray(its, dtype=np.int64)
        arrays[f"monitor_val/{name}"] = np.asarray(vals, dtype=np.float64)
    seq = rng._seed_seq
    meta = dict(config, version=_CHECKPOINT_VERSION, done=done, kept=kept, stopped=stopped, offset=rng.offset,
                key=list(rng.key), entropy=str(seq.entropy), spawn_key=list(seq.spawn_key))
    arrays["meta"] = np.asarray(repr(meta))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, **arrays)
    os.replace(tmp, path)


def _checkpoint_path(checkpoint):
    """``checkpoint`` as a Path, or None; a ValueError before the run where its folder is missing or is not
    writable (else the run would fail at its first save, its work lost)."""
    if checkpoint is None:
        return None
    path = Path(checkpoint)
    folder = path.parent
    if path.is_dir():
        raise ValueError(f"checkpoint={str(checkpoint)!r} is a folder; pass a file path, "
                         f"e.g. {str(path / 'run.npz')!r}.")
    if not folder.is_dir():
        raise ValueError(f"checkpoint={str(checkpoint)!r}: the folder {str(folder)!r} does not exist; create it "
                         "first, or pass a path in a folder that exists.")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"checkpoint={str(checkpoint)!r}: the folder {str(folder)!r} is not writable; pass a path "
                         "in a folder you can write to.")
    return path


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
                         f"({type(e).__name__}: {e}); delete it (or, with sampling.run, pass resume=False) to start "
                         "the run afresh (it is rewritten at the next checkpoint).") from e
    return meta, data


def _restore(path: Path, state, rng: Generator, config: dict, store: _Store, stats: _Store, mon: dict):
    """Load a checkpoint into ``store``, ``stats``, ``mon`` and ``rng``: ``(state, done, kept, stopped, empty)``,
    ``empty`` the saved ``(draws, stats)`` of no kept draw (None where the checkpoint holds none)."""
    meta, data = _load_checkpoint(path)
    if meta.get("version") != _CHECKPOINT_VERSION:
        raise ValueError(f"{path} was written by another version of gpumcmc; delete it (or, with sampling.run, "
                         "pass resume=False).")
    for k, v in config.items():
        if meta.get(k) != v:
            raise ValueError(f"{path} was saved with {k}={meta.get(k)}, this run has {k}={v}; "
                             "use the same settings, another checkpoint path, or delete the file (with sampling.run: "
                             "or resume=False).")
    if tuple(meta["key"]) != tuple(rng.key):
        raise ValueError(f"{path} was saved with another random_state/seed; pass the same seed to resume, "
                         "or start afresh: delete the file or use another path (with sampling.run: or resume=False).")
    saved = {k[len("state/"):]: v for k, v in data.items() if k.startswith("state/")}
    _check_saved_state(path, state, saved)
    state = _rebuild(state, saved)
    done, kept = int(meta["done"]), int(meta["kept"])
    rng._offset = int(meta["offset"])
    xp = next((_backend.get_array_module(v) for _, v in _state_leaves(state) if _backend.is_cupy_array(v)), np)
    store.load({k[len("draws/"):]: v for k, v in data.items() if k.startswith("draws/")}, kept, xp)
    stats.load({k[len("stats/"):]: v for k, v in data.items() if k.startswith("stats/")}, kept, xp)
    for name in mon:
        if f"monitor_it/{name}" in data:
            mon[name] = (list(data[f"monitor_it/{name}"]), list(data[f"monitor_val/{name}"]))
    empty = tuple({k[len(part) + 1:]: v for k, v in data.items() if k.startswith(part + "/")}
                  for part in ("empty_draws", "empty_stats"))
    return state, done, kept, bool(meta.get("stopped", False)), (empty if any(empty) else None)


def _check_saved_state(path, state, saved: dict) -> None:
    """The checkpoint's state must have the template's fields, and each array its shape."""
    here = {k: v for k, v in _state_leaves(state) if v is not None}
    if set(here) != set(saved):
        raise ValueError(f"{path} holds a state with fields {sorted(saved)}, this run's state has {sorted(here)}; "
                         "resume with the same kind of state, or use another checkpoint path (with sampling.run: or "
                         "resume=False).")
    for k, v in here.items():
        if hasattr(v, "shape") and tuple(v.shape) != tuple(saved[k].shape):
            raise ValueError(f"{path} holds state field {k!r} of shape {tuple(saved[k].shape)}, this run's is "
                             f"{tuple(v.shape)}; resume with the same sizes, or use another checkpoint path or "
                             "delete the file (with sampling.run: or resume=False).")


def _check_step_output(out, state) -> None:
    """After the first sweep: ``step`` returned ``(state, info)``, not the state alone."""
    if hasattr(state, "_fields") and type(out) is type(state):
        raise TypeError(f"step returned a {type(state).__name__} alone; it must return (state, info) (info may "
                        "be None).")
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"step must return (state, info) (info may be None), got {type(out).__name__}"
                        + (f" of length {len(out)}" if isinstance(out, tuple) else "") + ".")


def _check_settings(step, n_iter, burn_in, thin, checkpoint_every, monitors, stop, collect=None, callback=None):
    """The run's settings checked: ``(n_iter, burn_in, thin, checkpoint_every, monitors)``."""
    if stop is not None:
        if not isinstance(stop, Stop):
            raise TypeError("stop must be gpumcmc.sampling.Stop(fn, every, name), or None.")
        if not callable(stop.fn):
            raise TypeError("Stop's fn must be a callable fn(state, info) -> bool.")
        _validate.check_int(stop.every, "Stop every", 1)
    if n_iter is None and stop is None:
        raise ValueError("n_iter=None (no upper bound) needs a stop condition: pass stop=Stop(fn, every), "
                         "or give n_iter.")
    n_iter = None if n_iter is None else _validate.check_int(n_iter, "n_iter", 0)
    burn_in = _validate.check_int(burn_in, "burn_in", 0)
    thin = _validate.check_int(thin, "thin", 1)
    checkpoint_every = _validate.check_int(checkpoint_every, "checkpoint_every", 1)
    monitors = tuple(monitors)
    for i, m in enumerate(monitors):
        if not isinstance(m, Monitor):
            raise TypeError("monitors must be gpumcmc.sampling.Monitor(name, fn, every) tuples.")
        if not callable(m.fn):
            raise TypeError(f"Monitor {m.name!r}: fn must be a callable fn(state) -> number(s).")
        if any(o.name == m.name for o in monitors[:i]):
            raise ValueError(f"Two monitors are named {m.name!r}; give each its own name (their values would be "
                             "merged into one series).")
        _validate.check_int(m.every, f"Monitor {m.name!r} every", 1)
        if stop is not None and m.name == stop.name:
            raise ValueError(f"The stop condition and a monitor are both named {m.name!r}; give them different "
                             "names.")
    if not callable(step):
        raise TypeError("step must be a callable step(rng, state) -> (state, info).")
    for name, fn in (("collect", collect), ("callback", callback)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be a callable or None, got {type(fn).__name__}.")
    return n_iter, burn_in, thin, checkpoint_every, monitors


def _read_stop(stop: Stop, state, info):
    """``(stop, value)`` of a stop condition's read (value None: nothing to show)."""
    out = stop.fn(state, info)
    if stop.name is None:
        return bool(out), None
    done, value = out
    return bool(done), (None if value is None else float(value))


class _Run:
    """One run's bookkeeping: its length, the kept draws and Info stats, the monitors' values and counters."""

    def __init__(self, n_iter, burn_in: int, thin: int, n_chains: int, monitors, stop, by_reference: bool):
        self.n_iter, self.burn_in, self.thin, self.n_chains = n_iter, burn_in, thin, n_chains
        self.monitors, self.stop = monitors, stop
        self.total = None if n_iter is None else burn_in + n_iter
        self.n_draws = None if n_iter is None else n_iter // thin
        grow = stop is not None
        self.store, self.stats = _Store(self.n_draws, grow, by_reference), _Store(self.n_draws, grow, by_reference)
        names = [m.name for m in monitors] + ([stop.name] if stop is not None and stop.name is not None else [])
        self.mon: dict[str, tuple[list, list]] = {name: ([], []) for name in names}
        self.config = dict(n_iter=n_iter, burn_in=burn_in, thin=thin, n_chains=n_chains)
        self.done = self.kept = 0
        self.stopped = False
        self.first = 0  # the first iteration this call runs (after a resume, where it resumed)
        self.resumed_names = None  # the collected names a resumed run's kept draws hold
        self.empty = None  # a resumed run's saved (draws, stats) of no kept draw

    def iterations(self):
        """The iteration indices still to run (none for a run that a stop condition ended)."""
        if self.stopped:
            return ()
        return range(self.done, self.total) if self.total is not None else itertools.count(self.done)

    def last(self, n: int) -> bool:
        return n == self.total or self.stopped

    def keep(self, it: int, state, info, collect) -> None:
        """Store ``collect``'s values and the Info's stats where iteration ``it`` is a kept one."""
        i = it - self.burn_in
        if i >= 0 and (i + 1) % self.thin == 0 and (self.n_draws is None or self.kept < self.n_draws):
            if collect is not None:
                values = collect(state, info)
                if not isinstance(values, dict):
                    raise TypeError(f"collect must return a dict of arrays (name -> array with a leading chain "
                                    f"axis), got {type(values).__name__}.")
                self._check_resumed(values)
                self.store.put(self.kept, values)
            elif self.resumed_names:
                self._check_resumed({})
            self.stats.put(self.kept, _info_stats(info))
            self.kept += 1

    def _check_resumed(self, values: dict) -> None:
        """A resumed run's collect must give what the checkpoint's draws hold (else part of each array would
        be left unwritten): the same names, shapes and dtypes."""
        if self.resumed_names is None:
            return
        saved = self.resumed_names
        self.resumed_names = None  # checked once
        now = _layout(values)
        if now != saved:
            raise ValueError(f"The checkpoint's draws hold {saved} (name: (shape, dtype)), but collect now gives "
                             f"{now}; resume with the same collect, or use another checkpoint path (with sampling.run: "
                             "or resume=False).")

    def read(self, n: int, state, info, read_stop: bool, bar) -> None:
        """After iteration ``n``: the stop condition where it is due, then the monitors that are due (one host
        read each, and the deferred checks after them); their values go to the bar."""
        shown = {}
        if read_stop:
            self.stopped, value = _read_stop(self.stop, state, info)
            if value is not None:
                self._record(self.stop.name, n, value)
                shown[self.stop.name] = value
        read = False
        for m in self.monitors:
            if n % m.every == 0 or self.last(n):
                value = np.asarray(_backend.to_host(m.fn(state)), dtype=np.float64)
                self._record(m.name, n, value)
                shown[m.name] = float(np.mean(value))
                read = True
        if read:
            _check()
        if shown and bar is not None:
            bar.set_postfix({k: f"{v:.5g}" for k, v in shown.items()}, refresh=False)

    def _record(self, name: str, n: int, value) -> None:
        self.mon[name][0].append(n)
        self.mon[name][1].append(value)

    def no_draws(self, last, collect) -> tuple[dict, dict]:
        """``(draws, stats)`` of no kept draw, in the layout that the final ``(state, info)`` would give."""
        return (_no_draws(collect(*last) if collect is not None else {}, self.n_chains),
                _no_draws(_info_stats(last[1]), self.n_chains))

    def trace(self, state, seconds: float, last=None, collect=None) -> Trace:
        """The run's Trace. ``last`` is the final ``(state, info)`` where an iteration ran: a run that kept
        no draw (all burn-in, or ``n_iter < thin``) still gives each collected name and Info stat, with no
        draws, so that code reading ``draws[name]`` works for every length."""
        monitors_out = {name: (np.asarray(its, dtype=np.int64), np.asarray(vals, dtype=np.float64))
                        for name, (its, vals) in self.mon.items()}
        draws, stats = self.store.host(self.kept), self.stats.host(self.kept)
        if self.kept == 0:
            if last is not None:
                draws, stats = self.no_draws(last, collect)
            elif self.empty is not None:  # resumed after its last iteration
                draws, stats = self.empty
        return Trace(draws, stats, monitors_out, state, self.n_chains, self.n_iter, self.burn_in, self.thin,
                     seconds, iterations=self.done, stopped=self.stopped)


def _interrupted(r: _Run, path, checkpoint_every: int) -> str:
    """What a KeyboardInterrupt cost, for the traceback: the iterations done and how to resume."""
    of = "" if r.total is None else f" of {r.total}"
    if path is None:
        return (f"gpumcmc: the run was interrupted after {r.done}{of} iterations, and its draws are not kept "
                "(an estimator keeps its earlier fit, if any). To resume an interrupted run, pass checkpoint= "
                "(gpumcmc.sampling.run, LDA) and run again.")
    saved = r.done - r.done % checkpoint_every
    if saved == 0:
        return (f"gpumcmc: the run was interrupted after {r.done}{of} iterations, before its first checkpoint "
                f"(every {checkpoint_every} iterations); its draws are not kept.")
    return (f"gpumcmc: the run was interrupted after {r.done}{of} iterations; {path} holds the first "
            f"{saved}: run again with the same settings to resume from there.")


def _no_draws(values: dict, n_chains: int) -> dict:
    """Empty host arrays (chain, 0, ...) of the layout that ``values`` (one kept iteration's) would give."""
    out = {}
    for name, (shape, dtype) in _layout(values).items():
        out[name] = np.zeros((shape[0], 0, *shape[1:]) if shape else (0,), dtype=dtype)
    return out


def run(step: Callable, state, rng=None, n_iter: int | None = 1000, *, burn_in: int = 0, thin: int = 1,
        collect: Callable | None = None, monitors=(), progress: bool = True, desc: str | None = None,
        checkpoint=None, checkpoint_every: int = 100, resume: bool = True, n_chains: int | None = None,
        callback: Callable | None = None, graph: bool = False, stop: Stop | None = None,
        by_reference: bool = False, checkpoint_key: str | None = None) -> Trace:
    """Run ``burn_in + n_iter`` iterations of ``state, info = step(rng, state)``, or fewer where ``stop`` ends it.

    Parameters
    ----------
    step : callable
        ``step(rng, state) -> (state, info)``: one sweep of every chain. It
        must not synchronise the GPU; the driver runs it in deferred
        validation mode, so input errors found by kernels surface at the next
        monitor, checkpoint or the end of the run.
    state : NamedTuple
        The initial state; array fields lead with the chain axis. Fields may
        be nested NamedTuples, or plain tuples or lists (one array per
        shard, say): a checkpoint stores and restores every leaf.
    rng : int, numpy.random.SeedSequence, gpumcmc Generator or None
        The stream the steps draw from. A resumed run restores its position.
    n_iter : int or None
        Iterations after burn-in. Every ``thin``-th of them is kept: the
        run stores ``n_iter // thin`` draws per chain. With ``stop``, an upper
        bound, and None for none.
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
        bit for bit, as a run that was never interrupted (a run that a stop
        condition ended stays ended). A checkpoint of other settings, another
        seed, or a state of other fields or shapes is refused.
    checkpoint_key : str, optional
        What the run is of (its data and model, in a few words or a hash),
        stored with the checkpoint: one saved under another key is refused, so
        that a run on other data of the same shapes does not resume it.
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
    stop : Stop, optional
        End the run after the first iteration at which ``stop.fn(state, info)``
        holds, read every ``stop.every`` iterations (:class:`Stop`). The draws
        are then kept in a store that grows (by doubling, on the device) up to
        ``n_iter // thin``; ``Trace.iterations`` says how many iterations ran
        and ``Trace.stopped`` whether the condition held. A read of the
        condition does not raise deferred input errors (monitors, checkpoints
        and the end do).
    by_reference : bool
        Keep the arrays that ``collect`` returns, and the Info's, as they are,
        without a copy per kept iteration; they are stacked once, when the
        trace is made. Only for steps whose Info (and ``collect``'s values)
        are new arrays that no later step writes: state fields updated in
        place must be copied.

    Returns
    -------
    Trace

    Notes
    -----
    A step object with a ``monitored`` attribute has it set before each sweep
    (without ``graph``): True where a monitor or the stop condition reads the
    state after that sweep (every ``every``-th iteration and the last), False
    elsewhere, so a step can skip work that only its monitors need.

    Examples
    --------
    >>> import numpy as np
    >>> from typing import NamedTuple
    >>> import gpumcmc
    >>> from gpumcmc.sampling import run, Monitor, Stop
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

    A run of unknown length: a deterministic iteration halving ``x`` until
    every chain is below 1e-3, the condition read every 5 iterations.

    >>> def halve(rng, s):
    ...     return S(s.x / 2), None
    >>> tr = run(halve, S(np.ones(2)), 0, n_iter=None, progress=False,
    ...          collect=lambda s, info: {"x": s.x},
    ...          stop=Stop(lambda s, info: bool((s.x < 1e-3).all()), every=5))
    >>> tr.iterations, tr.stopped, tr.draws["x"].shape
    (10, True, (2, 10))
    """
    n_iter, burn_in, thin, checkpoint_every, monitors = _check_settings(step, n_iter, burn_in, thin,
                                                                        checkpoint_every, monitors, stop,
                                                                        collect, callback)
    # A step with a ``monitored`` attribute is told before each eager sweep whether a monitor reads it.
    gate = not graph and hasattr(step, "monitored")
    if graph:
        from ._graph import graph_step

        step = graph_step(step)
    if not isinstance(rng, Generator):  # a seed: the generator on the state's backend, not the active one
        arrays = [v for _, v in _state_leaves(state) if hasattr(v, "shape")]
        backend = "cupy" if any(_backend.is_cupy_array(v) for v in arrays) else ("numpy" if arrays else None)
        rng = default_rng(rng, backend=backend)
    if n_chains is None:
        n_chains = next((c for _, v in _state_leaves(state) if (c := _chains_of(v)) is not None), 1)
    r = _Run(n_iter, burn_in, thin, n_chains, monitors, stop, by_reference)
    if checkpoint_key is not None:
        r.config["checkpoint_key"] = str(checkpoint_key)
    path = _checkpoint_path(checkpoint)
    if path is not None and resume and path.exists():
        state, r.done, r.kept, r.stopped, r.empty = _restore(path, state, rng, r.config, r.store, r.stats, r.mon)
        r.first = r.done
        if r.kept:
            r.resumed_names = r.store.layout()
    bar = _progress_bar(r.total, desc, progress, initial=r.done)
    t0 = time.perf_counter()
    last = None
    try:
        with _deferred():
            for it in r.iterations():
                n = it + 1  # iterations done after this one
                read_stop = stop is not None and (n % stop.every == 0 or n == r.total)
                if gate:
                    step.monitored = n == r.total or read_stop or any(n % m.every == 0 for m in monitors)
                out = step(rng, state)
                if it == r.first:
                    _check_step_output(out, state)
                state, info = out
                last = (state, info)
                r.keep(it, state, info, collect)
                r.read(n, state, info, read_stop, bar)
                if callback is not None:
                    callback(n, state, info)
                if path is not None and (n % checkpoint_every == 0 or r.last(n)):
                    _check()
                    _save_checkpoint(path, state, rng, n, r.kept, r.store, r.stats, r.mon, r.config, r.stopped,
                                     r.no_draws(last, collect) if r.kept == 0 else None)
                if bar is not None:
                    bar.update(1)
                r.done = n
                if r.stopped:
                    break
            _check()
            if bar is not None and r.stopped:
                _end_bar_early(bar, r.done)
    except KeyboardInterrupt as e:
        if hasattr(e, "add_note"):  # Python 3.11 and later
            e.add_note(_interrupted(r, path, checkpoint_every))
        raise
    finally:
        if bar is not None:
            bar.close()
    return r.trace(state, time.perf_counter() - t0, last, collect)
