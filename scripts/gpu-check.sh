#!/usr/bin/env bash
# On a GPU machine: install gpumcmc, run the GPU tests and every benchmark
# suite, and write logs and JSON under OUTDIR (default $OUT, else ./out).
#   bash scripts/gpu-check.sh [OUTDIR] [--small]
set -uo pipefail
cd "$(dirname "$0")/.."
outdir=${1:-${OUT:-out}}
shift || true
mkdir -p "$outdir"
export PYTHONUNBUFFERED=1
export GPUMCMC_GIT_COMMIT=${GPUMCMC_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}

python3 -m pip install -q --no-deps --no-build-isolation -e . 2>&1 | tee "$outdir/install.log"
python3 -m gpumcmc info 2>&1 | tee "$outdir/info.txt"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$outdir/info.txt"

python3 -m pytest -m gpu -q -rs --junitxml="$outdir/pytest-gpu.xml" 2>&1 | tee "$outdir/pytest-gpu.log"
test_rc=${PIPESTATUS[0]}

python3 -m benchmarks all --out "$outdir" "$@" 2>&1 | tee "$outdir/benchmarks.log"
bench_rc=${PIPESTATUS[0]}

echo "pytest -m gpu exit $test_rc; benchmarks exit $bench_rc"
[ "$test_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
