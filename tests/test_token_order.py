"""token_order: a permutation that groups tokens into cache-sized document tiles, by word within each."""

import numpy as np
import pytest

from conftest import to_np
from gpumcmc import token_order


def test_token_order_is_a_tiled_word_sort(xp):
    g = np.random.default_rng(0)
    rows = g.integers(0, 1000, 5000)
    cols = g.integers(0, 300, 5000)
    K, cache = 64, 64 * 4 * 2 * 100  # tiles of 100 documents
    order = to_np(token_order(xp.asarray(rows), xp.asarray(cols), K, np.float32, cache_bytes=cache))
    assert np.array_equal(np.sort(order), np.arange(5000))
    r, c = rows[order], cols[order]
    tile = r // 100
    assert np.all(np.diff(tile) >= 0)
    same = np.diff(tile) == 0
    assert np.all(np.diff(c)[same] >= 0)


def test_token_order_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="one length"):
        token_order(np.zeros(3, int), np.zeros(4, int), K=8)
