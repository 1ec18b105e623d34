"""The README's Python examples run as written, each as a script would (``__name__ == "__main__"``).

They run on NumPy here (most pass ``backend="numpy"``) and on CuPy where a GPU is present. An
example that needs a GPU says so in a ``# needs a GPU`` comment and is skipped without one; the
Dask example starts worker processes and is marked slow.
"""

import re
from pathlib import Path

import pytest
from conftest import requires_gpu

README = Path(__file__).resolve().parent.parent / "README.md"
TEXT = README.read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", TEXT, re.S)


def _param(i, code):
    marks = []
    if "# needs a GPU" in code:
        marks += [pytest.mark.gpu, requires_gpu]
    if "LocalCluster" in code:
        marks.append(pytest.mark.slow)
    first = next(line for line in code.splitlines() if line.strip() and not line.startswith(("import", "from")))
    return pytest.param(code, id=f"{i}-{re.sub(r'[^A-Za-z0-9]+', '_', first)[:30]}", marks=marks)


def test_readme_has_examples_and_the_ci_command():
    assert len(BLOCKS) >= 7, "the README shows one example per model"
    lines = TEXT.splitlines()
    marker = next(i for i, line in enumerate(lines) if "ci-test-command" in line)
    assert lines[marker + 1] == "```bash" and lines[marker + 2].startswith("pip install")
    assert len(lines) <= 200, "the README stays short; longer material belongs in docs/"


@pytest.mark.parametrize("code", [_param(i, b) for i, b in enumerate(BLOCKS)])
def test_readme_example_runs(code):
    exec(compile(code, str(README), "exec"), {"__name__": "__main__"})
