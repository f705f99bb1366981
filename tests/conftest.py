import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60)
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session", autouse=True)
def compiled_kernels():
    """Compile the tensor agents' and the environments' Numba kernels once per session.

    Numba's on-disk cache (``cache=True``) then serves them to the subprocesses
    that CLI tests start, instead of each compiling them again.
    """
    from tests.kernel_warmup import warm_agents, warm_envs, warm_fused

    warm_agents()
    warm_envs()
    warm_fused()


PAYLOAD_SOURCE = """
import pathlib

import gymnasium

pathlib.Path(__file__).with_name("imported.marker").write_text("payload ran")
gymnasium.register("Foo-v0", entry_point="tests.rl.toy_envs:Toy", max_episode_steps=20)
"""


@pytest.fixture
def payload_run(tmp_path):
    """A tabular run recorded on 'payload:Foo-v0', beside a payload.py that leaves a marker.

    Returns (run directory, marker path): importing ``payload`` writes the marker.
    """
    from rl.runs.config import TrainConfig
    from rl.runs.training import train
    from tests.run_records import rewrite_recorded_config

    run_dir = tmp_path / "run"
    config = TrainConfig(
        env="tests.rl.toy_envs:Toy-v0", agent="tabular", out=str(run_dir), episodes=2, eval_every=0
    )
    train(config)
    rewrite_recorded_config(run_dir, lambda recorded: {**recorded, "env": "payload:Foo-v0"})
    (tmp_path / "payload.py").write_text(PAYLOAD_SOURCE)
    return run_dir, tmp_path / "imported.marker"
