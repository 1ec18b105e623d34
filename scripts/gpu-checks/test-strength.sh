#!/bin/sh
# GPU cases of the tests strengthened so that they can fail (tests only, no library change): the CuPy runs of
# test_per_element_parameters_broadcast (KS per column), test_shapes_burn_in_and_thinning (the monitor's
# values) and test_checkpoint_resume_is_bit_for_bit (the resumed run's iterations), with the rest of their
# files' GPU tests. From the repository root on a GPU machine; $OUT collects the log.
set -e
python -m pytest -m gpu -q -p no:cacheprovider tests/test_philox.py tests/test_sampling.py tests/test_categorical.py \
    tests/test_lda.py tests/test_lda_quality.py tests/test_glm.py tests/test_protocol.py 2>&1 \
    | tee "$OUT/test-strength-gpu.log" | tail -5
