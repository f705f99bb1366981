import numpy as np
import pytest

from rl.runs.config import TrainConfig
from rl.runs.metrics import read_metrics
from rl.runs.training import build, train


def _runner(agent="random", env="cartpole", **fields):
    config = TrainConfig(env=env, agent=agent, out="unused", **fields)
    runner, _ = build(config)
    return runner


def test_every_slot_stays_busy_between_barriers():
    """Lockstep steps = the longest replica's *total* steps, not the sum of per-episode maxima."""
    runner = _runner(seeds=4, eval_every=0)
    calls = []
    act = runner.agent.act

    def counting(states, active, greedy=None):
        calls.append(active.copy())
        return act(states, active, greedy)

    runner.agent.act = counting
    results = list(runner.episodes(0, 6))
    lengths = np.array([r.lengths for r in results])  # (episodes, B)
    assert len(calls) == lengths.sum(axis=0).max()
    assert len(calls) < lengths.max(axis=1).sum()  # what synchronous episodes would take
    busy = np.array(calls).sum(axis=0)
    np.testing.assert_array_equal(busy, lengths.sum(axis=0))


def test_results_do_not_depend_on_barriers():
    """One segment of 6 episodes equals six one-episode segments (checkpoint boundaries)."""
    together = list(_runner(agent="tabular", env="inventory", seeds=3, eval_every=2).episodes(0, 6))
    runner = _runner(agent="tabular", env="inventory", seeds=3, eval_every=2)
    apart = [runner.episode(e) for e in range(1, 7)]
    for a, b in zip(together, apart, strict=True):
        for x, y in zip(a, b, strict=True):
            np.testing.assert_array_equal(x, y)


def test_request_stop_lowers_the_barrier_to_episodes_in_progress():
    runner = _runner(seeds=3, eval_every=0)
    seen = []
    for result in runner.episodes(0, 50):
        seen.append(result.episode)
        if result.episode == 2:
            runner.request_stop()
    assert seen[:2] == [1, 2] and 2 <= seen[-1] < 50


@pytest.mark.parametrize("agent", ["teql-released", "tlr", "dqn"])
def test_a_seed_alone_equals_the_seed_among_seven_others(tmp_path, agent):
    fields = {"env": "cartpole", "agent": agent, "episodes": 6, "eval_every": 3}
    fields["checkpoint_every"] = 4
    train(TrainConfig(out=str(tmp_path / "eight"), seeds=8, seed=0, **fields))
    train(TrainConfig(out=str(tmp_path / "alone"), seeds=1, seed=5, **fields))
    eight = read_metrics(tmp_path / "eight" / "metrics.csv")
    alone = read_metrics(tmp_path / "alone" / "metrics.csv")
    keep = eight["seed"] == 5
    for column in ("episode", "return", "length", "greedy_return"):
        np.testing.assert_array_equal(eight[column][keep], alone[column], err_msg=column)
