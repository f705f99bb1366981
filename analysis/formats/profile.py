"""CP, Tucker and tensor-train side by side: approximation error against parameters.

:func:`format_profile` fits one Q-tensor in three TensorLy formats at a list
of ranks and reports, per (format, rank), the parameter count, the relative
Frobenius error and the sup-norm error:

* ``cp``: :func:`analysis.rank.rank_profile` (``parafac``, its restarts, warm
  chain and sup-norm refinement); the Frobenius column is its Frobenius-best
  fit, the sup column its ``b_r_upper``. Parameters R * sum(d_n).
* ``tucker``: :func:`tensorly.decomposition.tucker` with multilinear rank
  (min(R, d_1), ..., min(R, d_N)); candidates: the HOSVD start and
  ``restarts - 1`` seeded random starts. Parameters prod(r_n) + sum d_n r_n.
* ``tt``: :func:`tensorly.decomposition.tensor_train` (TT-SVD) with every
  inner rank min(R, the rank the unfolding allows); deterministic, so one
  candidate. Parameters sum r_{n-1} d_n r_n.

**Never worse with more effort**, as the CP profile: in each format a fit at
a lower listed rank is also a fit at a higher one (pad with zeros), so the
reported errors at rank R are the least over that rank's candidates and every
lower listed rank's; more restarts or more ranks add candidates and remove
none. The Frobenius and sup columns are minimized separately (each the best
fit found for its norm), as ``rel_error`` and ``b_r_upper`` are in the CP profile.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import tensorly as tl
from numpy.typing import ArrayLike, NDArray
from tensorly.decomposition import tensor_train, tucker
from tensorly.tenalg import multi_mode_dot

from analysis._numpy import numpy_backend
from analysis.rank import rank_profile

FORMATS = ("cp", "tucker", "tt")
COLUMNS = ("format", "rank", "n_params", "rel_error", "sup_error")
"""Columns of a format profile row (and of ``formats.csv``)."""
TUCKER_ITER = 100
"""HOOI iterations per Tucker fit (TensorLy's default)."""


def _errors(tensor: NDArray, approximation: NDArray, norm: float) -> tuple[float, float]:
    residual = tensor - approximation
    return float(np.linalg.norm(residual) / norm), float(np.abs(residual).max())


def _tucker_rows(
    tensor: NDArray, ranks: Sequence[int], restarts: int, seed: int, norm: float
) -> list[dict]:
    rows, best = [], (math.inf, math.inf)
    for rank in ranks:
        multilinear = [min(rank, d) for d in tensor.shape]
        for restart in range(restarts):
            init = "svd" if restart == 0 else "random"
            core, factors = tucker(
                tensor,
                rank=multilinear,
                init=init,
                n_iter_max=TUCKER_ITER,
                random_state=seed + 1000 * rank + restart,
            )
            fit = np.asarray(multi_mode_dot(core, factors))
            best = tuple(min(b, e) for b, e in zip(best, _errors(tensor, fit, norm), strict=True))
        params = math.prod(multilinear) + sum(
            d * r for d, r in zip(tensor.shape, multilinear, strict=True)
        )
        rows.append(_row("tucker", rank, params, best))
    return rows


def _tt_ranks(shape: Sequence[int], rank: int) -> list[int]:
    inner = [min(rank, math.prod(shape[:k]), math.prod(shape[k:])) for k in range(1, len(shape))]
    return [1, *inner, 1]


def _tt_rows(tensor: NDArray, ranks: Sequence[int], norm: float) -> list[dict]:
    rows, best = [], (math.inf, math.inf)
    for rank in ranks:
        tt_ranks = _tt_ranks(tensor.shape, rank)
        cores = tensor_train(tensor, rank=tt_ranks)
        fit = np.asarray(tl.tt_to_tensor(cores))
        best = tuple(min(b, e) for b, e in zip(best, _errors(tensor, fit, norm), strict=True))
        params = sum(tt_ranks[n] * d * tt_ranks[n + 1] for n, d in enumerate(tensor.shape))
        rows.append(_row("tt", rank, params, best))
    return rows


def _row(name: str, rank: int, params: int, errors: tuple[float, float]) -> dict:
    return {
        "format": name,
        "rank": rank,
        "n_params": int(params),
        "rel_error": errors[0],
        "sup_error": errors[1],
    }


@numpy_backend
def format_profile(
    tensor: ArrayLike,
    ranks: Iterable[int],
    *,
    restarts: int = 3,
    random_state: int = 0,
    refine: bool = True,
) -> list[dict]:
    """Fit ``tensor`` as CP, Tucker and tensor train at each rank; one row per (format, rank).

    Parameters
    ----------
    tensor : array_like
        Dense tensor of order >= 2 (a Q-tensor: state modes, then action modes).
    ranks : iterable of int
        Ranks (>= 1): the CP rank, every Tucker mode rank and every inner TT rank
        (each capped where the shape allows less).
    restarts : int, default 3
        Seeded fits per rank for CP and Tucker (TT-SVD is deterministic).
    random_state : int, default 0
        Seed of every fit.
    refine : bool, default True
        Refine the CP fits for the sup norm (see `analysis.rank.rank_profile`).

    Returns
    -------
    list of dict
        Rows with the keys of `COLUMNS`, by format (`FORMATS`) then rank.

    References
    ----------
    Assumption 1 of the TEQL paper (B_R, the sup-norm error of the best rank-R
    CP model), here for the three formats. Tucker: L. De Lathauwer et al.,
    SIAM J. Matrix Anal. Appl. 21 (2000). Tensor train: I. Oseledets, SIAM J.
    Sci. Comput. 33 (2011).
    """
    dense = np.asarray(tensor, dtype=np.float64)
    if dense.ndim < 2 or not np.isfinite(dense).all():
        raise ValueError("The 'tensor' parameter must be a finite array of order >= 2.")
    ranks = sorted({int(r) for r in ranks})
    if not ranks or ranks[0] < 1:
        raise ValueError(f"The 'ranks' parameter must hold integers >= 1. Got {ranks} instead.")
    if restarts < 1:
        raise ValueError(f"The 'restarts' parameter must be an int >= 1. Got {restarts} instead.")
    norm = float(np.linalg.norm(dense)) or 1.0
    cp = rank_profile(dense, ranks, restarts=restarts, random_state=random_state, refine=refine)
    rows, best = [], (math.inf, math.inf)
    for row in cp.rows:
        best = (min(best[0], row["rel_error"]), min(best[1], row["b_r_upper"]))
        rows.append(_row("cp", row["rank"], row["n_params"], best))
    rows += _tucker_rows(dense, ranks, restarts, random_state, norm)
    rows += _tt_rows(dense, ranks, norm)
    return rows


def plot_format_profile(
    rows: Sequence[dict], path: str | Path, *, entries: int, title: str = ""
) -> None:
    """Draw relative Frobenius and sup errors against parameters, one line per format.

    A dotted vertical line marks ``entries``, the parameters of a table; fits with
    as many parameters or more (no compression) are left out of the figure.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, panels = plt.subplots(1, 2, figsize=(8.4, 3.2))
    for name in FORMATS:
        mine = [r for r in rows if r["format"] == name and r["n_params"] < entries]
        params = [r["n_params"] for r in mine]
        for panel, key in zip(panels, ("rel_error", "sup_error"), strict=True):
            values = np.maximum([r[key] for r in mine], 1e-16)
            panel.plot(params, values, marker="o", ms=3, label=name)
    for panel, label in zip(panels, ("relative Frobenius error", "sup-norm error"), strict=True):
        panel.axvline(entries, color="grey", ls=":", lw=0.8)
        panel.set_xscale("log")
        panel.set_yscale("log")
        panel.set_xlabel("parameters (dotted: a table)")
        panel.set_ylabel(label)
        panel.tick_params(labelsize=8)
    panels[0].legend(fontsize=8)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
