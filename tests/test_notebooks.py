"""Every notebook under notebooks/ runs top to bottom on this machine, with small settings,
and is committed with its outputs so that it renders on a code host and in the docs' gallery.

The notebooks take their small settings (smaller corpora, data sets and
iteration counts) from :func:`gpumcmc.demo.small_settings`; ``GPUMCMC_SMALL=1``
asks for them even on a GPU. Each takes from seconds to two minutes on a 2-core
CPU, so running them is a slow test: CI runs them after the quick suite.
"""

import json
import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]

# Warnings a notebook must not print: an API it calls is going away, or tqdm
# lacks ipywidgets (the `notebooks` extra brings it).
UNWANTED = ("DeprecationWarning", "FutureWarning", "TqdmWarning", "Traceback")


def _stderr(nb) -> str:
    return "".join("".join(o.get("text", "")) for c in nb["cells"] if c["cell_type"] == "code"
                   for o in c.get("outputs", []) if o.get("output_type") == "stream" and o.get("name") == "stderr")


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_is_committed_with_outputs_of_a_cpu_run(path):
    nb = json.loads(path.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), f"{path.name} has cells that were not run"
    assert any(c.get("outputs") for c in code), f"{path.name} has no outputs"
    assert any("image/png" in o.get("data", {}) for c in code for o in c["outputs"]), f"{path.name} has no plot"
    first = "".join(nb["cells"][0]["source"])
    assert "CPU run" in first and "small_settings" in first, f"{path.name}'s first cell does not say how it ran"
    bad = [w for w in UNWANTED if w in _stderr(nb)]
    assert not bad, f"{path.name}'s saved outputs show {bad}"


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_notebook_runs(path, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("GPUMCMC_SMALL", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    root = str(Path(__file__).resolve().parent.parent)
    monkeypatch.setenv("PYTHONPATH", root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    bad = [w for w in UNWANTED if w in _stderr(nb)]
    assert not bad, f"{path.name} printed {bad}:\n{_stderr(nb)[-2000:]}"
