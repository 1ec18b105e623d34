#!/usr/bin/env bash
# One GPU, under 10 minutes: the nested sampler's GPU tests (the default n_replace, nlive // 20; the rounds captured);
# the defaults against R = 1 and dynesty (benchmarks/probes/nested_default.py); user_path.py's nested and
# mixture sections (not re-timed since the last changes around their fits).
# Wheels: .whl/dynesty-3.1.0-py3-none-any.whl, carried.
set -u
D=${OUT:-out}; mkdir -p "$D"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$D/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site:$PWD
export PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; python -c "import dynesty; print('dynesty', dynesty.__version__)"; } > "$D/host.txt" 2>&1
GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT -k 10 ${TESTS_S:-200} python -m pytest -q -m gpu -p no:cacheprovider -rs \
  tests/test_nested.py tests/test_distributed.py > "$D/tests.log" 2>&1; echo "tests rc=$?"
grep -E "^FAILED|^ERROR" "$D/tests.log" | head -20; tail -n 2 "$D/tests.log"
timeout -s INT -k 10 ${PROBE_S:-150} python benchmarks/probes/nested_default.py "$D/nested_default.json" cupy \
  > "$D/nested_default.log" 2>&1; echo "probe rc=$?"; grep '^{' "$D/nested_default.log"
for s in ${SECTIONS:-nested mixture}; do
  timeout -s INT -k 10 ${UP_S:-120} python scripts/user_path.py $s --out "$D/user_path-$s.json" > "$D/user_path-$s.log" 2>&1
  echo "user_path $s rc=$?"; grep -v '"docs"\|setup\|^ *}\|^{' "$D/user_path-$s.json" | head -8
done
cd "$D" && tar czf run.tgz *.log *.json host.txt 2>/dev/null; ls
