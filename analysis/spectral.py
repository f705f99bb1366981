"""Spectral energy of a Q-tensor: how much of it the top k singular directions hold.

For each mode-n unfolding of a tensor (and, when asked, for the states x
actions matricization) :func:`spectral_energy` returns the singular values,
their cumulative energy shares (squared singular values normalized to end at
1) and the smallest k that reaches a given share. It accepts a dense array or
a :class:`tensorly.cp_tensor.CPTensor`. A CP tensor with more than
:data:`MAX_DENSE_ENTRIES` entries is never materialized: the singular values of
any matricization ``X = K_row diag(w) K_col^T`` of a CP tensor are those of the
small matrix ``T_row diag(w) T_col^T``, where ``K = Q T`` is a QR factorization
of the Khatri-Rao product ``K`` of the factors on each side. ``T`` is found one
mode at a time from the triangular factors of the factors (the Kronecker
product of matrices with orthonormal columns has orthonormal columns), so the
work is O(N R^3) and no product of mode sizes is ever formed.

Note that the shares of a mode unfolding are at most d_n long: for a 10-bin
mode, "rank 10 captures 100% of the energy" holds for every tensor. The energy
a rank-R *CP model* captures is ``1 - rel_error**2`` of a CP fit
(:func:`analysis.rank.rank_profile`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import scipy.linalg
import tensorly as tl
from numpy.typing import ArrayLike, NDArray
from tensorly.cp_tensor import CPTensor, cp_normalize, cp_to_tensor

from analysis._numpy import numpy_backend
from tensorq.validation import as_numpy, check_int

__all__ = [
    "MAX_DENSE_ENTRIES",
    "SpectralEnergy",
    "Spectrum",
    "spectral_energy",
]

MAX_DENSE_ENTRIES = 2**24
"""Largest CP tensor (number of entries) that ``method="auto"`` reconstructs densely."""

SHARE_ATOL = 1e-12
"""Slack in :meth:`Spectrum.rank_for`, so that rounding never hides a share of exactly 1."""

Method = Literal["auto", "dense", "factors"]
ArrayLikeOrCP = ArrayLike | CPTensor


def _cumulative_shares(singular_values: NDArray[np.float64]) -> NDArray[np.float64]:
    """Return cumsum(s^2) / sum(s^2), ending at exactly 1 (all ones for a zero spectrum)."""
    squares = np.cumsum(singular_values**2)
    if squares.size == 0 or squares[-1] == 0.0:
        return np.ones_like(squares)
    shares = squares / squares[-1]
    shares[-1] = 1.0
    return shares


def _smallest_k(energy: NDArray[np.float64], share: float) -> int:
    """Return the smallest k with ``energy[k - 1] >= share`` (up to `SHARE_ATOL`)."""
    return int(np.searchsorted(energy, share - SHARE_ATOL, side="left")) + 1


def _check_share(share: float) -> float:
    if isinstance(share, bool) or not isinstance(share, numbers.Real) or not 0 < share <= 1:
        raise ValueError(f"The 'share' parameter must be a float in (0, 1]. Got {share!r} instead.")
    return float(share)


@dataclass(frozen=True, eq=False)
class Spectrum:
    """Singular values of one matricization and their cumulative energy shares.

    Attributes
    ----------
    row_modes : tuple of int
        Modes whose indices run along the rows (the others run along the columns).
    shape : tuple of int
        (rows, columns) of the matricization.
    singular_values : ndarray of shape (min(rows, columns),)
        In decreasing order. From a CP tensor's factors, the values past the
        CP rank are exact zeros.
    energy : ndarray of shape (min(rows, columns),)
        ``energy[k - 1]`` is the share of the squared Frobenius norm held by
        the top k singular values; non-decreasing, ending at 1.
    """

    row_modes: tuple[int, ...]
    shape: tuple[int, int]
    singular_values: NDArray[np.float64]
    energy: NDArray[np.float64]

    @classmethod
    def from_singular_values(
        cls, row_modes: Sequence[int], shape: tuple[int, int], values: NDArray[np.float64]
    ) -> Spectrum:
        """Build a spectrum, sorting ``values`` and padding with zeros to min(shape)."""
        length = min(shape)
        values = np.sort(np.abs(np.asarray(values, dtype=np.float64)))[::-1][:length]
        values = np.concatenate([values, np.zeros(length - values.size)])
        return cls(tuple(row_modes), shape, values, _cumulative_shares(values))

    @property
    def total(self) -> float:
        """Squared Frobenius norm of the tensor, sum of the squared singular values."""
        return float(np.sum(self.singular_values**2))

    def rank_for(self, share: float) -> int:
        """Return the smallest k whose top-k singular values hold ``share`` of the energy.

        Parameters
        ----------
        share : float
            Target share in (0, 1].

        Returns
        -------
        int
            Smallest k with ``energy[k - 1] >= share`` (up to :data:`SHARE_ATOL`);
            0 for a zero tensor.
        """
        share = _check_share(share)
        return 0 if self.total == 0.0 else _smallest_k(self.energy, share)

    def numerical_rank(self, rtol: float | None = None) -> int:
        """Return the number of singular values above ``rtol`` times the largest.

        Parameters
        ----------
        rtol : float, optional
            Relative threshold; default ``max(shape) * machine epsilon`` as in
            :func:`numpy.linalg.matrix_rank`.

        Returns
        -------
        int
            The numerical rank of the matricization.
        """
        if rtol is None:
            rtol = max(self.shape) * np.finfo(np.float64).eps
        if self.singular_values.size == 0 or self.singular_values[0] == 0.0:
            return 0
        return int(np.count_nonzero(self.singular_values > rtol * self.singular_values[0]))


@dataclass(frozen=True, eq=False)
class SpectralEnergy:
    """Result of :func:`spectral_energy`.

    Attributes
    ----------
    shape : tuple of int
        Mode sizes (d_1, ..., d_N).
    modes : tuple of Spectrum
        ``modes[n]`` is the spectrum of the mode-n unfolding (d_n x prod of the others).
    matricization : Spectrum or None
        States x actions matricization (first ``n_state_modes`` modes along the
        rows), or None when ``n_state_modes`` was not given.
    method : {"dense", "factors"}
        Whether the spectra came from the dense tensor or from CP factors.
    weights : ndarray or None
        For CP input: the component weights after :func:`tensorly.cp_normalize`
        (unit-norm factor columns; TensorLy folds signs into the first factor,
        so they are >= 0), in decreasing order. None for a dense array.
    weight_order : ndarray of int or None
        Component index of each entry of ``weights``.
    weight_energy : ndarray or None
        Cumulative shares of the squared weights (ending at 1). The components
        of a CP tensor are not orthogonal, so these shares are a ranking of the
        components, not a decomposition of the squared norm.
    """

    shape: tuple[int, ...]
    modes: tuple[Spectrum, ...]
    matricization: Spectrum | None
    method: str
    weights: NDArray[np.float64] | None = None
    weight_order: NDArray[np.int64] | None = None
    weight_energy: NDArray[np.float64] | None = None

    def weight_rank_for(self, share: float) -> int:
        """Return the number of largest CP components whose squared weights reach ``share``.

        Parameters
        ----------
        share : float
            Target share in (0, 1].

        Returns
        -------
        int
            Smallest k with ``weight_energy[k - 1] >= share``; 0 for zero weights.

        Raises
        ------
        ValueError
            For a dense input, which has no weights.
        """
        share = _check_share(share)
        if self.weights is None or self.weight_energy is None:
            raise ValueError("Component weights exist only for a CPTensor input.")
        return _smallest_k(self.weight_energy, share) if np.any(self.weights) else 0


def numpy_cp(cp: Any) -> CPTensor:
    """Return a CPTensor with float64 NumPy weights and factors."""
    weights, factors = cp
    factors = [as_numpy(f).astype(np.float64) for f in factors]
    rank = factors[0].shape[1] if factors else 0
    weights = np.ones(rank) if weights is None else as_numpy(weights).astype(np.float64)
    return CPTensor((weights, factors))


def _row_split(shape: tuple[int, ...], n_rows: int) -> tuple[int, int]:
    return math.prod(shape[:n_rows]), math.prod(shape[n_rows:])


def dense_spectrum(tensor: NDArray, row_modes: tuple[int, ...]) -> Spectrum:
    """Spectrum of the matricization with ``row_modes`` (in order) along the rows."""
    others = tuple(m for m in range(tensor.ndim) if m not in row_modes)
    moved = np.transpose(tensor, row_modes + others)
    shape = _row_split(moved.shape, len(row_modes))
    values = scipy.linalg.svdvals(moved.reshape(shape), check_finite=False)
    return Spectrum.from_singular_values(row_modes, shape, values)


def _triangular(factor: NDArray) -> NDArray:
    """Return T with factor = Q T, Q with orthonormal columns (T is min(d, R) x R)."""
    return np.linalg.qr(factor, mode="r")


def _khatri_rao_triangular(factors: Sequence[NDArray], rank: int) -> NDArray:
    """Return T with khatri_rao(factors) = Q T, Q orthonormal, without forming the product.

    If A = Q_a T_a and B = Q_b T_b then A (Khatri-Rao) B = (Q_a kron Q_b)(T_a (Khatri-Rao) T_b)
    and Q_a kron Q_b has orthonormal columns; a QR of the small T_a (Khatri-Rao) T_b
    continues the recursion.
    """
    if not factors:
        return np.ones((1, rank))
    acc = _triangular(factors[0])
    for factor in factors[1:]:
        tri = _triangular(factor)
        product = (acc[:, None, :] * tri[None, :, :]).reshape(-1, rank)
        acc = _triangular(product)
    return acc


def factor_spectrum(cp: CPTensor, row_modes: tuple[int, ...]) -> Spectrum:
    """Spectrum of a CP tensor's matricization computed from its factors only."""
    weights, factors = cp
    rank = weights.shape[0]
    others = tuple(m for m in range(len(factors)) if m not in row_modes)
    shape_all = tuple(f.shape[0] for f in factors)
    shape = (math.prod(shape_all[m] for m in row_modes), math.prod(shape_all[m] for m in others))
    left = _khatri_rao_triangular([factors[m] for m in row_modes], rank)
    right = _khatri_rao_triangular([factors[m] for m in others], rank)
    values = scipy.linalg.svdvals((left * weights) @ right.T, check_finite=False)
    return Spectrum.from_singular_values(row_modes, shape, values)


def _weights(cp: CPTensor) -> tuple[NDArray, NDArray, NDArray]:
    with tl.backend_context("numpy"):
        weights, _ = cp_normalize(cp)
    weights = np.asarray(weights, dtype=np.float64)
    order = np.argsort(-np.abs(weights), kind="stable")
    return weights[order], order.astype(np.int64), _cumulative_shares(weights[order])


@numpy_backend
def spectral_energy(
    tensor: ArrayLikeOrCP,
    *,
    n_state_modes: int | None = None,
    method: Method = "auto",
) -> SpectralEnergy:
    """Return the singular values and energy shares of a tensor's matricizations.

    Parameters
    ----------
    tensor : array_like or tensorly.cp_tensor.CPTensor
        A dense tensor of order N >= 1 (a NumPy array, a CPU PyTorch tensor, or
        any array-like), or a CP tensor (weights, factors), for example a learned
        TEQL Q-tensor or the output of :func:`tensorly.decomposition.parafac`.
    n_state_modes : int, optional
        Number of leading (state) modes, 1 <= k <= N - 1. If given, the result's
        ``matricization`` holds the spectrum of the (prod d_1..d_k) x (prod
        d_{k+1}..d_N) states x actions matrix.
    method : {"auto", "dense", "factors"}, default="auto"
        ``"factors"`` computes a CP tensor's spectra from its factors (QR of
        the Khatri-Rao products, never materializing the tensor); ``"dense"``
        reconstructs it; ``"auto"`` reconstructs only CP tensors with at most
        :data:`MAX_DENSE_ENTRIES` entries. A dense input is always ``"dense"``.

    Returns
    -------
    SpectralEnergy
        Per mode-n unfolding ``modes[n]`` (singular values, cumulative energy,
        ``rank_for(share)``), the optional ``matricization``, and for CP input
        the normalized component weights and their shares: float64 NumPy
        arrays, whatever TensorLy's global backend is (the input may be a
        NumPy, PyTorch or JAX array, or a CPTensor of such arrays).

    Raises
    ------
    ValueError
        For an empty or non-numeric tensor, a bad ``n_state_modes``, an unknown
        ``method``, or ``method="factors"`` on a dense input.

    References
    ----------
    TEQL paper, Assumption 1 (low-rank CP approximability) and Section 2.1;
    Rozada et al. (2024), the spectral-energy argument the paper cites for
    rank 10 and 20 capturing most of the energy.
    """
    if method not in ("auto", "dense", "factors"):
        raise ValueError(
            "The 'method' parameter must be one of ('auto', 'dense', 'factors'). "
            f"Got {method!r} instead."
        )
    is_cp = isinstance(tensor, CPTensor)
    if is_cp:
        cp = numpy_cp(tensor)
        shape = tuple(int(f.shape[0]) for f in cp.factors)
    else:
        if method == "factors":
            raise ValueError(
                "The 'method' parameter can be 'factors' only for a CPTensor input. "
                "Got 'factors' with a dense array instead."
            )
        dense = as_numpy(tensor)
        if dense.dtype.kind not in "biuf" or dense.ndim == 0 or dense.size == 0:
            raise ValueError(
                "The 'tensor' parameter must be a non-empty numeric array or a CPTensor. "
                f"Got {dense.dtype} array of shape {dense.shape} instead."
            )
        if not np.isfinite(dense).all():
            raise ValueError(
                "The 'tensor' parameter must have finite entries. Got NaN or inf instead."
            )
        dense = dense.astype(np.float64, copy=False)
        shape = dense.shape
    order = len(shape)
    if n_state_modes is not None:
        if order < 2:
            raise ValueError(
                "The 'n_state_modes' parameter needs a tensor of order >= 2. "
                f"Got order {order} instead."
            )
        check_int("n_state_modes", n_state_modes, 1)
        if n_state_modes > order - 1:
            raise ValueError(
                f"The 'n_state_modes' parameter must be an int in [1, {order - 1}]. "
                f"Got {n_state_modes!r} instead."
            )
    use_factors = is_cp and (
        method == "factors" or (method == "auto" and math.prod(shape) > MAX_DENSE_ENTRIES)
    )
    if is_cp and not use_factors:
        with tl.backend_context("numpy"):
            dense = np.asarray(cp_to_tensor(cp), dtype=np.float64)

    def spectrum(row_modes: tuple[int, ...]) -> Spectrum:
        return factor_spectrum(cp, row_modes) if use_factors else dense_spectrum(dense, row_modes)

    modes = tuple(spectrum((n,)) for n in range(order))
    matricization = None if n_state_modes is None else spectrum(tuple(range(n_state_modes)))
    weights = order_ = weight_energy = None
    if is_cp:
        weights, order_, weight_energy = _weights(cp)
    return SpectralEnergy(
        shape=tuple(int(d) for d in shape),
        modes=modes,
        matricization=matricization,
        method="factors" if use_factors else "dense",
        weights=weights,
        weight_order=order_,
        weight_energy=weight_energy,
    )
