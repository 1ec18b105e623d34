"""No function in ``gpumcmc/`` is longer than 80 lines: its ``def`` to its last line, less its docstring.

The docstring is the function's reference documentation (``help()``, the API pages); a public entry
point such as ``sampling.run`` documents a dozen parameters there, which says nothing of how long its
logic is to read. Everything else counts: signature, comments, blank lines.

Read from the source with ``ast``, so it runs in the CPU suite. ``ALLOWED`` names the functions still
being split; it can only shrink: an entry that is gone or back within the limit fails too, so that
whoever splits a function also takes it off the list.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "gpumcmc"
LIMIT = 80

# (path under gpumcmc/, qualified name) of the functions over the limit that are still to be split.
ALLOWED: set = set()


def _lengths(source: str):
    """(qualified name, first line, number of lines) of every function and method in ``source``."""
    out = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                doc = child.body[0] if ast.get_docstring(child, clean=False) is not None else None
                n_doc = 0 if doc is None else doc.end_lineno - doc.lineno + 1
                out.append((name, child.lineno, child.end_lineno - child.lineno + 1 - n_doc))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return out


def _too_long():
    found = {}
    for p in sorted(ROOT.rglob("*.py")):
        for name, line, n in _lengths(p.read_text()):
            if n > LIMIT:
                found[(p.relative_to(ROOT).as_posix(), name)] = (line, n)
    return found


def test_no_function_over_the_limit():
    extra = {k: v for k, v in _too_long().items() if k not in ALLOWED}
    assert not extra, "functions over %d lines (split them into named helpers): %s" % (
        LIMIT, ", ".join(f"{path}:{line} {name} ({n} lines)" for (path, name), (line, n) in sorted(extra.items())))


def test_the_allowed_list_only_shrinks():
    stale = ALLOWED - set(_too_long())
    assert not stale, f"within {LIMIT} lines now (or gone); take them off ALLOWED: {sorted(stale)}"


@pytest.mark.parametrize("n_body,expected", [(LIMIT - 1, LIMIT), (LIMIT, LIMIT + 1)])
@pytest.mark.parametrize("doc", ["", '        """One line."""\n', '        """Three\n\n        lines."""\n'])
def test_lengths_count_def_to_last_line_less_the_docstring(n_body, expected, doc):
    # A method nested in a class, decorated: counted from its def line, decorator and docstring left out.
    source = "class C:\n    @staticmethod\n    def f():\n" + doc + "        x = 1\n" * n_body
    assert _lengths(source) == [("C.f", 3, expected)]


def test_a_string_after_the_first_statement_counts():
    source = "def f():\n    x = 1\n    'not a docstring'\n"
    assert _lengths(source) == [("f", 1, 3)]
