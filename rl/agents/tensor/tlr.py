"""Tensor low-rank Q-learning (TLR) of Rozada, Paternain and Marques (2024).

The baseline that TEQL extends: the same CP Q-tensor, epsilon-greedy
exploration with a per-step multiplicative decay, and per transition one
normalized-gradient step on every touched factor row, with the TD error
computed once: F_n(i_n, :) += alpha (target - Q) g_n / ||g_n||, g_n the product
of the other modes' pre-update rows, so that every row moves at once (Jacobi, as
in the released code; `tensorq.normalized_step`). No regularization, no inner
loop, a constant step size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from rl.agents.registry import AgentSpec
from rl.agents.tensor.agent import TensorAgent, TensorAgentConfig
from rl.agents.tensor.state import StepRule
from rl.validation import check_real


@dataclass(frozen=True)
class TLRConfig(TensorAgentConfig):
    """Hyperparameters of TLR; defaults are the released CartPole settings.

    Runs through a reading (``python -m rl.train``, `rl.learners`) on a problem without a
    column in the paper's table get tabular Q-learning's discount and epsilon schedule
    instead (`rl.agents.readings.TLR_ELSEWHERE`).
    """

    gamma: float = 0.9
    """Discount factor (the released runs used 0.9, 0.8 on Highway)."""
    alpha: float = 0.005
    """Constant step size of the normalized gradient step."""
    epsilon_start: float = 0.4
    """Initial exploration probability."""
    epsilon_decay: float = 0.999999
    """Multiplicative decay of epsilon after every non-terminal training step."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_real("alpha", self.alpha, 0.0, math.inf, low_open=True)


class TLRAgent(TensorAgent):
    """TLR agent holding B independent replicas.

    Parameters
    ----------
    problem : rl.problems.Problem
    config : TLRConfig
    streams : sequence of rl.seeding.AgentRandom
        One per replica.
    replica_settings : mapping of str to sequence, optional
        B values for fields of ``per_replica`` (`rl.agents.tensor.agent.TensorAgent`):
        alpha, gamma, the epsilon schedule and rank.

    References
    ----------
    S. Rozada, S. Paternain and A. G. Marques, "Tensor and matrix low-rank
    value-function approximation in reinforcement learning", IEEE TSP, 2024.
    """

    config: TLRConfig
    numbers: ClassVar[dict[str, str]] = {**TensorAgent.numbers, "alpha": "alpha0"}
    per_replica: ClassVar[frozenset[str]] = frozenset({*numbers, "epsilon_start", "rank"})

    def own_rule(self) -> StepRule:
        """Epsilon-greedy on Q and one normalized step with the constant step size alpha."""
        return StepRule(exploration="epsilon", update="normalized", alpha0=self.config.alpha)


SPEC = AgentSpec("tlr", TLRAgent, TLRConfig)
"""What the runner needs of TLR; its readings are `rl.agents.readings.READINGS["tlr"]`."""
