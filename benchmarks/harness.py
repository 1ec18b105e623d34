"""Side-by-side timing of gpumcmc and its peers on one device, in one process.

Each suite module has ``run(bench)``; it times functions with
:meth:`Bench.time` and records rows with :meth:`Bench.record`. The harness
measures the device's copy bandwidth in the same run, so every row carries
its floor (the fewest bytes it must move over that bandwidth) and the
fraction of the floor it reached.

Timing: CUDA events recorded on the legacy default stream around each call
(CuPy, gpumcmc and PyTorch all launch there by default), after warm-up; the
median of the repeats is reported. JAX dispatches on its own streams, so it
is timed with the host clock around the call and ``block_until_ready``.
"""

from __future__ import annotations

import datetime as _dt
import gc
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np


def _optional(name):
    try:
        return __import__(name)
    except Exception:
        return None


def _git_commit() -> str:
    env = os.environ.get("GPUMCMC_GIT_COMMIT")
    if env:
        return env
    try:
        return subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
            cwd=Path(__file__).resolve().parent,
        ).stdout.strip()
    except Exception:
        return "unknown"


_UNSET = object()
_PEERS_STARTED: set = set()  # by any Bench of this process: they stay started across its suites


def _start_torch():
    torch = _optional("torch")
    torch = torch if torch is not None and torch.cuda.is_available() else None
    if torch is not None:
        _PEERS_STARTED.add("torch")
    return torch


def _start_jax(runtime):
    # JAX's start-up makes each GPU current in turn and leaves the last one current (seen on a 4-GPU
    # host: every one-GPU row and the data of the scaling suite landed on GPU 3); the caller's GPU is
    # made current again.
    current = runtime.getDevice()
    jax = _optional("jax")
    try:
        jax = jax if jax is not None and jax.devices("gpu") else None
    except Exception:
        jax = None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)  # so float64 cases are really float64
        _PEERS_STARTED.add("jax")
    runtime.setDevice(current)
    return jax


class Bench:
    """State of one benchmark run: the peers available, the floor, and the rows."""

    def __init__(self, *, small: bool = False, warmup: int | None = None, repeat: int | None = None):
        from gpumcmc import backend

        self.small = small
        # GPUMCMC_BENCH_WARMUP / GPUMCMC_BENCH_REPEAT shorten a run of slow suites; the JSON says which were used.
        self.warmup = int(os.environ.get("GPUMCMC_BENCH_WARMUP", 3)) if warmup is None else warmup
        self.repeat = int(os.environ.get("GPUMCMC_BENCH_REPEAT", 15)) if repeat is None else repeat
        self.rows: list[dict] = []
        # Set by the runner: the suite's name and folder, so that each row is written as it is recorded and a
        # suite stopped by a time limit still leaves its finished rows.
        self.suite: str | None = None
        self.out_dir: Path | None = None
        self.cupy = backend.get_backend("cupy") if backend.cupy_available() else None
        if self.cupy is None:
            raise SystemExit("The benchmarks need CuPy and a CUDA device; none was found.")
        rt = self.cupy.cuda.runtime
        # The peers start at first use (``bench.torch``, ``bench.jax``): once started, their runtimes slowed
        # every host path of the process (a bare CuPy launch took 17-25 us instead of 12.6 on an H100 host,
        # ``benchmarks/probes/done_word.py``), which the rows that time gpumcmc's own host work should not carry.
        self._torch = self._jax = _UNSET
        # JAX would otherwise take 75% of the GPU's memory when it starts, starving the others; set here, before
        # any suite can start it (a NumPyro row does without asking for bench.jax).
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        props = rt.getDeviceProperties(rt.getDevice())
        name = props["name"]
        self.device = name.decode() if isinstance(name, bytes) else name
        self.sm_count = props["multiProcessorCount"]
        self.copy_bandwidth, self.write_bandwidth = self._measure_bandwidth()

    @property
    def torch(self):
        """PyTorch with CUDA, started at the first use; None where it is missing."""
        if self._torch is _UNSET:
            self._torch = _start_torch()
        return self._torch

    @property
    def jax(self):
        """JAX on the GPU (64-bit floats on), started at the first use; None where it is missing."""
        if self._jax is _UNSET:
            self._jax = _start_jax(self.cupy.cuda.runtime)
        return self._jax

    def peers_started(self) -> list[str]:
        """The peers started in this process so far, by this or an earlier suite of the run."""
        return sorted(_PEERS_STARTED)

    def free_memory(self) -> None:
        """Return CuPy's pooled GPU memory, and PyTorch's cache where PyTorch was started (without starting it)."""
        self.cupy.get_default_memory_pool().free_all_blocks()
        if self._torch not in (None, _UNSET):
            self._torch.cuda.empty_cache()

    # -- timing -----------------------------------------------------------
    def time(self, fn, sync: str = "cuda") -> float:
        """Median milliseconds of ``fn()`` after warm-up (see the module docstring)."""
        if sync == "jax":
            return self._time_wall(fn)
        if sync != "cuda":
            raise ValueError(f"sync must be 'cuda' or 'jax', got {sync!r}")
        cp = self.cupy
        null = cp.cuda.Stream.null
        for _ in range(self.warmup):
            fn()
        null.synchronize()
        times = []
        for _ in range(self.repeat):
            start, end = cp.cuda.Event(), cp.cuda.Event()
            start.record(null)
            fn()
            end.record(null)
            end.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, end))
        return statistics.median(times)

    def _time_wall(self, fn) -> float:
        jax = self.jax
        for _ in range(self.warmup):
            jax.block_until_ready(fn())
        times = []
        for _ in range(self.repeat):
            t0 = time.perf_counter()
            jax.block_until_ready(fn())
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)

    def _measure_bandwidth(self) -> tuple[float, float]:
        """Device-to-device copy bandwidth (bytes read + written per second) and memset bandwidth."""
        cp = self.cupy
        nbytes = (256 if self.small else 2048) << 20
        a = cp.empty(nbytes, dtype=cp.uint8)
        b = cp.empty(nbytes, dtype=cp.uint8)
        a.fill(1)
        copy_ms = self.time(lambda: cp.cuda.runtime.memcpyAsync(b.data.ptr, a.data.ptr, nbytes, 3, 0))
        fill_ms = self.time(lambda: cp.cuda.runtime.memsetAsync(b.data.ptr, 7, nbytes, 0))
        del a, b
        cp.get_default_memory_pool().free_all_blocks()
        return 2 * nbytes / (copy_ms * 1e-3), nbytes / (fill_ms * 1e-3)

    # -- results ------------------------------------------------------------
    def record(self, case: str, impl: str, ms: float | None, items: int, *,
               bytes_moved: int | None = None, flops: float | None = None,
               params: dict | None = None, note: str | None = None) -> dict:
        """Add a row. ``ms=None`` records a peer that could not run (say why in ``note``)."""
        row = {"case": case, "impl": impl, "ms": ms, "items": int(items), "params": params or {}}
        if ms:
            row["items_per_s"] = items / (ms * 1e-3)
        if bytes_moved is not None:
            floor_ms = bytes_moved / self.copy_bandwidth * 1e3
            row["bytes_moved"] = int(bytes_moved)
            row["floor_ms"] = floor_ms
            if ms:
                row["fraction_of_floor"] = floor_ms / ms
        if flops is not None:
            row["flops"] = flops
        if note:
            row["note"] = note
        self.rows.append(row)
        print(format_table([row]).splitlines()[-1], flush=True)
        if self.suite is not None and self.out_dir is not None:
            self.write(self.suite, self.out_dir)
        return row

    def peer(self, case: str, impl: str, items: int, fn, *, sync: str = "cuda", **kw) -> dict:
        """Time a peer's ``fn`` and record it; a failure becomes a row with a note, not a crash."""
        try:
            ms = self.time(fn, sync=sync)
        except Exception as exc:  # a peer that cannot do this case
            return self.record(case, impl, None, items, note=f"{type(exc).__name__}: {exc}"[:300], **kw)
        return self.record(case, impl, ms, items, **kw)

    def versions(self) -> dict:
        import gpumcmc

        cp = self.cupy
        out = {
            "gpumcmc": gpumcmc.__version__,
            "python": platform.python_version(),
            "numpy": np.__version__,
            "cupy": cp.__version__,
            "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
            "cuda_driver": cp.cuda.runtime.driverGetVersion(),
        }
        for name, mod in (("torch", self._torch), ("jax", self._jax)):  # the peers this suite used
            if mod not in (None, _UNSET):
                out[name] = mod.__version__
        return out

    def summary(self, suite: str) -> dict:
        return {
            "suite": suite,
            "device": self.device,
            "sm_count": self.sm_count,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": _git_commit(),
            "small": self.small,
            "copy_bandwidth_GBps": self.copy_bandwidth / 1e9,
            "write_bandwidth_GBps": self.write_bandwidth / 1e9,
            "timing": f"median of {self.repeat} after {self.warmup} warm-up calls; CUDA events "
                      "(JAX: host clock with block_until_ready)",
            "versions": self.versions(),
            "rows": self.rows,
        }

    def write(self, suite: str, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        slug = "".join(c if c.isalnum() else "-" for c in self.device.lower()).strip("-")
        path = out_dir / f"{suite}-{slug}{'-small' if self.small else ''}.json"
        path.write_text(json.dumps(self.summary(suite), indent=1, default=float) + "\n")
        return path


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth of the current GPU in bytes a second (read and write counted), 1 GiB,
    best of 10: the rate the probes' read-once floors divide by."""
    import cupy as cp

    a = cp.empty(1 << 30, cp.uint8)
    b = cp.empty_like(a)
    best = np.inf
    for _ in range(10):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        b[...] = a
        e.record()
        e.synchronize()
        best = min(best, cp.cuda.get_elapsed_time(s, e) / 1e3)
    return 2 * a.nbytes / best


def sync_all_gpus() -> None:
    """Wait for every visible GPU (the wait for timings of work spread over several)."""
    import cupy as cp

    for g in range(cp.cuda.runtime.getDeviceCount()):
        cp.cuda.Device(g).synchronize()


def per_iteration_ms(call, a: int, b: int, repeats: int = 3, sync=None) -> float:
    """ms per iteration of ``call(n)`` (n iterations through a public call): the median over ``repeats`` of
    (time of call(b) - time of call(a)) / (b - a), after one warm-up call, each time from an idle GPU to an
    idle GPU. Set-up (data transfer, compilation, planning) drops out; everything paid per iteration stays
    in. This is how the project's reference measurement of the public calls times them. ``sync``: what
    waits for the work (default: the current GPU; pass a no-op on NumPy, or a wait for every GPU). Each
    timed call starts after a full garbage collection, so that a collection of the previous call's objects
    does not land in one call and not the other."""
    if sync is None:
        import cupy as cp

        sync = cp.cuda.Device().synchronize

    def wall(n):
        gc.collect()
        sync()
        t = time.perf_counter()
        call(n)
        sync()
        return time.perf_counter() - t

    call(a)
    return float(np.median([(wall(b) - wall(a)) / (b - a) for _ in range(repeats)])) * 1e3


def format_table(rows: list[dict]) -> str:
    head = f"{'case':<34} {'impl':<26} {'ms':>9} {'G items/s':>10} {'floor ms':>9} {'of floor':>8}"
    lines = [head, "-" * len(head)]
    for r in rows:
        ms = r.get("ms")
        if ms is None:
            lines.append(f"{r['case']:<34} {r['impl']:<26} {'—':>9}  {r.get('note', '')[:60]}")
            continue
        rate = r.get("items_per_s", 0) / 1e9
        floor = r.get("floor_ms")
        frac = r.get("fraction_of_floor")
        lines.append(
            f"{r['case']:<34} {r['impl']:<26} {ms:>9.3f} {rate:>10.2f} "
            f"{'' if floor is None else f'{floor:9.3f}':>9} {'' if frac is None else f'{frac:7.0%}':>8}"
        )
    return "\n".join(lines)
