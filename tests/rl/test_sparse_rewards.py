"""TEQL's default reading on a sparse goal: the slippery 10 x 10 GoalGrid.

docs/readings.md ("Sparse rewards") has the diagnosis and the full runs these
short ones are cut from.
"""

import numpy as np

from rl.evaluate import evaluate
from rl.runs.config import TrainConfig, resolve_settings
from rl.runs.load import load_run
from rl.runs.training import train


def test_the_default_reading_counts_the_bonus_in_reward_sizes_not_in_the_goal_reward():
    settings = resolve_settings(TrainConfig(env="goalgrid", agent="teql", out="-"))
    assert settings.config.reading == "stable" and settings.problem.reward_bound == 10.0
    assert settings.problem.reward_size == 0.1  # the step cost, declared
    assert settings.agent.bonus_unit == 0.2 and settings.agent.c == 1.0


def test_the_default_reading_finds_the_goal_in_150_episodes(tmp_path):
    """Seeds 0-3, 150 episodes, 20 greedy episodes per seed: mean greedy return >= 6.

    Measured 7.97, 7.97, 7.96, 7.97 (the optimum's expected return is about 8.1).
    A policy that never reaches the goal scores -20 (the 200-step cap), random play
    -16.2 (it reaches the goal in 22% of its episodes); with EUGE's count bonus in
    units of the reward bound (u = 10) every seed scores -20 here.
    """
    out = tmp_path / "run"
    config = TrainConfig(env="goalgrid", agent="teql", out=str(out), seeds=4, episodes=150,
                         eval_every=0, checkpoint_every=150)  # fmt: skip
    train(config)
    run = load_run(out)
    greedy = [evaluate(run, episodes=20, replica=i).summary.mean for i in range(4)]
    assert np.mean(greedy) >= 6.0, greedy
