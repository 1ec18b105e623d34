"""Where a direct call's wait falls on the GPU timeline (Dirichlet 65,536 x 256 and gamma 2^26, float32).

An event is recorded right after each kernel launch, so each call's CUDA-event
time splits in two: from the start event to the kernel's end (the host's work
before the launch, then the kernel) and from the kernel's end to the stop event
(the host waking from its wait, returning, and queueing the stop). Modes, taking
turns call by call (301 each): validation off with a wait, as users call it
(validation on), checks deferred and then read by the status word's own reader,
and deferred with a plain stream wait. Run it as
``python -m benchmarks.probes.wait_split``; it patches the packed launcher, so run it in
its own process.
"""
import time, statistics as S
import numpy as np, cupy as cp
import gpumcmc
from gpumcmc import _loader, _status, _validate as V

s = cp.cuda.get_current_stream()
kev = [None]
_call = _loader.PackedLaunch.__call__
def call(self, *a, **k):
    _call(self, *a, **k)
    e = cp.cuda.Event(); e.record(s); kev[0] = e
_loader.PackedLaunch.__call__ = call
rng = gpumcmc.random.default_rng(7, backend="cupy")
alpha = cp.random.default_rng(8).uniform(0.1, 10.0, (65536, 256)).astype(np.float32)
shape = cp.random.default_rng(7).uniform(0.1, 10.0, 1 << 26).astype(np.float32)
st = V._state
def off_sync():
    st.on = False
    try: rng.dirichlet(alpha)
    finally: st.on = True
    s.synchronize()
def on():
    rng.dirichlet(alpha)
def raw():
    st.deferred += 1
    try: rng.dirichlet(alpha)
    finally: st.deferred -= 1
    _status.read_all()
def raw_sync():
    st.deferred += 1
    try: rng.dirichlet(alpha)
    finally: st.deferred -= 1
    s.synchronize(); _status._local.pending = []
    for w in _status._local.words.values(): w.calls = []
def g_off_sync():
    st.on = False
    try: rng.gamma(shape)
    finally: st.on = True
    s.synchronize()
def g_on():
    rng.gamma(shape)
cases = {"dir off+sync": off_sync, "dir on": on, "dir deferred+read_all": raw, "dir deferred+sync": raw_sync,
         "gamma off+sync": g_off_sync, "gamma on": g_on}
for fn in cases.values():
    for _ in range(10): fn()
s.synchronize()
pre = {n: [] for n in cases}; post = {n: [] for n in cases}; tot = {n: [] for n in cases}; wall = {n: [] for n in cases}
for _ in range(301):
    for n, fn in cases.items():
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(s); t0 = time.perf_counter(); fn(); t1 = time.perf_counter(); b.record(s); b.synchronize()
        pre[n].append(cp.cuda.get_elapsed_time(a, kev[0]) * 1e3)
        post[n].append(cp.cuda.get_elapsed_time(kev[0], b) * 1e3)
        tot[n].append(cp.cuda.get_elapsed_time(a, b) * 1e3)
        wall[n].append((t1 - t0) * 1e6)
for n in cases:
    print(f"{n:24s} start->kernel end {S.median(pre[n]):7.1f}  kernel end->stop {S.median(post[n]):6.1f}  "
          f"events {S.median(tot[n]):7.1f}  wall {S.median(wall[n]):7.1f} us")
