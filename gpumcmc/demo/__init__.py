"""``python -m gpumcmc demo``: every model on built-in data, with a short summary each.

Each model's part is ``gpumcmc/demo/<name>.py`` with ``run(outdir, small) ->
dict``: it fits on data that ships with gpumcmc's dependencies (or synthetic
data drawn from the model, said so in its summary), shows progress bars,
writes PNG plots into ``outdir`` and returns ``{"model", "data", "seconds",
"quality"}``. On a CPU the parts run small settings so that the whole demo
finishes in a few minutes; on a GPU they scale up (:func:`small_settings`).
"""

from __future__ import annotations

import importlib
import time
import traceback
from pathlib import Path

# The parts, in the order the demo runs them.
PARTS = ("lda", "mixture", "bayesnet", "glm", "ising", "nested")


def small_settings() -> bool:
    """Whether the demo and the notebooks take their small settings: without a GPU, unless
    the environment variable ``GPUMCMC_SMALL`` says otherwise (``1``: small, ``0``: full)."""
    import os

    from .. import backend

    flag = os.environ.get("GPUMCMC_SMALL", "").strip().lower()
    if flag in ("1", "true", "yes", "on"):
        return True
    if flag in ("0", "false", "no", "off"):
        return False
    if flag:
        raise ValueError(f"GPUMCMC_SMALL={flag!r}: use 1 (small settings) or 0 (full settings), or unset it.")
    return backend.backend_name() != "cupy"


# What each part imports beyond gpumcmc's own needs (module -> the pip name), all in the `demo` extra.
_NEEDS = {"lda": {"lda": "lda"}, "mixture": {"flowio": "flowio"}, "bayesnet": {"networkx": "networkx"},
          "glm": {"sklearn": "scikit-learn"}, "ising": {"sklearn": "scikit-learn"}, "nested": {}}


def _missing(names) -> list[str]:
    """The pip names of the packages the parts ``names`` need and cannot import (matplotlib for all)."""
    import importlib.util

    needs = {"matplotlib": "matplotlib"}
    for n in names:
        needs.update(_NEEDS.get(n, {}))
    return sorted({pip for mod, pip in needs.items() if importlib.util.find_spec(mod) is None})


def available() -> list[str]:
    """The parts whose module exists in this installation."""
    here = Path(__file__).resolve().parent
    return [p for p in PARTS if (here / f"{p}.py").exists()]


def run(parts=None, outdir="gpumcmc-demo", small: bool | None = None) -> list[dict]:
    """Run the demo parts (default: all that exist), write plots to ``outdir``, print summaries."""
    from .. import backend

    names = [parts] if isinstance(parts, str) else (list(parts) if parts else available())
    unknown = [p for p in names if p not in PARTS]
    if unknown:
        raise ValueError(f"unknown demo part(s) {unknown}; choose from {list(PARTS)}.")
    missing = [p for p in names if p not in available()]
    if missing:
        raise ValueError(f"demo part(s) {missing} are not in this version of gpumcmc; available: {available()}.")
    absent = _missing(names)
    if absent:
        raise ValueError(f"the demo needs {', '.join(absent)}, which cannot be imported here: pip install "
                         "\"gpumcmc[demo]\" (or, from a checkout, pip install -e \".[demo]\").")
    if small is None:
        small = small_settings()
    out = Path(outdir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file; name a folder for the plots.")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot make the folder {str(out)!r} for the plots ({e.strerror}); name another with "
                         "--out.") from None
    print(f"gpumcmc demo on backend {backend.backend_name()} ({'small' if small else 'full'} settings); "
          f"plots go to {out.resolve()}", flush=True)
    results = []
    for name in names:
        print(f"\n== {name}", flush=True)
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(f"{__name__}.{name}")
            summary = dict(module.run(out, small))
        except Exception as e:  # one broken part must not hide the others
            traceback.print_exc()
            summary = {"model": name, "error": f"{type(e).__name__}: {e}"}
        summary.setdefault("seconds", time.perf_counter() - t0)
        results.append(summary)
        print(f"-> {_line(summary)}", flush=True)  # each part's result as soon as it is known
    print("\n== summary", flush=True)
    for s in results:
        print(_line(s))
    return results


def _line(s: dict) -> str:
    if "error" in s:
        return f"{s['model']}: FAILED ({s['error']})"
    return f"{s.get('model')}: {s.get('data')}; {s['seconds']:.1f} s; {s.get('quality')}"
