"""Parameter counts of the paper's models and a matcher of widths to a budget.

The formulas of the TEQL paper's Appendix "Parameter Matching Methodology":
P_CP = R sum_n d_n (TEQL, TLR), P_DQN = d_in h + h + h d_out + d_out,
P_SAC = 3 P_network + 1 and P_CUR = K (|S| + |A| - K), and the matcher that
picks the width (or K) whose count is nearest a budget. `rl.agents.readings` computes
the paper's budgets and matched widths with them, `rl.agents.deep._torch_utils`
counts the networks' parameters with them, and `analysis.params` prints the
appendix's table from them. Pure Python: no NumPy, no PyTorch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


def cp_params(rank: int, dims: Sequence[int]) -> int:
    """Return P_CP = R * sum(d_n), the size of a rank-R CP model of a d_1 x ... x d_N tensor.

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", P_CP.
    """
    return int(rank) * sum(int(d) for d in dims)


def mlp_params(d_in: int, hidden: int | Sequence[int], d_out: int) -> int:
    """Return the weights and biases of a fully connected network.

    With one hidden layer of width h this is P_DQN = d_in h + h + h d_out + d_out;
    ``hidden`` may also be a sequence of widths (one per hidden layer, possibly
    empty for a linear map).

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", P_DQN.
    """
    widths = [int(hidden)] if isinstance(hidden, int) else [int(h) for h in hidden]
    layers = [int(d_in), *widths, int(d_out)]
    return sum(a * b + b for a, b in zip(layers[:-1], layers[1:], strict=False))


def sac_params(d_in: int, hidden: int | Sequence[int], d_out: int) -> int:
    """Return P_SAC = 3 P_network + 1: actor, two critics of the same shape, one temperature.

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", P_SAC.
    """
    return 3 * mlp_params(d_in, hidden, d_out) + 1


def cur_params(k: int, n_states: int, n_actions: int) -> int:
    """Return P_CUR = K (|S| + |A| - K), the distinct entries of a K-anchor CUR skeleton.

    The formula is evaluated as written, also for K > min(|S|, |A|) (which no
    skeleton can realise); the appendix does so for Highway (K = 20, |A| = 5).

    References
    ----------
    TEQL paper, Appendix "Parameter Matching Methodology", P_CUR.
    """
    return int(k) * (int(n_states) + int(n_actions) - int(k))


def match_width(
    budget: int,
    param_fn: Callable[[int], int],
    *,
    min_width: int = 1,
    max_width: int = 1_000_000,
) -> int:
    """Return the width whose parameter count is nearest ``budget`` (ties: the smaller width).

    Parameters
    ----------
    budget : int
        Target number of parameters.
    param_fn : callable
        Width -> parameter count; must be non-decreasing in the width (true of
        `mlp_params` and `sac_params` in the hidden width).
    min_width, max_width : int
        Search range.

    Examples
    --------
    >>> match_width(700, lambda h: mlp_params(4, h, 10))
    46
    """
    if budget < 1:
        raise ValueError(f"The 'budget' parameter must be an int >= 1. Got {budget!r} instead.")
    low, high = int(min_width), int(max_width)
    if param_fn(high) < budget:
        return high
    while low < high:  # first width whose count reaches the budget
        mid = (low + high) // 2
        if param_fn(mid) >= budget:
            high = mid
        else:
            low = mid + 1
    if low > min_width and budget - param_fn(low - 1) <= param_fn(low) - budget:
        return low - 1
    return low


def match_cur_k(budget: int, n_states: int, n_actions: int) -> int:
    """Return the anchor count K in [1, min(|S|, |A|)] whose P_CUR is nearest ``budget``.

    Ties go to the smaller K. Note that for CartPole (|S| = 81, |A| = 10,
    budget 700) this gives K = 8 (664), not the appendix's K = 9 (738).
    """
    if budget < 1:
        raise ValueError(f"The 'budget' parameter must be an int >= 1. Got {budget!r} instead.")
    candidates = range(1, min(int(n_states), int(n_actions)) + 1)
    return min(candidates, key=lambda k: (abs(cur_params(k, n_states, n_actions) - budget), k))
