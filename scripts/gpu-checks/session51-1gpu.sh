#!/usr/bin/env bash
# On one GPU: what session50-owed.sh checks (the Bayesian network's GPU tests and its specialised kernels and
# graph replay timed against the generic ones; the sampling, GLM and LDA GPU tests), then user_path.py's
# Bayesian-network section, the reference figure for the public fit.
OUT=${OUT:-out}; mkdir -p "$OUT"
export OUT
start=$(date +%s)
bash scripts/gpu-checks/session50-owed.sh
echo "owed checks took $(( $(date +%s) - start )) s"
if [ -f scripts/user_path.py ] && [ $(( $(date +%s) - start )) -lt 420 ]; then
  PYTHONPATH=$PWD timeout -s INT -k 10 $(( 560 - ($(date +%s) - start) )) python scripts/user_path.py bayesnet \
    --out "$OUT/user_path_bayesnet.json" > "$OUT/user_path_bayesnet.log" 2>&1; echo "user_path bayesnet rc=$?"
  grep -v '^ *"setup' "$OUT/user_path_bayesnet.json" | head -20
fi
