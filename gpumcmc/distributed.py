"""Independent runs across processes, GPUs and machines, through Dask.

A run of a gpumcmc estimator or sampler is a pure function of its settings,
its data and its seed, so independent chains, restarts and nested-sampling
runs parallelise as tasks. :func:`map_runs` gives each task its own child of
one ``SeedSequence`` and gathers the results in order; without a Dask client
it runs them in this process, and gives the same draws. Chains merge with
:func:`concat_arviz`; nested-sampling runs with
:func:`gpumcmc.nested.combine_runs`, the combined-runs estimator.

On a GPU host, ``dask_cuda.LocalCUDACluster()`` starts one worker per GPU;
on a CPU, ``distributed.LocalCluster(n_workers=..., threads_per_worker=1)``
does the same with processes. Dask is an optional extra
(``pip install "gpumcmc[dask]"``), imported only when a client is passed.

Examples
--------
>>> import numpy as np
>>> from gpumcmc.distributed import map_runs
>>> def run(seed, n):                         # any picklable function of a seed
...     import gpumcmc
...     return gpumcmc.random.default_rng(seed, backend="numpy").normal(size=n).mean()
>>> here = map_runs(run, 4, random_state=0, args=(1000,))
>>> len(here)
4
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["concat_arviz", "fit_runs", "map_runs", "run_seeds"]


def run_seeds(n_runs: int, random_state=None) -> list[np.random.SeedSequence]:
    """``n_runs`` independent child seeds of ``random_state`` (an int, a SeedSequence or None)."""
    if isinstance(n_runs, bool) or not isinstance(n_runs, (int, np.integer)) or n_runs < 1:
        raise ValueError(f"n_runs must be a positive integer, got {n_runs!r}.")
    if isinstance(random_state, np.random.SeedSequence):
        seq = random_state
    elif random_state is None or isinstance(random_state, (int, np.integer)):
        seq = np.random.SeedSequence(random_state)
    else:
        raise TypeError("random_state must be an int, a numpy.random.SeedSequence or None; "
                        "a generator object cannot be split between processes.")
    return seq.spawn(int(n_runs))


def _check_client(client):
    if client is None:
        return None
    if not (hasattr(client, "map") and hasattr(client, "gather")):
        raise TypeError("client must be a dask.distributed.Client (or None to run here).")
    return client


def map_runs(fn: Callable, n_runs: int, *, random_state=None, args: Sequence = (), kwargs: dict | None = None,
             client=None, pure: bool = False) -> list:
    """``[fn(seed_i, *args, **kwargs) for each run i]``, as Dask tasks when ``client`` is given.

    Each run gets the child seed ``SeedSequence(random_state).spawn(n_runs)[i]``,
    so the results do not depend on where or in what order the runs execute:
    with a client and without one they are the same. ``fn`` and its
    arguments must be picklable (a module-level function).
    """
    seeds = run_seeds(n_runs, random_state)
    kwargs = dict(kwargs or {})
    client = _check_client(client)
    if client is None:
        return [fn(s, *args, **kwargs) for s in seeds]
    scattered = [client.scatter(a, broadcast=True) if _is_large(a) else a for a in args]
    futures = [client.submit(fn, s, *scattered, pure=pure, **kwargs) for s in seeds]
    return client.gather(futures)


def _is_large(a) -> bool:
    """Over 1 MiB: an array, a SciPy sparse matrix (its arrays, in any format) or a pandas object."""
    n = getattr(a, "nbytes", None)
    if n is None and hasattr(a, "memory_usage"):  # pandas
        usage = a.memory_usage(index=True)
        n = int(usage.sum()) if hasattr(usage, "sum") else int(usage)
    if n is None:
        n = sum(getattr(getattr(a, f, None), "nbytes", 0) for f in ("data", "indices", "indptr", "row", "col"))
    return (n or 0) > (1 << 20)


def _fit_clone(seed, estimator, n_args, kw_names, *values):
    """A copy of ``estimator`` seeded ``seed``, fitted on ``values``: the first ``n_args`` positional, the
    rest keyword arguments named ``kw_names`` (each its own task argument, so that large data is scattered
    to the workers once, not sent inside every task)."""
    est = _clone(estimator)
    est.set_params(random_state=seed)
    est.fit(*values[:n_args], **dict(zip(kw_names, values[n_args:])))
    return est


def _clone(estimator):
    params = estimator.get_params()
    return type(estimator)(**params)


def fit_runs(estimator, *fit_args, n_runs: int = 4, random_state=None, client=None, **fit_kwargs) -> list:
    """Fit ``n_runs`` copies of ``estimator``, each with its own seed, as Dask tasks.

    For independent chains of an MCMC estimator, or restarts of an EM fit.
    ``random_state`` seeds the runs (run i gets the i-th child of its ``SeedSequence``); ``client``: a
    ``dask.distributed.Client`` (None: the runs one after another in this process, with the same seeds and
    results); other keyword arguments go to each copy's ``fit``. Returns the fitted copies in run order; :func:`concat_arviz` merges their
    draws into one ArviZ object with the runs' chains side by side.
    """
    if not hasattr(estimator, "get_params") or not hasattr(estimator, "fit"):
        raise TypeError("estimator must be a gpumcmc estimator (with get_params, set_params and fit).")
    if "random_state" not in estimator.get_params():
        raise TypeError(f"{type(estimator).__name__} has no random_state parameter to give each run its own seed.")
    return map_runs(_fit_clone, n_runs, random_state=random_state, client=client,
                    args=(estimator, len(fit_args), tuple(fit_kwargs), *fit_args, *fit_kwargs.values()))


def concat_arviz(runs: Sequence[Any]):
    """One ArviZ object with the chains of every run: ``runs`` are fitted estimators or ArviZ objects."""
    from .sampling._arviz import _import_arviz

    az = _import_arviz()
    datas = [r.to_arviz() if hasattr(r, "to_arviz") else r for r in runs]
    if not datas:
        raise ValueError("no runs to concatenate.")
    if len(datas) == 1:
        return datas[0]
    draws = [int(_posterior(d).sizes["draw"]) for d in datas]
    if len(set(draws)) > 1:
        raise ValueError(f"the runs hold {draws} draws a chain; chains of different lengths cannot be stacked "
                         "(ArviZ would pad the shorter with NaN). For nested sampling runs use "
                         "gpumcmc.nested.combine_runs and its to_arviz(); otherwise give every run the same "
                         "n_iter and thinning.")
    return az.concat(*datas, dim="chain", reset_dim=True)


def _posterior(data):
    """The posterior group of an ArviZ 0.x InferenceData or an ArviZ 1.x DataTree."""
    return data.posterior if hasattr(data, "posterior") else data["posterior"]
