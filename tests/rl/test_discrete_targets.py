"""Issue 28: TEQL on Gymnasium's one-mode discrete problems (Taxi, CliffWalking).

`analysis.teql_dynamics` trains one replica and measures the Q-matrix
Q = S A^T; docs/agents.md ("Where tabular Q-learning learns") has the full
runs these short ones are cut from.
"""

import numpy as np
import pytest

from analysis.teql_dynamics import run
from rl.agents.teql import TEQLAgent, TEQLConfig
from rl.problems import make_problem
from rl.runs.config import TrainConfig
from rl.seeding import spawn_replicas


def test_taxi_action_rows_collapse_with_equal_mode_steps():
    """The diagnosis on Taxi: with every mode's step equal the action rows become collinear.

    After 60 episodes the stable reading's six action rows point the same way
    (smallest cosine > 0.99) and Q is numerically rank 1 (second singular value
    under 1% of the first), so every state ranks the actions alike (docs/agents.md,
    "Where tabular Q-learning learns").
    """
    plain = run("Taxi-v4", "teql", {}, episodes=60, every=60, eval_episodes=1)[-1]
    assert plain["min_cos"] > 0.99
    assert plain["sv"][0] < 0.01


def test_teql_defaults_to_the_stable_reading_where_the_paper_gives_no_settings():
    def chosen(env, agent, **extra):
        return TrainConfig(env=env, agent=agent, out="-", **extra).reading

    assert chosen("Taxi-v4", "teql") == "stable"
    assert chosen("inventory", "teql") == "stable"
    assert chosen("cartpole", "teql") == "paper"  # the paper's problems keep the text
    assert chosen("Taxi-v4", "teql", reading="paper") == "paper"
    assert chosen("Taxi-v4", "teql-released") == "released"
    assert chosen("Taxi-v4", "tlr") == "paper"


def test_more_parameters_than_a_table_warns_and_suggests_factoring():
    problem = make_problem("Taxi-v4")
    streams = [s.agent for s in spawn_replicas([0])]
    with pytest.warns(UserWarning, match=r"5060 parameters .* table of Q \(3000\).*factor"):
        agent = TEQLAgent(problem, TEQLConfig(), streams)
    assert agent.n_params == 5060 and np.prod(problem.shape) == 3000
