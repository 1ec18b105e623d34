"""The package's import structure: no cycles between modules, and no import from a lower layer up to a
higher one. Read from the source with ``ast`` (every import counts, also one inside a function), so it
needs nothing installed and runs in the CPU suite."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "gpumcmc"

# Layers from the bottom; a module may import its own layer and those below it.
LAYERS = [
    ("core", ("gpumcmc._", "gpumcmc.backend", "gpumcmc.info")),
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


def test_no_import_from_a_lower_layer_up():
    graph = _graph()
    up = sorted((m, t) for m, targets in graph.items() for t in targets
                if m != "gpumcmc" and _layer(t) > _layer(m))
    assert not up, up


def test_the_checks_find_a_cycle_and_an_upward_import():
    """The helpers above on a made-up graph: they can fail."""
    graph = {"gpumcmc.backend": {"gpumcmc.models.lda"}, "gpumcmc.models.lda": {"gpumcmc.backend"}}
    assert _cycles(graph) == [{"gpumcmc.backend", "gpumcmc.models.lda"}]
    assert _layer("gpumcmc.models.lda") > _layer("gpumcmc.backend")
