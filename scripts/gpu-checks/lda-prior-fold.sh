#!/usr/bin/env bash
# GPU checks of LDA's Dirichlet draws from the counts (gamma_counts_draw, dirichlet_counts_draw; aa84a18), on
# a host of 2 or 4 GPUs, from the repository root with scripts/user_path.py copied in and BASE the commit before
# (the code of the extracted tree is run as "before"). Logs and JSON in one archive under $OUT.
#   1. the new kernels against the draws they replace, bit for bit, and every LDA GPU test (each launch's
#      arguments checked), with the gamma and Dirichlet files, side by side on GPUs 1-3; the NCCL LDA tests;
#   2. LDA fits before and after on one device and over 2 GPUs (shards): every fitted array equal;
#   3. on GPU 0, user_path.py lda after the change, and the bare sweep before and after (lda_launch's probe).
set -u
BASE=${BASE:?the commit before the change}
out=/tmp/prior-fold; final=${OUT:-out}
mkdir -p "$out" "$final" /tmp/before
git archive "$BASE" | tar -x -C /tmp/before
export PYTHONPATH=$PWD
# The tests on GPU 1 (one after another on a host of 2), or side by side on GPUs 1-3 of a host of 4.
n=$(nvidia-smi -L | wc -l)
pt() { CUDA_VISIBLE_DEVICES=$1 GPUMCMC_CHECK_KERNEL_ARGS=1 timeout -s INT 300 python -m pytest -m gpu -q \
           -p no:cacheprovider -rf "${@:3}" > "$out/$2.log" 2>&1; }
if [ "$n" -ge 4 ]; then
  pt 1 pytest-gamma tests/test_gamma.py tests/test_dirichlet_beta.py &
  pt 2 pytest-lda tests/test_lda.py tests/test_token_order.py tests/test_lda_quality.py &
  pt 3 pytest-lda-devices tests/test_lda_devices.py tests/test_protocol.py tests/test_kernel_args.py &
else
  g=$(( n > 1 ? 1 : 0 ))
  { pt $g pytest-gamma tests/test_gamma.py tests/test_dirichlet_beta.py
    pt $g pytest-lda tests/test_lda.py tests/test_token_order.py tests/test_lda_quality.py
    pt $g pytest-lda-devices tests/test_lda_devices.py tests/test_protocol.py tests/test_kernel_args.py; } &
fi
cat > /tmp/fit_arrays.py <<'PY'
import hashlib, sys, numpy as np, cupy as cp
from gpumcmc.models import LDA
from gpumcmc.shards import one_device
rs = np.random.default_rng(0)
D, V, L = 3000, 5000, 120
X = np.zeros((D, V), np.int64)
for d in range(D):
    np.add.at(X[d], np.minimum(rs.zipf(1.3, L) - 1, V - 1), 1)
out = {}
for K in (64, 1024):
    for devices in (None, "two"):
        kw = dict(devices=one_device(2) if devices == "two" else None)
        m = LDA(n_components=K, n_iter=12, burn_in=4, random_state=1, progress=False, backend="cupy", **kw).fit(X)
        for name in ("components_", "doc_topic_", "loglik_traces_"):
            a = np.ascontiguousarray(getattr(m, name, np.zeros(1)))
            out[f"K{K}_{devices}_{name}"] = hashlib.sha1(a.tobytes()).hexdigest()
for k, v in out.items():
    print(k, v)
PY
CUDA_VISIBLE_DEVICES=0 python /tmp/fit_arrays.py > "$out/fit-after.txt" 2>&1
CUDA_VISIBLE_DEVICES=0 PYTHONPATH=/tmp/before python /tmp/fit_arrays.py > "$out/fit-before.txt" 2>&1
echo "== fitted arrays before and after (same lines: same bits)"; diff "$out/fit-before.txt" "$out/fit-after.txt" && echo SAME
tail -n 3 "$out/fit-after.txt"
CUDA_VISIBLE_DEVICES=0 timeout 200 python scripts/user_path.py lda --out "$out/user_path_lda.json" > "$out/user_path_lda.log" 2>&1
grep -E "tokens|setup|_s\"" "$out/user_path_lda.log" | tail -n 8
for who in after before; do
  pp=$PWD; [ "$who" = before ] && pp=/tmp/before
  (cd "$pp" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH=$pp timeout 120 python -m benchmarks.probes.lda_launch --variants 4x16 \
      --user-path "$OLDPWD/scripts/user_path.py" --out "$out/lda_launch_$who.json" > "$out/lda_launch_$who.log" 2>&1)
  echo "== bare sweep, $who"; grep -h '"ms"' "$out/lda_launch_$who.log" | tail -n 2
done
wait
for f in pytest-gamma pytest-lda pytest-lda-devices; do echo "== $f"; tail -n 3 "$out/$f.log"; done
timeout -s INT 120 python -m pytest -m gpu -q -p no:cacheprovider -rf tests/test_nccl.py -k lda \
    > "$out/pytest-nccl-lda.log" 2>&1
echo "== nccl lda"; tail -n 2 "$out/pytest-nccl-lda.log"
tar czf "$final/lda-prior-fold.tgz" -C "$out" .
