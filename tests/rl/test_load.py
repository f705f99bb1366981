"""rl.load_run: a user's environment trained through Python, loaded back, acting and exported."""

import sys

import gymnasium
import numpy as np
import pytest
import tensorly as tl

import rl
from rl.problems.from_gymnasium import EnvModuleRefused
from rl.runs.config import TrainConfig
from rl.runs.load import RunLoadError
from rl.runs.training import build, run

TOY = "tests.rl.toy_envs:Toy-v0"


def _train(tmp_path, agent, seeds=2, episodes=6):
    config = TrainConfig(
        env=TOY,
        agent=agent,
        out=str(tmp_path / agent),
        seeds=seeds,
        episodes=episodes,
        eval_every=3,
    )
    runner, effective = build(config)
    try:
        result = run(runner, config, effective)
    finally:
        runner.close()
    assert result.episodes_done == episodes
    return runner.agent, result.run_dir


@pytest.mark.parametrize("agent", ["teql", "tlr", "tabular", "dqn"])
def test_trains_through_python_and_loads_back_with_the_same_greedy_actions(tmp_path, agent):
    if agent == "dqn":
        pytest.importorskip("torch")
    trained, run_dir = _train(tmp_path, agent)
    loaded = rl.load_run(run_dir)
    assert loaded.config.env == TOY and loaded.config.agent == agent and loaded.episode == 6
    assert loaded.replicas == 2 and loaded.problem.shape == (4, 4, 3, 3)
    states = np.stack(np.unravel_index(np.arange(16), (4, 4)), axis=1)
    for state in states:
        batch = np.repeat(state[None], 2, axis=0)
        np.testing.assert_array_equal(loaded.agent.greedy(batch), trained.greedy(batch))
    env = loaded.problem.make_env()
    observation, _ = env.reset(seed=5)
    for replica in (0, 1):
        action = loaded.policy(observation, replica=replica)
        assert env.action_space.contains(action)
        expected = trained.greedy(np.repeat(observation[None], 2, axis=0))[replica]
        np.testing.assert_array_equal(action, expected)


@pytest.mark.parametrize("agent", ["teql", "tlr"])
def test_exported_cp_tensor_entries_equal_the_agents_q_values(tmp_path, agent):
    trained, run_dir = _train(tmp_path, agent, episodes=3)
    loaded = rl.load_run(run_dir)
    states = np.stack(np.unravel_index(np.arange(16), (4, 4)), axis=1)
    for replica, cp in enumerate(loaded.q_tensors()):
        assert isinstance(cp, tl.cp_tensor.CPTensor) and cp.shape == (4, 4, 3, 3)
        dense = tl.cp_to_tensor(cp)
        for state in states:
            batch = np.repeat(state[None], 2, axis=0)
            expected = trained.action_values(batch)[replica]
            np.testing.assert_allclose(dense[tuple(state)].ravel(), expected, rtol=1e-12)
    cp = loaded.q_tensor(0)
    cp.factors[0][...] = 0.0  # a copy: the agent is untouched
    assert np.any(loaded.agent.q_.factors[0] != 0)


def test_non_tensor_agent_has_no_cp_tensor_and_replicas_are_checked(tmp_path):
    _, run_dir = _train(tmp_path, "tabular", seeds=1, episodes=2)
    loaded = rl.load_run(run_dir)
    with pytest.raises(TypeError, match="CP Q-tensor"):
        loaded.q_tensor()
    with pytest.raises(ValueError, match="replica"):
        loaded.policy(np.array([0, 0]), replica=1)


def test_a_directory_without_checkpoint_is_refused(tmp_path):
    with pytest.raises(RunLoadError, match="holds no checkpoint"):
        rl.load_run(tmp_path)
    with pytest.raises(RunLoadError, match="not a run directory"):
        rl.load_run(tmp_path / "missing")
    (tmp_path / "checkpoint.npz").write_bytes(b"not a checkpoint")
    with pytest.raises(RunLoadError, match="checkpoint"):
        rl.load_run(tmp_path)


def _forget_payload():
    sys.modules.pop("payload", None)
    gymnasium.envs.registry.pop("Foo-v0", None)


def test_a_module_named_by_the_run_is_imported_only_when_named_or_trusted(payload_run, monkeypatch):
    run_dir, marker = payload_run
    monkeypatch.syspath_prepend(str(run_dir.parent))  # as if python ran beside the run
    _forget_payload()
    with pytest.raises(EnvModuleRefused) as refused:
        rl.load_run(run_dir)
    assert str(refused.value) == (
        "Refusing to import module 'payload', named by the environment 'payload:Foo-v0' of "
        "the run directory (importing it runs its code); to allow it, pass "
        "env='payload:Foo-v0' or trust_env_module=True."
    )
    with pytest.raises(RunLoadError, match=r"'env' parameter 'payload:Bar-v0' differs"):
        rl.load_run(run_dir, env="payload:Bar-v0")
    assert not marker.exists()
    try:
        for allow in ({"env": "payload:Foo-v0"}, {"trust_env_module": True}):
            _forget_payload()
            marker.unlink(missing_ok=True)
            loaded = rl.load_run(run_dir, **allow)
            assert marker.read_text() == "payload ran"
            assert loaded.config.env == "payload:Foo-v0" and loaded.problem.shape == (4, 4, 3, 3)
    finally:
        _forget_payload()


def test_bundled_and_plain_gymnasium_ids_load_without_trust(tmp_path):
    for env, shape in (("inventory", (2, 5, 5, 3, 3)), ("FrozenLake-v1", (16, 4))):
        config = TrainConfig(env=env, agent="tabular", out=str(tmp_path / env), episodes=1)
        runner, effective = build(config)
        try:
            run(runner, config, effective)
        finally:
            runner.close()
        assert rl.load_run(tmp_path / env).problem.shape == shape
