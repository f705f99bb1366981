"""Online CP tensors updated one entry at a time (tensor maths only, no RL words).

The public API:

- :class:`OnlineCP`: a rank-R CP tensor held as B independent replicas, factor
  n stored as one array of shape (B, d_n, R); entries, sub-tensors, CPTensor
  views.
- :func:`bcd_update` and :class:`UpdateResult`: the single-entry update of
  Algorithm 1 (or the authors' released variant), vectorized over replicas.
- :func:`normalized_step`: the TLR baseline's update (Rozada et al.), one
  normalized-gradient step per mode, no regularization.
- :class:`StepSchedule`: alpha_t = alpha_0 / (1 + kappa t).
- :class:`FactorBound`: clipping of factor entries for bounded iterates
  (Assumption 2).
- Pure functions of one entry's factor rows: :func:`cp_entry`, :func:`loss`,
  :func:`loss_gradient`, :func:`entry_derivative`, :func:`frequency_weight`,
  :func:`other_modes_product`, :func:`released_entry_derivative`.

See ``docs/tensorq.md``.
"""

from tensorq.bound import FactorBound
from tensorq.cp import OnlineCP
from tensorq.loss import (
    cp_entry,
    entry_derivative,
    frequency_weight,
    loss,
    loss_gradient,
    other_modes_product,
    released_entry_derivative,
)
from tensorq.schedule import StepSchedule
from tensorq.update import UpdateResult, bcd_update, normalized_step
from tensorq.version import __version__ as __version__  # of the teql distribution

__all__ = [
    "FactorBound",
    "OnlineCP",
    "StepSchedule",
    "UpdateResult",
    "bcd_update",
    "cp_entry",
    "entry_derivative",
    "frequency_weight",
    "loss",
    "loss_gradient",
    "normalized_step",
    "other_modes_product",
    "released_entry_derivative",
]
