"""The Ising model: heat-bath checkerboard Gibbs sweeps over many chains at once.

``algorithm`` holds the sampler, ``kernels_cu/ising.cu`` its CUDA kernels. This
package re-exports the public names, and the helpers the tests use.
"""

from .algorithm import (BETA_C, Ising, IsingInfo, IsingResult, IsingState, __all__, _decide, _halves16,
                        _weighted_bond_sum, _words, bond_sum, denoise, exact_energy_finite, onsager_energy,
                        onsager_magnetization, pack, unpack)
