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


def test_token_order_takes_the_gpu_where_either_input_is_there(cp):
    # The backend came from rows alone: NumPy rows with CuPy cols raised a TypeError in cupy.asarray's place.
    rows, cols = np.array([5, 0, 5, 0, 9]), np.array([1, 1, 0, 1, 1])
    want = token_order(rows, cols, K=4, cache_bytes=64)
    for r, c in ((rows, cp.asarray(cols)), (cp.asarray(rows), cols)):
        got = token_order(r, c, K=4, cache_bytes=64)
        assert isinstance(got, cp.ndarray) and to_np(got).tolist() == want.tolist()


def test_token_order_rejects_mismatched_inputs():
    with pytest.raises(ValueError, match="one length"):
        token_order(np.zeros(3, int), np.zeros(4, int), K=8)


_I3 = np.zeros(3, int)


@pytest.mark.parametrize("rows, cols, K, error, match", [
    (_I3, _I3, 0, ValueError, "K"),                                  # K = 0 raised ZeroDivisionError
    (_I3, _I3, 2.5, TypeError, "K"),
    (np.array([0, -1, 2]), _I3, 8, ValueError, "rows .*non-negative"),  # negative rows were sorted silently
    (np.array([0.0, 1.5, 2.0]), _I3, 8, TypeError, "rows must hold integers"),  # and so were float rows
    (_I3, np.zeros(3), 8, TypeError, "cols must hold integers"),
])
def test_token_order_rejects_bad_rows_cols_and_K(rows, cols, K, error, match):
    with pytest.raises(error, match=match):
        token_order(rows, cols, K=K)
