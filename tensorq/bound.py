"""Bounded iterates: clipping of factor entries to [-F_max, F_max].

If every factor entry satisfies |F_n(i, r)| <= F_max, every entry of the CP
tensor satisfies |Q| <= R F_max^N. :meth:`FactorBound.from_value_bound` picks
F_max = (V_max / R)^(1/N), so that clipping the factors keeps |Q| <= V_max at
every entry, the bounded-iterates condition of Assumption 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tensorq._backend import backend_name_of, ops_for_backend
from tensorq._validation import check_float, check_int

if TYPE_CHECKING:
    from tensorq.cp import OnlineCP


@dataclass(frozen=True)
class FactorBound:
    """Clip factor entries to [-f_max, f_max].

    :func:`tensorq.bcd_update` applies the bound to a row after every step it
    takes on that row, so iterates stay bounded within an update too. It does
    not touch rows it does not update: a tensor that starts outside the bound
    (``OnlineCP.random`` knows nothing about it) should be brought inside once
    with :meth:`project`.

    Parameters
    ----------
    f_max : float
        Bound F_max > 0 on the absolute value of every factor entry.

    References
    ----------
    Assumption 2 (bounded iterates, "enforced in practice by factor clipping or
    projection"); Proposition 2 and its proof (||F_n||_inf <= F_max for all n
    and t, "enforceable via projection").
    """

    f_max: float

    def __post_init__(self) -> None:
        check_float("f_max", self.f_max, positive=True)

    @classmethod
    def from_value_bound(cls, v_max: float, rank: int, order: int) -> FactorBound:
        """Return the factor bound that guarantees |Q| <= v_max at every entry.

        Parameters
        ----------
        v_max : float
            Bound V_max > 0 on the entries, for example R_max / (1 - gamma).
        rank : int
            CP rank R.
        order : int
            Tensor order N (number of modes).

        Returns
        -------
        FactorBound
            With f_max = (v_max / rank) ** (1 / order), so that
            R * f_max ** N = v_max.

        References
        ----------
        Assumption 2; Proposition 2 (F_max).
        """
        v_max = check_float("v_max", v_max, positive=True)
        rank = check_int("rank", rank, 1)
        order = check_int("order", order, 1)
        return cls((v_max / rank) ** (1.0 / order))

    def value_bound(self, rank: int, order: int) -> float:
        """Return R * f_max ** N, the bound on |Q| implied by clipped factors.

        Parameters
        ----------
        rank : int
            CP rank R.
        order : int
            Tensor order N.

        Returns
        -------
        float
        """
        return check_int("rank", rank, 1) * self.f_max ** check_int("order", order, 1)

    def clip(self, array: Any) -> Any:
        """Return ``array`` clipped elementwise to [-f_max, f_max].

        Parameters
        ----------
        array : array
            A NumPy array, PyTorch tensor or JAX array, on any device.

        Returns
        -------
        array
            Same type and shape.
        """
        ops = ops_for_backend(backend_name_of(array))
        return ops.clip(array, -self.f_max, self.f_max)

    def project(self, q: OnlineCP) -> None:
        """Clip every factor of ``q`` in place; idempotent.

        Parameters
        ----------
        q : OnlineCP
            The tensor to bring inside the bound. NumPy and PyTorch factors
            are written in place; JAX factors, immutable, are replaced in
            ``q.factors``.
        """
        for n, factor in enumerate(q.factors):
            if q._ops.functional:
                q.factors[n] = self.clip(factor)
            else:
                factor[...] = self.clip(factor)
