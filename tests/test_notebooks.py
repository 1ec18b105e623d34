"""Every notebook under notebooks/ runs top to bottom on this machine, with small settings.

The notebooks read ``GPUMCMC_SMALL=1`` and shrink their corpora, data sets and
iteration counts, so this runs on a 2-core CPU in CI.
"""

import os
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


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
