"""Tests of the stacked pieces of the deep agents: Adam, devices (rl/agents/deep/_stacked.py)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as hs  # noqa: E402

from rl.agents.deep import _stacked as st  # noqa: E402
from rl.agents.deep.dqn import DQNAgent, DQNConfig  # noqa: E402
from rl.agents.deep.sac import DiscreteSACConfig  # noqa: E402
from tests.rl.agent_drivers import make_problem, streams  # noqa: E402


def test_stacked_adam_is_torch_adam_per_replica():
    """Bitwise: each row steps as torch.optim.Adam on that row alone, with its own step count."""
    rng = np.random.default_rng(0)
    replicas, size = 3, 7
    start = rng.normal(size=(replicas, size)).astype(np.float32)
    flat = torch.from_numpy(start.copy())
    adam = st.StackedAdam(flat, 1e-2, st.Layout([(size,)]))
    alone = [torch.from_numpy(start[i].copy()).requires_grad_(True) for i in range(replicas)]
    optimizers = [torch.optim.Adam([p], lr=1e-2, foreach=False) for p in alone]
    # column 0 never has a gradient; column 1's squares are subnormal, column 2's underflow
    scale = np.array([0.0, 1e-21, 1e-24, 1.0, 1.0, 1.0, 1.0], dtype=np.float32)
    for _ in range(25):
        grads = rng.normal(size=(replicas, size)).astype(np.float32) * scale
        active = np.flatnonzero(rng.random(replicas) < 0.7)
        if not len(active):
            continue
        adam.step(torch.from_numpy(grads[active]), st.rows_of(active, replicas, flat.device))
        for i in active:
            alone[i].grad = torch.from_numpy(grads[i])
            optimizers[i].step()
    assert len(set(adam.steps.tolist())) > 1  # the replicas' step counts differ
    moments = adam.host_moments()
    for i in range(replicas):
        np.testing.assert_array_equal(flat[i].numpy(), alone[i].detach().numpy())
        saved = adam.replica_state(i, moments)["state"][0]
        reference = optimizers[i].state[alone[i]]
        assert saved["step"] == reference["step"].numpy()
        np.testing.assert_array_equal(saved["exp_avg"], reference["exp_avg"].numpy())
        np.testing.assert_array_equal(saved["exp_avg_sq"], reference["exp_avg_sq"].numpy())


@settings(max_examples=30, deadline=None)
@given(
    hs.integers(1, 4), hs.integers(1, 5), hs.integers(1, 9), hs.integers(1, 6), hs.integers(1, 7)
)
def test_backward_is_autograd(replicas, n_in, hidden, n_out, batch):
    """The written-out backpropagation of `st.backward` equals autograd's, replica by replica."""
    layout = st.mlp_layout(n_in, hidden, n_out)
    rng = np.random.default_rng([replicas, n_in, hidden, n_out, batch])
    rows = np.stack([st.init_mlp(n_in, hidden, n_out, rng) for _ in range(replicas)])
    flat = torch.from_numpy(rows).requires_grad_(True)
    inputs = torch.from_numpy(rng.random((replicas, n_in, batch)).astype(np.float32))
    weights = torch.from_numpy(rng.normal(size=(replicas, batch, n_out)).astype(np.float32))
    done = st.forward_pass(layout.views(flat), inputs)
    loss = (done.outputs.transpose(1, 2) * weights).sum()  # d loss / d outputs = weights
    (expected,) = torch.autograd.grad(loss, [flat])
    with torch.no_grad():
        got = st.backward(layout.views(flat), done, weights.transpose(1, 2))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
    row = st.forward(layout.views(flat), inputs.transpose(1, 2))
    torch.testing.assert_close(row, done.outputs.transpose(1, 2), rtol=0, atol=0)


@pytest.mark.parametrize("config_type", [DQNConfig, DiscreteSACConfig])
@pytest.mark.parametrize("device", ["cpux", "mps", "cpu:1", 3, "cuda:-1"])
def test_bad_device_names_field(config_type, device):
    with pytest.raises(ValueError, match="The 'device' parameter must be cpu, cuda or cuda:N"):
        config_type(device=device)


def test_missing_cuda_device_is_refused():
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match=f"this machine has {count} CUDA device"):
        DQNAgent(make_problem((3,), (2,)), DQNConfig(device=f"cuda:{count}"), streams(0))


@given(
    seeds=hs.lists(hs.integers(0, 2**32 - 1), min_size=1, max_size=6),
    epsilon=hs.floats(0.0, 1.0),
    n_actions=hs.integers(1, 300),
    count=hs.integers(1, 9),
)
@settings(max_examples=40, deadline=None)
def test_replica_draws_are_each_generators_own(seeds, epsilon, n_actions, count):
    """The compiled draws equal each generator's Python draws and leave it in the same state."""
    from rl.agents._explore_compiled import typed_generators
    from rl.agents.deep._replica_draws import epsilon_draws, uniforms

    compiled = [np.random.default_rng(seed) for seed in seeds]
    python = [np.random.default_rng(seed) for seed in seeds]
    generators = typed_generators(compiled)
    rows = np.arange(len(seeds))[::-1].copy()  # any order of replicas
    joint, explored = np.full(len(seeds), -1), np.zeros(len(seeds), dtype=bool)
    epsilons = np.full(len(seeds), epsilon)
    epsilon_draws(generators, rows, epsilons, n_actions, joint, explored)
    drawn = np.empty((len(seeds), count))
    uniforms(generators, rows, drawn)
    for k, i in enumerate(rows):
        explores = python[i].random() < epsilon
        assert explored[k] == explores
        assert joint[i] == (python[i].integers(n_actions) if explores else -1)
        np.testing.assert_array_equal(drawn[k], python[i].random(count))
        assert compiled[i].bit_generator.state == python[i].bit_generator.state


def test_replay_records_hold_the_transitions_exactly():
    """A replica's only record comes back as stored, in each field's own dtype."""
    dims = (7, 40_000)
    replay = st.StackedReplay(2, 5, dims, torch.device("cpu"))
    rows = st.rows_of(np.array([1]), 2, torch.device("cpu"))
    stored = {
        "states": np.array([[6, 39_999]]),
        "actions": np.array([4095]),
        "rewards": np.array([-0.1]),
        "next_states": np.array([[0, 12_345]]),
        "terminated": np.array([True]),
    }
    replay.add(rows, stored)
    saved = replay.replica_state(1)
    assert saved["states"].dtype == np.int32 and saved["actions"].dtype == np.int64
    for key, value in stored.items():
        np.testing.assert_array_equal(saved[key], value.astype(replay.dtypes[key]))
    from rl.agents._explore_compiled import typed_generators

    sample = replay.sample(typed_generators([np.random.default_rng(0)] * 2), rows, 3)
    np.testing.assert_array_equal(sample.states[0].numpy(), np.repeat(stored["states"], 3, 0))
    np.testing.assert_array_equal(sample.actions[0].numpy(), [4095] * 3)
    assert sample.actions.dtype == torch.int64
    np.testing.assert_array_equal(sample.rewards[0].numpy(), np.float32(-0.1))
    with pytest.raises(ValueError, match="a mode has 16777217 values"):
        st.StackedReplay(1, 5, (2**24 + 1,), torch.device("cpu"))


def test_replay_memory_check_counts_the_records_bytes(monkeypatch):
    """The check sizes a transition as its float32 record: 2 D_S + 3 columns of 4 bytes."""
    monkeypatch.setattr("rl.validation.memory_budget", lambda device=None: 28 * 1000)
    problem = make_problem((3, 4), (2,))  # D_S = 2: records of 7 columns, 28 bytes
    assert st.record_bytes(2) == 28
    DQNAgent(problem, DQNConfig(hidden=1, buffer_size=1000), streams(0))
    with pytest.raises(ValueError, match="The 'buffer_size' parameter makes the replay buffers"):
        DQNAgent(problem, DQNConfig(hidden=1, buffer_size=1001), streams(0))
