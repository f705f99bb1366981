import pytest


@pytest.fixture(scope="module")
def torch_one_thread():
    """Run a module's PyTorch tests on one thread (faster for tiny networks), then restore."""
    torch = pytest.importorskip("torch")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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
    import dataclasses
    import json

    from rl.checkpoint import load_checkpoint, save_checkpoint
    from rl.config import TrainConfig
    from rl.runner import train

    run_dir = tmp_path / "run"
    config = TrainConfig(
        env="tests.rl.toy_envs:Toy-v0", agent="tabular", out=str(run_dir), episodes=2, eval_every=0
    )
    train(config)
    path = run_dir / "checkpoint.npz"
    checkpoint = load_checkpoint(path)
    recorded = {**checkpoint.config, "env": "payload:Foo-v0"}
    save_checkpoint(path, dataclasses.replace(checkpoint, config=recorded))
    (run_dir / "config.json").write_text(json.dumps(recorded))
    (tmp_path / "payload.py").write_text(PAYLOAD_SOURCE)
    return run_dir, tmp_path / "imported.marker"
