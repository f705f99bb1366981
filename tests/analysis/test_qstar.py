import math
import sys

import gymnasium
import numpy as np
import pytest
import tensorly as tl
from tensorly.cp_tensor import CPTensor, cp_to_tensor

from analysis.qstar import (
    QTensor,
    estimate_model,
    exact_qstar,
    grid_qstar,
    q_star,
    qtensor_from_run,
    sampled_value_iteration,
)
from rl.envs.pendulum import pendulum_step
from rl.problems import make_problem
from rl.problems.from_gymnasium import EnvModuleRefused
from rl.runs.config import TrainConfig
from rl.runs.training import train


def reference_model(samples, seed):
    """Pendulum's estimated model, one sample at a time (the plain reference)."""
    problem = make_problem("pendulum")
    low, high = np.array([-1.0, -5.0]), np.array([1.0, 5.0])
    width = (high - low) / np.array(problem.state_dims)
    n_cells, n_actions = math.prod(problem.state_dims), math.prod(problem.action_dims)
    rng = np.random.default_rng(seed)
    u = rng.random((n_cells, n_actions, samples, 2))  # the draws of the single 2048-cell block
    reward = np.zeros((n_cells, n_actions))
    continuation = np.zeros((n_cells * n_actions, n_cells))
    for cell in range(n_cells):
        index = np.array(np.unravel_index(cell, problem.state_dims))
        lower = low + index * width
        for action in range(n_actions):
            force = problem.decode(np.array([[action]]))
            for k in range(samples):
                state = lower + width * u[cell, action, k]
                nxt, r, term = pendulum_step(state[None, :], force)
                reward[cell, action] += r[0] / samples
                if not term[0]:
                    target = np.ravel_multi_index(tuple(problem.encode(nxt)[0]), problem.state_dims)
                    continuation[cell * n_actions + action, target] += 1.0 / samples
    return reward, continuation


def test_estimated_model_matches_plain_loop():
    model = estimate_model("pendulum", samples=2, rng=np.random.default_rng(3))
    reward, continuation = reference_model(2, 3)
    np.testing.assert_allclose(model.reward, reward, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(model.continuation.toarray(), continuation, atol=1e-12)


def test_estimated_model_is_seeded_and_stochastic():
    a = estimate_model("pendulum", samples=3, rng=np.random.default_rng(0))
    b = estimate_model("pendulum", samples=3, rng=np.random.default_rng(0))
    c = estimate_model("pendulum", samples=3, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(a.reward, b.reward)
    assert not np.array_equal(a.reward, c.reward)
    rows = np.asarray(a.continuation.sum(axis=1)).ravel()
    assert np.all(rows <= 1 + 1e-12)
    np.testing.assert_allclose(rows * 3, np.round(rows * 3), atol=1e-9)  # multiples of 1/K
    assert 0 < a.terminal_share < 1


def test_grid_qstar_is_the_fixed_point_of_its_model():
    model = estimate_model("pendulum", samples=2, rng=np.random.default_rng(0))
    q = sampled_value_iteration(model, 0.9, tol=1e-10).reshape(model.reward.shape)
    image = model.reward + 0.9 * (model.continuation @ q.max(axis=1)).reshape(q.shape)
    assert np.max(np.abs(image - q)) < 1e-9
    result = grid_qstar("pendulum", gamma=0.9, model=model)
    assert isinstance(result, QTensor)
    assert result.tensor.shape == (20, 20, 10)
    assert result.n_state_modes == 2 and result.state_dims == (20, 20)
    assert result.tensor.max() <= 1 / (1 - 0.9) + 1e-9  # rewards are at most 1
    assert result.v_max == pytest.approx(result.reward_bound / 0.1)
    assert "2 samples" in result.source


def test_exact_qstar_satisfies_bellman():
    import gymnasium

    from rl.envs import bellman_residual

    q = exact_qstar("lowrank")
    assert q.tensor.shape == (4, 4, 4, 3, 3) and q.gamma == 0.9 and q.reward_bound == 1.0
    model = gymnasium.make("rl/LowRankMDP-v0").unwrapped
    assert bellman_residual(model, q.tensor) < 1e-8
    assert q_star("inventory").tensor.shape == (2, 5, 5, 3, 3)


@pytest.mark.parametrize("bad", [0.0, 1.0, -0.5, 2.0])
def test_bad_gamma_is_rejected(bad):
    with pytest.raises(ValueError, match="gamma"):
        grid_qstar("pendulum", gamma=bad, samples=1)


def test_no_model_for_highway_and_unknown_names():
    with pytest.raises(ValueError, match="--source run"):
        q_star("highway")
    with pytest.raises(ValueError, match="Unknown env"):
        q_star("mountaincar")
    with pytest.raises(ValueError, match="samples"):
        estimate_model("pendulum", samples=0)


def _run(tmp_path, agent, name):
    out = tmp_path / name
    config = TrainConfig(
        env="lowrank",
        agent=agent,
        reading="paper" if agent == "teql" else None,
        out=str(out),
        seeds=2,
        episodes=2,
        eval_every=0,
    )
    train(config)
    return out


def test_tensor_and_tabular_runs(tmp_path):
    from rl.runs.checkpoint import load_checkpoint
    from rl.runs.training import CHECKPOINT_FILE

    run = _run(tmp_path, "teql", "teql")
    q = qtensor_from_run(run, replica=1)
    checkpoint = load_checkpoint(run / CHECKPOINT_FILE)
    factors = checkpoint.agent_state["factors"]
    expected = np.einsum("ar,br,cr,dr,er->abcde", *[np.asarray(f)[1] for f in factors])
    np.testing.assert_allclose(q.tensor, expected, rtol=1e-12)
    assert q.env == "lowrank" and "teql" in q.source
    assert q.gamma == checkpoint.config["agent_params"]["gamma"]
    tab = qtensor_from_run(_run(tmp_path, "tabular", "tab"))
    assert tab.tensor.shape == (4, 4, 4, 3, 3) and "Q-table" in tab.source
    with pytest.raises(ValueError, match="replica"):
        qtensor_from_run(run, replica=2)
    with pytest.raises(ValueError, match="too large"):
        qtensor_from_run(_run(tmp_path, "tabular", "tab2"), max_entries=10)
    factored = qtensor_from_run(run, replica=1, max_entries=10)  # too large: its CP factors
    assert isinstance(factored.tensor, CPTensor) and "CP factors" in factored.source
    assert factored.state_dims == (4, 4, 4) and factored.action_dims == (3, 3)
    with tl.backend_context("numpy"):
        np.testing.assert_allclose(cp_to_tensor(factored.tensor), expected, rtol=1e-12)


def test_the_rank_command_profiles_a_run_too_large_to_build_from_its_factors(
    tmp_path, monkeypatch, capsys
):
    from analysis.rank import cli as rank_cli

    run = _run(tmp_path, "teql", "teql")
    monkeypatch.setattr("analysis.qstar.DEFAULT_MAX_ENTRIES", 10)  # as Highway's 2.6e12
    monkeypatch.setattr("analysis.rank.profile.MAX_DENSE_ENTRIES", 10)
    argv = ["--env", "lowrank", "--source", "run", "--run", str(run), "--ranks", "1,5"]
    assert rank_cli.main([*argv, "--center", "--out", str(tmp_path / "o"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "CP factors of replica 0" in out and "smallest rank reaching 90% energy about" in out
    rows = (tmp_path / "o" / "rank_profile.csv").read_text().splitlines()
    header = rows[0].split(",")
    last = dict(zip(header, rows[-1].split(","), strict=True))
    assert header[:6] == ["rank", "rel_error", "energy", "sup_error", "b_r_upper", "b_r_lower"]
    assert last["b_r_upper"] == "nan" and float(last["rel_error"]) < 1e-6  # rank 5 >= its rank


def test_runs_without_a_q_tensor(tmp_path):
    with pytest.raises(ValueError, match="no Q-tensor"):
        qtensor_from_run(_run(tmp_path, "random", "rand"))
    with pytest.raises(ValueError, match="not a run directory"):
        qtensor_from_run(tmp_path / "missing")


def test_a_run_on_an_env_module_is_read_only_when_named_or_trusted(payload_run, monkeypatch):
    run_dir, marker = payload_run
    monkeypatch.syspath_prepend(str(run_dir.parent))
    sys.modules.pop("payload", None)
    with pytest.raises(EnvModuleRefused, match="Refusing to import module 'payload'"):
        qtensor_from_run(run_dir)
    assert not marker.exists()
    try:
        tensor = qtensor_from_run(run_dir, trust_env_module=True)
        assert marker.is_file() and tensor.tensor.shape == (4, 4, 3, 3)
    finally:
        sys.modules.pop("payload", None)
        gymnasium.envs.registry.pop("Foo-v0", None)
