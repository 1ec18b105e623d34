#!/usr/bin/env bash
# One GPU: each model's first call on a fresh machine (empty CuPy kernel cache: NVRTC compiles its kernels),
# then in a new process with that cache filled (what every later session pays), both with the call repeated.
set -u
D=${OUT:-out}; mkdir -p "$D"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
for m in primitives lda mixture bem glm ising bayesnet rbm nested; do
  C=$(mktemp -d)
  for pass in cold warm; do
    echo -n "$pass "; CUPY_CACHE_DIR=$C timeout 300 python scripts/gpu-checks/coldstart.py $m 2>>"$D/err.log" | tail -n 1
  done
done | tee "$D/coldstart.txt"
cd "$D" && tar czf logs.tgz *.log host.txt && rm -f *.log host.txt
