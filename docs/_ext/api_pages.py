"""Write the API reference's pages from the public modules' ``__all__``.

Each module gets a page with an autosummary table; every public name gets its own
stub page (written by autosummary). A name re-exported from a module documented
elsewhere links to that page instead, so each object is described once.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

# Most specific first: a name is documented in the first module here that exports it.
MODULES = [
    ("gpumcmc.models", "Models: scikit-learn-style estimators"),
    ("gpumcmc.nested", "Nested sampling"),
    ("gpumcmc.random", "Random variates: counter-based Philox streams"),
    ("gpumcmc.discrete", "Discrete draws: many categorical distributions at once"),
    ("gpumcmc.glm", "GLM log-likelihoods and gradients"),
    ("gpumcmc.sampling", "The sampler core: run driver, traces, estimator base"),
    ("gpumcmc.shards", "Sharding data over devices"),
    ("gpumcmc.distributed", "Independent runs as Dask tasks"),
    ("gpumcmc.datasets", "Data sets and readers"),
    ("gpumcmc", "Top level: backend, validation, re-exported draws"),
]

# Classes whose public members are partly inherited from a private base, documented with them (but not
# those of the estimator base, gpumcmc.sampling.Estimator): Generator's key, offset, advance and xp come from
# the Philox stream it shares with gpumcmc.discrete; Ising's and RBM's init and step from their sampler.
WITH_INHERITED = {"gpumcmc.random.Generator", "gpumcmc.models.Ising", "gpumcmc.models.RBM"}


def _names(module):
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    return [n for n in names if not inspect.ismodule(getattr(module, n))]


def _kind(obj):
    if inspect.isclass(obj):
        return "Classes"
    if callable(obj):
        return "Functions"
    return "Constants"


def write(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    home: dict[int, str] = {}
    pages = []
    for modname, title in MODULES:
        module = importlib.import_module(modname)
        groups: dict[str, list[str]] = {"Classes": [], "Functions": [], "Constants": []}
        links: list[str] = []
        inherited: list[str] = []
        for name in _names(module):
            obj = getattr(module, name)
            hashable = not isinstance(obj, (str, int, float, tuple, frozenset, dict, list, set))
            if hashable and id(obj) in home:
                links.append(f"``{name}``: see :py:obj:`{home[id(obj)]}.{name}`")
                continue
            if name == "__version__":
                links.append(f"``__version__``: the installed version, ``{obj}``")
                continue
            if hashable:
                home[id(obj)] = modname
            groups[_kind(obj)].append(name)
            if f"{modname}.{name}" in WITH_INHERITED:
                inherited.append(name)
        lines = [f"``{modname}``", "=" * (len(modname) + 4), "", title + ".", "",
                 f".. automodule:: {modname}", "   :no-members:", "", f".. currentmodule:: {modname}", ""]
        for kind, names in groups.items():
            if not names:
                continue
            lines += [kind, "-" * len(kind), ""]
            own = [n for n in names if n not in inherited]
            for block, template in ((own, ""), ([n for n in names if n in inherited], "class_inherited.rst")):
                if block:
                    lines += [".. autosummary::", "   :toctree: generated/"]
                    lines += [f"   :template: autosummary/{template}"] if template else []
                    lines += [""] + [f"   {n}" for n in block] + [""]
        if links:
            lines += ["Also here", "---------", ""] + [f"- {x}" for x in links] + [""]
        page = modname.replace(".", "_")
        new = "\n".join(lines)
        path = out / f"{page}.rst"
        if not path.exists() or path.read_text() != new:
            path.write_text(new)
        pages.append(page)
    index = ["API reference", "=============", "",
             "Generated from each module's ``__all__``: every public name has a page.", "",
             ".. toctree::", "   :maxdepth: 1", ""] + [f"   {p}" for p in pages] + [""]
    text = "\n".join(index)
    path = out / "index.rst"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
