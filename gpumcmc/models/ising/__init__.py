"""The Ising model: heat-bath checkerboard Gibbs sweeps over many chains at once: ``algorithm`` (the sampler),
``ops`` (the launches of ``kernels_cu/ising.cu`` and their NumPy twins), ``estimator`` (:class:`Ising` and
:func:`denoise`) and ``exact`` (the exact results)."""

from .algorithm import IsingInfo, IsingState, _weighted_bond_sum, pack, unpack
from .estimator import Ising, IsingResult, denoise
from .exact import BETA_C, exact_energy_finite, onsager_energy, onsager_magnetization
from .ops import _decide, _halves16, _words, bond_sum

__all__ = ["Ising", "IsingInfo", "IsingResult", "IsingState", "onsager_energy", "onsager_magnetization",
           "exact_energy_finite", "BETA_C"]
