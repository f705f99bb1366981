"""Vector CartPole and Pendulum: equal to single environments, autoreset modes, freezing."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import rl  # noqa: F401  (registers the environments)
from rl.envs import BoundedPendulumVector, ContinuousCartPoleVector

VECTOR_IDS = ["rl/ContinuousCartPole-v0", "rl/BoundedPendulum-v0"]


def _actions(env_id, rng, obs, t):
    """Half the copies follow a stabilising feedback (long episodes), half act randomly."""
    b = obs.shape[0]
    if env_id == "rl/ContinuousCartPole-v0":
        feedback = np.clip(2.0 * obs[:, 2] + 0.5 * obs[:, 3] + 0.05 * obs[:, 1], -1, 1)
        noise = rng.uniform(-1, 1, b)
    else:
        feedback = np.clip(-20.0 * obs[:, 0] - 5.0 * obs[:, 1], -2, 2)
        noise = rng.uniform(-2, 2, b)
    use_feedback = (np.arange(b) % 2 == 0) & (t % 7 != 0)
    return np.where(use_feedback, feedback, noise)[:, None]


@pytest.mark.parametrize("env_id", VECTOR_IDS)
def test_vector_equals_single_for_200_steps(env_id):
    b = 8
    vec = gym.make_vec(env_id, num_envs=b)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    singles = [gym.make(env_id) for _ in range(b)]
    obs, _ = vec.reset(seed=list(range(b)))
    single_obs = np.stack([env.reset(seed=i)[0] for i, env in enumerate(singles)])
    assert np.array_equal(obs, single_obs)
    ended = np.zeros(b, dtype=bool)
    rng = np.random.default_rng(0)
    n_terminated = n_truncated = 0
    for t in range(200):
        actions = _actions(env_id, rng, obs, t)
        obs, rewards, terms, truncs, _ = vec.step(actions)
        assert obs.dtype == np.float64 and rewards.dtype == np.float64
        for i, env in enumerate(singles):
            if ended[i]:  # NEXT_STEP: the step after an episode end resets
                o, r, te, tr = env.reset()[0], 0.0, False, False
            else:
                o, r, te, tr, _ = env.step(actions[i])
                assert isinstance(r, float)
            assert np.array_equal(obs[i], o), (t, i)
            assert rewards[i] == r and terms[i] == te and truncs[i] == tr, (t, i)
        ended = terms | truncs
        n_terminated += terms.sum()
        n_truncated += truncs.sum()
    assert n_terminated > 0 and n_truncated > 0


def test_int_seed_seeds_copy_i_with_seed_plus_i():
    vec = ContinuousCartPoleVector(num_envs=3)
    obs, _ = vec.reset(seed=10)
    single = gym.make("rl/ContinuousCartPole-v0")
    for i in range(3):
        assert np.array_equal(obs[i], single.reset(seed=10 + i)[0])


@pytest.mark.parametrize("cls", [ContinuousCartPoleVector, BoundedPendulumVector])
def test_disabled_mode_freezes_ended_copies(cls):
    b = 4
    vec = cls(num_envs=b, autoreset_mode=AutoresetMode.DISABLED)
    assert vec.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    env_id = (
        "rl/ContinuousCartPole-v0" if cls is ContinuousCartPoleVector else "rl/BoundedPendulum-v0"
    )
    singles = [gym.make(env_id) for _ in range(b)]
    obs, _ = vec.reset(seed=list(range(b)))
    for i, env in enumerate(singles):
        env.reset(seed=i)
    high = vec.single_action_space.high[0]
    # Copy 0 is pushed hard (ends early); the others get small actions.
    actions = np.array([[high], [0.01], [-0.01], [0.0]])
    single_done = np.zeros(b, dtype=bool)
    last = {}
    for _ in range(150):
        rng_states = [r.bit_generator.state for r in vec._rngs]
        before = vec.state.copy()
        was_ended = vec._terminated | vec._truncated
        flags_before = (vec._terminated.copy(), vec._truncated.copy())
        obs, rewards, terms, truncs, _ = vec.step(actions)
        for i in np.flatnonzero(was_ended):
            assert np.array_equal(obs[i], before[i])
            assert rewards[i] == 0.0
            assert terms[i] == flags_before[0][i] and truncs[i] == flags_before[1][i]
        assert [r.bit_generator.state for r in vec._rngs] == rng_states
        for i, env in enumerate(singles):
            if not single_done[i]:
                o, r, te, tr, _ = env.step(actions[i])
                assert np.array_equal(obs[i], o) and rewards[i] == r
                assert terms[i] == te and truncs[i] == tr
                single_done[i] = te or tr
                last[i] = o
    assert single_done.all()  # every copy ended (at least by truncation) and stayed frozen
    # reset_mask resets only copy 0, continuing its own stream like a single env's reset().
    frozen = vec.state.copy()
    mask = np.array([True, False, False, False])
    obs, _ = vec.reset(options={"reset_mask": mask})
    assert np.array_equal(obs[0], singles[0].reset()[0])
    assert np.array_equal(obs[1:], frozen[1:])
    assert vec.elapsed_steps[0] == 0 and (vec.elapsed_steps[1:] > 0).all()
    _, rewards, terms, truncs, _ = vec.step(np.zeros((b, 1)))
    assert rewards[1:].tolist() == [0.0] * 3 and (terms | truncs)[1:].all()
    assert not (terms[0] or truncs[0])
    # A plain reset resets all copies.
    vec.reset()
    assert (vec.elapsed_steps == 0).all() and not (vec._terminated | vec._truncated).any()


def test_bad_arguments():
    with pytest.raises(ValueError, match="autoreset_mode"):
        ContinuousCartPoleVector(num_envs=2, autoreset_mode=AutoresetMode.SAME_STEP)
    with pytest.raises(ValueError, match="num_envs"):
        BoundedPendulumVector(num_envs=0)
    vec = BoundedPendulumVector(num_envs=2)
    with pytest.raises(ValueError, match="seed"):
        vec.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="reset_mask"):
        vec.reset(options={"reset_mask": [True]})


def test_make_vec_passes_options():
    vec = gym.make_vec("rl/BoundedPendulum-v0", num_envs=5, autoreset_mode="Disabled")
    assert vec.num_envs == 5 and vec.max_episode_steps == 100
    assert vec.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    assert vec.observation_space.shape == (5, 2) and vec.action_space.shape == (5, 1)


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED])
def test_step_with_active_mask_leaves_inactive_copies_untouched(mode):
    b = 3
    vec = ContinuousCartPoleVector(num_envs=b, autoreset_mode=mode)
    single = gym.make("rl/ContinuousCartPole-v0")
    vec.reset(seed=[5, 6, 7])
    single.reset(seed=6)
    push = np.array([[1.0], [1.0], [1.0]])
    active = np.array([True, False, True])
    ended_at = None
    for t in range(60):
        before = (vec.state[1].copy(), vec.elapsed_steps[1], vec._rngs[1].bit_generator.state)
        obs, rewards, terms, truncs, _ = vec.step(push, active=active)
        assert np.array_equal(obs[1], before[0]) and rewards[1] == 0.0
        assert not (terms[1] or truncs[1])
        assert vec.elapsed_steps[1] == before[1]
        assert vec._rngs[1].bit_generator.state == before[2]
        if ended_at is None and terms[0]:
            ended_at = t
    assert ended_at is not None  # copy 0 fell and was auto-reset (or frozen) meanwhile
    # Copy 1, stepped now, continues exactly where it was: like a single env never idled.
    obs, rewards, _, _, _ = vec.step(push, active=np.array([False, True, False]))
    o, r, _, _, _ = single.step(push[1])
    assert np.array_equal(obs[1], o) and rewards[1] == r
    with pytest.raises(ValueError, match="'active'"):
        vec.step(push, active=np.array([True]))
