"""Calculators for the TEQL paper's theory: V_max, Theorem 1, Propositions 2 and 3.

Pure functions of the constants named in Appendix A of the paper. Each one
states its equation, checks its arguments (a :class:`ValueError` names the
offending argument) and, except for :func:`theorem1_bound`, whose ``noise`` is
a time series, broadcasts over array arguments with NumPy's rules so that a
bound can be evaluated on thousands of recorded updates in one call. A call
whose arguments are all scalars returns a Python float.

Run ``python -m analysis.bounds`` for the command line (``analysis/bounds/cli.py``).
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.signal import lfilter

__all__ = [
    "prop2_bound",
    "prop3_bound",
    "theorem1_bound",
    "theorem1_limit",
    "v_max",
]

FloatOrArray = float | NDArray[np.float64]


def _fail(name: str, requirement: str, got: Any) -> ValueError:
    return ValueError(f"The {name!r} parameter must be {requirement}. Got {got!r} instead.")


def _first_bad(values: NDArray[Any], bad: NDArray[np.bool_]) -> Any:
    """Return the first offending value (a Python scalar) for the error message."""
    return values.reshape(-1)[int(np.argmax(bad.reshape(-1)))].item()


def _real(value: ArrayLike, name: str, requirement: str, *, low: float, strict: bool) -> NDArray:
    """Return ``value`` as a float64 array, checking finite and ``>= low`` (``> low``)."""
    if isinstance(value, (bool, np.bool_)):
        raise _fail(name, requirement, value)
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError):
        raise _fail(name, requirement, value) from None
    if arr.dtype.kind not in "iuf":
        raise _fail(name, requirement, value if arr.ndim == 0 else f"{arr.dtype} array")
    arr = arr.astype(np.float64, copy=False)
    bad = ~np.isfinite(arr) | ((arr <= low) if strict else (arr < low))
    if bad.any():
        raise _fail(name, requirement, _first_bad(arr, bad))
    return arr


def _nonneg(value: ArrayLike, name: str) -> NDArray:
    return _real(value, name, "a finite float >= 0", low=0.0, strict=False)


def _positive(value: ArrayLike, name: str) -> NDArray:
    return _real(value, name, "a finite float > 0", low=0.0, strict=True)


def _count(value: ArrayLike, name: str, minimum: int) -> NDArray:
    """Return an integer argument (or integer array) as float64, checking ``>= minimum``."""
    requirement = f"an int >= {minimum}"
    if isinstance(value, (bool, np.bool_)):
        raise _fail(name, requirement, value)
    if isinstance(value, numbers.Integral):
        arr = np.asarray(int(value))
    else:
        arr = np.asarray(value)
        if arr.dtype.kind not in "iu":
            raise _fail(name, requirement, value if arr.ndim == 0 else f"{arr.dtype} array")
    bad = arr < minimum
    if bad.any():
        raise _fail(name, requirement, _first_bad(arr, bad))
    return arr.astype(np.float64)


def _gamma(value: ArrayLike) -> NDArray:
    requirement = "a float in the open interval (0, 1)"
    arr = _real(value, "gamma", requirement, low=0.0, strict=True)
    bad = arr >= 1.0
    if bad.any():
        raise _fail("gamma", requirement, _first_bad(arr, bad))
    return arr


def _out(result: NDArray) -> FloatOrArray:
    """Return a 0-d result as a Python float, anything else as an array."""
    return float(result) if np.ndim(result) == 0 else np.asarray(result, dtype=np.float64)


def v_max(r_max: ArrayLike, gamma: ArrayLike) -> FloatOrArray:
    """Return the largest value magnitude V_max = R_max / (1 - gamma).

    Parameters
    ----------
    r_max : float or array_like
        Bound on the absolute reward, |r_t| <= R_max; >= 0.
    gamma : float or array_like
        Discount factor in (0, 1).

    Returns
    -------
    float or ndarray
        V_max, broadcast over the arguments.

    References
    ----------
    TEQL paper, Appendix A (notation paragraph) and Assumption 2 (Bounded
    Iterates), which asks ||Q_t||_inf <= V_max.

    Examples
    --------
    >>> round(v_max(73.0, 0.99), 6)  # CartPole's R_max and the paper's gamma
    7300.0
    >>> v_max([1.0, 2.0], 0.5)
    array([2., 4.])
    """
    return _out(_nonneg(r_max, "r_max") / (1.0 - _gamma(gamma)))


def theorem1_bound(
    e0: float, gamma: float, b_r: float, noise: ArrayLike, *, tight: bool = False
) -> NDArray[np.float64]:
    r"""Return the finite-time bound of Theorem 1 at t = 1, ..., T.

    Eq. (A.1)::

        E||Q_t - q*||_inf <= gamma^t e0 + B_R / (1 - gamma)
                             + sum_{k=0}^{t-1} gamma^k eps_{t-1-k}

    with e0 = ||Q_0 - q*||_inf. The noise sum is evaluated by the recursion
    S_t = gamma S_{t-1} + eps_{t-1}, S_0 = 0 (one linear filter, O(T)).

    Parameters
    ----------
    e0 : float
        Initial error ||Q_0 - q*||_inf, >= 0.
    gamma : float
        Discount factor in (0, 1).
    b_r : float
        Approximation error B_R of Assumption 1, >= 0.
    noise : array_like of shape (T,)
        Expected stochastic errors eps_0, ..., eps_{T-1}, each >= 0; T >= 1.
        ``noise[k]`` is the noise of the (k+1)-th update, the one that produces
        Q_{k+1}. (The proof's one-step recursion, eq. (one_step_expected),
        names that term eps_{k+1}, while eq. (A.1) as printed indexes the same
        sum from eps_0: the array is the same under both labels.)
    tight : bool, default=False
        If True, use B_R (1 - gamma^t) / (1 - gamma) for the bias term, the
        sharper geometric sum of eq. (full_expansion) that (A.1) relaxes.

    Returns
    -------
    ndarray of shape (T,)
        The bound at t = 1, ..., T (entry t - 1 holds time t).

    References
    ----------
    TEQL paper, Theorem 1 and its restatement, eq. (A.1); proof in Appendix A.1,
    eqs. (et_recursion), (full_expansion) and (finite_time_bound).
    """
    for name, value in (("e0", e0), ("gamma", gamma), ("b_r", b_r)):
        if np.ndim(value) != 0:
            raise _fail(name, "a scalar", f"an array of shape {np.shape(value)}")
    e0_ = float(_nonneg(e0, "e0"))
    g = float(_gamma(gamma))
    b = float(_nonneg(b_r, "b_r"))
    eps = _nonneg(noise, "noise")
    if eps.ndim != 1 or eps.size == 0:
        raise _fail("noise", "a non-empty 1-D sequence", f"shape {eps.shape}")
    t = np.arange(1, eps.size + 1, dtype=np.float64)
    decay = g**t
    bias = b * (1.0 - decay) / (1.0 - g) if tight else np.full(eps.size, b / (1.0 - g))
    accumulated = lfilter([1.0], [1.0, -g], eps)  # entry t-1 = sum_k gamma^k eps_{t-1-k}
    return decay * e0_ + bias + accumulated


def theorem1_limit(gamma: ArrayLike, b_r: ArrayLike, noise_bar: ArrayLike) -> FloatOrArray:
    """Return the asymptotic radius of Theorem 1, (B_R + eps_bar) / (1 - gamma).

    Eq. (A.2): limsup_t E||Q_t - q*||_inf <= (B_R + eps_bar) / (1 - gamma).

    Parameters
    ----------
    gamma : float or array_like
        Discount factor in (0, 1).
    b_r : float or array_like
        Approximation error B_R of Assumption 1, >= 0.
    noise_bar : float or array_like
        eps_bar = limsup_t eps_t, the asymptotic expected TD-noise level, >= 0.

    Returns
    -------
    float or ndarray
        The radius, broadcast over the arguments.

    References
    ----------
    TEQL paper, Theorem 1, eq. (A.2); proof in Appendix A.1, eq. (stochastic_limsup).
    """
    g = _gamma(gamma)
    return _out((_nonneg(b_r, "b_r") + _nonneg(noise_bar, "noise_bar")) / (1.0 - g))


def prop2_bound(
    step_size: ArrayLike,
    order: ArrayLike,
    rank: ArrayLike,
    f_max: ArrayLike,
    v_max: ArrayLike,
    lam: ArrayLike,
    visits: ArrayLike,
    eps: ArrayLike,
    *,
    inner_steps: ArrayLike = 1,
) -> FloatOrArray:
    """Return Proposition 2's bound on the decomposition error Delta Q_t of one update.

    Eq. (A.3), for one block-coordinate-descent sweep (one gradient step per
    mode)::

        Delta Q_t(s_t, a_t) <= alpha_t 2 N R F_max^{2(N-1)} V_max
                               + alpha_t 2 lam N R F_max^{2(N-1)} V_max / (N_{t-1}(s_t, a_t) + eps)

    Extension to I_max inner steps: the proof bounds the change of the entry
    caused by *one* gradient step on one mode, eq. (delta_n_final), using only
    |F| <= F_max and |Q| <= V_max, which hold at every inner step under the
    proposition's assumptions. Algorithm 1 takes up to I_max steps per mode, so
    the triangle inequality of eq. (total_triangle) runs over at most N I_max
    steps and the bound is I_max times (A.3): pass ``inner_steps=I_max`` (or
    the number of steps actually taken per mode). The bound does not cover the
    authors' released update (a normalized step g / ||g||), only the paper's.

    Parameters
    ----------
    step_size : float or array_like
        Step size alpha_t, >= 0.
    order : int or int array_like
        Tensor order N = D_S + D_A, >= 1.
    rank : int or int array_like
        CP rank R, >= 1.
    f_max : float or array_like
        Bound on the factor entries, |F_n(i, r)| <= F_max, >= 0.
    v_max : float or array_like
        Bound on the iterates, ||Q_t||_inf <= V_max (Assumption 2), >= 0.
    lam : float or array_like
        Regularization strength lambda, >= 0 (0 gives the unregularized TLR update).
    visits : float or array_like
        Visit count N_{t-1}(s_t, a_t) before the update, >= 0.
    eps : float or array_like
        Smoothing constant epsilon, > 0.
    inner_steps : int or int array_like, default=1
        Gradient steps per mode, I_max (1 is eq. (A.3) as printed).

    Returns
    -------
    float or ndarray
        The bound, broadcast over the arguments; ``inf`` where F_max^{2(N-1)}
        overflows.

    References
    ----------
    TEQL paper, Proposition 2 and its restatement, eq. (A.3); proof in
    Appendix A.2, eqs. (delta_n_final) and (total_final).
    """
    alpha = _nonneg(step_size, "step_size")
    n = _count(order, "order", 1)
    r = _count(rank, "rank", 1)
    f = _nonneg(f_max, "f_max")
    v = _nonneg(v_max, "v_max")
    lam_ = _nonneg(lam, "lam")
    visits_ = _nonneg(visits, "visits")
    eps_ = _positive(eps, "eps")
    steps = _count(inner_steps, "inner_steps", 1)
    with np.errstate(over="ignore", invalid="ignore"):
        base = alpha * 2.0 * n * r * f ** (2.0 * (n - 1.0)) * v
        result = steps * (base + base * lam_ / (visits_ + eps_))
    return _out(result)


def prop3_bound(
    t0: ArrayLike, c: ArrayLike, delta: ArrayLike, horizon: ArrayLike, *, tight: bool = False
) -> FloatOrArray:
    """Return Proposition 3's bound on how often EUGE re-selects a suboptimal action.

    Eq. (A.4): if after time t0 the action a at state s stays a margin delta
    below the greedy action and c Delta Q_{t-1}(s, a) <= delta / 4, the number
    of times a is selected at s up to the horizon T is at most::

        t0 + 16 c^2 log(T) / delta^2

    Parameters
    ----------
    t0 : int or int array_like
        Time from which conditions (i) and (ii) hold, >= 1.
    c : float or array_like
        EUGE exploration coefficient c of eq. (euge), > 0.
    delta : float or array_like
        Suboptimality margin delta, > 0.
    horizon : int or int array_like
        Horizon T, >= 1 (natural logarithm).
    tight : bool, default=False
        If True, return t0 + 16 c^2 log(T) / (9 delta^2), eq.
        (count_intermediate), before the proof relaxes 16/9 to 16.

    Returns
    -------
    float or ndarray
        The bound, broadcast over the arguments.

    References
    ----------
    TEQL paper, Proposition 3 and its restatement, eq. (A.4); proof in
    Appendix A.3, eqs. (N_bound), (count_intermediate).
    """
    t0_ = _count(t0, "t0", 1)
    c_ = _positive(c, "c")
    delta_ = _positive(delta, "delta")
    horizon_ = _count(horizon, "horizon", 1)
    constant = 16.0 / 9.0 if tight else 16.0
    return _out(t0_ + constant * c_**2 * np.log(horizon_) / delta_**2)
