#!/usr/bin/env bash
# Build the documentation with warnings as errors. Installs nothing: run
# `pip install -e ".[docs]"` first. Works on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
export GPUMCMC_BACKEND="${GPUMCMC_BACKEND:-numpy}"
export MPLBACKEND=Agg
python -m sphinx -W --keep-going -b html docs docs/_build/html "$@"
