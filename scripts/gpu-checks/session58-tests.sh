#!/usr/bin/env bash
# One GPU, under 10 minutes: the GPU tests of the files this stop changed (RBM, nested sampling, mixture, GLM,
# Bayesian network, sampling, scikit-learn, pickles, protocol), each file in a process of its own with its
# own time limit, after a fresh install.
set -u
D=${OUT:-out}/run; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
T="timeout -s INT -k 10"
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
for f in rbm:60 nested:120 mixture:150 glm:110 bayesnet:70 sampling:40 sklearn:60 pickle:40 protocol:60; do
  name=${f%%:*}; lim=${f##*:}
  $T $lim python -m pytest -q -m gpu -p no:cacheprovider tests/test_$name.py > "$D/tests-$name.log" 2>&1
  echo "$name rc=$? $(tail -n 1 "$D/tests-$name.log")"; grep -E "^FAILED|^ERROR" "$D/tests-$name.log" | head -5
done
tar -czf "${OUT:-out}/run.tgz" -C "$D" . && rm -rf "$D"
echo done
