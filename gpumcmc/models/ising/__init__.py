"""The Ising model: heat-bath checkerboard Gibbs sweeps over many chains at once.

``algorithm`` holds the sampler (states, thresholds, ``init`` and ``step``),
``ops`` its CUDA launches (``kernels_cu/ising.cu``) and their NumPy twins,
``estimator`` the model :class:`Ising` and :func:`denoise`, ``exact`` the exact
results. This package re-exports the public names, and the helpers the tests
use.
"""

from .algorithm import IsingInfo, IsingState, _weighted_bond_sum, pack, unpack
from .estimator import Ising, IsingResult, denoise
from .exact import BETA_C, exact_energy_finite, onsager_energy, onsager_magnetization
from .ops import _decide, _halves16, _words, bond_sum

__all__ = ["Ising", "IsingInfo", "IsingResult", "IsingState", "onsager_energy", "onsager_magnetization",
           "exact_energy_finite", "BETA_C"]
