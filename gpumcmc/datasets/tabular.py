"""Tabular data bundled with scikit-learn (read offline)."""

from __future__ import annotations

import numpy as np

__all__ = ["load_breast_cancer"]


def load_breast_cancer(standardise: bool = True):
    """scikit-learn's bundled Wisconsin breast-cancer data: ``(X, y, feature_names)``.

    ``X`` (569, 30) float64, standardised column by column (mean 0, sd 1)
    unless ``standardise=False``; ``y`` 1 for malignant, 0 for benign.

    >>> X, y, names = load_breast_cancer()
    >>> X.shape, int(y.sum()), names[0]
    ((569, 30), 212, 'mean radius')
    """
    try:
        from sklearn.datasets import load_breast_cancer as _load
    except ImportError:
        raise ImportError("load_breast_cancer needs scikit-learn: pip install scikit-learn") from None
    d = _load()
    X = np.asarray(d.data, dtype=np.float64)
    if standardise:
        X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = (np.asarray(d.target) == 0).astype(np.float64)   # sklearn: 0 = malignant
    return X, y, [str(n) for n in d.feature_names]
