"""Restricted Boltzmann machines: block Gibbs over many chains, and training by persistent contrastive divergence.

``algorithm`` holds the sampler and the training, ``kernels_cu/rbm.cu`` their
CUDA kernels. This package re-exports the public names, and the helpers the
tests and benchmarks use.
"""

from ..._config import forward
from .algorithm import RBM, RBMState, __all__, _pcd_epoch, bernoulli_logits, load_binary_digits

# the old name of config.rbm_progress_rows still reads and sets it
forward(__name__, {"PROGRESS_ROWS": "rbm_progress_rows"})
