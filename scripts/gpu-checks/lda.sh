#!/usr/bin/env bash
# GPU checks of LDA (run from the repository root on a GPU machine; $OUT collects the JSON and logs).
set -x
# Every LDA GPU test: the z-draw's log-likelihood sum against log_likelihood (fused, two-kernel with each
# method, sharded on one_device), draws unchanged with it, the monitor under a CUDA graph, the categorical
# kernels' log_total. The package gpumcmc.models.lda launches lda.cu by named arguments from ops.py's _GpuOps
# (null pointers as numpy.uint64(0)): run with every kernel argument checked against its declaration.
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_lda.py tests/test_lda_devices.py tests/test_token_order.py -q -p no:cacheprovider 2>&1 | tail -40
# The same tests unchecked, the path users take.
python -m pytest -m gpu tests/test_lda.py tests/test_lda_devices.py -q -p no:cacheprovider -x 2>&1 | tail -5
python -m pytest -m gpu tests/test_categorical.py tests/test_products_base.py tests/test_loader.py -q -p no:cacheprovider -x 2>&1 | tail -15
# The public call (fit, defaults) against the bare step loop, and LDA.fit's set-up, on the user_path corpora.
python ../shared/bench/user_path.py lda --out "$OUT/user_path_lda.json"
python -m benchmarks.lda --out "$OUT/lda_fit_vs_step.json" 2>&1 | tail -30
# Issue 37, item 2: the seeded start from tokens on the GPU equals the host's (exact and sketch cosines), LDA's
# default start on CuPy is the seeded one on small corpora, and the seeded start's fits (slow). The comparison
# with the lda package's collapsed Gibbs runs on NumPy (tests/test_lda.py -k stick, in the CPU slow suite).
python -m pytest -m gpu tests/test_lda_quality.py -q -p no:cacheprovider 2>&1 | tail -15
python -m pytest -m gpu tests/test_lda.py -q -p no:cacheprovider -k "seeded" 2>&1 | tail -15
# LDA.fit's set-up at K = 1024 on the site-packages corpus must stay <= 1 s: user_path.py above records it
# (setup_s.lda_site_packages_K1024_Mtokens_per_s; the default start is the random one there). With
# start="seeded" the host seeding is bounded; time it on that corpus:
python - <<'PY' 2>&1 | tail -5
import sys, time, json, os
sys.path.insert(0, os.path.join("..", "shared", "bench"))
from user_path import site_packages_corpus
from gpumcmc.models import LDA
X = site_packages_corpus()
out = {}
for start in ("auto", "seeded"):
    for rep in range(2):
        t = time.perf_counter(); LDA(n_components=1024, n_iter=1, burn_in=0, random_state=rep, progress=False, start=start).fit(X)
        out.setdefault(start, []).append(time.perf_counter() - t)
print(json.dumps(out))
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "lda_start_fit1_s.json"), "w"))
PY
# Issue 35, fewer lines in gpumcmc/models/lda (the same draws): the GPU paths touched only by mechanical moves.
#   ops.py: _GpuOps.counts / zdraw_counts / normalise_columns (_loader imported at module level),
#     _GpuOps.accumulate (the ElementwiseKernel built inside it, its memo table after the class), _two_pass and
#     _placed_products (a shard's NumPy z-draw now in _two_pass; the GPU branch unchanged), _memoised;
#   algorithm.py: _start_local, _theta_draw (uniform_at and _gamma imported at module level), gibbs_local, init;
#   sharded.py: shard_data (cache_bytes resolved inline under each shard's device), _start (each shard's random
#     start and contiguous counts made under its device by _each), sharded_log_likelihood (through
#     sharded_loglik's copy and all-reduce);
#   estimator.py: _fit_one, _fit_sharded (doc_topic_ gathered per shard by _each), _sample, _theta, _held_out;
#   corpus.py: tokens_from (the GPU expansion _expand, now after the one empty-corpus check).
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu tests/test_lda.py tests/test_lda_devices.py tests/test_lda_quality.py -q -p no:cacheprovider 2>&1 | tail -15
# On 2 GPUs (nvidia-h100-x2): the sharded start, sweep and estimator across devices.
python -m pytest -m gpu tests/test_nccl.py -q -p no:cacheprovider -k lda 2>&1 | tail -5
