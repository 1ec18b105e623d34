#!/usr/bin/env bash
# 2 or 4 GPUs. ALONE=0 (first): the whole `pytest -m gpu` as the tree is (the GPU tests written in session 53
# without a GPU run among them). ALONE=1 (then, before config.compile_kernels_alone becomes the default): each
# model's first call with an empty kernel cache with the knob off and on (GPUMCMC_LOG_COMPILES=1 logs each
# compilation), and the whole suite again with it on (set in this copy of the tree). Each run: the multi-GPU
# files with every GPU visible, the rest in a lane a GPU, every launch's arguments checked; about 9 minutes.
set -u
D=${OUT:-out}; mkdir -p "$D"; N=$(nvidia-smi -L | wc -l)
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
pip install -q --no-deps --no-build-isolation -e . > "$D/install.log" 2>&1
{ date -u; cat scripts/.commit; nvidia-smi -L; nproc; } > "$D/host.txt" 2>&1
T="timeout -s INT -k 10"
ALONE=${ALONE:-0}
[ "$ALONE" = 1 ] && for m in primitives lda mixture bayesnet; do
  for alone in False True; do
    C=$(mktemp -d)
    echo -n "alone=$alone "
    CUPY_CACHE_DIR=$C GPUMCMC_LOG_COMPILES=1 timeout 150 python -c "
import sys, runpy; from gpumcmc._config import config; config.compile_kernels_alone = $alone
sys.argv = ['coldstart.py', '$m']; runpy.run_path('scripts/gpu-checks/coldstart.py', run_name='__main__')" \
      2> "$D/cold-$m-$alone.err" | tail -n 1
  done
done | tee "$D/coldstart.txt"
[ "$ALONE" = 1 ] && sed -i 's/"compile_kernels_alone": False/"compile_kernels_alone": True/' gpumcmc/_config.py
grep -n '"compile_kernels_alone"' gpumcmc/_config.py
PT="python -m pytest -q -m gpu -p no:cacheprovider -rs"
MULTI="tests/test_nccl.py tests/test_lda_devices.py tests/test_glm_devices.py tests/test_bayesnet_devices.py tests/test_distributed.py"
GPUMCMC_CHECK_KERNEL_ARGS=1 $T 300 $PT $MULTI > "$D/tests-multi.log" 2>&1; echo "multi-GPU files rc=$?"
files=""; for f in tests/test_*.py; do case " $MULTI " in *" $f "*) ;; *) files="$files $f" ;; esac; done
set -- $files; n=$#; k=0; lanes=$(( N >= 4 ? 4 : N ))
for i in $(seq 0 $((lanes - 1))); do eval "L$i=''"; done
for f in $files; do eval "L$((k % lanes))=\"\$L$((k % lanes)) $f\""; k=$((k + 1)); done
for i in $(seq 0 $((lanes - 1))); do
  eval "fl=\$L$i"
  (CUDA_VISIBLE_DEVICES=$i GPUMCMC_CHECK_KERNEL_ARGS=1 $T 420 $PT $fl > "$D/tests-lane$i.log" 2>&1; echo "lane $i rc=$?") &
done
wait
for f in "$D"/tests-*.log; do echo "== $(basename "$f")"; grep -E "^FAILED|^ERROR" "$f" | head -8; tail -n 1 "$f"; done
cd "$D" && tar czf logs.tgz *.log host.txt $(ls *.err coldstart.txt 2>/dev/null) && rm -f *.log *.err host.txt
