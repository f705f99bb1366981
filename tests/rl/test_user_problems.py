"""Users' own environments: make_problem on ids, instances and factories; spaces; exact models."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import rl
from rl.envs import is_exact_model, value_iteration
from rl.loop.replicas import ReplicaEnvs
from rl.loop.runner import Runner
from rl.problems import EnvFailure, ObservationShapeError, exact_model, make_problem
from rl.problems.from_gymnasium import BOUNDS_MARGIN
from rl.problems.spaces import SpaceGrid
from rl.runs.config import TrainConfig, agent_spec, build_dataclass
from rl.runs.training import train
from rl.seeding import spawn_replicas
from tests.rl import toy_envs

TOY = "tests.rl.toy_envs:Toy-v0"
BOX = "tests.rl.toy_envs:ToyBox-v0"
BOX_OPTIONS = {"state_bins": (6, 5), "low": -2.0, "high": (2.0, 1.0), "action_bins": 3}


def _agent(name, problem, seeds=(0,), **params):
    spec = agent_spec(name)
    config = build_dataclass(spec.config_class, params)
    return spec.agent_class(problem, config, [s.agent for s in spawn_replicas(list(seeds))])


def test_module_qualified_id_maps_discrete_spaces_to_modes():
    problem = rl.make_problem(TOY)
    assert problem.env_id == TOY and problem.shape == (4, 4, 3, 3)
    assert problem.reward_bound == 1.1 and problem.reward_bound_source == "environment"
    env = problem.make_env()
    observation, _ = env.reset(seed=0)
    assert np.array_equal(problem.encode_observation(observation), observation)
    actions = problem.decode(np.array([[0, 2], [1, 1]]))
    assert all(env.action_space.contains(a) for a in actions)


def test_instance_and_factory_give_the_same_problem():
    by_id = make_problem(TOY)
    instance = gym.make(TOY)
    for source in (instance, lambda: gym.make(TOY)):
        problem = make_problem(source)
        assert problem.shape == by_id.shape and problem.reward_bound == by_id.reward_bound
        copies = ReplicaEnvs(problem, 2)  # an instance is deep-copied per replica
        assert np.array_equal(copies.reset([3, 4]), ReplicaEnvs(by_id, 2).reset([3, 4]))
    with pytest.raises(ValueError, match="env_kwargs"):
        make_problem(instance, env_kwargs={"a": 1})


def test_box_with_user_bins_and_bounds_and_an_estimated_reward_bound():
    problem = make_problem(BOX, **BOX_OPTIONS)
    assert problem.shape == (6, 5, 3)
    # x in [-2, 2] on 6 bins, v in [-2, 1] on 5 bins; out-of-range values clip.
    assert problem.encode(np.array([[-1.9, 0.9], [5.0, -9.0]])).tolist() == [[0, 4], [5, 0]]
    np.testing.assert_allclose(problem.decode(np.array([[0], [1], [2]]))[:, 0], [-2 / 3, 0, 2 / 3])
    assert problem.decode(np.array([[0]])).dtype == np.float32
    assert problem.reward_bound_source == "estimated" and problem.reward_bound > 0
    assert make_problem(BOX, **BOX_OPTIONS).reward_bound == problem.reward_bound  # seeded
    recorded = problem.recorded_options()
    again = make_problem(BOX, **BOX_OPTIONS, **recorded)
    assert again.reward_bound == problem.reward_bound and again.recorded_options() == recorded
    given = make_problem(BOX, **BOX_OPTIONS, reward_bound=4.0)
    assert (given.reward_bound, given.reward_bound_source) == (4.0, "argument")


def test_the_reward_size_is_the_mean_step_reward_of_the_bound_estimates_episodes():
    """Estimated, recorded and rebuilt as the bound is; declared or given, it is kept."""
    env, rewards = gym.make("CliffWalking-v1"), []
    env.action_space.seed(0)
    for episode in range(10):  # episode k reset with seed k, at most 1000 steps
        env.reset(seed=episode)
        for _ in range(1000):
            _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
            rewards.append(reward)
            if terminated or truncated:
                break
    rewards = np.array(rewards)
    problem = make_problem("CliffWalking-v1")
    # -1 a step, -100 on the cliff: the bound is 2 x 100, the size the mean |r|
    assert problem.reward_bound == 200.0 and np.abs(rewards).max() == 100.0
    assert problem.reward_size == np.abs(rewards).mean() and 5.0 < problem.reward_size < 15.0
    assert problem.reward_size_source == "estimated"
    recorded = problem.recorded_options()
    assert (recorded["reward_size"], recorded["reward_size_source"]) == (
        problem.reward_size,
        "estimated",
    )
    again = make_problem("CliffWalking-v1", **recorded)
    assert (again.reward_size, again.reward_size_source) == (problem.reward_size, "estimated")
    given = make_problem("CliffWalking-v1", reward_size=3.0)
    assert (given.reward_size, given.reward_size_source) == (3.0, "argument")
    assert "reward_size" not in given.recorded_options()
    env = toy_envs.ToyBox()
    env.reward_size = 0.5
    assert (make_problem(env).reward_size, make_problem(env).reward_size_source) == (
        0.5,
        "environment",
    )
    with pytest.raises(ValueError, match="The 'reward_size' option must be a float > 0"):
        make_problem("CliffWalking-v1", reward_size="big")
    with pytest.raises(ValueError, match="'reward_size_source' option needs a 'reward_size'"):
        make_problem("CliffWalking-v1", reward_size_source="estimated")


def test_default_grids_fit_the_observed_data_within_the_space_bounds():
    recorded = make_problem("Acrobot-v1").recorded_options()
    # the angular velocities' space bounds are 4 pi and 9 pi; random play reaches about 4 and 7
    assert 4.0 < recorded["high"][4] < 6.0 and 6.0 < recorded["high"][5] < 10.0
    assert recorded["low"][1:4] == [-1.0, -1.0, -1.0]  # the margin stays within [-1, 1]


def test_the_reward_bound_says_how_it_was_obtained():
    problem = make_problem("MountainCarContinuous-v0")  # the +100 goal is never reached
    assert problem.reward_bound_source == "estimated" and problem.reward_bound < 1.0
    line = problem.describe_reward_bound()
    assert "estimated as 2 x the largest |r| over 10 seeded random episodes" in line
    assert "reward_bound" in line and "\n" not in line
    env = toy_envs.ToyBox()
    env.reward_range = (-3.0, 1.0)
    ranged = make_problem(env)
    assert (ranged.reward_bound, ranged.reward_bound_source) == (3.0, "reward_range")
    assert "reward_range" in ranged.describe_reward_bound()
    assert "declared by the environment" in make_problem(TOY).describe_reward_bound()


def test_box_defaults_bins_observed_bounds_and_an_episode_cap_are_recorded():
    problem = make_problem(BOX)
    assert problem.shape == (6, 6, 5) and problem.max_episode_steps is None  # a TimeLimit of 30
    recorded = problem.recorded_options()
    assert recorded["state_bins"] == 6 and recorded["action_bins"] == 5
    # x and v: smallest and largest values of 10 seeded random episodes, first observations
    # in, widened by 10% of that range on each side
    seen_low, seen_high = np.array([-0.602332, -0.544333]), np.array([1.292088, 0.731301])
    margin = BOUNDS_MARGIN * (seen_high - seen_low)
    assert BOUNDS_MARGIN == 0.1
    np.testing.assert_allclose(recorded["low"], seen_low - margin, atol=1e-6)
    np.testing.assert_allclose(recorded["high"], seen_high + margin, atol=1e-6)
    again = make_problem(BOX, **recorded)
    assert {**recorded, **again.recorded_options()} == recorded and again.chosen_options == {}
    assert again.shape == problem.shape
    observations = np.array([[-0.3, 0.1], [1.2, -0.5]])
    np.testing.assert_array_equal(again.encode(observations), problem.encode(observations))
    given = make_problem(BOX, low=-1.0)  # only the missing side is observed
    assert (
        given.recorded_options()["high"] == recorded["high"] and "low" not in given.chosen_options
    )
    unlimited = make_problem(toy_envs.ToyBox)  # a factory: no TimeLimit
    assert unlimited.max_episode_steps == 1000
    assert unlimited.recorded_options()["max_episode_steps"] == 1000
    env = unlimited.make_env()
    env.reset(seed=0)
    steps = 0
    truncated = terminated = False
    while not (terminated or truncated):
        _, _, terminated, truncated, _ = env.step(np.zeros(1, np.float32))
        steps += 1
    assert (steps, truncated) == (1000, True)  # the zero action never leaves |x| <= 2
    assert make_problem(toy_envs.ToyBox, max_episode_steps=7).make_env().spec is None


def test_box_trains_with_user_bins_and_bounds():
    problem = make_problem(BOX, **BOX_OPTIONS)
    streams = spawn_replicas([0, 1])
    agent = _agent("teql", problem, seeds=(0, 1))
    runner = Runner(problem, agent, streams, eval_every=2)
    results = list(runner.episodes(0, 4))
    runner.close()
    assert [r.episode for r in results] == [1, 2, 3, 4]
    assert np.all(np.isfinite(results[-1].greedy_returns)) and np.all(results[0].lengths > 0)


@pytest.mark.parametrize(
    "env,options,match",
    [
        ("tests.rl.toy_envs:ToyText-v0", {}, "Text.*not supported"),
        (BOX, {"max_episode_steps": 0}, "'max_episode_steps' parameter must be an int >= 1"),
        ("tests.rl.toy_envs:ToyRenamed-v0", {}, "Please use `ToyRenamed-v1` instead"),
        (BOX, {"state_bins": (4, 4, 4), "low": -1, "high": 1}, "state_bins"),
        (BOX, {"state_bins": 4, "low": [-1, -1, -1], "high": 1}, "'low'"),
        (TOY, {"normalization": "paper"}, "highway"),
        (TOY, {"bins": 3}, "bins"),
        ("tests.rl.toy_envs:Nope-v0", {}, "Unknown problem"),
        ("no_such_module:Toy-v0", {}, "Cannot import module 'no_such_module'"),
        ("cartpole", {"low": 0.0}, "does not apply"),
    ],
)
def test_unsupported_spaces_and_bad_options_are_refused_in_one_line(env, options, match):
    with pytest.raises(ValueError, match=match) as error:
        make_problem(env, **options)
    assert "\n" not in str(error.value)


def test_images_are_refused():
    image = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="192 components.*images"):
        SpaceGrid(image, "observation", bins=2)


def test_dict_and_tuple_spaces_are_flattened_in_order():
    problem = make_problem("tests.rl.toy_envs:ToyDict-v0", state_bins=4)
    assert problem.state_dims == (4, 4)  # "x" (Discrete 4), then "y" (Box, 4 bins on [0, 3])
    assert problem.encode_observation({"x": 2, "y": np.array([2.9])}).tolist() == [2, 3]
    copies = ReplicaEnvs(problem, 2)
    assert copies.reset([0, 1]).shape == (2, 2)
    space = gym.spaces.Tuple((gym.spaces.Discrete(3, start=1), gym.spaces.MultiDiscrete([2, 5])))
    grid = SpaceGrid(space, "action")
    assert grid.dims == (3, 2, 5)
    (value,) = grid.value(np.array([[2, 1, 4]]))
    assert value[0] == 3 and value[1].tolist() == [1, 4] and space.contains(value)


def test_exact_model_protocol_gives_value_iteration():
    problem = make_problem(TOY)
    model = exact_model(problem)
    assert is_exact_model(model) and is_exact_model(gym.make("rl/Inventory-v0"))
    q = value_iteration(model)
    assert q.shape == problem.shape
    np.testing.assert_allclose(model.transition.sum(axis=(-2, -1)), 1.0)
    # The corner is worth the most; the model's reward is the environment's mean reward.
    v = q.max(axis=(2, 3))
    assert v[3, 3] == v.max()
    env = toy_envs.Toy()
    env.reset(seed=0)
    rewards = []
    for _ in range(2000):  # from (2, 3), moving right: the corner with probability 0.8
        env.state = np.array([2, 3])
        rewards.append(env.step(np.array([2, 1]))[1])
    assert np.mean(rewards) == pytest.approx(model.reward[2, 3, 2, 1], abs=0.04)
    with pytest.raises(ValueError, match="does not expose an exact model"):
        exact_model(make_problem(BOX, **BOX_OPTIONS))
    assert exact_model(make_problem("inventory")).state_dims == make_problem("inventory").state_dims


@pytest.mark.parametrize("name", ["teql", "tlr", "tabular", "lora-vi", "dqn", "sac"])
def test_every_searching_agent_refuses_too_many_joint_actions(name):
    if name in ("dqn", "sac"):
        pytest.importorskip("torch")
    problem = make_problem(TOY)
    with pytest.raises(ValueError, match=r"9 joint actions, more than max_joint_actions=8"):
        _agent(name, problem, max_joint_actions=8)
    agent = _agent(name, problem, max_joint_actions=9)
    assert agent.greedy(np.zeros((1, 2), np.int64)).shape == (1, 2)


def test_synchronous_loop_gives_the_vector_results():
    vector = make_problem("cartpole")
    loop = dataclasses.replace(vector, vectorized=False)
    returns = []
    for problem in (vector, loop):
        streams = spawn_replicas([0, 1, 2])
        runner = Runner(problem, _agent("random", problem, seeds=(0, 1, 2)), streams)
        returns.append([r.returns for r in runner.episodes(0, 3)])
        runner.close()
    np.testing.assert_array_equal(returns[0], returns[1])


FAILING = "tests.rl.toy_envs:ToyFailing-v0"
WRONG_SHAPE = "tests.rl.toy_envs:ToyWrongShape-v0"


def test_an_error_while_estimating_the_reward_bound_names_the_episode_not_the_option():
    with pytest.raises(EnvFailure) as failed:
        make_problem(FAILING)
    assert str(failed.value) == (
        f"Environment {FAILING!r} failed in step() while estimating its reward bound "
        "(episode 0, seed 0): ZeroDivisionError: toy failure after 3 steps"
    )
    assert isinstance(failed.value.__cause__, ZeroDivisionError)


def test_an_error_of_a_replicas_step_names_the_environment_replica_and_seed(tmp_path):
    config = TrainConfig(
        env=FAILING,
        agent="tabular",
        out=str(tmp_path / "run"),
        seeds=2,
        seed=5,
        episodes=2,
        env_options={"reward_bound": 1.1, "reward_size": 1.0, "env_kwargs": {"fail_after": 7}},
    )
    with pytest.raises(EnvFailure) as failed:
        train(config)
    assert str(failed.value) == (
        f"Environment {FAILING!r} failed in step() of replica 0 (seed 5): "
        "ZeroDivisionError: toy failure after 7 steps"
    )
    assert isinstance(failed.value.__cause__, ZeroDivisionError)


def test_observations_of_the_wrong_shape_are_refused():
    with pytest.raises(EnvFailure, match="while observing its bounds: An observation"):
        make_problem(WRONG_SHAPE, state_bins=4, action_bins=3, reward_bound=1.0)
    given = {"low": -3.0, "high": 3.0}  # nothing to observe
    problem = make_problem(WRONG_SHAPE, state_bins=4, action_bins=3, reward_bound=1.0, **given)
    assert problem.observation_shape == (2,)
    with pytest.raises(EnvFailure) as failed:
        ReplicaEnvs(problem, 2, seeds=[3, 4]).reset([0, 1])
    assert str(failed.value) == (
        f"Environment {WRONG_SHAPE!r} failed in reset() of replica 0 (seed 3): The observation "
        f"has shape (1,); the observation space of {WRONG_SHAPE!r} has shape (2,)."
    )
    with pytest.raises(ObservationShapeError, match=r"has shape \(3,\); the observation space"):
        problem.encode_observation(np.zeros(3))
    dict_problem = make_problem("tests.rl.toy_envs:ToyDict-v0", state_bins=3)
    assert dict_problem.observation_shape == (2,)  # flattened
    with pytest.raises(ObservationShapeError, match=r"has shape \(3,\).* has shape \(2,\) \(fla"):
        dict_problem.encode_observation({"x": 1, "y": np.zeros(2)})
    np.testing.assert_array_equal(dict_problem.encode_observation({"x": 1, "y": [2.5]}), [1, 2])


def _latest(name):
    """The newest registered version of a Gymnasium environment (Taxi-v3 became Taxi-v4)."""
    versions = [spec.version for spec in gym.registry.values() if spec.name == name]
    return f"{name}-v{max(v for v in versions if v is not None)}"


CLASSICS = {
    "CartPole-v1": ((6, 6, 6, 6), (2,), None),
    "MountainCar-v0": ((6, 6), (3,), None),
    "Acrobot-v1": ((6,) * 6, (3,), None),
    "Pendulum-v1": ((6, 6, 6), (5,), None),
    _latest("Taxi"): ((500,), (6,), None),
    "FrozenLake-v1": ((16,), (4,), None),
    _latest("CliffWalking"): ((48,), (4,), 1000),
    "Blackjack-v1": ((32, 11, 2), (2,), 1000),
}


@pytest.mark.parametrize("env", list(CLASSICS))
def test_stock_gymnasium_classics_train_out_of_the_box(tmp_path, env):
    cap = CLASSICS[env][2]
    problem = make_problem(env)
    assert (problem.state_dims, problem.action_dims, problem.max_episode_steps) == CLASSICS[env]
    config = TrainConfig(env=env, agent="tabular", out=str(tmp_path / "run"), seeds=2, episodes=3)
    result = train(config)
    assert result.episodes_done == 3 and not result.interrupted
    run = rl.load_run(tmp_path / "run")  # config.json rebuilds the same grid and cap
    assert run.problem.shape == problem.shape and run.problem.max_episode_steps == cap
    env_copy = problem.make_env()
    observations = np.stack([problem.as_array(env_copy.reset(seed=s)[0]) for s in range(5)])
    np.testing.assert_array_equal(run.problem.encode(observations), problem.encode(observations))
    assert env_copy.action_space.contains(run.policy(env_copy.reset(seed=0)[0]))


def test_gymnasium_cartpole_is_stepped_as_single_copies():
    problem = make_problem("CartPole-v1")
    assert problem.vectorized  # it has a vector entry point, which rejects autoreset_mode
    copies = ReplicaEnvs(problem, 2)
    assert copies.vector is None
    single = gym.make("CartPole-v1")
    np.testing.assert_array_equal(copies.reset([3, 4])[0], single.reset(seed=3)[0])


def test_the_reward_bound_and_size_estimates_share_one_pass_of_random_episodes():
    """CliffWalking declares neither: both are estimated from the same episodes, played once."""
    from rl.problems.from_gymnasium import ESTIMATE_EPISODES

    resets = []

    class Counting(gym.Wrapper):
        def reset(self, **kwargs):
            resets.append(kwargs.get("seed"))
            return super().reset(**kwargs)

    problem = make_problem(lambda: Counting(gym.make("CliffWalking-v1")))
    assert (problem.reward_bound_source, problem.reward_size_source) == ("estimated", "estimated")
    assert resets == list(range(ESTIMATE_EPISODES))
