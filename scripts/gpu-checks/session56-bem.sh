#!/usr/bin/env bash
# One GPU, about 3 minutes: the mixture's and scikit-learn's GPU tests after BEM's rule began to read the
# components waiting to be pruned (CuPy counts), then user_path.py's mixture section.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT 200 python -m pytest -q -m gpu -p no:cacheprovider tests/test_mixture.py \
  tests/test_sklearn.py > "$D/tests.log" 2>&1; echo "tests rc=$?"; tail -n 1 "$D/tests.log"
timeout -s INT 150 python scripts/user_path.py mixture --out "$D/user_path-mixture.json" > "$D/user_path.log" 2>&1
echo "user_path rc=$?"; grep "_ms" "$D/user_path-mixture.json"
cd "$D" && tar czf logs.tgz *.log host.txt && rm -f *.log host.txt
