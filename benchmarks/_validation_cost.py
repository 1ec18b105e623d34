"""The price of validation: one call timed with value checks on (the default) and off.

Each is timed two ways: by CUDA events around one call (the harness's median),
and by the wall clock of ``calls`` back-to-back calls with one synchronisation
at the end, divided by ``calls``. A direct call with checks on waits once for
the GPU, to read its status word, so back to back its host time no longer
overlaps the kernel; the suite also times the loop as a sampler's sweep makes
it, with the checks deferred (read once, by gpumcmc.check(), at the end), and
with validation off but a wait after every call, which is the floor of any
check that raises at the call.
"""

from __future__ import annotations

import time


def wall_loop_ms(bench, fn, calls: int = 20, end=None) -> float:
    """Milliseconds per call of ``calls`` back-to-back calls of ``fn``, one sync at the end (after ``end()``)."""
    null = bench.cupy.cuda.get_current_stream()
    for _ in range(bench.warmup):
        fn()
    if end is not None:
        end()
    null.synchronize()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        if end is not None:
            end()
        null.synchronize()
        best = min(best, (time.perf_counter() - t0) * 1e3 / calls)
    return best


def compare(bench, case: str, fn, items: int, **kw) -> None:
    """Record ``fn`` as users call it (validation on) and with validation off, by events and by wall loop."""
    import gpumcmc

    def off():
        with gpumcmc.validation(False):
            return fn()

    def deferred():
        with gpumcmc.deferred_validation():
            return fn()

    def off_wait():
        out = off()
        bench.cupy.cuda.get_current_stream().synchronize()
        return out

    on_ev = bench.time(fn)
    off_ev = bench.time(off)
    on_wall = wall_loop_ms(bench, fn)
    off_wall = wall_loop_ms(bench, off)
    deferred_wall = wall_loop_ms(bench, deferred, end=gpumcmc.check)
    wait_wall = wall_loop_ms(bench, off_wait)
    bench.record(case, "gpumcmc default (validation on), events", on_ev, items,
                 note=f"{(on_ev / off_ev - 1) * 100:+.1f}% over validation off", **kw)
    bench.record(case, "gpumcmc validation off, events", off_ev, items, **kw)
    bench.record(case, "gpumcmc default (validation on), wall loop", on_wall, items,
                 note=f"{(on_wall / off_wall - 1) * 100:+.1f}% over validation off", **kw)
    bench.record(case, "gpumcmc validation off, wall loop", off_wall, items, **kw)
    bench.record(case, "gpumcmc deferred checks (a sampler's sweep), wall loop", deferred_wall, items,
                 note=f"{(deferred_wall / off_wall - 1) * 100:+.1f}% over validation off", **kw)
    bench.record(case, "gpumcmc validation off + a wait per call, wall loop", wait_wall, items,
                 note=f"{(wait_wall / off_wall - 1) * 100:+.1f}% over validation off: the cost of the wait alone; "
                      f"the default is {(on_wall / wait_wall - 1) * 100:+.1f}% over it", **kw)
