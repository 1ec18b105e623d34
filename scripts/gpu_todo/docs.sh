#!/usr/bin/env bash
# GPU checks of the README's and the guides' examples (run from the repository root on a GPU machine).
# Most examples pass backend="numpy"; with CuPy present the rest (the guides' examples, which use the
# default backend) run on the GPU. The docs build itself needs no GPU.
set -x
python -m pytest tests/test_readme.py -q -p no:cacheprovider 2>&1 | tail -15
python -m pytest tests/test_readme.py -q -p no:cacheprovider -m slow 2>&1 | tail -15
