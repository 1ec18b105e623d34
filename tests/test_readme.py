"""The README's and the documentation's Python examples run as written, each as a script would
(``__name__ == "__main__"``).

The README's examples run on NumPy here (most pass ``backend="numpy"``) and on CuPy where a GPU
is present. Those that read a data set (a few seconds each on 2 cores, most of it loading the
data and scikit-learn) and the Dask one, which starts worker processes, are marked slow. The guides' examples (``docs/**/*.md``) use the default backend and realistic settings, so
they are all marked slow. An example that needs a GPU says so in a ``# needs a GPU`` comment and
is skipped without one; templates that are not meant to run are written as ``{code-block}``
directives, which this test does not collect.
"""

import re
from pathlib import Path

import pytest
from conftest import requires_gpu

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
TEXT = README.read_text()
FENCE = re.compile(r"```python\n(.*?)```", re.S)
BLOCKS = FENCE.findall(TEXT)
DOCS = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_gen" not in p.parts and "_build" not in p.parts)


def _param(code, where, slow=False):
    marks = []
    if "# needs a GPU" in code:
        marks += [pytest.mark.gpu, requires_gpu]
    if slow or any(s in code for s in ("LocalCluster", "load_reuters", "load_fcs", "load_breast_cancer")):
        marks.append(pytest.mark.slow)
    first = next(line for line in code.splitlines() if line.strip() and not line.startswith(("import", "from")))
    return pytest.param(code, where, id=f"{where.name}-{re.sub(r'[^A-Za-z0-9]+', '_', first)[:30]}", marks=marks)


def _run(code, where):
    exec(compile(code, str(where), "exec"), {"__name__": "__main__"})


def test_readme_has_examples_and_the_ci_command():
    assert len(BLOCKS) >= 7, "the README shows one example per model"
    lines = TEXT.splitlines()
    marker = next(i for i, line in enumerate(lines) if "ci-test-command" in line)
    assert lines[marker + 1] == "```bash" and lines[marker + 2].startswith("pip install")
    assert len(lines) <= 200, "the README stays short; longer material belongs in docs/"


@pytest.mark.parametrize("code, where", [_param(b, README) for b in BLOCKS])
def test_readme_example_runs(code, where):
    _run(code, where)


@pytest.mark.parametrize("code, where", [_param(b, p, slow=True) for p in DOCS for b in FENCE.findall(p.read_text())])
def test_docs_example_runs(code, where):
    _run(code, where)


def test_readme_speed_table_matches_the_committed_results():
    """Every figure of the README's speed table is read from benchmarks/results/, as the docs' table is."""
    import sys

    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    import bench_pages

    table = TEXT[TEXT.index("## Speed"):]
    table = table[:table.index("\n\n", table.index("| case |"))]
    rows = bench_pages.headline(bench_pages._load(ROOT / "benchmarks" / "results"))
    assert len(rows) == len(bench_pages.HEADLINE), "a headline row's file or case is missing from the results"
    lines = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert len(lines) == len(rows)
    for line, h in zip(lines, rows):
        ours, peers = line.split(" | ")[1:3]
        assert ours == bench_pages._show(h["value"], h["metric"]), (line, h["value"])
        for _, value, ratio in h["peer_values"]:
            assert bench_pages._show(value, h["metric"]) in peers, (line, value)
            assert (f"({ratio:.1f}x)" if ratio < 10 else f"({ratio:.0f}x)") in peers, (line, ratio)


@pytest.mark.slow
def test_mixture_guide_pruning_figures():
    """The README and the mixture guide quote BEM on the FACSCalibur file's log channels (every 12th event,
    16 components allowed, NumPy): 13 components above 1% weight and 3 drained to zero. Refit and compare,
    so that a change to BEM updates the text too. BEM is deterministic for a seed: no false failures."""
    import numpy as np

    from gpumcmc.datasets import load_fcs
    from gpumcmc.models import DPGaussianMixture

    channels = ["FSC-H", "SSC-H", "FL1-H", "FL2-H", "FL3-H"]
    X = np.log10(load_fcs("facscalibur", cofactor=None, channels=channels).data[::12])
    bem = DPGaussianMixture(n_components=16, method="bem", n_init=2, random_state=0, progress=False,
                            backend="numpy").fit(X)
    assert "13 of 16 components above 1%, 3 at zero" in TEXT
    assert "it kept 13\nof 16 components above 1% and drained the other 3 to zero" in (
        ROOT / "docs" / "guide" / "mixture.md").read_text()
    assert int((bem.weights_ > 0.01).sum()) == 13 and int((bem.weights_ == 0).sum()) == 3, bem.weights_
