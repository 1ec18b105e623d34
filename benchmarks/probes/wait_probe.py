"""What a direct call with checks costs back to back: the host time before its kernel starts, and the wait.

Prints, on the current GPU: an empty kernel's launch and wait (the round trip any check that
raises at the call must pay), and for gamma (2^26 shapes), Dirichlet (65,536 x 256) and categorical
(2^20 x 1024) in float32, with validation off and on, the host time until the call returns and the
wait after it. Run it as ``python -m benchmarks.probes.wait_probe``.
"""
import time

import numpy as np


def main() -> None:
    import cupy as cp

    import gpumcmc

    s = cp.cuda.get_current_stream()
    k = cp.RawKernel(r'extern "C" __global__ void nop(int* x){ if (x == 0 && threadIdx.x == 1000) x[0] = 1; }', 'nop')
    x = cp.zeros(1, dtype=np.int32)
    def rt(n=2000):
        t = []
        for _ in range(n):
            t0 = time.perf_counter(); k((1,), (32,), (x,)); t1 = time.perf_counter(); s.synchronize(); t2 = time.perf_counter()
            t.append((t1 - t0, t2 - t1))
        t = np.array(t) * 1e6
        return np.median(t, axis=0)
    print("nop kernel: launch %.1f us, wait %.1f us" % tuple(rt()))
    rng = gpumcmc.random.default_rng(7, backend="cupy")
    shape = cp.random.default_rng(7).uniform(0.1, 10.0, 1 << 26).astype(np.float32)
    alpha = cp.random.default_rng(8).uniform(0.1, 10.0, (65536, 256)).astype(np.float32)
    w = cp.random.default_rng(5).random((1 << 20, 1024), dtype=np.float32)
    out = cp.empty(1 << 20, dtype=np.int64)
    cases = {"gamma": lambda: rng.gamma(shape), "dirichlet": lambda: rng.dirichlet(alpha),
             "categorical": lambda: gpumcmc.categorical(w, rng, out=out)}
    for name, fn in cases.items():
        for mode in (False, True):
            with gpumcmc.validation(mode):
                for _ in range(3): fn()
                s.synchronize()
                t = []
                for _ in range(40):
                    t0 = time.perf_counter(); fn(); t1 = time.perf_counter(); s.synchronize(); t2 = time.perf_counter()
                    t.append((t1 - t0, t2 - t1, t2 - t0))
                t = np.median(np.array(t) * 1e6, axis=0)
                # the same call again right after another was queued (GPU busy): pure host time
                h = []
                for _ in range(40):
                    fn(); t0 = time.perf_counter(); fn(); h.append(time.perf_counter() - t0); s.synchronize()
                print(f"{name:11s} validation={'on ' if mode else 'off'} call returns after {t[0]:8.1f} us, then wait "
                      f"{t[1]:8.1f} us, total {t[2]:8.1f}; host time of a call queued behind another {np.median(h)*1e6:8.1f} us",
                      flush=True)


if __name__ == "__main__":
    main()
