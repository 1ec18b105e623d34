"""The package's import structure: no cycles between modules, and no import from a lower layer up to a
higher one. Read from the source with ``ast`` (every import counts, also one inside a function), so it
needs nothing installed and runs in the CPU suite."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "gpumcmc"

# Layers from the bottom; a module may import its own layer and those below it.
LAYERS = [
    ("core", ("gpumcmc._", "gpumcmc.backend")),
    ("primitives", ("gpumcmc.random", "gpumcmc.discrete")),
    ("sampler core", ("gpumcmc.sampling", "gpumcmc.shards", "gpumcmc.distributed")),
    ("models", ("gpumcmc.glm", "gpumcmc.nested", "gpumcmc.models", "gpumcmc.datasets")),
    ("applications", ("gpumcmc", "gpumcmc.demo", "gpumcmc.__main__")),
]


def _modules():
    mods = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        mods[name] = p
    return mods


def _graph():
    mods = _modules()
    graph = {m: set() for m in mods}
    for m, p in mods.items():
        package = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                for a in node.names:
                    target = f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod
                    if target in mods and target != m:
                        graph[m].add(target)
            elif isinstance(node, ast.Import):
                graph[m].update(a.name for a in node.names if a.name in mods and a.name != m)
    return graph


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _layer(module: str) -> int:
    for i, (_, prefixes) in enumerate(LAYERS):  # a module named exactly first (gpumcmc.__main__)
        if module in prefixes:
            return i
    for i, (_, prefixes) in enumerate(LAYERS):
        if any(p != "gpumcmc" and module.startswith(p if p.endswith("_") else p + ".") for p in prefixes):
            return i
    raise AssertionError(f"{module} is in no layer; add it to LAYERS")


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def _upward(graph):
    """The imports (module, target) of ``graph`` from a lower layer up to a higher one."""
    return sorted((m, t) for m, targets in graph.items() for t in targets
                  if m != "gpumcmc" and _layer(t) > _layer(m))


def test_no_import_from_a_lower_layer_up():
    up = _upward(_graph())
    assert not up, up


def test_the_checks_find_a_cycle_and_an_upward_import():
    """The helpers above on a made-up graph: they can fail."""
    graph = {"gpumcmc.backend": {"gpumcmc.models.lda"}, "gpumcmc.models.lda": {"gpumcmc.backend"}}
    assert _cycles(graph) == [{"gpumcmc.backend", "gpumcmc.models.lda"}]
    assert _layer("gpumcmc.models.lda") > _layer("gpumcmc.backend")
    assert _upward(graph) == [("gpumcmc.backend", "gpumcmc.models.lda")]
    layers = {"gpumcmc._loader": 0, "gpumcmc.backend": 0, "gpumcmc.random._gamma": 1, "gpumcmc.discrete": 1,
              "gpumcmc.sampling._estimator": 2, "gpumcmc.shards": 2, "gpumcmc.models.lda": 3, "gpumcmc.glm": 3,
              "gpumcmc": 4, "gpumcmc.__main__": 4, "gpumcmc.demo": 4}
    assert {m: _layer(m) for m in layers} == layers


def test_the_graph_holds_the_packages_imports():
    """The graph the checks read is the package's: every module, and the edges of each kind of import (an
    absolute one, a relative one of one or two dots, one inside a function). An empty or partial graph
    would pass the checks above."""
    graph = _graph()
    assert len(graph) > 60 and {"gpumcmc", "gpumcmc.__main__", "gpumcmc.random", "gpumcmc.random._gamma",
                                "gpumcmc.models.lda", "gpumcmc.models.bayesnet.algorithm"} <= set(graph)
    for module, target in [
        ("gpumcmc", "gpumcmc.backend"),                                     # from . import backend
        ("gpumcmc.discrete", "gpumcmc._config"),                            # from ._config import config
        ("gpumcmc.random._params", "gpumcmc._validate"),                    # from .. import _validate
        ("gpumcmc.models.bayesnet.algorithm", "gpumcmc.backend"),           # from gpumcmc import backend
        ("gpumcmc.models.bayesnet.algorithm", "gpumcmc.random._fill"),      # the same, inside a function
        ("gpumcmc._kernel_args", "gpumcmc._loader"),                        # from ._loader import ..., inside one
        ("gpumcmc.__main__", "gpumcmc.demo"),
    ]:
        assert target in graph[module], (module, target)
    assert sum(map(len, graph.values())) > 200
