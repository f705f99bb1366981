"""Pure functions of one CP entry: value, frequency-regularized loss, gradients.

An entry of a rank-R CP tensor is determined by the N factor rows it touches,
``rows[n] = F_n(i_n, :)``. The functions below take those rows (each of shape
``(..., R)``, the leading axes usually being replicas) and per-entry scalars
(``target``, ``visits``), and use only arithmetic operators, so they work on
NumPy arrays and PyTorch tensors alike.

Notation, mapping code to the paper: ``rows[n]`` is F_n(i_n, :), ``entry`` is
Q_t(s_t, a_t), ``target`` is q^target_t(s_t, a_t), ``visits`` is
N_{t-1}(s_t, a_t), ``lam`` is lambda and ``eps`` is epsilon.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensorq._backend import component_sum, divide

Array = Any


def cp_entry(rows: Sequence[Array]) -> Array:
    """Return the CP entry sum_r prod_n F_n(i_n, r).

    Parameters
    ----------
    rows : sequence of N arrays of shape (..., R)
        The factor rows F_n(i_n, :) of the entry.

    Returns
    -------
    array of shape (...)
        The entry.

    References
    ----------
    Section "Low-Rank Tensor Q-Function Update", the CP representation of Q_t.
    """
    product = rows[0]
    for row in rows[1:]:
        product = product * row
    return component_sum(product)


def other_modes_product(rows: Sequence[Array], mode: int) -> Array:
    """Return prod_{m != mode} F_m(i_m, :), elementwise over the rank.

    Parameters
    ----------
    rows : sequence of N arrays of shape (..., R)
        The factor rows of the entry.
    mode : int
        The mode left out.

    Returns
    -------
    array of shape (..., R)
        The derivative of the entry with respect to ``rows[mode]``; an array
        of ones when N = 1.

    References
    ----------
    eq. (gradient): the factor multiplying the scalar derivative.
    """
    product = None
    for m, row in enumerate(rows):
        if m != mode:
            product = row if product is None else product * row
    return rows[mode] * 0 + 1 if product is None else product


def frequency_weight(visits: Array, lam: float, eps: float) -> Array:
    """Return the regularization weight lambda / (N_{t-1} + epsilon).

    Parameters
    ----------
    visits : float or array
        Visit count N_{t-1}(s_t, a_t) of the entry *before* the current visit.
    lam : float or array
        Regularization strength lambda (an array: one per replica, `tensorq._backend.divide`).
    eps : float or array
        Smoothing constant epsilon > 0.

    Returns
    -------
    float or array
        The weight.

    References
    ----------
    eq. (loss_function).
    """
    return divide(lam, visits + eps)


def loss(entry: Array, target: Array, visits: Array, lam: float, eps: float) -> Array:
    """Return the frequency-regularized per-sample loss.

    L = 1/2 (q^target - Q)^2 - lambda Q^2 / (N_{t-1} + epsilon).

    Parameters
    ----------
    entry : float or array
        Current entry Q_t(s_t, a_t).
    target : float or array
        Target q^target_t(s_t, a_t), a constant during the update.
    visits : float or array
        Visit count N_{t-1}(s_t, a_t) before the current visit.
    lam : float
        Regularization strength lambda.
    eps : float
        Smoothing constant epsilon > 0.

    Returns
    -------
    float or array
        The loss.

    References
    ----------
    eq. (loss_function).
    """
    residual = target - entry
    return 0.5 * residual * residual - frequency_weight(visits, lam, eps) * entry * entry


def entry_derivative(entry: Array, target: Array, weight: Array) -> Array:
    """Return dL/dQ = -(q^target - Q) - 2 w Q, with w = lambda / (N_{t-1} + epsilon).

    Parameters
    ----------
    entry : float or array
        Current entry Q_t(s_t, a_t).
    target : float or array
        Target q^target_t(s_t, a_t).
    weight : float or array
        ``frequency_weight(visits, lam, eps)``.

    Returns
    -------
    float or array
        The derivative of eq. (loss_function) with respect to the entry.

    References
    ----------
    The derivative displayed after eq. (loss_function); the scalar factor of
    eq. (gradient).
    """
    return (entry - target) - 2.0 * weight * entry


def loss_gradient(
    rows: Sequence[Array],
    target: Array,
    visits: Array,
    lam: float,
    eps: float,
    mode: int | None = None,
) -> Array | list[Array]:
    """Return the gradient of the loss with respect to factor rows.

    grad_{F_n(i_n, :)} L = [-(q^target - Q) - 2 lambda Q / (N_{t-1} + epsilon)]
    * prod_{m != n} F_m(i_m, :).

    Parameters
    ----------
    rows : sequence of N arrays of shape (..., R)
        The factor rows F_n(i_n, :) of the entry.
    target : float or array of shape (...)
        Target q^target_t(s_t, a_t).
    visits : float or array of shape (...)
        Visit count N_{t-1}(s_t, a_t) before the current visit.
    lam : float
        Regularization strength lambda.
    eps : float
        Smoothing constant epsilon > 0.
    mode : int, optional
        Return only the gradient with respect to ``rows[mode]``.

    Returns
    -------
    array of shape (..., R) or list of N such arrays
        The gradient for ``mode``, or for every mode when ``mode`` is None.

    References
    ----------
    eq. (gradient), eq. (loss_function).
    """
    scalar = entry_derivative(cp_entry(rows), target, frequency_weight(visits, lam, eps))
    modes = range(len(rows)) if mode is None else [mode]
    grads = [scalar[..., None] * other_modes_product(rows, n) for n in modes]
    return grads if mode is None else grads[0]


def released_entry_derivative(entry: Array, target: Array, weight: Array) -> Array:
    """Return the scalar step coefficient of the authors' released update.

    -(q^target - Q) - w with w = lambda / (N + epsilon): the regularizer enters
    as a constant lambda / (N + epsilon), not as 2 lambda Q / (N + epsilon).

    Parameters
    ----------
    entry : float or array
        Current entry Q.
    target : float or array
        Target q^target.
    weight : float or array
        ``frequency_weight(visits, lam, eps)``; the released agent counts the
        current visit in ``visits``.

    Returns
    -------
    float or array
        The coefficient multiplying the normalized direction g / ||g||.

    References
    ----------
    Algorithm 1 and eq. (gradient), as modified by the authors' released code
    (see ``docs/tensorq.md``).
    """
    return (entry - target) - weight
