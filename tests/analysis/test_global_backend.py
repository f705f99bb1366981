"""analysis, rl.load_run and rl.runs.checkpoint return NumPy whatever TensorLy's global backend."""

import importlib.util

import numpy as np
import pytest
import tensorly as tl
from tensorly.cp_tensor import CPTensor

import rl
from analysis.qstar import qtensor_from_run
from analysis.rank import rank_profile
from analysis.spectral import spectral_energy
from rl.runs.checkpoint import load_checkpoint
from rl.runs.config import TrainConfig
from rl.runs.training import CHECKPOINT_FILE, train

BACKENDS = [
    pytest.param(
        name, marks=pytest.mark.skipif(not importlib.util.find_spec(module), reason=module)
    )
    for name, module in (("numpy", "numpy"), ("pytorch", "torch"), ("jax", "jax"))
]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("global") / "teql"
    train(TrainConfig(env="lowrank", agent="teql", out=str(out), seeds=2, episodes=2, eval_every=0))
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_loading_and_analysis_under_each_global_backend(run_dir, backend):
    with tl.backend_context("numpy"):
        expected = tl.cp_to_tensor(rl.load_run(run_dir).q_tensor(1))
        cp = rl.load_run(run_dir).q_tensor(1)
        spectra = {m: _values(spectral_energy(cp, method=m)) for m in ("dense", "factors")}
    with tl.backend_context(backend):
        checkpoint = load_checkpoint(run_dir / CHECKPOINT_FILE)
        assert all(type(f) is np.ndarray for f in checkpoint.agent_state["factors"])
        loaded = rl.load_run(run_dir)
        assert type(loaded.agent.q_.factors[0]) is np.ndarray  # the agents compute in NumPy
        cp = loaded.q_tensor(1)
        assert isinstance(cp, CPTensor) and all(type(f) is np.ndarray for f in cp.factors)
        states = np.zeros((2, 3), dtype=np.int64)
        assert isinstance(loaded.agent.action_values(states), np.ndarray)
        q = qtensor_from_run(run_dir, replica=1)
        assert type(q.tensor) is np.ndarray
        np.testing.assert_allclose(q.tensor, expected, rtol=1e-12)
        factored = qtensor_from_run(run_dir, replica=1, max_entries=10)
        assert all(type(f) is np.ndarray for f in factored.tensor.factors)
        for method, want in spectra.items():
            got = spectral_energy(cp, method=method)
            assert type(got.weights) is np.ndarray
            for g, w in zip(_values(got), want, strict=True):
                assert type(g) is np.ndarray
                np.testing.assert_allclose(g, w, rtol=1e-12)
        for g, w in zip(_values(spectral_energy(q.tensor)), spectra["dense"], strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
        profile = rank_profile(cp, [1], restarts=1, random_state=0, refine=False)
        assert all(type(f) is np.ndarray for f in profile.fits[0].factors)
    assert tl.get_backend() == "numpy"


def _values(result):
    return [spectrum.singular_values for spectrum in result.modes]
