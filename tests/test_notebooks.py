"""Every notebook under notebooks/ runs top to bottom on this machine, with small settings.

The notebooks take their small settings (smaller corpora, data sets and
iteration counts) from :func:`gpumcmc.demo.small_settings`; ``GPUMCMC_SMALL=1``
asks for them even on a GPU. Each takes from seconds to two minutes on a 2-core
CPU, so they are slow tests: CI runs them after the quick suite.
"""

import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
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
