"""The Bayesian network's bare step (Koller, 10^6 cases, half missing, m = 10) with the specialised kernels,
over the tunable macros of bayesnet.cu (config.bayesnet_defines; every variant gives the same draws).
Writes bn-defines.json under the folder given."""
import json
import os
import sys
from pathlib import Path

from benchmarks import bayesnet as B
from gpumcmc._config import config
from gpumcmc.models.bayesnet import BayesianNetwork

X = B._data(BayesianNetwork.koller(), 1_000_000, 0.5)
VARIANTS = [(), (("BN_BLOCK", 128),), (("BN_BLOCK", 512),), (("BN_MIN_BLOCKS", 2),), (("BN_MIN_BLOCKS", 4),),
            (("BN_COUNT_ROWS", 2),), (("BN_COUNT_ROWS", 8),), (("BN_COUNT_BLOCK", 128),), (("BN_COUNT_BLOCK", 512),),
            (("BN_AGG", 0),), ()]
if "--occupancy" in sys.argv:  # fewer registers a thread, more warps to hide the loads' latency
    VARIANTS = [(), (("BN_MIN_BLOCKS", 5),), (("BN_MIN_BLOCKS", 6),), (("BN_MIN_BLOCKS", 8),),
                (("BN_BLOCK", 128), ("BN_MIN_BLOCKS", 12)), (("BN_BLOCK", 128), ("BN_MIN_BLOCKS", 16)), ()]
    sys.argv.remove("--occupancy")
out = []
for defines in VARIANTS:
    with config.override(bayesnet_specialise=True, bayesnet_defines=defines):
        B._bare_step_ms(X, 10, 20)  # compiles
        ms = [B._bare_step_ms(X, 10, 405) for _ in range(3)]
    out.append({"defines": [list(d) for d in defines], "bare_step_ms": ms})
    print(json.dumps(out[-1]), flush=True)
Path(sys.argv[1], os.environ.get("BN_DEFINES_JSON", "bn-defines.json")).write_text(json.dumps(out, indent=1))
