"""pgmpy's bundled BIF networks (offline)."""
from __future__ import annotations

import glob
import os


def bif_example_files() -> dict:
    """Map network name -> path of pgmpy's bundled ``*.bif.gz`` files (empty if pgmpy is missing)."""
    try:
        import pgmpy
    except ImportError:
        return {}
    d = os.path.join(os.path.dirname(pgmpy.__file__), "utils", "example_models")
    return {os.path.basename(f)[: -len(".bif.gz")]: f for f in sorted(glob.glob(os.path.join(d, "*.bif.gz")))}
