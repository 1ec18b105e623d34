#!/bin/sh
# Bayesian networks on a GPU: the GPU tests (every kernel argument checked against its C type), then the
# public fit, which runs on gpumcmc.sampling.run, against the sampler's bare step loop (algorithm.step)
# (issue 40 item 7: Koller, 10^6 cases, half missing, same=10; goal ratio <= 1.1).
set -e
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py \
    tests/test_bayesnet_devices.py
python -m benchmarks.bayesnet "$OUT" --user-path          # writes $OUT/bayesnet-user-path.json
for f in ../shared/bench/user_path.py shared/bench/user_path.py; do  # the reference measurement, where present
  if [ -f "$f" ]; then python "$f" bayesnet --out "$OUT/user_path_bayesnet.json"; break; fi
done
# On two GPUs (nvidia-h100-x2), the data-parallel fit against one device:
#   python -m pytest -m gpu -q -p no:cacheprovider tests/test_nccl.py -k bayesnet
