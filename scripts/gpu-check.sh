#!/usr/bin/env bash
# On a GPU machine: install gpumcmc, run the GPU tests and the benchmark
# suites, and write logs and JSON under OUTDIR (default $OUT, else ./out).
#
#   bash scripts/gpu-check.sh [OUTDIR] [--small]
#
# Environment:
#   GPUMCMC_STEPS   which steps to run: "tests", "bench" or "tests bench" (default)
#   GPUMCMC_SUITES  benchmark suites to run (default: all)
#   GPUMCMC_TESTS   pytest arguments for the GPU tests (default: -m gpu)
#   SUITE_TIMEOUT   seconds each suite may take (default 600)
# Wheels of peers the machine lacks may be put in .whl/ (see the README):
# they are installed into /tmp/site first. Everything written is also packed
# into OUTDIR/bundle.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
outdir=${1:-${OUT:-out}}
shift || true
mkdir -p "$outdir/logs"
export PYTHONUNBUFFERED=1
export GPUMCMC_GIT_COMMIT=${GPUMCMC_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}
steps=${GPUMCMC_STEPS:-tests bench}

if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        > "$outdir/logs/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
python3 -m pip install -q --no-deps --no-build-isolation -e . > "$outdir/logs/install.log" 2>&1
python3 -m gpumcmc info 2>&1 | tee "$outdir/logs/info.txt"
nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem --format=csv 2>&1 | tee -a "$outdir/logs/info.txt"

test_rc=0
if [[ " $steps " == *" tests "* ]]; then
    # shellcheck disable=SC2086
    python3 -m pytest ${GPUMCMC_TESTS:--m gpu} -q -rs -p no:cacheprovider --junitxml="$outdir/logs/pytest-gpu.xml" \
        2>&1 | tee "$outdir/logs/pytest-gpu.log" | tail -n 60
    test_rc=${PIPESTATUS[0]}
fi

bench_rc=0
if [[ " $steps " == *" bench "* ]]; then
    for suite in ${GPUMCMC_SUITES:-all}; do
        timeout "${SUITE_TIMEOUT:-600}" python3 -m benchmarks "$suite" --out "$outdir/results" "$@" \
            > "$outdir/logs/bench-$suite.log" 2>&1
        rc=$?
        tail -n 25 "$outdir/logs/bench-$suite.log"
        [ "$rc" -eq 0 ] || { echo "suite $suite exit $rc"; bench_rc=$rc; }
    done
fi

tar czf "$outdir/bundle.tar.gz" -C "$outdir" logs $(ls -d "$outdir/results" >/dev/null 2>&1 && echo results)
echo "pytest exit $test_rc; benchmarks exit $bench_rc"
[ "$test_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
