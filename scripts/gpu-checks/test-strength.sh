#!/bin/sh
# GPU cases of the tests strengthened so that they can fail (tests only, no library change): the CuPy runs of
# test_per_element_parameters_broadcast (KS per column), test_shapes_burn_in_and_thinning (the monitor's
# values) and test_checkpoint_resume_is_bit_for_bit (the resumed run's iterations), with the rest of their
# files' GPU tests. From the repository root on a GPU machine; $OUT collects the log.
set -e
python -m pytest -m gpu -q -p no:cacheprovider tests/test_philox.py tests/test_sampling.py tests/test_categorical.py \
    tests/test_lda.py tests/test_lda_quality.py tests/test_glm.py tests/test_protocol.py 2>&1 \
    | tee "$OUT/test-strength-gpu.log" | tail -5
# The structural and scikit-learn tests strengthened next (loader, layering, configuration, kernel arguments,
# backend, datasets, scikit-learn contract) changed CPU cases only; their files' GPU tests (the loader's
# compile cache and memo, the backend helpers on CuPy, the estimators' contract and RBM methods on CuPy) still run:
python -m pytest -m gpu -q -p no:cacheprovider tests/test_loader.py tests/test_backend.py tests/test_config.py \
    tests/test_kernel_args.py tests/test_sklearn.py 2>&1 | tee "$OUT/test-strength-structure-gpu.log" | tail -5
