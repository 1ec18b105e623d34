"""Every CUDA kernel in ``kernels_cu/`` has a launcher in ``gpumcmc/``: a kernel that nothing launches
is deleted, or moved next to the test or benchmark that keeps it as a reference. Read from the sources
(comments and docstrings left out), so it needs no GPU and runs in the CPU suite."""

from __future__ import annotations

import ast
import io
import pathlib
import re
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1]


def kernel_names(source: str) -> set[str]:
    """The names of the ``__global__`` functions defined or instantiated in CUDA ``source``."""
    source = re.sub(r"/\*.*?\*/", "", re.sub(r"//[^\n]*", "", source), flags=re.S)
    names = set()
    for m in re.finditer(r"__global__", source):
        head = re.sub(r"__launch_bounds__\s*\([^)]*\)", "", source[m.end(): m.end() + 400])
        names.add(re.search(r"(\w+)\s*(?:<[^>(]*>)?\s*\(", head).group(1))
    return names


def code_words(source: str) -> set[str]:
    """The identifiers in Python ``source``'s code and strings, its comments and docstrings left out."""
    docs = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            docs.update(range(body[0].lineno, body[0].end_lineno + 1))
    words = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type != tokenize.COMMENT and tok.start[0] not in docs:
            words.update(re.findall(r"\w+", tok.string))
    return words


def test_every_kernel_has_a_launcher():
    used = set().union(*(code_words(p.read_text()) for p in (ROOT / "gpumcmc").rglob("*.py")))
    kernels = {(p.name, k) for p in (ROOT / "kernels_cu").glob("*.cu*") for k in kernel_names(p.read_text())}
    assert len(kernels) > 40  # the parser found them
    assert sorted((f, k) for f, k in kernels if k not in used) == []


def test_the_check_finds_an_unused_kernel():
    """The helpers above on made-up sources: a kernel named only in a comment or docstring is unused."""
    cu = ("template <typename T> __global__ void __launch_bounds__(256) a_kernel(T* x) {}\n"
          "// __global__ void commented_out(int)\n"
          "template __global__ void a_kernel<float>(float*);\n"
          "extern \"C\" __global__ void b_kernel(int n) {}\n")
    assert kernel_names(cu) == {"a_kernel", "b_kernel"}
    py = '"""Launches b_kernel."""\n# b_kernel too\nNAMES = ("a_kernel<float>",)\n'
    assert {"a_kernel"} <= code_words(py) and "b_kernel" not in code_words(py)
