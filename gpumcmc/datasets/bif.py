"""BIF files: gpumcmc's own reader and writer of discrete Bayesian networks (used by
``BayesianNetwork.from_bif`` and ``to_bif``), and pgmpy's bundled networks (offline)."""
from __future__ import annotations

import glob
import gzip
import os
import re

import numpy as np


class _NoPgmpy(dict):
    """The empty map of :func:`bif_example_files` without pgmpy: a name asked for says what to install."""

    def __missing__(self, key):
        raise KeyError(f"{key!r}: the example networks come with pgmpy, which is not installed: pip install pgmpy.")


def bif_example_files() -> dict:
    """Map network name -> path of pgmpy's bundled ``*.bif.gz`` files (empty if pgmpy is missing)."""
    try:
        import pgmpy
    except ImportError:
        return _NoPgmpy()
    d = os.path.join(os.path.dirname(pgmpy.__file__), "utils", "example_models")
    return {os.path.basename(f)[: -len(".bif.gz")]: f for f in sorted(glob.glob(os.path.join(d, "*.bif.gz")))}


def read_bif(path) -> tuple[dict, dict, dict]:
    """``(parents, states, cpts)`` of the BIF file at ``path``, gzipped (``.gz``) or not: node -> parent
    names, node -> state names, node -> array of shape ``(*parent_cards, card)``, in the file's order of
    variables."""
    path = str(path)
    opener = gzip.open if path.endswith(".gz") else open
    try:
        with opener(path, "rt") as f:
            text = f.read()
    except (gzip.BadGzipFile, UnicodeDecodeError, EOFError) as e:
        raise ValueError(f"{path} cannot be read as {'gzipped ' if opener is gzip.open else ''}BIF text "
                         f"({e}); give a BIF file (.bif, or .bif.gz gzipped).") from None
    states = _states(text, path)
    parents, cpts = {}, {}
    for m in re.finditer(r"probability\s*\(\s*([^|)]+?)\s*(?:\|\s*([^)]*))?\)\s*\{(.*?)\}", text, re.S):
        v = m.group(1).strip()
        ps = [p.strip() for p in m.group(2).split(",")] if m.group(2) else []
        for u in [v, *ps]:
            _declared(states, u, f"The probability block ( {v}{' | ' + ', '.join(ps) if ps else ''} )", path)
        if v in parents:
            raise ValueError(f"{path} has two probability blocks for {v!r}; keep one.")
        parents[v] = ps
        cpts[v] = _cpt(m.group(3), v, ps, states, path)
    missing = [v for v in states if v not in parents]
    if missing:
        raise ValueError(f"{path} has no probability block for {missing}; add 'probability ( NAME ) {{ table "
                         "...; }' for each.")
    order = list(states)
    return {v: parents.get(v, []) for v in order}, states, cpts


def _states(text, path):
    """node -> its state names, from the file's variable blocks."""
    states = {}
    for m in re.finditer(r"variable\s+([^\s{]+)\s*\{(.*?)\n\s*\}", text, re.S):
        sm = re.search(r"\{\s*(.*?)\s*\}", m.group(2), re.S)
        if sm is None:
            raise ValueError(f"Variable {m.group(1)} in {path} has no states.")
        states[m.group(1)] = [s.strip() for s in sm.group(1).split(",")]
    if not states:
        raise ValueError(f"{path} declares no variables ('variable NAME {{ type discrete [ k ] {{ ... }}; }}'); "
                         "is it a BIF file?")
    return states


def _declared(states, v, where, path):
    if v not in states:
        raise ValueError(f"{where} in {path} names {v!r}, which no variable block declares; declare it "
                         "with 'variable ... { type discrete [ k ] { ... }; }'.")


def _numbers(text_, v, path):
    try:
        return np.array([float(x) for x in re.split(r"[\s,]+", text_.strip())])
    except ValueError:
        raise ValueError(f"The probability block of {v!r} in {path} holds a value that is not a number: "
                         f"{text_.strip()!r}.") from None


def _cpt(body, v, ps, states, path):
    """The CPT of ``v`` (parents ``ps``) from the body of its probability block: a ``table`` or rows."""
    card = len(states[v])
    shape = tuple(len(states[p]) for p in ps) + (card,)
    tab = re.search(r"table\s+([^;]*);", body)
    if tab is not None:
        t = _numbers(tab.group(1), v, path)
        if t.size != int(np.prod(shape)):
            raise ValueError(f"The table of {v!r} in {path} has {t.size} values; with {card} states and "
                             f"parents {ps} it needs {int(np.prod(shape))}.")
        # BIF tables list the child's state slowest.
        t = t.reshape((card,) + shape[:-1])
        return np.moveaxis(t, 0, -1)
    t = np.full(shape, np.nan)
    for row in re.finditer(r"\(([^)]*)\)\s*([^;]*);", body):
        names = [x.strip() for x in row.group(1).split(",")]
        if len(names) != len(ps):
            raise ValueError(f"The row ({row.group(1)}) of {v!r} in {path} names {len(names)} parent "
                             f"states; {v!r} has the parents {ps}.")
        for p, x in zip(ps, names):
            if x not in states[p]:
                raise ValueError(f"The row ({row.group(1)}) of {v!r} in {path} names state {x!r} of "
                                 f"{p!r}, whose states are {states[p]}.")
        vals = _numbers(row.group(2), v, path)
        if vals.size != card:
            raise ValueError(f"The row ({row.group(1)}) of {v!r} in {path} has {vals.size} values; "
                             f"{v!r} has {card} states.")
        t[tuple(states[p].index(x) for p, x in zip(ps, names))] = vals
    if np.isnan(t).any():
        first = next(np.ndindex(*shape[:-1])) if not ps else np.argwhere(np.isnan(t[..., 0]))[0]
        names = ", ".join(states[p][k] for p, k in zip(ps, first))
        raise ValueError(f"The probability block of {v!r} in {path} has no row ({names}); give a row "
                         "for every combination of its parents' states, or a table.")
    return t


def write_bif(path, nodes, parents, states, cpts) -> None:
    """Write the network of ``nodes`` (in that order) with its ``parents``, ``states`` and ``cpts`` as BIF."""
    card = {v: len(states[v]) for v in nodes}
    lines = ["network unknown {\n}"]
    for v in nodes:
        lines.append(f"variable {v} {{\n  type discrete [ {card[v]} ] {{ {', '.join(states[v])} }};\n}}")
    for v in nodes:
        ps = parents[v]
        head = f"probability ( {v}{' | ' + ', '.join(ps) if ps else ''} ) {{"
        t = cpts[v]
        if not ps:
            body = ["  table " + ", ".join(repr(float(x)) for x in t) + ";"]
        else:
            body = []
            for idx in np.ndindex(*t.shape[:-1]):
                names = ", ".join(states[p][i] for p, i in zip(ps, idx))
                body.append(f"  ({names}) " + ", ".join(repr(float(x)) for x in t[idx]) + ";")
        lines.append("\n".join([head, *body, "}"]))
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
