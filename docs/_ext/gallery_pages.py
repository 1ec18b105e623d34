"""Copy the notebooks into the documentation's source tree.

Sphinx reads sources only under ``docs/``; the notebooks live in ``notebooks/``
at the repository's root, where CI executes them. They are rendered from their
committed outputs (``nb_execution_mode = "off"``).
"""

from __future__ import annotations

import shutil
from pathlib import Path


def write(src: Path, out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for nb in sorted(src.glob("*.ipynb")):
        target = out / nb.name
        if not target.exists() or target.read_bytes() != nb.read_bytes():
            shutil.copyfile(nb, target)
        names.append(nb.stem)
    for old in out.glob("*.ipynb"):
        if old.stem not in names:
            old.unlink()
    return names
