"""DQN and discrete SAC on a CUDA device (marker ``gpu``; skipped without one).

Run them with ``bash benchmarks/gpu_check_deep.sh`` on a machine with a GPU.
"""

import dataclasses

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rl.agents.base import Transitions  # noqa: E402
from rl.agents.deep import dqn, sac  # noqa: E402
from tests.rl.agent_drivers import (  # noqa: E402
    assert_tree_equal,
    make_problem,
    random_drive,
    random_drive_single,
    streams,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

SPECS = {
    "dqn": (
        dqn.DQNAgent,
        dqn.DQNConfig(hidden=16, learning_starts=20, batch_size=8, target_update_every=10),
    ),
    "sac": (sac.DiscreteSAC, sac.DiscreteSACConfig(hidden=16, learning_starts=20, batch_size=8)),
}


@pytest.fixture(params=sorted(SPECS))
def spec(request):
    agent_class, config = SPECS[request.param]
    return agent_class, config


def _tensors(agent):
    found = [value for value in vars(agent).values() if isinstance(value, torch.Tensor)]
    found.append(agent.buffer.records)
    for value in vars(agent).values():
        if hasattr(value, "exp_avg"):
            found += [value.exp_avg, value.exp_avg_sq, value.params]
    return found


def test_every_tensor_stays_on_the_device_and_checkpoints_cross_devices(spec):
    agent_class, config = spec
    problem = make_problem((3, 4), (3,))
    gpu = agent_class(problem, dataclasses.replace(config, device="cuda"), streams(1, 2))
    random_drive(gpu, 60, seed=0)
    assert all(t.device.type == "cuda" for t in _tensors(gpu))
    saved = gpu.state_dict()
    cpu = agent_class(problem, config, streams(5, 6))
    cpu.load_state_dict(saved)
    assert_tree_equal(cpu.state_dict(), saved)
    back = agent_class(problem, dataclasses.replace(config, device="cuda"), streams(7, 8))
    back.load_state_dict(cpu.state_dict())
    assert_tree_equal(back.state_dict(), saved)
    assert all(t.device.type == "cuda" for t in _tensors(back))


def test_one_update_on_cuda_matches_the_cpu_to_rounding(spec):
    """From the same state, one act + observe on both devices: parameters agree to 1e-5."""
    agent_class, config = spec
    problem = make_problem((3, 4), (3,))
    cpu = agent_class(problem, config, streams(*range(7)))
    random_drive(cpu, 60, seed=0)
    gpu = agent_class(problem, dataclasses.replace(config, device="cuda"), streams(*range(7)))
    gpu.load_state_dict(cpu.state_dict())
    rng = np.random.default_rng(1)
    states = rng.integers(0, [3, 4], size=(7, 2))
    active = np.ones(7, bool)
    actions = cpu.greedy(states)
    batch = Transitions(states, actions, rng.normal(size=7), states, np.zeros(7, bool), active)
    for agent in (cpu, gpu):
        agent.observe(batch)
    first = "q" if agent_class is dqn.DQNAgent else "actor"
    worst = 0.0
    for a, b in zip(cpu.state_dict()["replicas"], gpu.state_dict()["replicas"], strict=True):
        for key, value in a[first].items():
            worst = max(worst, float(np.abs(value - b[first][key]).max()))
    print(f"max |cpu - cuda| of {first} after one update: {worst:.2e}")
    assert worst < 1e-5


def test_a_seed_alone_and_among_seven_on_cuda_agree_to_rounding(spec):
    """cuBLAS may order a batched product's sums by batch size: equal to rounding, not bitwise."""
    agent_class, config = spec
    problem = make_problem((3, 4), (3,))
    device = dataclasses.replace(config, device="cuda")
    among = agent_class(problem, device, streams(*range(10, 17)))
    alone = agent_class(problem, device, streams(13))
    random_drive(among, 40, seed=4)
    random_drive_single(alone, 40, seed=4, replica=3, mask=lambda t: np.ones(7, bool), replicas=7)
    first = "q" if agent_class is dqn.DQNAgent else "actor"
    a = among.state_dict()["replicas"][3][first]
    b = alone.state_dict()["replicas"][0][first]
    worst = max(float(np.abs(a[key] - b[key]).max()) for key in a)
    print(f"max |among 7 - alone| of {first} on cuda after 40 steps: {worst:.2e}")
    assert worst < 1e-4
