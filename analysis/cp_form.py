"""Rank profile of a CP tensor too large to reconstruct, from its factors alone.

A learned Highway Q-tensor has 20^9 x 5 entries: it exists only as its CP
factors (weights w, factors U_n of rank S). Fitting a rank-R CP model X (unit
weights, factors A_n) to it by ALS needs only small products of factors:

- the update of mode n solves A_n V_n = M_n with
  V_n = (*)_{m != n} A_m^T A_m and M_n = U_n diag(w) (*)_{m != n} U_m^T A_m
  ((*) the elementwise product of R x R, or S x R, matrices): the matricized
  tensor times Khatri-Rao product of ALS, without the tensor;
- ||T - X||_F^2 = ||T||^2 - 2 <T, X> + ||X||^2 with
  ||T||^2 = w^T ((*)_m U_m^T U_m) w, <T, X> = w^T ((*)_m U_m^T A_m) 1 and
  ||X||^2 = 1^T ((*)_m A_m^T A_m) 1.

So the Frobenius errors of the profile, and the certified lower bound on B_R
from singular values computed from the factors (:mod:`analysis.rank_bounds`),
exist for such a tensor. Its sup-norm errors do not: they are maxima over
10^12 entries, reported as NaN. The error computed from norms loses half the
digits near an exact fit (a relative error below about 1e-8 reads as noise).

Candidates per rank, each a function of (entropy, rank, restart) only: restart
0 starts from the R components of largest weight (padded with small random
columns past S), the others at random; the Frobenius-best is kept.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from tensorly.cp_tensor import CPTensor, cp_normalize

from analysis.rank_bounds import b_r_lower

__all__ = [
    "cp_als",
    "factor_profile_rows",
    "frobenius_norm",
    "mean_of",
    "minus_constant",
    "relative_error",
]


def _hadamard(matrices: list[NDArray]) -> NDArray:
    out = np.ones_like(matrices[0])
    for matrix in matrices:
        out = out * matrix
    return out


def frobenius_norm(cp: CPTensor) -> float:
    """Return ||T||_F of a CP tensor, from its factors."""
    weights, factors = cp
    return math.sqrt(max(float(weights @ _hadamard([f.T @ f for f in factors]) @ weights), 0.0))


def relative_error(target: CPTensor, factors: list[NDArray]) -> float:
    """Return ||T - X||_F / ||T||_F for a CP target T and X with unit weights, from factors."""
    weights, targets = target
    norm2 = weights @ _hadamard([u.T @ u for u in targets]) @ weights
    inner = weights @ _hadamard([u.T @ a for u, a in zip(targets, factors, strict=True)]).sum(1)
    fit2 = _hadamard([a.T @ a for a in factors]).sum()
    return math.sqrt(max(norm2 - 2 * inner + fit2, 0.0)) / math.sqrt(norm2) if norm2 > 0 else 0.0


def cp_als(
    target: CPTensor, init: list[NDArray], *, n_iter_max: int, tol: float
) -> tuple[float, list[NDArray]]:
    """Return (relative error, factors) of ALS from ``init`` on a CP ``target``, from factors.

    Stops after ``n_iter_max`` sweeps or when the relative error falls by less
    than ``tol`` in one sweep (as TensorLy's ``parafac``).
    """
    weights, targets = target
    factors = [np.array(a, dtype=np.float64) for a in init]
    error = relative_error(target, factors)
    for _ in range(n_iter_max):
        for n in range(len(factors)):
            others = [m for m in range(len(factors)) if m != n]
            gram = _hadamard([factors[m].T @ factors[m] for m in others])
            cross = _hadamard([targets[m].T @ factors[m] for m in others])
            product = (targets[n] * weights) @ cross
            factors[n] = np.linalg.lstsq(gram, product.T, rcond=None)[0].T
        previous, error = error, relative_error(target, factors)
        if tol and abs(previous - error) < tol:
            break
    return error, factors


def _initial(target: CPTensor, rank: int, restart: int, seed: int) -> list[NDArray]:
    """Return restart 0's start (the largest components) or a random one."""
    rng = np.random.default_rng(seed)
    weights, targets = cp_normalize(target)
    if restart > 0:
        return [rng.standard_normal((u.shape[0], rank)) for u in targets]
    order = np.argsort(-np.abs(weights), kind="stable")[:rank]
    scale = np.abs(weights[order]) ** (1.0 / len(targets))
    factors = [u[:, order] * scale for u in targets]
    factors[0] = factors[0] * np.sign(weights[order])
    missing = rank - order.size
    small = 1e-3 * (float(np.min(scale)) if scale.size else 1.0)
    return [np.hstack([f, small * rng.standard_normal((f.shape[0], missing))]) for f in factors]


def mean_of(cp: CPTensor) -> float:
    """Return the mean entry of a CP tensor, from its factors."""
    weights, factors = cp
    sums = _hadamard([np.sum(f, axis=0, keepdims=True) for f in factors])[0]
    return float(weights @ sums) / math.prod(f.shape[0] for f in factors)


def minus_constant(cp: CPTensor, value: float) -> CPTensor:
    """Return the CP tensor ``cp - value`` (one more component: a constant is rank one)."""
    weights, factors = cp
    ones = [np.ones((f.shape[0], 1)) for f in factors]
    return CPTensor(
        (
            np.append(weights, -value),
            [np.hstack([f, o]) for f, o in zip(factors, ones, strict=True)],
        )
    )


def factor_profile_rows(
    cp: CPTensor,
    ranks: list[int],
    *,
    restarts: int,
    seed_of: Callable[[int, int], int],
    n_iter_max: int,
    tol: float,
    model_rank: int = 0,
) -> tuple[list[dict[str, Any]], list[CPTensor]]:
    """Return (rows, Frobenius-best fits) of the rank profile of a CP target.

    Parameters
    ----------
    cp : CPTensor
        The tensor to fit (NumPy weights and factors; already centred if wanted).
    ranks : list of int
        Increasing CP ranks.
    restarts : int
        Fits per rank.
    seed_of : callable
        ``seed_of(rank, restart)``: the seed of one fit.
    n_iter_max, tol : int, float
        ALS budget and stopping tolerance, as in `analysis.rank.rank_profile`.
    model_rank : int, default=0
        1 when a constant is part of the model (centred fits): the lower bound
        is then that of rank R + 1 and the parameter count one more.

    Returns
    -------
    tuple
        Rows with the keys of `analysis.rank.COLUMNS` (``rel_error`` relative
        to the norm of ``cp``; NaN sup-norm and mean errors) and the fits
        (unit weights).

    References
    ----------
    TEQL paper, Assumption 1 (B_R); Kolda and Bader (2009), ALS for CP.
    """
    weights = np.ones(cp.rank) if cp.weights is None else np.asarray(cp.weights, np.float64)
    target = CPTensor((weights, [np.asarray(f, dtype=np.float64) for f in cp.factors]))
    shape = tuple(int(f.shape[0]) for f in target.factors)
    lower = b_r_lower(target, [rank + model_rank for rank in ranks])
    rows, fits = [], []
    for i, rank in enumerate(ranks):
        best: tuple[float, list[NDArray]] | None = None
        for k in range(restarts):
            seed = seed_of(rank, k)
            start = _initial(target, rank, k, seed)
            fit = cp_als(target, start, n_iter_max=n_iter_max, tol=tol)
            if best is None or fit[0] < best[0]:
                best = fit
        assert best is not None  # restarts >= 1
        rows.append(
            {
                "rank": rank,
                "rel_error": best[0],
                "energy": 1.0 - best[0] ** 2,
                "sup_error": math.nan,
                "b_r_upper": math.nan,
                "b_r_lower": lower[i].sup,
                "mean_abs_error": math.nan,
                "n_params": rank * sum(shape) + model_rank,
            }
        )
        fits.append(CPTensor((np.ones(rank), best[1])))
    return rows, fits
