"""CUR (skeleton) matrix completion with leverage-score anchors: the maths of LoRa-VI.

A matrix M of shape (m, n) and rank d is determined by a skeleton of K anchor
rows I and K anchor columns J: with C = M[:, J] (m x K), R = M[I, :] (K x n)
and their overlap W = M[I, J] (K x K),

    M = C W^+ R        whenever rank(W) = rank(M) = d,

where W^+ is the Moore-Penrose pseudo-inverse. With noisy entries the
pseudo-inverse is truncated to the top d singular values (W^+_d), which is the
estimator of Stojanovic, Jedra and Proutiere (2024). The skeleton holds
K (m + n - K) distinct entries (the overlap is shared).

Anchors are chosen by leverage scores: for the rank-d SVD M ~ U_d S_d V_d^T the
leverage score of row i is ||U_d[i, :]||^2 and of column j ||V_d[j, :]||^2
(each set sums to d). Rows with large leverage carry directions of the row
space that other rows do not, so they must be in the skeleton.

These are pure functions on one matrix; `rl.agents.tables.lora_vi` applies them per
replica.

References
----------
.. [1] Stojanovic, S., Jedra, Y. and Proutiere, A. "Model-free low-rank
   reinforcement learning via leveraged entry-wise matrix estimation". NeurIPS
   2024.
.. [2] Mahoney, M. W. and Drineas, P. "CUR matrix decompositions for improved
   data analysis". PNAS 106(3), 697-702 (2009).
.. [3] TEQL paper, Appendix "Parameter Matching Methodology" (P_CUR).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

ANCHOR_RULES = ("top", "sample")


class LeverageScores(NamedTuple):
    """Row and column leverage scores of a rank-d SVD.

    Attributes
    ----------
    rows : ndarray of float, shape (m,)
        ||U_d[i, :]||^2 for every row i.
    columns : ndarray of float, shape (n,)
        ||V_d[j, :]||^2 for every column j.
    """

    rows: NDArray[np.float64]
    columns: NDArray[np.float64]


def cur_param_count(k: int, n_rows: int, n_cols: int) -> int:
    """Return K (m + n - K), the number of distinct skeleton entries.

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", P_CUR.
    """
    return int(k) * (int(n_rows) + int(n_cols) - int(k))


def leverage_scores(matrix: NDArray[np.float64], rank: int) -> LeverageScores:
    """Return the row and column leverage scores of the rank-``rank`` SVD of ``matrix``.

    Parameters
    ----------
    matrix : ndarray of float, shape (m, n)
    rank : int
        d; clipped to min(m, n).

    Returns
    -------
    LeverageScores
        Each of ``rows`` and ``columns`` sums to d (when d <= rank(matrix)).
    """
    u, _, vt = np.linalg.svd(np.asarray(matrix, dtype=np.float64), full_matrices=False)
    d = min(int(rank), u.shape[1])
    return LeverageScores(np.sum(u[:, :d] ** 2, axis=1), np.sum(vt[:d, :] ** 2, axis=0))


def select_anchors(
    scores: NDArray[np.float64],
    k: int,
    rule: str = "top",
    rng: np.random.Generator | None = None,
) -> NDArray[np.int64]:
    """Choose ``k`` distinct anchor indices from leverage ``scores``; returned sorted.

    Parameters
    ----------
    scores : ndarray of float, shape (n,)
        Non-negative leverage scores.
    k : int
        Number of anchors, 1 <= k <= n.
    rule : {"top", "sample"}
        ``"top"``: the k largest scores, ties broken by the lower index
        (deterministic). ``"sample"``: k indices without replacement with
        probability proportional to the scores (needs ``rng``); if fewer than
        k scores are positive, all positive ones are taken and the rest drawn
        uniformly from the others.
    rng : numpy.random.Generator, optional
        Required for ``"sample"``.

    Returns
    -------
    ndarray of int64, shape (k,)
    """
    scores = np.asarray(scores, dtype=np.float64)
    n = scores.size
    if not 1 <= k <= n:
        raise ValueError(f"The 'k' parameter must be an int in [1, {n}]. Got {k!r} instead.")
    if rule == "top":
        chosen = np.argsort(-scores, kind="stable")[:k]
    elif rule == "sample":
        if rng is None:
            raise ValueError("The 'sample' anchor rule needs a random generator 'rng'.")
        positive = np.flatnonzero(scores > 0)
        if positive.size >= k:
            chosen = rng.choice(n, size=k, replace=False, p=scores / scores.sum())
        else:
            rest = np.setdiff1d(np.arange(n), positive)
            chosen = np.concatenate(
                [positive, rng.choice(rest, size=k - positive.size, replace=False)]
            )
    else:
        raise ValueError(
            f"The 'rule' parameter must be one of {ANCHOR_RULES}. Got {rule!r} instead."
        )
    return np.sort(chosen).astype(np.int64)


def truncated_pinv(
    matrix: NDArray[np.float64], rank: int, rcond: float = 1e-10
) -> NDArray[np.float64]:
    """Return W^+_d, the pseudo-inverse of ``matrix`` truncated to its top ``rank`` singular values.

    Singular values below ``rcond * sigma_max`` are dropped as well, so a
    rank-deficient core never produces huge entries.
    """
    u, s, vt = np.linalg.svd(np.asarray(matrix, dtype=np.float64), full_matrices=False)
    d = min(int(rank), s.size)
    keep = s[:d] > rcond * (s[0] if s.size else 0.0)
    inv = np.zeros(d)
    inv[keep] = 1.0 / s[:d][keep]
    return (vt[:d].T * inv) @ u[:, :d].T


def cur_complete(
    columns: NDArray[np.float64],
    rows: NDArray[np.float64],
    row_anchors: NDArray[np.int64],
    rank: int,
    rcond: float = 1e-10,
) -> NDArray[np.float64]:
    """Complete a matrix from its skeleton: C W^+_d R.

    Parameters
    ----------
    columns : ndarray of float, shape (m, K)
        C, the anchor columns.
    rows : ndarray of float, shape (K, n)
        R, the anchor rows.
    row_anchors : ndarray of int, shape (K,)
        Indices I of the anchor rows, so that W = C[I, :].
    rank : int
        d, the truncation rank of the core's pseudo-inverse.
    rcond : float
        Relative cut-off for small singular values of W.

    Returns
    -------
    ndarray of float, shape (m, n)

    References
    ----------
    .. [1] Stojanovic, Jedra and Proutiere (NeurIPS 2024), CUR-based completion.
    """
    core = columns[row_anchors, :]
    return columns @ (truncated_pinv(core, rank, rcond) @ rows)
