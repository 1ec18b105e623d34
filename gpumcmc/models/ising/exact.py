"""Exact results of the 2-D Ising model at zero field: Onsager's infinite lattice and Kaufman's finite periodic
one, the references of the tests and the guide."""

from __future__ import annotations

import math

import numpy as np

#: Inverse critical temperature of the square lattice at J = 1: log(1 + sqrt 2) / 2.
BETA_C = 0.5 * math.log(1.0 + math.sqrt(2.0))


def onsager_magnetization(beta, coupling: float = 1.0):
    """Spontaneous magnetisation per site of the infinite 2-D lattice (Onsager, Yang): 0 above T_c."""
    k = 2.0 * np.asarray(beta, dtype=np.float64) * abs(coupling)
    with np.errstate(divide="ignore", invalid="ignore"):
        m = np.clip(1.0 - np.sinh(k) ** -4.0, 0.0, None) ** 0.125
    return np.where(np.abs(k) > 2.0 * BETA_C, m, 0.0)[()]  # a NumPy scalar for a number


def onsager_energy(beta, coupling: float = 1.0):
    """Energy per site of the infinite 2-D lattice at zero field (Onsager), via the elliptic integral K."""
    from scipy.special import ellipk

    # the square lattice is bipartite: the energy at -J is that at J. Past K = 20 it is -2 |J| to double
    # precision (cosh would overflow further out); at K = 0 it is 0; below K = 0.01, where the elliptic form
    # loses digits, the high-temperature series -2 t - 4 t^3 (1 - t^2), t = tanh K, error O(t^5).
    K = np.minimum(np.abs(np.asarray(beta, dtype=np.float64) * coupling), 20.0)
    kappa = 2.0 * np.sinh(2 * K) / np.cosh(2 * K) ** 2
    t = np.tanh(2 * K)
    a = 2.0 * t * t - 1.0  # zero at T_c, where K(kappa) diverges logarithmically: the product tends to 0
    with np.errstate(invalid="ignore", divide="ignore"):
        term = np.where(np.abs(a) < 1e-12, 0.0, a * ellipk(np.minimum(kappa * kappa, 1.0)))
        e = -abs(coupling) / t * (1.0 + (2.0 / np.pi) * term)
    th = np.tanh(K)
    e = np.where(K < 0.01, -abs(coupling) * (2.0 * th + 4.0 * th ** 3 * (1.0 - th * th)), e)
    return e[()]  # a NumPy scalar for a number, as the other functions give


def _log_z_finite(K: float, rows: int, cols: int) -> float:
    """log Z of the periodic rows x cols lattice at zero field (Kaufman 1949), coupling K = beta J."""
    n, m = cols, rows
    k = np.arange(2 * n)
    Kd = np.arctanh(np.exp(-2.0 * K))  # the dual coupling
    ch = np.cosh(2 * K) * np.cosh(2 * Kd) - np.sinh(2 * K) * np.sinh(2 * Kd) * np.cos(np.pi * k / n)
    gamma = np.arccosh(np.maximum(ch, 1.0))
    gamma[0] = 2.0 * K + np.log(np.tanh(K))  # signed: negative above T_c
    odd, even = gamma[1::2], gamma[0::2]

    def log_prod_cosh(g):
        x = np.abs(m * g / 2)
        return float(np.sum(x + np.log1p(np.exp(-2 * x))))  # 2 cosh(x) = e^x (1 + e^-2x)

    def log_prod_sinh(g):
        x = m * g / 2
        sign = float(np.prod(np.sign(x)))
        ax = np.abs(x)
        if np.any(ax == 0):
            return -np.inf, 0.0
        return float(np.sum(ax + np.log1p(-np.exp(-2 * ax)))), sign  # 2 sinh(x) = e^x (1 - e^-2x)

    terms = [(log_prod_cosh(odd), 1.0), log_prod_sinh(odd), (log_prod_cosh(even), 1.0), log_prod_sinh(even)]
    top = max(t[0] for t in terms)
    total = sum(sign * np.exp(lv - top) for lv, sign in terms)
    return float(np.log(0.5) + 0.5 * m * n * np.log(2.0 * np.sinh(2.0 * K)) + top + np.log(total))


def exact_energy_finite(beta: float, shape, coupling: float = 1.0) -> float:
    """Exact mean energy per site of the periodic ``shape`` lattice at zero field (Kaufman's Z).

    ``-d log Z / d beta`` by a central difference of Kaufman's closed form (accurate to about 1e-7 for
    lattices up to 256 x 256); below beta J = 0.01, where that form loses digits, a high-temperature series;
    for a lattice with a side of 2 or 4, a transfer matrix. The lattice (even sides) is bipartite, so the
    energy at -J is that at J; it is 0 at beta = 0 and, past beta J = 20, -2 |J| to double precision.
    """
    rows, cols = shape
    J = abs(float(coupling))
    K = abs(float(beta)) * J
    if K == 0.0:
        return 0.0
    if K > 20.0:
        return -2.0 * J
    if min(rows, cols) <= 4:  # a transfer matrix of 2^side states, exact at every K
        return -J * _strip_bonds(K, min(rows, cols), max(rows, cols)) / (rows * cols)
    if K < 0.01:
        # Kaufman's form loses digits to cancellation here. High-temperature series, t = tanh K: log Z / N =
        # log 2 + 2 log cosh K + t^4 (the plaquettes) + O(t^6) where every side is at least 6 (shorter
        # sides add loops that wind round the torus); the energy's error is then O(t^5)
        t = math.tanh(K)
        return -J * (2.0 * t + 4.0 * t ** 3 * (1.0 - t * t))
    h = 1e-5 * K
    d = (_log_z_finite(K + h, rows, cols) - _log_z_finite(K - h, rows, cols)) / (2 * h)
    return -J * d / (rows * cols)


def _strip_bonds(K: float, m: int, n: int) -> float:
    """The mean of sum_<ij> s_i s_j on the periodic m x n lattice (m <= 4) at coupling K, from the
    transfer matrix between columns of m spins: Z = tr T^n, its derivative n tr(T^(n-1) T')."""
    c = 2 * ((np.arange(2 ** m)[:, None] >> np.arange(m)) & 1) - 1          # (2^m, m) column states
    v = (c * np.roll(c, 1, axis=1)).sum(1)                                    # bonds within a column
    bonds = 0.5 * (v[:, None] + v[None, :]) + c @ c.T                         # per step of the transfer
    lam, U = np.linalg.eigh(np.exp(K * (bonds - bonds.max())))                # scaled: no overflow
    dT = U.T @ (np.exp(K * (bonds - bonds.max())) * bonds) @ U
    r = lam / lam[np.argmax(np.abs(lam))]
    return float(n * np.sum(r ** (n - 1) * np.diag(dT)) / (lam[np.argmax(np.abs(lam))] * np.sum(r ** n)))
