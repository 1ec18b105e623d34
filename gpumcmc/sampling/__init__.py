"""The sampler core every model stands on.

Two layers, kept apart:

* the functional layer: each model's ``init(...) -> State`` and
  ``step(rng, state) -> (State, Info)`` over NamedTuples, chains as the
  leading axis of every array field, and :func:`run`, the one driver that
  loops, thins, keeps draws as ``(chain, draw, ...)``, shows a progress bar
  and monitors, checkpoints and resumes. :class:`Algorithm` is that pair as
  a type; a data-parallel one, :class:`DataParallel`, splits its step into
  ``local`` (per shard of the data) and ``update`` (from the summed
  statistics; an :class:`Overlap` when the sums may run beside the rest of the
  local work), and :func:`sharded` composes it over a
  :class:`gpumcmc.shards.Shards`; a :class:`Collective`, whose iteration
  sums over the shards many times, writes its step against the all-reduce
  that :func:`sharded` hands it;
* the estimator layer: scikit-learn-style classes (:class:`Estimator`) with
  ``fit`` and ``predict``/``transform`` on top of it.

:func:`to_arviz` turns draws into ArviZ's data object (ArviZ is imported only
there).
"""

from ._arviz import to_arviz
from ._driver import Monitor, Stop, Trace, run
from ._estimator import Estimator, NotFittedError, as_data
from ._graph import graph_step
from ._protocol import Algorithm, Collective, DataParallel, Overlap, shard_states, sharded

__all__ = ["Algorithm", "Collective", "DataParallel", "Estimator", "Monitor", "NotFittedError", "Overlap", "Stop",
           "Trace", "as_data",
           "graph_step", "run", "shard_states", "sharded", "to_arviz"]
