"""A sweep captured once as a CUDA graph and replayed, for samplers whose sweeps are many small launches.

``graph_step(step)`` wraps ``step(rng, state) -> (state, info)``. On the
first call with CuPy arrays it runs the sweep once to compile its kernels and
measure how many generator offsets it takes, then captures one sweep, and a
copy of its result back into its input, as a CUDA graph; every later call
replays that graph with one launch and no Python. On NumPy it calls ``step``.

Random numbers. Kernels take their Philox call offset by value, which a graph
would freeze. Inside the capture every launch also passes ``off_dev``, the
address of a 64-bit device value added to its offset (``offset_from_device``
in ``kernels_cu/philox.cuh``), and the graph's last node adds the sweep's
offset count to it. Replay ``j`` so draws with the offsets of eager sweep ``j``,
and the host generator is advanced by the same count per replay: a run with
the graph gives the same draws as one without, bit for bit.

What a captured step must do: draw only through kernels that take ``off_dev``
(gamma, beta, Dirichlet, the uniform, normal and exponential fills, the
categorical kernels, LDA's z-draw, the mixture's indicator kernel; not the
models' own samplers elsewhere), make no host synchronisation and no
host-side decision on device values, call no cuSOLVER routine (CuPy refuses
them inside a capture, so Wishart draws and the mixture's Gibbs sweep cannot
be captured), and return the same structure of arrays every time. The capture runs
with validation off (a replayed status word would never be read). Its
temporaries come from a memory pool of its own, kept with the graph, so that
no later allocation reuses memory a replay writes.
"""

from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np

from .. import _loader, _validate
from .. import backend as _backend
from ._tree import _fields

__all__ = ["graph_step"]


def _arrays(obj):
    """(path, array) of the state's CuPy arrays."""
    return [(k, v) for k, v in _fields(obj) if _backend.is_cupy_array(v)]


def _others(obj):
    """(path, value) of the state's leaves that are not CuPy arrays."""
    return [(k, v) for k, v in _fields(obj) if not _backend.is_cupy_array(v)]


def _map(obj, fn):
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*(_map(getattr(obj, n), fn) for n in obj._fields))
    return fn(obj) if _backend.is_cupy_array(obj) else obj


class _GraphStep:
    def __init__(self, step: Callable):
        self.step = step
        self.graph = None

    def __call__(self, rng, state):
        if not _arrays(state):
            return self.step(rng, state)
        if self.graph is None:
            return self._capture(rng, state)
        if state is not self.state:  # a state other than the last one returned: copied into the graph's input
            for (_, dst), (_, src) in zip(_arrays(self.state), _arrays(state)):
                if dst is not src:
                    dst[...] = src
        rng.advance(self.span)
        self.graph.launch()  # on the current stream
        return self.state, self.info

    def _capture(self, rng, state):
        cp = _backend.get_backend("cupy")
        # One eager sweep on a copy: compiles every kernel (no compilation during
        # the capture) and counts the generator offsets a sweep takes.
        # The copy back and the offset update are run once too, for the same reason.
        start = rng.advance(0)
        scratch = _map(state, lambda a: a.copy())
        with _validate.validation(False):
            out, _ = self.step(rng, scratch)
        for (name, a), (_, b) in zip(_others(scratch), _others(out)):
            if not (a is b or (type(a) is type(b) and a == b)):
                raise ValueError(f"step changed the state's field {name!r} ({a!r} to {b!r}), which is not a device "
                                 "array: a graph replays only device work. Keep it in a CuPy array, or run "
                                 "without the graph.")
        for (_, dst), (_, src) in zip(_arrays(scratch), _arrays(out)):
            if dst.shape == src.shape and dst.dtype == src.dtype:
                dst[...] = src
        span = rng.advance(0) - start
        rng._offset = start
        self.pool = cp.cuda.MemoryPool()
        with cp.cuda.using_allocator(self.pool.malloc):
            inp = _map(state, lambda a: a.copy())
            self.base = cp.zeros(1, dtype=np.uint64)
            self.base += np.uint64(0)
        del scratch, out
        cp.cuda.get_current_stream().synchronize()

        def sweep():
            out, info = self.step(rng, inp)
            for (name, dst), (_, src) in zip(_arrays(inp), _arrays(out)):
                if dst.shape != src.shape or dst.dtype != src.dtype:
                    raise ValueError(f"step changed state field {name!r} from {dst.shape} {dst.dtype} to "
                                     f"{src.shape} {src.dtype}; a captured step must keep its state's shapes.")
                if dst is not src:  # a field the step updated in place is already where it belongs
                    dst[...] = src
            self.base += np.uint64(span)
            return out, info

        graph, (out, info) = captured(sweep, self.pool, _validate.validation(False),
                                      _loader.replay_offset(self.base.data.ptr))
        if rng.advance(0) - start != span:
            raise RuntimeError("The sweep took another number of generator offsets when captured than when run; "
                               "it cannot be replayed as a graph (run it with graph=False).")
        self.graph, self.span, self.state, self.info, self._out = graph, span, inp, info, out
        self.graph.launch()  # sweep 0, on the current stream
        return self.state, self.info


def captured(fn: Callable, pool, *contexts):
    """``fn()`` captured as a CUDA graph on a stream of its own (relaxed mode), inside ``contexts``, every
    allocation it makes from ``pool`` (to be kept with the graph, so that no later allocation reuses memory a
    replay writes): ``(graph, fn's result)``. Raises what ``fn`` raises, or ``end_capture``'s error where the
    capture was invalidated (a host synchronisation inside it). The sweeps of :func:`graph_step` and nested
    sampling's rounds (``gpumcmc.models.nested.ops``) are captured so."""
    cp = _backend.get_backend("cupy")
    stream = cp.cuda.Stream(non_blocking=True)
    mode = getattr(cp.cuda.runtime, "streamCaptureModeRelaxed", 2)
    with contextlib.ExitStack() as inside:
        inside.enter_context(cp.cuda.using_allocator(pool.malloc))
        inside.enter_context(stream)
        for c in contexts:
            inside.enter_context(c)
        stream.begin_capture(mode)
        try:
            out = fn()
        finally:
            graph = stream.end_capture()
    return graph, out


def graph_step(step: Callable) -> Callable:
    """``step`` run as a CUDA graph after its first call (see the module docstring).

    The returned callable has ``step``'s signature. The state it returns is
    the same set of arrays every time, overwritten by the next call: keep a
    copy of anything you need later (the run driver copies what it keeps).

    Examples
    --------
    >>> from gpumcmc.sampling import graph_step
    >>> fast = graph_step(lambda rng, s: (s, None))   # on NumPy it calls the step as it is
    """
    return _GraphStep(step)
