"""The price of validation: one call timed with value checks on (the default) and off.

Each is timed two ways: by CUDA events around one call (the harness's median),
and by the wall clock of ``calls`` back-to-back calls with one synchronisation
at the end, divided by ``calls``, as a sampler's loop makes them (a direct
call with checks on synchronises once per call, so its host round trip shows
here and not in the events).
"""

from __future__ import annotations

import time


def wall_loop_ms(bench, fn, calls: int = 20) -> float:
    """Milliseconds per call of ``calls`` back-to-back calls of ``fn``, one sync at the end."""
    null = bench.cupy.cuda.Stream.null
    for _ in range(bench.warmup):
        fn()
    null.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        null.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3 / calls)
    return best


def compare(bench, case: str, fn, items: int, **kw) -> None:
    """Record ``fn`` as users call it (validation on) and with validation off, by events and by wall loop."""
    import gpumcmc

    def off():
        with gpumcmc.validation(False):
            return fn()

    on_ev = bench.time(fn)
    off_ev = bench.time(off)
    on_wall = wall_loop_ms(bench, fn)
    off_wall = wall_loop_ms(bench, off)
    bench.record(case, "gpumcmc default (validation on), events", on_ev, items,
                 note=f"{(on_ev / off_ev - 1) * 100:+.1f}% over validation off", **kw)
    bench.record(case, "gpumcmc validation off, events", off_ev, items, **kw)
    bench.record(case, "gpumcmc default (validation on), wall loop", on_wall, items,
                 note=f"{(on_wall / off_wall - 1) * 100:+.1f}% over validation off", **kw)
    bench.record(case, "gpumcmc validation off, wall loop", off_wall, items, **kw)
