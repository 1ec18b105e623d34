#!/bin/sh
# Bayesian networks on a GPU: the GPU tests, then the public fit against its bare step loop
# (issue 40 item 7: Koller, 10^6 cases, half missing, same=10; goal ratio <= 1.1).
set -e
python -m pytest -m gpu -q -p no:cacheprovider tests/test_bayesnet.py tests/test_bayesnet_devices.py
python -m benchmarks.bayesnet "$OUT" --user-path          # writes $OUT/bayesnet-user-path.json
for f in ../shared/bench/user_path.py shared/bench/user_path.py; do  # the reference measurement, where present
  if [ -f "$f" ]; then python "$f" bayesnet --out "$OUT/user_path_bayesnet.json"; break; fi
done
