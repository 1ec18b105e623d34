"""Sphinx configuration for gpumcmc's documentation.

The API pages, the gallery and the benchmark tables are generated at build time
(see ``_ext/``), so they follow the code, the notebooks and the committed JSON
without hand edits. Nothing here imports CuPy: the build runs on a CPU.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("GPUMCMC_BACKEND", "numpy")
os.environ.setdefault("MPLBACKEND", "Agg")

import gpumcmc  # noqa: E402

import api_pages  # noqa: E402
import bench_pages  # noqa: E402
import gallery_pages  # noqa: E402

project = "gpumcmc"
author = "gpumcmc developers"
copyright = "gpumcmc developers"
release = gpumcmc.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_nb",
    "sphinx_copybutton",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**.ipynb_checkpoints", "README.md"]
templates_path = ["_templates"]

# API reference: one stub per public name, written from each module's __all__.
autosummary_generate = True
autosummary_imported_members = True
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set = set()

# Notebooks are rendered from their committed outputs; CI executes them elsewhere.
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "pydata_sphinx_theme"
html_title = f"gpumcmc {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

suppress_warnings = ["mystnb.unknown_mime_type"]


def _skip_foreign(app, what, name, obj, skip, options):
    """Leave out members that scikit-learn adds to its estimators (``set_fit_request`` and the like):
    they are scikit-learn's, documented there, and their docstrings refer to its glossary."""
    module = getattr(obj, "__module__", "") or ""
    if module.startswith("sklearn") or (name.startswith("set_") and name.endswith("_request")):
        return True
    return skip


def setup(app):
    app.connect("autodoc-skip-member", _skip_foreign)


def _generate(app):
    api_pages.write(HERE / "api" / "_gen")
    gallery_pages.write(ROOT / "notebooks", HERE / "gallery" / "_nb")
    bench_pages.write(ROOT / "benchmarks" / "results", HERE / "benchmarks" / "_gen")


# Written before Sphinx reads the sources, so the generated pages are part of this build.
_generate(None)
