#!/usr/bin/env bash
# GPU checks of the mixture (run from the repository root on a GPU machine; $OUT collects the JSON).
set -x
python -m pytest -m gpu tests/test_mixture.py -q -p no:cacheprovider 2>&1 | tail -30
# the public calls against the bare sweep (mixture section of the reference measurement)
python ../shared/bench/user_path.py mixture --out "$OUT/user_path_mixture.json"
# where the Gibbs fit's time goes: bare step, fit with and without relabelling, align_draws alone, BEM step vs fit
python benchmarks/mixture.py --profile-fit --out "$OUT/mixture_fit_profile.json"
