#!/usr/bin/env bash
# One GPU: where the mixture's relabelling goes, and Nsight Compute's view of the Bayesian network's
# specialised sweep and counts (Koller, 10^6 cases, half missing, m = 10).
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
$T 200 python scripts/gpu-checks/mixture_relabel_profile.py "$OUT" > "$OUT/mixture-relabel.log" 2>&1
echo "relabel profile rc=$?"; tail -n 4 "$OUT/mixture-relabel.log"
cat > /tmp/bn_steps.py <<'PY'
from benchmarks import bayesnet as B
from gpumcmc.models.bayesnet import BayesianNetwork
X = B._data(BayesianNetwork.koller(), 1_000_000, 0.5)
B._bare_step_ms(X, 10, 30)
PY
$T 240 ncu --clock-control none --kernel-name regex:"bn_sweep|bn_counts" --launch-skip 40 --launch-count 4 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SchedulerStats \
  python /tmp/bn_steps.py > "$OUT/bn-ncu.txt" 2>&1; echo "ncu rc=$?"
grep -E "bn_sweep|bn_counts|Duration|Compute \(SM\) Throughput|Memory Throughput|Achieved Occupancy|Registers|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|L1/TEX Hit|L2 Hit" "$OUT/bn-ncu.txt" | head -60
