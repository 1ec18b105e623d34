#!/usr/bin/env bash
# GPU checks before merging the protocol-ports branch (LDA's and the GLM's data-parallel sweeps on
# gpumcmc.sampling.sharded; run from the repository root on a host of 2 or more GPUs, nvidia-h100-x2):
# every check of the two branches it joins, then the NCCL tests and the scaling of fit(devices=...).
set -x
bash scripts/gpu-checks/lda-protocol.sh
bash scripts/gpu-checks/glm-protocol.sh
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_protocol.py tests/test_mixture.py -q -p no:cacheprovider | tail -5
python -m pytest -m gpu tests/test_nccl.py -q -p no:cacheprovider | tail -5
for f in ../shared/bench/user_path.py shared/bench/user_path.py; do
  if [ -f "$f" ]; then python "$f" scaling --out "$OUT/user_path_scaling_protocol_ports.json"; break; fi
done
