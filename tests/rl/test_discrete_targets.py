"""TEQL on Gymnasium's discrete problems (Taxi, CliffWalking, FrozenLake, Blackjack).

`analysis.teql_dynamics` trains one replica and measures the Q-matrix
Q = S A^T; docs/discrete-problems.md has the full
runs these short ones are cut from.
"""

import gymnasium as gym
import numpy as np
import pytest

from analysis.teql_dynamics import run
from rl.agents.base import Transitions
from rl.agents.readings import AGENT_STEPS, TABULAR_LIKE_STEPS, reading
from rl.agents.tensor.agent import identity_action_factors
from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
from rl.problems import make_problem
from rl.runs.config import TrainConfig, resolve_agent, resolve_settings
from rl.seeding import spawn_replicas


def test_taxi_action_rows_collapse_with_equal_mode_steps():
    """The diagnosis on Taxi: with every mode's step equal the action rows become collinear.

    With the steps of the paper's problems (one step for every row, decaying in
    agent steps, uniform start) the six action rows point the same way after 60
    episodes (smallest cosine > 0.99) and Q is numerically rank 1 (second singular
    value under 1% of the first), so every state ranks the actions alike
    (docs/discrete-problems.md).
    """
    plain = run("Taxi-v4", "teql", dict(AGENT_STEPS), episodes=60, every=60, eval_episodes=1)[-1]
    assert plain["min_cos"] > 0.99
    assert plain["sv"][0] < 0.01


def test_taxi_action_rows_stay_orthogonal_with_the_stable_readings_steps():
    """The stable reading's steps on Taxi (orthogonal start, footprint and entry-count
    steps): after 30 episodes the action rows are still orthogonal (|cosine| < 0.1;
    measured 0.000) and sigma_2 / sigma_1 of Q is 0.20, against 0.995 and 0.005 above."""
    steps = run("Taxi-v4", "teql", {}, episodes=30, every=30, eval_episodes=1)[-1]
    assert abs(steps["min_cos"]) < 0.1
    assert steps["sv"][0] > 0.1


def test_cliffwalking_learns_the_shortest_path_in_50_episodes():
    """The stable reading (its defaults there) walks -13 to -15 where it stalled at the cap.

    Measured: -13 from episode 30 on (seed 0; the optimum is -13). With the steps of
    the paper's problems the greedy walk never reaches the goal: -200 at the cap,
    also after 500 episodes on seeds 1-3.
    """
    greedy = run("CliffWalking-v1", "teql", {}, episodes=50, every=50, eval_episodes=1)[-1]
    assert greedy["greedy"] >= -20.0, greedy


def test_taxi_greedy_policy_delivers_after_200_episodes():
    """Taxi, stable reading, 200 episodes: the greedy taxi delivers from some of 20 starts.

    A policy that never delivers scores -200 (the cap) from every start, which the
    steps of the paper's problems still do after 5,000 episodes; tabular-like steps
    deliver from most starts after 200 episodes (measured -44; -189 after 100) and
    from all after 5,000 (+7.65).
    """
    greedy = run("Taxi-v4", "teql", {}, episodes=200, every=200, eval_episodes=20)[-1]["greedy"]
    assert greedy > -120.0, greedy


def test_frozenlake_greedy_policy_reaches_the_goal_after_1000_episodes():
    """FrozenLake-v1 (slippery), stable reading, seed 0: greedy success over 200 episodes.

    Random play succeeds 0.01 of the time, the optimum 0.74 (tabular Q-learning 0.740
    after 5,000 episodes). Measured 0.70 (0.68 after 500 episodes, 0.85 after 1,500);
    with eta_0 = 0.5 the greedy walk stayed safe but never arrived (0.0, the 200-step
    cap) until between episodes 2,000 and 2,500.
    """
    rows = run("FrozenLake-v1", "teql", {}, episodes=1000, every=1000, eval_episodes=200)
    assert rows[-1]["greedy"] >= 0.5, rows[-1]


def test_blackjack_greedy_policy_beats_random_play_after_5000_hands():
    """Blackjack-v1, stable reading, seed 0, 5,000 hands: greedy return over 2,000 hands.

    Random play returns -0.39 a hand, always standing -0.19, hitting below 12 -0.10,
    the dealer's rule (hitting below 17) -0.08 (50,000 hands each), the basic strategy
    about -0.05. Measured -0.05 (a 2,000-hand mean has a standard error of about 0.02).
    """
    rows = run("Blackjack-v1", "teql", {}, episodes=5000, every=5000, eval_episodes=2000)
    assert rows[-1]["greedy"] >= -0.12, rows[-1]


@pytest.mark.slow
def test_taxi_learns_to_deliver_from_every_start():
    """Taxi-v4, seed 0, 5,000 episodes (tabular Q-learning's budget): greedy >= 0 (optimum ~8).

    Measured: +7.65 over 100 starts (seeds 0-3: 7.73 +- 0.05); tabular 7.81.
    """
    greedy = run("Taxi-v4", "teql", {}, episodes=5000, every=5000, eval_episodes=100)[-1]
    assert greedy["greedy"] >= 0.0, greedy


@pytest.mark.parametrize(
    ("env", "steps"),
    [
        ("Taxi-v4", TABULAR_LIKE_STEPS),  # one state mode, no paper setting
        ("CliffWalking-v1", TABULAR_LIKE_STEPS),
        ("inventory", AGENT_STEPS),  # several state modes
        ("CartPole-v1", AGENT_STEPS),
        ("Blackjack-v1", AGENT_STEPS),
        ("cartpole", AGENT_STEPS),  # the paper's problems: their runs do not change
        ("pendulum", AGENT_STEPS),
    ],
)
def test_stable_reading_takes_tabular_like_steps_on_one_state_mode_off_the_paper(env, steps):
    settings = resolve_settings(TrainConfig(env=env, agent="teql", reading="stable", out="-"))
    chosen = {key: getattr(settings.agent, key) for key in steps}
    assert chosen == dict(steps)
    assert reading("teql", "stable").agent_params(env).items() >= AGENT_STEPS.items()


@pytest.mark.parametrize(
    ("env", "bound", "unit"),
    [
        ("Taxi-v4", 40.0, 40.0),  # one state mode: u = R_max
        ("FrozenLake-v1", 1.0, 1.0),
        ("CartPole-v1", 2.0, 2.0),  # several state modes: u = 2 reward sizes (1, estimated)
        ("Blackjack-v1", 2.0, 10 / 7),  # mean |r| 5/7 over the estimate's 14 steps
        ("goalgrid", 10.0, 0.2),  # 2 x its declared reward size, the step cost 0.1
        ("inventory", 24.6, 1.0),  # no reward size declared: u = 1, as printed
        ("cartpole", 73.0, 1.0),  # the paper's problems keep eq. (euge)
    ],
)
def test_stable_reading_counts_the_bonus_in_reward_bounds_on_one_state_mode_else_in_sizes(
    env, bound, unit
):
    """u = R_max on one state mode, 2 reward sizes on several, 1 on the paper's problems."""
    settings = resolve_settings(TrainConfig(env=env, agent="teql", reading="stable", out="-"))
    assert settings.problem.reward_bound == pytest.approx(bound, abs=0.5)
    assert settings.agent.bonus_unit == pytest.approx(unit, rel=1e-12)
    for other in ("paper", "released"):
        config = TrainConfig(env=env, agent="teql", reading=other, out="-")
        assert resolve_settings(config).agent.bonus_unit == 1.0
    overridden = TrainConfig(env=env, agent="teql", out="-", agent_params={"bonus_unit": 3.0})
    assert resolve_settings(overridden).agent.bonus_unit == 3.0


def test_the_bonus_unit_follows_a_scaling_of_every_reward():
    """Rewards times 10 on Pendulum-v1 (three state modes): bound, size and u times 10."""
    stable = reading("teql", "stable")

    def unit(scale):
        env = gym.wrappers.TransformReward(gym.make("Pendulum-v1"), lambda r: scale * r)
        problem = make_problem(env, state_bins=4, action_bins=3)
        params = stable.agent_params(
            problem.name, len(problem.state_dims), problem.reward_bound, problem.reward_size
        )
        return problem.reward_bound, problem.reward_size, params["bonus_unit"]

    one, ten = unit(1.0), unit(10.0)
    np.testing.assert_allclose(ten, 10 * np.array(one), rtol=1e-12)
    assert one[2] == pytest.approx(2 * one[1]) and one[2] < one[0] / 2  # 2 S, well below R_max


@pytest.mark.parametrize("dims", [(6,), (2,), (3, 3), (4, 2), (10,)])
def test_identity_action_factors_give_orthogonal_joint_rows_of_equal_norm(dims):
    rank, scale = 10, 0.7
    factors = identity_action_factors(dims, rank, scale)
    joint = factors[0]
    for factor in factors[1:]:
        joint = (joint[:, None, :] * factor[None, :, :]).reshape(-1, rank)
    gram = joint @ joint.T
    per_action = rank // int(np.prod(dims))
    np.testing.assert_array_equal(gram, np.eye(len(joint)) * scale**2 * per_action)


def test_identity_start_and_entry_steps_in_the_agent():
    problem = make_problem("FrozenLake-v1")
    streams = [s.agent for s in spawn_replicas([0, 1])]
    config = TEQLConfig(**reading("teql", "stable").agent_params("FrozenLake-v1", 1))
    agent = TEQLAgent(problem, config, streams)
    states, actions = (np.asarray(f) for f in agent.q_.factors)
    np.testing.assert_array_equal(actions[0], np.eye(4, 10) + np.eye(4, 10, 4))
    assert 0 < states.min() and states.max() < 1  # the state factor starts as before
    records = []
    agent.on_update = records.append
    rewards = np.zeros(2)
    for _ in range(3):  # the same entry three times: N = 1, 2, 3 after each visit
        batch_states, batch_actions = np.array([[5], [5]]), np.array([[2], [2]])
        agent.observe(Transitions(batch_states, batch_actions, rewards, batch_states,
                                  np.zeros(2, bool), np.ones(2, bool)))  # fmt: skip
    counts = [r.visits[0] for r in records]
    assert counts == [1, 2, 3]  # eta = eta_0 / (1 + kappa N), N the entry's post-visit count
    kappa = TABULAR_LIKE_STEPS["kappa"]
    expected = [TABULAR_LIKE_STEPS["alpha0"] / (1 + kappa * n) for n in counts]
    np.testing.assert_allclose([r.step_size[0] for r in records], expected, rtol=1e-15)


def test_teql_defaults_to_the_stable_reading():
    def chosen(env, agent, **extra):
        return resolve_agent(TrainConfig(env=env, agent=agent, out="-", **extra))[0].reading

    assert chosen("Taxi-v4", "teql") == "stable"
    assert chosen("inventory", "teql") == "stable"
    assert chosen("cartpole", "teql") == "stable"  # where the paper reading does not learn
    assert chosen("Taxi-v4", "teql", reading="paper") == "paper"
    assert chosen("Taxi-v4", "teql-released") == "released"
    assert chosen("Taxi-v4", "tlr") == "paper"


def test_more_parameters_than_a_table_warns_and_suggests_factoring():
    problem = make_problem("Taxi-v4")
    streams = [s.agent for s in spawn_replicas([0])]
    with pytest.warns(UserWarning, match=r"5060 parameters .* table of Q \(3000\).*factor"):
        agent = TEQLAgent(problem, TEQLConfig(), streams)
    assert agent.n_params == 5060 and np.prod(problem.shape) == 3000
