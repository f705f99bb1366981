"""The step-size schedule alpha_t = alpha_0 / (1 + kappa t) of Algorithm 1."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from tensorq._backend import divide
from tensorq._validation import check_float


@dataclass(frozen=True)
class StepSchedule:
    """Harmonically decaying step size alpha_t = alpha_0 / (1 + kappa t).

    Parameters
    ----------
    alpha0 : float
        Initial step size alpha_0 > 0.
    kappa : float
        Decay coefficient kappa >= 0; 0 gives a constant step size (as in the
        authors' released code).

    References
    ----------
    Algorithm 1, line 2.

    Examples
    --------
    >>> StepSchedule(0.1, 0.001)(1000)
    0.05
    """

    alpha0: float
    kappa: float

    def __post_init__(self) -> None:
        check_float("alpha0", self.alpha0, positive=True)
        check_float("kappa", self.kappa)

    def __call__(self, t: ArrayLike) -> float | NDArray[np.float64]:
        """Return alpha_t for a time step or an array of time steps.

        Parameters
        ----------
        t : int or array of int
            Time steps t >= 0 (one per replica when replicas run at different t).

        Returns
        -------
        float or ndarray of float64
            The step sizes, of the shape of ``t``.
        """
        steps = np.asarray(t)
        if steps.dtype.kind not in "iuf" or (steps < 0).any():
            raise ValueError(f"The 't' parameter must be a time step >= 0. Got {t!r} instead.")
        alpha = step_size(self.alpha0, self.kappa, steps)
        return float(alpha) if steps.ndim == 0 else alpha


def step_size(alpha0: float | Any, kappa: float | Any, t: Any) -> Any:
    """Return alpha_t = alpha_0 / (1 + kappa t) for time steps ``t`` of any array backend.

    ``alpha0`` and ``kappa`` may be arrays, one value per replica (`tensorq._backend.divide`).

    Unchecked: `StepSchedule` checks its settings and time steps, then calls this.

    References
    ----------
    Algorithm 1, line 2.
    """
    return divide(alpha0, 1.0 + kappa * t)
