"""Small user environments, registered on import as a user's package would register its own.

``tests.rl.toy_envs:Toy-v0`` (a 4 x 4 grid with a two-component action and an
exact model), ``tests.rl.toy_envs:ToyBox-v0`` (Box spaces, unbounded
observations, no declared reward bound), ``tests.rl.toy_envs:ToyDict-v0`` (a
Dict observation), ``tests.rl.toy_envs:ToyVideo-v0`` (renders ``rgb_array``),
``tests.rl.toy_envs:ToyText-v0`` (an unsupported space),
``tests.rl.toy_envs:ToyFailing-v0`` (``step`` raises) and
``tests.rl.toy_envs:ToyWrongShape-v0`` (observations of the wrong shape).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

SIZE = 4
SLIP = 0.2


class Toy(gym.Env):
    """Walk on a 4 x 4 grid to the corner (3, 3); each action component moves one axis.

    State (x, y); action (dx + 1, dy + 1) in {0, 1, 2}^2; with probability
    ``SLIP`` the move fails. Reward 1 in the corner, -0.05 per non-zero move
    component. Never terminates (truncated after 20 steps when registered).
    """

    observation_space = spaces.MultiDiscrete([SIZE, SIZE])
    action_space = spaces.MultiDiscrete([3, 3])
    state_dims, action_dims, gamma, reward_bound = (SIZE, SIZE), (3, 3), 0.9, 1.1

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state = self.np_random.integers(0, SIZE, size=2)
        return self.state.copy(), {}

    def step(self, action):
        moved = np.clip(self.state + np.asarray(action) - 1, 0, SIZE - 1)
        if self.np_random.random() >= SLIP:
            self.state = moved
        reward = float(np.all(self.state == SIZE - 1)) - 0.05 * np.count_nonzero(
            np.asarray(action) != 1
        )
        return self.state.copy(), reward, False, False, {}

    @property
    def transition(self):
        p = np.zeros((SIZE, SIZE, 3, 3, SIZE, SIZE))
        for x, y, a, b in np.ndindex(SIZE, SIZE, 3, 3):
            nx, ny = min(max(x + a - 1, 0), SIZE - 1), min(max(y + b - 1, 0), SIZE - 1)
            p[x, y, a, b, nx, ny] += 1 - SLIP
            p[x, y, a, b, x, y] += SLIP
        return p

    @property
    def reward(self):
        # The expected reward of a move: in the corner after it with probability p.
        p = self.transition[..., SIZE - 1, SIZE - 1]
        cost = 0.05 * ((np.arange(3) != 1)[:, None].astype(float) + (np.arange(3) != 1))
        return p - cost


class ToyBox(gym.Env):
    """Keep a point near 0: observation Box(-inf, inf, (2,)), action Box(-1, 1, (1,)).

    Position and velocity; the action pushes the velocity. Reward ``-x^2``;
    terminates when |x| > 2. No ``reward_bound`` attribute.
    """

    observation_space = spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.state = self.np_random.uniform(-0.5, 0.5, size=2)
        return self.state.astype(np.float32), {}

    def step(self, action):
        x, v = self.state
        v = 0.9 * v + 0.2 * float(np.clip(action[0], -1, 1))
        x = x + 0.1 * v
        self.state = np.array([x, v])
        return self.state.astype(np.float32), -(x**2), bool(abs(x) > 2), False, {}


class ToyObserved(Toy):
    """`Toy` whose observation is ``_observe(state)`` of its (x, y) state (subclasses say how)."""

    def _observe(self, state):
        raise NotImplementedError

    def reset(self, *, seed=None, options=None):
        state, info = super().reset(seed=seed)
        return self._observe(state), info

    def step(self, action):
        state, *rest = super().step(action)
        return (self._observe(state), *rest)


class ToyDict(ToyObserved):
    """`Toy` with a Dict observation ``{"x": Discrete(4), "y": Box(0, 3, (1,))}``."""

    observation_space = spaces.Dict({"x": spaces.Discrete(SIZE), "y": spaces.Box(0, 3, (1,))})

    def _observe(self, state):
        return {"x": int(state[0]), "y": np.array([state[1]], dtype=np.float32)}


class ToyVideo(Toy):
    """`Toy` that renders ``rgb_array`` frames (the agent's cell lit on a 4 x 4 board)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 4}

    def __init__(self, render_mode=None):
        self.render_mode = render_mode

    def render(self):
        frame = np.zeros((8 * SIZE, 8 * SIZE, 3), dtype=np.uint8)
        x, y = self.state
        frame[8 * x : 8 * x + 8, 8 * y : 8 * y + 8] = 255
        return frame


class ToyText(Toy):
    """`Toy` with an unsupported Text observation space."""

    observation_space = spaces.Text(8)


class ToyFailing(Toy):
    """`Toy` whose ``step`` raises ZeroDivisionError at the ``fail_after``-th step of an episode.

    It declares no reward bound, so that estimating one steps it.
    """

    reward_bound = None

    def __init__(self, fail_after=3):
        self.fail_after = fail_after

    def reset(self, *, seed=None, options=None):
        self.steps = 0
        return super().reset(seed=seed, options=options)

    def step(self, action):
        self.steps += 1
        if self.steps == self.fail_after:
            raise ZeroDivisionError(f"toy failure after {self.steps} steps")
        return super().step(action)


class ToyWrongShape(ToyBox):
    """`ToyBox` on a bounded Box (2,) observation space that returns observations of shape (1,)."""

    observation_space = spaces.Box(-3.0, 3.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        observation, info = super().reset(seed=seed, options=options)
        return observation[:1], info

    def step(self, action):
        observation, *rest = super().step(action)
        return (observation[:1], *rest)


_REGISTERED = (
    ("Toy", 20),
    ("ToyBox", 30),
    ("ToyDict", 20),
    ("ToyVideo", 20),
    ("ToyText", 20),
    ("ToyFailing", 20),
    ("ToyWrongShape", 30),
)
if "ToyRenamed-v1" not in gym.registry:  # a v0 that Gymnasium reports as replaced
    gym.register("ToyRenamed-v1", entry_point=f"{__name__}:Toy", max_episode_steps=20)
for _name, _steps in _REGISTERED:
    if f"{_name}-v0" not in gym.registry:
        gym.register(f"{_name}-v0", entry_point=f"{__name__}:{_name}", max_episode_steps=_steps)
