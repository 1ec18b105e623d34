#!/bin/sh
# The scikit-learn contract on a GPU: fit, predict/transform/score, unchanged attributes and the feature-count
# message for LDA, DPGaussianMixture, BayesianGLM and HierarchicalGLM on the cupy backend; then the whole
# file (check_estimator on NumPy, Pipeline, GridSearchCV, cross_val_score, clone) as CI runs it.
set -e
python -m pytest -m gpu -q -p no:cacheprovider tests/test_sklearn.py
python -m pytest -q -p no:cacheprovider tests/test_sklearn.py
# The RBM's scikit-learn methods (transform, score_samples, gibbs) on CuPy against NumPy (7c1d82e).
python -m pytest -m gpu -q -p no:cacheprovider tests/test_sklearn.py -k "rbm" 2>&1 | tail -3
