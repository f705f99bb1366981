"""A certified lower bound on B_R, the best sup-norm error of any rank-R CP tensor.

B_R of Assumption 1 is a minimum over all rank-R CP tensors, so no fit can
compute it; a fit only bounds it from above (:func:`analysis.rank.rank_profile`).
:func:`b_r_lower` bounds it from below, from singular values alone.

**Proof.** Let X = sum_{r=1}^R a_r^(1) o ... o a_r^(N) be any CP tensor of
rank at most R, and split the modes into two non-empty sets S and S'. The
matricization X_(S) (the modes of S along the rows) is
sum_r vec(o_{n in S} a_r^(n)) vec(o_{n in S'} a_r^(n))^T, a sum of R outer
products of two vectors, so rank(X_(S)) <= R. By the Eckart-Young-Mirsky
theorem, every matrix of rank at most R is at Frobenius distance at least
tail_R(T_(S)) = sqrt(sum_{i > R} sigma_i(T_(S))^2) from T_(S), so
||T - X||_F >= tail_R(T_(S)) for every split S. A tensor E with M entries
has ||E||_F <= sqrt(M) max|E|, hence

    max |T - X| >= max_S tail_R(T_(S)) / sqrt(M)   for every rank-R CP X,

and the right side is a lower bound on B_R. Computed singular values carry
rounding errors; each is lowered by a bound on its error before the tail is
taken (`_tail`), so rounding never raises the bound. The maximum runs over all
2^(N-1) - 1 splits of the modes (the N mode unfoldings are N of them); the
other matricizations are often tighter, for example states x actions.

The bound is loose by up to sqrt(M) when the error of the best fit is spread
evenly over the entries, and closest when it is concentrated, so a bracket
``b_r_lower <= B_R <= b_r_upper`` can be wide: report both and say so.

For a CP tensor too large to reconstruct (a learned Highway Q), the singular
values come from the factors (:mod:`analysis.spectral`), so the bound exists
for it as well.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tensorly.cp_tensor import CPTensor

from analysis._numpy import numpy_backend
from analysis.spectral import Spectrum, dense_spectrum, factor_spectrum, numpy_cp

__all__ = ["ROUNDING", "LowerBound", "b_r_lower", "mode_splits"]

ROUNDING = 10.0
"""Safety factor on the SVD's rounding error, p(n) <= ROUNDING * max(shape) (see `_tail`)."""


@dataclass(frozen=True)
class LowerBound:
    """A certified lower bound on B_R at one rank, and the split that gave it.

    Attributes
    ----------
    rank : int
        The CP rank R.
    sup : float
        Lower bound on min over rank-R CP X of max |T - X| (B_R).
    frobenius : float
        Lower bound on min over rank-R CP X of ||T - X||_F.
    row_modes : tuple of int
        The modes along the rows of the matricization whose tail gave the bound.
    """

    rank: int
    sup: float
    frobenius: float
    row_modes: tuple[int, ...]


def mode_splits(order: int) -> list[tuple[int, ...]]:
    """Return each split of ``order`` modes into two non-empty sets, by its row modes.

    A split and its transpose have the same singular values, so each split
    appears once, named by the set that holds mode 0 (``(0,)``, ``(0, 1)``,
    ...): 2^(order - 1) - 1 splits.
    """
    rest = range(1, order)
    return [
        (0, *chosen) for size in range(order - 1) for chosen in itertools.combinations(rest, size)
    ]


def _tail(spectrum: Spectrum, rank: int) -> float:
    """Return sqrt(sum_{i > rank} sigma_i^2), each computed sigma_i lowered by its rounding.

    A backward-stable SVD returns the singular values of T + E with
    ||E||_2 <= p(n) eps ||T||_2; by Weyl's inequality each computed value is
    within ||E||_2 of the exact one. With `ROUNDING` * max(shape) * eps *
    sigma_1 as the margin, the tail can only be underestimated, so the bound
    stays certified (and is exactly 0 where T has rank <= R up to rounding).
    """
    values = spectrum.singular_values
    if values.size == 0:
        return 0.0
    margin = ROUNDING * max(spectrum.shape) * np.finfo(np.float64).eps * float(values[0])
    return float(math.sqrt(np.sum(np.maximum(values[rank:] - margin, 0.0) ** 2)))


@numpy_backend
def b_r_lower(tensor: NDArray | CPTensor, ranks: Iterable[int]) -> list[LowerBound]:
    """Return the certified lower bound on B_R at each rank (proof in the module docstring).

    Parameters
    ----------
    tensor : ndarray or CPTensor
        A dense float tensor of order N >= 2, or a CP tensor, whose singular
        values are then computed from its factors without reconstructing it.
    ranks : iterable of int
        CP ranks R >= 1.

    Returns
    -------
    list of LowerBound
        One per rank, in the order given.

    References
    ----------
    TEQL paper, Assumption 1 (B_R, eq. (low_rank_approx)); Eckart and Young
    (1936), Mirsky (1960) for the best low-rank matrix approximation.
    """
    if isinstance(tensor, CPTensor):
        cp = numpy_cp(tensor)
        shape = tuple(int(f.shape[0]) for f in cp.factors)

        def spectrum(rows: tuple[int, ...]) -> Spectrum:
            return factor_spectrum(cp, rows)

    else:
        dense: Any = np.asarray(tensor, dtype=np.float64)
        shape = dense.shape

        def spectrum(rows: tuple[int, ...]) -> Spectrum:
            return dense_spectrum(dense, rows)

    spectra = [spectrum(rows) for rows in mode_splits(len(shape))]
    root = math.sqrt(math.prod(shape))
    bounds = []
    for rank in ranks:
        tails = [_tail(s, int(rank)) for s in spectra]
        best = int(np.argmax(tails))
        bounds.append(
            LowerBound(int(rank), tails[best] / root, tails[best], spectra[best].row_modes)
        )
    return bounds
