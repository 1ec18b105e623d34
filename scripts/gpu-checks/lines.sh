#!/bin/sh
# Shorter functions and fewer lines, same draws (issue 35): the GPU tests of every path whose code was
# restructured (categorical_products' launch, the Gamma twin, gamma_from_buffers, the LDA, Bayesian
# network, Ising and RBM packages), with every kernel argument checked against its C type.
set -e
GPUMCMC_CHECK_KERNEL_ARGS=1 python -m pytest -m gpu -q -p no:cacheprovider tests/test_categorical.py \
    tests/test_products_base.py tests/test_gamma.py tests/test_dirichlet_beta.py tests/test_lda.py \
    tests/test_lda_devices.py tests/test_bayesnet.py tests/test_bayesnet_devices.py tests/test_ising.py \
    tests/test_rbm.py tests/test_twins.py
python -m pytest -q -p no:cacheprovider tests/test_demo.py -k ising   # the Ising/RBM demo on the GPU
