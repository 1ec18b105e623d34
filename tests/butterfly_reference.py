"""The warp's butterfly-patterned table of partial sums and its search, in NumPy: a reference.

The library draws ``method="butterfly"`` on NumPy with
``gpumcmc.discrete.butterfly_draw``, row by row; this module builds the table
warp by warp, as the kernel does, and the tests hold the two (and the paper's
algorithms) to the same indices. It is the twin of the ``butterfly`` method
in ``kernels_cu/discrete.cu`` (Steele & Tristan, "Using butterfly-patterned partial sums to draw from
discrete distributions", PPoPP 2017), written for any warp width ``W`` that
is a power of two, so that small tables (``W`` = 8, 16) can be read by eye.

The table. A warp of ``W`` lanes owns ``W`` rows; for one block of ``W``
columns, lane ``j`` first loads column ``j`` of every row (coalesced loads):
its register ``i`` holds element ``(row i, column j)``. Stage ``m = 1, 2, 4,
..., W/2`` pairs lane ``j`` with lane ``j ^ m``: before it, lane ``j`` holds,
for each row ``i`` with ``i = j (mod m)``, the sum over the ``m``-column group
that contains column ``j``. Of each pair of rows that differ in bit ``m``, the
lane keeps the row whose bit ``m`` equals its own, sends the other to its
partner (``__shfl_xor``), stores the kept value in the table and adds the
received one. After ``W - 1`` shuffles lane ``j`` holds row ``j``'s block total.
The kept values fill table slots ``0 .. W-2`` of every lane (stage ``m`` fills
slots ``W - W/m .. W - W/(2m) - 1``); slot ``W - 1`` holds the lane's block total.

For ``W = 8``, entry ``r5[4:6]`` meaning "row 5, columns 4 to 5"
(:func:`table_pattern` lists it for any ``W``)::

    slot  lane 0    lane 1    lane 2    lane 3    lane 4    lane 5    lane 6    lane 7
    0     r0[0:1]   r1[1:2]   r0[2:3]   r1[3:4]   r0[4:5]   r1[5:6]   r0[6:7]   r1[7:8]
    1     r2[0:1]   r3[1:2]   r2[2:3]   r3[3:4]   r2[4:5]   r3[5:6]   r2[6:7]   r3[7:8]
    2     r4[0:1]   r5[1:2]   r4[2:3]   r5[3:4]   r4[4:5]   r5[5:6]   r4[6:7]   r5[7:8]
    3     r6[0:1]   r7[1:2]   r6[2:3]   r7[3:4]   r6[4:5]   r7[5:6]   r6[6:7]   r7[7:8]
    4     r0[0:2]   r1[0:2]   r2[2:4]   r3[2:4]   r0[4:6]   r1[4:6]   r2[6:8]   r3[6:8]
    5     r4[0:2]   r5[0:2]   r6[2:4]   r7[2:4]   r4[4:6]   r5[4:6]   r6[6:8]   r7[6:8]
    6     r0[0:4]   r1[0:4]   r2[0:4]   r3[0:4]   r4[4:8]   r5[4:8]   r6[4:8]   r7[4:8]
    7     r0[0:8]   r1[0:8]   r2[0:8]   r3[0:8]   r4[0:8]   r5[0:8]   r6[0:8]   r7[0:8]

Every row has exactly one child of every node of the binary tree over its
columns in the table: the left child where the row's bit ``m`` is clear, the
right child where it is set. Row 5 = 0b101 has the right child of every pair
(``r5[1:2]``, ``r5[3:4]``, ``r5[5:6]``, ``r5[7:8]``), the left child of each
half's halves (``r5[0:2]``, ``r5[4:6]``), the right half ``r5[4:8]``, and its
total.

The paper's table-building loop (Algorithm 8, as transcribed publicly with
Algorithms 7-10) writes the same entries in place, as an up-sweep does:
stage ``m``'s pair ``t`` (slot ``W - W/m + t`` above) goes to index
``2 m t + m - 1``, the lower of the two registers it combines, and the block
total stays last. :func:`paper_slots` maps one order to the other. For
``W = 8``, in the paper's order::

    index lane 0    lane 1    lane 2    lane 3    lane 4    lane 5    lane 6    lane 7
    0     r0[0:1]   r1[1:2]   r0[2:3]   r1[3:4]   r0[4:5]   r1[5:6]   r0[6:7]   r1[7:8]
    1     r0[0:2]   r1[0:2]   r2[2:4]   r3[2:4]   r0[4:6]   r1[4:6]   r2[6:8]   r3[6:8]
    2     r2[0:1]   r3[1:2]   r2[2:3]   r3[3:4]   r2[4:5]   r3[5:6]   r2[6:7]   r3[7:8]
    3     r0[0:4]   r1[0:4]   r2[0:4]   r3[0:4]   r4[4:8]   r5[4:8]   r6[4:8]   r7[4:8]
    4     r4[0:1]   r5[1:2]   r4[2:3]   r5[3:4]   r4[4:5]   r5[5:6]   r4[6:7]   r5[7:8]
    5     r4[0:2]   r5[0:2]   r6[2:4]   r7[2:4]   r4[4:6]   r5[4:6]   r6[6:8]   r7[6:8]
    6     r6[0:1]   r7[1:2]   r6[2:3]   r7[3:4]   r6[4:5]   r7[5:6]   r6[6:7]   r7[7:8]
    7     r0[0:8]   r1[0:8]   r2[0:8]   r3[0:8]   r4[0:8]   r5[0:8]   r6[0:8]   r7[0:8]

The search. Row ``i`` knows ``low`` (the prefix before the block) and
``high`` (the prefix at its end). Descending from the block, at a node whose
children have ``m`` columns it reads its table entry ``e`` for that node and
rebuilds the prefix at the node's middle as ``low + e`` (left child stored) or
``high - e`` (right child stored); it goes right iff ``target >= mid``, then
the middle becomes the new ``low`` or ``high``. A child whose weights are all
zero is never entered (the kernel keeps a bit mask of the block's non-zero
weights from ``__ballot_sync``), so a zero weight is never drawn. In exact
arithmetic the search returns the smallest ``k`` with ``prefix[k] > target``;
in floating point the rebuilt values may differ from a left-to-right prefix
by rounding, so where one lies within rounding of ``target`` the search may
return a neighbouring non-zero index.

The block total that lane ``j`` ends with is the balanced pairwise sum of row
``j``'s block, ``((a0 + a1) + (a2 + a3)) + ...``, whichever lane does each
addition (IEEE addition is commutative); :func:`pairwise_totals` computes it
directly and the tests check the two agree bit for bit.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "butterfly_search",
    "butterfly_table",
    "draw",
    "pairwise_totals",
    "paper_slots",
    "table_pattern",
]


def _width(W: int) -> int:
    W = int(W)
    if W < 2 or W & (W - 1):
        raise ValueError(f"the warp width must be a power of two >= 2, got {W}.")
    return W


def butterfly_table(x):
    """The butterfly table of one block, as a warp of ``W`` lanes builds it.

    Parameters
    ----------
    x : ndarray, shape (..., W, W)
        ``x[..., i, j]`` is element (row ``i``, column ``j``) of the block:
        the value lane ``j`` loads for row ``i``.

    Returns
    -------
    table : ndarray, shape (..., W, W)
        ``table[..., s, j]`` is what lane ``j`` stores in slot ``s`` (see the
        module docstring; :func:`table_pattern` names every entry).
    totals : ndarray, shape (..., W)
        ``totals[..., j]``: row ``j``'s block total, held by lane ``j`` at the end.
    """
    x = np.asarray(x)
    W = _width(x.shape[-1])
    if x.shape[-2] != W:
        raise ValueError(f"a block has W rows of W columns, got shape {x.shape[-2:]}.")
    lanes = np.arange(W)
    v = np.swapaxes(x, -1, -2)  # v[..., lane, register]: register i = row i
    table = np.empty(x.shape, dtype=x.dtype)
    m = 1
    while m < W:
        half = W // (2 * m)
        up = ((lanes & m) != 0)[:, None]
        even, odd = v[..., 0::2], v[..., 1::2]
        keep = np.where(up, odd, even)
        send = np.where(up, even, odd)
        recv = send[..., lanes ^ m, :]  # __shfl_xor_sync(send, m)
        base = W - W // m
        table[..., base:base + half, :] = np.swapaxes(keep, -1, -2)
        v = keep + recv
        m *= 2
    totals = v[..., 0]
    table[..., W - 1, :] = totals
    return table, totals


def table_pattern(W: int) -> np.ndarray:
    """What every table entry holds: ``pattern[s, j] = (row, lo, hi)``.

    Entry (slot ``s``, lane ``j``) is the sum of row ``row`` over columns
    ``lo .. hi-1`` of the block.
    """
    W = _width(W)
    out = np.empty((W, W, 3), dtype=np.int64)
    m = 1
    while m < W:
        for t in range(W // (2 * m)):
            for j in range(W):
                row = t * 2 * m + (j & (2 * m - 1))
                lo = j & ~(m - 1)
                out[W - W // m + t, j] = (row, lo, lo + m)
        m *= 2
    for j in range(W):
        out[W - 1, j] = (j, 0, W)
    return out


def paper_slots(W: int) -> np.ndarray:
    """The paper's index of every table slot: ``paper_slots(W)[s]``.

    Slot ``W - W/m + t`` (stage ``m``, pair ``t``) is the paper's entry
    ``2 m t + m - 1``; slot ``W - 1`` (the block total) stays ``W - 1``. So
    ``table[paper_slots(W)] = ours`` puts a table in the paper's order.
    """
    W = _width(W)
    out = np.empty(W, dtype=np.int64)
    m = 1
    while m < W:
        for t in range(W // (2 * m)):
            out[W - W // m + t] = 2 * m * t + m - 1
        m *= 2
    out[W - 1] = W - 1
    return out


def butterfly_search(table, low, high, target, nonzero):
    """Each row's search inside its block, reading the butterfly table.

    Parameters
    ----------
    table : ndarray, shape (..., W, W)
        From :func:`butterfly_table`.
    low, high, target : ndarray, shape (..., W)
        Per row: the prefix before the block, at its end, and ``u * total``,
        in the table's dtype.
    nonzero : ndarray of bool, shape (..., W, W)
        ``nonzero[..., i, c]``: whether row ``i``'s weight in column ``c`` is > 0.

    Returns
    -------
    ndarray of int64, shape (..., W): the column each row lands on.
    """
    table = np.asarray(table)
    W = _width(table.shape[-1])
    dt = table.dtype
    lead = table.shape[:-2]
    flat = table.reshape(lead + (W * W,))
    low = np.array(np.broadcast_to(low, lead + (W,)), dtype=dt)
    high = np.array(np.broadcast_to(high, lead + (W,)), dtype=dt)
    target = np.asarray(target, dtype=dt)
    # Non-zero counts over column ranges, for the kernel's mask tests.
    cnt = np.concatenate(
        [np.zeros(np.shape(nonzero)[:-1] + (1,), np.int64), np.cumsum(nonzero, axis=-1, dtype=np.int64)],
        axis=-1)
    row = np.arange(W)
    q = np.zeros(lead + (W,), dtype=np.int64)
    m = W // 2
    while m >= 1:
        j = q * 2 * m + (row & (2 * m - 1))
        s = (W - W // m) + row // (2 * m)
        e = np.take_along_axis(flat, s * W + j, axis=-1)
        bit = (row & m) != 0
        mid = np.where(bit, high - e, low + e)
        c0, c1, c2 = (np.take_along_axis(cnt, (q * 2 * m + d)[..., None], axis=-1)[..., 0] for d in (0, m, 2 * m))
        left_nz = c1 > c0
        right_nz = c2 > c1
        right = ~left_nz | (right_nz & ~(target < mid))
        low = np.where(right, mid, low)
        high = np.where(right, high, mid)
        q = 2 * q + right
        m //= 2
    return q


def pairwise_totals(x):
    """Balanced pairwise sums over the last axis (length a power of two), in its dtype."""
    v = np.asarray(x)
    while v.shape[-1] > 1:
        v = v[..., 0::2] + v[..., 1::2]
    return v[..., 0]


def draw(w, u, W: int = 32) -> np.ndarray:
    """The ``butterfly`` draw of ``kernels_cu/discrete.cu``, emulated for warp width ``W``.

    Rows ``g*W .. g*W + W-1`` form warp group ``g``, row ``r`` is its lane
    ``r % W``. Each row is split into ``ceil(K/W)`` blocks of ``W`` columns, the
    remnant ``K mod W`` in front after ``pad = W*ceil(K/W) - K`` zero weights.
    Block totals are butterfly (pairwise) sums, the block prefixes ``S`` add
    them left to right, ``total = S[-1]`` and ``target = u * total``; the block
    is the first with ``S > target``, and the butterfly search finishes inside
    it. Rows without a positive total give -1.

    Parameters
    ----------
    w : ndarray, shape (n, K), float32 or float64
    u : ndarray, shape (n,), same dtype: the row's uniform.
    """
    W = _width(W)
    w = np.asarray(w)
    dt = w.dtype
    n, K = w.shape
    nb = -(-K // W)
    pad = nb * W - K
    groups = -(-n // W)
    xb = np.zeros((groups * W, nb * W), dtype=dt)
    xb[:n, pad:] = w
    xb = xb.reshape(groups, W, nb, W)  # [group, row in group, block, column]
    up = np.zeros(groups * W, dtype=dt)
    up[:n] = u
    up = up.reshape(groups, W)

    S = np.cumsum(pairwise_totals(xb), axis=-1, dtype=dt)  # (groups, W, nb)
    total = S[..., -1]
    target = up * total
    found = total > target
    b = np.argmax(S > target[..., None], axis=-1)
    high = np.take_along_axis(S, b[..., None], axis=-1)[..., 0]
    low = np.where(b > 0, np.take_along_axis(S, np.maximum(b - 1, 0)[..., None], axis=-1)[..., 0], dt.type(0))

    chosen = np.take_along_axis(xb, b[..., None, None], axis=2)[:, :, 0, :]  # (groups, W rows, W columns)
    table, _ = butterfly_table(chosen)
    col = butterfly_search(table, low, high, target, chosen > 0)
    idx = np.where(found, b * W + col - pad, -1)
    return idx.reshape(-1)[:n].astype(np.int64)
