"""A multi-location inventory problem with a shared seasonal demand factor and an exact model.

State ``(z, l_1, ..., l_k)``: the season ``z`` in ``0..n_seasons-1`` and the
stock level ``l_j`` in ``0..max_level`` of each of ``k`` stocking locations.
Action ``(a_1, ..., a_k)``: the order quantity ``a_j`` in ``0..max_order`` of
each location, so the action has D_A = k components. One period:

1. Orders arrive at once: ``y_j = min(max_level, l_j + a_j)`` (stock beyond
   capacity is lost but paid for).
2. Demand ``d_j`` is drawn independently per location from a Poisson law with
   mean ``demand_means[z] * location_scales[j]`` truncated at ``max_demand``
   (the tail mass is put on ``max_demand``). The season couples the locations.
3. Sales ``min(y_j, d_j)``; unmet demand is lost: ``l'_j = y_j - min(y_j, d_j)``.
4. The season moves on: stays with probability ``season_stay``, otherwise moves
   to one of the other seasons uniformly.
5. Reward ``-sum_j [order_cost a_j + fixed_order_cost 1{a_j > 0}
   + holding_cost l'_j + lost_sale_cost (d_j - min(y_j, d_j))]``.

The problem never terminates; episodes are truncated (100 steps when made
with ``gymnasium.make("rl/Inventory-v0")``). The first state is uniform over
all states.

References
----------
.. [1] A. J. Clark, H. Scarf, "Optimal policies for a multi-echelon inventory
   problem", Management Science 6(4), 1960.
.. [2] W. B. Powell, "Approximate Dynamic Programming", 2nd ed., Wiley, 2011
   (inventory models with exogenous information).
"""

from __future__ import annotations

import math
import string
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from rl.envs.factored import FactoredMDP, sample_categorical
from rl.validation import MAX_BINS, check_int, check_real

MAX_LOCATIONS = 16
"""Largest number of locations (the exact model's einsum needs 3 letters per location)."""

MAX_SEASONS = 100
"""Largest number of demand regimes."""


def truncated_poisson(mean: float, max_value: int) -> NDArray[np.float64]:
    """Poisson(mean) probabilities of 0..max_value, the tail folded onto max_value."""
    pmf = np.zeros(max_value + 1)
    if mean == 0:
        pmf[0] = 1.0
        return pmf
    for k in range(max_value):
        pmf[k] = math.exp(k * math.log(mean) - mean - math.lgamma(k + 1))
    pmf[max_value] = max(0.0, 1.0 - pmf[:max_value].sum())
    return pmf / pmf.sum()


class Inventory(FactoredMDP):
    """k stocking locations with a shared seasonal demand factor (exact model).

    Parameters
    ----------
    n_locations : int, default 2
        Number of locations k (= number of action components).
    max_level : int, default 4
        Capacity L of each location; levels are 0..L.
    max_order : int, default 2
        Largest order quantity per location per period.
    max_demand : int, default 3
        Demand is truncated at this value.
    n_seasons : int, default 2
        Number of demand regimes (the first state component).
    demand_means : sequence of float, default (0.5, 1.5)
        Mean demand per location in each season (length ``n_seasons``).
    location_scales : sequence of float, optional
        Per-location multiplier of the mean (default all ones).
    season_stay : float, default 0.8
        Probability that the season does not change.
    order_cost, fixed_order_cost, holding_cost, lost_sale_cost : float
        Cost per unit ordered (1.0), per location that orders (0.5), per unit
        left in stock (0.2) and per unit of unmet demand (3.0).
    gamma : float, default 0.9
        Default discount factor.

    Attributes
    ----------
    reward_bound : float
        ``k (order_cost max_order + fixed_order_cost + holding_cost max_level
        + lost_sale_cost max_demand)``, the largest possible one-period cost.
    """

    def __init__(
        self,
        n_locations: int = 2,
        max_level: int = 4,
        max_order: int = 2,
        max_demand: int = 3,
        n_seasons: int = 2,
        demand_means: Sequence[float] = (0.5, 1.5),
        location_scales: Sequence[float] | None = None,
        season_stay: float = 0.8,
        order_cost: float = 1.0,
        fixed_order_cost: float = 0.5,
        holding_cost: float = 0.2,
        lost_sale_cost: float = 3.0,
        gamma: float = 0.9,
    ) -> None:
        k = check_int("n_locations", n_locations, 1, MAX_LOCATIONS)
        self.n_locations = k
        self.max_level = check_int("max_level", max_level, 1, MAX_BINS)
        self.max_order = check_int("max_order", max_order, 1, MAX_BINS)
        self.max_demand = check_int("max_demand", max_demand, 0, MAX_BINS)
        self.n_seasons = check_int("n_seasons", n_seasons, 1, MAX_SEASONS)
        means = np.asarray(demand_means, dtype=np.float64)
        if means.shape != (self.n_seasons,) or not np.all((means >= 0) & (means < np.inf)):
            raise ValueError(
                f"The 'demand_means' parameter must hold {self.n_seasons} finite floats >= 0. "
                f"Got {demand_means!r} instead."
            )
        scales = np.ones(k) if location_scales is None else np.asarray(location_scales, float)
        if scales.shape != (k,) or not np.all((scales >= 0) & (scales < np.inf)):
            raise ValueError(
                f"The 'location_scales' parameter must hold {k} finite floats >= 0. "
                f"Got {location_scales!r} instead."
            )
        self.season_stay = check_real("season_stay", season_stay, 0.0, 1.0)
        self.demand_means = tuple(means.tolist())
        self.location_scales = tuple(scales.tolist())
        self.order_cost = check_real("order_cost", order_cost, 0.0)
        self.fixed_order_cost = check_real("fixed_order_cost", fixed_order_cost, 0.0)
        self.holding_cost = check_real("holding_cost", holding_cost, 0.0)
        self.lost_sale_cost = check_real("lost_sale_cost", lost_sale_cost, 0.0)
        super().__init__(
            (self.n_seasons,) + (self.max_level + 1,) * k, (self.max_order + 1,) * k, gamma
        )
        # demand_pmf[z, j, d] and the season chain season_matrix[z, z'].
        self.demand_pmf = np.stack(
            [[truncated_poisson(m * s, self.max_demand) for s in scales] for m in means]
        )
        z = self.n_seasons
        move = (1.0 - self.season_stay) / (z - 1) if z > 1 else 0.0
        self.season_matrix = np.full((z, z), move) + np.eye(z) * (
            self.season_stay - move if z > 1 else 1.0
        )
        self._demand_cdf = np.cumsum(self.demand_pmf, axis=-1)
        self._season_cdf = np.cumsum(self.season_matrix, axis=-1)
        self.reward_bound = k * (
            self.order_cost * self.max_order
            + self.fixed_order_cost
            + self.holding_cost * self.max_level
            + self.lost_sale_cost * self.max_demand
        )

    @property
    def initial_distribution(self) -> NDArray[np.float64]:
        """Uniform over all states."""
        return np.full(self.state_dims, 1.0 / math.prod(self.state_dims))

    def _location_cost(
        self, action: NDArray, stock: NDArray, demand: NDArray
    ) -> tuple[NDArray, NDArray]:
        """Per-location (next level, cost) for broadcastable arrays of a, y and d."""
        sales = np.minimum(stock, demand)
        left = stock - sales
        cost = (
            self.order_cost * action
            + self.fixed_order_cost * (action > 0)
            + self.holding_cost * left
            + self.lost_sale_cost * (demand - sales)
        )
        return left, cost

    def _sample(
        self, state: NDArray[np.int64], action: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], float]:
        season, levels = int(state[0]), state[1:]
        u = self.np_random.random(self.n_locations + 1)
        demand = sample_categorical(self._demand_cdf[season], u[:-1])
        stock = np.minimum(self.max_level, levels + action)
        left, cost = self._location_cost(action, stock, demand)
        next_season = int(sample_categorical(self._season_cdf[season], u[-1]))
        next_state = np.concatenate([[next_season], left]).astype(np.int64)
        return next_state, -float(cost.sum())

    def _location_model(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """Per location j: T[j, z, l, a, l'] and expected cost C[j, z, l, a]."""
        levels = np.arange(self.max_level + 1)[:, None, None]
        orders = np.arange(self.max_order + 1)[None, :, None]
        demand = np.arange(self.max_demand + 1)[None, None, :]
        stock = np.minimum(self.max_level, levels + orders)
        left, cost = self._location_cost(orders, stock, demand)  # (L+1, M+1, D+1)
        onehot = (left[..., None] == np.arange(self.max_level + 1)).astype(np.float64)
        trans = np.einsum("zjd,lado->jzlao", self.demand_pmf, onehot)
        expected_cost = np.einsum("zjd,lad->jzla", self.demand_pmf, cost)
        return trans, expected_cost

    def _build_model(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        trans, expected_cost = self._location_model()
        k = self.n_locations
        letters = iter(string.ascii_letters)
        z, z2 = next(letters), next(letters)
        lv = [next(letters) for _ in range(k)]
        ac = [next(letters) for _ in range(k)]
        nx = [next(letters) for _ in range(k)]
        operands = [f"{z}{z2}"] + [f"{z}{lv[j]}{ac[j]}{nx[j]}" for j in range(k)]
        out = z + "".join(lv) + "".join(ac) + z2 + "".join(nx)
        transition = np.einsum(
            ",".join(operands) + "->" + out, self.season_matrix, *[trans[j] for j in range(k)]
        )
        reward = np.zeros(self.state_dims + self.action_dims)
        for j in range(k):
            shape = [1] * (1 + 2 * k)
            shape[0], shape[1 + j], shape[1 + k + j] = (
                self.n_seasons,
                self.max_level + 1,
                self.max_order + 1,
            )
            reward = reward - expected_cost[j].reshape(shape)
        return transition, reward
