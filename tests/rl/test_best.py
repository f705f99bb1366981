"""``keep_best``: each replica's state after its best evaluation, kept in the checkpoint."""

import dataclasses
import math
import subprocess
import sys

import numpy as np
import pytest

from rl.evaluate import evaluate
from rl.runs.batch.replica_state import split_state
from rl.runs.checkpoint import load_checkpoint, save_checkpoint
from rl.runs.config import ConfigError, TrainConfig
from rl.runs.load import RunLoadError, load_run
from rl.runs.metrics import read_metrics
from rl.runs.training import CHECKPOINT_FILE, METRICS_FILE, train
from rl.seeding import spawn_replicas

SEEDS = 3


def _config(out, agent="teql", **changes) -> TrainConfig:
    values = dict(
        env="CartPole-v1",
        agent=agent,
        out=str(out),
        seeds=SEEDS,
        episodes=40,
        eval_every=5,
        eval_episodes=2,
        checkpoint_every=15,
        keep_best=True,
    )
    return TrainConfig(**{**values, **changes})


def _replica_state(run, replica):
    """Replica ``replica``'s part of a loaded run's agent state (`split_state`)."""
    agent = run.agent
    alone = type(agent)(run.problem, agent.config, [spawn_replicas([0])[0].agent])
    layout, n_states = alone.state_dict(), math.prod(run.problem.state_dims)
    fresh = type(agent)(
        run.problem, agent.config, [s.agent for s in spawn_replicas(range(agent.replicas))]
    )
    return split_state(
        agent.state_dict(), layout, fresh.state_dict(), replica, replica + 1, n_states
    )


def _assert_tree_equal(a, b):
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _assert_tree_equal(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _assert_tree_equal(x, y)
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


def _first_best(run_dir):
    """Each seed's first episode of its highest evaluation in ``metrics.csv``, and that value."""
    table = read_metrics(run_dir / METRICS_FILE)
    episodes, values = [], []
    for seed in np.unique(table["seed"]):
        mine = (table["seed"] == seed) & ~np.isnan(table["greedy_return"])
        returns, at = table["greedy_return"][mine], table["episode"][mine]
        episodes.append(at[np.argmax(returns)])  # argmax: the first of equal maxima
        values.append(returns.max())
    return np.array(episodes), np.array(values)


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    out = tmp_path_factory.mktemp("kept") / "run"
    train(_config(out))
    return out


@pytest.mark.parametrize("agent", ["teql", "tabular", "dqn"])
def test_best_state_is_bitwise_the_state_of_the_run_stopped_at_its_best(tmp_path, agent):
    out = tmp_path / "kept"
    episodes = 20 if agent == "dqn" else 40
    train(_config(out, agent, episodes=episodes))
    best = load_run(out, best=True)
    expected, _ = _first_best(out)
    np.testing.assert_array_equal(best.best_episodes, expected)
    assert len(set(expected)) > 1 or agent == "dqn"  # the replicas' bests differ in time
    for replica, episode in enumerate(expected):
        short = tmp_path / f"stopped-{replica}"
        train(_config(short, agent, episodes=int(episode), keep_best=False))
        stopped = load_run(short)
        mine = _replica_state(best, replica)
        theirs = _replica_state(stopped, replica)
        _assert_tree_equal(mine, theirs)
        played = evaluate(best, episodes=3, seed=5, replica=replica).returns
        np.testing.assert_array_equal(
            played, evaluate(stopped, episodes=3, seed=5, replica=replica).returns
        )


def test_keep_best_leaves_the_training_bitwise_unchanged(tmp_path, kept):
    train(_config(tmp_path / "plain", keep_best=False))
    ours = (kept / METRICS_FILE).read_text().splitlines()
    theirs = (tmp_path / "plain" / METRICS_FILE).read_text().splitlines()
    cut = [",".join(line.split(",")[:5]) for line in ours]  # all but the wall time
    assert cut == [",".join(line.split(",")[:5]) for line in theirs]


def test_one_replica_keeps_its_whole_state(tmp_path):
    out = tmp_path / "one"
    train(_config(out, seeds=1, episodes=20))
    best = load_run(out, best=True)
    [episode] = best.best_episodes
    train(_config(tmp_path / "stopped", seeds=1, episodes=int(episode), keep_best=False))
    _assert_tree_equal(best.agent.state_dict(), load_run(tmp_path / "stopped").agent.state_dict())


def test_an_interrupted_and_resumed_run_keeps_the_same_best(tmp_path, kept):
    out = tmp_path / "resumed"
    config = _config(out)
    first = train(config, stop_after_episode=22)  # between checkpoints and evaluations
    assert first.interrupted and first.episodes_done == 22
    partial = load_checkpoint(out / CHECKPOINT_FILE).best
    assert (partial["episodes"] <= 20).all()
    train(config, resume=True)
    ours, theirs = load_checkpoint(out / CHECKPOINT_FILE), load_checkpoint(kept / CHECKPOINT_FILE)
    _assert_tree_equal(ours.best, theirs.best)


def test_every_periodic_checkpoint_holds_the_best_so_far(tmp_path):
    out = tmp_path / "run"
    config = _config(out, episodes=15)
    train(config)
    early = load_checkpoint(out / CHECKPOINT_FILE)
    expected, values = _first_best(out)
    assert early.episode == 15
    np.testing.assert_array_equal(early.best["episodes"], expected)
    np.testing.assert_array_equal(early.best["greedy_returns"], values)


def test_keep_best_needs_evaluations():
    with pytest.raises(ConfigError, match="keep_best.*eval_every"):
        _config("x", eval_every=0)


def test_a_run_without_keep_best_has_no_best_to_load(tmp_path):
    out = tmp_path / "plain"
    train(_config(out, episodes=5, keep_best=False))
    with pytest.raises(RunLoadError, match="keeps no best states.*without --best"):
        load_run(out, best=True)


@pytest.mark.parametrize(
    ("entry", "value", "reason"),
    [
        ("episodes", np.array([0, 0, 99]), "outside 0 .. 40"),
        ("episodes", np.array([0, 0]), "one i-number per replica"),
        ("greedy_returns", np.array([1.0, np.nan, 2.0]), "NaN"),
    ],
)
def test_damaged_best_entries_are_refused_in_one_line(tmp_path, kept, entry, value, reason):
    checkpoint = load_checkpoint(kept / CHECKPOINT_FILE)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in ("config.json", METRICS_FILE):
        (run_dir / name).write_bytes((kept / name).read_bytes())
    damaged = dataclasses.replace(checkpoint, best={**checkpoint.best, entry: value})
    save_checkpoint(run_dir / CHECKPOINT_FILE, damaged)
    with pytest.raises(RunLoadError, match=reason) as error:
        load_run(run_dir, best=True)
    assert "\n" not in str(error.value)


def test_a_batch_refuses_keep_best(tmp_path):
    from rl.runs.batch.training import build_batch, resolve_members

    resolved = resolve_members([_config(tmp_path / "a"), _config(tmp_path / "b", seed=10)])
    with pytest.raises(ConfigError, match="keep_best on its own"):
        build_batch(resolved)


def test_cli_keeps_and_plays_the_best(tmp_path):
    out = tmp_path / "run"
    train_cmd = [sys.executable, "-m", "rl.train", "--env", "CartPole-v1", "--agent", "teql"]
    train_cmd += ["--episodes", "20", "--eval-every", "5", "--seeds", "2", "--keep-best"]
    train_cmd += ["--out", str(out), "--no-progress", "--no-plot"]
    subprocess.run(train_cmd, check=True, capture_output=True)
    expected, _ = _first_best(out)
    shown = subprocess.run(
        [sys.executable, "-m", "rl.evaluate", str(out), "--best", "--replica", "1"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert f"its best evaluated state, after training episode {expected[1]} of 20" in shown


def test_keep_best_is_part_of_the_run_config_a_resume_checks(tmp_path):
    out = tmp_path / "plain"
    train(_config(out, episodes=10, keep_best=False))
    with pytest.raises(ConfigError, match="'keep_best' parameter differs"):
        train(_config(out, episodes=20), resume=True)


def test_a_learner_keeps_the_best_for_load_run(tmp_path):
    import rl

    model = rl.TEQL("CartPole-v1", seeds=2, eval_every=5, keep_best=True, verbose=0)
    model.learn(episodes=20)
    model.save(tmp_path / "saved")
    best = rl.load_run(tmp_path / "saved", best=True)
    np.testing.assert_array_equal(best.best_episodes, _first_best(tmp_path / "saved")[0])
