"""Tests of the stacked pieces of the deep agents: Adam, devices (see rl/agents/_stacked.py)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rl.agents import _stacked as st  # noqa: E402
from rl.agents.dqn import DQNAgent, DQNConfig  # noqa: E402
from rl.agents.sac import DiscreteSACConfig  # noqa: E402
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
    for _ in range(25):
        grads = rng.normal(size=(replicas, size)).astype(np.float32)
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


@pytest.mark.parametrize("config_type", [DQNConfig, DiscreteSACConfig])
@pytest.mark.parametrize("device", ["cpux", "mps", "cpu:1", 3, "cuda:-1"])
def test_bad_device_names_field(config_type, device):
    with pytest.raises(ValueError, match="The 'device' parameter must be cpu, cuda or cuda:N"):
        config_type(device=device)


def test_missing_cuda_device_is_refused():
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    with pytest.raises(ValueError, match=f"this machine has {count} CUDA device"):
        DQNAgent(make_problem((3,), (2,)), DQNConfig(device=f"cuda:{count}"), streams(0))
