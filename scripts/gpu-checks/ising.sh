#!/bin/sh
# Ising and RBM on a GPU: the GPU tests (in-sweep figures against a second pass, spins of a seed,
# GPU against the NumPy twin), then the public calls against their bare loops (issue 40 items 3 and 7:
# Ising((16384, 16384), beta=0.44).sample goal >= 1,400 flips/ns and within 10% of the sweep with
# observables off; RBM.fit per epoch <= 1.1x the fused epoch). Both models are packages now
# (gpumcmc/models/ising/, rbm/): the GPU tests reach the sweep through ising/ops.py's _GpuOps and
# RBM.fit's epochs through sampling.run, and the user-path numbers check that neither adds time per sweep
# or epoch.
set -e
python -m pytest -m gpu -q -p no:cacheprovider tests/test_ising.py tests/test_rbm.py
python -m benchmarks.ising "$OUT" --user-path             # writes $OUT/ising-user-path-<device>.json
for f in ../shared/bench/user_path.py shared/bench/user_path.py; do  # the reference measurement, where present
  if [ -f "$f" ]; then python "$f" ising --out "$OUT/user_path_ising.json"; break; fi
done
