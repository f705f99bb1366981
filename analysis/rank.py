"""Rank profile of a Q-tensor: the best CP fit found at each rank and its errors.

:func:`rank_profile` fits TensorLy's :func:`~tensorly.decomposition.parafac`
at each requested rank (best of several seeded restarts by Frobenius error)
and reports the relative Frobenius error, the captured energy
``1 - rel_error**2``, the sup-norm error (an upper estimate of the B_R of
Assumption 1: the best rank-R approximation in sup norm is at least as good as
the best fit found), the mean absolute error and the parameter count.
:func:`plot_rank_profile` draws the errors against rank and parameter count.

Fitting settings (defaults defined once, below), measured on a smooth
synthetic Q-like tensor of CartPole's shape (10, 10, 20, 20, 10). ALS converges
slowly there: the relative error still falls by ~1e-5 per iteration after 100
iterations, so a tolerance that stops early costs accuracy and the budget is
set by ``n_iter_max``. What buys accuracy cheaply is (i) the warm start: one
restart per rank begins from the best fit of the previous rank plus a rank-one
term fitted to its residual, which continues the previous optimisation rather
than starting over; it gave the best fit at almost every rank above 2, and
beat a random extra column by 25% in error at rank 10; and (ii) TensorLy's
line search, which for about 20% more CPU time lowered the error by 20% at
rank 10 and fourfold at rank 20. With ``n_iter_max=100``, ``tol=1e-7``, line
search on and one BLAS thread, the full CartPole-shaped profile (ranks 1-20,
3 restarts) takes about 70 s of CPU time (``benchmarks/bench_analysis.py``).
"""

from __future__ import annotations

import csv
import math
import numbers
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorly as tl
from numpy.typing import ArrayLike, NDArray
from tensorly.cp_tensor import CPTensor, cp_to_tensor
from tensorly.decomposition import parafac

from analysis.spectral import MAX_DENSE_ENTRIES
from tensorq._validation import as_numpy, check_float, check_int

__all__ = [
    "COLUMNS",
    "LINESEARCH",
    "N_ITER_MAX",
    "TOL",
    "RankProfile",
    "plot_rank_profile",
    "rank_profile",
]

N_ITER_MAX = 100
"""Default ALS iterations per fit (see the module docstring for the measurements)."""

TOL = 1e-7
"""Default stopping tolerance on the change of the relative error between iterations."""

LINESEARCH = True
"""Default for TensorLy's ALS line search."""

COLUMNS = ("rank", "rel_error", "energy", "sup_error", "mean_abs_error", "n_params")
"""Keys of every row of a :class:`RankProfile`, in CSV column order."""


@dataclass(frozen=True, eq=False)
class RankProfile:
    """Result of :func:`rank_profile`.

    Attributes
    ----------
    rows : list of dict
        One row per rank, in increasing rank order, with the keys of
        :data:`COLUMNS`: ``rank``; ``rel_error`` = ||T - T_R||_F / ||T||_F;
        ``energy`` = 1 - rel_error**2; ``sup_error`` = max |T - T_R| (upper
        estimate of B_R); ``mean_abs_error`` = mean |T - T_R|; ``n_params`` =
        rank * sum(d_n), plus 1 for the mean when ``center``.
    shape : tuple of int
        Mode sizes of the tensor.
    center : bool
        Whether the mean was removed before fitting and added back.
    mean : float
        The removed mean (0.0 unless ``center``).
    norm : float
        Frobenius norm of the tensor (the denominator of ``rel_error``).
    fits : tuple of CPTensor
        Best fit per row (of the tensor minus ``mean``), NumPy arrays.
    settings : dict
        The fitting settings used (restarts, n_iter_max, tol, linesearch, warm_start).
    """

    rows: list[dict[str, Any]]
    shape: tuple[int, ...]
    center: bool
    mean: float
    norm: float
    fits: tuple[CPTensor, ...] = field(repr=False)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def ranks(self) -> tuple[int, ...]:
        """Ranks of the rows, increasing."""
        return tuple(row["rank"] for row in self.rows)

    def _index(self, rank: int) -> int:
        try:
            return self.ranks.index(rank)
        except ValueError:
            raise ValueError(
                f"The 'rank' parameter must be one of the profiled ranks {self.ranks}. "
                f"Got {rank!r} instead."
            ) from None

    def row(self, rank: int) -> dict[str, Any]:
        """Return the row of ``rank`` (a copy)."""
        return dict(self.rows[self._index(rank)])

    def column(self, key: str) -> NDArray[np.float64]:
        """Return one column of the rows as an array (``key`` from :data:`COLUMNS`)."""
        if key not in COLUMNS:
            raise ValueError(f"The 'key' parameter must be one of {COLUMNS}. Got {key!r} instead.")
        return np.array([row[key] for row in self.rows], dtype=np.float64)

    def smallest_rank(self, energy: float = 0.9) -> int | None:
        """Return the smallest profiled rank whose fit captures ``energy``, or None.

        Parameters
        ----------
        energy : float, default=0.9
            Target share of the squared Frobenius norm, 1 - rel_error**2, in (0, 1].

        Returns
        -------
        int or None
            The rank, or None when no profiled rank reaches the target.
        """
        if isinstance(energy, bool) or not isinstance(energy, numbers.Real) or not 0 < energy <= 1:
            raise ValueError(
                f"The 'energy' parameter must be a float in (0, 1]. Got {energy!r} instead."
            )
        for row in self.rows:
            if row["energy"] >= energy:
                return int(row["rank"])
        return None

    def approximation(self, rank: int) -> NDArray[np.float64]:
        """Return the dense best fit at ``rank``, with the mean added back."""
        with tl.backend_context("numpy"):
            return np.asarray(cp_to_tensor(self.fits[self._index(rank)])) + self.mean

    def to_csv(self, path: str | Path) -> Path:
        """Write the rows as CSV (header :data:`COLUMNS`) and return the path."""
        path = Path(path)
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            for row in self.rows:
                writer.writerow({key: repr(row[key]) for key in COLUMNS})
        return path


def _dense(tensor: Any) -> NDArray[np.float64]:
    if isinstance(tensor, CPTensor):
        size = math.prod(int(f.shape[0]) for f in tensor.factors)
        if size > MAX_DENSE_ENTRIES:
            raise ValueError(
                f"The 'tensor' parameter must fit in memory ({MAX_DENSE_ENTRIES} entries) to be "
                f"fitted. Got a CPTensor of {size} entries instead."
            )
        with tl.backend_context("numpy"):
            tensor = cp_to_tensor(CPTensor((as_numpy(tensor[0]), [as_numpy(f) for f in tensor[1]])))
    dense = as_numpy(tensor)
    if dense.dtype.kind not in "biuf" or dense.ndim < 2 or dense.size == 0:
        raise ValueError(
            "The 'tensor' parameter must be a numeric array of order >= 2 or a CPTensor. "
            f"Got {dense.dtype} array of shape {dense.shape} instead."
        )
    dense = np.asarray(dense, dtype=np.float64)
    if not np.isfinite(dense).all():
        raise ValueError("The 'tensor' parameter must have finite entries. Got NaN or inf instead.")
    return dense


def _ranks(ranks: int | Iterable[int]) -> list[int]:
    values = [ranks] if isinstance(ranks, numbers.Integral) else list(ranks)
    if not values:
        raise ValueError("The 'ranks' parameter must hold at least one rank. Got none instead.")
    for value in values:
        check_int("ranks", value, 1)
    return sorted({int(v) for v in values})


def _generator(random_state: Any) -> np.random.Generator:
    if random_state is None or isinstance(random_state, np.random.Generator):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state >= 0:
            return np.random.default_rng(int(random_state))
    raise ValueError(
        "The 'random_state' parameter must be None, an int >= 0 or a numpy.random.Generator. "
        f"Got {random_state!r} instead."
    )


@contextmanager
def _blas_threads(threads: int | None) -> Iterator[None]:
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads, user_api="blas"):
        yield


def _balanced(cp: CPTensor) -> list[NDArray[np.float64]]:
    """Return factors with the weights spread evenly over the modes (first mode takes signs)."""
    weights, factors = cp
    scale = np.abs(weights) ** (1.0 / len(factors))
    out = [np.array(f * scale) for f in factors]
    out[0] *= np.where(weights < 0, -1.0, 1.0)
    return out


def _residual_term(residual: NDArray) -> list[NDArray[np.float64]]:
    """Return one rank-one column per mode approximating ``residual`` (truncated HOSVD)."""
    vectors = []
    for mode in range(residual.ndim):
        unfolded = np.moveaxis(residual, mode, 0).reshape(residual.shape[mode], -1)
        left = np.linalg.svd(unfolded, full_matrices=False)[0][:, 0]
        vectors.append(left)
    core = residual
    for vector in vectors:  # contract mode by mode: <residual, u_1 o ... o u_N>
        core = np.tensordot(vector, core, axes=(0, 0))
    size = abs(float(core)) ** (1.0 / residual.ndim)
    columns = [v * size for v in vectors]
    columns[0] *= -1.0 if float(core) < 0 else 1.0
    return [c[:, None] for c in columns]


def _warm_init(
    previous: CPTensor, residual: NDArray, rank: int, rng: np.random.Generator
) -> CPTensor:
    """Return a rank-``rank`` start: the previous fit plus residual (and random) columns."""
    factors = _balanced(previous)
    extra = rank - previous.rank
    term = _residual_term(residual)
    rms = (float(np.linalg.norm(residual)) / math.sqrt(residual.size) + 1e-300) ** (
        1.0 / residual.ndim
    )
    for n, factor in enumerate(factors):
        random_columns = rng.standard_normal((factor.shape[0], extra - 1)) * 0.1 * rms
        factors[n] = np.hstack([factor, term[n], random_columns])
    return CPTensor((np.ones(rank), factors))


def _fit(
    target: NDArray, rank: int, init: str | CPTensor, seed: int, options: dict[str, Any]
) -> CPTensor:
    if not np.any(target):
        zeros = [np.zeros((d, rank)) for d in target.shape]
        return CPTensor((np.ones(rank), zeros))
    with warnings.catch_warnings():
        # svd init at a rank above a mode size fills the missing columns at random and says so
        warnings.filterwarnings("ignore", message="Trying to compute SVD", category=UserWarning)
        cp = parafac(target, rank, init=init, random_state=seed, **options)
    weights, factors = cp
    return CPTensor((np.asarray(weights, dtype=np.float64), [np.asarray(f) for f in factors]))


def _best_fit(
    target: NDArray,
    rank: int,
    seeds: NDArray[np.int64],
    previous: CPTensor | None,
    residual: NDArray | None,
    options: dict[str, Any],
    bar: Any,
) -> tuple[float, CPTensor, NDArray]:
    """Return (Frobenius error, fit, residual) of the best of ``len(seeds)`` restarts.

    Restart 0 warm-starts from ``previous`` (with its ``residual``) when given,
    else uses the SVD initialization; the others start at random.
    """
    best: tuple[float, CPTensor, NDArray] | None = None
    for k, seed in enumerate(int(s) for s in seeds):
        if k == 0 and previous is not None and residual is not None:
            init: str | CPTensor = _warm_init(previous, residual, rank, np.random.default_rng(seed))
        else:
            init = "svd" if k == 0 else "random"
        try:
            cp = _fit(target, rank, init, seed, options)
        except np.linalg.LinAlgError:  # a singular ALS system: this restart is lost
            continue
        finally:
            bar.update()
        res = target - np.asarray(cp_to_tensor(cp))
        error = float(np.linalg.norm(res))
        if best is None or error < best[0]:
            best = (error, cp, res)
    if best is None:
        raise RuntimeError(f"Every CP fit at rank {rank} failed (singular ALS systems).")
    return best


def rank_profile(
    tensor: ArrayLike | CPTensor,
    ranks: int | Iterable[int],
    *,
    restarts: int = 3,
    center: bool = False,
    random_state: int | np.random.Generator | None = None,
    progress: bool = False,
    n_iter_max: int = N_ITER_MAX,
    tol: float = TOL,
    linesearch: bool = LINESEARCH,
    warm_start: bool = True,
    blas_threads: int | None = 1,
) -> RankProfile:
    """Fit CP models at each rank and report their errors, including the B_R estimate.

    Per rank, ``restarts`` ALS fits with :func:`tensorly.decomposition.parafac`
    are run and the one with the smallest Frobenius error is kept. Restart 0
    is the warm start (the best fit of the previous profiled rank, weights
    spread over the modes, plus a rank-one term fitted to its residual and
    small random columns for any further rank gap) or, at the first rank or
    with ``warm_start=False``, TensorLy's SVD initialization; the other
    restarts use ``init="random"``. The seeds given to ``parafac`` are drawn
    from ``random_state`` up front, one per (rank, restart), so equal
    ``random_state`` gives an identical profile.

    Parameters
    ----------
    tensor : array_like or CPTensor
        Dense tensor of order >= 2 (a CPTensor is reconstructed if it has at
        most :data:`analysis.spectral.MAX_DENSE_ENTRIES` entries).
    ranks : int or iterable of int
        CP ranks to fit (>= 1); duplicates are dropped and the rows sorted.
    restarts : int, default=3
        Fits per rank (>= 1).
    center : bool, default=False
        Fit the mean-removed tensor and add the mean back (Rozada et al.);
        errors are always measured against ``tensor`` itself.
    random_state : int, numpy.random.Generator or None
        Source of the seeds handed to ``parafac``.
    progress : bool, default=False
        Show a tqdm progress bar over the fits (on stderr).
    n_iter_max : int, default=:data:`N_ITER_MAX`
        ALS iterations per fit.
    tol : float, default=:data:`TOL`
        ALS stopping tolerance on the change of the relative error.
    linesearch : bool, default=:data:`LINESEARCH`
        Use TensorLy's line search in ALS.
    warm_start : bool, default=True
        Start restart 0 of each rank from the previous rank's best fit.
    blas_threads : int or None, default=1
        BLAS threads during the fits (None leaves the setting alone). The
        products here are small; one thread avoids oversubscription, which on a
        busy 2-core machine made each product about ten times slower.

    Returns
    -------
    RankProfile
        Rows per rank with ``rank``, ``rel_error``, ``energy``, ``sup_error``,
        ``mean_abs_error`` and ``n_params``, and the best fits.

    References
    ----------
    TEQL paper, Assumption 1 (B_R, eq. (low_rank_approx)) and Section 2.2
    (parameter count R sum_n d_n); Rozada et al. (2024) for the centred fits.
    """
    dense = _dense(tensor)
    rank_list = _ranks(ranks)
    restarts = check_int("restarts", restarts, 1)
    n_iter_max = check_int("n_iter_max", n_iter_max, 1)
    tol = check_float("tol", tol)
    if blas_threads is not None:
        check_int("blas_threads", blas_threads, 1)
    rng = _generator(random_state)
    seeds = rng.integers(0, 2**31 - 1, size=(len(rank_list), restarts))
    mean = float(dense.mean()) if center else 0.0
    target = dense - mean
    norm = float(np.linalg.norm(dense))
    options = {"n_iter_max": n_iter_max, "tol": tol, "linesearch": bool(linesearch)}
    n_modes_sum = sum(dense.shape)

    from tqdm.auto import tqdm

    bar = tqdm(total=len(rank_list) * restarts, desc="CP fits", disable=not progress)
    rows: list[dict[str, Any]] = []
    fits: list[CPTensor] = []
    previous: CPTensor | None = None
    residual: NDArray | None = None
    with bar, tl.backend_context("numpy"), _blas_threads(blas_threads):
        for i, rank in enumerate(rank_list):
            start = previous if warm_start else None
            error, cp, residual = _best_fit(target, rank, seeds[i], start, residual, options, bar)
            previous = cp
            rel = error / norm if norm > 0 else 0.0
            rows.append(
                {
                    "rank": rank,
                    "rel_error": rel,
                    "energy": 1.0 - rel**2,
                    "sup_error": float(np.max(np.abs(residual))),
                    "mean_abs_error": float(np.mean(np.abs(residual))),
                    "n_params": rank * n_modes_sum + (1 if center else 0),
                }
            )
            fits.append(cp)
    settings = {
        "restarts": restarts,
        "n_iter_max": n_iter_max,
        "tol": tol,
        "linesearch": bool(linesearch),
        "warm_start": bool(warm_start),
    }
    return RankProfile(
        rows=rows,
        shape=tuple(int(d) for d in dense.shape),
        center=bool(center),
        mean=mean,
        norm=norm,
        fits=tuple(fits),
        settings=settings,
    )


def plot_rank_profile(
    profile: RankProfile, path_stem: str | Path, *, title: str | None = None
) -> tuple[Path, Path]:
    """Draw relative error and B_R against rank and against parameter count.

    Parameters
    ----------
    profile : RankProfile
        Output of :func:`rank_profile`.
    path_stem : str or Path
        Output path without suffix; ``.png`` and ``.pdf`` are appended (so a
        stem may contain dots). Missing parent folders are created.
    title : str, optional
        Figure title.

    Returns
    -------
    tuple of Path
        The PNG and the PDF paths.

    References
    ----------
    TEQL paper, Assumption 1 (B_R).
    """
    from matplotlib.figure import Figure  # no pyplot: no global state, Agg canvas

    ranks = profile.column("rank")
    params = profile.column("n_params")
    figure = Figure(figsize=(10, 6.5), layout="constrained")
    axes = figure.subplots(2, 2)
    panels = (
        (("rel_error", "relative Frobenius error"),),
        (("sup_error", "sup-norm error (B_R estimate)"), ("mean_abs_error", "mean |error|")),
    )
    for row_axes, curves in zip(axes, panels, strict=True):
        for axis, x, xlabel in zip(
            row_axes, (ranks, params), ("CP rank R", "parameters R sum d_n"), strict=True
        ):
            for key, label in curves:
                values = profile.column(key)
                axis.plot(x, np.where(values > 0, values, np.nan), marker="o", label=label)
            axis.set_yscale("log")
            axis.set_xlabel(xlabel)
            axis.grid(alpha=0.3, which="both")
            axis.legend(loc="best", fontsize="small")
    axes[0, 0].set_ylabel("||Q - Q_R||_F / ||Q||_F")
    axes[1, 0].set_ylabel("error (units of Q)")
    centred = ", centred" if profile.center else ""
    figure.suptitle(title or f"CP rank profile, shape {profile.shape}{centred}")
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, pdf = Path(f"{stem}.png"), Path(f"{stem}.pdf")
    figure.savefig(png, dpi=120)
    figure.savefig(pdf)
    return png, pdf


if __name__ == "__main__":  # python -m analysis.rank: the command lives in analysis/rank_cli.py
    from analysis.rank_cli import main

    raise SystemExit(main())
