"""Export to ArviZ. ArviZ is an optional extra (``pip install "gpumcmc[arviz]"``), imported only here."""

from __future__ import annotations

import warnings

import numpy as np

from .. import backend as _backend

__all__ = ["to_arviz"]


def _import_arviz():
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # ArviZ 0.2x announces its 1.0 refactor on import
            import arviz
    except ImportError as e:
        raise ImportError('to_arviz() needs ArviZ: pip install arviz (or "gpumcmc[arviz]").') from e
    return arviz


def _host(d):
    if d is None:
        return None
    return {k: np.asarray(_backend.to_host(v)) for k, v in d.items()}


def _major(az) -> int:
    try:
        return int(str(az.__version__).split(".")[0])
    except ValueError:
        return 0


def to_arviz(posterior: dict, sample_stats: dict | None = None, *, coords=None, dims=None,
             observed_data: dict | None = None, attrs: dict | None = None, warmup: dict | None = None):
    """An ArviZ ``InferenceData`` (ArviZ 0.x) or ``DataTree`` (ArviZ 1.x) from draws.

    Parameters
    ----------
    posterior : dict of str -> array
        Draws shaped ``(chain, draw, ...)``, NumPy or CuPy.
    sample_stats : dict, optional
        Per-draw statistics, ``(chain, draw, ...)``.
    coords, dims : dict, optional
        As in ``arviz.from_dict``: names of the trailing axes and their labels.
    observed_data : dict, optional
        The data the model was fitted to.
    attrs : dict, optional
        Attributes stored with the groups (for example the model's name).
    warmup : dict, optional
        Draws of the burn-in (warm-up), ``(chain, draw, ...)``: the ``warmup_posterior`` group.
    """
    az = _import_arviz()
    groups = {"posterior": _host(posterior), "sample_stats": _host(sample_stats),
              "observed_data": _host(observed_data), "warmup_posterior": _host(warmup)}
    groups = {k: v for k, v in groups.items() if v}
    attrs = dict(attrs or {}, inference_library="gpumcmc")
    save_warmup = "warmup_posterior" in groups
    if _major(az) >= 1:  # ArviZ 1.x: the groups in one mapping, a DataTree
        out = az.from_dict(groups, coords=coords, dims=dims, save_warmup=save_warmup)
        for node in (out, *out.children.values()):
            node.attrs.update(attrs)
        return out
    return az.from_dict(**groups, coords=coords, dims=dims, attrs=attrs, save_warmup=save_warmup)
