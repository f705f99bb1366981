"""The compiled engine (rl.agents.tensor._step_compiled) against the NumPy/TensorLy reference."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rl.agents.base import Transitions
from rl.agents.readings import TABULAR_LIKE_STEPS, reading
from rl.agents.tensor import _visits_compiled, visits
from rl.agents.tensor.state import resolve_engine
from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
from rl.agents.tensor.tlr import TLRAgent, TLRConfig
from rl.problems import make_problem
from rl.seeding import spawn_replicas

RELEASED = reading("teql", "released").agent_params("cartpole")
"""TEQL's released reading on CartPole."""

STABLE = {"update": "stable", "count_before_update": True, "alpha0": 0.5, "max_inner": 1}
TEQL_CASES = {
    "paper-I1-bound": {"max_inner": 1},
    "paper-I5-bound": {"max_inner": 5, "alpha0": 0.05},
    "paper-I1-free": {"max_inner": 1, "bounded": False, "count_before_update": True},
    "paper-I5-free": {"max_inner": 5, "bounded": False, "count_before_update": True},
    "released-I1": {**RELEASED, "max_inner": 1},
    "released-I5": RELEASED,
    "released-I5-bound": {
        **RELEASED,
        "bounded": True,
        "lam": 1e-3,
    },
    "released-sparse": {
        **RELEASED,
        "visit_storage": "sparse",
    },
    "released-bin-centres": {
        **RELEASED,
        "continuous_random_actions": False,
    },
    "stable-I1-bound": {**STABLE, "max_inner": 1},
    "stable-I5-bound": {**STABLE, "max_inner": 5, "alpha0": 0.3},
    "stable-I5-free": {**STABLE, "max_inner": 5, "alpha0": 0.3, "bounded": False},
    "stable-I1-pre-visit": {**STABLE, "count_before_update": False, "lam": 1e-5},
    "stable-sparse": {**STABLE, "visit_storage": "sparse", "kappa": 0.0},
    "stable-entry-steps": {
        **STABLE,
        "step_count": "entry",
        "kappa": 0.01,
        "footprint_power": 2.0,
        "init_actions": "identity",
        "bonus_unit": 7.0,
    },
}


def _agent(cls, config_cls, problem, seeds, engine, **params):
    streams = [s.agent for s in spawn_replicas(list(seeds))]
    return cls(problem, config_cls(**params, engine=engine), streams)


def _pair(cls, config_cls, problem, seeds, **params):
    return tuple(
        _agent(cls, config_cls, problem, seeds, engine, **params)
        for engine in ("reference", "compiled")
    )


def _random_batch(rng, problem, states, actions, active):
    replicas = len(states)
    next_states = rng.integers(0, problem.state_dims, size=states.shape)
    rewards = rng.normal(scale=2.0, size=replicas)
    terminated = rng.random(replicas) < 0.05
    return Transitions(states, actions, rewards, next_states, terminated, active)


def _assert_close(ours, theirs):
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


def _step_by_step(reference, compiled, problem, steps, seed=0):
    """From identical states, one act + observe on both engines: compare everything."""
    rng = np.random.default_rng(seed)
    replicas = reference.replicas
    records = []
    compiled.on_update = reference.on_update = None
    if isinstance(reference, TEQLAgent):
        reference.on_update = lambda record: records.append(("reference", record))
        compiled.on_update = lambda record: records.append(("compiled", record))
    states = rng.integers(0, problem.state_dims, size=(replicas, len(problem.state_dims)))
    moved = 0
    for _ in range(steps):
        compiled.load_state_dict(reference.state_dict())
        active = rng.random(replicas) < 0.9
        greedy = active & (rng.random(replicas) < 0.2)
        actions = reference.act(states, active, greedy)
        np.testing.assert_array_equal(compiled.act(states, active, greedy)[active], actions[active])
        _assert_same_draws(reference, compiled, active)
        learning = active & ~greedy
        if learning.any():
            batch = _random_batch(rng, problem, states, actions, learning)
            index = np.concatenate([states, actions], axis=1)
            rows = reference.q_.rows(index)
            reference.observe(batch)
            compiled.observe(batch)
            _assert_close(compiled.q_.rows(index), reference.q_.rows(index))
            after = reference.q_.rows(index)
            moved += any(not np.array_equal(a, b) for a, b in zip(rows, after, strict=True))
            for ours, theirs in zip(compiled.q_.factors, reference.q_.factors, strict=True):
                _assert_close(ours, theirs)
            np.testing.assert_array_equal(compiled.steps_, reference.steps_)
            np.testing.assert_array_equal(compiled.epsilon_, reference.epsilon_)
            states = batch.next_states
        _assert_same_generators(reference, compiled)
        if isinstance(reference, TEQLAgent):
            _assert_same_visits(reference, compiled, states)
            _assert_same_records(records, learning)
            records.clear()
    assert moved > steps // 10  # the updates moved rows (bounded ones saturate often)


def _assert_same_draws(reference, compiled, active):
    """Continuous random actions: the same replicas drew the same values on both engines."""
    ours, theirs = compiled.continuous_actions_, reference.continuous_actions_
    assert (ours is None) == (theirs is None)
    if theirs is None:
        return
    np.testing.assert_array_equal(ours.mask[active], theirs.mask[active])
    np.testing.assert_array_equal(ours.values[theirs.mask], theirs.values[theirs.mask])


def _assert_same_generators(reference, compiled):
    for ours, theirs in zip(compiled.state_.generators, reference.state_.generators, strict=True):
        assert ours.bit_generator.state == theirs.bit_generator.state


def _assert_same_visits(reference, compiled, states):
    flat = reference.flat_states(states)
    ours, theirs = compiled.visits_.rows(flat), reference.visits_.rows(flat)
    np.testing.assert_array_equal(ours.counts, theirs.counts)
    _assert_close(ours.delta, theirs.delta)


def _assert_same_records(records, learning):
    if not learning.any():
        assert records == []
        return
    (_, theirs), (_, ours) = records
    on = learning
    for field in ("states", "actions", "visits"):
        np.testing.assert_array_equal(getattr(ours, field)[on], getattr(theirs, field)[on])
    for field in ("targets", "before", "after", "step_size"):
        _assert_close(getattr(ours, field)[on], getattr(theirs, field)[on])
    assert ours.f_max == theirs.f_max


@pytest.mark.parametrize("case", list(TEQL_CASES))
def test_teql_compiled_equals_reference_step_by_step(case):
    problem = make_problem("cartpole")
    reference, compiled = _pair(TEQLAgent, TEQLConfig, problem, (0, 1, 2), **TEQL_CASES[case])
    assert (reference.engine_.name, compiled.engine_.name) == ("reference", "compiled")
    _step_by_step(reference, compiled, problem, steps=150)


@pytest.mark.parametrize("continuous", [False, True], ids=["bin-centres", "continuous"])
@pytest.mark.parametrize("env", ["cartpole", "pendulum"])
def test_tlr_compiled_equals_reference_step_by_step(env, continuous):
    problem = make_problem(env)
    params = {"epsilon_start": 0.5, "continuous_random_actions": continuous}
    reference, compiled = _pair(TLRAgent, TLRConfig, problem, (0, 1, 2), **params)
    _step_by_step(reference, compiled, problem, steps=150)


def test_continuous_random_actions_are_credited_by_endpoint_rounding():
    """A drawn action a in [low, high) is credited to rint((a - low) / (high - low) (n - 1))."""
    problem = make_problem("pendulum")
    for engine in ("reference", "compiled"):
        agent = _agent(TLRAgent, TLRConfig, problem, range(64), engine, epsilon_start=1.0,
                       continuous_random_actions=True)  # fmt: skip
        states = np.zeros((64, 2), dtype=np.int64)
        actions = agent.act(states, np.ones(64, bool))
        drawn = agent.continuous_actions_
        assert drawn.mask.all()
        assert ((drawn.values >= -2.0) & (drawn.values < 2.0)).all()
        expected = np.rint((drawn.values[:, 0] + 2.0) / 4.0 * 9).astype(np.int64)
        np.testing.assert_array_equal(actions[:, 0], expected)
        greedy = agent.act(states, np.ones(64, bool), np.ones(64, bool))
        assert not agent.continuous_actions_.mask.any() and greedy.shape == (64, 1)


def test_continuous_random_actions_need_an_action_interval():
    with pytest.raises(ValueError, match="continuous action interval"):
        _agent(TLRAgent, TLRConfig, make_problem("lowrank"), (0,), "auto",
               continuous_random_actions=True)  # fmt: skip


@pytest.mark.parametrize("cls", [TEQLAgent, TLRAgent])
def test_joint_actions_compiled_equals_reference(cls):
    """Inventory with two locations: 9 joint actions over two action modes."""
    problem = make_problem("inventory", env_kwargs={"n_locations": 2, "max_order": 2})
    config_cls = TEQLConfig if cls is TEQLAgent else TLRConfig
    params = {"epsilon_start": 0.3, "gamma": 0.9}
    reference, compiled = _pair(cls, config_cls, problem, (5, 6), **params)
    _step_by_step(reference, compiled, problem, steps=100)


def test_stable_reading_on_joint_actions_compiled_equals_reference():
    """The stable reading's tabular-like steps over inventory's two action modes.

    Identity start over joint actions and footprint shares (the steps of a one-state-mode
    problem, `Reading.one_state_mode`, here on several state modes to cover every mode).
    """
    problem = make_problem("inventory", env_kwargs={"n_locations": 2, "max_order": 2})
    params = {**reading("teql", "stable").agent_params("inventory"), **TABULAR_LIKE_STEPS}
    reference, compiled = _pair(TEQLAgent, TEQLConfig, problem, (5, 6), **params)
    assert reference.mode_scale == (1.0, 1.0, 1.0, (9 / 50) ** 2, (9 / 50) ** 2)
    _step_by_step(reference, compiled, problem, steps=100)


def test_whole_trajectories_agree_without_resynchronizing():
    """Released TEQL, 3 replicas, 2,000 steps fed each engine's own actions.

    Summation order differs (NumPy's pairwise sums and BLAS against a plain
    loop), so the factors differ by a few ulps; measured here they stay within
    1e-9 and every action agrees (docs/agents.md).
    """
    problem = make_problem("cartpole")
    reference, compiled = _pair(TEQLAgent, TEQLConfig, problem, (0, 1, 2), **RELEASED)
    rng = np.random.default_rng(3)
    states = rng.integers(0, problem.state_dims, size=(3, 4))
    active = np.ones(3, bool)
    for _ in range(2000):
        actions = reference.act(states, active)
        np.testing.assert_array_equal(compiled.act(states, active), actions)
        batch = _random_batch(rng, problem, states, actions, active)
        reference.observe(batch)
        compiled.observe(batch)
        states = batch.next_states
    for ours, theirs in zip(compiled.q_.factors, reference.q_.factors, strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-9)


def _replica_run(cls, config_cls, problem, seeds, steps, **params):
    """Each replica's inputs come from its own seed, so they do not depend on B."""
    agent = _agent(cls, config_cls, problem, seeds, "compiled", **params)
    inputs = [np.random.default_rng(1000 + seed) for seed in seeds]
    states = np.stack([g.integers(0, problem.state_dims) for g in inputs])
    for _ in range(steps):
        draws = [
            (g.random(), g.random(), g.integers(0, problem.state_dims), g.normal()) for g in inputs
        ]
        active = np.array([d[0] < 0.85 for d in draws])
        greedy = active & np.array([d[1] < 0.2 for d in draws])
        actions = agent.act(states, active, greedy)
        next_states = np.stack([d[2] for d in draws])
        rewards = np.array([d[3] for d in draws])
        learning = active & ~greedy
        agent.observe(Transitions(states, actions, rewards, next_states, ~active, learning))
        states = np.where(active[:, None], next_states, states)
    return agent


@pytest.mark.parametrize(
    ("cls", "params"),
    [
        (TEQLAgent, {}),
        (TEQLAgent, RELEASED),
        (TEQLAgent, STABLE),
        (TLRAgent, {}),
        (TLRAgent, {"continuous_random_actions": True}),
    ],
    ids=["teql-paper", "teql-released", "teql-stable", "tlr", "tlr-continuous"],
)
def test_a_seeds_trajectory_does_not_depend_on_the_other_replicas(cls, params):
    problem = make_problem("cartpole")
    config_cls = TEQLConfig if cls is TEQLAgent else TLRConfig
    if cls is TEQLAgent:
        params = {**params, "visit_storage": "sparse"}
    alone = _replica_run(cls, config_cls, problem, (7,), 300, **params)
    among = _replica_run(cls, config_cls, problem, (3, 7, 11, 12), 300, **params)
    again = _replica_run(cls, config_cls, problem, (7,), 300, **params)
    for f_alone, f_among, f_again in zip(
        alone.q_.factors, among.q_.factors, again.q_.factors, strict=True
    ):
        assert np.array_equal(f_alone[0], f_among[1])
        assert np.array_equal(f_alone, f_again)
    assert alone.epsilon_[0] == among.epsilon_[1] and alone.steps_[0] == among.steps_[1]
    if cls is TEQLAgent:  # the same rows, in the same order of first visit
        state_alone, state_among = alone.visits_.state_dict(), among.visits_.state_dict()
        mine = state_among["keys"] // alone.n_states == 1
        keys = state_among["keys"][mine] - among.n_states
        np.testing.assert_array_equal(keys, state_alone["keys"])
        for name in ("counts", "delta"):
            assert np.array_equal(state_among[name][mine], state_alone[name])


def test_checkpoint_round_trip_continues_bitwise():
    problem = make_problem("cartpole")
    params = {**RELEASED, "visit_storage": "sparse"}
    agent = _replica_run(TEQLAgent, TEQLConfig, problem, (1, 2), 100, **params)
    state = agent.state_dict()
    for value in (*state["factors"], state["steps"], state["epsilon"], *state["visits"].values()):
        assert isinstance(value, np.ndarray)
    assert all(isinstance(s, dict) for s in state["rngs"])
    restored = _agent(TEQLAgent, TEQLConfig, problem, (1, 2), "compiled", **params)
    restored.load_state_dict(state)
    for key, saved in state["visits"].items():
        np.testing.assert_array_equal(restored.visits_.state_dict()[key], saved)
    states = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    on = np.ones(2, bool)
    for _ in range(50):
        actions = agent.act(states, on)
        np.testing.assert_array_equal(restored.act(states, on), actions)
        batch = Transitions(states, actions, np.ones(2), states[::-1].copy(), ~on, on)
        agent.observe(batch)
        restored.observe(batch)
    for ours, theirs in zip(restored.q_.factors, agent.q_.factors, strict=True):
        assert np.array_equal(ours, theirs)


@pytest.mark.parametrize("cls", [TEQLAgent, TLRAgent])
def test_divergence_raises_the_reference_error_and_changes_nothing(cls):
    problem = make_problem("lowrank")
    config_cls = TEQLConfig if cls is TEQLAgent else TLRConfig
    messages = []
    for engine in ("reference", "compiled"):
        agent = _agent(cls, config_cls, problem, (0, 1), engine, gamma=0.9)
        agent.q_.factors[0][1] = np.inf
        old = [f.copy() for f in agent.q_.factors]
        batch = Transitions(
            np.zeros((2, 3), np.int64), np.zeros((2, 2), np.int64), np.zeros(2),
            np.zeros((2, 3), np.int64), np.zeros(2, bool), np.ones(2, bool),
        )  # fmt: skip
        with pytest.raises(ValueError, match=f"{cls.__name__} diverged") as error:
            agent.observe(batch)
        messages.append(str(error.value))
        for new, before in zip(agent.q_.factors, old, strict=True):
            np.testing.assert_array_equal(new, before)
    assert messages[0] == messages[1]
    if cls is TEQLAgent:  # bounded by default, so only the remedies it does not use yet
        assert "'alpha0'" in messages[0] and "stable" in messages[0]
        assert "bounded" not in messages[0]


def test_engine_choice():
    problem = make_problem("lowrank")
    assert _agent(TEQLAgent, TEQLConfig, problem, (0,), "auto").engine_.name == "compiled"
    assert _agent(TLRAgent, TLRConfig, problem, (0,), "reference").engine_.name == "reference"
    with pytest.raises(ValueError, match="'engine'"):
        TEQLConfig(engine="fast")
    with pytest.raises(ValueError, match="'engine'"):
        resolve_engine("compiled", [np.zeros((1, 2, 2), np.float32)])
    assert resolve_engine("auto", [np.zeros((1, 2, 2), np.float32)]) == "reference"


@pytest.mark.parametrize("kernels", [_visits_compiled, visits], ids=["compiled", "numpy"])
def test_hash_table_kernels_find_what_they_insert(kernels):
    row_keys = np.full(8, visits.EMPTY, dtype=np.int64)
    used = np.zeros(1, dtype=np.int64)
    keys, slot_rows = kernels.table_rebuild(row_keys, 0, 16)
    table = visits.VisitArrays(
        keys, slot_rows, row_keys, np.zeros((8, 1), np.int64), np.zeros((8, 1)), used
    )
    wanted = np.array([5, 2**62, 0, 5, 17 * 2**40], dtype=np.int64)
    rows = kernels.table_rows(table, wanted, np.ones(5, bool), True)
    np.testing.assert_array_equal(rows, [0, 1, 2, 0, 3])
    assert used[0] == 4
    found = kernels.table_rows(table, np.array([2**62, 6]), np.ones(2, bool), False)
    np.testing.assert_array_equal(found, [1, -1])
    rebuilt = kernels.table_rebuild(row_keys, 4, 16)  # the same layout from either twin
    expected = _visits_compiled.table_rebuild(row_keys, 4, 16)
    np.testing.assert_array_equal(np.stack(rebuilt), np.stack(expected))
    np.testing.assert_array_equal(np.stack(rebuilt), np.stack([keys, slot_rows]))


def test_the_reference_engine_imports_no_compiled_code():
    """tensorq, ``import rl`` and a reference TEQL that acts and learns import no Numba.

    The environments' and the grid's kernels are `rl.jit.kernel`s: they load
    Numba the first time they run, and constructing a problem runs none.
    """
    script = textwrap.dedent("""
        import sys
        import numpy as np
        import tensorq
        assert "numba" not in sys.modules
        from rl.agents.base import Transitions
        from rl.agents.tensor.teql import TEQLAgent, TEQLConfig
        from rl.problems import make_problem
        from rl.seeding import spawn_replicas

        problem = make_problem("cartpole")
        config = TEQLConfig(engine="reference", visit_storage="sparse")
        agent = TEQLAgent(problem, config, [s.agent for s in spawn_replicas([0, 1])])
        states, active = np.zeros((2, 4), dtype=np.int64), np.ones(2, dtype=bool)
        actions = agent.act(states, active)
        agent.observe(Transitions(states, actions, np.ones(2), states, ~active, active))
        assert agent.visits_.visited == 2
        assert "numba" not in sys.modules
        compiled = ("tensorq._compiled", "rl.agents.tensor._step_compiled",
                    "rl.agents.tensor._compiled_engine", "rl.agents._explore_compiled",
                    "rl.agents.tensor._visits_compiled", "rl.agents.tensor._euge_compiled",
                    "rl.loop.fused")
        print(sorted(name for name in compiled if name in sys.modules))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"
