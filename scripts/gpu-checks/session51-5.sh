#!/usr/bin/env bash
# One GPU: DPGaussianMixture.fit's phases at 5 and 65 iterations, lsa_solve on copies of one draw's costs, and
# Nsight Compute's view of lsa_solve on the 65 draws of a fit.
OUT=${OUT:-out}; mkdir -p "$OUT"
pip install -q --no-deps --no-build-isolation -e . > /dev/null 2>&1
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
{ date -u; cat scripts/.commit; nvidia-smi -L; } > "$OUT/host.txt"
T="timeout -s INT -k 10"
$T 240 python scripts/gpu-checks/mixture_fit_phases.py "$OUT" > "$OUT/mixture-fit-phases.log" 2>&1
echo "phases rc=$?"; tail -n 8 "$OUT/mixture-fit-phases.log"
cat > /tmp/lsa_once.py <<'PY'
import sys
sys.path.insert(0, "scripts")
from user_path import planted_mixture
from gpumcmc.models import DPGaussianMixture
DPGaussianMixture(n_components=256, n_iter=65, burn_in=0, random_state=0, progress=False).fit(planted_mixture(2 ** 20))
PY
$T 200 ncu --clock-control none --kernel-name regex:"lsa_solve|relabel_costs" --launch-count 3 \
  --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section SchedulerStats \
  python /tmp/lsa_once.py > "$OUT/lsa-ncu.txt" 2>&1; echo "ncu rc=$?"
grep -E "lsa_solve|relabel_costs|Duration|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|Achieved Occupancy|Stall" "$OUT/lsa-ncu.txt" | head -40
