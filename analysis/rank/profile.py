"""Rank profile of a Q-tensor: B_R bracketed, and the best CP fits found at each rank.

:func:`rank_profile` fits TensorLy's :func:`~tensorly.decomposition.parafac`
at each requested rank and reports, per rank: the relative Frobenius error and
captured energy ``1 - rel_error**2`` of the Frobenius-best fit found, that
fit's sup-norm error, ``b_r_upper`` (the smallest sup-norm error of any fit
found, after a refinement for the sup norm: an upper estimate of the B_R of
Assumption 1) and ``b_r_lower`` (a certified lower bound on B_R,
:mod:`analysis.rank_bounds`), the mean absolute error and the parameter count.
:func:`plot_rank_profile` draws the errors against rank and parameter count.

**Never worse with more effort.** The candidates at rank R are: ``restarts``
seeded ALS fits, whose seeds depend only on (``random_state``, R, restart
index); and, with ``warm_start``, one more, the *warm chain*: the fit at R
started from the chain's fit at R - 1 plus a rank-one term fitted to its
residual, computed through every rank from 1 (listed or not), so that it too
depends only on (``random_state``, R). The chain's fit is refined for the sup
norm (:func:`analysis.sup_refine.refine_sup`; the SVD-started restart when
there is no chain). ``b_r_upper`` is the least sup error over the candidates,
the refined fit and every lower listed rank (a rank-r fit is a rank-R CP
tensor with zero columns added). More restarts or more ranks therefore add
candidates and never remove one, so ``b_r_upper`` can only fall.

**Exact ranks.** A candidate whose relative error falls below
`POLISH_BELOW` is near an exact decomposition, where TensorLy's stopping test
(on the error computed from norms, which loses half the digits) ends ALS
early; it is polished by `POLISH_ITER` more ALS iterations without that test
or the line search, which reaches machine precision on tensors of exact rank.

Fitting settings (defaults defined once, below), measured on a smooth
synthetic Q-like tensor of CartPole's shape (10, 10, 20, 20, 10). ALS converges
slowly there: the relative error still falls by ~1e-5 per iteration after 100
iterations, so a tolerance that stops early costs accuracy and the budget is
set by ``n_iter_max``. What buys accuracy cheaply is (i) the warm start: it
continues the previous rank's optimisation rather than starting over; it gave
the best fit at almost every rank above 2, and beat a random extra column by
25% in error at rank 10; and (ii) TensorLy's line search, which for about 20%
more CPU time lowered the error by 20% at rank 10 and fourfold at rank 20.

A CP tensor too large to reconstruct (a learned Highway Q) is profiled from its
factors (:mod:`analysis.cp_form`): Frobenius errors and ``b_r_lower`` exist,
sup-norm errors do not (NaN), since no method visits 10^12 entries.
"""

from __future__ import annotations

import csv
import io
import math
import numbers
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import tensorly as tl
from numpy.typing import ArrayLike, NDArray
from tensorly.cp_tensor import CPTensor, cp_to_tensor
from tensorly.decomposition import parafac

from analysis._numpy import numpy_backend
from analysis.rank_bounds import b_r_lower
from analysis.spectral import MAX_DENSE_ENTRIES
from analysis.sup_refine import balanced_factors, refine_sup
from tensorq.validation import as_numpy, check_float, check_int

__all__ = [
    "COLUMNS",
    "LINESEARCH",
    "N_ITER_MAX",
    "POLISH_BELOW",
    "POLISH_ITER",
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

POLISH_BELOW = 1e-4
"""Relative Frobenius error below which a fit is polished (near an exact decomposition)."""

POLISH_ITER = 200
"""ALS iterations of a polish (no stopping test, no line search)."""

COLUMNS = (
    "rank",
    "rel_error",
    "energy",
    "sup_error",
    "b_r_upper",
    "b_r_lower",
    "mean_abs_error",
    "n_params",
)
"""Keys of every row of a :class:`RankProfile`, in CSV column order."""

#: First word of a fit's seed key: the warm chain, or a seeded restart.
_CHAIN, _RESTART = 0, 1


@dataclass(frozen=True, eq=False)
class RankProfile:
    """Result of :func:`rank_profile`.

    Attributes
    ----------
    rows : list of dict
        One row per rank, in increasing rank order, with the keys of
        :data:`COLUMNS`: ``rank``; ``rel_error`` = ||T - T_R||_F / ||T||_F of
        the Frobenius-best fit T_R found; ``energy`` = 1 - rel_error**2;
        ``sup_error`` = max |T - T_R| of that fit; ``b_r_upper`` = the smallest
        max |T - X| of any fit X found, refined for the sup norm (an upper
        estimate of B_R, at most ``sup_error``); ``b_r_lower`` = a certified
        lower bound on B_R (:func:`analysis.rank_bounds.b_r_lower`; of the
        model class rank-R CP plus a constant when ``center``);
        ``mean_abs_error`` = mean |T - T_R|; ``n_params`` = rank * sum(d_n),
        plus 1 for the mean when ``center``. Sup and mean errors are NaN for a
        tensor profiled from its factors.
    shape : tuple of int
        Mode sizes of the tensor.
    center : bool
        Whether the mean was removed before fitting and added back.
    mean : float
        The removed mean (0.0 unless ``center``).
    norm : float
        Frobenius norm of the tensor (the denominator of ``rel_error``).
    fits : tuple of CPTensor
        Frobenius-best fit per row (of the tensor minus ``mean``), NumPy arrays.
    sup_fits : tuple of CPTensor
        The fit behind each row's ``b_r_upper`` (of rank at most the row's;
        empty for a tensor profiled from its factors).
    settings : dict
        The fitting settings used (restarts, n_iter_max, tol, linesearch,
        warm_start, refine, method).
    """

    rows: list[dict[str, Any]]
    shape: tuple[int, ...]
    center: bool
    mean: float
    norm: float
    fits: tuple[CPTensor, ...] = field(repr=False)
    sup_fits: tuple[CPTensor, ...] = field(repr=False, default=())
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

    def approximation(self, rank: int, *, norm: str = "frobenius") -> NDArray[np.float64]:
        """Return the dense fit at ``rank``, with the mean added back.

        Parameters
        ----------
        rank : int
            A profiled rank.
        norm : {"frobenius", "sup"}, default="frobenius"
            The Frobenius-best fit (``fits``) or the fit behind ``b_r_upper``
            (``sup_fits``).
        """
        if norm not in ("frobenius", "sup"):
            raise ValueError(
                f"The 'norm' parameter must be 'frobenius' or 'sup'. Got {norm!r} instead."
            )
        if self.settings.get("method") == "factors":
            raise ValueError(
                f"No dense fit exists for a tensor profiled from its factors (shape {self.shape}); "
                "use the CPTensor in fits."
            )
        fits = self.fits if norm == "frobenius" else self.sup_fits
        with tl.backend_context("numpy"):
            return np.asarray(cp_to_tensor(fits[self._index(rank)])) + self.mean

    def to_csv(self, path: str | Path) -> Path:
        """Write the rows as CSV (header :data:`COLUMNS`) and return the path."""
        path = Path(path)
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=COLUMNS)
            writer.writeheader()
            for row in self.rows:
                writer.writerow({key: repr(row[key]) for key in COLUMNS})
        return path


def _check_tensor(dense: NDArray) -> NDArray[np.float64]:
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


def _entropy(random_state: Any) -> int:
    """Return the integer from which every fit's seed is derived."""
    if random_state is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63 - 1))
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state >= 0:
            return int(random_state)
    raise ValueError(
        "The 'random_state' parameter must be None, an int >= 0 or a numpy.random.Generator. "
        f"Got {random_state!r} instead."
    )


def _seed(entropy: int, *key: int) -> int:
    """Return the seed of one fit: a function of (entropy, key) only."""
    state = np.random.SeedSequence(entropy, spawn_key=key).generate_state(1)[0]
    return int(state) & 0x7FFFFFFF


@contextmanager
def _blas_threads(threads: int | None) -> Iterator[None]:
    if threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=threads, user_api="blas"):
        yield


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


def _warm_init(previous: CPTensor, residual: NDArray, rank: int, seed: int) -> CPTensor:
    """Return a rank-``rank`` start: the previous fit plus residual (and random) columns."""
    factors = balanced_factors(previous)
    extra = rank - previous.rank
    term = _residual_term(residual)
    rms = (float(np.linalg.norm(residual)) / math.sqrt(residual.size) + 1e-300) ** (
        1.0 / residual.ndim
    )
    rng = np.random.default_rng(seed)
    for n, factor in enumerate(factors):
        random_columns = rng.standard_normal((factor.shape[0], extra - 1)) * 0.1 * rms
        factors[n] = np.hstack([factor, term[n], random_columns])
    return CPTensor((np.ones(rank), factors))


class _Fit(NamedTuple):
    """One candidate fit: its Frobenius error, the fit, and its residual."""

    error: float
    cp: CPTensor
    residual: NDArray


def _als(
    target: NDArray, rank: int, init: str | CPTensor, seed: int, options: dict[str, Any]
) -> _Fit | None:
    """Return an ALS fit of ``target`` (polished when near exact), or None if ALS failed."""
    if not np.any(target):
        zeros = [np.zeros((d, rank)) for d in target.shape]
        return _Fit(0.0, CPTensor((np.ones(rank), zeros)), np.zeros_like(target))
    with warnings.catch_warnings():
        # svd init at a rank above a mode size fills the missing columns at random and says so
        warnings.filterwarnings("ignore", message="Trying to compute SVD", category=UserWarning)
        try:
            cp = parafac(target, rank, init=init, random_state=seed, **options)
            residual = target - np.asarray(cp_to_tensor(cp))
            if np.linalg.norm(residual) < POLISH_BELOW * np.linalg.norm(target):
                polish = {**options, "n_iter_max": POLISH_ITER, "tol": 0, "linesearch": False}
                cp = parafac(target, rank, init=cp, random_state=seed, **polish)
                residual = target - np.asarray(cp_to_tensor(cp))
        except np.linalg.LinAlgError:  # a singular ALS system: this candidate is lost
            return None
    weights, factors = cp
    cp = CPTensor((np.asarray(weights, dtype=np.float64), [np.asarray(f) for f in factors]))
    return _Fit(float(np.linalg.norm(residual)), cp, residual)


def _candidates(
    target: NDArray, rank: int, restarts: int, entropy: int, chain: _Fit | None, options: dict
) -> list[_Fit]:
    """Return the seeded restarts at ``rank`` (restart 0 SVD-started, the others random)."""
    fits = [chain] if chain is not None else []
    for k in range(restarts):
        init = "svd" if k == 0 else "random"
        fit = _als(target, rank, init, _seed(entropy, _RESTART, rank, k), options)
        if fit is not None:
            fits.append(fit)
    if not fits:
        raise RuntimeError(f"Every CP fit at rank {rank} failed (singular ALS systems).")
    return fits


def _factor_profile(
    cp: CPTensor,
    ranks: list[int],
    center: bool,
    entropy: int,
    settings: dict[str, Any],
    blas_threads: int | None,
) -> RankProfile:
    """Return the profile of a CP tensor too large to reconstruct (:mod:`analysis.cp_form`)."""
    from analysis import cp_form

    with tl.backend_context("numpy"), _blas_threads(blas_threads):
        cp = CPTensor((np.ones(cp.rank) if cp.weights is None else cp.weights, cp.factors))
        mean = cp_form.mean_of(cp) if center else 0.0
        target = cp_form.minus_constant(cp, mean) if center else cp
        rows, fits = cp_form.factor_profile_rows(
            target,
            ranks,
            restarts=settings["restarts"],
            seed_of=lambda rank, k: _seed(entropy, _RESTART, rank, k),
            n_iter_max=settings["n_iter_max"],
            tol=settings["tol"],
            model_rank=1 if center else 0,
        )
        norm = cp_form.frobenius_norm(cp)
        ratio = cp_form.frobenius_norm(target) / norm if norm > 0 else 0.0
    for row in rows:  # rel_error against the tensor itself, as for a dense input
        row["rel_error"] *= ratio
        row["energy"] = 1.0 - row["rel_error"] ** 2
    return RankProfile(
        rows=rows,
        shape=tuple(int(f.shape[0]) for f in cp.factors),
        center=bool(center),
        mean=mean,
        norm=norm,
        fits=tuple(fits),
        settings={**settings, "method": "factors"},
    )


@numpy_backend
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
    refine: bool = True,
    blas_threads: int | None = 1,
) -> RankProfile:
    """Bracket B_R at each rank: CP fits, their errors, a sup-norm refinement, a lower bound.

    Per rank, the candidates are ``restarts`` ALS fits with
    :func:`tensorly.decomposition.parafac` (restart 0 from TensorLy's SVD
    initialization, the others from ``init="random"``) and, with
    ``warm_start``, the warm chain's fit (see the module docstring). Each
    fit's seed depends only on (``random_state``, rank, restart), so equal
    ``random_state`` gives an identical profile, and more restarts or ranks
    never raise ``b_r_upper``. The Frobenius-best candidate gives
    ``rel_error``, ``energy``, ``sup_error`` and ``mean_abs_error``; the
    least sup error over the candidates, the refined chain fit (with
    ``refine``) and the lower listed ranks gives ``b_r_upper``; singular
    values give ``b_r_lower``.

    Parameters
    ----------
    tensor : array_like or CPTensor
        Dense tensor of order >= 2, or a CP tensor: reconstructed when it has
        at most :data:`analysis.spectral.MAX_DENSE_ENTRIES` entries, profiled
        from its factors otherwise (:func:`analysis.cp_form.factor_profile_rows`).
    ranks : int or iterable of int
        CP ranks to fit (>= 1); duplicates are dropped and the rows sorted.
    restarts : int, default=3
        Seeded fits per rank (>= 1), besides the warm chain's.
    center : bool, default=False
        Fit the mean-removed tensor and add the mean back (Rozada et al.);
        errors are always measured against ``tensor`` itself.
    random_state : int, numpy.random.Generator or None
        Source of every fit's seed (a Generator is drawn from once).
    progress : bool, default=False
        Show a tqdm progress bar over the ranks (on stderr).
    n_iter_max : int, default=:data:`N_ITER_MAX`
        ALS iterations per fit.
    tol : float, default=:data:`TOL`
        ALS stopping tolerance on the change of the relative error.
    linesearch : bool, default=:data:`LINESEARCH`
        Use TensorLy's line search in ALS.
    warm_start : bool, default=True
        Add the warm chain's fit to the candidates (it is fitted at every rank
        from 1 to the largest listed).
    refine : bool, default=True
        Refine the chain's fit (or restart 0's, without a chain) for the sup
        norm with :func:`analysis.sup_refine.refine_sup`.
    blas_threads : int or None, default=1
        BLAS threads during the fits (None leaves the setting alone). The
        products here are small; one thread avoids oversubscription, which on a
        busy 2-core machine made each product about ten times slower.

    Returns
    -------
    RankProfile
        Rows per rank with the keys of :data:`COLUMNS`, and the fits (CP
        tensors of float64 NumPy arrays, whatever TensorLy's global backend is).

    References
    ----------
    TEQL paper, Assumption 1 (B_R, eq. (low_rank_approx)) and Section 2.2
    (parameter count R sum_n d_n); Rozada et al. (2024) for the centred fits.
    """
    rank_list = _ranks(ranks)
    restarts = check_int("restarts", restarts, 1)
    n_iter_max = check_int("n_iter_max", n_iter_max, 1)
    tol = check_float("tol", tol)
    if blas_threads is not None:
        check_int("blas_threads", blas_threads, 1)
    entropy = _entropy(random_state)
    settings = {
        "restarts": restarts,
        "n_iter_max": n_iter_max,
        "tol": tol,
        "linesearch": bool(linesearch),
        "warm_start": bool(warm_start),
        "refine": bool(refine),
    }
    if isinstance(tensor, CPTensor):
        cp = CPTensor((as_numpy(tensor[0]), [as_numpy(f) for f in tensor[1]]))
        if math.prod(int(f.shape[0]) for f in cp.factors) > MAX_DENSE_ENTRIES:
            return _factor_profile(cp, rank_list, center, entropy, settings, blas_threads)
        with tl.backend_context("numpy"):
            tensor = cp_to_tensor(cp)
    dense = _check_tensor(as_numpy(tensor))
    mean = float(dense.mean()) if center else 0.0
    target = dense - mean
    norm = float(np.linalg.norm(dense))
    options = {"n_iter_max": n_iter_max, "tol": tol, "linesearch": bool(linesearch)}
    model_rank = 1 if center else 0  # the constant of a centred fit is one more CP term
    lower = b_r_lower(dense, [rank + model_rank for rank in rank_list])

    from tqdm.auto import tqdm

    bar = tqdm(total=rank_list[-1], desc="CP ranks", disable=not progress)
    rows: list[dict[str, Any]] = []
    fits: list[CPTensor] = []
    sup_fits: list[CPTensor] = []
    chain: _Fit | None = None
    best_upper = (math.inf, None)  # over lower listed ranks: a rank-r fit has rank <= R
    with bar, tl.backend_context("numpy"), _blas_threads(blas_threads):
        for rank in range(1, rank_list[-1] + 1):
            if warm_start:
                init = "svd" if chain is None else _warm_init(
                    chain.cp, chain.residual, rank, _seed(entropy, _CHAIN, rank)
                )  # fmt: skip
                chain = _als(target, rank, init, _seed(entropy, _CHAIN, rank), options) or chain
            bar.update()
            if rank not in rank_list:
                continue
            candidates = _candidates(target, rank, restarts, entropy, chain, options)
            best = min(candidates, key=lambda fit: fit.error)
            uppers = [(float(np.max(np.abs(fit.residual))), fit.cp) for fit in candidates]
            if refine and candidates[0].error >= POLISH_BELOW * np.linalg.norm(target):
                uppers.append(refine_sup(target, candidates[0].cp))  # an exact fit needs none
            best_upper = min([best_upper, *uppers], key=lambda pair: pair[0])
            rel = best.error / norm if norm > 0 else 0.0
            rows.append(
                {
                    "rank": rank,
                    "rel_error": rel,
                    "energy": 1.0 - rel**2,
                    "sup_error": float(np.max(np.abs(best.residual))),
                    "b_r_upper": best_upper[0],
                    "b_r_lower": lower[len(rows)].sup,
                    "mean_abs_error": float(np.mean(np.abs(best.residual))),
                    "n_params": rank * sum(dense.shape) + model_rank,
                }
            )
            fits.append(best.cp)
            sup_fits.append(best_upper[1])
    return RankProfile(
        rows=rows,
        shape=tuple(int(d) for d in dense.shape),
        center=bool(center),
        mean=mean,
        norm=norm,
        fits=tuple(fits),
        sup_fits=tuple(sup_fits),
        settings={**settings, "method": "dense"},
    )


def plot_rank_profile(
    profile: RankProfile, path_stem: str | Path, *, title: str | None = None
) -> tuple[Path, Path]:
    """Draw relative error and the bracket of B_R against rank and against parameter count.

    Parameters
    ----------
    profile : RankProfile
        Output of :func:`rank_profile`.
    path_stem : str or Path
        Output path without suffix; ``.png`` and ``.pdf`` are appended (so a
        stem may contain dots). Missing parent folders are created; each file is
        replaced atomically, never written through a link.
    title : str, optional
        Figure title.

    Returns
    -------
    tuple of Path
        The PNG and the PDF paths.

    Raises
    ------
    rl.runs.rundir.RunDirError
        If a file at one of the paths is a symbolic link or not a regular file.

    References
    ----------
    TEQL paper, Assumption 1 (B_R).
    """
    from matplotlib.figure import Figure  # no pyplot: no global state, Agg canvas

    from rl.runs.rundir import atomic_write_bytes

    ranks = profile.column("rank")
    params = profile.column("n_params")
    figure = Figure(figsize=(10, 6.5), layout="constrained")
    axes = figure.subplots(2, 2)
    panels = (
        (("rel_error", "relative Frobenius error"),),
        (
            ("b_r_upper", "B_R upper (best sup error found)"),
            ("sup_error", "sup error of the Frobenius-best fit"),
            ("b_r_lower", "B_R lower (certified)"),
            ("mean_abs_error", "mean |error|"),
        ),
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
    for path in (png, pdf):
        image = io.BytesIO()
        figure.savefig(image, dpi=120, format=path.suffix[1:])
        atomic_write_bytes(path, image.getvalue())  # never through a link, permissions by umask
    return png, pdf
