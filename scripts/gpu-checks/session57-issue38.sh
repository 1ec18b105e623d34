#!/usr/bin/env bash
# 4 GPUs, under 10 minutes: issue40-final.sh's phase 1 (user_path.py, every section, beside the suites'
# public rows and bare steps, one lane a GPU) with dynesty installed, so that user_path.py's nested section
# times dynesty on this host's CPU beside gpumcmc; then benchmarks.compare_public, whose rows now include
# issue 38's goals. Phase 2 (the scaling runs over GPUs) is left out: issue 38 is about one GPU.
# Wheels: .whl/dynesty-3.1.0-py3-none-any.whl, carried.
set -u
D=${OUT:-out}; mkdir -p "$D"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$D/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
python -c "import dynesty; print('dynesty', dynesty.__version__)"
ISSUE40_PHASE1_S=${PHASE1_S:-330} ISSUE40_BUDGET_S=${BUDGET_S:-345} ISSUE40_DIR=/tmp/i38 OUT="$D" \
  bash scripts/gpu-checks/issue40-final.sh
