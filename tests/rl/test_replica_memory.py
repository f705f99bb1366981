"""Replicas are limited by memory, not by a constant (rl.validation.check_replicas)."""

import importlib.util

import numpy as np
import pytest

import rl.runs.training
import rl.validation as validation
from rl.runs.config import ConfigError, TrainConfig
from rl.runs.training import build


def test_state_bytes_walks_nested_states():
    state = {"factors": [np.zeros((2, 3)), np.zeros(4, dtype=np.int32)], "t": 5, "name": "x"}
    assert validation.state_bytes(state) == 2 * 3 * 8 + 4 * 4
    torch = pytest.importorskip("torch")
    assert validation.state_bytes({"w": torch.zeros(10)}) == 40


def test_the_cap_is_the_budget_over_the_bytes_per_replica(monkeypatch):
    monkeypatch.setattr(validation, "device_memory", lambda device=None: 2 * 10**6)
    assert validation.memory_budget() == 10**6
    assert validation.max_replicas(1000.0) == 1000
    assert validation.check_replicas(1000, 1000.0, "x") == 1000
    with pytest.raises(ValueError, match="'seeds'") as error:
        validation.check_replicas(1001, 1000.0, "teql on cartpole")
    message = str(error.value)
    assert "\n" not in message and "at most 1000 fit" in message and "teql on cartpole" in message


def test_device_memory_of_the_machine_and_bad_devices():
    assert validation.device_memory() == validation.device_memory("cpu") > 2**30
    with pytest.raises(ValueError, match="'device'"):
        validation.device_memory("tpu")
    if not _has_cuda():
        with pytest.raises(ValueError, match="'device'"):
            validation.device_memory("cuda:0")


def _has_cuda():
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def _measured(monkeypatch, agent, seeds):
    """Build ``seeds`` replicas of ``agent`` on CartPole; return the bytes per replica of its state.

    That is the last check (the first refuses replicas that would not fit at their overhead).
    """
    seen = []

    def record(replicas, per_replica, what, device=None):
        seen.append(per_replica)
        return validation.check_replicas(replicas, per_replica, what, device)

    monkeypatch.setattr(rl.runs.training, "check_replicas", record)
    runner, _ = build(TrainConfig(env="cartpole", agent=agent, out="unused", seeds=seeds))
    runner.close()
    return seen[-1]


def test_cartpole_teql_fits_100_000_replicas_on_this_machine(monkeypatch):
    per_replica = _measured(monkeypatch, "teql", 65)
    # CP factors of (10, 10, 20, 20, 10) plus sparse visit rows: a few KiB a replica
    assert validation.REPLICA_OVERHEAD_BYTES < per_replica < 64 * 2**10
    assert validation.max_replicas(per_replica) >= 100_000


def test_too_many_replicas_for_the_memory_are_a_config_error(monkeypatch):
    monkeypatch.setattr(validation, "device_memory", lambda device=None: 2 * 2**20)
    with pytest.raises(ConfigError, match="'seeds'") as error:
        build(TrainConfig(env="cartpole", agent="teql", out="unused", seeds=1000))
    assert "\n" not in str(error.value) and "at most" in str(error.value)


@pytest.mark.slow
def test_100_000_cartpole_teql_replicas_start():
    runner, _ = build(TrainConfig(env="cartpole", agent="teql", out="unused", seeds=100_000))
    assert runner.agent.q_.replicas == 100_000
    runner.close()


ARRAY_BACKENDS = [
    pytest.param(b, marks=pytest.mark.skipif(not importlib.util.find_spec(m), reason=f"no {m}"))
    for b, m in (("pytorch", "torch"), ("jax", "jax"))
]


def _array_config(backend, seeds):
    params = {"engine": "array", "backend": backend, "device": "cpu"}
    return TrainConfig(env="cartpole", agent="teql", out="unused", seeds=seeds, agent_params=params)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ARRAY_BACKENDS)
def test_100_000_cartpole_teql_replicas_start_on_the_array_engine(backend):
    """The device visit index is paged: B = 100,000 fits in this machine's memory and plays."""
    runner, _ = build(_array_config(backend, 100_000))
    try:
        episodes = runner.episodes(0, 1, lambda: runner.agent_steps >= 200_000)
        for _ in episodes:
            pass
        assert runner.agent_steps >= 200_000
        table = runner.agent.engine_.visits.table
        assert table.page_of.shape == (100_000, 40_000 // 32)
    finally:
        runner.close()


@pytest.mark.parametrize("backend", ARRAY_BACKENDS)
def test_an_array_visit_table_too_large_is_refused_in_one_line(monkeypatch, backend):
    """The device table is made with the agent, before the engine: building the run refuses it."""
    monkeypatch.setattr(validation, "device_memory", lambda device=None: 2**20)
    with pytest.raises(ValueError, match="'seeds'") as error:
        build(_array_config(backend, 50))  # its table would take 0.6 MB
    message = str(error.value)
    assert "\n" not in message and "visit table" in message, message
