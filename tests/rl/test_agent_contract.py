"""The contract every registered agent keeps, on the small random low-rank MDP."""

import importlib.util
import pickle

import gymnasium
import numpy as np
import pytest

from rl.agents.registry import AGENTS
from rl.loop.runner import Runner
from rl.runs.config import TrainConfig
from rl.runs.training import build

TORCH_AGENTS = {"dqn", "sac"}
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _agent_params():
    params = []
    for name in sorted(AGENTS):
        marks = []
        if name in TORCH_AGENTS and not HAS_TORCH:
            marks.append(pytest.mark.skip(reason="needs the torch extra"))
        params.append(pytest.param(name, marks=marks))
    return params


def _runner(tmp_path, agent, seed=0):
    config = TrainConfig(
        env="lowrank", agent=agent, seeds=2, seed=seed, episodes=4, out=str(tmp_path)
    )
    runner, _ = build(config)
    return runner


def _play(runner, first, last):
    rows = [runner.episode(e) for e in range(first, last + 1)]
    return np.array([np.concatenate([np.ravel(part) for part in row]) for row in rows])


def _probe_states(problem, count=20):
    rng = np.random.default_rng(123)
    return [
        np.stack([rng.integers(d, size=2) for d in problem.state_dims], axis=1)
        for _ in range(count)
    ]


@pytest.mark.parametrize("agent", _agent_params())
def test_actions_inside_the_action_space_and_metrics_finite(tmp_path, agent):
    runner = _runner(tmp_path, agent)
    problem = runner.problem
    space = gymnasium.make(problem.env_id, **problem.env_kwargs).action_space
    active = np.ones(2, dtype=bool)
    for states in _probe_states(problem):
        for actions in (runner.agent.act(states, active), runner.agent.greedy(states)):
            assert actions.shape == (2, len(problem.action_dims))
            assert ((actions >= 0) & (actions < np.array(problem.action_dims))).all()
            for env_action in problem.decode(actions):
                assert space.contains(np.asarray(env_action, dtype=space.dtype))
    results = _play(runner, 1, 3)
    assert np.isfinite(results[:, :4]).all()
    if agent == "random":
        assert runner.agent.n_params == 0  # the one agent that learns nothing
    else:
        assert runner.agent.n_params > 0


@pytest.mark.parametrize("agent", _agent_params())
def test_state_save_and_restore_gives_identical_continuation(tmp_path, agent):
    original = _runner(tmp_path / "a", agent)
    _play(original, 1, 2)
    saved = pickle.loads(pickle.dumps(original.agent.state_dict()))
    expected = _play(original, 3, 5)
    probes = _probe_states(original.problem)
    expected_greedy = [original.agent.greedy(s) for s in probes]

    other = _runner(tmp_path / "b", agent, seed=9)  # other seeds: everything must come from state
    restored = Runner(
        original.problem,
        other.agent,
        original.streams,
        eval_every=original.eval_every,
        eval_episodes=original.eval_episodes,
        fused=original.fused,
    )
    restored.agent.load_state_dict(saved)
    np.testing.assert_array_equal(_play(restored, 3, 5), expected)
    for states, greedy in zip(probes, expected_greedy, strict=True):
        np.testing.assert_array_equal(restored.agent.greedy(states), greedy)


@pytest.mark.parametrize("agent", _agent_params())
def test_act_with_greedy_replicas_is_explore_and_greedy_apart(tmp_path, agent):
    """``act(states, active, greedy)``: the greedy rows' `greedy`, the others' `explore`.

    Two agents of one seed after two episodes of learning; one acts with a mask,
    the other calls `explore` and `greedy` apart: the same actions, and the same
    random streams after (their next exploratory actions agree too).
    """
    together, apart = _runner(tmp_path / "a", agent), _runner(tmp_path / "b", agent)
    for runner in (together, apart):
        _play(runner, 1, 2)
        if isinstance(getattr(runner.agent, "epsilon", None), np.ndarray):
            runner.agent.epsilon[:] = 0.5  # both kinds of exploring row
    active = np.ones(2, dtype=bool)
    for index, states in enumerate(_probe_states(together.problem)):
        greedy = np.array([index % 2 == 0, index % 3 == 0])
        acted = together.agent.act(states, active, greedy)
        explored = apart.agent.explore(states, active & ~greedy)
        expected = np.where(greedy[:, None], apart.agent.greedy(states), explored)
        np.testing.assert_array_equal(acted, expected)
    states = _probe_states(together.problem)[0]
    np.testing.assert_array_equal(
        together.agent.explore(states, active), apart.agent.explore(states, active)
    )


@pytest.mark.parametrize("agent", _agent_params())
def test_same_seed_same_results_other_seed_differs(tmp_path, agent):
    first = _play(_runner(tmp_path / "a", agent), 1, 4)
    again = _play(_runner(tmp_path / "b", agent), 1, 4)
    other = _play(_runner(tmp_path / "c", agent, seed=7), 1, 4)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
