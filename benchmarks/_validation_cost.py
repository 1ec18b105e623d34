"""The price of validation: one call timed with value checks on (the default) and off.

Each call is timed four ways, the modes interleaved call by call so that a
drift of the clocks or of the host's load falls on every mode alike:

- as users call it (validation on): a direct call waits once for the GPU, to
  read its status word, and raises there if a kernel noted bad input;
- validation off;
- validation off with a wait after the call: the floor of any check that
  raises at the call, since the host can only raise once the kernel has
  ended;
- checks deferred (``gpumcmc.deferred_validation()``), as a sampler's sweep
  makes its calls: no wait, one ``gpumcmc.check()`` where the host waits
  anyway.

Two clocks: CUDA events around one call (the median of ``EVENT_REPEATS``),
and the wall clock of ``LOOP_CALLS`` back-to-back calls with one
synchronisation at the end, divided by the calls (the best of
``LOOP_REPEATS`` loops, the modes taking turns loop by loop). The mode is switched outside the timed window, so
no row counts the cost of entering a ``with`` block. An empty kernel's launch
and wait is timed in the same run: no check that raises at the call can cost
less than that round trip.

The suites ``rng`` and ``categorical`` time these rows first, before their
peers start (see ``harness.Bench``); each row's ``params`` name the peers
already started in the process (by an earlier suite of the same run).
"""

from __future__ import annotations

import contextlib
import statistics
import time

EVENT_REPEATS = 101  # sub-millisecond calls: the median of a few would move with the host's noise
LOOP_CALLS = 30
LOOP_REPEATS = 7


def _modes(bench):
    """name -> (context of the mode, the call to time given ``fn``, what ends a loop)."""
    import gpumcmc

    stream = bench.cupy.cuda.get_current_stream()

    def with_wait(fn):
        def call():
            fn()
            stream.synchronize()
        return call

    return {
        "on": (contextlib.nullcontext, lambda fn: fn, None),
        "off": (lambda: gpumcmc.validation(False), lambda fn: fn, None),
        "off_wait": (lambda: gpumcmc.validation(False), with_wait, None),
        "deferred": (gpumcmc.deferred_validation, lambda fn: fn, gpumcmc.check),
    }


def events_ms(bench, fn, modes=None) -> dict:
    """Median milliseconds by CUDA events of one call of ``fn`` in each mode, the modes interleaved."""
    cp = bench.cupy
    stream = cp.cuda.get_current_stream()
    modes = modes or _modes(bench)
    times = {name: [] for name in modes}
    for _ in range(bench.warmup):
        for ctx, wrap, end in modes.values():
            with ctx():
                wrap(fn)()
                if end is not None:
                    end()
    stream.synchronize()
    for _ in range(EVENT_REPEATS):
        for name, (ctx, wrap, end) in modes.items():
            call = wrap(fn)
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            with ctx():
                start.record(stream)
                call()
                stop.record(stream)
                if end is not None:
                    end()
            stop.synchronize()
            times[name].append(cp.cuda.get_elapsed_time(start, stop))
    return {name: statistics.median(t) for name, t in times.items()}


def wall_loop_ms(bench, fn, modes=None, calls: int = LOOP_CALLS) -> dict:
    """Milliseconds per call of ``calls`` back-to-back calls of ``fn`` in each mode, one sync at the end of
    each loop (after the mode's ``end()``): the best of ``LOOP_REPEATS`` loops, the modes taking turns loop by
    loop, each loop inside its mode's context."""
    stream = bench.cupy.cuda.get_current_stream()
    modes = modes or _modes(bench)
    best = {name: float("inf") for name in modes}
    for rep in range(bench.warmup + LOOP_REPEATS):
        for name, (ctx, wrap, end) in modes.items():
            call = wrap(fn)
            with ctx():
                stream.synchronize()
                t0 = time.perf_counter()
                for _ in range(calls):
                    call()
                if end is not None:
                    end()
                stream.synchronize()
                t = (time.perf_counter() - t0) * 1e3 / calls
            if rep >= bench.warmup:
                best[name] = min(best[name], t)
    return best


_round_trip: dict = {}


def round_trip_ms(bench) -> float:
    """An empty kernel's launch and wait, by the wall clock (median of 2,000): the least a check that
    raises at the call adds to a call, once per process."""
    if "ms" not in _round_trip:
        cp = bench.cupy
        stream = cp.cuda.get_current_stream()
        nop = cp.RawKernel(r'extern "C" __global__ void nop(int* x) { if (x == 0 && threadIdx.x == 1000) x[0] = 1; }',
                           "nop")
        x = cp.zeros(1, dtype=cp.int32)
        t = []
        for _ in range(2000):
            t0 = time.perf_counter()
            nop((1,), (32,), (x,))
            stream.synchronize()
            t.append((time.perf_counter() - t0) * 1e3)
        _round_trip["ms"] = statistics.median(t)
        bench.record("validation cost: an empty kernel's launch and wait", "CuPy RawKernel + stream wait, wall clock",
                     _round_trip["ms"], 1, note="the round trip any check that raises at the call adds to it")
    return _round_trip["ms"]


def compare(bench, case: str, fn, items: int, **kw) -> None:
    """Record ``fn`` as users call it (validation on) beside validation off, off with a wait, and deferred,
    by events and by wall loop."""
    rt = round_trip_ms(bench)
    modes = _modes(bench)
    peers = bench.peers_started()
    # The host's share of a direct call is what the goal measures, and a started PyTorch or JAX slows every
    # host path of the process: say which were running.
    kw = {**kw, "params": {**kw.get("params", {}), "peers_started_before": peers}}
    ev = events_ms(bench, fn, modes)
    wall = wall_loop_ms(bench, fn, modes)

    def over(a, b):
        return f"{(a / b - 1) * 100:+.1f}%"

    for clock, t in (("events", ev), ("wall loop", wall)):
        bench.record(case, f"gpumcmc default (validation on), {clock}", t["on"], items,
                     note=f"{over(t['on'], t['off'])} over validation off; {over(t['on'], t['off_wait'])} over "
                          "validation off with a wait after the call", **kw)
        bench.record(case, f"gpumcmc validation off, {clock}", t["off"], items, **kw)
        bench.record(case, f"gpumcmc validation off + a wait per call, {clock}", t["off_wait"], items,
                     note=f"{over(t['off_wait'], t['off'])} over validation off: the wait alone (an empty "
                          f"kernel's round trip is {rt * 1e3:.1f} us)", **kw)
        bench.record(case, f"gpumcmc deferred checks (a sampler's sweep), {clock}", t["deferred"], items,
                     note=f"{over(t['deferred'], t['off'])} over validation off", **kw)
