"""The compiled Highway twin against highway-env itself, step by step, to 1e-9."""

import numpy as np
import pytest

pytest.importorskip("highway_env")

from rl.envs.highway import Highway  # noqa: E402
from rl.envs.highway_twin import HighwayTwin, HighwayTwinVector  # noqa: E402
from rl.experiments import highway_equality  # noqa: E402
from rl.experiments.highway_equality import POLICIES  # noqa: E402
from rl.loop.replicas import ReplicaEnvs  # noqa: E402
from rl.problems import make_problem  # noqa: E402


def trained_teql_policy(episodes, replicas=2):
    """Train TEQL (the Highway preset) on the twin; return its greedy policy of replica 0."""
    from rl.agents.base import Transitions
    from rl.agents.readings import reading
    from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
    from rl.seeding import spawn_replicas

    problem = make_problem("highway", env_kwargs={"engine": "twin"})
    streams = [s.agent for s in spawn_replicas(list(range(replicas)))]
    agent = TEQLAgent(
        problem, TEQLConfig(**reading("teql", "paper").agent_params("highway")), streams
    )
    envs = HighwayTwinVector(replicas, autoreset_mode="Disabled")
    for episode in range(episodes):
        states = problem.encode(envs.reset(seed=[1000 * episode + r for r in range(replicas)])[0])
        ended = np.zeros(replicas, dtype=bool)
        while not ended.all():
            actions = agent.act(states, ~ended)
            obs, rewards, terminated, truncated, _ = envs.step(actions[:, 0], active=~ended)
            next_states = problem.encode(obs)
            agent.observe(Transitions(states, actions, rewards, next_states, terminated, ~ended))
            agent.end_episode((terminated | truncated) & ~ended)
            ended |= terminated | truncated
            states = next_states

    def policy(observations):
        states = problem.encode(observations)
        return np.array(
            [agent.greedy(np.repeat(state[None], replicas, axis=0))[0, 0] for state in states]
        )

    return policy


# PARTING. Known parting: when two crashing vehicles' rectangles are nearly parallel, two
# edges give almost the same separating distance, and the last-bit rounding of the corners
# (NumPy's ``rotation @ points`` against the twin's products) can pick the other one; the
# impact displacement then differs by ~1e-7 m on the terminal step only (seed 106 of the
# random policy, episode 29: 9.4e-8 m in the ego's y). Rewards and flags stay equal, and
# the next episode draws a new scene.


def compare(policy, seeds, episodes, normalization="paper", max_partings=0):
    """Play ``episodes`` episodes per copy in both simulators; return the steps compared.

    The twin is a NEXT_STEP vector environment, so its later episodes come from
    each copy's continued stream, as ``Highway.reset()`` without a seed does.
    """
    copies = len(seeds)
    twin = HighwayTwinVector(copies, normalization)
    references = [Highway(normalization) for _ in seeds]
    obs, _ = twin.reset(seed=list(seeds))
    for i, seed in enumerate(seeds):
        ref_obs, _ = references[i].reset(seed=seed)
        np.testing.assert_allclose(obs[i], ref_obs, rtol=0, atol=1e-9)
    rngs = [np.random.default_rng(seed + 10_000) for seed in seeds]
    if callable(policy):  # a function of the observations, shape (B, 9) -> (B,)
        choose = policy
    else:
        rule = POLICIES[policy]
        choose = lambda obs: np.array([rule(rng, None) for rng in rngs])  # noqa: E731
    done = np.zeros(copies, dtype=bool)
    played = np.zeros(copies, dtype=int)
    compared = 0
    partings = []
    while (played < episodes).any():
        actions = choose(obs)
        obs, rewards, terminated, truncated, _ = twin.step(actions)
        for i, ref in enumerate(references):
            if played[i] >= episodes:
                continue
            if done[i]:  # the twin auto-reset this copy; the reference continues its stream
                ref_obs, _ = ref.reset()
                ref_reward, ref_terminated, ref_truncated = 0.0, False, False
                done[i] = False
            else:
                ref_obs, ref_reward, ref_terminated, ref_truncated, _ = ref.step(actions[i])
                compared += 1
                if ref_terminated or ref_truncated:
                    done[i] = True
                    played[i] += 1
            gap = np.abs(obs[i] - ref_obs).max()
            if gap > 1e-9 and ref_terminated:  # a crash's impact: see PARTING above
                assert gap < 1e-6
                partings.append((seeds[i], played[i], gap))
            else:
                np.testing.assert_allclose(obs[i], ref_obs, rtol=0, atol=1e-9)
            assert abs(rewards[i] - ref_reward) <= 1e-9
            assert (terminated[i], truncated[i]) == (ref_terminated, ref_truncated)
    assert len(partings) <= max_partings, partings
    return compared


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_twin_equals_highway_env(policy):
    assert compare(policy, seeds=[3], episodes=2) > 5


def test_twin_equals_highway_env_informative():
    assert compare("random", seeds=[5], episodes=1, normalization="informative") > 1


def test_single_twin_is_a_copy_of_the_vector():
    single = HighwayTwin()
    vector = HighwayTwinVector(2, autoreset_mode="Disabled")
    obs, _ = single.reset(seed=8)
    vector_obs, _ = vector.reset(seed=7)
    np.testing.assert_array_equal(obs, vector_obs[1])
    for action in [3, 0, 1, 2, 4]:
        obs, reward, terminated, truncated, _ = single.step(action)
        vector_obs, rewards, *_ = vector.step(np.array([1, action]))
        np.testing.assert_array_equal(obs, vector_obs[1])
        assert reward == rewards[1]


def test_engine_twin_replicas_equal_reference_replicas():
    twin = make_problem("highway", env_kwargs={"engine": "twin"})
    reference = make_problem("highway", env_kwargs={"engine": "reference"})
    assert (twin.env_id, twin.vectorized, twin.shape) == (
        "rl/HighwayTwin-v0",
        True,
        reference.shape,
    )
    twin_envs, reference_envs = ReplicaEnvs(twin, 2), ReplicaEnvs(reference, 2)
    assert isinstance(twin_envs.vector, HighwayTwinVector) and reference_envs.vector is None
    seeds = [4, 5]
    np.testing.assert_allclose(twin_envs.reset(seeds), reference_envs.reset(seeds), atol=1e-9)
    rng = np.random.default_rng(0)
    for t in range(8):
        active = np.array([True, t % 2 == 0])
        actions = rng.integers(5, size=2)
        a, b = twin_envs.step(actions, active), reference_envs.step(actions, active)
        np.testing.assert_allclose(a.observations, b.observations, atol=1e-9)
        np.testing.assert_allclose(a.rewards, b.rewards, atol=1e-9)
        np.testing.assert_array_equal(a.terminated | a.truncated, b.terminated | b.truncated)
        ended = a.terminated | a.truncated
        if ended.any():
            np.testing.assert_allclose(
                twin_envs.reset([None] * 2, ended),
                reference_envs.reset([None] * 2, ended),
                atol=1e-9,
            )


def test_engine_option_is_checked():
    with pytest.raises(ValueError, match="'engine' option"):
        make_problem("highway", env_kwargs={"engine": "fast"})
    with pytest.raises(ValueError, match="paper's configuration only"):
        make_problem("highway", env_kwargs={"engine": "twin", "config": {"lanes_count": 4}})


def test_single_twin_passes_gymnasium_check_env():
    from gymnasium.utils.env_checker import check_env

    check_env(HighwayTwin(), skip_render_check=True)


def test_bad_input_is_rejected():
    with pytest.raises(ValueError, match="normalization"):
        HighwayTwinVector(1, "raw")
    twin = HighwayTwinVector(1)
    twin.reset(seed=0)
    with pytest.raises(ValueError, match="actions"):
        twin.step(np.array([5]))


@pytest.mark.slow
def test_twin_equals_highway_env_trained_teql_policy():
    """1,000 episodes (20 copies x 50) of a trained TEQL greedy policy."""
    policy = trained_teql_policy(300)
    assert compare(policy, seeds=list(range(200, 220)), episodes=50, max_partings=5) > 5000


@pytest.mark.slow
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_twin_equals_highway_env_many_episodes(policy):
    assert compare(policy, seeds=list(range(100, 120)), episodes=50, max_partings=5) > 1000


def test_equality_command_counts_equal_episodes_and_resumes(tmp_path, capsys):
    out = tmp_path / "equality.csv"
    assert highway_equality.main(["--seeds", "2", "--episodes", "2", "--out", str(out)]) == 0
    summary = highway_equality.summarize(out)
    assert summary["episodes"] == summary["equal_episodes"] == 4
    assert summary["steps_twin"] == summary["steps_reference"] > 4
    assert summary["max_return_gap"] <= highway_equality.TOLERANCE
    assert summary["p_returns"] == summary["p_lengths"] == 1.0
    before = out.read_bytes()
    # a rerun skips the seeds the file holds and plays only the new one
    assert highway_equality.main(["--seeds", "3", "--episodes", "2", "--out", str(out)]) == 0
    assert out.read_bytes().startswith(before)
    assert highway_equality.summarize(out)["episodes"] == 6
    capsys.readouterr()
    # a file holds one policy
    assert highway_equality.main(["--policy", "idle", "--seeds", "1", "--out", str(out)]) == 2
    assert "holds episodes of the policies ['random']" in capsys.readouterr().err
    out.write_bytes(b"seed,episode\n0,0\n")
    assert highway_equality.main(["--summary-only", "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: Cannot read {out}: it is not a CSV equality table")
    assert error.count("\n") == 1


@pytest.mark.slow
def test_training_through_the_runner_is_the_same_with_either_engine(tmp_path):
    import csv

    from rl.runs.config import TrainConfig
    from rl.runs.training import train

    runs = {}
    for engine in ("twin", "reference"):
        config = TrainConfig(
            env="highway",
            agent="teql",
            reading="paper",
            out=str(tmp_path / engine),
            seeds=2,
            episodes=6,
            eval_every=3,
            env_options={"env_kwargs": {"engine": engine}},
        )
        train(config)
        with open(tmp_path / engine / "metrics.csv") as file:
            rows = [row for row in csv.DictReader(file)]
        for row in rows:
            del row["wall_time"]
        checkpoint = np.load(tmp_path / engine / "checkpoint.npz")
        runs[engine] = rows, {key: checkpoint[key] for key in checkpoint.files}
    (twin_rows, twin_arrays), (reference_rows, reference_arrays) = runs["twin"], runs["reference"]
    assert twin_rows == reference_rows and len(twin_rows) == 12
    for key, value in reference_arrays.items():
        if value.dtype.kind in "fiub":
            np.testing.assert_array_equal(twin_arrays[key], value, err_msg=key)


def test_equality_command_plays_a_trained_runs_policy(tmp_path, capsys):
    """``--policy run --run DIR``: the greedy policy of a run on Highway, in both simulators."""
    from rl import train

    run_dir = tmp_path / "teql"
    twin = 'env_kwargs={"engine": "twin"}'
    args = ["--env", "highway", "--env-option", twin, "--agent", "teql", "--reading", "paper",
            "--seeds", "1",
            "--episodes", "2", "--no-progress", "--no-plot", "--out", str(run_dir)]  # fmt: skip
    assert train.main(args) == 0
    out = tmp_path / "equality.csv"
    argv = ["--policy", "run", "--run", str(run_dir), "--seeds", "1", "--episodes", "2"]
    assert highway_equality.main([*argv, "--out", str(out)]) == 0
    summary = highway_equality.summarize(out)
    assert summary["episodes"] == summary["equal_episodes"] == 2
    assert {row.split(",")[0] for row in out.read_text().splitlines()[1:]} == {"run:teql"}
    capsys.readouterr()
    assert highway_equality.main(["--run", str(run_dir), "--out", str(tmp_path / "x.csv")]) == 2
    assert "--run DIR goes with --policy run" in capsys.readouterr().err
    cartpole = tmp_path / "cartpole"
    assert train.main(["--env", "cartpole", "--agent", "teql", "--reading", "paper",
                       "--seeds", "1", "--episodes", "1",
                       "--no-progress", "--no-plot", "--out", str(cartpole)]) == 0  # fmt: skip
    capsys.readouterr()
    argv = ["--policy", "run", "--run", str(cartpole), "--out", str(tmp_path / "y.csv")]
    assert highway_equality.main(argv) == 2
    error = capsys.readouterr().err
    assert "is a run on 'cartpole'" in error and error.count("\n") == 1
