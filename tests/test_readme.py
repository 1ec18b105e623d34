"""The README's Python examples run as written (on NumPy here; on CuPy where a GPU is present)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


@pytest.mark.parametrize("code", [b for b in BLOCKS if "_loader.launch(fn, n" not in b])
def test_readme_example_runs(code):
    exec(compile(code, str(README), "exec"), {})
