"""Restricted Boltzmann machines: block Gibbs over many chains, and training by persistent contrastive divergence:
``algorithm`` (the sampler and one PCD epoch a step), ``ops`` (the launches of ``kernels_cu/rbm.cu`` and their
NumPy twin) and ``estimator`` (:class:`RBM`)."""

from ..._config import forward
from .algorithm import RBMState
from .estimator import RBM, load_binary_digits
from .ops import _pcd_epoch, bernoulli_logits

__all__ = ["RBM", "RBMState", "bernoulli_logits", "load_binary_digits"]

# the old name of config.rbm_progress_rows still reads and sets it
forward(__name__, {"PROGRESS_ROWS": "rbm_progress_rows"})
